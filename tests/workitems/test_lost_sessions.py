"""A session whose spawner went silent, as the people on the issue and in Slack see it: the
item turns `lost` once, its progress comment and Slack thread say so, and an authorized
execute runs it again."""

from __future__ import annotations

import itertools
import json

import pytest

from app.gate.markers import is_marked
from app.store.tables import JobKind, WorkItemStatus
from tests.gate_support import REPO, comment
from tests.pull_support import Bed, running
from tests.support import wait_for

pytestmark = [
    pytest.mark.app_env(THE_LOOP_SPAWNER_DEAD_SECONDS="2"),
    pytest.mark.parametrize("database_url", ["sqlite"], indirect=True),
]
IDS = itertools.count(880_000_001)
LOST_WORDS = "lost: its spawner went silent"


def progress(bed: Bed) -> str:
    marked = [c for c in bed.fake.issue_comments(REPO, 1) if is_marked(c["body"], "progress")]
    return str(marked[0]["body"]) if marked else ""


def slack_says_lost(bed: Bed) -> int:
    """How many edits of the Slack thread's parent said the session is lost."""
    return sum(1 for u in bed.slack.updates if "*lost*" in json.dumps(u))


def test_a_silent_spawner_s_session_is_lost_once_and_an_execute_runs_it_again(bed: Bed) -> None:
    running(bed)  # the spawner reported its session, then says nothing more
    wait_for(lambda: bed.item().state == WorkItemStatus.LOST, timeout=60)
    wait_for(lambda: LOST_WORDS in progress(bed), timeout=60)
    wait_for(lambda: slack_says_lost(bed) >= 1, timeout=60)
    edits = bed.fake.calls("PATCH", r"/issues/comments/\d+$")
    assert sum(1 for r in edits if LOST_WORDS in str((r.json or {}).get("body"))) == 1
    assert slack_says_lost(bed) == 1
    assert len(bed.events("session.lost")) == 1

    bed.send("issue_comment", comment("the-loop execute", cid=next(IDS)))
    assert bed.item().state == WorkItemStatus.FROZEN
    assert len(bed.jobs(JobKind.SPAWN)) == 2  # a new session is on its way
