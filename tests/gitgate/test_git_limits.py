"""One session cannot take the App's threads through the git gateway: its git requests in
flight are capped per session token (past the cap, 503 in git's text/plain) while
`/healthz` and the spawners' API go on answering, and a git body that goes quiet is cut.

Real App as `the-loop serve` deploys it (gunicorn's asgi worker) and as plain WSGI under
gunicorn's stock threaded worker (fewer threads than the requests opened): the caps are the
App's own, whatever front serves it. Real database, git server and tmux; the trickling
requests are raw sockets on loopback.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.ingress.sampling import PER_MINUTE
from tests.pull_support import REPO
from tests.support import wait_for
from tests.trickle_support import Tricklers, status_of

IDLE_SECONDS = 3
# More than the App's request threads: 32 under `the-loop serve`, GUNICORN_THREADS under
# plain gunicorn.
TRICKLERS = 40
HEALTHZ_SECONDS = 15.0  # generous: left to plain gunicorn, `/healthz` waited far longer


@pytest.fixture
def tricklers(live) -> Iterator[Tricklers]:
    port = int(live.bed.app.url.rsplit(":", 1)[1])
    opened = Tricklers(port, live.env["THE_LOOP_SESSION_TOKEN"], TRICKLERS, REPO)
    try:
        yield opened
    finally:
        opened.close()


@pytest.mark.app_env(THE_LOOP_GIT_IDLE_SECONDS=str(IDLE_SECONDS))
@pytest.mark.parametrize("pull_app", ["asgi", "gunicorn"], indirect=True)
def test_a_session_trickling_git_bodies_starves_nobody(live, tricklers: Tricklers):
    bed = live.bed
    opened = len(tricklers.socks)
    # All but the session's share are refused at once, in words git shows its user.
    assert wait_for(lambda: tricklers.collect() >= opened - 2, timeout=120)
    busy = list(tricklers.answers.values())
    assert {status_of(a) for a in busy} == {503}
    assert all(b"text/plain" in a and b"the-loop: too many git requests" in a for a in busy)
    # Counted, with a sampled few stored: the refusals cost no row each.
    rejected = [r for r in bed.events("request.rejected") if r["reason"] == "git-busy"]
    assert rejected and all(r["cap"] == "holder" for r in rejected)
    assert len(rejected) <= 2 * PER_MINUTE < opened - 2
    # Meanwhile (two bodies still trickle in) the App answers everyone else.
    assert httpx.get(f"{bed.app.url}/healthz", timeout=120).status_code == 200
    assert live.spawner.poll().status_code in (200, 204)
    assert tricklers.collect() == opened - 2  # the session's two are still being read

    # Once they go quiet they are cut, and the session's git works again.
    tricklers.alive.clear()
    assert wait_for(lambda: tricklers.collect() == opened, timeout=120)
    cut = [a for a in tricklers.answers.values() if status_of(a) != 503]
    assert [status_of(a) for a in cut] == [408, 408]
    assert all(b"no byte of the body came" in a for a in cut)
    fetched = httpx.get(
        f"{bed.app.url}/git/{REPO}.git/info/refs",
        params={"service": "git-upload-pack"},
        auth=("x", live.env["THE_LOOP_SESSION_TOKEN"]),
        timeout=30,
    )
    assert fetched.status_code == 200 and b"refs/heads/main" in fetched.content


@pytest.mark.app_env(THE_LOOP_GIT_IDLE_SECONDS=str(IDLE_SECONDS))
@pytest.mark.parametrize("pull_app", ["gunicorn"], indirect=True)
def test_under_plain_gunicorn_refused_trickling_git_requests_leave_healthz_answering(
    live, tricklers: Tricklers
):
    """Far more refusals than threads, whose clients all go on sending. Left to itself,
    gunicorn would read each refused body on a thread for seconds, then linger on it for
    seconds more on its one main thread, the thread that accepts every connection: the
    refusals' connections are closed at once instead, and `/healthz` answers each time."""
    url = live.bed.app.url
    for _ in range(4):
        assert httpx.get(f"{url}/healthz", timeout=HEALTHZ_SECONDS).status_code == 200
        tricklers.collect()
    assert wait_for(lambda: tricklers.collect() >= TRICKLERS - 2, timeout=120)
    assert {status_of(a) for a in tricklers.answers.values()} == {503}
    assert httpx.get(f"{url}/healthz", timeout=HEALTHZ_SECONDS).status_code == 200
    assert live.spawner.poll().status_code in (200, 204)
