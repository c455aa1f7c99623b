"""`routing.maxSessions`, end to end: the App and a real spawner agent (tmux, git, a stand-in
harness) with room for one session. Two items are executed: one runs, the other waits and
its progress comment says where it stands in line, and it launches when the first ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.spawner.context import SpawnerContext
from app.store.tables import JobKind, JobState, WorkItem, WorkItemStatus
from tests.devbox_support import release, standin_yaml
from tests.gate_support import (
    ITEM,
    REPO,
    jobs,
    progress_of,
)
from tests.spawner_support import StandIn, bare_repository
from tests.support import wait_for

pytestmark = pytest.mark.admin_token  # the operator may read /status

SECOND = f"github:{REPO}#2"
SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def operator_yaml_of(standin: StandIn, tmp_path: Path) -> str:
    return standin_yaml(standin, tmp_path / "work", "maxSessions: 1")


OPERATOR_YAML = operator_yaml_of


def status_of(app: Any, work_item_id: str) -> str:
    with app.state.sessions() as session:
        item = session.get(WorkItem, work_item_id)
        return item.state if item is not None else ""


@SQLITE
def test_a_full_devbox_queues_the_second_item_until_the_first_session_ends(
    running_app: Any,
    fake_github: Any,
    standin_devbox: SpawnerContext,
    standin: StandIn,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    origin = bare_repository(tmp_path)
    release(running_app, fake, origin, "the-loop execute", number=1)
    standin.wait_start(ITEM, timeout=30)
    wait_for(lambda: status_of(running_app, ITEM) == WorkItemStatus.RUNNING, timeout=30)

    release(running_app, fake, origin, "the-loop execute", number=2)
    wait_for(lambda: "queued (1 of 1)" in progress_of(fake, 2), timeout=30)
    # The devbox has been polling all along: the second item is still waiting, unlaunched.
    assert standin.starts(SECOND) == []
    assert status_of(running_app, SECOND) == WorkItemStatus.FROZEN
    spawns = {j.work_item_id: j for j in jobs(running_app, JobKind.SPAWN)}
    assert spawns[SECOND].state == JobState.QUEUED

    first = standin_devbox.registry.get(ITEM)
    assert first is not None
    standin_devbox.runner.kill(first.tmux_session, owner=ITEM)  # the first session ends
    wait_for(lambda: status_of(running_app, ITEM) == WorkItemStatus.EXITED, timeout=30)
    start = standin.wait_start(SECOND, timeout=30)
    assert start["env"]["THE_LOOP_WORK_ITEM_ID"] == SECOND
    wait_for(lambda: status_of(running_app, SECOND) == WorkItemStatus.RUNNING, timeout=30)
    # The comment is edited on the App's schedule: `starting` may come between the two.
    wait_for(lambda: "**Session:** running" in progress_of(fake, 2), timeout=60)
    assert "queued" not in progress_of(fake, 2)
    tree = f"https://github.com/{REPO}/tree/the-loop/issue-2"
    assert f"**Branch:** [`the-loop/issue-2`]({tree})" in progress_of(fake, 2)
