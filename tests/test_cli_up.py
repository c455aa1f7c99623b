"""The README's first command on a fresh directory: `the-loop up` answers a signed ping and
refuses a forged one, on its embedded SQLite default."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from dotenv import dotenv_values

from tests.support import fixture_bytes, free_port, post_webhook, wait_for

ROOT = Path(__file__).resolve().parents[1]


def test_up_on_a_fresh_directory(tmp_path):
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "THE_LOOP_", "DATABASE_URL"))
    }
    env.update({"PORT": str(port), "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "up", "--no-spawner"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(url), timeout=30)
        secret = dotenv_values(tmp_path / ".env")["GITHUB_WEBHOOK_SECRET"]
        assert secret and len(secret) == 64
        ping = fixture_bytes("github/ping.json")
        assert post_webhook(url, "ping", ping, secret=secret).status_code == 200
        assert post_webhook(url, "ping", ping, secret="forged").status_code == 401
        assert (tmp_path / ".local/state/the-loop/the-loop.db").exists()
        events = (tmp_path / ".local/state/the-loop/events.jsonl").read_text()
        assert '"webhook.rejected"' in events
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out = proc.communicate(timeout=20)[0].decode()
    assert "wrote a new GITHUB_WEBHOOK_SECRET" in out


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
