"""Many spawners claiming a long line of spawns at once, over real HTTP on each backend.

Each spawn a spawner takes moves every item behind it up a place in line (their progress
comments say `queued (k of n)`), so claims taken together all rewrite the same items: every
waiting poll must still be answered with a job of its own, none with an error (a handover
that failed, a deadlock victim, is answered 503 and counts an attempt on its job), and the
line must end up counted right."""

from __future__ import annotations

import threading
from collections import Counter

from app.store.tables import JobKind, JobState
from app.workitems.flow.capacity import place_in_line
from tests.spawnerapi_support import Api, SpawnerClient

SHARED_API = {"lease_seconds": 600}  # no claim lapses while the crowd runs
SPAWNERS = 8
TAKEN = 60  # the spawners stop asking once this many jobs were offered
QUEUED = TAKEN + SPAWNERS + 4  # a few are left waiting, whose places in line are checked


def test_spawners_claiming_together_each_get_a_job_and_the_line_stays_counted(api: Api) -> None:
    items = [api.work_item(n) for n in range(1, QUEUED + 1)]
    jobs = [api.queue(JobKind.SPAWN, "spawn", item) for item in items]
    clients = [api.spawner(api.token(f"crowd-{n}")) for n in range(SPAWNERS)]
    for client in clients:
        assert client.register(repositories=[api.repo]).status_code == 200
    answers: list[tuple[int, int | None]] = []
    lock = threading.Lock()
    start = threading.Barrier(SPAWNERS)

    def claim(client: SpawnerClient) -> None:
        start.wait()
        while True:
            with lock:
                if sum(1 for _, job in answers if job is not None) >= TAKEN:
                    return
            resp = client.poll(wait=5)  # with jobs queued, answered at once with one
            job = int(resp.json()["job"]["id"]) if resp.status_code == 200 else None
            with lock:
                answers.append((resp.status_code, job))
            if job is None:
                return

    threads = [threading.Thread(target=claim, args=(c,), daemon=True) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a poll was never answered"
    statuses = Counter(status for status, _ in answers)
    assert set(statuses) == {200}, f"polls answered {dict(statuses)}, with jobs queued"
    offered = Counter(job for _, job in answers)
    assert len(offered) >= TAKEN
    assert all(count == 1 for count in offered.values()), "a job was offered twice"
    for job in offered:
        row = api.job(job)
        assert (row.state, row.attempts) == (JobState.CLAIMED, 1)
    waiting = [item for item, job in zip(items, jobs, strict=True) if job not in offered]
    assert waiting, "every spawn was taken: nothing is left to check the line with"
    assert [place_in_line(api.item(item).session) for item in waiting] == [
        (k, len(waiting)) for k in range(1, len(waiting) + 1)
    ]
