"""The cgroups the tests' spawners made, removed at the end of the run (registered as a
plugin in tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config_sandbox import SessionLimits
from app.spawner.confine.cgroups import SessionLimiter, probe, spawner_tag
from app.spawner.confine.limits import LimitPlan, Mechanism


@pytest.fixture(scope="session", autouse=True)
def spawners_cgroups_released(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end of the run, the cgroups of every spawner whose state directory lay in this
    run's temporary directories or its HOME (the tests' `the-loop up`s and contexts) are emptied and
    removed: a spawner leaves its live sessions' cgroups behind, and a test's sessions die
    with its tmux server. Other runs' spawners (other tags) are never touched."""
    yield
    roots = [tmp_path_factory.getbasetemp(), Path(os.environ["HOME"])]  # the tests' HOME
    tags = {
        spawner_tag(Path(top) / name)
        for root in roots
        for top, names, _ in os.walk(root)  # no link followed
        for name in names
    }
    offer = probe("-")
    mine = [path.parent for path in offer.cgroup1.values()]
    mine += [offer.cgroup2.parent] if offer.cgroup2 is not None else []
    for directory in mine:
        for parent in directory.glob("the-loop.*"):
            if parent.name.removeprefix("the-loop.") in tags:
                plan = LimitPlan(Mechanism.CGROUP1, SessionLimits(), {"": parent})
                SessionLimiter(plan).release()
