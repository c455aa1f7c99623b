"""What a request's fields and content may hold, by allow-list. Pure.

A field, content block, input item or media source the gateway does not know is refused
naming it, as an unknown tool type is (`reach.py`): a new field of the API could make the
provider reach out (fetch a URL, open a stored object of the operator's account), so it
passes only once the gateway has been taught it. Content is walked wherever the APIs nest it
(a tool result's content, a document's `source.content`, a search result's content, a
Responses message's parts and a function call's output). What the walk refuses:

- media given by URL, or by a `file_id` (the operator's uploaded Files) — only bytes in the
  request pass (base64, text, or a `data:` URL on the Responses API);
- what names a stored object of the operator's account: `container` skills, a container
  unless code execution is allowed, Responses' `previous_response_id`, `conversation`,
  `prompt` and `item_reference` items;
- MCP blocks, and a server tool's blocks unless the operator allows that tool.

Values that are data to the provider (a tool's `input`, `citations`, `cache_control`, a
server tool result's record) are not looked into.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# A refusal: (kind, what the session is told, what is recorded).
Why = tuple[str, str, str]

_BASE = frozenset({"type", "cache_control"})
# Messages API content blocks and their fields.
_BLOCKS: dict[str, frozenset[str]] = {
    "text": _BASE | {"text", "citations"},
    "image": _BASE | {"source"},
    "document": _BASE | {"source", "title", "context", "citations"},
    "search_result": _BASE | {"source", "title", "content", "citations"},
    "tool_use": _BASE | {"id", "name", "input", "caller"},
    "tool_result": _BASE | {"tool_use_id", "content", "is_error"},
    "tool_reference": _BASE | {"tool_name"},
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "server_tool_use": _BASE | {"id", "name", "input", "caller"},
}
# A server tool's result blocks (a record of what the provider did): the tool they belong to.
_RESULTS = {
    "web_search_tool_result": "web_search",
    "web_fetch_tool_result": "web_fetch",
    "code_execution_tool_result": "code_execution",
    "bash_code_execution_tool_result": "code_execution",
    "text_editor_code_execution_tool_result": "code_execution",
    "tool_search_tool_result": "",
}
_SERVER_USES = {
    "web_search": "web_search",
    "web_fetch": "web_fetch",
    "code_execution": "code_execution",
    "bash_code_execution": "code_execution",
    "text_editor_code_execution": "code_execution",
    "tool_search_tool_regex": "",
    "tool_search_tool_bm25": "",
}
# Sources by type: their fields. `url` and `file` sources are refused before this is read.
_SOURCES = {
    "base64": frozenset({"type", "media_type", "data"}),
    "text": frozenset({"type", "media_type", "data"}),
    "content": frozenset({"type", "content"}),
}
MESSAGES_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_k",
        "top_p",
        "tools",
        "tool_choice",
        "thinking",
        "service_tier",
        "context_management",
        "output_config",
        "output_format",
        "container",
        "mcp_servers",  # refused by `reach.py` unless empty
    }
)
RESPONSES_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "store",
        "stream",
        "stream_options",
        "include",
        "prompt_cache_key",
        "prompt_cache_retention",
        "text",
        "metadata",
        "client_metadata",
        "temperature",
        "top_p",
        "top_logprobs",
        "max_output_tokens",
        "max_tool_calls",
        "truncation",
        "service_tier",
        "user",
        "safety_identifier",
    }
)
# Responses fields that name an object stored on the operator's account.
_STORED = ("previous_response_id", "conversation", "prompt")
_ITEM = frozenset({"type", "id", "status"})
_ITEMS: dict[str, frozenset[str]] = {
    "message": _ITEM | {"role", "content", "phase"},
    "function_call": _ITEM | {"call_id", "name", "arguments", "namespace"},
    "function_call_output": _ITEM | {"call_id", "output"},
    "custom_tool_call": _ITEM | {"call_id", "name", "input"},
    "custom_tool_call_output": _ITEM | {"call_id", "output"},
    "reasoning": _ITEM | {"summary", "content", "encrypted_content"},
    "local_shell_call": _ITEM | {"call_id", "action"},
    "local_shell_call_output": _ITEM | {"call_id", "output"},
    "shell_call": _ITEM | {"call_id", "action"},
    "shell_call_output": _ITEM | {"call_id", "output", "max_output_length"},
    "apply_patch_call": _ITEM | {"call_id", "operation"},
    "apply_patch_call_output": _ITEM | {"call_id", "output"},
    "compaction": _ITEM | {"encrypted_content"},
    "compaction_summary": _ITEM | {"encrypted_content"},
}
_PARTS: dict[str, frozenset[str]] = {
    "input_text": frozenset({"type", "text"}),
    "output_text": frozenset({"type", "text", "annotations", "logprobs"}),
    "refusal": frozenset({"type", "refusal"}),
    "summary_text": frozenset({"type", "text"}),
    "reasoning_text": frozenset({"type", "text"}),
    "input_image": frozenset({"type", "image_url", "detail"}),
    "input_file": frozenset({"type", "file_data", "filename"}),
}
# Server tools' call items on the Responses API: the tool each belongs to.
_CALLS = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
    "image_generation_call": "image_generation",
}
NAME_LIMIT = 64


def _short(value: object) -> str:
    return str(value)[:NAME_LIMIT]


def _fields(given: dict[str, Any], known: frozenset[str], what: str) -> Why | None:
    unknown = next((key for key in given if key not in known), None)
    if unknown is None:
        return None
    why = f"a field the model gateway does not know, {_short(unknown)!r} of {what}"
    return ("unknown_field", why, f"{what}.{_short(unknown)}")


def _unknown_type(kind: object, what: str) -> Why:
    why = f"{what} of a type the model gateway does not know, {_short(kind)!r}"
    return ("unknown_type", why, _short(kind))


def _media(kind: str, how: str) -> Why:
    if how == "url":
        return ("media_by_url", f"a {kind} given by URL", f"{kind} by URL")
    why = f"a {kind} given by file_id: it names the operator's uploaded Files"
    return ("account_object", why, f"{kind} by file_id")


def _allowed(tool: str, allowed: frozenset[str], kind: str) -> Why | None:
    if tool == "" or tool in allowed:
        return None
    why = f"a {kind!r} block of the server tool {tool!r}, not listed in routing.sandbox.modelTools"
    return ("server_tool", why, _short(kind))


def _source(block: dict[str, Any], kind: str, pending: list[Any]) -> Why | None:
    source = block.get("source")
    if kind == "search_result":
        return (
            None
            if isinstance(source, str)
            else ("unknown_field", "a search_result's source is not text", "search_result.source")
        )
    if not isinstance(source, dict):
        return None  # the API refuses a block without one
    how = source.get("type")
    if how in ("url", "file") or "url" in source or "file_id" in source:
        return _media(kind, "url" if how == "url" or "url" in source else "file")
    known = _SOURCES.get(how) if isinstance(how, str) else None
    if known is None:
        return _unknown_type(how, f"a {kind}'s source")
    if how == "content":
        pending.append(source.get("content"))
    return _fields(source, known, f"a {kind}'s source")


def _messages_block(
    block: dict[str, Any], allowed: frozenset[str], pending: list[Any]
) -> Why | None:
    kind = block.get("type")
    if not isinstance(kind, str):
        return _unknown_type(kind, "a content block")
    if kind.startswith("mcp_"):
        return (
            "mcp",
            f"a {kind!r} block: the model provider would use an MCP server",
            kind[:NAME_LIMIT],
        )
    if kind == "container_upload":
        return _media("file", "file_id")
    if kind in _RESULTS:
        return _allowed(_RESULTS[kind], allowed, kind)
    known = _BLOCKS.get(kind)
    if known is None:
        return _unknown_type(kind, "a content block")
    if kind == "server_tool_use":
        name = block.get("name")
        tool = _SERVER_USES.get(name) if isinstance(name, str) else None
        if tool is None:
            return _unknown_type(name, "a server_tool_use")
        refused = _allowed(tool, allowed, kind)
        if refused is not None:
            return refused
    refused = _fields(block, known, f"a {kind} block")
    if refused is None and "source" in known:
        refused = _source(block, kind, pending)
    if "content" in block and kind in ("tool_result", "search_result"):
        pending.append(block["content"])
    return refused


def _walk(
    pending: list[Any], judge: Callable[[dict[str, Any], list[Any]], Why | None]
) -> Why | None:
    """Judge every dict in the lists of `pending`, and those `judge` adds, to any depth."""
    while pending:
        content = pending.pop()
        if isinstance(content, dict):
            content = [content]
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict):
                refused = judge(block, pending)
                if refused is not None:
                    return refused
    return None


def messages_refusal(body: dict[str, Any], allowed: frozenset[str]) -> Why | None:
    """Why a Messages API body's fields or content may not go upstream, or None."""
    refused = _fields(body, MESSAGES_FIELDS, "the request")
    if refused is not None:
        return refused
    container = body.get("container")
    if isinstance(container, dict) and "skills" in container:
        why = "container.skills: they name Agent Skills uploaded to the operator's account"
        return ("account_object", why, "container.skills")
    if container is not None and "code_execution" not in allowed:
        why = "a container: it names code execution the operator does not allow"
        return ("account_object", why, "container")
    if isinstance(container, dict) and (
        found := _fields(container, frozenset({"id"}), "container")
    ):
        return found
    messages = body.get("messages")
    pending: list[Any] = [body.get("system")]
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, dict):
            refused = _fields(message, frozenset({"role", "content"}), "a message")
            if refused is not None:
                return refused
            pending.append(message.get("content"))
    return _walk(pending, lambda block, more: _messages_block(block, allowed, more))


def _part(part: dict[str, Any], kind: str) -> Why | None:
    if "file_id" in part:
        return _media("file" if kind == "input_file" else "image", "file_id")
    if "file_url" in part:
        return _media("file", "url")
    image = part.get("image_url")
    if image is not None and not (isinstance(image, str) and image[:5].lower() == "data:"):
        return _media("image", "url")
    data = part.get("file_data")
    if data is not None and not isinstance(data, str):
        return ("unknown_field", "an input file's data is not text", "input_file.file_data")
    return None


def _responses_item(
    item: dict[str, Any], allowed: frozenset[str], pending: list[Any]
) -> Why | None:
    given = item.get("type")
    if given is None and "role" in item:
        given = "message"  # an input message may leave out its type
    if not isinstance(given, str):
        return _unknown_type(given, "an input item")
    kind: str = given
    if kind == "item_reference":
        why = "an item_reference: it names an item stored on the operator's account"
        return ("account_object", why, "item_reference")
    if kind.startswith("mcp_"):
        return ("mcp", f"a {kind!r} item: the model provider would use an MCP server", kind)
    if kind in _CALLS:
        return _allowed(_CALLS[kind], allowed, kind)
    known = _ITEMS.get(kind)
    if known is None:
        part = _PARTS.get(kind)
        if part is None:
            return _unknown_type(kind, "an input item or content part")
        return _part(item, kind) or _fields(item, part, f"an {kind} part")
    refused = _fields(item, known, f"a {kind} item")
    if refused is None:
        for key in ("content", "output", "summary"):
            if isinstance(item.get(key), list):
                pending.append(item[key])
    return refused


def responses_refusal(body: dict[str, Any], allowed: frozenset[str]) -> Why | None:
    """Why a Responses API body's fields or input may not go upstream, or None."""
    stored = next((key for key in _STORED if key in body), None)
    if stored is not None:
        why = f"{stored}: it names an object stored on the operator's account"
        return ("account_object", why, stored)
    refused = _fields(body, RESPONSES_FIELDS, "the request")
    if refused is not None:
        return refused
    given = body.get("input")
    pending: list[Any] = [given] if isinstance(given, list) else []
    return _walk(pending, lambda item, more: _responses_item(item, allowed, more))
