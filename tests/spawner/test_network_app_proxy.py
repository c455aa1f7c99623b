"""An App a session reaches through its egress proxy, with real parts: the App (SQLite, the
fake GitHub) served over TLS with a self-signed certificate under this machine's host name —
a name, not loopback, so a session in a closed network has no relay to it and goes through
the spawner's allow-listing proxy (`netplan`) — and a stand-in harness launched by the
spawn path in bubblewrap (`routing.sandbox.network: gateways`) that runs `the-loop comment`
from inside. The certificate is trusted the way an operator trusts a private CA: through
`SSL_CERT_FILE` in the spawner's environment, which the sandbox shows although nothing else
exposes its directory. The comment reaches the issue; a tunnel to another port of the same
host, which nobody listed, is refused and reported. The same App under `https://127.0.0.1`
is relayed instead (`NO_PROXY` names the loopback, so the proxy could not carry it), TLS
and all, and is reached just as well."""

from __future__ import annotations

import json
import socket
import ssl
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from app.fleet.tokens import mint_session_token
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.launch import SpawnerContext
from app.spawner.network.netgates import session_dir
from app.spawner.network.netplan import LOOPBACK_NAMES
from app.spawner.registry import Registry
from app.spawner.session.tmux import TmuxRunner
from app.store.tables import WorkItemStatus
from tests.jobs_support import events, make_config, run_ok, spawn_job
from tests.spawner_support import StandIn, bare_repository
from tests.spawnerapi_support import Api, serve_api
from tests.support import self_signed, wait_for

pytestmark = pytest.mark.sqlite_only
ROOT = Path(__file__).resolve().parents[2]
SAID = "Reached the App through the egress proxy."
# Runs in the sandbox as the harness: `the-loop comment`, then a CONNECT to UNLISTED through
# the proxy; what both gave is written to its records, then it exits. (No braces: StandIn
# formats the text with {python} and {records}.)
HARNESS = """#!{python}
import json, os, socket, subprocess, sys
said = subprocess.run(
    [sys.executable, "-m", "app.cli", "comment", "SAID"],
    capture_output=True, text=True, timeout=120,
)
proxy = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
with socket.create_connection(("127.0.0.1", proxy), timeout=30) as conn:
    conn.sendall(b"CONNECT UNLISTED HTTP/1.1\\r\\nHost: UNLISTED\\r\\n\\r\\n")
    answer = conn.recv(4096).decode(errors="replace")
report = dict(
    code=said.returncode, out=said.stdout, err=said.stderr, url=os.environ["THE_LOOP_URL"],
    proxy=os.environ["HTTPS_PROXY"], unlisted=answer.split("\\r\\n")[0],
)
with open(os.path.join({records!r}, "report.json.tmp"), "w") as fh:
    json.dump(report, fh)
os.replace(os.path.join({records!r}, "report.json.tmp"), os.path.join({records!r}, "report.json"))
"""


@dataclass
class TlsApp:
    api: Api
    url: str  # https://<host name>:<port>
    host: str
    cert: Path
    relayed: bool  # on loopback: relayed into the session's network, not proxied


def _host_name() -> tuple[str, str]:
    """This machine's host name and the address it resolves to here."""
    name = socket.gethostname().lower()
    if name in LOOPBACK_NAMES:
        pytest.fail(f"the host name {name!r} is a loopback name: the App would be relayed")
    try:
        address = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)[0][4][0]
    except OSError as exc:
        pytest.fail(f"this machine's host name {name!r} does not resolve here: {exc}")
    return name, str(address)


@pytest.fixture(params=["host-name", "loopback"])
def tls_app(
    request: pytest.FixtureRequest, tmp_path: Path, app_private_key: str
) -> Iterator[TlsApp]:
    """The App over TLS under the host name (or 127.0.0.1), its certificate apart from
    everything else."""
    relayed = request.param == "loopback"
    name, address = ("127.0.0.1", "127.0.0.1") if relayed else _host_name()
    certs = tmp_path / "certs"
    certs.mkdir()
    cert, key = self_signed(certs, (name, address))
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(cert, key)
    (tmp_path / "app").mkdir()
    apps = serve_api("sqlite", tmp_path / "app", app_private_key)
    api = next(apps)
    server = make_server(address, 0, api.flask, threaded=True, ssl_context=serving)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield TlsApp(api, f"https://{name}:{server.server_port}", name, cert, relayed)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        next(apps, None)  # serve_api's own teardown: its workers stop, its servers close


@pytest.fixture
def tls_devbox(tmp_path: Path, tls_app: TlsApp) -> Iterator[tuple[SpawnerContext, StandIn]]:
    """A spawner whose environment trusts the App's certificate (`SSL_CERT_FILE`), its
    sessions in closed networks running the harness above."""
    unlisted = f"{tls_app.host}:{int(tls_app.api.fake_url.rsplit(':', 1)[1])}"
    script = HARNESS.replace("SAID", SAID).replace("UNLISTED", unlisted)
    standin = StandIn(tmp_path, script)
    home = tmp_path / "devbox-home"
    home.mkdir()
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
        "SSL_CERT_FILE": str(tls_app.cert),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    runner = TmuxRunner(f"the-loop-proxy-{uuid.uuid4().hex[:8]}", env=env)
    state = tmp_path / "state"
    ctx = SpawnerContext(
        config=make_config(standin, tmp_path),
        runner=runner,
        registry=Registry(state / "sessions.json"),
        events=SpawnerEvents(state),
        home=home,
        state_dir=state,
        app_url=tls_app.url,
        hosts=frozenset({"claude"}),
        env=env,
        ready_timeout=60,
    )
    try:
        yield ctx, standin
    finally:
        if ctx.networks is not None:
            ctx.networks.stop()
        runner.kill_server()


def test_a_session_reaches_an_app_behind_tls_and_nothing_unlisted(
    tmp_path: Path, tls_app: TlsApp, tls_devbox: tuple[SpawnerContext, StandIn]
) -> None:
    ctx, standin = tls_devbox
    api = tls_app.api
    item = api.work_item(number=21, status=WorkItemStatus.RUNNING)
    with api.session() as db, db.begin():
        token = mint_session_token(db, item, datetime.now(UTC))
    job = spawn_job(bare_repository(tmp_path), item=item, prompt="Say where you are.")
    run_ok(ctx, replace(job, session_token=token))

    report_file = standin.records / "report.json"
    wait_for(report_file.exists, timeout=120)
    report = json.loads(report_file.read_text())
    assert report["code"] == 0, report["err"]
    # The session's one comment (the App's own progress comment may be there beside it).
    (posted,) = [c for c in api.fake.issue_comments(api.repo, 21) if c["body"].startswith(SAID)]
    assert posted["html_url"] in report["out"]
    # The session names the App as the operator does; by name it has no relay to it.
    assert report["url"] == tls_app.url and report["proxy"].startswith("http://127.0.0.1:")
    sockets = sorted(p.name for p in session_dir(ctx.state_dir / "net", item).iterdir())
    assert sockets == (["app.sock", "proxy.sock"] if tls_app.relayed else ["proxy.sock"])
    # The same host on a port nobody listed: refused, and said so.
    assert report["unlisted"] == "HTTP/1.1 403 Forbidden"
    unlisted = f"{tls_app.host}:{int(api.fake_url.rsplit(':', 1)[1])}"
    assert [e["target"] for e in events(ctx, "session.egress_refused")] == [unlisted]
