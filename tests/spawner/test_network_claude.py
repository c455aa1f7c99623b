"""A session's closed network, from inside: the real `claude` binary, launched by the
spawner's own spawn path in bubblewrap with `routing.sandbox.network: gateways` and driven
offline by the scripted model (which it reaches through the relayed model gateway: every
turn of the script is itself the proof that way works), runs probes through its Bash tool.

On the host's loopback: a listener that is no gateway, a stand-in App (what `the-loop` and
the stop gate call), a listed HTTP server and a listed TCP echo server (the operator's
`egress`), and an HTTP server nobody listed. What the probes report, what the model was
shown and the spawner's events are the assertions. The same session then rewrites its own
`~/.claude/settings.json` to switch every hook off, and its next stop still meets the gate.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.protocol import StopJob
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.network.netgates import session_dir
from tests.claude_support import GENEROUS, sandboxed_devbox
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything, bash, tool_result_for
from tests.fakes.model_script import contains
from tests.jobs_support import events, run_ok, spawn_job
from tests.spawner_support import bare_repository

pytestmark = pytest.mark.claude
ELSEWHERE = "127.0.0.2"  # another loopback address: what `NO_PROXY` does not name
PROBE = r"""
import json, os, socket, sys, urllib.error, urllib.request
ports = json.load(open(sys.argv[1]))
def tcp(host, port):
    try:
        socket.create_connection((host, port), timeout=10).close()
        return "connected"
    except OSError as exc:
        return type(exc).__name__
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return [answer.status, answer.read().decode()]
    except urllib.error.HTTPError as exc:
        return [exc.code, exc.read().decode()]
    except OSError as exc:
        return [0, type(exc).__name__]
def tunnel(host, port):
    proxy = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", proxy), timeout=30) as s:
        s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        status = head.split(b" ")[1].decode() if b" " in head else "none"
        if status != "200":
            return [status, ""]
        s.sendall(b"ping\n")
        return [status, s.recv(100).decode()]
report = {
    "closed_direct": tcp("127.0.0.1", ports["closed"]),
    "closed_elsewhere": tcp(sys.argv[3], ports["listed"]),
    "app": get(os.environ["THE_LOOP_URL"] + "/healthz"),
    "listed": get(f"http://{sys.argv[3]}:{ports['listed']}/hello"),
    "unlisted": get(f"http://{sys.argv[3]}:{ports['unlisted']}/hello"),
    "tunnel_listed": tunnel(sys.argv[3], ports["echo"]),
    "tunnel_closed": tunnel("127.0.0.1", ports["closed"]),
}
settings = os.path.expanduser("~/.claude/settings.json")
json.dump({"disableAllHooks": True}, open(settings, "w"))
try:
    open("/etc/claude-code/managed-settings.json", "w").write("{}")
    report["managed_written"] = True
except OSError as exc:
    report["managed_written"] = type(exc).__name__
json.dump(report, open(sys.argv[2], "w"))
print("PROBED", json.dumps(report))
"""


class _Answer(BaseHTTPRequestHandler):
    """A stand-in: answers every GET with its name, counts the stop gate's POSTs."""

    def do_GET(self) -> None:
        self._send(200, f"{self.server.name} {self.path}")  # type: ignore[attr-defined]

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        hits: list[str] = self.server.hits  # type: ignore[attr-defined]
        hits.append(self.path)
        self._send(200, json.dumps({"attempt": len(hits)}), "application/json")

    def _send(self, status: int, body: str, kind: str = "text/plain") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        if self.rfile.readline().strip() == b"ping":
            self.wfile.write(b"pong from the listed host\n")


@pytest.fixture
def stand_ins() -> Iterator[dict[str, Any]]:
    """The host's loopback: a plain listener, the App, a listed and an unlisted HTTP server,
    a listed echo server."""
    servers: list[Any] = []

    def http(name: str, host: str) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer((host, 0), _Answer)
        server.name, server.hits = name, []  # type: ignore[attr-defined]
        servers.append(server)
        return server

    app, listed, unlisted = (
        http("app", "127.0.0.1"),
        http("listed", ELSEWHERE),
        http("x", ELSEWHERE),
    )
    echo = socketserver.ThreadingTCPServer((ELSEWHERE, 0), _Echo)
    servers.append(echo)
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed.listen()
    try:
        yield {
            "app": app,
            "ports": {
                "closed": closed.getsockname()[1],
                "listed": listed.server_address[1],
                "unlisted": unlisted.server_address[1],
                "echo": echo.server_address[1],
            },
        }
    finally:
        closed.close()
        for server in servers:
            server.shutdown()
            server.server_close()


def item(number: int) -> str:
    return f"github:o/r#{number}"


def test_a_session_reaches_the_gateways_and_the_listed_hosts_only(
    tmp_path: Path, stopped: list[SpawnerContext], stand_ins: dict[str, Any]
) -> None:
    tools, reports = tmp_path / "tools", tmp_path / "reports"
    tools.mkdir()
    reports.mkdir()
    reports.chmod(0o777)  # a root spawner's session is another user
    ports = stand_ins["ports"]
    (tools / "probe.py").write_text(PROBE)
    (tools / "ports.json").write_text(json.dumps(ports))
    command = f"python3 {tools}/probe.py {tools}/ports.json {reports}/net.json {ELSEWHERE}"
    script = [
        Step(contains("Probe the network"), Reply("Probing.", (bash(command),)), name="probe"),
        Step(tool_result_for("Bash", "PROBED"), Reply("Done."), name="done"),
        Step(anything, Reply("Stopping here."), name="gate"),  # what the stop gate said
        *[Step(anything, Reply("Stopping here.")) for _ in range(4)],
    ]
    egress = [f"{ELSEWHERE}:{ports['listed']}", f"{ELSEWHERE}:{ports['echo']}"]
    origin = bare_repository(tmp_path)
    with FakeAnthropic(script) as model:
        ctx = sandboxed_devbox(
            tmp_path, model, readOnly=[str(tools)], readWrite=[str(reports)], egress=egress
        )
        stopped.append(ctx)
        app = stand_ins["app"]
        ctx.app_url = f"http://127.0.0.1:{app.server_address[1]}"
        job = spawn_job(origin, item=item(1), prompt="Probe the network.", model="")
        at_a_phase = job.payload.model_copy(update={"phase": "requirements-definition"})
        run_ok(ctx, replace(job, payload=at_a_phase))  # its stop is gated: no artifact yet
        sockets = session_dir(ctx.state_dir / "net", item(1))
        assert sorted(p.name for p in sockets.iterdir()) == ["app.sock", "model.sock", "proxy.sock"]
        probed = model.wait_for_step(1, timeout=GENEROUS).turn.text
        assert "PROBED" in probed
        try:
            gate = model.wait_for_step(2, timeout=GENEROUS).turn.text
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nthe App was called at {app.hits}") from None
    report = json.loads((reports / "net.json").read_text())

    assert report["closed_direct"] == "ConnectionRefusedError"  # nothing of the host's
    assert report["closed_elsewhere"] == "ConnectionRefusedError"  # not even a listed one
    assert report["app"] == [200, "app /healthz"]  # the App, relayed
    assert report["listed"] == [200, "listed /hello"]  # through the proxy
    assert report["unlisted"][0] == 403 and "not in routing.sandbox.egress" in report["unlisted"][1]
    assert report["tunnel_listed"] == ["200", "pong from the listed host\n"]
    assert report["tunnel_closed"] == ["403", ""]
    refused = {(e["target"], e["method"]) for e in events(ctx, "session.egress_refused")}
    # Only the probe's: Claude Code's own calls out (updates, telemetry, the official plugin
    # marketplace's install) are switched off, not refused with a warning on every start.
    assert refused == {
        (f"{ELSEWHERE}:{ports['unlisted']}", "GET"),
        (f"127.0.0.1:{ports['closed']}", "CONNECT"),
    }
    (spawned,) = events(ctx, "session.spawned")
    assert spawned["network"] == "gateways" and events(ctx, "session.network_shared") == []

    # Its own settings switched every hook off; the managed ones it cannot touch still gate.
    assert report["managed_written"] in ("OSError", "PermissionError")
    # Counted on the App, through its relay (the next stop, after "Stopping here.", may
    # already be counting too).
    assert app.hits and set(app.hits) == {"/spawner/v1/gate"}
    assert "Stop hook feedback" in gate and "(attempt 1/3)" in gate
    assert "required artifact is missing (docs/specs/issue-1/" in gate

    stop = StopJob(work_item_id=item(1), repo="o/r", issue_number=1, reason="test")
    run_ok(ctx, ClaimedJob(2, stop, 60))
    assert not sockets.exists()  # the session's sockets go with it
