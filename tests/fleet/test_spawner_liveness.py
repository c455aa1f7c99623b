"""A spawner's liveness: the arithmetic (pure), the one sweep that counts a silent spawner
dead, and the heartbeat that brings a lost session back, against the real App."""

from __future__ import annotations

import itertools
import logging
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.fleet.liveness import LOOK_EVERY, SpawnerSweep, is_dead, look_due, sweep
from app.store.tables import Job, JobKind, JobState, Spawner, WorkItem, WorkItemStatus
from tests.spawnerapi_support import Api, SpawnerClient

S = WorkItemStatus
NOW = datetime(2026, 12, 6, 3, 0, 30, tzinfo=UTC)
DEAD = timedelta(seconds=30)
SHARED_API = {"extra_env": {"THE_LOOP_SPAWNER_DEAD_SECONDS": "3600"}}  # the tests sweep


@pytest.mark.parametrize(
    ("silent", "dead"),
    [(None, False), (0, False), (29, False), (30, False), (31, True), (86400, True)],
)
def test_a_spawner_is_dead_once_silent_past_the_window(silent: int | None, dead: bool) -> None:
    seen = None if silent is None else NOW - timedelta(seconds=silent)
    assert is_dead(seen, NOW, DEAD) is dead


def test_a_naive_last_seen_counts_as_utc() -> None:  # SQLite gives naive datetimes back
    seen = (NOW - timedelta(seconds=31)).replace(tzinfo=None)
    assert is_dead(seen, NOW, DEAD)


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=300))
def test_the_look_comes_once_per_minute_however_often_a_spawner_calls(
    start: int, every: int
) -> None:
    """Calls every `every` seconds for an hour: one look per minute slice, never two."""
    base = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=start)
    seen: datetime | None = None
    looks: list[datetime] = []
    for step in range(0, 3600, every):
        now = base + timedelta(seconds=step)
        if look_due(seen, now):
            looks.append(now)
        seen = now
    slices = [int(t.timestamp() // LOOK_EVERY.total_seconds()) for t in looks]
    assert len(slices) == len(set(slices))  # never two in a slice
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(looks)]
    assert all(gap <= max(every, 60) + 60 for gap in gaps)  # and one in every minute or so


def test_the_first_call_is_a_look() -> None:
    assert look_due(None, NOW)
    assert not look_due(NOW - timedelta(seconds=1), NOW)  # 03:00:29 → 03:00:30: same minute
    assert look_due(NOW - timedelta(seconds=31), NOW)  # 02:59:59 → 03:00:30: a new one


def _spawner(api: Api, name: str) -> tuple[int, SpawnerClient]:
    client = api.spawner(api.token(name))
    registered = client.register(name=name)
    assert registered.status_code == 200
    return int(registered.json()["spawner_id"]), client


def _silence(api: Api, spawner_id: int, seconds: float) -> datetime:
    with api.session() as db, db.begin():
        row = db.get(Spawner, spawner_id)
        assert row is not None
        row.last_seen = datetime.now(UTC) - timedelta(seconds=seconds)
    return datetime.now(UTC)


def test_the_sweep_loses_a_dead_spawner_s_sessions_once_and_spares_the_living(api: Api) -> None:
    dead_id, _ = _spawner(api, "dead-box")
    live_id, _ = _spawner(api, "live-box")
    on_dead = {"spawner_id": dead_id, "spawner": "dead-box"}
    running = api.work_item(1, status=S.RUNNING, session=on_dead)
    stalled = api.work_item(2, status=S.STALLED, session=on_dead)
    exited = api.work_item(3, status=S.EXITED, session=on_dead)  # nothing runs: nothing lost
    elsewhere = api.work_item(4, status=S.RUNNING, session={"spawner_id": live_id})
    starting = api.work_item(5, status=S.FROZEN)  # its spawn claimed, its result not in yet
    api.queue(JobKind.SPAWN, "spawn:starting", starting)
    with api.session() as db, db.begin():
        job = db.query(Job).filter(Job.work_item_id == starting).one()
        job.state, job.spawner_id = JobState.CLAIMED, dead_id
        item = db.get(WorkItem, starting)
        assert item is not None
        item.state = S.RUNNING  # its session.spawned event came before the job's result
    now = _silence(api, dead_id, 600)
    _silence(api, live_id, 1)

    found = sweep(api.state.services, api.state.sessions, now, DEAD)
    assert sorted(found["dead-box"]) == sorted([running, stalled, starting])
    assert "live-box" not in found
    states = {i: api.item(i).state for i in (running, stalled, exited, elsewhere, starting)}
    assert states == {
        running: S.LOST,
        stalled: S.LOST,
        exited: S.EXITED,
        elsewhere: S.RUNNING,
        starting: S.LOST,
    }
    assert {e["work_item_id"] for e in api.events("session.lost")} >= {running, stalled}
    again = sweep(api.state.services, api.state.sessions, now, DEAD)
    assert again["dead-box"] == []  # still dead; nothing more to lose
    assert len(api.events("session.lost", running)) == 1


def test_a_lost_session_its_spawner_names_again_is_running_again(api: Api) -> None:
    spawner_id, client = _spawner(api, "back-box")
    _, other = _spawner(api, "other-box")
    item = api.work_item(1, status=S.LOST, session={"spawner_id": spawner_id})
    unnamed = api.work_item(2, status=S.LOST, session={"spawner_id": spawner_id})

    said = other.client.post("/heartbeat", json={"sessions": [item]})
    assert said.status_code == 200 and said.json()["running_again"] == []
    assert api.item(item).state == S.LOST  # not its session

    back = client.client.post("/heartbeat", json={"sessions": [item]})
    assert back.status_code == 200 and back.json()["running_again"] == [item]
    assert api.item(item).state == S.RUNNING
    assert api.item(unnamed).state == S.LOST  # it did not say it runs this one
    assert api.events("session.found", item)[0]["spawner"] == "back-box"
    with api.session() as db:
        seen = db.get(Spawner, spawner_id)
        assert seen is not None and seen.last_seen is not None


def test_a_heartbeat_names_sessions_in_a_list(api: Api) -> None:
    _, client = _spawner(api, "odd-box")
    bad = client.client.post("/heartbeat", json={"sessions": "github:o/r#1"})
    assert bad.status_code == 400 and "list" in bad.json()["error"]
    nobody = api.spawner("tlsp_not-a-token").client.post("/heartbeat", json={"sessions": []})
    assert nobody.status_code == 401


def test_the_sweep_judges_no_one_in_its_first_window_then_warns_once(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    """An App that was down heard nobody: its first dead window is the spawners' to speak in.
    After it, a dead spawner is said once, however often the sweep runs."""
    spawner_id, _ = _spawner(api, "quiet-box")
    item = api.work_item(1, status=S.RUNNING, session={"spawner_id": spawner_id})
    start = _silence(api, spawner_id, 3600)
    clock = iter([start, start + DEAD, start + DEAD * 2, start + DEAD * 3])
    loop = SpawnerSweep(api.state.services, api.state.sessions, DEAD, lambda: next(clock))
    caplog.set_level(logging.WARNING, logger="app.fleet.liveness")

    loop.run_once()
    loop.run_once()  # still within the first window
    assert api.item(item).state == S.RUNNING
    loop.run_once()
    assert api.item(item).state == S.LOST
    loop.run_once()
    warned = [r.getMessage() for r in caplog.records if "quiet-box marked dead" in r.getMessage()]
    assert len(warned) == 1 and item in warned[0]
