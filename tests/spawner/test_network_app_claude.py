"""The real `claude` binary with an App on another host: the App (SQLite, the fake GitHub)
over https with a certificate from a private CA, under this machine's host name
(`tlsapp_support`), so a session in a closed network has no relay to it and reaches it only
through the spawner's allow-listing proxy. The spawner trusts the CA through `SSL_CERT_FILE`
alone. Claude Code, launched by the spawner's own spawn path in bubblewrap with
`routing.sandbox.network: gateways` and driven offline by the scripted model (through the
relayed model gateway), runs `the-loop comment` through its Bash tool: what the model is
shown is the comment's address, and the comment is on the issue; its stop, at a phase
whose artifact is missing, meets the stop gate, which counted the attempt on the App."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.fleet.tokens import mint_session_token
from app.spawner.context import SpawnerContext
from app.spawner.network.netgates import session_dir
from app.store.tables import WorkItemStatus
from app.workitems.decide.gate_counts import KEY
from tests.claude_support import GENEROUS, sandboxed_devbox
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything, bash, tool_result_for
from tests.fakes.model_script import contains
from tests.jobs_support import events, run_ok, spawn_job
from tests.spawner_support import bare_repository
from tests.tlsapp_support import ROOT, TlsApp, comments_saying

pytestmark = [
    pytest.mark.claude,
    pytest.mark.sqlite_only,
    pytest.mark.parametrize("tls_app", ["host-name"], indirect=True),
]
NUMBER = 23
SAID = "Claude reached the App behind a private CA through the egress proxy."
COMMAND = f"the-loop comment '{SAID}' 2>&1; echo COMMENT-EXIT=$?"


def test_real_claude_comments_through_the_proxy_on_an_app_behind_a_private_ca(
    tmp_path: Path, tls_app: TlsApp, stopped: list[SpawnerContext]
) -> None:
    api = tls_app.api
    item = api.work_item(number=NUMBER, status=WorkItemStatus.RUNNING)
    with api.session() as db, db.begin():
        token = mint_session_token(db, item, datetime.now(UTC))
    script = [
        Step(contains("Say where you are"), Reply("Commenting.", (bash(COMMAND),)), name="say"),
        Step(tool_result_for("Bash", "COMMENT-EXIT="), Reply("Done."), name="shown"),
        Step(anything, Reply("Stopping here."), name="gate"),  # what the stop gate said
        *[Step(anything, Reply("Stopping here.")) for _ in range(4)],
    ]
    trust = {"SSL_CERT_FILE": str(tls_app.ca), "PYTHONPATH": str(ROOT)}
    with FakeAnthropic(script) as model:
        ctx = sandboxed_devbox(tmp_path, model, env=trust)
        stopped.append(ctx)
        ctx.app_url = tls_app.url
        job = spawn_job(bare_repository(tmp_path), item=item, prompt="Say where you are.", model="")
        # At a phase whose artifact is missing, so its stop is gated: the gate counts the
        # attempt on the App, over the same proxy and TLS.
        at_a_phase = job.payload.model_copy(update={"phase": "requirements-definition"})
        try:
            run_ok(ctx, replace(job, payload=at_a_phase, session_token=token))
            shown = model.wait_for_step(1, timeout=GENEROUS).turn.text
            gate = model.wait_for_step(2, timeout=GENEROUS).turn.text
            sockets = sorted(p.name for p in session_dir(ctx.state_dir / "net", item).iterdir())
        finally:
            if ctx.networks is not None:
                ctx.networks.stop()

    # By name the App has no relay: the session reached it through the proxy.
    assert sockets == ["model.sock", "proxy.sock"]
    assert "COMMENT-EXIT=0" in shown, shown
    (posted,) = comments_saying(api, NUMBER, SAID)
    assert posted["html_url"] in shown  # what `the-loop comment` told the model
    assert "Stop hook feedback" in gate and "(attempt 1/3)" in gate
    counted = (api.item(item).session or {}).get(KEY) or {}
    assert counted.get("attempts") == 1  # kept on the App's row: the gate reached it
    # The App was let through; what Claude Code tries of its own accord (its update and
    # plugin hosts, nobody listed them) is refused, and none of it is the App.
    app_port = tls_app.url.rsplit(":", 1)[1]
    refused = {e["target"] for e in events(ctx, "session.egress_refused")}
    assert f"{tls_app.host}:{app_port}" not in refused
