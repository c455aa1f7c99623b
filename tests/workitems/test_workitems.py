"""The gate end to end: real fixture payloads, signed, through the real Flask server and inbox
worker, against the fake GitHub REST server and a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest

from app.gate.markers import MarkerKind
from app.runtime.event_routes import build_router
from app.store.tables import JobKind, JobState, WorkItemStatus
from app.workitems.flow import handlers as workitems
from tests.gate_support import (
    ITEM,
    REPO,
    TWO_HARNESSES,
    checklist_comments,
    comment,
    deliver,
    item_row,
    jobs,
    labeled,
    marked,
    register_spawner,
    unlabeled,
)
from tests.stopgate_support import stops_skipped
from tests.support import fixture_json, post_webhook, wait_for, with_installation

pytestmark = pytest.mark.admin_token  # the operator may read /status


def test_the_router_sends_the_gates_deliveries_to_the_gate():
    router = build_router()
    expected = {
        ("issues", "labeled"): workitems.start_work_item,
        ("issues", "unlabeled"): workitems.park_unlabeled,
        ("issues", "closed"): workitems.stop_on_close,
        ("issue_comment", "created"): workitems.freeze_on_execute,
        ("issue_comment", "edited"): workitems.log_execute_edit,
    }
    for (event, action), handler in expected.items():
        assert handler in router.handlers_for(event, action)
    assert workitems.freeze_on_execute not in router.handlers_for("issue_comment", "deleted")


def closed_payload() -> dict[str, Any]:
    """The published `issues.closed` delivery, moved onto the labelled fixture's repository."""
    closed = fixture_json("github/issues.closed.json")
    closed["repository"] = fixture_json("github/issues.labeled.json")["repository"]
    return closed


def test_label_posts_exactly_one_checklist_and_closing_it_queues_nothing(running_app, fake_github):
    fake, _ = fake_github
    deliver(running_app, "issues", labeled("bug"), "label-bug")  # not the trigger label
    assert fake.issue_comments(REPO, 1) == [] and running_app.events("workitem.created") == []

    deliver(running_app, "issues", labeled("The-Loop: Auto-Execute"), "label-1")  # any case
    deliver(running_app, "issues", labeled(), "label-2")  # a second label event
    post_webhook(running_app.url, "issues", labeled(), delivery="label-1")  # a redelivery

    posted = checklist_comments(fake)
    assert len(posted) == 1
    assert "- [x] `design`" in posted[0]["body"] and "the-loop execute" in posted[0]["body"]
    item = item_row(running_app)
    assert item.state == WorkItemStatus.PARKED and item.checklist_comment_id == posted[0]["id"]
    assert item.clone_url == "https://github.com/Codertocat/Hello-World.git"
    assert [e["work_item_id"] for e in running_app.events("workitem.created")] == [ITEM]
    assert len(running_app.events("gate.checklist_posted")) == 1
    deferred = running_app.events("session.spawn_deferred")
    assert deferred and deferred[0]["reason"] == "parked-at-human-start-gate"
    assert [r["content"] for r in fake.reactions] == ["eyes"]

    deliver(running_app, "issues", closed_payload(), "close-1")
    assert item_row(running_app).state == WorkItemStatus.CLOSED
    assert jobs(running_app) == []


def test_unauthorized_execute_is_refused_once_then_the_boxes_are_read(running_app, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "admin")
    deliver(running_app, "issues", labeled(), "label-1")
    refusing = comment("the-loop execute", login="mallory")
    deliver(running_app, "issue_comment", refusing, "exec-1")
    replayed = post_webhook(running_app.url, "issue_comment", refusing, delivery="exec-1a")
    assert replayed.json()["duplicate"] is True  # the same signed body is stored once
    # The same comment reaching the handler again (a body GitHub sent anew) is answered once.
    deliver(running_app, "issue_comment", {**refusing, "redelivered": True}, "exec-1b")

    refused = running_app.events("gate.refused")
    assert len(refused) == 2 and refused[0]["who"] == "mallory"
    assert "'read' permission" in refused[0]["why"]
    replies = marked(fake, MarkerKind.REFUSAL)
    assert len(replies) == 1 and replies[0]["body"].startswith("@mallory")
    assert "write, maintain or admin access to Codertocat/Hello-World" in replies[0]["body"]
    assert jobs(running_app) == [] and item_row(running_app).frozen is None
    assert len(fake.calls("GET", "/collaborators/mallory/permission")) == 1  # cached

    posted = checklist_comments(fake)[0]  # a human ticks boxes on the checklist itself
    posted["body"] = (
        posted["body"]
        .replace("- [x] `design`", "- [ ] `design`")
        .replace("- [ ] `brain", "- [x] `brain")
    )
    deliver(running_app, "issue_comment", comment("The-loop execute, thanks!", cid=5), "exec-2")
    frozen = item_row(running_app).frozen or {}
    assert frozen["skips"] == {"design": {"by": "Codertocat"}, **stops_skipped("Codertocat")}
    assert fake.calls("GET", rf"/issues/comments/{posted['id']}$")
    assert len(jobs(running_app, JobKind.SPAWN)) == 1


@pytest.mark.parametrize("operator_yaml", [TWO_HARNESSES])
def test_authorized_execute_freezes_confirms_and_queues_one_spawn(running_app, fake_github):
    fake, _ = fake_github
    register_spawner(running_app, ["claude", "codex"])
    fake.grant(REPO, "Codertocat", "write")
    deliver(running_app, "issues", labeled(), "label-1")
    assert "- [x] `harness-claude`" in checklist_comments(fake)[0]["body"]

    reply = (
        "The-Loop Execute\n\n- [ ] design\n- [x] `harness-codex`\n- [ ] harness-claude\n"
        "- [x] model-sonnet\n> - [x] effort-high\n- [x] harness-rm-rf\n"
    )
    deliver(running_app, "issue_comment", comment(reply), "exec-1")
    deliver(running_app, "issue_comment", {**comment(reply), "again": 1}, "exec-1-redelivered")

    item = item_row(running_app)
    assert item.state == WorkItemStatus.FROZEN
    frozen = item.frozen or {}
    assert (frozen["harness"], frozen["model"], frozen["effort"]) == ("codex", "", "high")
    assert frozen["skips"] == {
        "design": {"by": "Codertocat"},
        "brainstorming": {"by": "Codertocat"},
        **stops_skipped("Codertocat"),
    }
    assert frozen["stops"] == []
    assert frozen["decisions"]["phase-selection"]["by"] == "Codertocat"
    assert [d["token"] for d in frozen["dropped"]] == ["model-sonnet"]

    confirmations = wait_for(lambda: marked(fake, MarkerKind.CONFIRMATION))  # after the commit
    assert len(confirmations) == 1
    text = confirmations[0]["body"]
    assert "**Harness:** `codex`" in text and "**Effort:** `high`" in text
    assert "**Model:** the default" in text and "`model-sonnet`" in text
    assert "rm-rf" not in text

    spawns = jobs(running_app, JobKind.SPAWN)
    assert len(spawns) == 1
    payload = spawns[0].payload
    assert payload["frozen"] == frozen and payload["clone_url"].endswith("Hello-World.git")
    assert (payload["gh_event"], payload["action"]) == ("issue_comment", "created")
    assert payload["spec_id"] == "issue-1" and payload["installation_id"] == 1
    assert "Spelling error in the README file" in payload["prompt"]
    assert len(running_app.events("job.queued")) == 1
    assert len(running_app.events("gate.frozen")) == 1
    assert running_app.events("gate.execute_ignored")[0]["reason"] == "already-frozen"


def test_unlabel_parks_the_item_until_it_is_labelled_again(running_app, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "maintain")
    deliver(running_app, "issues", labeled(), "label-1")
    deliver(running_app, "issues", unlabeled(), "unlabel-1")
    assert item_row(running_app).state == WorkItemStatus.UNLABELED

    deliver(running_app, "issue_comment", comment("the-loop execute", cid=11), "exec-1")
    assert jobs(running_app) == []
    assert running_app.events("gate.refused")[0]["reason"] == "not-parked"
    assert "label was removed" in marked(fake, MarkerKind.REFUSAL)[0]["body"]

    relabeled = labeled()  # GitHub's body differs: the issue was updated meanwhile
    relabeled["issue"] = {**relabeled["issue"], "updated_at": "2019-05-15T16:00:00Z"}
    deliver(running_app, "issues", relabeled, "label-2")
    assert len(checklist_comments(fake)) == 1  # the checklist already there is the one
    deliver(running_app, "issue_comment", comment("the-loop execute", cid=12), "exec-2")
    assert item_row(running_app).state == WorkItemStatus.FROZEN
    assert len(jobs(running_app, JobKind.SPAWN)) == 1


def test_edits_and_bots_change_nothing_and_closing_stops_the_session(running_app, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    deliver(running_app, "issues", labeled(), "label-1")
    deliver(running_app, "issue_comment", comment("the-loop execute\n- [ ] design"), "exec-1")
    frozen = item_row(running_app).frozen

    edited = with_installation(fixture_json("github/issue_comment.edited.json"))
    edited["comment"]["body"] = "the-loop execute\n- [ ] test-planning\n- [x] design"
    deliver(running_app, "issue_comment", edited, "edit-1")
    bot = comment("the-loop execute\n- [ ] review", cid=77)
    bot["comment"]["user"]["type"] = "Bot"
    deliver(running_app, "issue_comment", bot, "bot-1")
    deliver(running_app, "issue_comment", comment("thanks, looks good", cid=78), "plain-1")
    quoted = comment("the-loop execute <!-- the-loop:agent -->", cid=79)
    deliver(running_app, "issue_comment", quoted, "marked-1")

    assert item_row(running_app).frozen == frozen
    ignored = running_app.events("gate.edit_ignored")
    assert len(ignored) == 1 and ignored[0]["frozen"] is True
    assert len(running_app.events("gate.frozen")) == 1
    assert running_app.events("gate.execute_ignored") == []
    assert len(jobs(running_app, JobKind.SPAWN)) == 1

    deliver(running_app, "issues", closed_payload(), "close-1")
    stop = jobs(running_app, JobKind.STOP)
    assert len(stop) == 1 and stop[0].key == "stop:close-1"
    assert stop[0].payload["work_item_id"] == ITEM and stop[0].payload["reason"] == "issue-closed"
    spawn = jobs(running_app, JobKind.SPAWN)[0]
    assert spawn.state == JobState.DONE and spawn.result == {"cancelled": "issue-closed"}
    assert item_row(running_app).state == WorkItemStatus.STOPPED


@pytest.mark.parametrize("operator_yaml", ["routing: {authorizedUsers: [octocat]}\n"])
def test_authorized_users_replace_the_permission_lookup(running_app, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "admin")
    deliver(running_app, "issues", labeled(), "label-1")
    deliver(running_app, "issue_comment", comment("the-loop execute", cid=1), "exec-1")
    assert "Only @octocat may reply" in marked(fake, MarkerKind.REFUSAL)[0]["body"]
    deliver(
        running_app, "issue_comment", comment("the-loop execute", login="OctoCat", cid=2), "exec-2"
    )
    assert item_row(running_app).state == WorkItemStatus.FROZEN
    assert fake.calls("GET", "/permission") == []
