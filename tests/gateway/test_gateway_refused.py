"""A request the model gateway refuses for what it would make the provider's servers do is
the App's to see: a `gateway.refused` event of the work item, with the reason and the tool or
type, never the request's body. A session that keeps asking costs a counter, not an event a
try.

The end-to-end test runs the spawner's own parts: its context (event queue and model gateway,
as `the-loop spawner` builds them) in front of the scripted Messages API, its reports sent to a
real App on loopback, whose events table is the assertion."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx

from app.config.operator_config import parse_config
from app.gateway.reach import RefusalLog, Refused
from app.spawner.appclient import AppClient
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything
from tests.spawner_support import gateway_context

KEY = "sk-ant-api03-operator-refused-key-77777777"
MODEL_SCRIPT = [Step(anything, Reply("fine"))]
CANARY = "canary-from-the-request-body"


def _messages(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-opus-4",
        "stream": True,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": CANARY}],
    }
    return {**body, **extra}


def test_a_refused_mcp_request_is_an_event_of_its_item_in_the_app(
    api, model: FakeAnthropic, tmp_path: Path
) -> None:
    item = api.work_item(1)
    other = api.work_item(2)
    client = AppClient(api.url, api.token())
    config = parse_config({}, "cfg.yaml")
    env = {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": model.url}
    ctx = gateway_context(
        config, env, tmp_path / "home", tmp_path / "state", tmux="refused", client=client
    )
    assert ctx.models is not None
    try:
        gateway = ctx.models.gateway.url
        key, other_key = ctx.models.for_session(item).key, ctx.models.for_session(other).key
        mcp = [{"type": "url", "url": f"https://evil.example/{CANARY}", "name": CANARY}]
        with httpx.Client(timeout=30) as http:
            refused = [
                http.post(
                    gateway + "/v1/messages",
                    headers={"x-api-key": key},
                    json=_messages(mcp_servers=mcp),
                )
                for _ in range(2)
            ]
            fine = http.post(
                gateway + "/v1/messages", headers={"x-api-key": other_key}, json=_messages()
            )
        assert [r.status_code for r in refused] == [403, 403] and fine.status_code == 200
        ctx.models.report()  # what the spawner's reporter does every few seconds
        assert ctx.events.flush()
    finally:
        ctx.models.close()
        client.close()
    (event,) = api.events("gateway.refused", item)
    assert event["kind"] == "mcp" and event["what"] == "mcp_servers"
    assert "MCP server" in event["reason"] and event["times"] == 2 and event["folded"] == 0
    assert CANARY not in json.dumps(event)  # the reason and the type, never the body
    assert api.events("gateway.refused", other) == []
    (reached,) = model.snapshot()  # only the other's request reached the model
    assert "mcp_servers" not in reached.body


def test_a_session_that_keeps_asking_costs_a_counter_not_an_event_a_try() -> None:
    log = RefusalLog()
    item = f"github:o/r#{uuid.uuid4().int % 1000}"
    mcp = Refused("mcp_servers: …", "mcp", "mcp_servers")
    for _ in range(50):
        log.note(item, mcp)
    for n in range(20):  # a new tool type every time
        log.note(item, Refused(f"a tool of unknown type 'x{n}'", "unknown_tool", f"x{n}"))
    log.note("github:o/r#other", mcp)
    ((seen, folded),) = log.take(item).values()
    assert seen[mcp] == 50 and len(seen) == RefusalLog.KEPT
    assert sum(seen.values()) + folded == 70
    assert log.take(item) == {}  # taken once
    assert set(log.take()) == {"github:o/r#other"}
