"""The spawner API over real HTTP: registration, the long-poll claim, leases, results."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from app.fleet.api import LEASE_CONFIG, MAX_WAIT, POLL_CONFIG
from app.store.tables import JobKind, JobState, WorkItemStatus, aware
from tests.spawnerapi_support import serve_api

# Behaviour that does not depend on the backend runs on SQLite; claiming, leases, wake-ups and
# repository scoping run on both (the store-level tests cover both for every queue operation).
SQLITE_ONLY = pytest.mark.parametrize("shared_api", ["sqlite"], indirect=True)


SHARED_API = {"lease_seconds": 1}  # how serve_api runs this module's App
LONG_LEASE = 600  # for a test whose claim must not lapse by itself while it runs


@pytest.fixture
def long_lease(api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims in this test hold for LONG_LEASE seconds: a clone token is only for a live
    lease, and a busy machine may take more than the module's one second to ask for it."""
    monkeypatch.setitem(api.flask.config, LEASE_CONFIG, LONG_LEASE)


@SQLITE_ONLY
def test_calls_without_a_valid_spawner_token_are_refused(api):
    assert api.spawner("tlsp_not-a-token").poll().status_code == 401
    assert httpx.post(f"{api.url}/spawner/v1/register", json={}).status_code == 401
    item = api.work_item()
    from app.fleet.tokens import mint_session_token

    with api.session() as db, db.begin():
        session_token = mint_session_token(db, item, datetime.now(UTC))
    resp = api.spawner(session_token).poll()
    assert resp.status_code == 403
    assert "spawner token" in resp.json()["error"] and resp.json()["code"] == "forbidden"


@SQLITE_ONLY
def test_register_records_harnesses_within_the_token_allowance(api):
    spawner = api.spawner(api.token("box"))
    resp = spawner.register(repositories=[api.repo, "other/repo"], harnesses=["claude", "codex"])
    assert resp.status_code == 200
    body = resp.json()
    assert isinstance(body["spawner_id"], int)
    assert body["repositories"] == [api.repo.lower()]
    bad = spawner.register(harnesses=["claude; rm -rf ~"])
    assert bad.status_code == 400 and "harness" in bad.json()["error"]
    assert api.events("spawner.registered")[-1]["harnesses"] == ["claude", "codex"]


@SQLITE_ONLY
def test_an_empty_queue_answers_204_after_the_wait(api):
    spawner = api.spawner(api.token())
    spawner.register()
    started = time.monotonic()
    assert spawner.poll(wait=0.6).status_code == 204
    assert 0.55 <= time.monotonic() - started < 3
    assert spawner.poll(wait="soon").status_code == 400  # type: ignore[arg-type]


def test_a_queued_job_wakes_a_waiting_poll_at_once(api, long_lease):
    """The re-check interval is set longer than the poll may wait, so only the wake-up can
    answer the poll with the job (how fast it does is measured by bench/, not here)."""
    spawner = api.spawner(api.token())
    spawner.register()
    api.flask.config[POLL_CONFIG] = 600.0
    try:
        for number in (1, 2, 3):
            item = api.work_item(number=number)
            answers: list[dict | None] = []
            thread = threading.Thread(
                target=lambda out=answers: out.append(spawner.job(wait=MAX_WAIT))
            )
            thread.start()
            time.sleep(0.3)  # the poll is waiting (if not yet, its first look finds the job)
            # a stop job needs no GitHub token: what answers is the wake-up alone
            api.queue(JobKind.STOP, "stop:wake", item, reason="test")
            thread.join(MAX_WAIT + 30)
            (job,) = answers
            assert job is not None and job["work_item_id"] == item
    finally:
        api.flask.config.pop(POLL_CONFIG)


def test_finishing_a_job_wakes_the_poll_waiting_for_the_next_job_of_its_item(api):
    """Jobs of one item run in order: a follow-up queued while the item's previous job runs is
    offered the moment that job's result is reported, not at the next re-check (60 s here,
    longer than the poll waits). The first job's lease is as long: on a slow machine a 1 s
    lease could run out before its result, and the poll would rightly get it again."""
    spawner = api.spawner(api.token())
    spawner.register()
    lease = api.flask.config[LEASE_CONFIG]
    api.flask.config[POLL_CONFIG] = 60.0
    api.flask.config[LEASE_CONFIG] = 60.0
    try:
        item = api.work_item(number=5)
        first = api.queue(JobKind.STOP, "stop:first", item, reason="test")
        assert spawner.job()["id"] == first
        second = api.queue(JobKind.STOP, "stop:second", item, reason="test")
        answers: list[tuple[float, dict | None]] = []

        def poll() -> None:
            job = spawner.job(wait=20)
            answers.append((time.monotonic(), job))

        thread = threading.Thread(target=poll)
        thread.start()
        time.sleep(0.3)  # the poll is waiting: the second job is blocked behind the first
        reported = time.monotonic()
        assert spawner.result(first).status_code == 200
        thread.join(25)
    finally:
        api.flask.config.pop(POLL_CONFIG)
        api.flask.config[LEASE_CONFIG] = lease
    answered, job = answers[0]
    assert job is not None and job["id"] == second
    assert answered - reported < 10  # well before the poll's 20 s were up


def clone_tokens(api) -> list[str]:
    """The repository tokens the fake GitHub minted for clones (the App's own are for every
    repository of the installation)."""
    return [t for t, facts in api.fake.tokens.items() if facts["repositories"] is not None]


@SQLITE_ONLY
def test_a_spawn_job_carries_no_token_and_its_holder_asks_for_one_for_its_one_repository(
    api, long_lease
):
    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item()
    job_id = api.queue(JobKind.SPAWN, "spawn:1", item, installation_id=1)
    before = clone_tokens(api)
    job = spawner.job()
    assert job["id"] == job_id and job["kind"] == "spawn" and job["repo"] == api.repo
    assert job["lease_seconds"] == LONG_LEASE and "github_token" not in job
    assert clone_tokens(api) == before  # claiming minted nothing
    assert job["session_token"].startswith("tlss_")
    assert api.item(item).state == WorkItemStatus.SPAWNING
    assert api.events("job.claimed", item)[0]["spawner"] == "devbox"
    asked = spawner.clone_token(job_id)
    assert asked.status_code == 200, asked.text
    token = asked.json()["github_token"]["token"]
    assert asked.json()["github_token"]["expires_at"]
    assert clone_tokens(api) == [*before, token]
    minted = api.fake.tokens[token]
    assert minted["installation"] == 1
    assert minted["repositories"] == ["Hello-World"]
    assert minted["permissions"] == {"contents": "read", "metadata": "read"}
    # the token can read its repository, nothing else: not comment, not another repository
    github = httpx.Client(base_url=api.fake_url, headers={"Authorization": f"token {token}"})
    comment = github.post(f"/repos/{api.repo}/issues/1/comments", json={"body": "hi"})
    assert comment.status_code == 403
    other = github.get("/repos/other/repo/collaborators/x/permission")
    assert other.status_code == 403
    assert github.get(f"/repos/{api.repo}/collaborators/x/permission").status_code == 200
    # once the job is over the App revokes it
    assert spawner.result(job_id, session_id="s-1", tmux_target="t:1").status_code == 200
    assert minted["revoked"] and api.fake.calls("DELETE", "^/installation/token$")
    assert github.get(f"/repos/{api.repo}/collaborators/x/permission").status_code == 401
    assert spawner.clone_token(job_id).status_code == 409  # the job is over


def test_asking_again_replaces_the_token_and_revokes_the_first(api, long_lease):
    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item(number=2)
    job_id = api.queue(JobKind.SPAWN, "spawn:again", item, installation_id=1)
    assert spawner.job()["id"] == job_id
    first = spawner.clone_token(job_id).json()["github_token"]["token"]
    second = spawner.clone_token(job_id).json()["github_token"]["token"]
    assert first != second
    assert api.fake.tokens[first]["revoked"] and not api.fake.tokens[second]["revoked"]
    assert api.job(job_id).github_token == second  # what the job's end revokes
    spawner.result(job_id, session_id="s-2", tmux_target="t:2")
    assert api.fake.tokens[second]["revoked"]


@SQLITE_ONLY
def test_only_the_holder_of_a_spawn_or_deliver_job_gets_a_token(api, long_lease):
    holder, other = api.spawner(api.token("holder")), api.spawner(api.token("other"))
    holder.register()
    other.register()
    item = api.work_item(number=3)
    job_id = api.queue(JobKind.SPAWN, "spawn:held", item, installation_id=1)
    before = clone_tokens(api)
    assert other.clone_token(job_id).status_code == 409  # queued: nobody holds it
    assert holder.job()["id"] == job_id
    refused = other.clone_token(job_id)
    assert refused.status_code == 409 and refused.json()["code"] == "not-held"
    assert "not held by this spawner" in refused.json()["error"]
    missing = holder.clone_token(job_id + 10_000)
    assert missing.status_code == 404 and missing.json()["code"] == "not-found"
    with api.session() as db, db.begin():
        from app.fleet.tokens import mint_session_token

        session_token = mint_session_token(db, item, datetime.now(UTC))
    assert api.spawner(session_token).clone_token(job_id).status_code == 403
    assert clone_tokens(api) == before  # no refusal minted anything
    holder.result(job_id, session_id="s-3", tmux_target="t:3")
    stop = api.queue(JobKind.STOP, "stop:held", item, reason="test")
    assert holder.job(wait=5)["id"] == stop
    clones_nothing = holder.clone_token(stop)
    assert clones_nothing.status_code == 409 and "clones nothing" in clones_nothing.json()["error"]
    assert clone_tokens(api) == before


@SQLITE_ONLY
def test_a_job_offered_again_revokes_the_token_of_the_lapsed_claim(api, long_lease, monkeypatch):
    dead, alive = api.spawner(api.token("dead")), api.spawner(api.token("alive"))
    dead.register()
    alive.register()
    item = api.work_item(number=4)
    job_id = api.queue(JobKind.SPAWN, "spawn:revoke", item, installation_id=1)
    assert dead.job()["id"] == job_id
    first = dead.clone_token(job_id).json()["github_token"]["token"]
    lapsed = aware(api.job(job_id).lease_until) + timedelta(seconds=1)
    monkeypatch.setattr(api.state.services, "clock", lambda: lapsed)  # the App's own clock
    assert alive.job()["id"] == job_id  # the dead spawner's lease ran out
    assert api.fake.tokens[first]["revoked"]
    assert dead.clone_token(job_id).status_code == 409  # no longer its job
    second = alive.clone_token(job_id).json()["github_token"]["token"]
    assert first != second and not api.fake.tokens[second]["revoked"]


@SQLITE_ONLY
def test_session_tokens_are_renewed_while_the_session_lives_and_revoked_at_its_stop(api):
    from sqlalchemy import select

    from app.store.tables import SessionToken

    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item(number=5)
    api.queue(JobKind.SPAWN, "spawn:renew", item, installation_id=1)
    spawn = spawner.job()
    session_token = spawn["session_token"]
    spawner.result(spawn["id"], session_id="s-5", tmux_target="t:5")

    def expiry() -> datetime:
        with api.session() as db:
            row = db.scalars(select(SessionToken).where(SessionToken.work_item_id == item)).one()
            return row.expires_at

    minted = expiry()
    time.sleep(0.05)
    spawner.events({"event": "session.stalled", "work_item_id": item, "screen": "trust-dialog"})
    assert expiry() > minted  # an event about the live session renews it
    agent = api.spawner(session_token)
    assert agent.comment(item, "still working").status_code == 200
    api.queue(JobKind.STOP, "stop:renew", item)
    stop = spawner.job(wait=5)
    assert stop["kind"] == "stop" and spawner.result(stop["id"], stopped=True).status_code == 200
    assert agent.comment(item, "after the stop").status_code == 401


def test_a_spawner_sees_only_the_jobs_of_repositories_it_serves(api):
    mine = api.spawner(api.token("mine", ["octo/mine"]))
    mine.register()
    theirs = api.work_item(number=7)  # Codertocat/Hello-World
    api.queue(JobKind.SPAWN, "spawn:theirs", theirs)
    assert mine.job() is None
    other = api.spawner(api.token("all"))
    other.register()
    assert other.job()["work_item_id"] == theirs


def test_a_job_whose_spawner_died_is_offered_again_after_the_lease(api):
    dead = api.spawner(api.token("dead"))
    alive = api.spawner(api.token("alive"))
    dead.register()
    alive.register()
    item = api.work_item()
    job_id = api.queue(JobKind.SPAWN, "spawn:lease", item)
    assert dead.job()["id"] == job_id
    assert alive.job() is None  # held under the lease
    retaken = alive.job(wait=5)
    assert retaken is not None and retaken["id"] == job_id
    late = dead.result(job_id, session_id="s-dead")
    assert late.status_code == 409
    assert alive.result(job_id, session_id="s-alive", tmux_target="the-loop:1").status_code == 200
    assert api.item(item).session["session_id"] == "s-alive"
    assert api.job(job_id).attempts == 2


@SQLITE_ONLY
def test_heartbeats_keep_a_job_from_being_offered_again(api):
    holder = api.spawner(api.token("holder"))
    other = api.spawner(api.token("other"))
    holder.register()
    other.register()
    job_id = api.queue(JobKind.SPAWN, "spawn:hb", api.work_item())
    assert holder.job()["id"] == job_id
    for _ in range(4):
        time.sleep(0.4)
        assert holder.heartbeat(job_id).status_code == 200
        assert other.job() is None
    assert other.heartbeat(job_id).status_code == 409


def test_a_spawn_result_makes_the_item_running_and_follow_ups_go_to_its_host(api):
    host = api.spawner(api.token("host"))
    other = api.spawner(api.token("other"))
    host.register()
    other.register()
    item = api.work_item()
    spawn = api.queue(JobKind.SPAWN, "spawn:x", item)
    assert host.job()["id"] == spawn
    deliver = api.queue(JobKind.DELIVER, "deliver:1", item, body="hi")
    assert other.job() is None  # a follow-up never overtakes its session's spawn
    facts = {
        "session_id": "4f1c",
        "tmux_target": "the-loop:issue-1",
        "harness": "claude",
        "model": "opus",
        "effort": "high",
        "harness_args": ["--dangerously-skip-permissions", "--model", "opus"],
        "checkout": "/w/issue-1",
        "respawned": False,
    }
    assert host.result(spawn, **facts).status_code == 200
    stored = api.item(item)
    assert stored.state == WorkItemStatus.RUNNING
    assert stored.session == {
        **facts,
        "spawner_id": stored.session["spawner_id"],
        "spawner": "host",
    }
    assert other.job() is None  # the session lives in host's tmux
    offered = host.job()
    assert offered["id"] == deliver and offered["payload"]["body"] == "hi"
    assert offered["session_token"] and "github_token" not in offered


@SQLITE_ONLY
def test_a_failed_spawn_is_not_shown_as_running(api):
    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item()
    job_id = api.queue(JobKind.SPAWN, "spawn:f", item)
    spawner.job()
    resp = spawner.result(job_id, ok=False, error="git clone failed: repository not found")
    assert resp.status_code == 200
    assert api.job(job_id).state == JobState.FAILED
    assert api.item(item).state == WorkItemStatus.EXITED
    assert api.events("job.failed", item)[0]["error"] == "git clone failed: repository not found"


@SQLITE_ONLY
def test_a_retried_result_is_accepted_once(api):
    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item()
    job_id = api.queue(JobKind.SPAWN, "spawn:r", item)
    spawner.job()
    first = spawner.result(job_id, session_id="a")
    again = spawner.result(job_id, session_id="a")
    assert first.json()["repeat"] is False and again.json()["repeat"] is True
    assert len(api.events("job.done", item)) == 1
    assert spawner.result(job_id, session_id="b").status_code == 409
    assert spawner.result(999_999, session_id="a").status_code == 404
    bad = spawner.client.post(f"/jobs/{job_id}/result", json={"ok": "yes"})
    assert bad.status_code == 400 and "ok" in bad.json()["error"]


@SQLITE_ONLY
def test_a_session_has_one_live_token_and_it_dies_when_the_session_exits(api):
    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item(number=11)
    api.queue(JobKind.SPAWN, "spawn:one", item, installation_id=1)
    spawn = spawner.job()
    first = api.spawner(spawn["session_token"])
    spawner.result(spawn["id"], session_id="s-11", tmux_target="t:11")

    # A follow-up pasted into the running session: it keeps its token, the offered one dies.
    api.queue(JobKind.DELIVER, "deliver:one", item, text="hello", comment_id=1)
    delivered = spawner.job(wait=5)
    unused = api.spawner(delivered["session_token"])
    assert spawner.result(delivered["id"], delivered=True, respawned=False).status_code == 200
    assert first.comment(item, "still me").status_code == 200
    assert unused.comment(item, "never started").status_code == 401

    # A follow-up that relaunched the session: only the new session's token lives.
    api.queue(JobKind.DELIVER, "deliver:two", item, text="again", comment_id=2)
    relaunched = spawner.job(wait=5)
    second = api.spawner(relaunched["session_token"])
    done = spawner.result(relaunched["id"], delivered=True, respawned=True, session_id="s-12")
    assert done.status_code == 200
    assert first.comment(item, "the old session").status_code == 401
    assert second.comment(item, "the new session").status_code == 200

    # The session ends: its token dies with it.
    spawner.events({"event": "session.exited", "work_item_id": item})
    assert api.item(item).state == WorkItemStatus.EXITED
    assert second.comment(item, "after the end").status_code == 401


@SQLITE_ONLY
def test_stop_result_stops_the_item_and_withdraws_its_session_tokens(api):
    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item(status=WorkItemStatus.RUNNING)
    spawn = api.queue(JobKind.SPAWN, "spawn:s", item)
    session_token = spawner.job()["session_token"]
    spawner.result(spawn, session_id="s")
    stop = api.queue(JobKind.STOP, "stop:1", item, reason="issue closed")
    job = spawner.job()
    assert job["id"] == stop and "github_token" not in job and job["session_token"] is None
    assert spawner.result(stop, stopped=True).status_code == 200
    assert api.item(item).state == WorkItemStatus.STOPPED
    refused = api.spawner(session_token).comment(item, "still here?")
    assert refused.status_code == 401


@SQLITE_ONLY
def test_a_deliver_result_puts_a_receipt_on_the_comment_once(api):
    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item(status=WorkItemStatus.RUNNING)
    comment = api.fake.add_comment(api.repo, 1, "please also add tests", "octocat")
    job_id = api.queue(
        JobKind.DELIVER, "deliver:c", item, comment_id=comment["id"], source="github", ref="c"
    )
    spawner.job()
    resp = spawner.result(job_id, delivered=True, respawned=False, session_id="s")
    assert resp.status_code == 200 and resp.json()["receipt"] is True
    spawner.result(job_id, delivered=True, respawned=False, session_id="s")
    receipts = [r for r in api.fake.reactions if r["target_id"] == comment["id"]]
    assert [r["content"] for r in receipts] == ["eyes"]


@SQLITE_ONLY
def test_a_respawning_delivery_records_the_new_session(api):
    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item(status=WorkItemStatus.EXITED, session={"session_id": "old"})
    job_id = api.queue(JobKind.DELIVER, "deliver:r", item, source="slack", ref="171.2")
    spawner.job()
    spawner.result(job_id, delivered=True, respawned=True, session_id="new")
    stored = api.item(item)
    assert stored.state == WorkItemStatus.RUNNING
    assert stored.session["session_id"] == "new" and stored.session["respawned"] is True
    assert not [r for r in api.fake.reactions if r["target"] == f"comment:{api.repo}"]


@SQLITE_ONLY
def test_a_job_whose_claimers_keep_dying_is_given_up(api):
    from app.store.jobqueue import MAX_ATTEMPTS

    spawner = api.spawner(api.token())
    spawner.register()
    item = api.work_item()
    job_id = api.queue(JobKind.SPAWN, "spawn:poison", item)
    with api.session() as db, db.begin():
        from app.store.tables import Job

        db.get(Job, job_id).attempts = MAX_ATTEMPTS - 1
    assert spawner.job()["id"] == job_id
    time.sleep(1.2)  # the claimer died; the lease ran out for the last allowed time
    assert spawner.job() is None
    assert api.job(job_id).state == JobState.FAILED
    assert "lease expired" in api.events("job.failed", item)[0]["error"]


@SQLITE_ONLY
def test_a_spawn_frozen_on_a_harness_waits_for_a_spawner_that_hosts_it(api):
    claude_only = api.spawner(api.token("claude-box"))
    both = api.spawner(api.token("both-box"))
    claude_only.register(harnesses=["claude"])
    item = api.work_item()
    job_id = api.queue(JobKind.SPAWN, "spawn:codex", item, frozen={"harness": "codex"})
    assert claude_only.job() is None
    both.register(harnesses=["claude", "codex"])
    assert both.job()["id"] == job_id


@SQLITE_ONLY
def test_every_spawner_api_route_answers_refusals_in_the_one_shape(api):
    """A blueprint added under /spawner/v1 without the door's guard would answer its own
    shape (or an HTML page): every route there has the credential check and the handler."""
    from app.fleet.api_guard import ApiError, credential_first

    flask = api.flask
    blueprints = {
        rule.endpoint.split(".")[0]
        for rule in flask.url_map.iter_rules()
        if rule.rule.startswith("/spawner/v1/")
    }
    assert {"spawner", "phase", "pulls"} <= blueprints
    for name in blueprints:
        assert credential_first in flask.before_request_funcs.get(name, [])
        assert ApiError in flask.error_handler_spec[name][None]
    unknown = api.spawner(api.token()).client.post("/jobs/999999/heartbeat")
    assert unknown.status_code == 404 and unknown.json()["code"] == "not-found"


def test_an_app_with_no_github_identity_answers_a_token_request_with_none(
    tmp_path_factory: pytest.TempPathFactory, app_private_key: str
) -> None:
    directory = tmp_path_factory.mktemp("no-identity")
    unset = {"GITHUB_APP_ID": "", "GITHUB_PRIVATE_KEY": ""}
    served = serve_api("sqlite", directory, app_private_key, extra_env=unset)
    api = next(served)
    try:
        spawner = api.spawner(api.token())
        spawner.register()
        job_id = api.queue(JobKind.SPAWN, "spawn:bare", api.work_item(), installation_id=1)
        api.flask.config[LEASE_CONFIG] = LONG_LEASE  # the ask below comes within the claim
        assert spawner.job()["id"] == job_id
        asked = spawner.clone_token(job_id)
        assert asked.status_code == 200 and asked.json() == {"github_token": None}
        assert api.job(job_id).github_token is None and api.fake.tokens == {}
    finally:
        next(served, None)  # the App's workers stopped, its server closed
