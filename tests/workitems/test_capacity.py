"""`routing.maxSessions` at the App: a full spawner is offered no spawn, but every job for
the sessions it runs; a session's end makes room; waiting items know their place in line."""

from __future__ import annotations

from typing import Any

import pytest

from app.store.tables import JobKind, JobState, WorkItemStatus
from app.workitems.flow.capacity import place_in_line, renumber, sessions_held
from tests.spawnerapi_support import Api

SHARED_API = {"lease_seconds": 30}  # how serve_api runs this module's App


def poll(api: Api, token: str, **params: Any) -> Any:
    return api.spawner(token).client.get("/jobs", params={"wait": 0, **params})


def running_here(api: Api, spawner_id: int, number: int) -> str:
    facts = {"spawner_id": spawner_id, "session_id": f"s{number}"}
    return api.work_item(number, status=WorkItemStatus.RUNNING, session=facts)


def test_a_full_spawner_gets_jobs_for_its_sessions_but_no_spawn_until_one_ends(api: Api) -> None:
    token = api.token()
    spawner_id = api.spawner(token).register().json()["spawner_id"]
    live = running_here(api, spawner_id, 1)
    waiting = api.work_item(2)
    spawn = api.queue(JobKind.SPAWN, "spawn", waiting)
    deliver = api.queue(JobKind.DELIVER, "deliver", live, body="one more thing")

    offered = poll(api, token, max_sessions=1)
    assert offered.status_code == 200 and offered.json()["job"]["id"] == deliver
    assert poll(api, token, max_sessions=1).status_code == 204  # the spawn waits
    assert api.job(spawn).state == JobState.QUEUED

    sent = api.spawner(token).events({"event": "session.exited", "work_item_id": live})
    assert sent.json()["accepted"] == 1
    offered = poll(api, token, max_sessions=1)
    assert offered.status_code == 200 and offered.json()["job"]["id"] == spawn
    assert api.item(waiting).state == WorkItemStatus.SPAWNING


def test_a_claimed_spawn_holds_its_room_until_it_is_reported(api: Api) -> None:
    token = api.token()
    spawner_id = api.spawner(token).register().json()["spawner_id"]
    first, second = api.work_item(1), api.work_item(2)
    one = api.queue(JobKind.SPAWN, "spawn", first)
    two = api.queue(JobKind.SPAWN, "spawn", second)
    assert poll(api, token, max_sessions=1).json()["job"]["id"] == one
    assert poll(api, token, max_sessions=1).status_code == 204
    with api.session() as db:
        assert sessions_held(db, spawner_id) == 1
    api.spawner(token).result(one, ok=True, session_id="s1")  # it runs here now
    assert api.item(first).state == WorkItemStatus.RUNNING
    assert poll(api, token, max_sessions=1).status_code == 204
    assert poll(api, token, max_sessions=2).json()["job"]["id"] == two


def test_without_a_limit_every_spawn_is_offered(api: Api) -> None:
    token = api.token()
    spawner_id = api.spawner(token).register().json()["spawner_id"]
    running_here(api, spawner_id, 1)
    spawn = api.queue(JobKind.SPAWN, "spawn", api.work_item(2))
    assert poll(api, token).json()["job"]["id"] == spawn


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_a_malformed_limit_is_refused_with_its_name(api: Api, bad: str) -> None:
    resp = poll(api, api.token(), max_sessions=bad)
    assert resp.status_code == 400 and "max_sessions" in resp.json()["error"]


def test_waiting_items_know_their_place_and_move_up_when_the_head_launches(api: Api) -> None:
    items = [api.work_item(n) for n in (1, 2, 3)]
    token = api.token()
    api.spawner(token).register()
    for item in items:
        api.queue(JobKind.SPAWN, "spawn", item)
    with api.session() as db, db.begin():
        renumber(db)

    def places() -> list[tuple[int, int] | None]:
        return [place_in_line(api.item(i).session) for i in items]

    assert places() == [(1, 3), (2, 3), (3, 3)]
    revisions = [api.item(i).progress_rev for i in items]
    claimed = poll(api, token).json()["job"]
    assert claimed["work_item_id"] == items[0]
    assert places() == [None, (1, 2), (2, 2)]
    assert [api.item(i).progress_rev for i in items[1:]] > revisions[1:]  # edits are due


@pytest.mark.parametrize(
    ("facts", "place"),
    [
        ({"queued": [1, 2]}, (1, 2)),
        ({"queued": [3, 2]}, None),
        ({"queued": [True, 2]}, None),
        ({"queued": "1 of 2"}, None),
        (None, None),
    ],
)
def test_a_place_in_line_is_read_only_when_well_formed(
    facts: dict[str, Any] | None, place: tuple[int, int] | None
) -> None:
    assert place_in_line(facts) == place


def test_a_follow_up_that_would_relaunch_an_exited_session_waits_for_room(api: Api) -> None:
    token = api.token()
    spawner_id = api.spawner(token).register().json()["spawner_id"]
    running_here(api, spawner_id, 1)
    ended = api.work_item(2, status=WorkItemStatus.EXITED, session={"spawner_id": spawner_id})
    relaunch = api.queue(JobKind.DELIVER, "deliver", ended, body="try again")
    assert poll(api, token, max_sessions=1).status_code == 204
    assert api.job(relaunch).state == JobState.QUEUED
    assert poll(api, token, max_sessions=2).json()["job"]["id"] == relaunch
