"""`/spawner/v1/comments` and `/spawner/v1/events` over real HTTP: what a session says reaches
the issue as the App (and never comes back as input); what a spawner reports is recorded,
mirrored and keeps the item's status honest."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from app.fleet.tokens import mint_session_token
from app.gate.markers import Marker, find_marker, is_own_comment
from app.store.tables import Job, ModelVerdict, SlackOutbox, WorkItemStatus
from app.workitems.flow.offers import refused_choices
from tests.spawnerapi_support import comment_delivery, send
from tests.support import wait_for

pytestmark = pytest.mark.sqlite_only


def session_token(api, item: str) -> str:
    with api.session() as db, db.begin():
        return mint_session_token(db, item, datetime.now(UTC))


def said(api, number: int) -> list[dict]:
    """The item's comments but its progress comment, which the App posts (and edits) on its
    own schedule once something happened."""
    comments = api.fake.issue_comments(api.repo, number)
    return [c for c in comments if getattr(find_marker(c["body"]), "kind", None) != "progress"]


def test_a_session_posts_on_its_issue_as_the_app_with_the_agent_marker(api):
    item = api.work_item(number=11, status=WorkItemStatus.RUNNING)
    agent = api.spawner(session_token(api, item))
    resp = agent.comment(item, "Design is up for review in docs/specs/issue-11/design.md")
    assert resp.status_code == 200, resp.text
    (posted,) = said(api, 11)
    assert resp.json() == {"comment_id": posted["id"], "html_url": posted["html_url"]}
    assert posted["body"].startswith("Design is up for review")
    assert find_marker(posted["body"]).kind == "agent"
    assert is_own_comment(posted)
    assert api.events("agent.comment", item)[0]["comment_id"] == posted["id"]


def test_a_question_is_marked_as_one(api):
    item = api.work_item(number=12, status=WorkItemStatus.RUNNING)
    spawner = api.spawner(api.token())
    resp = spawner.comment(item, "Should the CLI keep the old flag?", kind="ask")
    assert resp.status_code == 200
    (posted,) = said(api, 12)
    assert (
        "The agent asks" in posted["body"] and "Should the CLI keep the old flag?" in posted["body"]
    )
    assert find_marker(posted["body"]).attrs == {"type": "ask"}


def test_a_session_token_cannot_post_on_another_item(api):
    mine = api.work_item(number=13, status=WorkItemStatus.RUNNING)
    other = api.work_item(number=14, status=WorkItemStatus.RUNNING)
    agent = api.spawner(session_token(api, mine))
    resp = agent.comment(other, "hello from the wrong session")
    assert resp.status_code == 403 and other in resp.json()["error"]
    assert api.fake.issue_comments(api.repo, 14) == []
    assert agent.poll().status_code == 403  # nor claim jobs


def test_a_spawner_cannot_post_outside_its_repositories(api):
    item = api.work_item(number=15, status=WorkItemStatus.RUNNING)
    stranger = api.spawner(api.token("stranger", ["someone/else"]))
    assert stranger.comment(item, "hi").status_code == 403
    assert api.fake.issue_comments(api.repo, 15) == []


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"work_item_id": "x", "kind": "shout", "body": "hi"}, "kind"),
        ({"work_item_id": "x", "kind": "comment", "body": "   "}, "body"),
        ({"kind": "comment", "body": "hi"}, "work_item_id"),
        ({"work_item_id": "x", "kind": "comment", "body": "x" * 60_001}, "longer"),
    ],
)
def test_bad_comment_requests_say_what_is_wrong(api, body, error):
    resp = api.spawner(api.token()).client.post("/comments", json=body)
    assert resp.status_code == 400 and error in resp.json()["error"]
    assert resp.json()["code"] == "bad-request"


def test_an_unknown_item_is_404_and_github_refusing_is_502(api):
    spawner = api.spawner(api.token())
    assert spawner.comment(f"github:{api.repo}#404", "hi").status_code == 404
    item = api.work_item(number=16, status=WorkItemStatus.RUNNING)
    api.fake.fail_next(rf"/repos/{api.repo}/issues/16/comments", 422)
    resp = spawner.comment(item, "hi")
    assert resp.status_code == 502 and "GitHub" in resp.json()["error"]
    assert resp.json()["code"] == "github"
    assert api.events("agent.comment", item) == []


def test_the_agents_comment_coming_back_as_a_webhook_is_not_delivered(api):
    item = api.work_item(number=17, status=WorkItemStatus.RUNNING)
    api.fake.grant(api.repo, "the-loop-test[bot]", "admin")
    spawner = api.spawner(api.token())
    spawner.comment(item, "All tests pass.")
    (posted,) = said(api, 17)
    send(api, comment_delivery(api.repo, 17, posted["body"], login=posted["user"]["login"]))
    with api.session() as db:
        assert list(db.scalars(select(Job).where(Job.work_item_id == item))) == []
    assert api.events("comment.ignored", item)


def test_reported_events_are_recorded_and_move_the_item_status(api):
    item = api.work_item(number=18, status=WorkItemStatus.RUNNING)
    spawner = api.spawner(api.token())
    spawner.register()
    spawned = {
        "reported_ts": "2026-05-01T12:00:00+00:00",
        "event": "session.spawned",
        "work_item_id": item,
        "harness": "claude",
        "harness_args": ["--dangerously-skip-permissions"],
        "gh_event": "issue_comment",
        "action": "created",
        "session": "tmux-target-clash",
    }
    stalled = {
        "event": "session.stalled",
        "work_item_id": item,
        "screen": "trust-dialog",
        "id": "e2",
    }
    resp = spawner.events(spawned, stalled, stalled)
    assert resp.json() == {"accepted": 2, "duplicates": 1, "rejected": []}
    recorded = api.events("session.spawned", item)[0]
    assert recorded["ts"] > "2026-05-02"  # the App's clock, not the spawner's
    assert recorded["reported_ts"] == "2026-05-01T12:00:00+00:00"
    assert recorded["harness_args"] == ["--dangerously-skip-permissions"]
    assert recorded["reported_session"] == "tmux-target-clash"
    assert recorded["spawner"] == "devbox"
    assert api.item(item).state == WorkItemStatus.STALLED
    spawner.events({"event": "session.unstalled", "work_item_id": item, "screen": "trust-dialog"})
    assert api.item(item).state == WorkItemStatus.RUNNING
    spawner.events({"event": "session.exited", "work_item_id": item, "exit_code": 0})
    assert api.item(item).state == WorkItemStatus.EXITED
    jsonl = api.state.settings.events_path.read_text()
    assert '"screen":"trust-dialog"' in jsonl


def test_a_batch_keeps_good_events_and_names_the_bad_ones(api):
    item = api.work_item(number=19, status=WorkItemStatus.RUNNING)
    elsewhere = api.work_item(number=1, repo=f"{api.repo}-other")
    spawner = api.spawner(api.token())
    resp = spawner.events(
        {"event": "workspace.trusted", "work_item_id": item, "directories": ["/w"]},
        {"event": "Session Spawned!", "work_item_id": item},
        "not an object",
        {"event": "session.exited", "work_item_id": elsewhere},
        {"event": "spawner.started", "work_item_id": None},
    )
    body = resp.json()
    assert body["accepted"] == 2
    assert [r["index"] for r in body["rejected"]] == [1, 2, 3]
    assert "does not serve" in body["rejected"][2]["error"]
    assert api.item(elsewhere).state == WorkItemStatus.FROZEN
    assert spawner.client.post("/events", json={"events": "x"}).status_code == 400


@pytest.fixture
def recording_mirror(api):
    """The App's mirror, swapped (through `Services`, its seam) for one that queues outbox
    rows in the caller's transaction as the Slack mirror does, without a Slack sender."""
    services = api.state.services
    original = services.mirror

    class OutboxMirror:
        def post(self, session, work_item_id, kind, payload):
            session.add(SlackOutbox(work_item_id=work_item_id, kind=kind, payload=payload))

    services.mirror = OutboxMirror()
    yield
    services.mirror = original


def outbox(api, item: str) -> list[SlackOutbox]:
    with api.session() as db:
        query = select(SlackOutbox).where(SlackOutbox.work_item_id == item).order_by(SlackOutbox.id)
        # the progress comment's mirror comes on the App's own schedule: not what is asked here
        return [row for row in db.scalars(query) if row.kind != "progress"]


def test_session_events_and_agent_words_reach_the_mirror(api, recording_mirror):
    item = api.work_item(number=20, status=WorkItemStatus.RUNNING)
    spawner = api.spawner(api.token())
    spawner.events(
        {"event": "session.stalled", "work_item_id": item, "screen": "api-key-prompt"},
        {"event": "workspace.trusted", "work_item_id": item},
    )
    spawner.comment(item, "Which database should the tests use?", kind="ask")
    rows = wait_for(lambda: outbox(api, item))
    assert [(r.kind, r.payload.get("event") or r.payload.get("kind")) for r in rows] == [
        ("session", "session.stalled"),
        ("agent_comment", "ask"),
    ]
    assert rows[0].payload["url"] == f"https://github.com/{api.repo}/issues/20"
    assert rows[1].payload["body"] == "Which database should the tests use?"


def test_a_devbox_models_check_decides_what_the_gate_hides(api):
    spawner = api.spawner(api.token(repositories=["*"]))
    spawner.register()
    checked = {
        "event": "models.checked",
        "work_item_id": None,
        "verdicts": [
            {"harness": "claude", "token": "model-opus", "verdict": "ok", "detail": ""},
            {
                "harness": "claude",
                "token": "effort-max",
                "verdict": "refused",
                "detail": "Unknown --effort",
            },
            {"harness": "claude", "token": "--model=evil", "verdict": "refused"},
            {"harness": "claude", "token": "model-haiku", "verdict": "maybe"},
        ],
    }
    assert spawner.events(checked).json()["accepted"] == 1
    with api.session() as db:
        assert refused_choices(db) == {"effort-max"}
        assert {v.token for v in db.scalars(select(ModelVerdict))} == {"model-opus", "effort-max"}


def test_a_spawner_reports_only_within_its_scope(api):
    """A token for one repository cannot write App-side records, back-date anything, speak
    about other repositories or unknown items, or decide model verdicts for everyone."""
    mine = api.work_item(number=21, status=WorkItemStatus.RUNNING)
    other = api.fresh()
    theirs = other.work_item(number=1, status=WorkItemStatus.RUNNING)
    spawner = api.spawner(api.token())
    forged = {"event": "gate.frozen", "work_item_id": theirs, "by": "mallory", "harness": "x"}
    verdict = {
        "event": "models.checked",
        "verdicts": [{"token": "model-opus", "verdict": "refused"}],
    }
    resp = spawner.events(
        {"event": "session.stalled", "work_item_id": mine, "screen": "trust-dialog"},
        forged,
        {**forged, "work_item_id": mine},
        {"event": "job.done", "work_item_id": mine},
        {"event": "webhook.received", "work_item_id": None},
        {"event": "session.spawn_deferred", "work_item_id": mine},
        {"event": "session.stalled", "work_item_id": mine, "ts": "2020-01-01T00:00:00+00:00"},
        {"event": "session.stalled", "work_item_id": theirs},
        {"event": "session.stalled", "work_item_id": f"github:{api.repo}#999"},
        verdict,
        {"event": "standing.started", "work_item_id": "standing:notes", "name": "notes"},
    )
    body = resp.json()
    errors = {r["index"]: r["error"] for r in body["rejected"]}
    assert body["accepted"] == 2 and sorted(errors) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert "not an event a spawner reports" in errors[1] and "gate.frozen" in errors[2]
    assert "`ts`" in errors[6]
    assert "does not serve" in errors[7] and "no work item" in errors[8]
    assert "every repository" in errors[9]
    assert api.events("gate.frozen") == [] and api.events("job.done", mine) == []
    assert other.item(theirs).state == WorkItemStatus.RUNNING
    with api.session() as db:
        assert "model-opus" not in refused_choices(db)
    everywhere = api.spawner(api.token(name="fleet", repositories=["*"]))
    assert everywhere.events(verdict).json()["accepted"] == 1
    with api.session() as db, db.begin():
        assert "model-opus" in refused_choices(db)
        db.delete(db.get(ModelVerdict, "model-opus"))


def test_a_burst_of_posts_reaches_github_only_up_to_the_burst_the_rest_is_429(api):
    item = api.work_item(number=31, status=WorkItemStatus.RUNNING)
    agent = api.spawner(session_token(api, item))
    burst = api.state.services.config.routing.session_comments.burst
    answers: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def say(n: int) -> None:
        resp = agent.comment(item, f"progress note {n}")
        with lock:
            answers.append((resp.status_code, resp.json()))

    threads = [threading.Thread(target=say, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted(code for code, _ in answers)
    assert codes == [200] * burst + [429] * (40 - burst)
    refusal = next(body for code, body in answers if code == 429)
    assert refusal["code"] == "too-many-posts" and "routing.sessionComments" in refusal["error"]
    assert "nothing was posted" in refusal["error"]

    def agents() -> list[dict]:
        found = api.fake.issue_comments(api.repo, 31)
        return [c for c in found if (find_marker(c["body"]) or Marker("")).kind == "agent"]

    assert len(agents()) == burst
    assert len(api.events("agent.comment_throttled", item)) == 1  # once, not per refusal

    def progress() -> str | None:
        for posted in api.fake.issue_comments(api.repo, 31):
            if (find_marker(posted["body"]) or Marker("")).kind == "progress":
                return posted["body"] if "posted faster" in posted["body"] else None
        return None

    assert "routing.sessionComments" in wait_for(progress, timeout=60)


def test_a_sessions_mention_notifies_nobody(api):
    item = api.work_item(number=32, status=WorkItemStatus.RUNNING)
    agent = api.spawner(session_token(api, item))
    resp = agent.comment(item, "Ping @octocat and @acme/reviewers; mail me at dev@example.com")
    assert resp.status_code == 200, resp.text
    (posted,) = said(api, 32)
    assert not re.search(r"(?<![\w@])@[A-Za-z0-9]", posted["body"].replace("dev@example", ""))
    assert "@\u200boctocat" in posted["body"] and "@\u200bacme/reviewers" in posted["body"]
    assert "dev@example.com" in posted["body"]
