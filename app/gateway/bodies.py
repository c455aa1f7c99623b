"""A session's request body read as JSON within bounds. Pure.

A body the gateway judges is held whole (its size bounded by `routing.sandbox.gateway.
maxRequestBytes`), but the objects a parse builds can be far larger than its bytes: 60 MiB of
nested empty objects is tens of millions of dicts. So before anything is built, the body's
values are counted on its bytes (`MAX_ELEMENTS` at most: the commas and opening brackets
outside its strings), and only a body within that is parsed; the parsed body then nests
`MAX_DEPTH` levels at most (the parser itself stops far deeper, where the interpreter's
recursion limit lies).

A key given twice in one object is refused wherever it is: the gateway judges the parsed
body but forwards the session's bytes, and the provider may read another copy of a key than
the one judged (`"tools": [web_fetch], "tools": []`).

Real requests are far inside the bounds: Claude Code's with a full context window and its
whole tool list hold a few tens of thousands of values and nest about a dozen deep.
"""

from __future__ import annotations

import json
import re
from typing import Any

from app.gateway.gateway_errors import GatewayError

MAX_DEPTH = 64
MAX_ELEMENTS = 500_000

# A JSON string, escapes and all (the loop unrolled, so long strings cost one pass).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


class BodyError(GatewayError, ValueError):
    """A body the gateway will not judge: `kind` is `not_json`, `duplicate_key`, `too_deep`
    or `too_many`; `what` names the key given twice (cut short), else None."""

    def __init__(self, kind: str, reason: str, what: str | None = None) -> None:
        super().__init__(reason)
        self.kind, self.reason, self.what = kind, reason, what


def _count(body: bytes, max_elements: int) -> None:
    """Refuse a body with more than `max_elements` values, from its bytes alone: the commas
    and opening brackets in it bound its values from above, and only when they pass the
    bound are the ones inside strings set apart."""
    if body.count(b",") + body.count(b"[") + body.count(b"{") < max_elements:
        return
    skeleton = _STRING.sub(b"", body)
    if skeleton.count(b",") + skeleton.count(b"[") + skeleton.count(b"{") >= max_elements:
        reason = f"the request body holds more than {max_elements} JSON values"
        raise BodyError("too_many", reason)


def _depth_within(parsed: Any, max_depth: int) -> bool:
    """Whether `parsed` nests at most `max_depth` arrays and objects deep (walked level by
    level, so the walk needs no recursion and stops at the first level too deep)."""
    level: list[Any] = [parsed]
    for _ in range(max_depth):
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return True
    return False


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        reason = f"the request body gives the key {twice[:64]!r} twice in one object"
        raise BodyError("duplicate_key", reason, twice[:64])
    return found


def parse_body(
    body: bytes, max_depth: int = MAX_DEPTH, max_elements: int = MAX_ELEMENTS
) -> dict[str, Any]:
    """`body` as a JSON object, or `BodyError` saying why not."""
    _count(body, max_elements)
    too_deep = BodyError("too_deep", f"the request body nests deeper than {max_depth} levels")
    try:
        parsed = json.loads(body, object_pairs_hook=_unique)
    except BodyError:
        raise
    except RecursionError:
        raise too_deep from None
    except ValueError:
        raise BodyError("not_json", "the request body is not JSON") from None
    if not isinstance(parsed, dict):
        raise BodyError("not_json", "the request body is not a JSON object")
    if not _depth_within(parsed, max_depth):
        raise too_deep
    return parsed
