"""The work-item process graph: its nodes as data, and `check` as a pure evaluation.

The outer loop runs `phase-selection` → `brainstorming` → `requirements-definition` →
`design` → `approve-design` → `test-planning` → `tasks-breakdown` → `approve-tasks` →
`implementation` → `verification` → `review` → `complete`. Each node says what it needs
under `docs/specs/<item>/`, whether a human may skip it, and whether it is a human gate (it
waits for a recorded decision). The approval gates are opt-in: an item stops at one only
when a human ticked it (or the operator's `routing.gates.approveAfter` ticks it by default).

Verdicts come from the artifacts. The agent-writable state file contributes only the
position (the recorded pointer), the declared skips and the human decisions; it never says
whether a node passed. The stop gate bounds its question by the pointer (`blocking_node`):
it asks only about nodes the item has reached.

Imported by the stop gate on every turn, so this module imports only the standard library
and `app.workstate`. The few reads of a checkout sit at the end, apart from the evaluation.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from app.workstate import STATE_FILENAME, WorkItemState, read_state, state_path

# A work item's name becomes a directory under docs/specs: letters, digits, '.', '_', '-'.
ITEM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
TASKS_FILE = "tasks.md"
TASKS_NODE = "tasks-breakdown"
_TASK_RE = re.compile(r"^\s*[-*+]\s+\[([ xX])\]", re.MULTILINE)
_HEADING_RE = re.compile(r"^ {0,3}#{1,6}[ \t]+\S")
# What an artifact must hold to count: a Markdown heading and this many words besides.
MIN_WORDS = 8
# How much of an artifact is read to judge it (the rest cannot make it shorter).
ARTIFACT_READ = 64 * 1024
SHORT_ARTIFACT = (
    f"an artifact needs a Markdown heading (`# …`) and a paragraph of at least {MIN_WORDS} words"
)
SHORT_TASKS = "a task list needs at least one task (`- [ ] …`)"


class NodeStatus(StrEnum):
    PASS = "pass"  # what the node needs is there
    BLOCK = "block"  # something the agent can produce is missing
    SKIP = "skip"  # a human chose not to run this phase
    WAIT = "wait"  # a human has to act; nothing the agent can do


SATISFIED = frozenset({NodeStatus.PASS, NodeStatus.SKIP})


class Node(NamedTuple):
    """One step of the outer loop.

    `requires` lists artifacts; each entry is a tuple of alternatives, one of which must
    exist and be non-empty. `human_gate` nodes pass only on a recorded decision; `approves`
    names the phase whose work a human gate judges (a request for changes sends the pointer
    back there). `tasks_ticked` nodes need every checkbox in tasks.md ticked (when there is a
    task list).
    """

    name: str
    requires: tuple[tuple[str, ...], ...] = ()
    skippable: bool = False
    opt_in: bool = False
    human_gate: bool = False
    tasks_ticked: bool = False
    approves: str = ""


def approval_gate(name: str, phase: str) -> Node:
    """The opt-in gate `name` that stops the walk for a human's approval after `phase`."""
    return Node(
        name,
        skippable=True,
        opt_in=True,
        human_gate=True,
        approves=phase,
    )


NODES: tuple[Node, ...] = (
    Node("phase-selection", human_gate=True),
    Node("brainstorming", requires=(("brainstorming.md",),), skippable=True, opt_in=True),
    Node(
        "requirements-definition",
        requires=(("requirements.md", "bugfix.md"),),
        skippable=True,
    ),
    Node("design", requires=(("design.md",),), skippable=True),
    approval_gate("approve-design", "design"),
    Node("test-planning", requires=(("testing-plan.md",),), skippable=True),
    Node(TASKS_NODE, requires=((TASKS_FILE,),), skippable=True),
    approval_gate("approve-tasks", TASKS_NODE),
    Node("implementation", tasks_ticked=True),
    Node("verification", requires=(("verification.md",),)),
    Node("review", human_gate=True, approves="implementation"),
    Node("complete"),
)
NODE_NAMES: tuple[str, ...] = tuple(n.name for n in NODES)
ARTIFACT_NAMES = frozenset(name for node in NODES for names in node.requires for name in names)
START_NODE = NODES[0].name
# Phase → the approval gate after it (`routing.gates.approveAfter` names these phases).
APPROVAL_GATES: dict[str, str] = {n.approves: n.name for n in NODES if n.opt_in and n.human_gate}


def approval_stops(skips: Iterable[str]) -> tuple[list[str], list[str]]:
    """(the phases skipped, the approval gates in force) of a selection's skips, in graph
    order: an approval gate is a stop, not a phase, so texts name the two apart (pure)."""
    skipped = set(skips)
    gates = set(APPROVAL_GATES.values())
    phases = [n.name for n in NODES if n.name in skipped and n.name not in gates]
    stops = [n.name for n in NODES if n.name in gates and n.name not in skipped]
    return phases, stops


class Evidence(NamedTuple):
    """What a checkout holds for one item: its artifacts that count (`counts_as_present`) and
    those there but empty or too short, its task list."""

    present: frozenset[str] = frozenset()
    empty: frozenset[str] = frozenset()
    tasks_open: int = 0
    tasks_total: int = 0


class NodeResult(NamedTuple):
    node: str
    status: NodeStatus
    messages: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "status": str(self.status), "messages": list(self.messages)}


def substantive(text: str) -> bool:
    """Whether an artifact's text is worth its name: a Markdown heading and at least
    `MIN_WORDS` words (runs holding a letter or digit) outside its headings. The one rule
    both the stop gate and the App's `phase next` (through the spawner's report) apply."""
    lines = text.splitlines()
    if not any(_HEADING_RE.match(line) for line in lines):
        return False
    words = sum(
        1
        for line in lines
        if not _HEADING_RE.match(line)
        for word in line.split()
        if any(ch.isalnum() for ch in word)
    )
    return words >= MIN_WORDS


def counts_as_present(name: str, size: int, read: Callable[[], str]) -> bool:
    """Whether a `.md` file of `size` bytes in an item's folder counts as there: not empty
    and, for a required artifact, `substantive` (the task list: holding a task). `read`
    gives its first `ARTIFACT_READ` bytes as text; it is called only for a required
    artifact, so other files are never opened."""
    if size <= 0:
        return False
    if name == TASKS_FILE:
        return count_tasks(read())[1] > 0
    return name not in ARTIFACT_NAMES or substantive(read())


def _what_counts(name: str) -> str:
    return SHORT_TASKS if name == TASKS_FILE else SHORT_ARTIFACT


def count_tasks(text: str) -> tuple[int, int]:
    """(open, total) checkboxes in a Markdown task list."""
    marks = _TASK_RE.findall(text)
    return sum(1 for m in marks if m == " "), len(marks)


def _artifact_messages(
    node: Node, item: str, evidence: Evidence, skips: Mapping[str, Any]
) -> list[str]:
    messages = []
    for alternatives in node.requires:
        if any(name in evidence.present for name in alternatives):
            continue
        paths = " or ".join(f"docs/specs/{item}/{name}" for name in alternatives)
        if any(name in evidence.empty for name in alternatives):
            rule = _what_counts(alternatives[0])
            messages.append(f"required artifact is empty or too short ({paths}): {rule}")
        else:
            messages.append(f"required artifact is missing ({paths})")
    if node.tasks_ticked and TASKS_FILE not in evidence.present and TASKS_NODE not in skips:
        messages.append(f"there is no task list to work through (docs/specs/{item}/{TASKS_FILE})")
    elif node.tasks_ticked and evidence.tasks_open:
        messages.append(
            f"{evidence.tasks_open} of {evidence.tasks_total} tasks are not ticked "
            f"(docs/specs/{item}/{TASKS_FILE})"
        )
    return messages


def evaluate_node(
    node: Node, item: str, state: WorkItemState | None, evidence: Evidence
) -> NodeResult:
    """One node's verdict: skips and decisions from the state, everything else from files."""
    skips = state.skips if state else {}
    decisions = state.decisions if state else {}
    notes: list[str] = []
    if node.name in skips:
        if node.skippable:
            return NodeResult(node.name, NodeStatus.SKIP, ("skipped at phase selection",))
        notes.append("cannot be skipped; the recorded skip is ignored")
    if node.human_gate:
        if isinstance(decisions.get(node.name), dict):
            return NodeResult(node.name, NodeStatus.PASS, tuple(notes))
        return NodeResult(node.name, NodeStatus.WAIT, (*notes, "waiting for a human decision"))
    missing = _artifact_messages(node, item, evidence, skips)
    status = NodeStatus.BLOCK if missing else NodeStatus.PASS
    return NodeResult(node.name, status, (*notes, *missing))


def artifact_problems(node: str, item: str, evidence: Evidence, skips: Iterable[str]) -> list[str]:
    """What `node` still lacks in `evidence` — its artifacts, its ticked task list — one
    message each; [] for a node that needs nothing of the checkout (or is unknown)."""
    found = next((n for n in NODES if n.name == node), None)
    if found is None:
        return []
    return _artifact_messages(found, item, evidence, dict.fromkeys(skips))


def evidence_fields(evidence: Evidence) -> dict[str, Any]:
    """`evidence` as JSON fields (what a spawner reports of a checkout it looked at)."""
    return {
        "present": sorted(evidence.present),
        "empty": sorted(evidence.empty),
        "tasks_open": evidence.tasks_open,
        "tasks_total": evidence.tasks_total,
    }


def evidence_from(fields: Mapping[str, Any] | None) -> Evidence | None:
    """The evidence `evidence_fields` wrote (None for anything else); names are kept only
    when they could be an artifact's."""

    def names(key: str) -> frozenset[str]:
        raw = (fields or {}).get(key)
        listed = raw if isinstance(raw, list) else []
        return frozenset(n for n in listed if isinstance(n, str) and ITEM_RE.match(n))

    if not isinstance(fields, Mapping):
        return None
    open_, total = fields.get("tasks_open"), fields.get("tasks_total")
    if not (isinstance(open_, int) and isinstance(total, int) and open_ >= 0 and total >= 0):
        return None
    return Evidence(names("present"), names("empty"), open_, total)


def evaluate(item: str, state: WorkItemState | None, evidence: Evidence) -> list[NodeResult]:
    return [evaluate_node(node, item, state, evidence) for node in NODES]


def _index(name: object, names: Sequence[str]) -> int | None:
    return names.index(name) if isinstance(name, str) and name in names else None


def _parked(state: WorkItemState | None) -> dict[str, str] | None:
    """The parked record, re-validated: only string `node` and `reason` survive."""
    if state is None or not state.parked:
        return None
    node, reason = state.parked.get("node"), state.parked.get("reason")
    return {
        "node": node if isinstance(node, str) else "",
        "reason": reason if isinstance(reason, str) else "",
    }


def build_report(
    item: str,
    state: WorkItemState | None,
    evidence: Evidence,
    *,
    recompute: bool,
    path: str,
) -> dict[str, Any]:
    """The `check` report.

    `pointer` is the node the state file records (`""` when no state file was found).
    `currentNode` is that pointer without `recompute`, and the first node the artifacts
    leave unmet with it (the pointer, or the last node, when nothing is unmet); it is None
    when the position cannot be resolved. `ok` says every node up to `currentNode` is met.
    """
    results = evaluate(item, state, evidence)
    pointer = state.currentNode if state else ""
    current: str | None = pointer if pointer in NODE_NAMES else None
    if recompute:
        unmet = next((r.node for r in results if r.status not in SATISFIED), None)
        current = unmet or current or NODE_NAMES[-1]
    upto = _index(current, NODE_NAMES)
    ok = upto is not None and all(r.status in SATISFIED for r in results[: upto + 1])
    return {
        "workItem": item,
        "currentNode": current,
        "pointer": pointer,
        "ok": ok,
        "parked": _parked(state),
        "nodes": [r.to_dict() for r in results],
        "statePath": path,
        "stateFound": state is not None,
    }


def blocking_node(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The node the stop gate blocks on, or None to let the turn end.

    Walks the nodes up to the bound — the recorded pointer, or `currentNode` for a report
    without a `pointer` key — and stops at the first one not satisfied: it blocks only when
    that node's status is `block`. A bound or `currentNode` that names no node in the report
    means the position is unknown, and the turn ends.
    """
    nodes = [n for n in report.get("nodes") or [] if isinstance(n, Mapping)]
    names = [str(n.get("node")) for n in nodes]
    if _index(report.get("currentNode"), names) is None:
        return None
    bound = report["pointer"] if "pointer" in report else report.get("currentNode")
    upto = _index(bound, names)
    if upto is None:
        return None
    for node in nodes[: upto + 1]:
        if node.get("status") not in SATISFIED:
            return dict(node) if node.get("status") == NodeStatus.BLOCK else None
    return None


# --- the edge: reading a checkout ----------------------------------------------------------


def read_evidence(spec_dir: Path) -> Evidence:
    """The artifacts in `docs/specs/<item>/`: one directory scan, plus tasks.md when present."""
    present: set[str] = set()
    empty: set[str] = set()
    try:
        with os.scandir(spec_dir) as entries:
            for entry in entries:
                if entry.name.endswith(".md") and entry.is_file():
                    path = Path(entry.path)
                    there = counts_as_present(entry.name, entry.stat().st_size, _head_of(path))
                    (present if there else empty).add(entry.name)
    except OSError:
        return Evidence()
    open_, total = 0, 0
    if TASKS_FILE in present:
        with contextlib.suppress(OSError):
            open_, total = count_tasks((spec_dir / TASKS_FILE).read_text(errors="replace"))
    return Evidence(frozenset(present), frozenset(empty), open_, total)


def _head_of(path: Path) -> Callable[[], str]:
    def read() -> str:
        try:
            with path.open("rb") as handle:
                return handle.read(ARTIFACT_READ).decode("utf-8", errors="replace")
        except OSError:
            return ""

    return read


def find_checkout(starts: Iterable[Path], item: str) -> Path | None:
    """The first directory at or above a start that holds the item's state file.

    The walk up stops at a repository root (`.git`), so it never leaves the checkout.
    """
    for start in starts:
        for directory in (start, *start.parents):
            if (directory / "docs" / "specs" / item / STATE_FILENAME).is_file():
                return directory
            if (directory / ".git").exists():
                break
    return None


def repository_root(start: Path) -> Path:
    """The git checkout holding `start`, or `start` itself outside one."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def check_checkout(checkout: Path, item: str, *, recompute: bool) -> dict[str, Any]:
    """Read one item's state file and artifacts in `checkout` and build its report."""
    path = state_path(checkout, item)
    return build_report(
        item,
        read_state(path),
        read_evidence(path.parent),
        recompute=recompute,
        path=str(path),
    )
