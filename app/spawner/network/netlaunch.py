"""A launch's closed network, on the spawner's side: the sessions' sockets served
(`netgates`), the relay put in front of the harness (`netrelay`), the App's URL as the
session names it, and the sockets gone when the session ends.

Only for sandboxed sessions with `routing.sandbox.network: gateways`; `network: host` and
`mode: none` leave the devbox's network shared (the first warned about on every launch).
"""

from __future__ import annotations

import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.config_sandbox import NetworkMode, SandboxMode
from app.spawner.confine.sessionlimits import close_session_limits
from app.spawner.network import netrelay
from app.spawner.network.netgates import NETS, SessionNetworks, session_dir
from app.spawner.network.netplan import NetPlan, app_url_inside, plan_network, relay_argv

if TYPE_CHECKING:
    from app.spawner.launch import SpawnerContext

_MADE = threading.Lock()
SHARED_NETWORK = (
    "routing.sandbox.network is host: this session shares the devbox's network and can "
    "reach any host it can name, taking whatever it reads with it"
)


def closed(ctx: SpawnerContext, network: NetworkMode | None = None) -> bool:
    """Do this spawner's sessions (or one launched with `network`) get a network of their own?"""
    sandbox = ctx.config.routing.sandbox
    chosen = network or sandbox.network
    return sandbox.resolved is not SandboxMode.NONE and chosen is NetworkMode.GATEWAYS


def session_app_url(ctx: SpawnerContext) -> str:
    """The App's URL as this spawner's sessions name it (their env, their `origin`)."""
    return app_url_inside(ctx.app_url) if closed(ctx) else ctx.app_url


def session_networks(ctx: SpawnerContext) -> SessionNetworks:
    """The spawner's one `SessionNetworks`, made on first use."""
    with _MADE:
        if ctx.networks is None:
            ctx.networks = SessionNetworks(ctx.state_dir / NETS, ctx.events.emit)
    return ctx.networks


def _plan(
    ctx: SpawnerContext, model_url: str | None, work_item_id: str
) -> tuple[NetPlan, dict[str, Any], dict[str, str]]:
    """The session's plan, the handlers of the sockets the spawner answers itself (its
    credential routes) and what its environment gains."""
    plan = plan_network(ctx.app_url, model_url, ctx.config.routing.sandbox.egress)
    if ctx.routes is None:
        return plan, {}, plan.env
    plan, served, env = ctx.routes.served(plan, work_item_id)
    return plan, served, {**plan.env, **env}


@dataclass(frozen=True)
class Opened:
    """A session's closed network, open: its sockets' directory, what wraps its argv, and
    what its environment gains (the proxy)."""

    sockets: Path
    plan: NetPlan
    env: dict[str, str] = field(default_factory=dict)

    def wrap(self, inner: list[str]) -> list[str]:
        relay = str(Path(netrelay.__file__).resolve())
        return relay_argv(sys.executable, relay, self.plan, inner)


def open_network(ctx: SpawnerContext, work_item_id: str, model_url: str | None) -> Opened:
    """Serve `work_item_id`'s sockets (replacing any it had) for its next launch."""
    plan, served, env = _plan(ctx, model_url, work_item_id)
    return Opened(session_networks(ctx).open(work_item_id, plan, served), plan, env)


def session_over(ctx: SpawnerContext, work_item_id: str) -> dict[str, Any]:
    """A session ended (exited, stopped): its model pass dies, its network's sockets go, its
    cgroup is emptied and removed; returns what its limits counted, for its end's event."""
    if ctx.models is not None:
        ctx.models.end(work_item_id)
    if ctx.networks is not None:
        ctx.networks.close(work_item_id)
    if ctx.routes is not None:
        ctx.routes.report(work_item_id)
    return close_session_limits(ctx, work_item_id)


def restore_networks(ctx: SpawnerContext) -> None:
    """Serve again the sockets of the sessions a previous spawner left running (their
    sandboxes hold the same directory, and the same gateway and App addresses), standing
    sessions' too; remove those of sessions that ended meanwhile."""
    live = [r.work_item_id for r in ctx.registry.all() if r.live]
    kept = {session_dir(ctx.state_dir / NETS, item) for item in live}
    root = ctx.state_dir / NETS
    for left in root.iterdir() if root.is_dir() else ():
        if left not in kept:
            shutil.rmtree(left, ignore_errors=True)
    if not closed(ctx):
        return
    model_url = ctx.models.gateway.url if ctx.models is not None else None
    for item in live:
        plan, served, _ = _plan(ctx, model_url, item)
        session_networks(ctx).open(item, plan, served)
