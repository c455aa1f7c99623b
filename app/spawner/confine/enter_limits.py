"""Enter a session's limits, then become the command: `python -S enter_limits.py [--cgroup
<cgroup.procs>]… [--address-space <bytes>] [--processes <n>] -- <argv>…`.

In front of bubblewrap (outside the sandbox) it writes its own pid into each per-session
cgroup's `cgroup.procs` before it execs, so the sandbox and everything it starts are born
inside the cgroup: no process of the session ever runs outside it, and none can leave (no
session sees `/sys/fs/cgroup`). Inside the sandbox (the `rlimit` mechanism) it sets
`RLIMIT_AS` and `RLIMIT_NPROC` after bubblewrap made the session's user namespace, so the
process count is the session's own. Any failure refuses to start the command (exit 125):
a session never runs without the limits it was planned with.

Standard library only (it runs with `-S`, before any of the project is importable inside).
"""

from __future__ import annotations

import os
import resource
import sys

REFUSED = 125


def _refuse(why: str) -> None:
    sys.stderr.write(f"the-loop: the session's limits could not be entered: {why}\n")
    sys.stderr.flush()
    os._exit(REFUSED)


def enter(args: list[str]) -> list[str]:
    """Apply the options in `args`; returns the command after `--`."""
    if "--" not in args:
        _refuse("no command after --")
    split = args.index("--")
    options, command = args[:split], args[split + 1 :]
    if not command or len(options) % 2:
        _refuse("usage: [--cgroup FILE]... [--address-space N] [--processes N] -- ARGV")
    for flag, value in zip(options[::2], options[1::2], strict=True):
        try:
            if flag == "--cgroup":
                with open(value, "w") as procs:
                    procs.write(str(os.getpid()))
            elif flag == "--address-space":
                resource.setrlimit(resource.RLIMIT_AS, (int(value), int(value)))
            elif flag == "--processes":
                resource.setrlimit(resource.RLIMIT_NPROC, (int(value), int(value)))
            else:
                _refuse(f"unknown option {flag}")
        except (OSError, ValueError) as exc:
            _refuse(f"{flag} {value}: {exc}")
    return command


def main() -> None:
    command = enter(sys.argv[1:])
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        _refuse(f"{command[0]}: {exc}")


if __name__ == "__main__":
    main()
