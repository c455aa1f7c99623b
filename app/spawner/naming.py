"""One name per work item for everything the spawner makes for it: the tmux session, the
checkout directory and the session's home.

A name is a readable prefix (owner, repository and issue number, with every character tmux
or a file system could mind turned into `-`) followed by a short hash of the exact work item
id. Readable prefixes collide (`acme-web/api#1` and `acme/web-api#1` both read
`acme-web-api-1`), the hash does not; a long owner/repo is shortened before the issue number,
which is always kept.
"""

from __future__ import annotations

import hashlib
import re

GITHUB_SCHEME = "github:"
HASH_LENGTH = 8
NAME_LIMIT = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def item_hash(work_item_id: str) -> str:
    return hashlib.sha256(work_item_id.encode()).hexdigest()[:HASH_LENGTH]


def item_slug(work_item_id: str, limit: int = NAME_LIMIT) -> str:
    """`github:acme/web-api#1` → `acme-web-api-1-<hash>`; at most `limit` characters, safe
    as a tmux session name and as a directory name."""
    tail = work_item_id.removeprefix(GITHUB_SCHEME)
    base, sep, number = tail.rpartition("#")
    if not sep or not number.isdigit():
        base, number = tail, ""
    suffix = (f"-{number}" if number else "") + "-" + item_hash(work_item_id)
    readable = _UNSAFE.sub("-", base).strip("-")
    room = max(limit - len(suffix), 0)
    return (readable[:room].rstrip("-") or "item") + suffix
