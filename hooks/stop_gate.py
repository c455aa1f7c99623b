"""The Claude Code Stop hook (`the-loop-gate`): may the agent end its turn?

Claude Code runs this after every turn with a JSON object on stdin (`session_id`, `cwd`,
`stop_hook_active`, …). Exit 0 lets the turn end; exit 2 blocks it, and Claude Code hands
our stderr to the agent as what to do next. Any other exit code is a non-blocking error.

Where the gate's facts come from (which work item, its id, the App's URL, the cap, the
checkout) depends on who installed the hook:

- a sandboxed session's hook, in the read-only managed settings the spawner binds, is run
  as `stop_gate.py --facts <FACTS_AT>`: the facts are that file, which the spawner wrote
  per launch and bound read-only. The session's environment is no source for them: a
  session can put an `env` in any settings file it writes, and Claude Code hands it to its
  hooks. A file that is missing or unreadable blocks the turn; an empty work item in it
  (a standing session) is no gate.
- a person's own hook (`the-loop hooks install`), or an unconfined session's: the
  environment (`THE_LOOP_WORK_ITEM`, set by the spawner; empty: the gate is off).

The session token stays in the environment either way: it is the session's own credential,
and without it the App cannot count, which blocks.

The hook runs after every turn of every session of the user, so outside a work-item
session this module answers before importing anything beyond `os` and `sys`;
`hooks.gate` does the work inside one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

FACTS_FLAG = "--facts"
FACTS_AT = "/run/the-loop-gate/gate.json"  # where the sandbox shows the spawner's file
# What the facts file decides; the environment's values for these are never read then.
FACT_KEYS = (
    "THE_LOOP_WORK_ITEM",
    "THE_LOOP_WORK_ITEM_ID",
    "THE_LOOP_URL",
    "THE_LOOP_GATE_MAX_ATTEMPTS",
    "THE_LOOP_STATE_DIR",
    "CLAUDE_PROJECT_DIR",
)


def facts_path(argv: list[str]) -> str | None:
    """The facts file named on the hook's command line (`--facts PATH`), if any."""
    if FACTS_FLAG in argv:
        at = argv.index(FACTS_FLAG) + 1
        return argv[at] if at < len(argv) else FACTS_AT
    return None


def gate_env(env: Mapping[str, str], text: str | None) -> tuple[dict[str, str], str]:
    """The environment the gate decides by: `env` with every fact key replaced by the facts
    file's `text` (None: the file could not be read), and why the facts are unusable ("":
    they are fine). Pure."""
    import json  # only a hook with a facts file pays for it

    kept = {k: v for k, v in env.items() if k not in FACT_KEYS}
    if text is None:
        return kept, "its facts file cannot be read"
    try:
        facts = json.loads(text)
    except ValueError:
        return kept, "its facts file is not JSON"
    if not isinstance(facts, dict):
        return kept, "its facts file is not a JSON object"
    kept.update({k: v for k, v in facts.items() if k in FACT_KEYS and isinstance(v, str)})
    return kept, ""


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Other arguments (the harness name, for older hook lines) are
    ignored."""
    args = sys.argv[1:] if argv is None else argv
    path = facts_path(args)
    env: Mapping[str, str] = os.environ
    broken = ""
    if path is not None:
        env, broken = gate_env(os.environ, _read(path))
    if not broken and not env.get("THE_LOOP_WORK_ITEM"):
        if not sys.stdin.isatty():
            sys.stdin.read()  # take Claude Code's input so its write never meets a closed pipe
        return 0
    from hooks.gate import read_hook_input, run, unusable_facts

    hook_input = read_hook_input(sys.stdin)
    outcome = unusable_facts(f"{path}: {broken}") if broken else run(hook_input, env, path)
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
