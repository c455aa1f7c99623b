"""A session's git through the App's git gateway when the App is served over https with a
certificate from a private CA: the real App (SQLite, the fake GitHub) over TLS
(`tlsapp_support`), under this machine's host name (through the session's egress proxy) and
under 127.0.0.1 (relayed); `git http-backend` behind a loopback server that accepts only
tokens the fake GitHub minted as the repository the gateway forwards to; the spawner's own
spawn path launching a stand-in harness in bubblewrap with `routing.sandbox.network:
gateways`, which runs the real git in its checkout.

The spawner trusts the CA through `SSL_CERT_FILE` alone, or `SSL_CERT_DIR` alone (a
directory holding it under its subject hash), which git built on libcurl with GnuTLS (this
machine's) does not read. The session fetches, commits and pushes its work branch, and the
commit lands on the git server; with git's own trust in force instead (`GIT_SSL_CAINFO` and
`GIT_SSL_CAPATH` at the system's public CAs) the same remote is refused for its
certificate: verification is on, and the private CA is what passes it."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.fleet.tokens import mint_session_token
from app.store.tables import WorkItem, WorkItemStatus
from tests.fakes.git_http import GitHttp
from tests.fakes.github_pulls import head_sha
from tests.fakes.server import LiveServer
from tests.jobs_support import run_ok, spawn_job
from tests.pull_support import AUTHOR_ENV, accept_minted, bare_origin
from tests.spawner_support import StandIn
from tests.support import wait_for
from tests.tlsapp_support import TlsApp, hashed_ca_dir, tls_spawner

pytestmark = pytest.mark.sqlite_only
NUMBER = 21
BRANCH = f"the-loop/issue-{NUMBER}"
PUBLIC_CAS = "/etc/ssl/certs/ca-certificates.crt"  # Debian's bundle: no private CA in it
PUBLIC_CA_DIR = "/etc/ssl/certs"  # and its hashed directory
# The harness: git in its checkout, each command's exit code and output written to its
# records, then it exits. (No braces: StandIn formats the text with {python} and {records}.)
HARNESS = """#!{python}
import json, os, subprocess
def git(*args, **env):
    done = subprocess.run(
        ["git", *args], capture_output=True, text=True, timeout=120, env=dict(os.environ, **env)
    )
    return [done.returncode, done.stdout + done.stderr]
report = dict(url=os.environ["THE_LOOP_URL"], origin=git("remote", "get-url", "origin"))
report["trust"] = git("config", "--local", "--get-regexp", "sslca")
report["public_only"] = git(
    "ls-remote", "origin", GIT_SSL_CAINFO="PUBLIC_CAS", GIT_SSL_CAPATH="PUBLIC_CA_DIR"
)
report["fetch"] = git("fetch", "origin")
with open("work.txt", "w") as fh:
    fh.write("pushed from behind a private CA\\n")
report["add"] = git("add", "work.txt")
report["commit"] = git("commit", "-q", "-m", "work behind a private CA")
report["push"] = git("push")
report["head"] = git("rev-parse", "HEAD")
with open(os.path.join({records!r}, "git.json.tmp"), "w") as fh:
    json.dump(report, fh)
os.replace(os.path.join({records!r}, "git.json.tmp"), os.path.join({records!r}, "git.json"))
"""


@dataclass
class Upstream:
    """The repository the gateway forwards to: a bare repository served over HTTP."""

    root: Path
    server: GitHttp
    url: str


@pytest.fixture
def upstream(tmp_path: Path, tls_app: TlsApp) -> Iterator[Upstream]:
    """The App's repository served by `git http-backend`, accepting the fake GitHub's tokens."""
    root = tmp_path / "git"
    bare_origin(root, tls_app.api.repo)
    server = GitHttp(root, accept=accept_minted(tls_app.api.fake))
    with LiveServer(server) as live:
        yield Upstream(root, server, live.url)


@pytest.mark.parametrize("given_as", ["file", "directory"])
def test_a_session_fetches_and_pushes_through_an_app_behind_a_private_ca(
    tmp_path: Path, tls_app: TlsApp, upstream: Upstream, given_as: str
) -> None:
    api = tls_app.api
    item = api.work_item(number=NUMBER, status=WorkItemStatus.RUNNING)
    with api.session() as db, db.begin():
        row = db.get(WorkItem, item)
        assert row is not None
        row.clone_url, row.branch = f"{upstream.url}/{api.repo}.git", BRANCH
        token = mint_session_token(db, item, datetime.now(UTC))
    harness = HARNESS.replace("PUBLIC_CAS", PUBLIC_CAS).replace("PUBLIC_CA_DIR", PUBLIC_CA_DIR)
    standin = StandIn(tmp_path, harness)
    ca = tls_app.ca if given_as == "file" else hashed_ca_dir(tls_app.ca, tmp_path / "ca-dir")
    job = spawn_job(upstream.root / f"{api.repo}.git", item=item, prompt="Push your work.")
    job = replace(job, payload=job.payload.model_copy(update={"branch": BRANCH}))
    with tls_spawner(tmp_path, tls_app, standin, ca, **AUTHOR_ENV) as ctx:
        run_ok(ctx, replace(job, session_token=token))
        report_file = standin.records / "git.json"
        wait_for(report_file.exists, timeout=180)
    report = json.loads(report_file.read_text())

    # The session names the App as the operator does (by name, through the proxy; or on
    # loopback, relayed), and its origin is the App's gateway there.
    assert report["url"] == tls_app.url
    assert report["origin"] == [0, f"{tls_app.url}/git/{api.repo}.git\n"]
    # Without the private CA, git refuses the App's certificate: verification is on.
    refused = report["public_only"]
    assert refused[0] != 0 and "server certificate verification failed" in refused[1]
    for step in ("fetch", "add", "commit", "push"):
        assert report[step][0] == 0, (step, report[step][1])
    # The work branch, with the session's commit, is on the git server.
    pushed = report["head"][1].strip()
    assert head_sha(upstream.root, api.repo, BRANCH) == pushed
    assert upstream.server.pushes == 1
    # Its checkout trusts the spawner's CA for the App alone, at the path the sandbox shows.
    key = "sslcainfo" if given_as == "file" else "sslcapath"
    assert report["trust"] == [0, f"http.{tls_app.url}/.{key} {os.path.realpath(ca)}\n"]
