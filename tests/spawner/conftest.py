"""Fixtures of the spawner's tests: contexts made by a test and ended at its teardown."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.spawner.launch import SpawnerContext


@pytest.fixture
def stopped() -> Iterator[list[SpawnerContext]]:
    """Contexts whose tmux servers are ended at teardown."""
    made: list[SpawnerContext] = []
    yield made
    for ctx in made:
        ctx.runner.kill_server()
        if ctx.limiter is not None:
            ctx.limiter.release()
        if ctx.models is not None:
            ctx.models.close()
