"""Jobs on real tmux and git for the spawner tests: the context, and spawn/deliver jobs for
any work item (`item`), built the way the App builds them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.audit import read_jsonl
from app.config.operator_config import parse_config
from app.protocol import DeliverJob, SpawnJob
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.jobkinds import run_job
from app.spawner.naming import item_slug
from app.spawner.registry import Registry
from app.spawner.session.pastetext import paste_text
from app.spawner.session.tmux import TmuxRunner
from tests.spawner_support import StandIn, bare_repository

FLAG = "--dangerously-skip-permissions"
WI = "github:o/r#7"
NAME = item_slug(WI)
TOKEN = "ghs_InstallationTokenNeverLogged42"
SESSION_TOKEN = "tlss_SessionCredential"


def make_config(standin: StandIn, tmp_path: Path, **routing: Any) -> Any:
    return parse_config(
        {
            "harnesses": [
                {"name": "claude", "default": True, "command": str(standin.path), "args": [FLAG]}
            ],
            "models": [{"name": "opus", "id": "claude-opus-4-1"}],
            "effort": ["high"],
            "routing": {
                "workspace": {"root": str(tmp_path / "work")},
                "sandbox": standin.sandbox,
                **routing,
            },
        },
        "test.yaml",
    )


def standin_context(
    tmp_path: Path,
    standin: StandIn,
    runner: TmuxRunner,
    home: Path,
    *,
    app_url: str,
    env: dict[str, str],
    ready_timeout: float = 30.0,
    ask_token: Callable[[int], str | None] | None = None,
) -> SpawnerContext:
    """A spawner context whose sessions run `standin` (`make_config`), its state under
    `tmp_path/state`; `ask_token` stands for the App's answer to a clone's token request."""
    state = tmp_path / "state"
    return SpawnerContext(
        config=make_config(standin, tmp_path),
        runner=runner,
        registry=Registry(state / "sessions.json"),
        events=SpawnerEvents(state),
        home=home,
        state_dir=state,
        app_url=app_url,
        hosts=frozenset({"claude"}),
        env=env,
        ready_timeout=ready_timeout,
        ask_token=ask_token,
    )


@pytest.fixture
def ctx(
    tmp_path: Path, runner: TmuxRunner, standin: StandIn, home: Path
) -> Iterator[SpawnerContext]:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    made = standin_context(
        tmp_path,
        standin,
        runner,
        home,
        app_url="http://127.0.0.1:9",
        env=env,
        ask_token=lambda job_id: TOKEN,  # what the App would mint for a clone
    )
    yield made
    if made.limiter is not None:  # its sessions' cgroups, and its own, go with the test
        made.limiter.release()


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return bare_repository(tmp_path)


def _where(item: str) -> dict[str, Any]:
    """The payload fields that name a work item `github:<repo>#<n>`."""
    repo, _, number = item.removeprefix("github:").rpartition("#")
    return {
        "work_item_id": item,
        "spec_id": f"issue-{number}",
        "repo": repo,
        "issue_number": int(number),
    }


def spawn_job(
    origin: Path, *, prompt: str = "Work on issue 7", item: str = WI, **frozen: Any
) -> ClaimedJob:
    record = {
        "decisions": {"phase-selection": {"at": "t", "by": "octocat"}},
        "skips": {},
        "harness": "claude",
        "model": "opus",
        "effort": "high",
        "dropped": [],
        **frozen,
    }
    payload = {
        **_where(item),
        "clone_url": str(origin),
        "frozen": record,
        "gh_event": "issue_comment",
        "action": "created",
        "prompt": prompt,
    }
    return ClaimedJob(1, SpawnJob.model_validate(payload), 60, SESSION_TOKEN)


def deliver_job(
    origin: Path,
    body: str = "please also handle the empty list",
    jid: int = 2,
    frozen: dict[str, Any] | None = None,
    item: str = WI,
) -> ClaimedJob:
    payload = {
        **_where(item),
        "clone_url": str(origin),
        "comment_id": 99,
        "body": body,
        "author": "octocat",
        "source": "github",
        "ref": "99",
        "gh_event": "issue_comment",
        "action": "created",
        "frozen": frozen or {},
    }
    return ClaimedJob(jid, DeliverJob.model_validate(payload), 60, "tlss_second")


START_PASTE, END_PASTE, CLEAR_LINE = b"\x1b[200~", b"\x1b[201~", b"\x15"


def pasted(text: str) -> bytes:
    """The bytes one paste of `text` puts on a harness's terminal."""
    body = paste_text(text).text.replace("\n", "\r").encode()
    return CLEAR_LINE + START_PASTE + body + END_PASTE + b"\r"


def events(ctx: SpawnerContext, name: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(ctx.events.path) if e["event"] == name]


def run_ok(ctx: SpawnerContext, job: ClaimedJob) -> dict[str, Any]:
    ok, result, error = run_job(ctx, job)
    assert ok, error
    return result
