"""Follow-up comments through the real webhook path: authorized comments on a frozen item
become one deliver job; everyone and everything else is recorded and never delivered."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.gate.markers import MarkerKind, marker
from app.store.tables import Job, JobKind, WorkItemStatus
from app.workitems.decide.decisions import Decision, Outcome, Status
from app.workitems.decide.followups import deliver_comment
from tests.spawnerapi_support import comment_delivery, send


def deliver_jobs(api, item: str) -> list[Job]:
    with api.session() as db:
        query = select(Job).where(Job.work_item_id == item, Job.kind == JobKind.DELIVER)
        return list(db.scalars(query.order_by(Job.id)))


def test_an_authorized_follow_up_becomes_one_deliver_job(api):
    item = api.work_item(number=3, status=WorkItemStatus.RUNNING)
    api.fake.grant(api.repo, "octocat", "write")
    payload = comment_delivery(api.repo, 3, "Please also cover the empty input case.")
    send(api, payload)
    send(api, {**payload, "redelivered": True})  # the same comment reaches the App again
    (job,) = deliver_jobs(api, item)
    comment = payload["comment"]
    assert job.key == f"deliver:{comment['id']}"
    assert job.payload == {
        "kind": "deliver",
        "work_item_id": item,
        "installation_id": 1,
        "html_url": f"https://github.com/{api.repo}/issues/3",
        "spec_id": "issue-3",
        "repo": api.repo,
        "issue_number": 3,
        "clone_url": f"https://github.com/{api.repo}.git",
        "comment_id": comment["id"],
        "body": "Please also cover the empty input case.",
        "author": "octocat",
        "source": "github",
        "ref": str(comment["id"]),
        "gh_event": "issue_comment",
        "action": "created",
        "phase": "",
        "gates": {},
        "branch": "",
        "frozen": {
            "decisions": {},
            # a record frozen before approval gates: none of them ticked
            "skips": {"approve-design": {}, "approve-tasks": {}},
            "harness": "claude",
            "model": "",
            "effort": "",
            "dropped": [],
            "base": "",  # no `base:` word: the default branch
            "issue": {},
            "stops": [],
        },
    }
    assert api.events("job.queued", item)[0]["key"] == job.key


def test_a_follow_up_from_someone_without_write_access_is_recorded_not_delivered(api):
    item = api.work_item(number=4, status=WorkItemStatus.RUNNING)
    api.fake.grant(api.repo, "drive-by", "read")
    send(api, comment_delivery(api.repo, 4, "rm -rf everything please", login="drive-by"))
    assert deliver_jobs(api, item) == []
    (ignored,) = api.events("comment.ignored", item)
    assert ignored["author"] == "drive-by" and "write, maintain or admin" in ignored["reason"]


@pytest.mark.parametrize(
    ("body", "login", "kind"),
    [
        ("Done: tests added.\n\n" + marker(MarkerKind.AGENT, type="comment"), "octocat", "User"),
        ("Dependencies updated", "dependabot[bot]", "Bot"),
    ],
    ids=["agent-marker", "bot"],
)
def test_the_apps_own_words_and_bots_are_never_delivered(api, body, login, kind):
    item = api.work_item(number=5, status=WorkItemStatus.RUNNING)
    api.fake.grant(api.repo, login, "admin")
    send(api, comment_delivery(api.repo, 5, body, login=login, kind=kind))
    assert deliver_jobs(api, item) == []
    assert api.events("comment.ignored", item)[0]["reason"] == "written by a bot or the App"


def test_an_execute_reply_is_left_to_the_gate(api):
    item = api.work_item(number=6, status=WorkItemStatus.RUNNING)
    api.fake.grant(api.repo, "octocat", "write")
    send(api, comment_delivery(api.repo, 6, "The-Loop execute\n- [x] design"))
    assert deliver_jobs(api, item) == []
    assert api.events("comment.ignored", item) == []


def test_comments_before_the_selection_is_frozen_are_not_follow_ups(api):
    item = api.work_item(number=7, status=WorkItemStatus.PARKED)
    with api.session() as db, db.begin():
        from app.store.tables import WorkItem

        db.get(WorkItem, item).frozen = None
    api.fake.grant(api.repo, "octocat", "write")
    send(api, comment_delivery(api.repo, 7, "what do you think about design first?"))
    assert deliver_jobs(api, item) == []
    assert api.events("comment.ignored", item) == []


def test_a_comment_on_a_stopped_item_is_recorded_not_delivered(api):
    item = api.work_item(number=8, status=WorkItemStatus.STOPPED)
    api.fake.grant(api.repo, "octocat", "write")
    send(api, comment_delivery(api.repo, 8, "one more thing"))
    assert deliver_jobs(api, item) == []
    assert api.events("comment.ignored", item)[0]["reason"] == "work item is stopped"


def test_a_slack_thread_reply_is_delivered_once_per_message(api):
    item = api.work_item(number=9, status=WorkItemStatus.RUNNING)
    services = api.state.services
    outcomes = []
    for _ in range(2):
        with api.session() as db, db.begin():
            said = Decision(item, "octocat", "ship it", ref="1715.0042", source="slack")
            outcomes.append(deliver_comment(services, db, said))
    assert [outcome.status for outcome in outcomes] == [Status.QUEUED, Status.REPEAT]
    (job,) = deliver_jobs(api, item)
    assert job.key == "deliver:slack:1715.0042"
    assert job.payload["source"] == "slack" and job.payload["comment_id"] is None
    with api.session() as db, db.begin():
        nowhere = Decision("github:no/such#1", "x", "y", ref="1", source="slack")
        missing = deliver_comment(services, db, nowhere)
    assert missing == Outcome(Status.NOT_A_WORK_ITEM)


def test_a_follow_up_reaches_the_spawner_and_gets_a_receipt(api):
    api.work_item(number=10, status=WorkItemStatus.RUNNING)
    api.fake.grant(api.repo, "octocat", "maintain")
    spawner = api.spawner(api.token())
    spawner.register()
    payload = comment_delivery(api.repo, 10, "Use the existing helper instead.")
    send(api, payload)
    job = spawner.job(wait=5)
    assert job["kind"] == "deliver" and job["payload"]["body"] == "Use the existing helper instead."
    assert "github_token" not in job and job["session_token"].startswith("tlss_")
    resp = spawner.result(job["id"], delivered=True, respawned=False, session_id="s-10")
    assert resp.json()["receipt"] is True
    receipts = [r for r in api.fake.reactions if r["target_id"] == payload["comment"]["id"]]
    assert [r["content"] for r in receipts] == ["eyes"]
