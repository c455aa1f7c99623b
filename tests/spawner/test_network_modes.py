"""The two network modes on the real spawn path (tmux, bubblewrap, a stand-in harness that
records what it was started with): a closed network by default, the devbox's own with a
warning on every launch when the operator asks for it."""

from __future__ import annotations

from pathlib import Path

from app.config.operator_config import StandingSessions
from app.spawner.context import SpawnerContext
from app.spawner.network.netgates import session_dir
from app.spawner.standing_sessions import standing_item
from app.spawner.standing_sessions import start as start_standing
from app.spawner.steps.netlaunch import restore_networks
from app.spawner.workspace.checkout import checkout_dir
from tests.jobs_support import WI, events, make_config, run_ok, spawn_job
from tests.spawner_support import StandIn, git, talk_unix


def test_by_default_a_session_gets_a_closed_network_and_its_proxy(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    run_ok(ctx, spawn_job(origin))
    env = standin.wait_start(WI)["env"]
    assert env["HTTPS_PROXY"] == env["http_proxy"] == "http://127.0.0.1:3128"
    assert env["NO_PROXY"] == "127.0.0.1,localhost,::1"
    # Claude Code's own update and telemetry calls could not get out: they are switched off.
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    # The App's port 9 cannot be bound inside (no capability): it is relayed from 10009.
    assert ctx.app_url == "http://127.0.0.1:9" and env["THE_LOOP_URL"] == "http://127.0.0.1:10009"
    checkout = checkout_dir(ctx.workspace_root, WI)
    origin_url = git("remote", "get-url", "origin", cwd=checkout).strip()
    assert origin_url == "http://127.0.0.1:10009/git/o/r.git"  # git inside names the relay
    assert events(ctx, "session.spawned")[0]["network"] == "gateways"
    assert events(ctx, "session.network_shared") == []
    assert (session_dir(ctx.state_dir / "net", WI) / "proxy.sock").exists()


def test_a_shared_network_warns_on_every_launch(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path
) -> None:
    ctx.config = make_config(standin, tmp_path, sandbox={**standin.sandbox, "network": "host"})
    run_ok(ctx, spawn_job(origin))
    run_ok(ctx, spawn_job(origin, item="github:o/r#8"))
    env = standin.wait_start(WI)["env"]
    assert "HTTPS_PROXY" not in env and "http_proxy" not in env
    assert "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC" not in env  # the operator's to choose
    warned = events(ctx, "session.network_shared")
    assert len(warned) == 2 and all(w["level"] == "warning" for w in warned)
    assert "shares the devbox's network" in warned[0]["message"]
    assert [e["network"] for e in events(ctx, "session.spawned")] == ["host", "host"]
    assert not (ctx.state_dir / "net").exists()


def test_a_restarted_spawner_serves_live_sessions_sockets_again(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path
) -> None:
    ops = tmp_path / "ops"
    ops.mkdir()
    standing = {"sessions": [{"name": "ops", "cwd": str(ops), "harnessArgs": []}]}
    ctx.config = ctx.config.model_copy(
        update={"standing_sessions": StandingSessions.model_validate(standing)}
    )
    run_ok(ctx, spawn_job(origin))
    standin.wait_start(WI)
    assert start_standing(ctx, "ops").network == "gateways"  # a standing session's too
    standin.wait_start(f"standing-{ops}")
    sockets = session_dir(ctx.state_dir / "net", WI)
    its_own = session_dir(ctx.state_dir / "net", standing_item("ops"))
    stale = session_dir(ctx.state_dir / "net", "github:o/r#99")  # a session that ended unseen
    stale.mkdir()
    assert ctx.networks is not None
    ctx.networks.stop()  # the spawner ends; its session lives on
    ctx.networks = None
    assert (sockets / "proxy.sock").exists()
    restore_networks(ctx)  # the next spawner starts
    for served in (sockets, its_own):
        answer = talk_unix(served / "proxy.sock", b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403 Forbidden")
    assert not stale.exists()
    refused = [e["target"] for e in events(ctx, "session.egress_refused")]
    assert refused == ["example.com:443", "example.com:443"]
