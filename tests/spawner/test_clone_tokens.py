"""A GitHub token reaches the devbox only for a clone, end to end: the App and a real
spawner agent (tmux, git, bubblewrap) with a stand-in harness, against the fake GitHub that
records every installation token it mints and revokes. A first spawn clones with one token,
revoked once the job is over; a follow-up pasted into the live session asks for none; a
relaunch whose checkout is gone asks again and clones afresh. A spawner that does not hold
the job, or whose lease on it lapsed, is refused the token and leaves the job alone: no
clone, no result that would fail a job offered again."""

from __future__ import annotations

import shutil
from contextlib import closing
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from app.audit import read_jsonl
from app.protocol import NOT_HELD
from app.spawner.agent import Agent, AgentOptions
from app.spawner.appclient import AppClient, AppUnavailable, NotHeld
from app.spawner.context import SpawnerContext
from app.spawner.jobkinds import run_job
from app.spawner.workspace.checkout import checkout_dir
from app.store.tables import JobKind, JobState, WorkItemStatus, aware
from tests.devbox_support import release, standin_yaml
from tests.gate_support import ITEM, comment, deliver, item_row
from tests.jobs_support import WI, spawn_job
from tests.spawner_support import StandIn, bare_repository
from tests.support import wait_for

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
# How serve_api runs this module's App: claims that do not lapse while a test runs (a clone
# token is only for a live lease); a test that needs a lapse moves the App's clock.
SHARED_API = {"lease_seconds": 600}


def operator_yaml_of(standin: StandIn, tmp_path: Path) -> str:
    return standin_yaml(standin, tmp_path / "work")


OPERATOR_YAML = operator_yaml_of


def clone_tokens(fake: Any) -> list[dict[str, Any]]:
    """What the fake GitHub minted for one repository (the App's own tokens are for all)."""
    return [facts for facts in fake.tokens.values() if facts["repositories"] is not None]


def events(ctx: SpawnerContext, name: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(ctx.events.path) if e["event"] == name]


def delivered(ctx: SpawnerContext, count: int) -> bool:
    return len(events(ctx, "session.delivered")) >= count


@SQLITE
def held_spawn(api: Any, number: int) -> tuple[str, str, int]:
    """Two registered spawners' tokens, the holder's first, and the id of issue `number`'s
    spawn job, which the holder has claimed."""
    holder, other = api.token("holder"), api.token("other")
    api.spawner(holder).register()
    api.spawner(other).register()
    item = api.work_item(number=number)
    job_id = api.queue(JobKind.SPAWN, f"spawn:{number}", item, installation_id=1)
    assert api.spawner(holder).job()["id"] == job_id
    return holder, other, job_id


def test_only_a_clone_gets_a_github_token_and_the_job_s_end_revokes_it(
    running_app: Any,
    fake_github: Any,
    standin_devbox: SpawnerContext,
    standin: StandIn,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    release(running_app, fake, bare_repository(tmp_path), "the-loop execute")
    standin.wait_start(ITEM, timeout=30)
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.RUNNING, timeout=30)
    (first,) = clone_tokens(fake)  # the first spawn cloned with exactly one
    assert first["repositories"] == ["Hello-World"]
    assert first["permissions"] == {"contents": "read", "metadata": "read"}
    wait_for(lambda: first["revoked"], timeout=30)  # revoked with the spawn's result
    assert len(events(standin_devbox, "workspace.cloned")) == 1

    # A follow-up pasted into the live session: no token minted for it.
    deliver(running_app, "issue_comment", comment("please also cover the empty list", cid=7), "c-7")
    wait_for(lambda: b"please also cover the empty list" in standin.stdin(ITEM), timeout=30)
    wait_for(lambda: any(r["target_id"] == 7 for r in fake.reactions), timeout=30)
    assert len(clone_tokens(fake)) == 1
    assert [e["respawned"] for e in events(standin_devbox, "session.delivered")] == [False]

    # The session gone, and its checkout with it: the next follow-up relaunches it, and the
    # clone that needs asks for a token of its own.
    checkout = checkout_dir(tmp_path / "work", ITEM)
    record = standin_devbox.registry.get(ITEM)
    assert record is not None
    standin_devbox.runner.kill(record.tmux_session, owner=ITEM)
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.EXITED, timeout=30)
    shutil.rmtree(checkout)
    deliver(running_app, "issue_comment", comment("start again from main", cid=8), "c-8")
    wait_for(lambda: delivered(standin_devbox, 2), timeout=60)
    assert events(standin_devbox, "session.delivered")[-1]["respawned"] is True
    assert (checkout / "README.md").read_text() == "hello\n"  # cloned afresh
    assert len(events(standin_devbox, "workspace.cloned")) == 2
    tokens = clone_tokens(fake)
    assert len(tokens) == 2 and tokens[1]["repositories"] == ["Hello-World"]
    wait_for(lambda: tokens[1]["revoked"], timeout=30)  # the deliver's end revoked it


@pytest.mark.parametrize("shared_api", ["sqlite"], indirect=True)
def test_a_spawner_not_holding_the_job_is_refused_its_token_and_leaves_the_job_alone(
    api: Any, ctx: SpawnerContext, origin: Path
) -> None:
    holder, other, job_id = held_spawn(api, 11)
    before = clone_tokens(api.fake)
    job = replace(spawn_job(origin), id=job_id)  # the job as the spawner runs it
    with closing(AppClient(api.url, other)) as stranger:
        ctx.ask_token = stranger.job_token
        with pytest.raises(NotHeld, match="not held by this spawner"):
            run_job(ctx, job)
    assert clone_tokens(api.fake) == before  # nothing minted for a stranger
    assert not checkout_dir(ctx.workspace_root, WI).exists()

    with closing(AppClient(api.url, holder)) as owner:
        ctx.ask_token = owner.job_token
        ok, _, error = run_job(ctx, job)
    assert ok, error
    (minted,) = [t for t in clone_tokens(api.fake) if t not in before]
    assert minted["repositories"] == ["Hello-World"] and not minted["revoked"]
    assert api.spawner(holder).result(job_id, session_id="s", tmux_target="t").status_code == 200
    assert minted["revoked"]


def test_a_lapsed_lease_gets_no_token_and_its_old_holder_leaves_the_job_to_the_next(
    api: Any, ctx: SpawnerContext, origin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease is long; the App's own clock is moved past it (no sleeping). The old holder
    is refused, clones nothing and reports no failure; the job goes to the next spawner."""
    holder, other, job_id = held_spawn(api, 12)
    before = clone_tokens(api.fake)
    lapsed = aware(api.job(job_id).lease_until) + timedelta(seconds=1)
    monkeypatch.setattr(api.state.services, "clock", lambda: lapsed)

    refused = api.spawner(holder).clone_token(job_id)
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == NOT_HELD and "lease lapsed" in refused.json()["error"]

    job = replace(spawn_job(origin), id=job_id)  # the job as the old holder runs it
    with closing(AppClient(api.url, holder)) as client:
        ctx.ask_token = client.job_token
        agent = Agent(ctx, client, AgentOptions(name="holder"))
        try:
            agent._handle(job)
        finally:
            agent._pool.shutdown()
    assert clone_tokens(api.fake) == before  # nothing minted for a lapsed lease
    assert not checkout_dir(ctx.workspace_root, WI).exists()
    (lost,) = events(ctx, "session.job_lost")
    assert lost["job"] == job_id and "lease lapsed" in lost["reason"]
    assert not events(ctx, "session.job_failed")
    assert api.job(job_id).state == JobState.CLAIMED  # no failure reported for it

    assert api.spawner(other).job()["id"] == job_id  # offered again
    granted = api.spawner(other).clone_token(job_id)
    assert granted.status_code == 200, granted.text
    (minted,) = [t for t in clone_tokens(api.fake) if t not in before]
    assert minted["repositories"] == ["Hello-World"] and not minted["revoked"]


def test_a_token_the_app_could_not_mint_is_asked_again_and_the_clone_goes_on(
    ctx: SpawnerContext, origin: Path
) -> None:
    """The App away or GitHub not minting (a 5xx: `AppUnavailable`) is asked again; a refusal
    (above) is not."""
    asks: list[int] = []

    def ask(job_id: int) -> str | None:
        asks.append(job_id)
        if len(asks) < 3:
            raise AppUnavailable("POST /jobs/1/token: 502 could not mint an installation token")
        return None  # the local origin needs no token

    ctx.ask_token = ask
    ok, _, error = run_job(ctx, spawn_job(origin))
    assert ok, error
    assert len(asks) == 3
    assert (checkout_dir(ctx.workspace_root, WI) / "README.md").read_text() == "hello\n"


def test_a_mint_that_keeps_failing_fails_the_job_saying_why(
    ctx: SpawnerContext, origin: Path
) -> None:
    def ask(job_id: int) -> str | None:
        raise AppUnavailable("POST /jobs/1/token: 502 could not mint an installation token")

    ctx.ask_token = ask
    ok, _, error = run_job(ctx, spawn_job(origin))
    assert not ok and error is not None
    assert "no token to clone" in error and "could not mint" in error
    assert not checkout_dir(ctx.workspace_root, WI).exists()
