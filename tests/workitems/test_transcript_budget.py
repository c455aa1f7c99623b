"""A session without the gateway (a shared login, no key) is still held to its budget: its
spawner reads the usage back from the session's transcript while it runs, the App finds the
budget spent and the spawner stops the session — nothing refuses the model for it, so the
stop is the whole of it. The App, a real spawner agent (tmux, bubblewrap) and a stand-in
harness that writes a Claude Code transcript and keeps running."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.spawner.context import SpawnerContext
from app.store.tables import WorkItemStatus
from tests.claude_support import TRANSCRIPT
from tests.devbox_support import release
from tests.gate_support import ITEM, REPO, item_row
from tests.spawner_support import StandIn, bare_repository
from tests.support import wait_for

pytestmark = pytest.mark.admin_token


def operator_yaml_of(standin: StandIn, tmp_path: Path) -> str:
    sandbox = {**standin.sandbox, "shareLogin": True}  # no key: sessions skip the gateway
    return (
        f"harnesses:\n  - {{name: claude, default: true, command: {standin.path}}}\n"
        f"routing:\n  workspace: {{root: {tmp_path / 'work'}}}\n"
        f"  sandbox: {json.dumps(sandbox)}\n  budget: {{tokens: 150}}\n"
    )


OPERATOR_YAML = operator_yaml_of


# No key: the devbox holds no credential, so its sessions skip the model gateway; their
# transcripts are read every second.
STANDIN_DEVBOX = {"model_key": None, "transcript_interval": 1}


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_session_without_the_gateway_is_stopped_by_its_budget_while_it_runs(
    running_app: Any,
    fake_github: Any,
    standin_devbox: SpawnerContext,
    standin: StandIn,
    tmp_path: Path,
) -> None:
    assert standin_devbox.models is None
    fake, _ = fake_github
    standin.plan(ITEM, {"transcript": TRANSCRIPT})  # 187 tokens, then it keeps running
    release(running_app, fake, bare_repository(tmp_path), "the-loop execute")
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.STOPPED, timeout=60)
    (stopped,) = wait_for(lambda: running_app.events("session.stopped"), timeout=60)
    assert stopped["reason"] == "budget"
    usage = running_app.events("session.usage")
    assert usage and all(e.get("source") == "transcript" for e in usage)
    assert sum(e["input_tokens"] for e in usage) == 107  # each answer once, however often read
    ending = wait_for(
        lambda: [
            c["body"] for c in fake.issue_comments(REPO, 1) if "its budget is spent" in c["body"]
        ],
        timeout=60,
    )
    assert "**Budget:** tokens 187 of 150" in ending[0]
