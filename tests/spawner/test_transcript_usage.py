"""Usage read back from a harness's transcript, for sessions that run without the gateway
(`shareLogin` and no key): each answer counted once, the session's file read as hostile data
(no link followed, bounded, a broken line skipped), only the growth reported when a resumed
session appends to it — and, end to end, what a stand-in session's transcript says reaches
the App's totals and the ending comment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.gateway.metering import Usage
from app.spawner.context import SpawnerContext
from app.spawner.session.transcript_usage import (
    MAX_LINE,
    TranscriptUsage,
    claude_counts,
    claude_usage,
    reader_for,
)
from app.workitems.spend.usage import usage_of
from tests.claude_support import TRANSCRIPT, transcript_answer
from tests.devbox_support import release
from tests.gate_support import ITEM
from tests.spawner_support import StandIn, bare_repository
from tests.support import wait_for

pytestmark = pytest.mark.admin_token

SESSION = "0f6a8a2e-6c1b-4f57-9a53-5d1c1e2d0b11"


COUNTED = Usage(
    input_tokens=107,
    output_tokens=21,
    cache_read_input_tokens=50,
    cache_creation_input_tokens=9,
    requests=2,
    tool_calls=1,
)


def lines(entries: list[Any]) -> list[bytes]:
    return [json.dumps(e).encode() + b"\n" for e in entries]


def write_transcript(home: Path, entries: list[Any], folder: str = "-work-o-r") -> Path:
    where = home / ".claude" / "projects" / folder
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{SESSION}.jsonl"
    with path.open("ab") as fh:
        fh.writelines(lines(entries))
    return path


def test_each_answer_counts_once_and_nonsense_counts_nothing() -> None:
    broken = [b"{not json\n", b"[1, 2]\n", b"x" * (MAX_LINE + 10) + b"\n"]
    assert claude_counts([*broken, *lines(TRANSCRIPT)]) == COUNTED
    assert claude_counts([]) == Usage()


def test_the_transcript_is_found_in_the_session_home_without_following_a_link(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    write_transcript(home, TRANSCRIPT)
    assert claude_usage(home, SESSION) == COUNTED
    assert claude_usage(home, "not a session id") is None

    linked = tmp_path / "linked"
    secret = tmp_path / "elsewhere.jsonl"
    secret.write_bytes(b"".join(lines(TRANSCRIPT)))
    folder = linked / ".claude" / "projects" / "-w"
    folder.mkdir(parents=True)
    (folder / f"{SESSION}.jsonl").symlink_to(secret)
    assert claude_usage(linked, SESSION) is None  # a linked transcript reads as none

    moved = tmp_path / "moved"
    (moved / ".claude").mkdir(parents=True)
    (moved / ".claude" / "projects").symlink_to(home / ".claude" / "projects")
    assert claude_usage(moved, SESSION) is None  # so does a linked directory on the way


def test_a_resumed_session_reports_only_what_it_added(tmp_path: Path) -> None:
    home, state = tmp_path / "home", tmp_path / "state"
    state.mkdir()
    sent: list[tuple[str, str, dict[str, Any]]] = []
    meter = TranscriptUsage(state, lambda name, item, **fields: sent.append((name, item, fields)))
    reader = reader_for("claude", "/usr/bin/claude")
    assert reader is not None and reader_for("codex", "/usr/bin/codex") is None
    assert meter.report(reader, ITEM, home, SESSION) is None  # no transcript yet: nothing
    write_transcript(home, TRANSCRIPT)
    assert meter.report(reader, ITEM, home, SESSION) == COUNTED
    assert meter.report(reader, ITEM, home, SESSION) == Usage()  # nothing new: no event
    write_transcript(home, [transcript_answer("msg_9", {"input_tokens": 1000, "output_tokens": 2})])
    assert meter.report(reader, ITEM, home, SESSION) == Usage(1000, 2, requests=1)
    assert [(n, i) for n, i, _ in sent] == [("session.usage", ITEM)] * 2
    assert sent[1][2]["input_tokens"] == 1000 and sent[1][2]["source"] == "transcript"


def operator_yaml_of(standin: StandIn, tmp_path: Path) -> str:
    sandbox = {**standin.sandbox, "shareLogin": True}  # no key: sessions skip the gateway
    return (
        f"harnesses:\n  - {{name: claude, default: true, command: {standin.path}}}\n"
        f"routing:\n  workspace: {{root: {tmp_path / 'work'}}}\n  sandbox: {json.dumps(sandbox)}\n"
    )


OPERATOR_YAML = operator_yaml_of


# No key: the devbox holds no credential, so its sessions skip the model gateway.
STANDIN_DEVBOX = {"model_key": None}


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_session_without_the_gateway_is_counted_from_its_transcript(
    running_app: Any,
    fake_github: Any,
    standin_devbox: SpawnerContext,
    standin: StandIn,
    tmp_path: Path,
) -> None:
    assert standin_devbox.models is None  # a shared login, no key: no gateway counts this session
    fake, _ = fake_github
    standin.plan(ITEM, {"transcript": TRANSCRIPT, "exit": 0})
    release(running_app, fake, bare_repository(tmp_path), "the-loop execute")

    def counted() -> dict[str, int]:
        with running_app.state.sessions() as session:
            return usage_of(session, [ITEM])[ITEM]

    wait_for(lambda: counted()["requests"], timeout=60)
    assert counted() == COUNTED.to_json()
    (ending,) = wait_for(
        lambda: [
            c["body"]
            for c in fake.issue_comments("Codertocat/Hello-World", 1)
            if "the session ended before review" in c["body"]
        ],
        timeout=60,
    )
    assert "**Usage:** 187 tokens (in 107 · out 21 · cache 59) · cost unknown" in ending
