"""An execute's confirmation comment is posted after the spawn job is committed, by the
progress publisher, and still exactly once when the App dies before posting it: the App
over HTTP (in this process, and as `the-loop serve` processes killed with SIGKILL), a real
database and the fake GitHub."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.gate.markers import MarkerKind, find_marker
from app.store.engines import make_engine
from app.store.tables import Delivery, Event, InboxState, JobKind, WorkItem, aware
from app.workitems.flow.states import Happened, transition
from app.workitems.tell.progress import ProgressPublisher
from tests.fakes.github_api import FakeGitHub, Recorded
from tests.gate_support import (
    ITEM,
    REPO,
    checklist_comments,
    comment,
    deliver,
    item_row,
    jobs,
    labeled,
    marked,
)
from tests.support import free_port, healthy, post_webhook, wait_for

ROOT = Path(__file__).resolve().parents[2]


def posted(fake: FakeGitHub, kind: MarkerKind) -> list[Recorded]:
    """The App's requests that posted a comment of `kind` on the issue, in order."""
    return [
        r
        for r in fake.calls("POST", r"/issues/1/comments$")
        if (m := find_marker((r.json or {}).get("body"))) and m.kind == kind
    ]


def test_the_spawn_job_is_committed_before_the_confirmation_is_posted(running_app, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    deliver(running_app, "issues", labeled(), "label-1")
    deliver(running_app, "issue_comment", comment("the-loop execute"), "exec-1")

    (confirmation,) = wait_for(lambda: marked(fake, MarkerKind.CONFIRMATION))
    assert confirmation["body"].startswith("### the-loop: starting")
    (spawn,) = jobs(running_app, JobKind.SPAWN)
    (post,) = posted(fake, MarkerKind.CONFIRMATION)
    assert aware(spawn.created_at) < post.at  # the job did not wait for GitHub
    wait_for(lambda: item_row(running_app).confirmation_comment_id == confirmation["id"])
    # The issue reads in order: checklist, confirmation, then the run's progress comment.
    wait_for(lambda: posted(fake, MarkerKind.PROGRESS))
    order = [c["id"] for c in fake.issue_comments(REPO, 1)]
    progress = marked(fake, MarkerKind.PROGRESS)[0]["id"]
    assert order.index(checklist_comments(fake)[0]["id"]) < order.index(confirmation["id"])
    assert order.index(confirmation["id"]) < order.index(progress)


def test_a_change_during_a_slow_post_lets_no_second_publisher_post_it_again(
    running_app, fake_github
):
    """Every App process runs a publisher, and an item changes while a pass posts (here
    GitHub refuses the confirmation's first post, which is tried again after a pause, and
    the spawn is claimed meanwhile). A second publisher looking every 50 ms never takes an
    item another pass holds: the issue gets one confirmation and one progress comment."""
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    deliver(running_app, "issues", labeled(), "label-1")
    fake.fail_next(r"/issues/1/comments$", 502, method="POST")
    other = ProgressPublisher(
        running_app.state.services, running_app.state.sessions, running_app.state.watch, poll=0.05
    )
    other.start()  # another process's publisher, looking every 50 ms
    try:
        deliver(running_app, "issue_comment", comment("the-loop execute"), "exec-1")
        wait_for(lambda: fake.failures_left() == 0)  # the first post was refused
        with running_app.state.sessions() as db, db.begin():
            transition(db.get(WorkItem, ITEM), Happened.SPAWN_CLAIMED)  # as a spawner does
        wait_for(lambda: item_row(running_app).confirmation_comment_id is not None, timeout=30)
        wait_for(lambda: marked(fake, MarkerKind.PROGRESS))
        wait_for(lambda: item_row(running_app).progress_due_at is None)
    finally:
        other.stop()
    assert len(marked(fake, MarkerKind.CONFIRMATION)) == 1
    assert len(marked(fake, MarkerKind.PROGRESS)) == 1


def serve(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """`the-loop serve` with one inbox worker, healthy when returned."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--workers", "1"],
        cwd=ROOT,
        env={**env, "PORT": str(port), "THE_LOOP_INBOX_WORKERS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for(lambda: healthy(url) or proc.poll() is not None, timeout=60)
    assert proc.poll() is None, "the-loop serve exited"
    return proc, url


def kill(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def handled(engine: Engine, delivery: str) -> bool:
    with Session(engine) as session:
        state = session.scalars(
            select(Delivery.state).where(Delivery.delivery_id == delivery)
        ).one_or_none()
        return state == InboxState.DONE


def failures(engine: Engine) -> int:
    with Session(engine) as session:
        return len(session.scalars(select(Event).where(Event.event == "progress.failed")).all())


def test_a_confirmation_the_app_died_before_posting_is_posted_once_after_restart(
    settings_env, fake_github
):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    env = {**os.environ, **settings_env}
    engine = make_engine(settings_env["DATABASE_URL"])
    app, url = serve(env)
    try:
        post_webhook(url, "issues", labeled(), delivery="label-1")
        wait_for(lambda: handled(engine, "label-1") and checklist_comments(fake), timeout=30)
        # GitHub turns the confirmation's first attempt away (once); the App dies before
        # its publisher tries again, the spawn job already committed.
        fake.fail_next(r"/issues/1/comments$", 422)
        post_webhook(url, "issue_comment", comment("the-loop execute"), delivery="exec-1")
        wait_for(lambda: handled(engine, "exec-1") and failures(engine), timeout=30)
    finally:
        kill(app)
    assert len(jobs(engine, JobKind.SPAWN)) == 1
    assert marked(fake, MarkerKind.CONFIRMATION) == []
    assert item_row(engine).confirmation_owed is not None

    app, _url = serve(env)  # the restarted App finds what it owes the issue
    try:
        wait_for(lambda: item_row(engine).confirmation_owed is None, timeout=30)
    finally:
        kill(app)
    (confirmation,) = marked(fake, MarkerKind.CONFIRMATION)
    assert item_row(engine).confirmation_comment_id == confirmation["id"]
    assert len(posted(fake, MarkerKind.CONFIRMATION)) == 1
    engine.dispose()
