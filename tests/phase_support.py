"""A work item walked through its phases from a session's side: the item executed on the
fake GitHub (`phased_app`), the environment the spawner gives its session (`phase_env`),
the real `the-loop phase` CLI run in that checkout, and the spawner's look at what the
session wrote. A module says what its execute reply ticks with `EXECUTE_REPLY`."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.fleet.tokens import create_token, mint_session_token
from app.graph import evidence_fields
from app.spawner.workspace.evidence import host_evidence
from tests.gate_support import ITEM, REPO, comment, deliver, labeled
from tests.support import artifact, module_setting

ROOT = Path(__file__).resolve().parents[1]
SPEC = "issue-1"
# Only requirements, design and the task list are skipped here when a test asks for it.
SKIP_ALL_BUT_DESIGN = (
    "the-loop execute\n- [ ] requirements-definition\n- [x] design\n- [ ] test-planning\n"
    "- [ ] tasks-breakdown\n"
)


@pytest.fixture
def phased_app(request: pytest.FixtureRequest, running_app: Any, fake_github: Any) -> Any:
    """The App with the fixture issue labelled and executed by Codertocat (write access),
    with the module's `EXECUTE_REPLY` (else `SKIP_ALL_BUT_DESIGN`)."""
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    deliver(running_app, "issues", labeled(), "label")
    reply = module_setting(request, "EXECUTE_REPLY", SKIP_ALL_BUT_DESIGN)
    deliver(running_app, "issue_comment", comment(reply, cid=5001), "execute")
    return running_app


@pytest.fixture
def phase_env(phased_app: Any, tmp_path: Path) -> dict[str, str]:
    """The environment the spawner gives a session, with a checkout directory to run in."""
    with phased_app.state.sessions() as db, db.begin():
        token = mint_session_token(db, ITEM, datetime.now(UTC))
        spawner = create_token(db, "devbox", [REPO])
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "THE_LOOP_URL": phased_app.url,
        "THE_LOOP_SESSION_TOKEN": token,
        "THE_LOOP_WORK_ITEM": SPEC,
        "THE_LOOP_WORK_ITEM_ID": ITEM,
        "CHECKOUT": str(checkout),
        "SPAWNER_TOKEN": spawner,  # the test's, for what the spawner reports; not the session's
    }


def phase(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`the-loop phase [next]` as the session runs it, in its checkout."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "phase", *args],
        cwd=env["CHECKOUT"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write(env: dict[str, str], name: str, text: str = artifact("Written")) -> None:
    """The session writes an artifact, and the spawner's next look reports it."""
    folder = Path(env["CHECKOUT"]) / "docs" / "specs" / SPEC
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    spawner_sees(env)


def spawner_sees(env: dict[str, str]) -> None:
    """What the spawner's watchdog does on each look: read the checkout from the host (no
    link followed) and report it with the spawner's token."""
    seen = evidence_fields(host_evidence(Path(env["CHECKOUT"]), SPEC))
    event = {"id": uuid.uuid4().hex, "event": "session.evidence", "work_item_id": ITEM, **seen}
    reported = httpx.post(
        f"{env['THE_LOOP_URL']}/spawner/v1/events",
        json={"events": [event]},
        headers={"Authorization": f"Bearer {env['SPAWNER_TOKEN']}"},
        timeout=10,
    )
    assert reported.status_code == 200 and reported.json()["accepted"] == 1, reported.text
