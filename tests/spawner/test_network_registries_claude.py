"""What a session in a closed network can use, from inside: the real `claude` binary,
launched by the spawner in bubblewrap with `routing.sandbox.network: gateways`,
`egress: [python, node]` and the devbox's PostgreSQL in `services`, driven by the scripted
model, runs `pip install` and `npm install` of small real packages from the registries this
machine's pip and npm are configured with (no per-tool setting in the command: the session's
environment carries the proxy, the registries and the CA bundle), imports them, and asks
PostgreSQL a question with `psql` and talks to a devbox unix socket at its own path; a port of the devbox's loopback nobody listed stays
unreachable. What the session's commands reported is the assertion.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from app.spawner.context import SpawnerContext
from app.spawner.network.netgates import session_dir
from tests.claude_support import GENEROUS, sandboxed_devbox
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything, tool_result_for
from tests.fakes.model_script import ToolCall, contains
from tests.jobs_support import run_ok, spawn_job
from tests.spawner_support import bare_repository
from tests.support import POSTGRES_URL

# Two real installs from the registries: minutes on a loaded machine, never a fixed budget.
pytestmark = [pytest.mark.claude, pytest.mark.timeout(900)]
# Small packages the devbox's own wheel folders do not hold: they come from the registry.
PY_PACKAGE, NODE_PACKAGE = "pyjokes", "is-odd"
SCRIPT = r"""
cd "$1"
out() { printf '%s\n' "$2" > "$1"; }
python3 -m pip install --no-deps --no-cache-dir --target py {py} > pip.log 2>&1; out pip.rc $?
PYTHONPATH=py python3 -c 'import {py}; print({py}.get_joke() != "")' > py.out 2>&1
mkdir -p js && cd js && npm install --no-audit --no-fund {js} > ../npm.log 2>&1
out ../npm.rc $?
node -e 'console.log(require("{js}")(3))' > ../js.out 2>&1; cd ..
PGPASSWORD="$4" psql -h 127.0.0.1 -p "$3" -U "$5" -d "$6" -tAc 'select 40 + 2' > pg.out 2>&1
python3 -c 'import socket,sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10); print("connected")
except OSError as exc: print(type(exc).__name__)' "$2" > unlisted.out
python3 -c 'import socket,sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"ping\n")
print(s.recv(100).decode().strip())' "$7" > unix.out 2>&1
echo INSTALLED
"""


class _Pong(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        if self.rfile.readline().strip() == b"ping":
            self.wfile.write(b"pong from the devbox's unix socket\n")


def _bash(command: str) -> ToolCall:
    """A Bash call with room for two installs on a loaded machine (ten minutes)."""
    return ToolCall("Bash", {"command": command, "description": "install", "timeout": 600000})


def test_a_session_installs_from_the_devboxs_registries_and_reaches_its_listed_services(
    tmp_path: Path, stopped: list[SpawnerContext]
) -> None:
    if not POSTGRES_URL:
        pytest.skip("THE_LOOP_TEST_POSTGRES_URL is not set")
    pg = make_url(POSTGRES_URL)
    tools, reports = tmp_path / "tools", tmp_path / "reports"
    tools.mkdir()
    reports.mkdir()
    reports.chmod(0o777)  # a root spawner's session is another user
    (tools / "install.sh").write_text(
        SCRIPT.replace("{py}", PY_PACKAGE).replace("{js}", NODE_PACKAGE)
    )
    unlisted = socket.socket()
    unlisted.bind(("127.0.0.1", 0))
    unlisted.listen()
    port = pg.port or 5432
    (tmp_path / "svc").mkdir()
    unix_path = str(tmp_path / "svc" / "pong.sock")
    pong = socketserver.ThreadingUnixStreamServer(unix_path, _Pong)
    threading.Thread(target=pong.serve_forever, daemon=True).start()
    words = [reports, unlisted.getsockname()[1], port, pg.password, pg.username, pg.database]
    words.append(unix_path)
    command = "bash " + " ".join([str(tools / "install.sh"), *(str(w) for w in words)])
    script = [
        Step(contains("Install the packages"), Reply("Installing.", (_bash(command),))),
        Step(tool_result_for("Bash", "INSTALLED"), Reply("Done.")),
        *[Step(anything, Reply("Stopping here.")) for _ in range(4)],
    ]
    origin = bare_repository(tmp_path)
    try:
        with FakeAnthropic(script) as model:
            ctx = sandboxed_devbox(
                tmp_path,
                model,
                readOnly=[str(tools)],
                readWrite=[str(reports)],
                egress=["python", "node"],
                services=[f"127.0.0.1:{port}", unix_path],
            )
            stopped.append(ctx)
            run_ok(ctx, spawn_job(origin, item="github:o/r#1", prompt="Install the packages."))
            sockets = session_dir(ctx.state_dir / "net", "github:o/r#1")
            assert "svc0.sock" in {p.name for p in sockets.iterdir()}
            model.wait_for_step(1, timeout=10 * GENEROUS)
    finally:
        unlisted.close()
        pong.shutdown()
        pong.server_close()

    def read(name: str) -> str:
        return (reports / name).read_text().strip()

    assert read("pip.rc") == "0", read("pip.log")
    assert read("py.out") == "True"
    assert read("npm.rc") == "0", read("npm.log")
    assert read("js.out") == "true"
    assert read("pg.out") == "42"  # the devbox's PostgreSQL, relayed in
    assert read("unlisted.out") == "ConnectionRefusedError"  # nothing else of its loopback
    assert read("unix.out") == "pong from the devbox's unix socket"  # at the same path
    report = {name: read(name) for name in ("pip.log", "npm.log")}
    assert "Successfully installed" in report["pip.log"], json.dumps(report)
