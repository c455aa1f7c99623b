"""`the-loop git-credential get|store|erase`: git's credential helper in a session's checkout.

The session's `origin` is the App's git gateway (`<THE_LOOP_URL>/git/<owner>/<repo>.git`),
and the only credential this helper ever gives is the session's own token
(`THE_LOOP_SESSION_TOKEN`), and only to that gateway: the App checks it, and forwards the
fetch or push to GitHub with a credential of its own that never reaches the session. For
any other remote it gives nothing (one line on standard error says why), so no GitHub
token can be had from it. `store` and `erase` keep nothing, so there is nothing to forget.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import IO, Any
from urllib.parse import urlsplit

OPERATIONS = ("get", "store", "erase")
USERNAME = "the-loop-session"
GATEWAY = "git"  # the gateway's path under the App's URL


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


def gateway_of(app_url: str) -> tuple[str, str, str]:
    """(protocol, host, path prefix) git names when it asks for the App's gateway (pure)."""
    parts = urlsplit(app_url)
    prefix = "/".join(p for p in (parts.path.strip("/"), GATEWAY) if p) + "/"
    return parts.scheme, parts.netloc.rsplit("@", 1)[-1].lower(), prefix


def answer(asked: Mapping[str, str], env: Mapping[str, str]) -> str:
    """The lines git reads back for `asked` (pure); raises LookupError with the reason when
    this helper gives nothing."""
    url, token = env.get("THE_LOOP_URL", ""), env.get("THE_LOOP_SESSION_TOKEN", "")
    if not url or not token:
        raise LookupError("not inside a the-loop session (THE_LOOP_URL, THE_LOOP_SESSION_TOKEN)")
    protocol, host, prefix = gateway_of(url)
    path = asked.get("path", "").lstrip("/")
    same = asked.get("protocol") == protocol and asked.get("host", "").lower() == host
    if not same or (path and not path.startswith(prefix)):
        raise LookupError(f"a credential is given only for the App's git gateway {url}/{prefix}")
    if any(c in token for c in "\n\r\0"):
        raise LookupError("THE_LOOP_SESSION_TOKEN is not a usable token")
    return f"username={USERNAME}\npassword={token}\n"


def run(args: argparse.Namespace) -> int:
    asked = read_request(sys.stdin)
    if args.operation != "get":
        return 0  # nothing is ever stored, so nothing is erased
    try:
        lines = answer(asked, os.environ)
    except LookupError as exc:
        print(f"the-loop git-credential: no credential: {exc}", file=sys.stderr)
        return 0  # git goes on without one, and fails at a remote that wants one
    sys.stdout.write(lines)
    sys.stdout.flush()
    return 0


def register(subparsers: Any) -> None:
    helper = subparsers.add_parser(
        "git-credential",
        help="(inside a session) git's credential helper: the session's token, for the App",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    helper.add_argument("operation", choices=OPERATIONS, help="what git asks (see gitcredentials)")
    helper.set_defaults(func=run)
