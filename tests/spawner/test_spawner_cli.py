"""The devbox commands as an operator and an agent run them: real processes, real tmux,
the real App for `comment`/`ask` and `spawner token create`."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from app.audit import read_jsonl
from app.cli import main
from app.fleet.tokens import hash_token, mint_session_token
from app.gate.markers import MarkerKind, find_marker
from app.spawner.harness.claude import DENY_TOKEN
from app.spawner.registry import Registry, SessionRecord
from app.spawner.session.tmux import TmuxRunner
from app.store.tables import Spawner
from app.workitems.flow.offers import refused_choices
from tests.fakes.anthropic import FakeAnthropic
from tests.spawner_support import StandIn, ask_model, gateway_url, spawner_process
from tests.spawnerapi_support import Api, serve_api
from tests.support import wait_for

FLAG = "--dangerously-skip-permissions"
ROOT = Path(__file__).resolve().parents[2]

FAKE_CLAUDE = r"""#!{python}
import json, sys
with open({log!r}, "a") as fh:
    fh.write(json.dumps(sys.argv) + "\n")
args = sys.argv[1:]
if "bogus" in args:
    print("Warning: Unknown --effort value 'bogus' — ignoring it. Valid values: low, medium, high")
    sys.exit(0)
if "sonnet" in args:
    print("Not logged in · Please run /login")
    sys.exit(1)
print("OK")
"""


def the_loop(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`the-loop …` as its own process (what an agent inside a session runs)."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def cli(
    spawner_cli_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`the-loop …` in this process, with the test's environment (faster than a process)."""
    for key, value in spawner_cli_env.items():
        monkeypatch.setenv(key, value)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        code = main(list(args))
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out.out, out.err)

    return run


@pytest.fixture
def spawner_cli_env(tmp_path: Path, home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "THE_LOOP_STATE_DIR": str(tmp_path / "state"),
        "THE_LOOP_CONFIG": str(tmp_path / "cli-config.yaml"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'app.db'}",
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "250",
    }


def write_config(env: dict[str, str], data: dict[str, Any]) -> None:
    Path(env["THE_LOOP_CONFIG"]).write_text(json.dumps(data))


def test_token_create_prints_a_token_stored_only_as_its_hash(
    spawner_cli_env: dict[str, str],
) -> None:
    out = the_loop(spawner_cli_env, "spawner", "token", "create", "--name", "box", "--repo", "o/r")
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    assert token.startswith("tlsp_") and "shown once" in out.stderr
    engine = create_engine(spawner_cli_env["DATABASE_URL"])
    with Session(engine) as session:
        (spawner,) = session.scalars(select(Spawner)).all()
        assert spawner.name == "box" and spawner.repositories == ["o/r"]
        assert spawner.token_hash == hash_token(token) and token not in json.dumps(
            [spawner.token_hash, spawner.repositories]
        )
    engine.dispose()
    bad = the_loop(spawner_cli_env, "spawner", "token", "create", "--name", "no good")
    assert bad.returncode == 2 and "not a valid spawner name" in bad.stderr


def test_models_check_probes_with_the_session_base_args_caches_and_records(
    spawner_cli_env: dict[str, str],
    tmp_path: Path,
    cli: Any,
    comments_api: Api,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "probes.log"
    fake = tmp_path / "fake-claude"
    fake.write_text(FAKE_CLAUDE.format(python=sys.executable, log=str(log)))
    fake.chmod(0o755)
    write_config(
        spawner_cli_env,
        {
            "harnesses": [{"name": "claude", "command": str(fake), "args": [FLAG, "--verbose"]}],
            "models": [{"name": "opus"}, {"name": "sonnet"}],
            "effort": ["high", "bogus"],
            "routing": {"harnessArgs": {"claude": ["--ignored"]}},
        },
    )
    unrecorded = cli("models", "check", "--json", "--record")
    assert unrecorded.returncode == 2 and "THE_LOOP_SPAWNER_TOKEN" in unrecorded.stderr
    monkeypatch.setenv("THE_LOOP_URL", comments_api.url)
    monkeypatch.setenv("THE_LOOP_SPAWNER_TOKEN", comments_api.token("prober", ["*"]))
    first = cli("models", "check", "--json", "--record", "--fresh")
    assert first.returncode == 1, first.stderr  # a choice was refused
    assert "harnesses[].args wins" in first.stderr
    verdicts = {v["name"]: v["verdict"] for v in map(json.loads, first.stdout.splitlines())}
    assert verdicts == {"opus": "ok", "sonnet": "unknown", "high": "ok", "bogus": "refused"}
    probes = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(probes) == 4  # the run without a token probed nothing
    for argv in probes:
        assert argv[1:5] == ["-p", argv[2], FLAG, "--verbose"] and DENY_TOKEN not in argv
        assert "--ignored" not in argv
    again = cli("models", "check", "--json")
    assert len(log.read_text().splitlines()) == 4  # served from the cache
    assert all(json.loads(line)["cached"] for line in again.stdout.splitlines())
    listing = cli("models", "list")
    assert (
        listing.returncode == 0 and "effort-bogus" in listing.stdout and "refused" in listing.stdout
    )
    # The App (not this devbox) recorded the verdicts, through its API.
    assert not Path(spawner_cli_env["DATABASE_URL"].removeprefix("sqlite:///")).exists()
    with comments_api.session() as session:
        assert refused_choices(session) == {"effort-bogus"}


def test_sessions_shows_what_was_launched_and_what_tmux_says(tmp_path: Path, cli: Any) -> None:
    registry = Registry(tmp_path / "state" / "spawner" / "sessions.json")
    registry.put(
        SessionRecord(
            work_item_id="github:o/r#7",
            harness="claude",
            model="opus",
            effort="high",
            harness_args=[FLAG, "--model", "opus"],
            session_id="3f0c3a36",
            tmux_session="o-r-7",
            tmux_target="x:o-r-7",
            checkout="/w/o-r-7",
            interaction="work-item",
        )
    )
    out = cli("sessions", "--tmux-socket", f"none-{uuid.uuid4().hex[:6]}", "--json")
    (row,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert row["work_item_id"] == "github:o/r#7" and row["pane"] == "gone"
    table = cli("sessions", "--tmux-socket", f"none-{uuid.uuid4().hex[:6]}")
    assert "github:o/r#7" in table.stdout and "--model opus" in table.stdout


@pytest.fixture
def socket_name() -> Iterator[str]:
    name = f"the-loop-test-{uuid.uuid4().hex[:8]}"
    yield name
    TmuxRunner(name).kill_server()


CANARY_KEY = "sk-ant-api03-CANARY-operator-key-in-the-spawner-env-000"


def test_standing_sessions_are_launched_by_the_running_spawner_with_a_pass_of_its_gateway(
    spawner_cli_env: dict[str, str],
    tmp_path: Path,
    standin: StandIn,
    socket_name: str,
    cli: Any,
    comments_api: Api,
) -> None:
    ops = tmp_path / "ops"
    ops.mkdir()
    write_config(
        spawner_cli_env,
        {
            "harnesses": [{"name": "claude", "command": str(standin.path), "args": [FLAG]}],
            "routing": {"sandbox": {**standin.sandbox, "network": "host"}},
            "standingSessions": {
                "sessions": [
                    {"name": "supervisor", "cwd": str(ops), "prompt": "watch the fleet"},
                    {"name": "bare", "cwd": str(ops), "harnessArgs": []},
                ]
            },
        },
    )
    key = f"standing-{ops}"
    # No spawner: nothing is started, and the operator is told how to start one.
    alone = cli("standing", "--tmux-socket", socket_name, "start", "supervisor")
    assert alone.returncode == 2 and "no spawner is running" in alone.stderr
    assert "the-loop spawner" in alone.stderr and standin.starts(key) == []

    state = Path(spawner_cli_env["THE_LOOP_STATE_DIR"]) / "spawner"
    with FakeAnthropic([]) as model:
        daemon = {
            **spawner_cli_env,
            "THE_LOOP_URL": comments_api.url,
            "THE_LOOP_SPAWNER_TOKEN": comments_api.token("standing-box"),
            "ANTHROPIC_API_KEY": CANARY_KEY,  # the operator's: the gateway's alone
            "ANTHROPIC_BASE_URL": model.url,
        }
        spawner = ("--name", "standing-box", "--tmux-socket", socket_name, "--wait", "2")
        with spawner_process(daemon, state, *spawner) as control:
            assert stat.S_IMODE(control.stat().st_mode) == 0o600
            assert stat.S_IMODE(state.stat().st_mode) == 0o700
            for name in ("supervisor", "bare"):
                out = cli("standing", "--tmux-socket", socket_name, "start", name)
                assert out.returncode == 0, out.stderr
                assert "network: host" in out.stdout and f"tmux -L {socket_name}" in out.stdout
            wait_for(lambda: len(standin.starts(key)) == 2)
            starts = sorted(standin.starts(key), key=lambda s: len(s["argv"]))
            assert starts[0]["argv"][1] == "--session-id" and starts[0]["argv"][3:] == []
            assert starts[1]["argv"][3:] == [FLAG]
            wait_for(lambda: b"watch the fleet" in standin.stdin(key))  # its prompt, pasted
            gateway = gateway_url(state)
            passes = {s["env"]["ANTHROPIC_API_KEY"] for s in starts}
            assert len(passes) == 2  # one per session
            for start in starts:
                assert DENY_TOKEN not in start["argv"] and "THE_LOOP_WORK_ITEM" not in start["env"]
                assert CANARY_KEY not in json.dumps(start)  # not in its env, nor its argv
                assert start["env"]["ANTHROPIC_BASE_URL"] == gateway
                assert start["env"]["ANTHROPIC_API_KEY"].endswith("-tlgw")
            supervisor = next(s for s in starts if s["argv"][3:])["env"]["ANTHROPIC_API_KEY"]
            assert ask_model(gateway, supervisor).status_code == 200  # the gateway takes the pass…
            assert {r.credential for r in model.snapshot()} == {CANARY_KEY}  # …and sends its key
            logged = list(read_jsonl(state / "events.jsonl"))
            started = [e for e in logged if e["event"] == "standing.started"]
            assert {e["network"] for e in started} == {"host"}
            assert all(e["model_gateway"] for e in started)
            shared = {e["work_item_id"] for e in logged if e["event"] == "session.network_shared"}
            assert shared == {"standing:supervisor", "standing:bare"}  # warned, as a work item is

            again = cli("standing", "--tmux-socket", socket_name, "start", "supervisor")
            assert again.returncode == 2 and "already running" in again.stderr
            listing = cli("standing", "--tmux-socket", socket_name, "list")
            assert "supervisor" in listing.stdout and "running" in listing.stdout
            stop = cli("standing", "--tmux-socket", socket_name, "stop", "supervisor")
            assert stop.returncode == 0 and "stopped supervisor" in stop.stdout
            assert ask_model(gateway, supervisor).status_code == 401  # its pass died with it
            unknown = cli("standing", "--tmux-socket", socket_name, "start", "nope")
            assert unknown.returncode == 2 and "declared: supervisor, bare" in unknown.stderr
        assert not control.exists()  # gone with the spawner
    gone = cli("standing", "--tmux-socket", socket_name, "stop", "bare")
    assert gone.returncode == 2 and "no spawner is running" in gone.stderr


@pytest.fixture(scope="module")
def comments_api(tmp_path_factory: pytest.TempPathFactory, app_private_key: str) -> Iterator[Api]:
    yield from serve_api("sqlite", tmp_path_factory.mktemp("comments"), app_private_key)


def test_comment_and_ask_post_on_the_issue_as_the_app_with_the_session_credential(
    comments_api: Api, spawner_cli_env: dict[str, str]
) -> None:
    api = comments_api.fresh()
    item = api.work_item(5)
    with api.session() as db, db.begin():
        token = mint_session_token(db, item, datetime.now(UTC))
    session_env = {
        **spawner_cli_env,
        "THE_LOOP_WORK_ITEM": "issue-5",
        "THE_LOOP_WORK_ITEM_ID": item,
        "THE_LOOP_URL": api.url,
        "THE_LOOP_SESSION_TOKEN": token,
    }
    said = the_loop(session_env, "comment", "Design", "is", "ready")
    assert said.returncode == 0, said.stderr
    asked = the_loop(session_env, "ask", stdin="Should empty lists raise?\n")
    assert asked.returncode == 0 and "End your turn" in asked.stdout
    # Besides the item's progress comment, the App posted exactly the agent's two comments.
    posted = [
        p
        for p in api.fake.issue_comments(api.repo, 5)
        if (m := find_marker(p["body"])) is None or m.kind != MarkerKind.PROGRESS
    ]
    assert [p["body"].split("\n")[0] for p in posted][:1] == ["Design is ready"]
    assert "Should empty lists raise?" in posted[1]["body"]
    markers = [find_marker(p["body"]) for p in posted]
    assert all(found is not None and found.kind == MarkerKind.AGENT for found in markers)
    other = api.work_item(6)
    refused = the_loop({**session_env, "THE_LOOP_WORK_ITEM_ID": other}, "comment", "hi")
    assert refused.returncode == 1 and "may not post" in refused.stderr


def test_comment_outside_a_session_says_what_is_missing(spawner_cli_env: dict[str, str]) -> None:
    out = the_loop(spawner_cli_env, "comment", "hello")
    assert out.returncode == 2
    assert "THE_LOOP_WORK_ITEM_ID" in out.stderr and "THE_LOOP_SESSION_TOKEN" in out.stderr


def test_a_spawner_refuses_plain_http_to_another_machine(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.spawner.appclient import url_problem

    monkeypatch.setenv("THE_LOOP_SPAWNER_TOKEN", "tlsp_x")
    monkeypatch.setenv("THE_LOOP_URL", "http://app.example.com:3000")
    out = cli("spawner", "--name", "box")
    assert out.returncode == 2
    assert "plain http to another machine" in out.stderr and "THE_LOOP_INSECURE_URL=1" in out.stderr
    assert url_problem("https://app.example.com") is None
    assert url_problem("http://127.0.0.1:3000") is None and url_problem("http://[::1]:3000") is None
    assert url_problem("http://localhost:3000") is None
    assert url_problem("http://app.example.com", allow_insecure=True) is None
    assert url_problem("ftp://app.example.com") is not None


def test_a_spawner_whose_model_key_file_cannot_be_read_says_which_key_of_which_file(
    spawner_cli_env: dict[str, str], tmp_path: Path
) -> None:
    missing = tmp_path / "no-such.key"
    write_config(spawner_cli_env, {"routing": {"sandbox": {"apiKeyFile": str(missing)}}})
    out = the_loop(
        {
            **spawner_cli_env,
            "THE_LOOP_SPAWNER_TOKEN": "tlsp_x",
            "THE_LOOP_URL": "http://127.0.0.1:9",
        },
        "spawner",
        "--name",
        "box",
    )
    assert out.returncode == 2
    assert (
        spawner_cli_env["THE_LOOP_CONFIG"] in out.stderr
        and "routing.sandbox.apiKeyFile" in out.stderr
    )
    assert str(missing) in out.stderr


def test_a_spawner_whose_route_names_an_unset_variable_says_which_key_of_which_file(
    spawner_cli_env: dict[str, str],
) -> None:
    route = {
        "env": "STAGING_API_URL",
        "upstream": "https://api.staging.example.com",
        "headers": {"Authorization": "Bearer ${STAGING_TOKEN}"},
    }
    write_config(spawner_cli_env, {"routing": {"sandbox": {"routes": [route]}}})
    env = {
        **spawner_cli_env,
        "THE_LOOP_SPAWNER_TOKEN": "tlsp_x",
        "THE_LOOP_URL": "http://127.0.0.1:9",
    }
    env.pop("STAGING_TOKEN", None)
    out = the_loop(env, "spawner", "--name", "box")
    assert out.returncode == 2
    where = f"{spawner_cli_env['THE_LOOP_CONFIG']}: routing.sandbox.routes[0].headers.Authorization"
    assert where in out.stderr and "no STAGING_TOKEN" in out.stderr


ROUTE_CANARY = "route-canary-token-in-the-spawner-env-4f1e"


def test_a_running_spawner_hands_a_session_its_route_and_no_child_inherits_the_secret(
    spawner_cli_env: dict[str, str],
    tmp_path: Path,
    standin: StandIn,
    socket_name: str,
    cli: Any,
    comments_api: Api,
) -> None:
    ops = tmp_path / "ops"
    ops.mkdir()
    route = {
        "env": "STAGING_API_URL",
        "upstream": "https://api.staging.example.com/v1",
        "headers": {"Authorization": "Bearer ${STAGING_TOKEN}"},
    }
    write_config(
        spawner_cli_env,
        {
            "harnesses": [{"name": "claude", "command": str(standin.path), "args": [FLAG]}],
            "routing": {"sandbox": {**standin.sandbox, "routes": [route]}},
            "standingSessions": {"sessions": [{"name": "ops", "cwd": str(ops)}]},
        },
    )
    state = Path(spawner_cli_env["THE_LOOP_STATE_DIR"]) / "spawner"
    with FakeAnthropic([]) as model:
        daemon = {
            **spawner_cli_env,
            "THE_LOOP_URL": comments_api.url,
            "THE_LOOP_SPAWNER_TOKEN": comments_api.token("route-box"),
            "ANTHROPIC_API_KEY": CANARY_KEY,
            "ANTHROPIC_BASE_URL": model.url,
            "STAGING_TOKEN": ROUTE_CANARY,
        }
        spawner = ("--name", "route-box", "--tmux-socket", socket_name, "--wait", "2")
        with spawner_process(daemon, state, *spawner):
            out = cli("standing", "--tmux-socket", socket_name, "start", "ops")
            assert out.returncode == 0, out.stderr
            key = f"standing-{ops}"
            wait_for(lambda: len(standin.starts(key)) == 1)
            (start,) = standin.starts(key)
            assert start["env"]["STAGING_API_URL"].startswith("http://127.0.0.1:")
            assert start["env"]["STAGING_API_URL"].endswith("/v1")
            assert ROUTE_CANARY not in json.dumps(start)  # not its env, not its argv
            tmux = TmuxRunner(socket_name)._run(["show-environment", "-g"]).stdout
            assert "STAGING_TOKEN" not in tmux and ROUTE_CANARY not in tmux
