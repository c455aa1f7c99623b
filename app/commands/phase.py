"""`the-loop phase` and `the-loop phase next`: a session's view of where its work item stands,
and its request to move on after producing the current phase's artifact.

Both run inside a session the spawner started (`THE_LOOP_WORK_ITEM_ID`, `THE_LOOP_WORK_ITEM`,
`THE_LOOP_URL`, `THE_LOOP_SESSION_TOKEN`). The pointer is the App's; the artifacts are read
from this checkout. `phase next` is refused — one line naming what is missing, exit 1 — when
the current phase's artifact is not there or the current phase waits for a human; otherwise
the App records the move, and the new pointer is written into the checkout's state file so
the stop gate holds the agent to the new phase. The App moves only once the spawner has seen
the artifacts from the host; until then (425) `phase next` asks again every second, for up to
`THE_LOOP_PHASE_WAIT` seconds (default 30).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from app import graph
from app.commands.agent_tools import ToolError, target
from app.workstate import WorkItemState, read_state, state_path, write_state

EXIT_REFUSED = 1
EXIT_USAGE = 2
TOO_EARLY = 425  # the spawner has not seen the artifacts yet
DEFAULT_WAIT = 30.0


def _spec_id(env: dict[str, str] | os._Environ[str]) -> str:
    spec = env.get("THE_LOOP_WORK_ITEM", "")
    if not graph.ITEM_RE.match(spec):
        raise ToolError("THE_LOOP_WORK_ITEM is not set to a work item (issue-<n>)")
    return spec


def _checkout(spec: str) -> Path:
    start = Path.cwd()
    return graph.find_checkout([start], spec) or graph.repository_root(start)


def local_state(record: dict[str, Any], spec: str, previous: WorkItemState | None) -> WorkItemState:
    """The state file as the App's record says it is (choices kept from the file) (pure)."""
    return WorkItemState(
        workItem=spec,
        currentNode=str(record.get("phase") or ""),
        decisions=dict(record.get("decisions") or {}),
        parked=None,
        skips={str(node): {} for node in record.get("skips") or []},
        harness=previous.harness if previous else "",
        model=previous.model if previous else "",
        effort=previous.effort if previous else "",
    )


def refusal(result: graph.NodeResult) -> str | None:
    """Why the current node cannot be left, or None (pure)."""
    if result.status is graph.NodeStatus.BLOCK:
        return f"{result.node} is not done: " + "; ".join(result.messages)
    if result.status is graph.NodeStatus.WAIT:
        return f"{result.node} waits for a human decision on the issue; end your turn and wait"
    return None


def _needs(node: str, spec: str, skips: Any) -> str:
    found = next((n for n in graph.NODES if n.name == node), None)
    if found is None or not found.requires:
        if found is not None and found.tasks_ticked and graph.TASKS_NODE not in skips:
            return f"tick every task in docs/specs/{spec}/tasks.md"
        if found is not None and found.human_gate:
            return "a human decision on the issue"
        return "nothing more"
    return "; ".join(" or ".join(f"docs/specs/{spec}/{a}" for a in alts) for alts in found.requires)


def run_phase(args: argparse.Namespace) -> int:
    from app.commands.check import render_table
    from app.spawner import AppClient, AppError, Rejected

    try:
        url, item, token = target(os.environ)
        spec = _spec_id(os.environ)
    except ToolError as exc:
        print(f"the-loop phase: {exc}", file=sys.stderr)
        return EXIT_USAGE
    checkout = _checkout(spec)
    path = state_path(checkout, spec)
    client = AppClient(url, token)
    try:
        record = client.phase(item)
        state = local_state(record, spec, read_state(path))
        evidence = graph.read_evidence(path.parent)
        if not args.next:
            report = graph.build_report(spec, state, evidence, recompute=False, path=str(path))
            sys.stdout.write(render_table(report, checkout))
            return 0 if report["ok"] else EXIT_REFUSED
        node = next((n for n in graph.NODES if n.name == state.currentNode), None)
        if node is None:
            print(f"the-loop phase next: the App records no phase for {item}", file=sys.stderr)
            return EXIT_REFUSED
        why = refusal(graph.evaluate_node(node, spec, state, evidence))
        if why is not None:
            print(f"the-loop phase next: refused: {why}", file=sys.stderr)
            return EXIT_REFUSED
        moved = _advance(client, item, node.name, sorted(evidence.present))
    except Rejected as exc:
        print(f"the-loop phase next: refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except AppError as exc:
        print(f"the-loop phase: the App did not answer: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        client.close()
    write_state(path, local_state(moved, spec, read_state(path)))
    to = str(moved.get("phase"))
    print(f"Moved from {node.name} to {to}.")
    gate = next((n for n in graph.NODES if n.name == to and n.human_gate), None)
    if to == graph.NODE_NAMES[-1]:
        print("The work item is complete.")
    elif gate is not None:
        print(f"{to} waits for a human decision on the issue: end your turn now and wait.")
        print("The decision arrives as a message: an approval, or the changes to make.")
    else:
        needs = _needs(to, spec, moved.get("skips") or [])
        print(f"{to} needs: {needs}. Run `the-loop phase next` when it is done;")
        print("the stop gate will not let your turn end while it is missing.")
    return 0


def _advance(client: Any, item: str, node: str, artifacts: list[str]) -> dict[str, Any]:
    """`client.advance`, asked again while the App answers that the spawner has not seen
    the artifacts yet (it looks every few seconds)."""
    from app.spawner import Rejected

    try:
        wait = float(os.environ.get("THE_LOOP_PHASE_WAIT") or DEFAULT_WAIT)
    except ValueError:
        wait = DEFAULT_WAIT
    deadline = time.monotonic() + wait
    while True:
        try:
            return dict(client.advance(item, node, artifacts))
        except Rejected as exc:
            if exc.status != TOO_EARLY or time.monotonic() >= deadline:
                raise
        time.sleep(1.0)


def register(subparsers: Any) -> None:
    phase = subparsers.add_parser(
        "phase",
        help="(inside a session) where the work item stands; `next` moves on",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    phase.add_argument("next", nargs="?", choices=("next",), help="move on from the current phase")
    phase.set_defaults(func=run_phase)
