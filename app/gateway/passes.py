"""The per-session credentials of the model gateway: one live pass per work item.

A session is launched holding a pass as its `ANTHROPIC_API_KEY`; the gateway takes a request
only with a live pass, and answers it as the pass's work item. Minting a pass for an item
retires the item's previous one (a relaunch never leaves two alive), and a pass is revoked
when its session ends. Passes are held as their hashes only (a hash found in a dump or a
file is not a pass the gateway takes); the spawner keeps those hashes in its own state
directory so that sessions outliving a spawner restart keep their passes. The shape looks like
an Anthropic API key, so Claude Code accepts it without asking.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading

PREFIX = "sk-ant-api03-"
# Every pass ends so: Claude Code records an approved key by its last 20 characters, and a
# pass's approval left in an operator's own config is then known as one (`is_pass_tail`).
SUFFIX = "-tlgw"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def is_pass_tail(approved: object) -> bool:
    """Whether an approved key's recorded tail is a pass's (pure)."""
    return isinstance(approved, str) and approved.endswith(SUFFIX)


class Passes:
    """Thread-safe: the spawner's job threads mint and revoke, the relay's loop looks up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_digest: dict[bytes, str] = {}
        self._by_item: dict[str, bytes] = {}

    def mint(self, work_item_id: str) -> str:
        """A new pass for `work_item_id`; the item's previous pass stops working."""
        token = PREFIX + secrets.token_urlsafe(32) + SUFFIX
        digest = _digest(token)
        with self._lock:
            old = self._by_item.pop(work_item_id, None)
            if old is not None:
                self._by_digest.pop(old, None)
            self._by_digest[digest] = work_item_id
            self._by_item[work_item_id] = digest
        return token

    def revoke(self, work_item_id: str) -> bool:
        """End `work_item_id`'s pass; False when it held none."""
        with self._lock:
            digest = self._by_item.pop(work_item_id, None)
            if digest is None:
                return False
            self._by_digest.pop(digest, None)
            return True

    def holder(self, token: str) -> str | None:
        """The work item a live `token` belongs to, or None."""
        if not (token.startswith(PREFIX) and token.endswith(SUFFIX)):
            return None
        digest = _digest(token)
        with self._lock:
            item = self._by_digest.get(digest)
            known = self._by_item.get(item) if item is not None else None
        if item is None or known is None or not hmac.compare_digest(known, digest):
            return None
        return item

    def live(self) -> list[str]:
        with self._lock:
            return sorted(self._by_item)

    def digests(self) -> dict[str, str]:
        """Each live pass's hash by work item: what may be kept to re-admit it later."""
        with self._lock:
            return {item: digest.hex() for item, digest in self._by_item.items()}

    def admit(self, work_item_id: str, digest: str) -> None:
        """Take back a pass known by its hash (one minted before the spawner restarted)."""
        raw = bytes.fromhex(digest)
        with self._lock:
            old = self._by_item.pop(work_item_id, None)
            if old is not None:
                self._by_digest.pop(old, None)
            self._by_digest[raw] = work_item_id
            self._by_item[work_item_id] = raw
