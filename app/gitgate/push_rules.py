"""What a session may push, read from the start of a git receive-pack request (pure).

A push over git's smart HTTP is one `POST …/git-receive-pack` whose body begins with the
ref updates, as pkt-lines: optional `shallow <sha>` lines, then one command per ref —
`<old-sha> <new-sha> <refname>`, the first followed by NUL and the client's capabilities —
then a flush-pkt (`0000`); optional push options and the pack follow. The git gateway
reads that head before anything reaches GitHub, and lets the push through only when every
command updates (or creates) the item's own work branch: no other branch, no tag, no
delete. A refused push is answered here, in git's own report-status, so the session's git
prints the reason next to the ref (`! [remote rejected] main -> main (…)`) and, on the
side band, a `remote:` line.

An empty command list (git's probe before a large push sends only `0000`) updates nothing
and may pass. Anything that does not parse is refused whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.gitgate.gitgate_errors import GitGateError

FLUSH = b"0000"
# The command section of a push is small: one ref, its capabilities. More is refused.
MAX_HEAD = 64 * 1024
MAX_PKT = 65520
ZERO_RE = re.compile(r"^0+$")
SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
# Names git itself accepts are checked by GitHub; this only rules out what could confuse a
# reader of the report (control characters, spaces).
REF_RE = re.compile(r"^refs/[\x21-\x7e]+$")
SIDE_BAND = ("side-band-64k", "side-band")
BRANCHES = "refs/heads/"
TAGS = "refs/tags/"


class MalformedPush(GitGateError, ValueError):
    """The request's head is not a receive-pack command list; the message says why."""


@dataclass(frozen=True)
class RefUpdate:
    """One command of a push: move `ref` from `old` to `new` (all zeros: create / delete)."""

    old: str
    new: str
    ref: str

    @property
    def deletes(self) -> bool:
        return bool(ZERO_RE.match(self.new))


@dataclass(frozen=True)
class PushHead:
    """The parsed head of a receive-pack request: its commands, the client's capabilities,
    and how many bytes of the body they took (the rest is forwarded unread)."""

    updates: tuple[RefUpdate, ...]
    capabilities: frozenset[str]
    length: int


def _pkt(data: bytes, at: int) -> tuple[bytes | None, int] | None:
    """The pkt-line at `at`: (payload, next offset), payload None for a flush; None when
    the bytes so far end inside it."""
    if len(data) < at + 4:
        return None
    try:
        size = int(data[at : at + 4].decode("ascii"), 16)
    except (UnicodeDecodeError, ValueError):
        raise MalformedPush("a pkt-line length is not four hex digits") from None
    if not data[at : at + 4].isalnum():  # int() takes "+0x1", " 12"
        raise MalformedPush("a pkt-line length is not four hex digits")
    if size == 0:
        return None, at + 4
    if size < 4 or size > MAX_PKT:
        raise MalformedPush(f"a pkt-line of length {size} is not allowed here")
    if len(data) < at + size:
        return None
    return data[at + 4 : at + size], at + size


def _command(payload: bytes) -> tuple[RefUpdate, bytes]:
    line, _, caps = payload.partition(b"\0")
    try:
        text = line.decode("ascii").removesuffix("\n")
    except UnicodeDecodeError:
        raise MalformedPush("a command is not ASCII") from None
    parts = text.split(" ")
    if len(parts) != 3 or not SHA_RE.match(parts[0]) or not SHA_RE.match(parts[1]):
        raise MalformedPush(f"not a ref update: {text[:120]!r}")
    if len(parts[0]) != len(parts[1]) or not REF_RE.match(parts[2]):
        raise MalformedPush(f"not a ref update: {text[:120]!r}")
    return RefUpdate(parts[0], parts[1], parts[2]), caps


def parse_head(data: bytes) -> PushHead | None:
    """The commands at the start of a receive-pack body, or None while `data` (the body's
    first bytes) ends before their flush-pkt. Raises MalformedPush for anything else: a
    signed push (`push-cert`), a bad pkt-line, a bad command, a head past `MAX_HEAD`."""
    at = 0
    updates: list[RefUpdate] = []
    capabilities: frozenset[str] = frozenset()
    while True:
        read = _pkt(data, at)
        if read is None:
            if len(data) > MAX_HEAD:
                raise MalformedPush(f"the ref updates take more than {MAX_HEAD} bytes")
            return None
        payload, at = read
        if payload is None:
            return PushHead(tuple(updates), capabilities, at)
        if at > MAX_HEAD:
            raise MalformedPush(f"the ref updates take more than {MAX_HEAD} bytes")
        if payload.startswith(b"shallow ") and not updates:
            continue
        if payload.startswith(b"push-cert"):
            raise MalformedPush("signed pushes are not accepted")
        update, caps = _command(payload)
        if not updates:
            capabilities = frozenset(caps.decode("ascii", "replace").split())
        elif caps:
            raise MalformedPush("only the first command may carry capabilities")
        updates.append(update)


def refusal(update: RefUpdate, branch: str) -> str | None:
    """Why `update` may not be pushed by the session whose work branch is `branch`, or None."""
    if not branch:
        return "this work item has no work branch to push"
    if update.ref.startswith(TAGS):
        return "a session may not push tags"
    if update.deletes:
        return "a session may not delete a ref"
    if update.ref != BRANCHES + branch:
        return f"a session may push only its work branch {branch}"
    return None


def refusals(head: PushHead, branch: str) -> dict[str, str]:
    """Every refused ref of the push and why (empty: the push may go to GitHub)."""
    return {u.ref: why for u in head.updates if (why := refusal(u, branch)) is not None}


def pkt_line(payload: bytes) -> bytes:
    """One pkt-line carrying `payload`."""
    if len(payload) + 4 > MAX_PKT:
        raise ValueError("a pkt-line carries at most 65516 bytes")
    return b"%04x" % (len(payload) + 4) + payload


def _one_line(text: str) -> str:
    return " ".join(text.split())[:400]


def report_refused(head: PushHead, reasons: dict[str, str], summary: str) -> bytes:
    """The receive-pack answer that refuses the whole push: `unpack ok`, `ng <ref> <why>` for
    each command (a ref that was fine is refused for its company), and, when the client
    speaks the side band, `summary` as a `remote:` line on its stderr."""
    status = [pkt_line(b"unpack ok\n")]
    for update in head.updates:
        why = reasons.get(update.ref) or "refused with the rest of this push"
        status.append(pkt_line(f"ng {update.ref} {_one_line(why)}\n".encode()))
    report = b"".join(status) + FLUSH
    if not any(band in head.capabilities for band in SIDE_BAND):
        return report
    size = 65515 if "side-band-64k" in head.capabilities else 995
    out = [pkt_line(b"\x02" + f"{_one_line(summary)}\n".encode())]
    out += [pkt_line(b"\x01" + report[i : i + size]) for i in range(0, len(report), size)]
    return b"".join(out) + FLUSH


def summary(reasons: dict[str, str]) -> str:
    """One line naming what was refused, for the session's stderr and the event."""
    parts = [f"{ref}: {why}" for ref, why in reasons.items()]
    return "the-loop refused this push: " + "; ".join(parts)
