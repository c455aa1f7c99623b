"""`the-loop up` runs a local spawner beside the App, with a token minted in the local store
and reused on the next start."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
from pathlib import Path

import httpx
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from app.commands.local_spawner import local_token, local_url
from app.config.process_settings import load_settings
from app.store.tables import Spawner
from tests.support import free_port, start_the_loop, wait_for, wait_serving

ROOT = Path(__file__).resolve().parents[2]
CANARY_KEY = "sk-ant-api03-CANARY-up-spawner-key-0000000000"


def test_up_starts_a_local_spawner_that_registers_with_the_app(tmp_path: Path) -> None:
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "THE_LOOP_", "DATABASE_URL", "TMUX"))
    }
    env.update({"PORT": str(port), "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})
    env["ANTHROPIC_API_KEY"] = CANARY_KEY
    log = tmp_path / "up.log"
    proc = start_the_loop(["up"], tmp_path, env, log)
    state = tmp_path / ".local/state/the-loop"
    try:
        wait_serving(f"http://127.0.0.1:{port}", proc, log, timeout=40)
        events = state / "events.jsonl"
        registered = wait_for(lambda: _events(events, "spawner.registered"), timeout=40)
        assert registered[0]["spawner"] == "local"
        token_file = state / "spawner" / "local-spawner.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert token not in events.read_text()
        # Its model gateway listens, keeps no key on disk, and takes no unknown pass.
        saved = (state / "spawner" / "gateway.json").read_text()
        assert CANARY_KEY not in saved
        refused = httpx.post(
            f"http://127.0.0.1:{json.loads(saved)['port']}/v1/messages",
            headers={"x-api-key": CANARY_KEY},
            json={},
            timeout=30,
        )
        assert refused.status_code == 401
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:  # the App drains in-flight long-polls for its graceful timeout; no need to wait
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_the_local_token_is_reused_while_the_store_knows_it(tmp_path: Path) -> None:
    settings = load_settings({"THE_LOOP_STATE_DIR": str(tmp_path), "PORT": "4321"}, dotenv=None)
    first = local_token(settings)
    assert local_token(settings) == first
    engine = create_engine(settings.database_url)
    with Session(engine) as session:
        assert [s.name for s in session.scalars(select(Spawner))] == ["local"]
    engine.dispose()


def test_the_local_url_follows_the_bind_address() -> None:
    settings = load_settings({"PORT": "4321"}, dotenv=None)

    class Args:
        bind: str | None = None

    assert local_url(Args(), settings) == "http://127.0.0.1:4321"
    Args.bind = "0.0.0.0:8080"
    assert local_url(Args(), settings) == "http://127.0.0.1:8080"


def _events(path: Path, name: str) -> list[dict[str, object]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("event") == name]
