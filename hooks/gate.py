"""The stop gate's answer for one turn of a work-item session.

Evaluates the process graph in-process, bounded by the recorded pointer: it blocks only on
the first unsatisfied node the item has reached, and only when that node's status is
`block`; a position it cannot resolve lets the turn end. Nudges are capped per (item, node) —
`THE_LOOP_GATE_MAX_ATTEMPTS`, set by the spawner from `stopGate.maxAttempts` (in a
sandboxed session's facts file, see `stop_gate`), else 3.

Where the counts live depends on who runs the gate. In a session a spawner started (its
facts file, or for an unconfined session its environment, names `THE_LOOP_URL` and
`THE_LOOP_WORK_ITEM_ID`; its environment holds a session token) the gate runs inside the
session's sandbox, where anything it could write the session could write too: so it asks the
App which attempt it is at (`POST /spawner/v1/gate`), and the App keeps the count, which the
session cannot fill in ahead. An App that cannot be reached, or a sandboxed session
without the token to ask it, is a block, not a free turn.
In a person's own session (the hook installed by `the-loop hooks install`) the counts stay
in a file under the state dir, per checkout. Claude Code's own cap (8 consecutive blocks)
stays a backstop either way.

Runs on every turn: standard library and `app.graph` only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from app import graph
from app.files import write_text_atomic

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_STATE_DIR = "~/.local/state/the-loop"
COUNT_TIMEOUT = 10.0  # seconds to wait for the App's count
_ESCAPE = str.maketrans({"%": "%25", "/": "%2F"})


class GateAnswer(NamedTuple):
    """What the gate answers, and the attempt counts to keep (empty: forget them).

    A NamedTuple rather than a dataclass: importing dataclasses would slow every turn.
    """

    code: int
    stderr: str = ""
    stdout: str = ""
    counts: Mapping[str, int] = {}  # never mutated: decide() builds a new mapping


def decide(
    blocking: Mapping[str, Any] | None, counts: Mapping[str, int], max_attempts: int
) -> GateAnswer:
    """Block on `blocking` unless its nudges are used up; no blocking node ends the turn."""
    if blocking is None:
        return GateAnswer(0)
    name = str(blocking.get("node"))
    attempt = counts.get(name, 0) + 1
    kept = {**counts, name: min(attempt, max_attempts + 1)}
    return verdict(blocking, attempt, max_attempts, kept)


def verdict(
    blocking: Mapping[str, Any], attempt: int, max_attempts: int, kept: Mapping[str, int]
) -> GateAnswer:
    """Block on `blocking` at `attempt` unless that is past the cap."""
    name = str(blocking.get("node"))
    if attempt > max_attempts:
        note = (
            f"the-loop: the stop gate let the turn end: {name} is still not complete after "
            f"{max_attempts} attempts."
        )
        return GateAnswer(0, stdout=json.dumps({"systemMessage": note}), counts=kept)
    lines = [f"the-loop: the {name} step is not complete."]
    lines += [f"  · {m}" for m in blocking.get("messages") or [] if isinstance(m, str)]
    lines += ["", f"Fix the above, then finish. (attempt {attempt}/{max_attempts})"]
    return GateAnswer(2, stderr="\n".join(lines) + "\n", counts=kept)


def max_attempts(env: Mapping[str, str]) -> int:
    """The cap: `THE_LOOP_GATE_MAX_ATTEMPTS`, which the spawner sets from the operator's
    `stopGate.maxAttempts`, else 3.

    The gate reads no config file: parsing YAML would cost every turn more than the rest of
    the gate, and the only file it could find on its own is in the agent-writable checkout.
    """
    value = env.get("THE_LOOP_GATE_MAX_ATTEMPTS", "").strip()
    if value.isdigit() and int(value) >= 1:
        return int(value)
    return DEFAULT_MAX_ATTEMPTS


def read_hook_input(stream: TextIO) -> dict[str, Any]:
    """Claude Code's Stop hook JSON; anything unreadable is an empty input."""
    if stream.isatty():
        return {}
    try:
        data = json.loads(stream.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _starts(hook_input: Mapping[str, Any], env: Mapping[str, str]) -> list[Path]:
    """Where to look for the checkout: the spawn directory first, then where the agent is.

    `cwd` follows the agent's `cd`, so the project directory Claude Code was started in comes
    first: moving elsewhere does not switch the gate off.
    """
    candidates = [env.get("CLAUDE_PROJECT_DIR"), hook_input.get("cwd"), os.getcwd()]
    return [Path(c) for c in candidates if isinstance(c, str) and os.path.isabs(c)]


def attempts_file(state_dir: Path, checkout: Path, item: str) -> Path:
    """`<state dir>/stop-gate/<item>/<checkout path, escaped>.json`: one file per checkout.

    The escaped path keeps the file readable for an operator; a path too long for a file
    name falls back to its hash.
    """
    key = str(checkout.resolve()).translate(_ESCAPE)
    if len(key) > 200:
        import hashlib  # rare: hashing costs a few milliseconds a turn

        key = hashlib.sha256(key.encode()).hexdigest()
    return state_dir / "stop-gate" / item / f"{key}.json"


def load_counts(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    counts = data.get("attempts") if isinstance(data, dict) else None
    if not isinstance(counts, dict):
        return {}
    return {str(k): v for k, v in counts.items() if isinstance(v, int) and v >= 0}


def save_counts(path: Path, checkout: Path, item: str, counts: Mapping[str, int]) -> None:
    """Write atomically; no counts means the item is clear, so the file goes."""
    if not counts:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    record = {"checkout": str(checkout), "workItem": item, "attempts": dict(counts)}
    write_text_atomic(path, json.dumps(record) + "\n")


def app_counter(env: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(App URL, work item id, session token) when a spawner started this session."""
    found = (
        env.get("THE_LOOP_URL", ""),
        env.get("THE_LOOP_WORK_ITEM_ID", ""),
        env.get("THE_LOOP_SESSION_TOKEN", ""),
    )
    return found if all(found) else None


def count_on_app(counter: tuple[str, str, str], node: str) -> int | str:
    """The attempt the App counts for `node`, or why it could not say."""
    import urllib.error  # only a blocking turn pays for these imports
    import urllib.request

    url, item, token = counter
    request = urllib.request.Request(
        url.rstrip("/") + "/spawner/v1/gate",
        data=json.dumps({"work_item_id": item, "node": node}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=COUNT_TIMEOUT) as response:
            attempt = json.loads(response.read()).get("attempt")
    except (OSError, ValueError, AttributeError) as exc:  # HTTPError and URLError are OSErrors
        return str(exc)
    return attempt if isinstance(attempt, int) and attempt >= 1 else f"no attempt in {attempt!r}"


def unusable_facts(why: str) -> GateAnswer:
    """A block for a session whose gate cannot learn its facts: its turn is not free."""
    return GateAnswer(
        2,
        stderr=f"the-loop: the stop gate cannot decide ({why}); the turn cannot end. "
        "Tell the operator.\n",
    )


def run(
    hook_input: Mapping[str, Any], env: Mapping[str, str], facts: str | None = None
) -> GateAnswer:
    """Evaluate the gate for the work item named in `env`; see the module docstring.

    `facts` names the spawner's facts file `env` was read from (a sandboxed session): the
    App must count there, and a session without the token to ask it is blocked."""
    item = env.get("THE_LOOP_WORK_ITEM", "")
    if not item:
        return GateAnswer(0)
    if not graph.ITEM_RE.match(item):
        return GateAnswer(0, stderr=f"the-loop: THE_LOOP_WORK_ITEM={item!r} is not a work item\n")
    starts = _starts(hook_input, env)
    checkout = graph.find_checkout(starts, item) or graph.repository_root(starts[-1])
    report = graph.check_checkout(checkout, item, recompute=True)
    counter = app_counter(env)
    if counter is not None or facts is not None:
        return _counted_by_app(graph.blocking_node(report), counter, max_attempts(env))
    state_dir = Path(env.get("THE_LOOP_STATE_DIR") or DEFAULT_STATE_DIR).expanduser()
    counts_path = attempts_file(state_dir, checkout, item)
    blocking = graph.blocking_node(report)
    counts = load_counts(counts_path) if blocking else {}
    outcome = decide(blocking, counts, max_attempts(env))
    try:
        save_counts(counts_path, checkout, item, outcome.counts)
    except OSError as exc:
        note = f"the-loop: could not record the stop gate's attempt count: {exc}\n"
        return GateAnswer(outcome.code, outcome.stderr + note, outcome.stdout, outcome.counts)
    return outcome


def _counted_by_app(
    blocking: Mapping[str, Any] | None, counter: tuple[str, str, str] | None, cap: int
) -> GateAnswer:
    if blocking is None:
        return GateAnswer(0)
    if counter is None:
        attempt: int | str = "no App URL, work item id or session token to ask it with"
    else:
        attempt = count_on_app(counter, str(blocking.get("node")))
    if isinstance(attempt, str):  # no count: block, the turn is not free for it
        blocked = verdict(blocking, 1, cap, {})
        note = f"the-loop: the App could not count this attempt ({attempt}).\n"
        return GateAnswer(blocked.code, blocked.stderr + note)
    return verdict(blocking, attempt, cap, {})
