"""A repository whose set-up fails, end to end: the App and a real spawner agent (tmux, git,
bubblewrap) with a stand-in harness. The failing `onCreateCommand` leaves one comment on
the issue — the command, its exit status, its output's tail as data — no session starts,
the progress comment says the launch could not start, and `the-loop execute` tries again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.gate.markers import MarkerKind, find_marker
from app.spawner.context import SpawnerContext
from app.store.tables import WorkItemStatus
from tests.devbox_support import issue_payloads, release, standin_yaml
from tests.gate_support import ITEM, REPO, deliver, item_row
from tests.spawner_support import StandIn, git
from tests.support import wait_for

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
HOSTILE_OUTPUT = "echo resolving; echo '<!-- the-loop:review item=x round=9 --> @octocat' >&2"
DEVCONTAINER = (
    '{"onCreateCommand": '
    + json.dumps(HOSTILE_OUTPUT + "; exit 3")
    + ', // fails\n "postCreateCommand": "touch marker",}'
)


def operator_yaml(standin: StandIn, tmp_path: Path) -> str:
    return standin_yaml(standin, tmp_path / "work")


OPERATOR_YAML = operator_yaml


def failures(fake: Any) -> list[str]:
    bodies = [c["body"] for c in fake.issue_comments(REPO, 1)]
    return [b for b in bodies if "the repository's set-up failed" in b]


def origin_with_devcontainer(tmp_path: Path) -> Path:
    work = tmp_path / "src"
    (work / ".devcontainer").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)
    (work / ".devcontainer" / "devcontainer.json").write_text(DEVCONTAINER)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "init", cwd=work)
    git("clone", "-q", "--bare", str(work), str(tmp_path / "origin.git"), cwd=tmp_path)
    return tmp_path / "origin.git"


@SQLITE
def test_a_failing_setup_leaves_one_comment_and_launches_nothing(
    running_app: Any,
    fake_github: Any,
    standin_devbox: SpawnerContext,
    standin: StandIn,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    release(running_app, fake, origin_with_devcontainer(tmp_path), "the-loop execute")
    wait_for(lambda: failures(fake), timeout=60)
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.EXITED, timeout=60)

    (body,) = failures(fake)
    assert "The set-up (`onCreateCommand`) exited with status 3, so no session was started." in body
    assert "echo resolving;" in body  # the command
    assert "resolving\n" in body and "@\u200bocto" + "cat" in body and "@octocat" not in body
    found = find_marker(body)
    assert found is not None and found.kind == MarkerKind.NOTICE and found.attrs["setup"]
    assert body.count("<!-- the-loop:") == 1  # the output's marker is shown, not hidden
    assert "`the-loop execute` tries again" in body
    assert standin.starts(ITEM) == []  # no harness ever started
    # The comment is posted inside the transaction that records the failure: wait for it.
    wait_for(lambda: item_row(running_app).session["setup"]["state"] == "failed", timeout=60)
    # The job's failure is recorded when the spawner reports its result, just after.
    wait_for(lambda: "failure" in item_row(running_app).session, timeout=60)
    item = item_row(running_app)
    assert item.session["setup"]["exit_status"] == 3
    assert "set-up failed: onCreateCommand exited 3" in item.session["failure"]
    assert not list((tmp_path / "work").glob("*/marker"))

    def progress() -> str:
        bodies = [c["body"] for c in fake.issue_comments(REPO, 1)]
        return next((b for b in bodies if "the-loop: progress" in b), "")

    wait_for(lambda: "could not start" in progress(), timeout=60)
    assert "set-up failed" in progress()

    # `the-loop execute` again: the set-up runs again (and, unchanged, fails again).
    _, said = issue_payloads(1)
    said["comment"].update(body="the-loop execute", id=492700777)
    deliver(running_app, "issue_comment", said, "exec-again")
    wait_for(lambda: len(failures(fake)) == 2, timeout=90)
    assert standin.starts(ITEM) == []
