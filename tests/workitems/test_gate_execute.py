"""`execute_reply` as other surfaces call it (the Slack Execute button): the same parser, the same
authorization rule, the same single freeze — over a real database and the fake GitHub API."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy.orm import Session

from app.config.process_settings import load_settings
from app.gate.markers import MarkerKind
from app.gate.textpin import digest
from app.github.services import HandlerContext
from app.runtime.app_state import AppState, build_state
from app.store.tables import JobKind, ModelVerdict, WorkItem
from app.workitems.decide.decisions import Decision, Outcome, Status
from app.workitems.decide.execute import execute_reply
from app.workitems.flow.offers import refused_choices
from tests.fakes.github_api import BOT_LOGIN
from tests.gate_support import (
    ITEM,
    REPO,
    checklist_comments,
    jobs,
    labeled,
    marked,
)
from tests.stopgate_support import NO_STOPS
from tests.support import fixture_json

pytestmark = pytest.mark.admin_token  # the operator may read /status


class RecordingMirror:
    """A chat surface that keeps what it was asked to post (the Mirror protocol)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str, dict[str, Any]]] = []

    def post(self, session: Session, work_item_id: str, kind: str, payload: dict[str, Any]) -> None:
        self.posts.append((work_item_id, kind, payload))

    def kinds(self) -> list[str]:
        return [kind for _, kind, _ in self.posts]


@pytest.fixture
def state(settings_env: dict[str, str]) -> Iterator[AppState]:
    """The App's services over a fresh store, without an HTTP server or inbox workers."""
    built = build_state(load_settings(settings_env, dotenv=None))
    built.services.mirror = RecordingMirror()
    yield built
    built.close()


def handle(state: AppState, event: str, action: str, payload: dict[str, Any]) -> None:
    with state.sessions(expire_on_commit=False) as session, session.begin():
        ctx = HandlerContext(
            state.services, session, f"d-{event}", event, action, json.dumps(payload).encode()
        )
        state.router.dispatch(ctx)


def execute(state: AppState, author: str, body: str, ref: str) -> Outcome:
    with state.sessions() as session, session.begin():
        return execute_reply(state.services, session, Decision(ITEM, author, body, ref, "slack"))


SLACK_TEXT = "the-loop execute\n- [ ] design\n- [x] test-planning\n- [x] brainstorming\n"


def slack_text(mirrored: dict[str, Any], pressed: dict[str, bool]) -> str:
    """What the Slack Execute button composes: the keyword, then every offered row."""
    rows = [
        ("- [x] " if pressed.get(row["token"], row["checked"]) else "- [ ] ") + row["token"]
        for section in mirrored["sections"]
        for row in section["rows"]
    ]
    return mirrored["keyword"] + "\n" + "\n".join(rows)


def test_slack_execute_is_authorized_frozen_once_and_answered_in_slack(state, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    issue = {**fixture_json("github/issues.labeled.json")["issue"], "body": "Edited since."}
    fake.add_issue(REPO, issue)
    handle(state, "issues", "labeled", labeled())
    mirror = state.services.mirror
    assert mirror.kinds() == ["item_started", "checklist"]
    mirrored = mirror.posts[1][2]
    assert mirrored["comment_id"] == checklist_comments(fake)[0]["id"]
    assert mirrored["url"] == "https://github.com/Codertocat/Hello-World/issues/1"

    pressed = slack_text(mirrored, {"design": False, "brainstorming": True})
    refused = execute(state, "mallory", pressed, "A-1")
    assert refused.status is Status.REFUSED and "mallory" in refused.why
    assert marked(fake, MarkerKind.REFUSAL) == []  # Slack answers a Slack press itself

    # The body on GitHub is not the one the checklist was posted for: ask again, once.
    changed = execute(state, "Codertocat", pressed, "A-2")
    assert changed.status is Status.CHANGED and "body (+1 -1 lines)" in changed.why
    (asked,) = marked(fake, MarkerKind.CHANGED)
    assert asked["body"].startswith("@Codertocat, this did not start the work")
    assert mirror.kinds()[-1] == "refused" and jobs(state) == []

    outcome = execute(state, "Codertocat", pressed, "A-3")
    assert outcome.status is Status.FROZEN
    assert outcome.frozen is not None and set(outcome.frozen["skips"]) == {"design", *NO_STOPS}
    assert outcome.frozen["issue"]["sha256"] == digest("Edited since.")
    assert mirror.kinds()[-1] == "confirmation"  # queued in the execute's transaction
    assert marked(fake, MarkerKind.CONFIRMATION) == []  # posted once the execute committed…
    state.progress.drain()  # …by the progress publisher
    (confirmed,) = marked(fake, MarkerKind.CONFIRMATION)
    with state.sessions() as session:
        item = session.get(WorkItem, ITEM)
        assert item is not None and item.confirmation_comment_id == confirmed["id"]
    (spawn,) = jobs(state, JobKind.SPAWN)
    assert spawn.id == outcome.job_id and spawn.key == "spawn:A-3"
    assert spawn.payload["prompt"].rstrip().endswith("Edited since.")
    assert "the-loop ask" in spawn.payload["prompt"]  # work-item mode: nobody watches the pane

    again = execute(state, "Codertocat", "the-loop execute\n- [x] design", "A-4")
    assert again.status is Status.ALREADY_FROZEN and again.frozen == outcome.frozen
    assert len(jobs(state, JobKind.SPAWN)) == 1 and len(marked(fake, MarkerKind.CONFIRMATION)) == 1
    assert not fake.calls("GET", "/issues/comments/")  # the Slack text answered every row


@pytest.mark.parametrize("operator_yaml", ["models: [{name: opus}, {name: haiku}]\n"])
def test_choices_models_check_refused_are_hidden_and_dropped(state, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    with state.sessions() as session, session.begin():
        assert refused_choices(session) == set()
        session.add(ModelVerdict(token="model-haiku", verdict="refused"))
        session.add(ModelVerdict(token="model-opus", verdict="ok"))
    handle(state, "issues", "labeled", labeled())
    body = checklist_comments(fake)[0]["body"]
    assert "`model-opus`" in body and "haiku" not in body
    outcome = execute(state, "Codertocat", "the-loop execute\n- [x] model-haiku", "A-1")
    assert outcome.frozen is not None and outcome.frozen["model"] == ""
    assert outcome.frozen["dropped"] == [
        {"token": "model-haiku", "reason": "refused by `the-loop models check`"}
    ]


def test_a_checklist_posted_before_a_crash_is_adopted_and_its_boxes_still_count(state, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    marker_line = f"<!-- the-loop:checklist item={ITEM} -->"
    fake.add_comment(REPO, 1, f"- [ ] tasks-breakdown\n{marker_line}", "mallory")  # a copy
    fake.add_comment(REPO, 1, f"- [x] design\n{marker_line}", "other-app[bot]", "Bot")
    earlier = fake.add_comment(REPO, 1, f"- [ ] `tasks-breakdown`\n{marker_line}", BOT_LOGIN, "Bot")
    handle(state, "issues", "labeled", labeled())
    assert len(fake.issue_comments(REPO, 1)) == 3 and not fake.calls("POST", "/comments$")
    with state.sessions() as session:
        item = session.get(WorkItem, ITEM)
        assert item is not None and item.checklist_comment_id == earlier["id"]

    outcome = execute(state, "Codertocat", SLACK_TEXT, "A-1")  # mentions only some rows
    assert outcome.frozen is not None
    assert set(outcome.frozen["skips"]) == {"design", "tasks-breakdown", *NO_STOPS}
    assert fake.calls("GET", rf"/issues/comments/{earlier['id']}$")


def test_nothing_freezes_without_an_open_item_and_the_keyword(state, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    assert execute(state, "Codertocat", SLACK_TEXT, "A-1").status is Status.NOT_A_WORK_ITEM
    closed = labeled()
    closed["issue"] = {**closed["issue"], "state": "closed"}
    handle(state, "issues", "labeled", closed)
    assert fake.issue_comments(REPO, 1) == []
    assert execute(state, "Codertocat", SLACK_TEXT, "A-2").status is Status.NOT_A_WORK_ITEM

    handle(state, "issues", "labeled", labeled())
    outcome = execute(state, "Codertocat", "run it\n- [x] design", "A-3")
    assert outcome.status is Status.REFUSED and "does not start with" in outcome.why
    assert jobs(state) == []

    # GitHub cannot show the issue (404): the session starts from the text pinned with the
    # checklist, the one the human saw.
    assert execute(state, "Codertocat", SLACK_TEXT, "A-4").status is Status.FROZEN
    (spawn,) = jobs(state, JobKind.SPAWN)
    assert spawn.payload["title"] == "Spelling error in the README file"
    assert spawn.payload["prompt"].rstrip().endswith("spelled 'commit' with two 't's.")


def test_two_executes_at_once_freeze_once(state, fake_github):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    handle(state, "issues", "labeled", labeled())
    barrier = threading.Barrier(2)

    def press(ref: str) -> Outcome:
        barrier.wait()
        return execute(state, "Codertocat", SLACK_TEXT, ref)

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(press, ["A-1", "A-2"]))
    assert sorted(o.status for o in outcomes) == [
        Status.ALREADY_FROZEN,
        Status.FROZEN,
    ]
    assert len(jobs(state, JobKind.SPAWN)) == 1
    state.progress.drain()  # what the executes owe the issue, posted after their commits
    assert len(marked(fake, MarkerKind.CONFIRMATION)) == 1
