"""`the-loop comment <body>` and `the-loop ask <question>`: what a session says on its issue.

They run inside a session the spawner started, which carries the work item
(`THE_LOOP_WORK_ITEM_ID`, else `THE_LOOP_WORK_ITEM`), the App's URL (`THE_LOOP_URL`) and a
credential that may post on that one item only (`THE_LOOP_SESSION_TOKEN`). The App posts
as itself with its agent marker, so the words are never read back as a human's. The body
is the arguments joined by spaces, or standard input when it is `-` or absent.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from app.commands.command_errors import CommandError

if TYPE_CHECKING:
    from app.spawner import AppClient

ENV_ITEM = ("THE_LOOP_WORK_ITEM_ID", "THE_LOOP_WORK_ITEM")
EXIT_REFUSED = 1
EXIT_USAGE = 2


class ToolError(CommandError, RuntimeError):
    """Said to the agent on stderr; exit 2."""


def target(env: Mapping[str, str]) -> tuple[str, str, str]:
    """(App URL, work item, token) from the session's environment."""
    item = next((env[k] for k in ENV_ITEM if env.get(k)), "")
    url = env.get("THE_LOOP_URL", "")
    token = env.get("THE_LOOP_SESSION_TOKEN") or env.get("THE_LOOP_SPAWNER_TOKEN", "")
    missing = [
        name
        for name, value in (
            ("THE_LOOP_WORK_ITEM_ID", item),
            ("THE_LOOP_URL", url),
            ("THE_LOOP_SESSION_TOKEN", token),
        )
        if not value
    ]
    if missing:
        raise ToolError(f"not inside a the-loop session: {', '.join(missing)} not set")
    return url, item, token


def ask_app(name: str, call: Callable[[AppClient, str], dict[str, Any]]) -> dict[str, Any] | int:
    """`call(client, work item)` against the App for the session's item: its answer, or the
    exit status after saying on stderr why there is none (not inside a session: EXIT_USAGE;
    refused, or the App did not answer: EXIT_REFUSED). `name` is the command, as said."""
    from app.spawner import AppClient, AppError, Rejected, Unauthorized

    try:
        url, item, token = target(os.environ)
    except ToolError as exc:
        print(f"the-loop {name}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    client = AppClient(url, token)
    try:
        return call(client, item)
    except (Rejected, Unauthorized) as exc:
        print(f"the-loop {name}: refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except AppError as exc:
        print(f"the-loop {name}: the App did not answer: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        client.close()


def body_of(words: list[str], stdin: Any) -> str:
    text = stdin.read() if not words or words == ["-"] else " ".join(words)
    if not text.strip():
        raise ToolError("nothing to say: give the text as arguments or on standard input")
    return text


def post(kind: str, args: argparse.Namespace) -> int:
    from app.spawner import AppClient, AppError

    try:
        url, item, token = target(os.environ)
        text = body_of(list(args.text), sys.stdin)
        client = AppClient(url, token)
        try:
            posted = client.comment(item, kind, text)
        finally:
            client.close()
    except ToolError as exc:
        print(f"the-loop {kind}: {exc}", file=sys.stderr)
        return 2
    except AppError as exc:
        print(f"the-loop {kind}: the App did not take it: {exc}", file=sys.stderr)
        return 1
    print(posted.get("html_url") or f"posted comment {posted.get('comment_id')}")
    if kind == "ask":
        print(
            "Your question is on the issue. End your turn now; the answer arrives as a "
            "follow-up message."
        )
    return 0


def register(subparsers: Any) -> None:
    comment = subparsers.add_parser("comment", help="(inside a session) comment on the issue")
    comment.add_argument("text", nargs="*", help="the comment (default: standard input)")
    comment.set_defaults(func=lambda a: post("comment", a))
    ask = subparsers.add_parser("ask", help="(inside a session) ask the humans on the issue")
    ask.add_argument("text", nargs="*", help="the question (default: standard input)")
    ask.set_defaults(func=lambda a: post("ask", a))
