"""The App side of a work item's whole life, composed as deployed: webhooks through the gate,
the spawner API over HTTP, follow-ups, the agent's own comments, and the close."""

from __future__ import annotations

from app.fleet.tokens import create_token
from app.gate.markers import MarkerKind
from app.store.tables import JobState, WorkItemStatus
from tests.gate_support import (
    ITEM,
    REPO,
    comment,
    deliver,
    item_row,
    jobs,
    labeled,
    marked,
)
from tests.spawnerapi_support import SpawnerClient
from tests.support import fixture_json, with_installation

CONFIG = """
harnesses:
  - name: claude
    default: true
    args: ["--dangerously-skip-permissions"]
models:
  - {name: opus}
effort: [low, high]
"""


OPERATOR_YAML = CONFIG


def test_a_work_item_from_execute_to_close(running_app, fake_github):
    fake, _ = fake_github

    with running_app.state.sessions() as db, db.begin():
        token = create_token(db, "devbox", [REPO])
    spawner = SpawnerClient(running_app.url, token)
    assert spawner.register(harnesses=["claude"]).status_code == 200
    fake.grant(REPO, "Codertocat", "write")

    deliver(running_app, "issues", labeled(), "label-1")
    reply = "the-loop execute\n- [x] model-opus\n- [x] effort-high"
    deliver(running_app, "issue_comment", comment(reply, cid=1001), "exec-1")

    spawn = spawner.job(wait=5)
    assert spawn["kind"] == "spawn" and spawn["work_item_id"] == ITEM
    frozen = spawn["payload"]["frozen"]
    assert (frozen["model"], frozen["effort"]) == ("opus", "high")
    assert (spawn["payload"]["gh_event"], spawn["payload"]["action"]) == (
        "issue_comment",
        "created",
    )
    assert "github_token" not in spawn  # asked for only by a spawner that must clone
    clone = spawner.clone_token(spawn["id"]).json()["github_token"]["token"]
    assert fake.tokens[clone]["repositories"] == ["Hello-World"]
    assert item_row(running_app).state == WorkItemStatus.SPAWNING
    session = {
        "session_id": "5d0c",
        "tmux_target": "the-loop:issue-1",
        "harness": "claude",
        "model": "opus",
        "effort": "high",
        "harness_args": ["--dangerously-skip-permissions", "--model", "opus", "--effort", "high"],
        "checkout": "/work/issue-1",
        "respawned": False,
    }
    assert spawner.result(spawn["id"], **session).status_code == 200
    assert item_row(running_app).state == WorkItemStatus.RUNNING
    assert fake.tokens[clone]["revoked"]  # the clone is done
    own = [t for t in fake.tokens.values() if t["repositories"] is None]  # the App's calls
    assert own and all(t["permissions"] == {"issues": "write", "metadata": "read"} for t in own)

    # a follow-up reaches the session and gets its receipt
    deliver(running_app, "issue_comment", comment("Keep the README short.", cid=1002), "c-1")
    follow_up = spawner.job(wait=5)
    assert follow_up["kind"] == "deliver" and follow_up["payload"]["comment_id"] == 1002
    spawner.result(follow_up["id"], delivered=True, respawned=False, session_id="5d0c")
    assert [r["content"] for r in fake.reactions if r["target_id"] == 1002] == ["eyes"]

    # the session answers (with its own token: the one offered with the follow-up died when
    # the session already running took it); its words come back and are not delivered again
    assert SpawnerClient(running_app.url, follow_up["session_token"]).comment(ITEM, "x").is_error
    agent = SpawnerClient(running_app.url, spawn["session_token"])
    posted = agent.comment(ITEM, "Shortened it to one screen.").json()
    (mine,) = marked(fake, MarkerKind.AGENT)
    assert mine["id"] == posted["comment_id"]
    bot = comment(mine["body"], login=mine["user"]["login"], cid=posted["comment_id"])
    bot["comment"]["user"]["type"] = "Bot"
    deliver(running_app, "issue_comment", bot, "c-2")
    assert spawner.job() is None

    # closing the issue stops the session and withdraws its credentials
    closed = with_installation(fixture_json("github/issues.closed.json"))
    closed["repository"] = labeled()["repository"]  # the published close is of another repo
    closed["issue"]["number"] = 1
    deliver(running_app, "issues", closed, "close-1")
    stop = spawner.job(wait=5)
    assert stop["kind"] == "stop"
    assert spawner.result(stop["id"], stopped=True).status_code == 200
    assert item_row(running_app).state == WorkItemStatus.STOPPED
    assert agent.comment(ITEM, "still here").status_code == 401
    assert {job.state for job in jobs(running_app)} == {JobState.DONE}
    kinds = [e["kind"] for e in running_app.events("job.claimed")]
    assert kinds == ["spawn", "deliver", "stop"]
