#!/usr/bin/env python3
"""Stalls seen and answered, with the real `claude` binary against the scripted model.

The fake GitHub, the App (SQLite, inbox worker, spawner API) and a spawner in this process
with the production watchdog interval; Claude Code in the default permission mode, so each
scripted `Write` call puts a real permission dialog on screen. For each of --dialogs calls:

- screen appears → `session.stalled` recorded by the App: this script watches the pane
  itself (every 20 ms) for the dialog, then the App's events table for the report;
- answer pressed → pane moved: the spawner's own measure (`session.answered.seconds`, from
  its key press to the pane no longer showing the question);
- `the-loop answer 1` webhook sent → `session.answered` at the App, end to end.

Targets: screen → stalled p99 ≤ 10 s; pressed → moved p50 ≤ 1 s.
Usage: bench/answer.py [--dialogs N]
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from spawnerkit import percentile, summary  # noqa: E402
from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from app.config.operator_config import parse_config  # noqa: E402
from app.config.process_settings import load_settings  # noqa: E402
from app.fleet.tokens import create_token  # noqa: E402
from app.gateway.access import open_model_access, without_credentials  # noqa: E402
from app.runtime.flask_app import create_app  # noqa: E402
from app.spawner.agent import Agent, AgentOptions  # noqa: E402
from app.spawner.appclient import AppClient  # noqa: E402
from app.spawner.context import SpawnerContext  # noqa: E402
from app.spawner.eventqueue import SpawnerEvents  # noqa: E402
from app.spawner.harness.claude_trust import claude_config_path, update_json_file  # noqa: E402
from app.spawner.registry import Registry  # noqa: E402
from app.spawner.session.dialogs import parse_dialog  # noqa: E402
from app.spawner.session.tmux import TmuxRunner  # noqa: E402
from app.store.tables import Event  # noqa: E402
from tests.claude_support import DUMMY_KEY, approve_key, claude_env  # noqa: E402
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, contains, tool_result_for  # noqa: E402
from tests.fakes.github_api import FakeGitHub, generate_private_key_pem  # noqa: E402
from tests.fakes.model_script import write  # noqa: E402
from tests.fakes.server import LiveServer  # noqa: E402
from tests.spawner_support import bare_repository  # noqa: E402
from tests.support import fixture_json, post_webhook, with_installation  # noqa: E402

REPO = "Codertocat/Hello-World"
ITEM = f"github:{REPO}#1"
SECRET = "bench-answer-secret"
EXECUTE = (
    "the-loop execute\n- [ ] requirements-definition\n- [ ] design\n- [ ] test-planning\n"
    "- [ ] tasks-breakdown\n"
)
P99_STALLED = 10.0
P50_MOVED = 1.0


def payload(event: str, origin: Path, body: str = "") -> dict:
    name = "issues.labeled.json" if event == "issues" else "issue_comment.created.json"
    data = with_installation(copy.deepcopy(fixture_json(f"github/{name}")))
    data["repository"]["clone_url"] = str(origin)
    if event == "issues":
        data["label"]["name"] = "the-loop: auto-execute"
    else:
        data["comment"].update(body=body, id=int(uuid.uuid4().int % 10**9))
        data["comment"]["user"]["login"] = "Codertocat"
    return data


def send(url: str, event: str, data: dict) -> float:
    sent = time.monotonic()
    response = post_webhook(url, event, data, secret=SECRET)
    assert response.status_code == 202, response.text
    return sent


def events(engine, name: str) -> list[dict]:
    with Session(engine) as session:
        rows = session.scalars(select(Event).where(Event.event == name).order_by(Event.id))
        return [dict(r.data or {}) for r in rows]


def wait(predicate, timeout: float, every: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError("the condition did not hold in time")


def main() -> int:
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dialogs", type=int, default=10)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-answer-"))
    home = work / "home"
    home.mkdir()
    os.environ["HOME"] = str(home)
    key_pem = generate_private_key_pem()
    fake = FakeGitHub(app_id=4242, private_key_pem=key_pem)
    fake.grant(REPO, "Codertocat", "write")
    origin = bare_repository(work)
    steps = [Step(contains("Work on the GitHub issue"), Reply("1", (write("f0.txt", "0\n"),)))]
    for k in range(1, args.dialogs):
        steps.append(
            Step(
                tool_result_for("Write", f"f{k - 1}.txt"),
                Reply(str(k), (write(f"f{k}.txt", f"{k}\n"),)),
            )
        )
    steps.append(Step(tool_result_for("Write"), Reply("All written.")))
    model = FakeAnthropic(steps).start()
    update_json_file(claude_config_path(home), lambda d: approve_key(d, DUMMY_KEY))
    env = {
        **claude_env(model.url, home),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    config = {
        "harnesses": [
            {
                "name": "claude",
                "default": True,
                "command": "claude",
                "args": ["--permission-mode", "default"],
            }
        ],
        "routing": {"workspace": {"root": str(work / "checkouts")}},
    }
    (work / "cli-config.yaml").write_text(json.dumps(config))
    stalled_times, moved_times, end_to_end = [], [], []
    with LiveServer(fake.wsgi()) as github:
        settings = load_settings(
            {
                "GITHUB_APP_ID": "4242",
                "GITHUB_PRIVATE_KEY": key_pem,
                "GITHUB_WEBHOOK_SECRET": SECRET,
                "GITHUB_API_URL": github.url,
                "DATABASE_URL": f"sqlite:///{work / 'app.db'}",
                "THE_LOOP_STATE_DIR": str(work / "state"),
                "THE_LOOP_CONFIG": str(work / "cli-config.yaml"),
            },
            dotenv=None,
        )
        app = create_app(settings)
        state = app.extensions["the-loop"]
        with state.sessions() as session, session.begin():
            token = create_token(session, "bench", [REPO])
        with LiveServer(app) as server:
            client = AppClient(server.url, token)
            runner = TmuxRunner(f"bench-answer-{uuid.uuid4().hex[:6]}", env=env, size=(120, 36))
            ctx = SpawnerContext(
                config=parse_config(config),
                runner=runner,
                registry=Registry(work / "spawner" / "sessions.json"),
                events=(spawner_events := SpawnerEvents(work / "spawner", client)),
                home=home,
                state_dir=work / "spawner",
                app_url=server.url,
                hosts=frozenset({"claude"}),
                env=without_credentials(env),
                models=open_model_access(parse_config(config), env, spawner_events.emit),
            )
            agent = Agent(ctx, client, AgentOptions(name="bench", wait=2))  # production watchdog
            thread = threading.Thread(target=agent.run, daemon=True)
            thread.start()
            try:
                send(server.url, "issues", payload("issues", origin))
                send(server.url, "issue_comment", payload("issue_comment", origin, EXECUTE))
                record = wait(lambda: ctx.registry.get(ITEM), 120)
                seen: set[str] = set()
                for k in range(args.dialogs):

                    def dialog(k: int = k):
                        found = parse_dialog(runner.capture(record.tmux_session))
                        return (
                            found
                            if found
                            and found.fingerprint not in seen
                            and f"f{k}.txt" in found.question
                            else None
                        )

                    shown = wait(dialog, 120)
                    appeared = time.monotonic()
                    seen.add(shown.fingerprint)
                    wait(
                        lambda fp=shown.fingerprint: any(
                            e.get("fingerprint") == fp
                            for e in events(state.engine, "session.stalled")
                        ),
                        60,
                    )
                    stalled_times.append(time.monotonic() - appeared)
                    before = len(events(state.engine, "session.answered"))
                    sent = send(
                        server.url,
                        "issue_comment",
                        payload("issue_comment", origin, "the-loop answer 1"),
                    )
                    answered = wait(
                        lambda b=before: events(state.engine, "session.answered")[b:], 60
                    )[0]
                    end_to_end.append(time.monotonic() - sent)
                    moved_times.append(float(answered["seconds"]))
                    if not answered.get("moved"):
                        print(f"dialog {k}: the pane did not move", file=sys.stderr)
            finally:
                agent.stop.set()
                thread.join(timeout=30)
                if ctx.models is not None:
                    ctx.models.close()
                client.close()
                runner.kill_server()
                if ctx.limiter is not None:  # the sessions' cgroups end with the bench
                    ctx.limiter.release()
                model.stop()
        state.close()
    print(summary("screen appears → session.stalled at the App", stalled_times))
    print(summary("answer pressed → pane moved", moved_times))
    print(summary("`the-loop answer 1` webhook → session.answered at the App", end_to_end))
    ok_stalled = percentile(stalled_times, 0.99) <= P99_STALLED
    ok_moved = percentile(moved_times, 0.5) <= P50_MOVED
    print(f"stalled p99 target ≤ {P99_STALLED:.0f} s: {'met' if ok_stalled else 'MISSED'}")
    print(f"moved p50 target ≤ {P50_MOVED * 1000:.0f} ms: {'met' if ok_moved else 'MISSED'}")
    return 0 if ok_stalled and ok_moved else 1


if __name__ == "__main__":
    sys.exit(main())
