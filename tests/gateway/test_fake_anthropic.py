"""The scripted Messages API itself, spoken to over HTTP the way the binary does: the SSE
stream reassembles into the scripted message, steps are spent in order and only by main
requests, retries replay, and whatever is not scripted is recorded and answered plainly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.anthropic import (
    SIDE_TEXT,
    UNMATCHED_TEXT,
    FakeAnthropic,
    Reply,
    Step,
    ToolCall,
    contains,
    tool_result_for,
    write,
)

TOOLS = [{"name": "Write", "input_schema": {"type": "object"}}]
SCRIPT = [
    Step(contains("make a file"), Reply("On it.", (write("/w/a.txt", "hi\n"),)), "write"),
    Step(tool_result_for("Write", "created"), Reply("Done."), "done"),
]


@pytest.fixture
def fake_model() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(SCRIPT) as fake:
        yield fake


def post(
    fake_model: FakeAnthropic, body: dict[str, Any], path: str = "/v1/messages"
) -> httpx.Response:
    headers = {"x-api-key": "sk-secret", "anthropic-version": "2023-06-01"}
    response = httpx.post(
        f"{fake_model.url}{path}?beta=true", json=body, headers=headers, timeout=10
    )
    response.raise_for_status()
    return response


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def reassemble(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Fold a stream into a message the way an SDK client does."""
    message: dict[str, Any] = {}
    partial: dict[int, str] = {}
    for name, data in events:
        assert data["type"] == name
        if name == "message_start":
            message = data["message"]
        elif name == "content_block_start":
            message["content"].append(data["content_block"])
        elif name == "content_block_delta":
            delta, block = data["delta"], message["content"][data["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            else:
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif name == "content_block_stop" and data["index"] in partial:
            message["content"][data["index"]]["input"] = json.loads(partial[data["index"]])
        elif name == "message_delta":
            message.update(data["delta"])
    return message


def user(*content: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(content)}


def main_body(messages: list[dict[str, Any]], stream: bool = True) -> dict[str, Any]:
    return {"model": "claude-x", "messages": messages, "tools": TOOLS, "stream": stream}


def test_a_streamed_turn_reassembles_into_text_and_a_tool_call(fake_model: FakeAnthropic) -> None:
    response = post(fake_model, main_body([user({"type": "text", "text": "please make a file"})]))
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    message = reassemble(events)
    text, call = message["content"]
    assert text == {"type": "text", "text": "On it."}
    assert (call["name"], call["input"]) == ("Write", {"file_path": "/w/a.txt", "content": "hi\n"})
    assert call["id"].startswith("toolu_") and message["stop_reason"] == "tool_use"
    assert message["model"] == "claude-x"


def test_the_tool_result_spends_the_next_step_and_ends_the_turn(fake_model: FakeAnthropic) -> None:
    first = [user({"type": "text", "text": "please make a file"})]
    call = reassemble(sse_events(post(fake_model, main_body(first)).text))["content"][1]
    result = {"type": "tool_result", "tool_use_id": call["id"], "content": "File created"}
    history = [*first, {"role": "assistant", "content": [call]}, user(result)]
    message = post(fake_model, main_body(history, stream=False)).json()

    assert message["content"] == [{"type": "text", "text": "Done."}]
    assert message["stop_reason"] == "end_turn"
    seen = fake_model.main_requests()[-1].turn.results[0]
    assert (seen.name, seen.content) == ("Write", "File created")
    fake_model.assert_script_done()


def test_a_retried_request_replays_its_answer_without_spending_a_step(
    fake_model: FakeAnthropic,
) -> None:
    body = main_body([user({"type": "text", "text": "please make a file"})], stream=False)
    once, again = post(fake_model, body).json(), post(fake_model, body).json()
    assert once["content"] == again["content"]
    assert fake_model.pending() == ["done"]


def test_side_requests_get_their_schema_and_spend_nothing(fake_model: FakeAnthropic) -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}}
    body = {
        "model": "claude-haiku",
        "messages": [user({"type": "text", "text": "please make a file"})],
        "tools": [],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
        "stream": True,
    }
    title = reassemble(sse_events(post(fake_model, body).text))["content"][0]["text"]
    plain = post(fake_model, {**body, "output_config": {}, "stream": False}).json()

    assert json.loads(title) == {"title": SIDE_TEXT}
    assert plain["content"][0]["text"] == SIDE_TEXT
    assert fake_model.pending() == ["write", "done"] and len(fake_model.side_requests()) == 2


def test_unscripted_calls_are_answered_recorded_and_reported(fake_model: FakeAnthropic) -> None:
    tokens = post(fake_model, {"messages": []}, "/v1/messages/count_tokens").json()
    httpx.get(f"{fake_model.url}/v1/models", timeout=10).raise_for_status()
    stray = post(
        fake_model, main_body([user({"type": "text", "text": "something else"})], stream=False)
    )

    assert tokens["input_tokens"] >= 1
    assert stray.json()["content"][0]["text"] == UNMATCHED_TEXT
    assert fake_model.other_paths() == ["GET /v1/models"]
    assert all("x-api-key" not in r.headers for r in fake_model.snapshot())
    with pytest.raises(AssertionError, match=r"UNMATCHED.*something else"):
        fake_model.assert_script_done()


def test_steps_added_later_and_explicit_tool_ids_are_used() -> None:
    with FakeAnthropic() as fake_model:
        fake_model.add(
            Step(contains("go"), Reply(tools=(ToolCall("Bash", {"command": "true"}, "toolu_1"),)))
        )
        message = post(
            fake_model, main_body([user({"type": "text", "text": "go"})], stream=False)
        ).json()
    assert message["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "true"}}
    ]
