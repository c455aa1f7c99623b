"""A credential route from inside the real `claude`: launched by the spawner's own spawn path in
bubblewrap, driven offline by the scripted model, it calls the route through its Bash tool
(the stand-in upstream echoes the headers it got, and challenges on another path) and prints
its whole environment. What the model was shown holds the route's answers and no
credential; the upstream got the credential."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.spawner.context import SpawnerContext
from app.spawner.network.credroutes import CredentialRoutes
from app.spawner.network.routecreds import read_text, resolve_routes
from tests.claude_support import GENEROUS, sandboxed_devbox
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything, bash, tool_result_for
from tests.fakes.credential_upstream import CredentialUpstream
from tests.fakes.model_script import contains
from tests.jobs_support import run_ok, spawn_job
from tests.spawner_support import bare_repository

pytestmark = pytest.mark.claude
TOKEN = "claude-route-token-31d4"
PROBE = r"""
import os, urllib.error, urllib.request
base = os.environ["STAGING_API_URL"]
for path in ("/echo", "/challenge"):
    try:
        with urllib.request.urlopen(base + path, timeout=30) as answer:
            print("ROUTE", path, answer.status, dict(answer.headers), answer.read().decode())
    except urllib.error.HTTPError as exc:
        print("ROUTE", path, exc.code, dict(exc.headers), exc.read().decode())
for name, value in sorted(os.environ.items()):
    print("ENV", name, value)
"""


def test_claude_uses_a_route_and_is_never_shown_its_credential(
    tmp_path: Path, stopped: list[SpawnerContext]
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "probe.py").write_text(PROBE)
    script = [
        Step(
            contains("Call the staging API"),
            Reply("Calling.", (bash(f"python3 {tools}/probe.py"),)),
            name="call",
        ),
        Step(tool_result_for("Bash", "ROUTE"), Reply("Done."), name="done"),
        *[Step(anything, Reply("Stopping here.")) for _ in range(4)],
    ]
    origin = bare_repository(tmp_path)
    with CredentialUpstream(f"Bearer {TOKEN}") as staging, FakeAnthropic(script) as model:
        route = {
            "env": "STAGING_API_URL",
            "upstream": staging.url + "/simple",
            "headers": {"Authorization": "Bearer ${STAGING_TOKEN}"},
        }
        ctx = sandboxed_devbox(tmp_path, model, readOnly=[str(tools)], routes=[route])
        stopped.append(ctx)
        resolved = resolve_routes(
            ctx.config.routing.sandbox, {"STAGING_TOKEN": TOKEN}, read_text, "test.yaml"
        )
        ctx.routes = CredentialRoutes(resolved, ctx.events.emit)
        run_ok(ctx, spawn_job(origin, prompt="Call the staging API.", model=""))
        shown = model.wait_for_step(1, timeout=GENEROUS).turn.text
    assert "ROUTE /echo 200" in shown and "ROUTE /challenge 401" in shown
    assert "ENV STAGING_API_URL http://127.0.0.1:" in shown
    assert TOKEN not in shown and "WWW-Authenticate" not in shown
    assert ("GET", "/simple/echo", f"Bearer {TOKEN}") in staging.seen
