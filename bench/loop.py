#!/usr/bin/env python3
"""The loop's latencies with the real `claude` binary against the scripted model.

Everything real on this machine: the fake GitHub, the App (SQLite, inbox worker, spawner
API), a spawner (in this process, its own tmux socket) launching the real `claude` with the
product's stop gate, and tests/fakes/anthropic.py as the model. For each of --items issues,
released one after the other:

- execute → first model request: the execute webhook sent (once the App has handled the
  issue's label, as it has by the time a person writes the execute) → the session's first
  main request reaches the scripted server;
- stop-gate block → next model request: the request whose answer ended the turn → the
  harness's next request, carrying the gate's reason (the gate is the product's managed,
  read-only hook, which nothing in a session may wrap, so its own exit is not timed);
- follow-up → seen by the model: --followups comments per session, each from the webhook
  being sent to the request that carries its text;
- review comment → seen by the model: a pull request opened by hand from the item's work
  branch (`pull_request.opened`, which links it), then --reviews review comments on a line
  of it, each from the webhook to the request that carries its text.

Beside it, `claude` alone: started directly in tmux (same HOME and environment) → its first
main request, --items times. Targets: execute → first request p50 ≤ 1 s above claude's own
start-up; follow-up → seen p50 ≤ 1 s; review comment → seen p50 ≤ 1 s. Times use
CLOCK_MONOTONIC (system-wide on Linux).
Sessions run in the sandbox with `--network` (default `gateways`: a network of their own, the
App and the model gateway relayed in; `host`: the devbox's).

`--harness codex` runs the same loop on the real `codex` binary against the scripted
Responses API (tests/fakes/responses_api.py), the execute ticking `harness-codex`. Beside it,
`codex` alone: started in tmux with its own CODEX_HOME pointing straight at the scripted
model → its first main request. Target: execute → first request p50 ≤ codex's own start
+ 0.3 s.
Usage: bench/loop.py [--harness claude|codex] [--items N] [--followups N] [--reviews N]
       [--network gateways|host]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from loopkit import (  # noqa: E402
    REPO,
    SECRET,
    StageRunner,
    comment_payload,
    issue_payload,
    pull_opened,
    review_comment,
    send,
    stage_summary,
)
from spawnerkit import percentile, summary  # noqa: E402

from app.config.operator_config import parse_config  # noqa: E402
from app.config.process_settings import load_settings  # noqa: E402
from app.gateway.access import open_model_access, without_credentials  # noqa: E402
from app.runtime.flask_app import create_app  # noqa: E402
from app.spawner.agent import Agent, AgentOptions  # noqa: E402
from app.spawner.appclient import AppClient  # noqa: E402
from app.spawner.context import SpawnerContext  # noqa: E402
from app.spawner.eventqueue import SpawnerEvents  # noqa: E402
from app.spawner.registry import Registry  # noqa: E402
from app.spawner.session.tmux import TmuxRunner  # noqa: E402
from app.store.tables import Delivery, InboxState  # noqa: E402
from tests.claude_support import (  # noqa: E402
    DUMMY_KEY,
    approve_key,
    claude_env,
    prepare_home,
)
from tests.codex_support import codex_binary, codex_upstream_env  # noqa: E402
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, bash, contains  # noqa: E402
from tests.fakes.github_api import FakeGitHub, generate_private_key_pem  # noqa: E402
from tests.fakes.responses_api import FakeResponses, exec_command  # noqa: E402
from tests.fakes.server import LiveServer  # noqa: E402
from tests.spawner_support import bare_repository  # noqa: E402

EXECUTE = (
    "the-loop execute\n- [ ] requirements-definition\n- [ ] test-planning\n- [ ] tasks-breakdown\n"
)
P50_ABOVE_CLAUDE = 1.0
P50_ABOVE_CODEX = 0.3
CODEX_MODEL = "scripted-model"  # a name codex does not know: its generic exec_command tool
P50_FOLLOWUP = 1.0
P50_REVIEW = 1.0


def handled(engine: Engine, delivery: str, timeout: float = 60.0) -> None:
    """Wait until the App has handled delivery `delivery`: the label a person adds before
    writing the execute is not part of the execute's time."""
    deadline = time.monotonic() + timeout
    query = select(Delivery.state).where(Delivery.delivery_id == delivery)
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            if conn.execute(query).scalar() == InboxState.DONE:
                return
        time.sleep(0.01)
    raise AssertionError(f"delivery {delivery} was not handled in {timeout:g} s")


def codex_alone(home: Path, workdir: Path, base_url: str) -> dict[str, str]:
    """A CODEX_HOME of its own for codex started by hand: the scripted model as provider,
    the workdir trusted, nothing outbound; returns the environment it needs."""
    from app.spawner.harness.codex_config import CodexSetup, session_config

    (home / ".codex").mkdir(parents=True)
    setup = CodexSetup(base_url.removesuffix("/v1"), str(workdir.resolve()), "true", {})
    text = session_config(setup).replace(
        "model_provider", f'model = "{CODEX_MODEL}"\nmodel_provider', 1
    )
    (home / ".codex" / "config.toml").write_text(text)
    return {"HOME": str(home), "CODEX_HOME": str(home / ".codex"), "THE_LOOP_MODEL_PASS": "x"}


def shown(text: str, *, main: bool = False, after: float | None = None) -> Callable[[Any], bool]:
    """A predicate on the scripted model's requests: `text` was in the turn it was shown (in
    the main conversation only with `main`, and only later than `after`)."""

    def check(request: Any) -> bool:
        if main and request.kind != "main":
            return False
        return text in request.turn.text and (after is None or request.at > after)

    return check


def main() -> int:
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=5)
    parser.add_argument("--followups", type=int, default=4)
    parser.add_argument("--reviews", type=int, default=3)
    parser.add_argument(
        "--network",
        choices=("gateways", "host"),
        default="gateways",
        help="routing.sandbox.network",
    )
    parser.add_argument("--harness", choices=("claude", "codex"), default="claude")
    args = parser.parse_args()
    codex = args.harness == "codex"
    shell = exec_command if codex else bash
    execute = EXECUTE.replace("the-loop execute\n", "the-loop execute\n- [x] harness-codex\n")
    execute = execute if codex else EXECUTE
    work = Path(tempfile.mkdtemp(prefix="bench-loop-"))
    home = work / "home"
    home.mkdir()
    os.environ["HOME"] = str(home)
    key_pem = generate_private_key_pem()
    fake = FakeGitHub(app_id=4242, private_key_pem=key_pem)
    fake.grant(REPO, "Codertocat", "write")
    origin = bare_repository(work)
    model = FakeResponses().start() if codex else FakeAnthropic().start()
    from app.spawner.harness.claude_trust import claude_config_path, update_json_file

    update_json_file(claude_config_path(home), lambda d: approve_key(d, DUMMY_KEY))
    env = {
        **claude_env(model.url, home),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    harnesses = [
        {
            "name": "claude",
            "default": True,
            "command": "claude",
            "args": ["--dangerously-skip-permissions"],
        }
    ]
    if codex:
        env.update(codex_upstream_env(model.url + "/v1"))
        harnesses.append({"name": "codex", "command": codex_binary()})
        (home / ".codex").mkdir()
        (home / ".codex" / "config.toml").write_text(f'model = "{CODEX_MODEL}"\n')
    config = {
        "harnesses": harnesses,
        "routing": {
            "workspace": {"root": str(work / "checkouts")},
            "sandbox": {"network": args.network},
        },
    }
    (work / "cli-config.yaml").write_text(json.dumps(config))
    execute_times, block_times, followup_times, alone_times = [], [], [], []
    stages: list[list[float]] = []
    review_times: list[float] = []
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

        from app.fleet.tokens import create_token

        with state.sessions() as session, session.begin():
            token = create_token(session, "bench", [REPO])
        with LiveServer(app) as server:
            client = AppClient(server.url, token)
            runner = StageRunner(f"bench-loop-{uuid.uuid4().hex[:6]}", env=env, size=(160, 50))
            ctx = SpawnerContext(
                config=parse_config(config),
                runner=runner,
                registry=Registry(work / "devbox-state" / "sessions.json"),
                events=(events := SpawnerEvents(work / "devbox-state", client)),
                home=home,
                state_dir=work / "devbox-state",
                app_url=server.url,
                hosts=frozenset({"claude", "codex"} if codex else {"claude"}),
                env=without_credentials(env),
                models=open_model_access(parse_config(config), env, events.emit),
            )
            agent = Agent(ctx, client, AgentOptions(name="bench", wait=2, watchdog_interval=1))
            thread = threading.Thread(target=agent.run, daemon=True)
            thread.start()
            try:
                for number in range(1, args.items + 1):
                    model.add(
                        Step(
                            contains(f"/issues/{number}:", "the-loop phase next"),
                            Reply("I will stop now."),
                        ),
                        Step(
                            contains("design step is not complete"),
                            Reply(
                                "Writing it.",
                                (
                                    shell(
                                        f"mkdir -p docs/specs/issue-{number} && echo x > "
                                        f"docs/specs/issue-{number}/design.md && the-loop "
                                        "phase next"
                                    ),
                                ),
                            ),
                        ),
                        Step(contains("Moved from design to implementation"), Reply("Waiting.")),
                    )
                    label = str(uuid.uuid4())
                    send(server.url, "issues", issue_payload(number, origin, True), label)
                    handled(state.engine, label)
                    sent = send(
                        server.url, "issue_comment", comment_payload(number, origin, execute)
                    )
                    first = model.wait_for_request(shown(f"/issues/{number}:", main=True), 120)
                    execute_times.append(first.at - sent)
                    stages.append(runner.stages(number, sent, first.at))
                    blocked = model.wait_for_request(
                        shown("design step is not complete", main=True, after=first.at),
                        120,
                    )
                    ended = max(r.at for r in model.main_requests() if r.at < blocked.at)
                    block_times.append(blocked.at - ended)  # from the turn-ending request
                    model.wait_for_request(
                        shown("Moved from design to implementation", main=True, after=blocked.at),
                        120,
                    )
                    time.sleep(2.0)  # the turn has ended; the session waits for input
                    for k in range(args.followups):
                        text = f"bench follow-up {number}.{k}: also handle the empty list"
                        model.add(Step(contains(text), Reply("Noted.")))
                        sent = send(
                            server.url, "issue_comment", comment_payload(number, origin, text)
                        )
                        seen = model.wait_for_request(shown(text), 60)
                        followup_times.append(seen.at - sent)
                        time.sleep(1.5)  # let the answer's turn end before the next paste
                    send(server.url, "pull_request", pull_opened(number, origin))
                    for k in range(args.reviews):
                        text = f"bench review {number}.{k}: say hello to the whole world here"
                        model.add(Step(contains(text), Reply("Noted.")))
                        sent = send(
                            server.url,
                            "pull_request_review_comment",
                            review_comment(number, text),
                        )
                        seen = model.wait_for_request(shown(text), 60)
                        review_times.append(seen.at - sent)
                        time.sleep(1.5)
            finally:
                agent.stop.set()
                thread.join(timeout=30)
                if ctx.models is not None:
                    ctx.models.close()
                client.close()
                runner.kill_server()
                if ctx.limiter is not None:  # the sessions' cgroups end with the bench
                    ctx.limiter.release()
        state.close()
    alone = TmuxRunner(f"bench-alone-{uuid.uuid4().hex[:6]}", env=env, size=(160, 50))
    try:
        for index in range(args.items):
            workdir = work / f"alone-{index}"
            own_home = work / f"alone-home-{index}"
            workdir.mkdir()
            marker = f"alone run {index}"
            model.add(Step(contains(marker), Reply("Hello.")))
            if codex:
                own_env = codex_alone(own_home, workdir, model.url + "/v1")
                argv = [codex_binary(), "--no-daemon", "--dangerously-bypass-hook-trust", marker]
            else:
                prepare_home(own_home, workdir)
                own_env = {"HOME": str(own_home)}
                argv = [
                    "claude",
                    "--session-id",
                    str(uuid.uuid4()),
                    "--dangerously-skip-permissions",
                    marker,
                ]
            started = time.monotonic()
            alone.start(
                f"alone-{index}", workdir, argv, env={**env, **own_env}, owner=f"alone-{index}"
            )
            try:
                seen = model.wait_for_request(shown(marker), 120)
            except AssertionError:
                print(alone.capture(f"alone-{index}", history=50), file=sys.stderr)
                raise
            alone_times.append(seen.at - started)
            alone.kill(f"alone-{index}", owner=f"alone-{index}")
    finally:
        alone.kill_server()
        model.stop()
    print(summary(f"{args.harness} alone: start → first model request", alone_times))
    print(summary("execute → first model request", execute_times))
    print(stage_summary(stages))
    print(summary("stop-gate block → next model request", block_times))
    print(summary("follow-up → seen by the model", followup_times))
    if review_times:
        print(summary("review comment → seen by the model", review_times))
    above = percentile(execute_times, 0.5) - percentile(alone_times, 0.5)
    allowed = P50_ABOVE_CODEX if codex else P50_ABOVE_CLAUDE
    ok_execute = above <= allowed
    ok_followup = percentile(followup_times, 0.5) <= P50_FOLLOWUP
    print(
        f"execute p50 above {args.harness}'s own start-up: {above * 1000:.0f} ms "
        f"(target ≤ {allowed * 1000:.0f} ms): {'met' if ok_execute else 'MISSED'}"
    )
    print(
        f"follow-up p50 target ≤ {P50_FOLLOWUP * 1000:.0f} ms: {'met' if ok_followup else 'MISSED'}"
    )
    ok_review = not review_times or percentile(review_times, 0.5) <= P50_REVIEW
    print(f"review p50 target ≤ {P50_REVIEW * 1000:.0f} ms: {'met' if ok_review else 'MISSED'}")
    return 0 if ok_execute and ok_followup and ok_review else 1


if __name__ == "__main__":
    sys.exit(main())
