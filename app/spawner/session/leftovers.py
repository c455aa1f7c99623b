"""What a session left behind when it ended: the agent's last message and the files changed
on its branch, sent with `session.exited` / `session.stopped` so the App can say on the issue
what was tried.

Everything here is read from places the session could write — its home and its checkout — so
it is data, never instructions: the transcript is found and opened without following a link
(and without waiting on a fifo) at any step and only its tail is read; git runs through the
spawner's one safe door (`hostgit`: refused when the repository holds a link, fifo or device,
hooks, fsmonitor and filters off, confined with the sandbox, on a short timeout); what comes
back is cut to a size an event may carry. Whatever cannot be read is left out and named in
`leftovers_unread`: describing a session never keeps its end from being reported. Usage is
left to whoever counts it (the model gateway); this module does not.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from app.config import OperatorConfig, SandboxMode
from app.spawner.confine.sessionhome import home_for
from app.spawner.harness import adapter_of
from app.spawner.harness.claude_home import transcript_path
from app.spawner.naming import item_slug
from app.spawner.registry import SessionRecord
from app.spawner.workspace.hostgit import CheckoutError, HostGit

MAX_MESSAGE = 3000  # characters of the last message kept (its end: where a summary is)
MAX_FILES = 50
MAX_PATH = 200
TAIL_BYTES = 1024 * 1024  # how much of a transcript's end is read
GIT_TIMEOUT = 10  # seconds for each git command on an ended session's checkout

Describe = Callable[[SessionRecord], dict[str, Any]]


def _tail(path: Path, size: int = TAIL_BYTES) -> str:
    """The end of a regular file, opened without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return ""
        fh.seek(max(0, info.st_size - size))
        return fh.read(size).decode("utf-8", "replace")


def transcript_tail(home: Path, session_id: str, size: int = 64 * 1024) -> str:
    """The end of `session_id`'s transcript under `home` ("" when there is none)."""
    found = transcript_path(home, session_id)
    if found is None:
        return ""
    try:
        return _tail(found, size)
    except OSError:
        return ""


def message_text(entry: Any) -> str:
    """The text an assistant transcript entry says, or "" (pure). Claude Code's entries are
    `{"type": "assistant", "message": {"content": …}}`; Codex's rollout entries
    `{"type": "response_item", "payload": {"type": "message", "role": "assistant", …}}`."""
    if not isinstance(entry, dict):
        return ""
    payload = entry.get("payload")
    if entry.get("type") == "response_item" and isinstance(payload, dict):
        if payload.get("type") != "message" or payload.get("role") != "assistant":
            return ""
        message: Any = payload
    elif entry.get("type") == "assistant":
        message = entry.get("message")
    else:
        return ""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts = [
        str(part.get("text") or "")
        for part in content
        if isinstance(part, dict) and part.get("type") in ("text", "output_text")
    ]
    return "\n".join(p for p in parts if p.strip()).strip()


def last_message(transcript: str) -> str:
    """The last thing the agent said in a JSON-lines transcript, its end kept (pure)."""
    for line in reversed(transcript.splitlines()):
        try:
            text = message_text(json.loads(line))
        except ValueError:
            continue
        if text:
            return text if len(text) <= MAX_MESSAGE else "…" + text[-(MAX_MESSAGE - 1) :]
    return ""


def session_home(
    config: OperatorConfig, real_home: Path, state_dir: Path, work_item_id: str, harness: str = ""
) -> Path:
    """The home a work item's session runs with: its own under the sandbox, else the real one
    (unless its harness keeps a home of its own either way, as Codex keeps its `CODEX_HOME`)."""
    unconfined = config.routing.sandbox.resolved is SandboxMode.NONE
    if unconfined and not (harness and adapter_of(harness).own_home_unconfined):
        return real_home
    return home_for(state_dir, item_slug(work_item_id))


def run_git(checkout: Path, git: HostGit, *args: str) -> bytes | None:
    """git's output in `checkout` through the spawner's one safe door (`hostgit`: confined,
    neutralised, on a short timeout), or None when it fails or does not finish. The caller
    has seen `git.refusal` find nothing wrong with the checkout."""
    try:
        proc = git.run(checkout, *args, check=False, timeout=GIT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired, CheckoutError):
        return None
    return proc.stdout.encode("utf-8", "surrogateescape") if proc.returncode == 0 else None


def _names(output: bytes) -> list[str]:
    names = [n.decode("utf-8", "replace")[:MAX_PATH] for n in output.split(b"\0") if n]
    more = [f"… and {len(names) - MAX_FILES} more"] if len(names) > MAX_FILES else []
    return names[:MAX_FILES] + more


def changed_files(checkout: Path, git: HostGit) -> dict[str, Any]:
    """The files committed on the checkout's branch since it left the default branch
    (`changed_files`, with `changed_base`), and those changed but not committed
    (`uncommitted_files`); a key is missing when git cannot say, and a checkout whose
    repository the session tampered with is not read at all (`leftovers_unread` says why)."""
    refused = git.refusal(checkout)
    if refused is not None:
        return {"leftovers_unread": f"the checkout's git was not read: {refused}"}
    facts: dict[str, Any] = {}
    base = "origin/HEAD"
    diff = ["diff", "--no-ext-diff", "--no-textconv", "--name-only", "-z", f"{base}...HEAD"]
    committed = run_git(checkout, git, *diff, "--")
    if committed is not None:
        facts["changed_base"], facts["changed_files"] = base, _names(committed)
    loose = run_git(checkout, git, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    if loose is not None:
        facts["uncommitted_files"] = _names(b"\0".join(porcelain_paths(loose)))
    return facts


def porcelain_paths(output: bytes) -> list[bytes]:
    """The paths `git status --porcelain=v1 -z` lists (pure): `XY path`, a rename or copy
    followed by its old path, which is left out."""
    entries = output.split(b"\0")
    paths: list[bytes] = []
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[:1] in (b"R", b"C"):
            index += 1  # the old path of a rename or copy
    return paths


def describe_session(
    config: OperatorConfig, real_home: Path, state_dir: Path, env: Mapping[str, str]
) -> Describe:
    """What `session.exited` / `session.stopped` carry about the session that ended."""
    confined = config.routing.sandbox.resolved is not SandboxMode.NONE
    git = HostGit(env, confined=confined)

    def read(record: SessionRecord, facts: dict[str, Any]) -> None:
        home = session_home(config, real_home, state_dir, record.work_item_id, record.harness)
        found = adapter_of(record.harness).transcript(home, record.session_id)
        if found is not None:
            with contextlib.suppress(OSError):  # gone or swapped since it was found
                facts["last_message"] = last_message(_tail(found))
        facts.update(changed_files(Path(record.checkout), git))

    def describe(record: SessionRecord) -> dict[str, Any]:
        facts: dict[str, Any] = {"started_at": record.started_at}
        try:
            read(record, facts)
        except Exception as exc:  # the session's end is reported whatever it left
            facts["leftovers_unread"] = f"what the session left could not be read ({exc})"[:300]
        return facts

    return describe
