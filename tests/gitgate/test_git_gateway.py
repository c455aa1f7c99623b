"""The App's git gateway, with the commands an agent runs in its checkout: `origin` is the App,
the credential helper gives only the session's token, and the App forwards fetches and the
work branch's pushes to the git server with its own installation token. A push to `main`,
a tag, a delete are refused with the reason on git's stderr and never reach the server; a
dead session, another repository, a spawner's token get nothing.

Real App, database, tmux, git over smart HTTP (`git http-backend` behind a loopback server
that accepts only the tokens the fake GitHub minted); a stand-in harness.
"""

from __future__ import annotations

import base64
import io
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from app.commands.git_credential import answer, read_request
from app.ingress.doors import GIT_MAX_BODY
from app.store.tables import SessionToken, WorkItemStatus
from tests.fakes.github_pulls import head_sha
from tests.pull_support import BRANCH, ITEM, REPO, agent, bare_origin
from tests.support import (
    fixture_json,
    wait_for,
    with_installation,
)


def commit(live, name: str = "change.txt") -> str:
    (live.checkout / name).write_text(f"{name}\n")
    for argv in (("git", "add", name), ("git", "commit", "-q", "-m", f"add {name}")):
        done = agent(live.env, live.checkout, *argv)
        assert done.returncode == 0, done.stderr
    return agent(live.env, live.checkout, "git", "rev-parse", "HEAD").stdout.strip()


def fill(live, url: str) -> subprocess.CompletedProcess[str]:
    """`git credential fill` for `url`, as the agent would run it."""
    scheme, rest = url.split("://", 1)
    host, _, path = rest.partition("/")
    asked = f"protocol={scheme}\nhost={host}\npath={path}\n\n"
    return subprocess.run(
        ["git", "credential", "fill"],
        input=asked,
        cwd=live.checkout,
        env=live.env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def server_refs(live) -> str:
    root = Path(live.bed.fake.git_root) / f"{REPO}.git"
    done = subprocess.run(
        ["git", "-C", str(root), "for-each-ref"], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_git_credential_fill_never_yields_a_github_token(live):
    bed = live.bed
    served = bed.git.authorized  # the spawner's clone
    origin = agent(live.env, live.checkout, "git", "remote", "get-url", "origin").stdout.strip()
    assert origin == f"{bed.app.url}/git/{REPO}.git"
    given = fill(live, origin)
    assert given.returncode == 0, given.stderr
    assert f"password={live.env['THE_LOOP_SESSION_TOKEN']}" in given.stdout
    assert "tlss_" in given.stdout and "ghs_" not in given.stdout
    # GitHub itself, or the git server the App forwards to: nothing at all.
    for url in (f"https://github.com/{REPO}.git", bed.clone_url()):
        refused = fill(live, url)
        assert "password=" not in refused.stdout and "ghs_" not in refused.stdout
        assert "a credential is given only for the App's git gateway" in refused.stderr
    assert bed.git.authorized == served  # nothing reached the server with anything


def test_the_work_branch_lands_and_everything_else_is_refused_with_its_reason(live):
    bed = live.bed
    sha = commit(live)
    before = server_refs(live)

    to_main = agent(live.env, live.checkout, "git", "push", "origin", "HEAD:main")
    assert to_main.returncode != 0
    assert "[remote rejected] HEAD -> main (a session may push only its work branch" in (
        to_main.stderr
    )
    assert "remote: the-loop refused this push: refs/heads/main" in to_main.stderr

    agent(live.env, live.checkout, "git", "tag", "v9")
    tag = agent(live.env, live.checkout, "git", "push", "origin", "v9")
    assert tag.returncode != 0 and "(a session may not push tags)" in tag.stderr

    both = agent(live.env, live.checkout, "git", "push", "origin", "HEAD", "v9")
    assert both.returncode != 0 and "refused with the rest of this push" in both.stderr
    assert server_refs(live) == before and bed.git.pushes == 0  # nothing reached the server

    pushed = agent(live.env, live.checkout, "git", "push")
    assert pushed.returncode == 0, pushed.stderr
    assert head_sha(bed.fake.git_root, REPO, BRANCH) == sha and bed.git.pushes == 1

    delete = agent(live.env, live.checkout, "git", "push", "origin", "--delete", BRANCH)
    assert delete.returncode != 0 and "(a session may not delete a ref)" in delete.stderr
    assert head_sha(bed.fake.git_root, REPO, BRANCH) == sha

    refused = bed.events("git.push_refused")
    assert [sorted(r["refused"]) for r in refused] == [
        ["refs/heads/main"],
        ["refs/tags/v9"],
        ["refs/tags/v9"],
        [f"refs/heads/{BRANCH}"],
    ]
    assert all(r["reason"].startswith("the-loop refused this push") for r in refused)
    (landed,) = bed.events("git.pushed")
    assert landed["refs"] == [f"refs/heads/{BRANCH}"]


@pytest.mark.parametrize("pull_app", ["wsgi", "asgi"], indirect=True)
def test_fetch_works_and_a_large_push_streams_through(live):
    bed = live.bed
    # Someone else's commit on main, fetched through the App.
    work = bed.tmp / "human"
    clone = subprocess.run(
        ["git", "clone", "-q", bed.clone_url(), str(work)],
        capture_output=True,
        text=True,
        env={**live.env, "GIT_ASKPASS": "true"},
    )
    assert clone.returncode != 0  # the git server wants a token: only the App holds one
    origin = Path(bed.fake.git_root) / f"{REPO}.git"
    subprocess.run(["git", "clone", "-q", str(origin), str(work)], check=True)
    (work / "news.txt").write_text("news\n")
    env = {**live.env, "GIT_DIR": str(work / ".git"), "GIT_WORK_TREE": str(work)}
    for argv in (["add", "news.txt"], ["commit", "-q", "-m", "news"], ["push", "-q"]):
        subprocess.run(["git", *argv], env=env, check=True, capture_output=True)
    fetched = agent(live.env, live.checkout, "git", "fetch", "origin")
    assert fetched.returncode == 0, fetched.stderr
    listed = agent(live.env, live.checkout, "git", "log", "-1", "--format=%s", "origin/main")
    assert listed.stdout.strip() == "news"

    # Over git's post buffer (1 MiB): a chunked body, after git's "0000" probe.
    (live.checkout / "big.bin").write_bytes(bytes(range(256)) * 12 * 1024 + b"x")
    sha = commit(live, "big.bin")
    pushed = agent(live.env, live.checkout, "git", "-c", "core.compression=0", "push")
    assert pushed.returncode == 0, pushed.stderr
    assert head_sha(bed.fake.git_root, REPO, BRANCH) == sha


def test_an_ended_session_reaches_nothing(live):
    bed = live.bed
    commit(live)
    assert agent(live.env, live.checkout, "git", "fetch", "origin").returncode == 0
    exited = {
        "event": "session.exited",
        "work_item_id": ITEM,
        "reported_ts": "2026-01-01T00:00:00Z",
    }
    assert live.spawner.events(exited).status_code == 200
    wait_for(lambda: bed.item().state == WorkItemStatus.EXITED)
    with bed.app.state.sessions() as db:
        assert db.scalars(select(SessionToken).where(SessionToken.work_item_id == ITEM)).all() == []
    for argv in (("git", "fetch", "origin"), ("git", "push")):
        done = agent(live.env, live.checkout, *argv)
        assert done.returncode != 0
        assert "Authentication failed" in done.stderr, done.stderr
    assert bed.git.pushes == 0
    answered = httpx.get(
        f"{bed.app.url}/git/{REPO}.git/info/refs",
        params={"service": "git-upload-pack"},
        auth=("x", live.env["THE_LOOP_SESSION_TOKEN"]),
        timeout=10,
    )
    assert answered.status_code == 401 and "WWW-Authenticate" in answered.headers


def test_a_closed_issue_stops_git_at_once(live):
    bed = live.bed
    closed = with_installation(fixture_json("github/issues.closed.json"))
    closed["repository"] = fixture_json("github/issues.labeled.json")["repository"]
    closed["issue"]["number"] = 1
    bed.send("issues", closed)
    assert bed.item().state == WorkItemStatus.STOPPED
    done = agent(live.env, live.checkout, "git", "fetch", "origin")
    assert done.returncode != 0 and "Authentication failed" in done.stderr
    assert "this session token is not live" in done.stderr
    said = agent(live.env, live.checkout, "the-loop", "comment", "still here")
    assert said.returncode != 0  # the token is dead everywhere, not only for git


def test_another_repository_and_other_credentials_get_nothing(live):
    bed = live.bed
    served = bed.git.authorized  # the spawner's clone
    bare_origin(Path(bed.fake.git_root), "Codertocat/Other")
    commit(live)
    other = f"{bed.app.url}/git/Codertocat/Other.git"
    pushed = agent(live.env, live.checkout, "git", "push", other, f"HEAD:refs/heads/{BRANCH}")
    assert pushed.returncode != 0
    assert f"this session may reach only {REPO}" in pushed.stderr
    assert bed.git.pushes == 0

    url = f"{bed.app.url}/git/{REPO}.git/info/refs"
    service = {"service": "git-receive-pack"}
    nobody = httpx.get(url, params=service, timeout=10)
    assert nobody.status_code == 401 and nobody.headers["WWW-Authenticate"].startswith("Basic")
    spawner_token = live.spawner.client.headers["Authorization"].removeprefix("Bearer ")
    spawner = httpx.get(url, params=service, auth=("x", spawner_token), timeout=10)
    assert spawner.status_code == 401
    dumb = httpx.get(
        f"{bed.app.url}/git/{REPO}.git/HEAD",
        auth=("x", live.env["THE_LOOP_SESSION_TOKEN"]),
        timeout=10,
    )
    assert dumb.status_code in (404, 405)  # no dumb HTTP
    push = f"{bed.app.url}/git/{REPO}.git/git-receive-pack"
    session = ("x", live.env["THE_LOOP_SESSION_TOKEN"])
    garbage = httpx.post(push, content=b"zzzz not a pkt-line", auth=session, timeout=10)
    assert garbage.status_code == 400 and "cannot be read" in garbage.text
    (unreadable,) = bed.events("git.push_refused")
    assert "four hex digits" in unreadable["reason"]
    packed = {"Content-Encoding": "gzip"}
    zipped = httpx.post(push, content=b"0000", headers=packed, auth=session, timeout=10)
    assert zipped.status_code == 415
    assert bed.git.authorized == served and bed.git.pushes == 0


def test_the_helper_speaks_gits_credential_protocol() -> None:
    asked = read_request(
        io.StringIO("protocol=https\nhost=h\npath=o/r.git\nwwwauth[]=x\n\nafter=1\n")
    )
    assert asked == {"protocol": "https", "host": "h", "path": "o/r.git"}
    env = {"THE_LOOP_URL": "https://loop.example/app/", "THE_LOOP_SESSION_TOKEN": "tlss_x"}
    gateway = {"protocol": "https", "host": "LOOP.example", "path": "app/git/o/r.git"}
    assert answer(gateway, env) == "username=the-loop-session\npassword=tlss_x\n"
    for wrong in (
        {**gateway, "protocol": "http"},
        {**gateway, "host": "github.com"},
        {**gateway, "path": "o/r.git"},
    ):
        with pytest.raises(LookupError, match="only for the App's git gateway"):
            answer(wrong, env)
    with pytest.raises(LookupError, match="not inside a the-loop session"):
        answer(gateway, {"THE_LOOP_URL": "https://loop.example"})


@pytest.mark.parametrize("pull_app", ["asgi"], indirect=True)
def test_the_asgi_front_checks_the_git_door_before_any_body(live):
    bed = live.bed
    url = f"{bed.app.url}/git/{REPO}.git/git-receive-pack"
    nobody = httpx.post(url, content=b"0000", timeout=10)
    assert nobody.status_code == 401 and nobody.headers["WWW-Authenticate"].startswith("Basic")
    token = live.env["THE_LOOP_SESSION_TOKEN"]
    basic = base64.b64encode(f"x:{token}".encode()).decode()
    port = int(bed.app.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(  # only the headers: the door answers before any of the body
            f"POST /git/{REPO}.git/git-receive-pack HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Basic {basic}\r\nContent-Length: {GIT_MAX_BODY + 1}\r\n\r\n".encode()
        )
        status_line = raw.recv(4096).split(b"\r\n", 1)[0]
    assert status_line.split()[1] == b"413"
    commit(live)
    to_main = agent(live.env, live.checkout, "git", "push", "origin", "HEAD:main")
    assert "(a session may push only its work branch the-loop/issue-1)" in to_main.stderr
    assert bed.git.pushes == 0
