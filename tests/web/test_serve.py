"""`the-loop serve` as processes: what its gunicorn workers set up for themselves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
