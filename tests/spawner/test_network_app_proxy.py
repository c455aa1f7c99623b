"""An App a session reaches through its egress proxy, with real parts: the App (SQLite, the
fake GitHub) served over TLS with a certificate from a private CA under this machine's host
name (`tlsapp_support`) — a name, not loopback, so a session in a closed network has no
relay to it and goes through the spawner's allow-listing proxy (`netplan`) — and a stand-in
harness launched by the spawn path in bubblewrap (`routing.sandbox.network: gateways`) that
runs `the-loop comment` from inside. The CA is trusted the way an operator trusts it:
through `SSL_CERT_FILE` in the spawner's environment (or `SSL_CERT_DIR`, a directory
holding it under its subject hash), which the sandbox shows although nothing else exposes
its directory. The comment reaches the issue; a tunnel to another port
of the same host, which nobody listed, is refused and reported. The same App under
`https://127.0.0.1` is relayed instead (`NO_PROXY` names the loopback, so the proxy could
not carry it), TLS and all, and is reached just as well."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.fleet.tokens import mint_session_token
from app.spawner.context import SpawnerContext
from app.spawner.network.netgates import session_dir
from app.store.tables import WorkItemStatus
from tests.jobs_support import events, run_ok, spawn_job
from tests.spawner_support import StandIn, bare_repository
from tests.support import wait_for
from tests.tlsapp_support import TlsApp, comments_saying, hashed_ca_dir, tls_spawner

pytestmark = pytest.mark.sqlite_only
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


@pytest.fixture(params=["file", "directory"])
def tls_devbox(
    request: pytest.FixtureRequest, tmp_path: Path, tls_app: TlsApp
) -> Iterator[tuple[SpawnerContext, StandIn]]:
    """A spawner whose environment trusts the App's CA (`SSL_CERT_FILE`, or `SSL_CERT_DIR`
    at a hashed directory), its sessions in closed networks running the harness above."""
    unlisted = f"{tls_app.host}:{int(tls_app.api.fake_url.rsplit(':', 1)[1])}"
    script = HARNESS.replace("SAID", SAID).replace("UNLISTED", unlisted)
    standin = StandIn(tmp_path, script)
    ca = tls_app.ca if request.param == "file" else hashed_ca_dir(tls_app.ca, tmp_path / "ca-dir")
    with tls_spawner(tmp_path, tls_app, standin, ca) as ctx:
        yield ctx, standin


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
    # The session's one comment (the App's progress comment of item 21 may stand beside it).
    (posted,) = comments_saying(api, 21, SAID)
    assert posted["html_url"] in report["out"]
    # The session names the App as the operator does; by name it has no relay to it.
    assert report["url"] == tls_app.url and report["proxy"].startswith("http://127.0.0.1:")
    sockets = sorted(p.name for p in session_dir(ctx.state_dir / "net", item).iterdir())
    assert sockets == (["app.sock", "proxy.sock"] if tls_app.relayed else ["proxy.sock"])
    # The same host on a port nobody listed: refused, and said so.
    assert report["unlisted"] == "HTTP/1.1 403 Forbidden"
    unlisted = f"{tls_app.host}:{int(api.fake_url.rsplit(':', 1)[1])}"
    assert [e["target"] for e in events(ctx, "session.egress_refused")] == [unlisted]
