"""A hostile session against its credential routes, on the real spawn path (tmux, bubblewrap,
the closed network's relay): a stand-in harness uses both routes, then gathers everything it
can read — its environment, every /proc/*/environ and cmdline it can open, the files under
/etc, /run, /tmp, /var, its home and checkout, the routes' answers (a challenge, an echo, a
redirect followed), and its pane shows what it found. The test searches all of it for the
credentials, which the upstreams must have received."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from app.spawner.context import SpawnerContext
from app.spawner.naming import item_slug
from app.spawner.network.credroutes import CredentialRoutes
from app.spawner.network.routecreds import read_text, resolve_routes
from tests.fakes.credential_upstream import CredentialUpstream
from tests.jobs_support import WI, events, make_config, run_ok, spawn_job
from tests.spawner_support import StandIn
from tests.support import wait_for

TOKEN = "staging-7c1d0e9a4b"
PASSWORD = "pkg-pass-5e3f2a1b"
BASIC = "Basic " + base64.b64encode(f"ci:{PASSWORD}".encode()).decode()

HOSTILE = r"""#!{python}
import http.client, json, os, sys, time, urllib.parse, urllib.request
out = os.path.join({records!r}, urllib.parse.quote(os.environ["THE_LOOP_WORK_ITEM_ID"], safe=""))
os.makedirs(out, exist_ok=True)
seen = open(os.path.join(out, "seen.bin"), "wb")
statuses = {{}}

def keep(label, data):
    seen.write(b"\n==" + label.encode() + b"==\n" + data)

def ask(name, method, path, follow=False):
    base = urllib.parse.urlsplit(os.environ[name])
    try:
        if follow:  # as pip would: urllib follows the redirect itself
            with urllib.request.urlopen(os.environ[name] + path, timeout=30) as answer:
                statuses[name + " " + path] = answer.status
                keep(path, repr(answer.headers.items()).encode() + answer.read())
            return
        conn = http.client.HTTPConnection(base.hostname, base.port, timeout=30)
        conn.request(method, base.path + path, headers={{"Authorization": "Bearer guess"}})
        answer = conn.getresponse()
        statuses[name + " " + method + " " + path] = answer.status
        keep(path, repr(answer.getheaders()).encode() + answer.read())
    except Exception as exc:
        statuses[name + " " + path] = repr(exc)[:200]

for path in ("/ok", "/echo", "/challenge", "/here", "/away"):
    ask("STAGING_API_URL", "GET", path)
ask("STAGING_API_URL", "GET", "/here", follow=True)
ask("STAGING_API_URL", "DELETE", "/ok")
ask("PIP_INDEX_URL", "GET", "/ok")
ask("PIP_INDEX_URL", "GET", "/echo")
keep("env", repr(dict(os.environ)).encode())
for pid in os.listdir("/proc"):
    for part in ("environ", "cmdline"):
        try:
            keep(pid + part, open(os.path.join("/proc", pid, part), "rb").read())
        except OSError:
            pass
roots = ["/etc", "/run", "/tmp", "/var", os.environ.get("HOME", "/"), os.getcwd()]
files = 0
for root in roots:
    for folder, dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                if os.path.isfile(path) and os.path.getsize(path) < 4 << 20:
                    keep(path, open(path, "rb").read())
                    files += 1
            except OSError:
                pass
seen.close()
summary = {{"statuses": statuses, "files": files}}
with open(os.path.join(out, "done.json"), "w") as fh:
    json.dump(summary, fh)
print(json.dumps(summary, indent=1).replace("\n", "\r\n"), flush=True)
print(os.environ.get("STAGING_API_URL"), os.environ.get("PIP_INDEX_URL"), flush=True)
time.sleep(3600)
"""


@pytest.fixture
def upstreams() -> Iterator[tuple[CredentialUpstream, CredentialUpstream]]:
    with CredentialUpstream(f"Bearer {TOKEN}") as staging, CredentialUpstream(BASIC) as pkgs:
        yield staging, pkgs


def test_a_hostile_session_uses_its_routes_and_never_finds_their_credentials(
    ctx: SpawnerContext,
    origin: Path,
    tmp_path: Path,
    upstreams: tuple[CredentialUpstream, CredentialUpstream],
) -> None:
    staging, pkgs = upstreams
    standin = StandIn(tmp_path / "hostile", HOSTILE)
    kept = tmp_path / "operator-etc"  # a directory the operator lets sessions see
    kept.mkdir()
    (kept / "pkg-pass").write_text(PASSWORD + "\n")
    (kept / "visible.txt").write_text("a file sessions may read\n")
    routes = [
        {
            "env": "STAGING_API_URL",
            "upstream": staging.url + "/simple",
            "headers": {"Authorization": "Bearer ${STAGING_TOKEN}"},
            "allow": ["GET /simple/"],
        },
        {
            "env": "PIP_INDEX_URL",
            "upstream": pkgs.url + "/simple",
            "basicAuth": {"usernameEnv": "PKG_USER", "passwordFile": str(kept / "pkg-pass")},
        },
    ]
    sandbox = {**standin.sandbox, "routes": routes}
    sandbox["readOnly"] = [*sandbox["readOnly"], str(kept)]
    ctx.config = make_config(standin, tmp_path, sandbox=sandbox)
    spawner_env = {"STAGING_TOKEN": TOKEN, "PKG_USER": "ci"}
    resolved = resolve_routes(ctx.config.routing.sandbox, spawner_env, read_text, "test.yaml")
    ctx.routes = CredentialRoutes(resolved, ctx.events.emit)

    run_ok(ctx, spawn_job(origin))
    done = standin.records / quote(WI, safe="") / "done.json"
    wait_for(done.exists, timeout=120)
    summary = json.loads(done.read_text())
    statuses = summary["statuses"]

    # The upstreams got the credentials; the session's own guess never crossed.
    assert ("GET", "/simple/ok", f"Bearer {TOKEN}") in staging.seen
    assert ("GET", "/simple/ok", BASIC) in pkgs.seen
    assert all(seen in (f"Bearer {TOKEN}",) for _, _, seen in staging.seen)
    assert statuses["STAGING_API_URL GET /ok"] == 200
    assert statuses["PIP_INDEX_URL GET /ok"] == 200
    assert statuses["STAGING_API_URL GET /challenge"] == 401
    assert statuses["STAGING_API_URL GET /here"] == 302
    assert statuses["STAGING_API_URL /here"] == 200  # the redirect, followed, came back in
    assert ("GET", "/simple/ok?from=here", f"Bearer {TOKEN}") in staging.seen
    assert statuses["STAGING_API_URL DELETE /ok"] == 403  # not in its allow list
    assert not any(method == "DELETE" for method, _, _ in staging.seen)

    # Nothing it could read holds a credential: not its env, /proc, files, answers, pane.
    seen = (standin.records / quote(WI, safe="") / "seen.bin").read_bytes()
    assert summary["files"] > 10 and b"a file sessions may read" in seen  # it did look
    assert b"STAGING_API_URL" in seen and b"==selfenviron==" in seen  # its env, its /proc
    # bwrap's own environment (pid 1) is read too, unless the session runs as its own user.
    assert (b"==1environ==" in seen) == (os.geteuid() != 0)
    pane = ctx.runner.capture(item_slug(WI), history=200)
    assert '"statuses"' in pane  # the pane shows what it found
    encoded = base64.b64encode(f"ci:{PASSWORD}".encode())
    for secret in (TOKEN.encode(), PASSWORD.encode(), encoded, f"ci:{PASSWORD}".encode()):
        assert secret not in seen
        assert secret.decode() not in pane

    ctx.routes.report()
    counted = events(ctx, "session.routes")[-1]["routes"]
    assert counted["STAGING_API_URL"]["refused"] == 1
    assert counted["STAGING_API_URL"]["requests"] >= 6
    assert counted["PIP_INDEX_URL"] == {"requests": 2, "refused": 0}
