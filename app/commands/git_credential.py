"""`the-loop git-credential get|store|erase`: git's credential helper in a session's checkout.

The spawner names it in the checkout's local git config (`credential.helper`, with
`credential.useHttpPath` so git says which repository it wants). On `get` it asks the App,
with the session's token (`THE_LOOP_SESSION_TOKEN`, `THE_LOOP_URL`,
`THE_LOOP_WORK_ITEM_ID`), for a short-lived token that may push to the work item's one
repository, and hands it to git on standard output — the only place it ever goes: never a
file, a config, an argument or a log. `store` and `erase` keep nothing, so there is nothing
to forget. A refusal is one line on standard error (git shows it) and exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from typing import IO, Any

from app.commands.agent_tools import ToolError, target

OPERATIONS = ("get", "store", "erase")


def read_request(stream: IO[str]) -> dict[str, str]:
    """git's `key=value` lines up to a blank line or the end (pure apart from reading)."""
    attributes: dict[str, str] = {}
    for line in stream:
        line = line.rstrip("\n")
        if not line:
            break
        key, sep, value = line.partition("=")
        if sep and not key.endswith("[]"):
            attributes[key] = value
    return attributes


def render_answer(credential: dict[str, Any]) -> str:
    """The lines git reads back: username, password and, for git ≥ 2.41, when it expires."""
    username, password = str(credential.get("username", "")), str(credential.get("password", ""))
    if not username or not password or any(c in username + password for c in "\n\r\0"):
        raise ToolError("the App's answer is not a usable credential")
    lines = [f"username={username}", f"password={password}"]
    try:
        expires = datetime.fromisoformat(str(credential.get("expires_at")))
        lines.append(f"password_expiry_utc={int(expires.timestamp())}")
    except ValueError:
        pass
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from app.spawner.appclient import AppClient, AppError

    asked = read_request(sys.stdin)
    if args.operation != "get":
        return 0  # nothing is ever stored, so nothing is erased
    protocol = asked.get("protocol", "")
    if protocol not in ("http", "https"):
        return 0  # not a remote this helper answers for; git asks its next helper
    try:
        url, item, token = target(os.environ)
        client = AppClient(url, token)
        try:
            credential = client.git_credential(
                item, protocol, asked.get("host", ""), asked.get("path", "")
            )
        finally:
            client.close()
        answer = render_answer(credential)
    except (ToolError, AppError) as exc:
        print(f"the-loop git-credential: no credential: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(answer)
    sys.stdout.flush()
    return 0


def register(subparsers: Any) -> None:
    helper = subparsers.add_parser(
        "git-credential",
        help="(inside a session) git's credential helper: a push token from the App",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    helper.add_argument("operation", choices=OPERATIONS, help="what git asks (see gitcredentials)")
    helper.set_defaults(func=run)
