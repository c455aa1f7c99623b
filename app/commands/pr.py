"""`the-loop pr` and `the-loop pr create --title … (--body … | --body-file …)`: a session's
pull request.

Inside a session (`THE_LOOP_WORK_ITEM_ID`, `THE_LOOP_URL`, `THE_LOOP_SESSION_TOKEN`), after
`git push`ing the work branch: the App opens the pull request from that branch to the
repository's default branch, adds "Closes #n" and its marker, links it to the work item and
says so on the issue. `the-loop pr` shows the branch and the linked pull request.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.commands.agent_tools import EXIT_REFUSED, EXIT_USAGE, ToolError, ask_app


def _body(args: argparse.Namespace) -> str:
    if args.body is not None:
        return str(args.body)
    if args.body_file == "-":
        return sys.stdin.read()
    try:
        return Path(args.body_file).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"cannot read --body-file {args.body_file}: {exc}") from exc


def describe(shown: dict[str, Any]) -> str:
    """What `the-loop pr` prints (pure)."""
    pr = shown.get("pull_request") or {}
    branch = shown.get("branch") or "(none recorded)"
    if not pr.get("number"):
        return (
            f"No pull request yet. Work branch: {branch}. Push it (`git push`) and run "
            '`the-loop pr create --title "…" --body-file <file>`.\n'
        )
    state = "merged" if pr.get("merged") else "closed" if pr.get("closed") else "open"
    return (
        f"Pull request #{pr['number']} ({state}): {pr.get('title', '')}\n"
        f"{pr.get('html_url', '')}\n"
        f"{pr.get('head') or branch} → {pr.get('base', '')}\n"
    )


def run(args: argparse.Namespace) -> int:
    creating = args.action == "create"
    try:
        body = _body(args) if creating else ""
    except ToolError as exc:
        print(f"the-loop pr: {exc}", file=sys.stderr)
        return EXIT_USAGE
    shown = ask_app(
        "pr",
        lambda client, item: (
            client.open_pull_request(item, args.title, body)
            if creating
            else client.pull_request(item)
        ),
    )
    if isinstance(shown, int):
        return shown
    sys.stdout.write(describe(shown))
    return 0 if (shown.get("pull_request") or {}).get("number") else EXIT_REFUSED


def register(subparsers: Any) -> None:
    pr = subparsers.add_parser(
        "pr",
        help="(inside a session) the work item's pull request; `create` opens it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pr.set_defaults(func=run, action="show")
    actions = pr.add_subparsers(dest="action", metavar="ACTION")
    create = actions.add_parser("create", help="open the pull request from the work branch")
    create.add_argument("--title", required=True, help="the pull request's title")
    words = create.add_mutually_exclusive_group(required=True)
    words.add_argument("--body", help="the pull request's description")
    words.add_argument("--body-file", help="read the description from a file (`-`: stdin)")
    create.set_defaults(func=run, action="create")
