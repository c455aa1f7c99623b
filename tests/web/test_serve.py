"""`the-loop serve` as processes: what its gunicorn workers set up for themselves, and how
they stop."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import httpx
import pytest

from app.fleet.tokens import create_token
from app.store.tables import Spawner
from tests.support import fixture_bytes, forked_workers, post_webhook, served_app, wait_for

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling")


def thread_ids(pid: int) -> list[int]:
    return [int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()]


def test_the_workers_and_every_thread_they_start_are_batch_work(settings_env):
    with served_app(settings_env) as app:
        assert app.pid is not None
        # a routed delivery starts the ingest writer; the inbox workers run from the start
        response = post_webhook(
            app.url, "issue_comment", fixture_bytes("github/issue_comment.created.json")
        )
        assert response.status_code == 202
        # answered: the writer and inbox workers are running
        worker = wait_for(lambda: forked_workers(app.pid), timeout=30)[0]
        policies = {tid: os.sched_getscheduler(tid) for tid in thread_ids(worker)}
        assert set(policies.values()) == {os.SCHED_BATCH}, policies
        # the arbiter only watches its workers and is left as it was started
        assert os.sched_getscheduler(app.pid) == os.sched_getscheduler(0)


def test_stopping_the_app_answers_a_spawner_s_waiting_job_poll_at_once(settings_env):
    """A spawner's job poll waits up to 30 s for work; stopping the App answers it "no job"
    rather than holding the stop for it and then cutting it off."""
    answers: list[httpx.Response | Exception] = []
    with served_app(settings_env) as app:
        assert app.pid is not None
        with app.state.sessions() as session, session.begin():
            token = create_token(session, "devbox", [])

        def poll() -> None:
            try:
                answers.append(
                    httpx.get(
                        f"{app.url}/spawner/v1/jobs?wait=30",
                        headers={"Authorization": f"Bearer {token}"},
                        timeout=60,
                    )
                )
            except httpx.HTTPError as exc:
                answers.append(exc)

        poller = threading.Thread(target=poll)
        poller.start()

        def polling() -> bool:  # the poll has been seen, and waits
            with app.state.sessions() as session:
                return any(s.last_seen is not None for s in session.query(Spawner))

        wait_for(polling, timeout=30)
        os.killpg(app.pid, signal.SIGTERM)
        poller.join(timeout=60)
    (answer,) = answers
    assert isinstance(answer, httpx.Response), answer  # not cut off unanswered
    assert answer.status_code == 204
