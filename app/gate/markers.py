"""The hidden marker on every comment the App writes: `<!-- the-loop:<kind> key=value … -->`.

The marker does two jobs. It lets the App find its own comment again (a redelivered trigger
adopts the checklist it already posted instead of posting a second), and it keeps the App's
own words from ever being read as human input: a comment carrying the marker, or written by
a Bot account, is never an execute reply, a follow-up or a checklist answer.

Anyone can type a marker, and any App is a Bot, so a marked comment is the App's own only
when its author is the App's own bot login (`is_app_comment`). While that login is unknown
nothing is adopted: the App posts anew rather than trust a stranger's comment.

Attribute values are reduced to characters that cannot close the HTML comment or break the
`key=value` grammar, so a marker always parses back to what was written.

Words the App did not choose — a session's comment or pull request body, what a session drew
in its pane (a stall's question and options), a Slack member's reply — go through `defuse`
before the App posts them, and the App's own marker is always the last thing it writes: a
marker is read from the end (`find_marker`), so text before it never decides what a comment
is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

MARKER_PREFIX = "<!-- the-loop:"
MARKER_SUFFIX = " -->"


class MarkerKind(StrEnum):
    """What an App-written comment is."""

    CHECKLIST = "checklist"  # the phase-selection checklist
    CONFIRMATION = "confirmation"  # the execute was accepted; what runs
    REFUSAL = "refusal"  # the execute was refused; who may execute
    CHANGED = "changed"  # the issue changed since it was read; execute again
    AGENT = "agent"  # written by a session through `the-loop comment` / `the-loop ask`
    SLACK = "slack"  # a Slack member's words, posted on the issue by the App
    PROGRESS = "progress"  # the one progress comment of a work item, edited in place
    REVIEW = "review"  # the item reached a human gate: ready for review
    NOTICE = "notice"  # a one-line notice (a decision recorded, the item done, a stall)
    PULL = "pull"  # a pull request the App opened for a work item (in the PR's body)


_KIND = r"[a-z][a-z0-9-]*"
_MARKER_RE = re.compile(r"<!--\s*the-loop:(" + _KIND + r")((?:\s+[A-Za-z_][\w-]*=\S*)*)\s*-->")
_OPENING_RE = re.compile(r"<!--\s*the-loop:")
_ATTR_RE = re.compile(r"([A-Za-z_][\w-]*)=(\S*)")
_UNSAFE_VALUE = re.compile(r"[\s<>]")
_DEFUSE_RE = re.compile(r"<!--(\s*the-loop:)", re.IGNORECASE)
# An `@` GitHub would read as a mention: not inside a word (an e-mail address is none),
# followed by a login's or an `org/team`'s first character.
_MENTION_RE = re.compile(r"(?<![\w@])@(?=[A-Za-z0-9])")
ZERO_WIDTH_SPACE = "\u200b"


@dataclass(frozen=True)
class Marker:
    kind: str
    attrs: Mapping[str, str] = field(default_factory=dict)


def _clean(value: object) -> str:
    """A value that can sit in `key=value` inside an HTML comment: no space, `<` or `>`."""
    return _UNSAFE_VALUE.sub("", str(value))


def marker(kind: MarkerKind | str, **attrs: object) -> str:
    """The marker line for `kind`, e.g. `marker("slack", member="U024BE7LH")`.

    Attribute names use `_` in Python and appear unchanged; `None` values are left out.
    """
    if not re.fullmatch(_KIND, str(kind)):
        raise ValueError(f"{kind!r} is not a marker kind")
    parts = [f"{name}={_clean(value)}" for name, value in attrs.items() if value is not None]
    return MARKER_PREFIX + " ".join([str(kind), *parts]) + MARKER_SUFFIX


def defuse(text: str) -> str:
    """`text` with any marker opening shown instead of hidden, so words someone else wrote
    (an agent's comment, a PR body) can never pass for one of the App's own markers."""
    return _DEFUSE_RE.sub(r"&lt;!--\1", text)


def defuse_mentions(text: str) -> str:
    """`text` with every @-mention and team mention shown but inert: a zero-width space
    after the `@`, so GitHub notifies nobody. Words a session wrote must not page a person
    or a team with the App's voice unless the operator allows it."""
    return _MENTION_RE.sub("@" + ZERO_WIDTH_SPACE, text)


def find_marker(body: str | None) -> Marker | None:
    """The the-loop marker in `body` (the last one: the App writes its own last), or None."""
    matches = list(_MARKER_RE.finditer(body or ""))
    if not matches:
        return None
    match = matches[-1]
    attrs = dict(_ATTR_RE.findall(match.group(2)))
    return Marker(kind=match.group(1), attrs=attrs)


def has_marker(body: str | None) -> bool:
    """True when `body` carries any the-loop marker (also a malformed one: fail closed)."""
    return _OPENING_RE.search(body or "") is not None


def is_bot(user: Mapping[str, Any] | None) -> bool:
    """A GitHub Bot account (an App, Dependabot, …)."""
    return bool(user) and str((user or {}).get("type", "")).lower() == "bot"


def is_own_comment(comment: Mapping[str, Any]) -> bool:
    """A comment that is never human input: written by a Bot, or carrying the App's marker."""
    return is_bot(comment.get("user")) or has_marker(comment.get("body"))


def is_app_comment(
    comment: Mapping[str, Any], bot_login: str | None, kind: MarkerKind | str, **attrs: object
) -> bool:
    """A comment of `kind` (with these attributes) that the App itself wrote: marked, and by
    the App's own bot login. False whenever that login is unknown (fail closed)."""
    user = comment.get("user") or {}
    if not bot_login or not is_bot(user) or user.get("login") != bot_login:
        return False
    return is_marked(comment.get("body"), kind, **attrs)


def is_marked(body: str | None, kind: MarkerKind | str, **attrs: object) -> bool:
    """True when `body`'s marker is of `kind` and carries every given attribute value
    (`None` asks nothing, as `marker` leaves it out)."""
    found = find_marker(body)
    if found is None or found.kind != str(kind):
        return False
    wanted = {name: value for name, value in attrs.items() if value is not None}
    return all(found.attrs.get(name) == _clean(value) for name, value in wanted.items())
