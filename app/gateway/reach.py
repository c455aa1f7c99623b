"""What a session's request may make the model provider's own servers do. Pure.

A session writes its whole request, and the provider acts on some of it from its servers, past
the session's closed network: an MCP server it connects to (`mcp_servers`, an `mcp_toolset` or
`mcp` tool), server tools that search, fetch or run code (`web_search_…`, `web_fetch_…`,
`code_execution_…`; on the Responses API `web_search`, `file_search`, `code_interpreter`,
`image_generation`, `computer_use_preview`), and media named by URL, which the provider
downloads, or stored objects of the operator's account it would use. So the gateway reads
each body once (it holds it whole already), within bounds (`bodies.py`: no key twice, so the
copy judged is the copy the provider reads), and refuses:

- a body that is not a JSON object, or one past the bounds;
- any MCP (never allowed: it is a host of the session's choosing);
- a server tool whose name (its `type` without the version suffix) the operator did not list in
  `routing.sandbox.modelTools`; tools the client runs (`custom`, `function`, `bash`,
  `text_editor`, …) and the tool search tools, which look only inside the request, always pass;
- a field, content block, input item or source it does not know, media given by URL or
  `file_id`, and what names a stored object of the account (`contents.py`, by allow-list).

`anthropic-beta` values that switch on MCP, the Files API, Skills or a server tool that is not
allowed are dropped before the request goes on (compared whatever their case), so no header
opens what the body may not.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from app.config import SERVER_TOOLS
from app.gateway.bodies import BodyError, parse_body
from app.gateway.contents import messages_refusal, responses_refusal
from app.gateway.wires import MESSAGES, Wire

MCP_TOOLS = frozenset({"mcp", "mcp_toolset"})
# The longest tool type a refusal names in what it reports (the session chose it).
TYPE_LIMIT = 64


@dataclass(frozen=True)
class Refused:
    """Why a body may not go upstream: `reason` (what the session is told), `kind` (`mcp`,
    `server_tool`, `unknown_tool`, `media_by_url`, `account_object`, `unknown_field`,
    `unknown_type`, or a bound of `bodies.py`: `not_json`, `duplicate_key`, `too_deep`,
    `too_many`) and `what` (the tool's type, the field, the media), short enough to record."""

    reason: str
    kind: str
    what: str | None = None

    def __str__(self) -> str:
        return self.reason


# Tool types the client runs, or that only search the request's own tool list.
_MESSAGES_CLIENT = frozenset(
    {
        "custom",
        "bash",
        "text_editor",
        "computer",
        "memory",
        "tool_search_tool_regex",
        "tool_search_tool_bm25",
    }
)
_RESPONSES_CLIENT = frozenset({"function", "custom", "local_shell", "shell", "apply_patch"})
_VERSION = re.compile(r"(?:_\d{8}|_\d{4}_\d{2}_\d{2})$")
# `anthropic-beta` prefixes and the server tool each switches on (None: MCP, never).
_BETAS: tuple[tuple[bytes, str | None], ...] = (
    (b"mcp-client-", None),
    (b"web-fetch-", "web_fetch"),
    (b"web-search-", "web_search"),
    (b"code-execution-", "code_execution"),
    (b"advisor-tool-", "advisor"),
    (b"files-api-", None),
    (b"skills-", None),
)
# What the provider would do for the session on a refusal's kind (said after its reason).
_REACHING = {
    "media_by_url": "download it for the session",
    "account_object": "use it with the operator's credential",
    "unknown_field": "act on it unchecked; the gateway forwards only fields it knows",
    "unknown_type": "act on it unchecked; the gateway forwards only content it knows",
}


def tool_name(kind: str) -> str:
    """A tool `type` without its version: `web_fetch_20250910` → `web_fetch`."""
    return _VERSION.sub("", kind)


def _tools_refusal(tools: Any, client: frozenset[str], allowed: frozenset[str]) -> Refused | None:
    """Why a `tools` list asks the provider to reach out, or None. A `namespace` (a group of
    the client's tools) is looked into."""
    pending = [tools]
    while pending:
        listed = pending.pop()
        for tool in listed if isinstance(listed, list) else ():
            kind = tool.get("type") if isinstance(tool, dict) else None
            if not isinstance(kind, str):
                continue  # a Messages custom tool names no type
            name = tool_name(kind)
            if name == "namespace":
                pending.append(tool.get("tools"))
            elif name in MCP_TOOLS:
                why = f"a tool of type {kind!r}: the model provider would connect to an MCP server"
                return Refused(why, "mcp", kind[:TYPE_LIMIT])
            elif name in client or name in allowed:
                continue
            elif name in SERVER_TOOLS:
                why = (
                    f"a server tool of type {kind!r}: the model provider would run it for the "
                    f"session; the operator allows it by listing {name!r} in "
                    "routing.sandbox.modelTools"
                )
                return Refused(why, "server_tool", kind[:TYPE_LIMIT])
            else:
                why = (
                    f"a tool of unknown type {kind!r}: the gateway forwards only tools the "
                    "harness runs itself and the server tools the operator lists"
                )
                return Refused(why, "unknown_tool", kind[:TYPE_LIMIT])
    return None


def refusal(body: bytes, wire: Wire, allowed: frozenset[str]) -> Refused | None:
    """Why `body` may not go upstream on `wire` with the server tools `allowed`, or None.
    Parsed within bounds (`bodies.py`): it may run off the gateway's loop."""
    try:
        parsed = parse_body(body)
    except BodyError as bad:
        return Refused(bad.reason, bad.kind, bad.what)
    if parsed.get("mcp_servers"):
        why = "mcp_servers: the model provider would connect to an MCP server for the session"
        return Refused(why, "mcp", "mcp_servers")
    client = _MESSAGES_CLIENT if wire is MESSAGES else _RESPONSES_CLIENT
    refused = _tools_refusal(parsed.get("tools"), client, allowed)
    if refused is not None:
        return refused
    walk = messages_refusal if wire is MESSAGES else responses_refusal
    found = walk(parsed, allowed)
    if found is None:
        return None
    kind, why, what = found
    if kind in _REACHING:
        why += ": the model provider would " + _REACHING[kind]
    return Refused(why, kind, what[:TYPE_LIMIT])


class RefusalLog:
    """The refusals of each work item since they were last taken (`take`), for the App: a
    few distinct ones with how often each came, the rest only counted (`folded`), so a
    session that keeps asking costs a counter, not an event a try. Written on the gateway's
    loop, taken by the spawner's reporter thread."""

    KEPT = 4  # distinct refusals per item between two reports

    def __init__(self) -> None:
        self._seen: dict[str, dict[Refused, int]] = {}
        self._folded: dict[str, int] = {}
        self._lock = threading.Lock()

    def note(self, work_item_id: str, refused: Refused) -> None:
        with self._lock:
            seen = self._seen.setdefault(work_item_id, {})
            if refused in seen or len(seen) < self.KEPT:
                seen[refused] = seen.get(refused, 0) + 1
            else:
                self._folded[work_item_id] = self._folded.get(work_item_id, 0) + 1

    def take(self, work_item_id: str | None = None) -> dict[str, tuple[dict[Refused, int], int]]:
        """Per item (one, or all): its refusals with their counts, and how many were folded;
        forgotten here."""
        with self._lock:
            items = [work_item_id] if work_item_id is not None else list(self._seen)
            return {
                item: (self._seen.pop(item), self._folded.pop(item, 0))
                for item in items
                if item in self._seen
            }


def kept_betas(value: bytes, allowed: frozenset[str]) -> bytes:
    """An `anthropic-beta` header's value without the betas that switch on MCP or a server
    tool not `allowed` (b"" when none is left)."""
    kept = []
    for beta in value.split(b","):
        flag = beta.strip()
        lowered = flag.lower()  # the API reads flags whatever their case
        switched = next((tool for prefix, tool in _BETAS if lowered.startswith(prefix)), "")
        if flag and (switched == "" or (switched is not None and switched in allowed)):
            kept.append(flag)
    return b",".join(kept)


def reaching_headers_dropped(
    headers: list[tuple[bytes, bytes]], allowed: frozenset[str]
) -> list[tuple[bytes, bytes]]:
    """`headers` with each `anthropic-beta` value's reaching betas dropped."""
    out = []
    for name, value in headers:
        if name.lower() == b"anthropic-beta":
            value = kept_betas(value, allowed)
            if not value:
                continue
        out.append((name, value))
    return out
