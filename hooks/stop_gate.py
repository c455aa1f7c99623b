"""The Claude Code Stop hook (`the-loop-gate`): may the agent end its turn?

Claude Code runs this after every turn with a JSON object on stdin (`session_id`, `cwd`,
`stop_hook_active`, …). Exit 0 lets the turn end; exit 2 blocks it, and Claude Code hands
our stderr to the agent as what to do next. Any other exit code is a non-blocking error.

The gate is on only in a work-item session (`THE_LOOP_WORK_ITEM`, set by the spawner). The
hook is installed for every session of the user, so outside one this module answers before
importing anything beyond `os` and `sys`; `hooks.gate` does the work inside one.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Arguments (the harness name, for older hook lines) are ignored."""
    if not os.environ.get("THE_LOOP_WORK_ITEM"):
        if not sys.stdin.isatty():
            sys.stdin.read()  # take Claude Code's input so its write never meets a closed pipe
        return 0
    from hooks.gate import read_hook_input, run

    outcome = run(read_hook_input(sys.stdin), os.environ)
    if outcome.stdout:
        sys.stdout.write(outcome.stdout + "\n")
    if outcome.stderr:
        sys.stderr.write(outcome.stderr)
    return outcome.code


if __name__ == "__main__":
    if not __package__:
        # Run as a file (`python -S …/hooks/stop_gate.py`, the default hook line): import our
        # packages from the directory above this one, without site's start-up cost.
        sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
