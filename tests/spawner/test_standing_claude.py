"""A standing session as the operator starts one: `the-loop spawner` running in its own
process (the operator's API key in its environment, and in the shell that runs the
commands: a canary), `the-loop standing start` handing it the request, the real `claude`
launched in bubblewrap with `routing.sandbox.network: gateways`, driven by the scripted model.

Its Bash tool looks for the canary in every environment it can read (its own, bwrap's
through `/proc/1/environ`) and every file of its home, tries a port the host listens on,
and tries the spawner's control socket; what the model was shown, the report it wrote and
the spawner's events are the assertions. The model was reached only through the gateway
(every request bore the operator's key, which only the gateway holds), and once
`the-loop standing stop` has run the session's pass is refused.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.audit import read_jsonl
from app.spawner.harness.claude_trust import BYPASS_FLAG
from app.spawner.network.netgates import session_dir
from app.spawner.session.tmux import TmuxRunner
from tests.claude_support import GENEROUS, claude_binary
from tests.devbox_support import scripted_env, scripted_home
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything, bash, contains
from tests.fakes.model_script import tool_result_for
from tests.spawner_support import ask_model, gateway_url, spawner_process
from tests.spawnerapi_support import Api, serve_api

pytestmark = pytest.mark.claude
ROOT = Path(__file__).resolve().parents[2]
CANARY_KEY = "sk-ant-api03-CANARY-operator-key-of-the-standing-spawner-0"
ITEM = "standing:ops"
# What the session's Bash tool runs; it prints its report, which the model is shown.
SCAN = r"""
import json, os, socket, sys
canary = json.load(open(sys.argv[1]))  # never on the command line, which the transcript keeps
out, port, control = sys.argv[2], int(sys.argv[3]), sys.argv[4]
found, environs = [], []
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        data = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        continue
    environs.append(int(pid))
    if canary.encode() in data:
        found.append(f"/proc/{pid}/environ")
if any(canary in v for v in os.environ.values()):
    found.append("os.environ")
for root, _, files in os.walk(os.environ["HOME"]):
    for name in files:
        try:
            if canary.encode() in open(os.path.join(root, name), "rb").read():
                found.append(os.path.join(root, name))
        except OSError:
            pass
def reach(family, address):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(address)
        return "connected"
    except OSError as exc:
        return type(exc).__name__
report = {
    "found": found,
    "environs": environs,
    "env": dict(os.environ),
    "host_port": reach(socket.AF_INET, ("127.0.0.1", port)),
    "control": reach(socket.AF_UNIX, control),
}
json.dump(report, open(out, "w"))
shown = {k: v for k, v in report.items() if k != "env"}
shown["key_kind"] = "pass" if os.environ.get("ANTHROPIC_API_KEY", "").endswith("-tlgw") else "other"
print("scanned", json.dumps(shown, sort_keys=True))
"""


@pytest.fixture(scope="module")
def app_api(tmp_path_factory: pytest.TempPathFactory, app_private_key: str) -> Iterator[Api]:
    yield from serve_api("sqlite", tmp_path_factory.mktemp("standing-app"), app_private_key)


@pytest.fixture
def listener() -> Iterator[int]:
    """A port the host listens on: what a closed network cannot reach."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


@pytest.fixture
def tmux_socket() -> Iterator[str]:
    name = f"the-loop-standing-{uuid.uuid4().hex[:8]}"
    yield name
    TmuxRunner(name).kill_server()


def standing(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`the-loop standing …` as the operator's shell runs it."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "standing", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_standing_session_gets_a_pass_and_a_closed_network_from_the_running_spawner(
    tmp_path: Path, app_api: Api, listener: int, tmux_socket: str
) -> None:
    tools, reports, ops = tmp_path / "tools", tmp_path / "reports", tmp_path / "ops"
    for folder in (tools, reports, ops):
        folder.mkdir()
    reports.chmod(0o777)  # a root spawner's session is another user
    (tools / "scan.py").write_text(SCAN)
    (tools / "canary.json").write_text(json.dumps(CANARY_KEY))
    state = tmp_path / "state" / "spawner"
    control = state / "control.sock"
    command = (
        f"python3 {tools}/scan.py {tools}/canary.json {reports}/scan.json {listener} {control}"
    )
    script = [
        Step(contains("Scan this standing session"), Reply("Scanning.", (bash(command),))),
        Step(tool_result_for("Bash", "scanned"), Reply("Scanned.")),
        *[Step(anything, Reply("Nothing more.")) for _ in range(4)],
    ]
    config = {
        "harnesses": [{"name": "claude", "command": claude_binary(), "args": [BYPASS_FLAG]}],
        "routing": {
            "workspace": {"root": str(tmp_path / "work")},
            "sandbox": {"readOnly": [str(tools)], "readWrite": [str(reports)]},
        },
        "standingSessions": {
            "sessions": [{"name": "ops", "cwd": str(ops), "prompt": "Scan this standing session."}]
        },
    }
    (tmp_path / "cli-config.yaml").write_text(json.dumps(config))
    home = scripted_home(tmp_path, stop_gate=False)
    with FakeAnthropic(script) as model:
        shell = {  # the operator's shell: their key in it too
            **scripted_env(model.url, home, ANTHROPIC_API_KEY=CANARY_KEY),
            "THE_LOOP_STATE_DIR": str(tmp_path / "state"),
            "THE_LOOP_CONFIG": str(tmp_path / "cli-config.yaml"),
        }
        daemon = {
            **shell,
            "THE_LOOP_URL": app_api.url,
            "THE_LOOP_SPAWNER_TOKEN": app_api.token("standing-claude"),
        }
        spawner = ("--name", "standing-claude", "--tmux-socket", tmux_socket, "--wait", "2")
        with spawner_process(daemon, state, *spawner):
            started = standing(shell, "start", "ops")
            assert started.returncode == 0, started.stderr
            assert "network: gateways" in started.stdout
            sockets = session_dir(state / "net", ITEM)
            assert sorted(p.name for p in sockets.iterdir()) == [
                "app.sock",
                "model.sock",
                "proxy.sock",
            ]
            shown = model.wait_for_step(1, timeout=GENEROUS).turn.text  # the scan's result
            report: dict[str, Any] = json.loads((reports / "scan.json").read_text())
            session_pass = report["env"]["ANTHROPIC_API_KEY"]
            stopped = standing(shell, "stop", "ops")
            assert stopped.returncode == 0 and "stopped ops" in stopped.stdout, stopped.stderr
            after = ask_model(gateway_url(state), session_pass)
            assert not sockets.exists()  # its network's sockets went with it
        logged = list(read_jsonl(state / "events.jsonl"))

    assert "scanned" in shown and CANARY_KEY not in shown
    assert '"found": []' in shown and '"key_kind": "pass"' in shown
    assert report["found"] == [] and report["environs"]  # every environment it could read: clean
    # bwrap's own (pid 1) is read and clean, or, as the session's user, not readable at all.
    assert (1 in report["environs"]) == (os.geteuid() != 0)
    assert session_pass.startswith("sk-ant-api03-") and session_pass.endswith("-tlgw")
    assert "THE_LOOP_WORK_ITEM" not in report["env"]  # no stop gate for a standing session
    assert report["host_port"] == "ConnectionRefusedError"  # a network of its own
    assert report["control"] in ("FileNotFoundError", "PermissionError")  # masked
    # Every request reached the model through the gateway: only it holds the operator's key.
    assert {r.credential for r in model.snapshot()} == {CANARY_KEY}
    assert after.status_code == 401  # the pass died with the session
    assert after.json()["error"]["type"] == "authentication_error"
    (launch,) = [e for e in logged if e["event"] == "standing.started"]
    assert launch["network"] == "gateways" and launch["model_gateway"] is True
    assert not [e for e in logged if e["event"] == "session.network_shared"]
    usage = [e for e in logged if e["event"] == "session.usage" and e["work_item_id"] == ITEM]
    assert sum(e["requests"] for e in usage) >= 2  # counted by the gateway as the session's
    assert CANARY_KEY not in (state / "events.jsonl").read_text()
