"""`the-loop …`: parses arguments and hands off to the command modules in `app.commands`.

Each command module exposes `register(subparsers)`, which adds its sub-commands and sets
`func` on them; `main` only dispatches. Errors the user can fix print one line each and exit 2.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import sys
from collections.abc import Sequence

from app import __version__, commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="the-loop",
        description="Turn a labelled GitHub issue into an unattended Claude Code session.",
    )
    parser.add_argument("--version", action="version", version=f"the-loop {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands.__all__:
        module = importlib.import_module(f"app.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # At exit the interpreter's last collection walks every object a command built (the App
    # holds a great many: githubkit's models, SQLAlchemy, Flask), which is most of `serve`'s
    # stop and of every short command. Frozen objects are skipped; nothing is left unflushed.
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from app.config import ConfigError, SettingsError

    try:
        return int(args.func(args) or 0)
    except (ConfigError, SettingsError) as exc:
        for line in str(exc).splitlines() or [""]:  # a config names each problem on a line
            print(f"the-loop: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
