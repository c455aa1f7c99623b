"""The script of the fake Anthropic API (tests/fakes/anthropic.py): what a step matches on
(the last `role: user` message, flattened into a `UserTurn`) and what it answers (`Reply`:
text and `tool_use` calls). Pure data and functions; no I/O."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolResult:
    """One `tool_result` block of a user message, with the tool's name when known."""

    tool_use_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class UserTurn:
    """The last `role: user` message of a request, flattened for matching."""

    texts: tuple[str, ...] = ()
    results: tuple[ToolResult, ...] = ()

    @property
    def text(self) -> str:
        """Every text block and tool result's content, one per line."""
        return "\n".join([*self.texts, *(r.content for r in self.results)])


def block_text(content: Any) -> str:
    """The text of a message's or tool result's `content` (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") for b in content if isinstance(b, dict) and "text" in b]
        return "\n".join(parts)
    return ""


def _tool_names(messages: Sequence[Any]) -> dict[str, str]:
    """tool_use id → tool name, over every assistant message."""
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
    return names


def user_turn(body: dict[str, Any]) -> UserTurn:
    """The last user message of a Messages request body (an empty turn when there is none)."""
    messages = body.get("messages") or []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        return UserTurn()
    content = users[-1].get("content")
    if isinstance(content, str):
        return UserTurn(texts=(content,))
    names = _tool_names(messages)
    texts: list[str] = []
    results: list[ToolResult] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            use_id = str(block.get("tool_use_id"))
            results.append(
                ToolResult(
                    use_id,
                    names.get(use_id, ""),
                    block_text(block.get("content")),
                    bool(block.get("is_error")),
                )
            )
    return UserTurn(tuple(texts), tuple(results))


Matcher = Callable[[UserTurn], bool]


def contains(*needles: str) -> Matcher:
    """Matches a turn whose text holds every needle."""
    return lambda turn: all(n in turn.text for n in needles)


def matches(pattern: str) -> Matcher:
    """Matches a turn whose text matches the regular expression (search, DOTALL)."""
    compiled = re.compile(pattern, re.DOTALL)
    return lambda turn: compiled.search(turn.text) is not None


def tool_result_for(name: str, needle: str = "") -> Matcher:
    """Matches a turn carrying a result of tool `name` whose content holds `needle`."""
    return lambda turn: any(r.name == name and needle in r.content for r in turn.results)


def anything(turn: UserTurn) -> bool:
    return True


@dataclass(frozen=True)
class ToolCall:
    """A `tool_use` block the model emits; `id` is generated when left empty."""

    name: str
    input: dict[str, Any]
    id: str = ""


def write(file_path: str, content: str) -> ToolCall:
    return ToolCall("Write", {"file_path": file_path, "content": content})


def bash(command: str, description: str = "scripted command") -> ToolCall:
    return ToolCall("Bash", {"command": command, "description": description})


def read(file_path: str) -> ToolCall:
    return ToolCall("Read", {"file_path": file_path})


@dataclass(frozen=True)
class Reply:
    """What the model answers: optional text, then tool calls (stop_reason `tool_use`).
    `usage` sets the answer's token counts (`input_tokens`, `output_tokens`,
    `cache_read_input_tokens`, `cache_creation_input_tokens`); unset, small fixed ones."""

    text: str = ""
    tools: tuple[ToolCall, ...] = ()
    usage: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Step:
    """One scripted exchange: when `match` accepts the last user turn, answer `reply`."""

    match: Matcher
    reply: Reply
    name: str = ""
