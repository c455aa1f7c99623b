"""Work items whose readable names collide get their own pane, clone and follow-ups, and a
session is only ever acted on by the record that owns it (real tmux, git, stand-in)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.spawner.context import SpawnerContext
from app.spawner.jobkinds import followup_text
from tests.jobs_support import (
    deliver_job,
    run_ok,
    spawn_job,
)
from tests.spawner_support import StandIn
from tests.support import wait_for

LONG = "o" * 39 + "/" + "r" * 60  # a 100-character owner/repo
PAIRS = {
    "owner-repo-dash": ("github:acme-web/api#1", "github:acme/web-api#1"),
    "dot-dash": ("github:acme/x.y#7", "github:acme/x-y#7"),
    "long-repo": (f"github:{LONG}#1", f"github:{LONG}#2"),
}


@pytest.mark.parametrize("pair", list(PAIRS.values()), ids=list(PAIRS))
def test_colliding_readable_names_get_separate_panes_clones_and_followups(
    ctx: SpawnerContext, standin: StandIn, origin: Path, pair: tuple[str, str]
) -> None:
    results = {item: run_ok(ctx, spawn_job(origin, item=item)) for item in pair}
    starts = {item: standin.wait_start(item) for item in pair}
    one, two = pair
    assert results[one]["tmux_target"] != results[two]["tmux_target"]
    assert starts[one]["cwd"] != starts[two]["cwd"]
    assert results[one]["checkout"] == starts[one]["cwd"]
    panes = ctx.runner.panes()
    for item in pair:
        record = ctx.registry.get(item)
        assert record is not None and panes[record.tmux_session].owner == item
        assert not panes[record.tmux_session].dead
        wait_for(lambda i=item: (standin.folder(i) / "stdin.bin").exists())
    for item in pair:
        result = run_ok(ctx, deliver_job(origin, f"only for {item}", item=item))
        assert result["respawned"] is False
    for item, other in (pair, pair[::-1]):
        text = followup_text(deliver_job(origin, f"only for {item}", item=item).payload)
        wait_for(lambda i=item, t=text: t.replace("\n", "\r").encode() in standin.stdin(i))
        assert f"only for {other}".encode() not in standin.stdin(item)
    assert len(standin.starts(one)) == len(standin.starts(two)) == 1


def test_a_pane_of_the_records_name_that_another_item_owns_is_never_pasted_into(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    mine, theirs = "github:o/r#7", "github:o/r#8"
    run_ok(ctx, spawn_job(origin, item=theirs))
    standin.wait_start(theirs)
    wait_for(lambda: (standin.folder(theirs) / "stdin.bin").exists())
    # A stale record of `mine` that names the other item's pane (as an older, colliding
    # naming scheme could leave behind).
    run_ok(ctx, spawn_job(origin, item=mine))
    standin.wait_start(mine)
    foreign = ctx.registry.get(theirs)
    assert foreign is not None
    ctx.registry.update(mine, tmux_session=foreign.tmux_session)
    ok = run_ok(ctx, deliver_job(origin, "for mine only", item=mine))
    assert ok["respawned"] is True  # not pasted into the foreign pane: relaunched as its own
    assert b"for mine only" not in standin.stdin(theirs)
    assert ctx.runner.pane(foreign.tmux_session) is not None
    assert ctx.runner.owner(foreign.tmux_session) == theirs
