"""A job whose handover fails is not stranded, over real HTTP on each backend.

A claim and its handover (the session token, the spawn's status change, the line moving up)
commit together: when the database refuses part of the handover, the spawner is told to
ask again, the job is offered again at once (not when a lease runs out) and an event says
what went wrong. The refusal here is the database's own: a trigger that fails the spawn's
status change, as a full disk or a broken constraint would."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import select, text

from app.store.jobqueue import MAX_ATTEMPTS
from app.store.tables import JobKind, JobState, SessionToken, WorkItemStatus
from tests.spawnerapi_support import Api

SHARED_API = {"lease_seconds": 600}  # a stranded claim would keep its job this long
REFUSAL = "no space left on device"


@contextmanager
def spawning_refused(api: Api, work_item_id: str) -> Iterator[None]:
    """While inside, the database refuses to mark `work_item_id` as spawning."""
    name = f"refuse_{uuid.uuid4().hex[:10]}"
    quoted = work_item_id.replace("'", "''")
    when = f"NEW.id = '{quoted}' AND NEW.state = '{WorkItemStatus.SPAWNING}'"
    postgres = api.state.engine.dialect.name == "postgresql"
    with api.state.engine.begin() as conn:
        if postgres:
            conn.execute(
                text(
                    f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS "
                    f"$$ BEGIN RAISE EXCEPTION '{REFUSAL}'; END $$"
                )
            )
            conn.execute(
                text(
                    f"CREATE TRIGGER {name} BEFORE UPDATE ON work_items FOR EACH ROW "
                    f"WHEN ({when}) EXECUTE FUNCTION {name}()"
                )
            )
        else:
            conn.execute(
                text(
                    f"CREATE TRIGGER {name} BEFORE UPDATE ON work_items WHEN {when} "
                    f"BEGIN SELECT RAISE(ABORT, '{REFUSAL}'); END"
                )
            )
    try:
        yield
    finally:
        with api.state.engine.begin() as conn:
            conn.execute(text(f"DROP TRIGGER {name}" + (" ON work_items" if postgres else "")))
            if postgres:
                conn.execute(text(f"DROP FUNCTION {name}()"))


def session_tokens(api: Api, work_item_id: str) -> list[SessionToken]:
    with api.session() as db:
        query = select(SessionToken).where(SessionToken.work_item_id == work_item_id)
        return list(db.scalars(query))


def test_a_failed_handover_leaves_the_job_to_the_next_poll_and_says_why(api: Api) -> None:
    spawner = api.spawner(api.token())
    assert spawner.register(repositories=[api.repo]).status_code == 200
    item = api.work_item(1)
    job_id = api.queue(JobKind.SPAWN, "spawn", item)
    with spawning_refused(api, item):
        refused = spawner.poll()
        assert refused.status_code == 503, refused.text
        assert str(job_id) in refused.json()["error"]
        job = api.job(job_id)
        assert (job.state, job.spawner_id, job.lease_until) == (JobState.QUEUED, None, None)
        assert api.item(item).state == WorkItemStatus.FROZEN
        assert session_tokens(api, item) == []  # no credential out for a job nobody got
        (failed,) = api.events("job.offer_failed", item)
        assert failed["job"] == job_id and REFUSAL in failed["error"]
        assert api.events("job.claimed", item) == []
    offered = spawner.job()  # at once: the lease (600 s) of the failed claim is not waited
    assert offered is not None and offered["id"] == job_id
    assert offered["session_token"]
    assert api.item(item).state == WorkItemStatus.SPAWNING
    assert [e["attempt"] for e in api.events("job.claimed", item)] == [2]  # the failure counts


def test_a_job_no_handover_can_succeed_on_is_given_up_and_the_next_one_offered(
    api: Api,
) -> None:
    spawner = api.spawner(api.token())
    assert spawner.register(repositories=[api.repo]).status_code == 200
    poisoned, behind = api.work_item(1), api.work_item(2)
    poison = api.queue(JobKind.SPAWN, "spawn", poisoned)
    later = api.queue(JobKind.SPAWN, "spawn", behind)
    with spawning_refused(api, poisoned):
        for _ in range(MAX_ATTEMPTS):
            assert spawner.poll().status_code == 503
        offered = spawner.job()
    assert offered is not None and offered["id"] == later
    assert api.job(poison).state == JobState.FAILED
    (given_up,) = api.events("job.failed", poisoned)
    assert given_up["job"] == poison and REFUSAL in given_up["error"]
    assert len(api.events("job.offer_failed", poisoned)) == MAX_ATTEMPTS
