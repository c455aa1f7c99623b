"""The push credential: `the-loop git-credential` as git's helper in the session's checkout.
Refused for a dead session, for any other repository or host, with a revoked session token
and for a spawner's token; the push then fails with the reason on git's stderr, and no
write token is minted. Real App, git, git-over-HTTP and tmux; fake GitHub."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from app.commands.agent_tools import ToolError
from app.commands.git_credential import read_request, render_answer
from app.fleet.git_access import same_repository
from app.fleet.tokens import revoke_session_tokens
from app.store.tables import WorkItemStatus
from tests.pull_support import ITEM, REPO, agent, bare_origin
from tests.support import wait_for


def write_tokens(fake) -> list[str]:
    """Tokens minted for a push (the App's own API tokens carry the installation's scope)."""
    return [t for t, m in fake.tokens.items() if m.get("permissions") == {"contents": "write"}]


def try_push(live, *target: str) -> subprocess.CompletedProcess[str]:
    (live.checkout / "change.txt").write_text("x\n")
    agent(live.env, live.checkout, "git", "add", "change.txt")
    agent(live.env, live.checkout, "git", "commit", "-q", "-m", "change")
    return agent(live.env, live.checkout, "git", "push", *target)


def test_a_dead_session_gets_no_credential(live):
    bed = live.bed
    exited = {"event": "session.exited", "work_item": ITEM, "reported_ts": "2026-01-01T00:00:00Z"}
    assert live.spawner.events(exited).status_code == 200
    wait_for(lambda: bed.item().state == WorkItemStatus.EXITED)
    pushed = try_push(live)
    assert pushed.returncode != 0
    assert (
        "no credential" in pushed.stderr and "has no live session (it is exited)" in pushed.stderr
    )
    assert write_tokens(bed.fake) == [] and bed.git.pushes == 0
    (refused,) = bed.events("git.credential_refused")
    assert "no live session" in refused["reason"]


def test_another_repository_gets_no_credential(live):
    bed = live.bed
    bare_origin(Path(bed.fake.git_root), "Codertocat/Other")
    other = bed.clone_url("Codertocat/Other")
    pushed = try_push(live, other, "HEAD:refs/heads/stolen")
    assert pushed.returncode != 0
    assert f"credentials are given only for {REPO}" in pushed.stderr
    assert write_tokens(bed.fake) == [] and bed.git.pushes == 0

    # The same repository name on another host: the token never leaves for it.
    asked = "protocol=https\nhost=github.com\npath=Codertocat/Hello-World.git\n\n"
    helper = subprocess.run(
        [sys.executable, "-m", "app.cli", "git-credential", "get"],
        input=asked,
        env=live.env,
        cwd=live.checkout,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert helper.returncode == 1 and helper.stdout == ""
    assert "not https://github.com/Codertocat/Hello-World.git" in helper.stderr


def test_a_revoked_session_token_gets_no_credential(live):
    bed = live.bed
    with Session(bed.app.state.engine) as db, db.begin():
        assert revoke_session_tokens(db, ITEM) >= 1
    pushed = try_push(live)
    assert pushed.returncode != 0 and "a valid token is required" in pushed.stderr
    assert write_tokens(bed.fake) == []


def test_a_spawner_token_is_not_a_push_credential(live):
    bed = live.bed
    answer = live.spawner.client.post(
        "/git-credential",
        json={"work_item": ITEM, "protocol": "http", "host": "x", "path": f"{REPO}.git"},
    )
    assert answer.status_code == 403 and "session's own token" in answer.json()["error"]
    nobody = httpx.post(f"{bed.app.url}/spawner/v1/git-credential", json={}, timeout=10)
    assert nobody.status_code == 401  # the door asks for a credential before any body
    assert write_tokens(bed.fake) == []


def test_the_helper_stores_and_erases_nothing(live):
    for operation in ("store", "erase"):
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "git-credential", operation],
            input="protocol=http\nhost=h\nusername=x-access-token\npassword=p\n\n",
            env=live.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0 and done.stdout == ""
    assert write_tokens(live.bed.fake) == []


@pytest.mark.parametrize(
    ("url", "protocol", "host", "path", "same"),
    [
        ("https://github.com/o/r.git", "https", "github.com", "o/r.git", True),
        ("https://github.com/o/r.git", "https", "GitHub.com", "O/R", True),
        ("http://127.0.0.1:8000/o/r.git", "http", "127.0.0.1:8000", "o/r.git", True),
        ("http://127.0.0.1:8000/o/r.git", "http", "127.0.0.1:8001", "o/r.git", False),
        ("https://github.com/o/r.git", "http", "github.com", "o/r.git", False),
        ("https://github.com/o/r.git", "https", "github.com", "o/other.git", False),
        ("https://github.com/o/r.git", "https", "github.com", "", False),
        ("file:///srv/o/r.git", "https", "", "srv/o/r.git", False),
    ],
)
def test_same_repository(url: str, protocol: str, host: str, path: str, same: bool) -> None:
    assert same_repository(url, protocol, host, path) is same


def test_the_helper_speaks_gits_credential_protocol() -> None:
    import io

    asked = read_request(
        io.StringIO("protocol=https\nhost=h\npath=o/r.git\nwwwauth[]=x\n\nafter=1\n")
    )
    assert asked == {"protocol": "https", "host": "h", "path": "o/r.git"}
    text = render_answer(
        {
            "username": "x-access-token",
            "password": "ghs_x",
            "expires_at": "2030-01-01T00:00:00+00:00",
        }
    )
    assert text == "username=x-access-token\npassword=ghs_x\npassword_expiry_utc=1893456000\n"
    with pytest.raises(ToolError):
        render_answer({"username": "x", "password": "a\nusername=evil"})
