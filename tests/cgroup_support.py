"""The cgroups the tests' spawners made, removed at the end of the run (registered as a
plugin in tests/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.spawner.confine.cgroups import release_spawners_under


@pytest.fixture(scope="session", autouse=True)
def spawners_cgroups_released(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end of the run, the cgroups of every spawner whose state directory lay in this
    run's temporary directories or its HOME (the tests' `the-loop up`s and contexts) are emptied and
    removed: a spawner leaves its live sessions' cgroups behind, and a test's sessions die
    with its tmux server. Other runs' spawners (other tags) are never touched."""
    yield
    release_spawners_under([tmp_path_factory.getbasetemp(), Path(os.environ["HOME"])])
