"""A launch's closed network, on the spawner's side: the sessions' sockets served
(`netgates`), the relay put in front of the harness (`netrelay`), the App's URL as the
session names it, and the sockets gone when the session ends.

Only for sandboxed sessions with `routing.sandbox.network: gateways`; `network: host` and
`mode: none` leave the devbox's network shared (the first warned about on every launch).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.config import NetworkMode, Sandbox, SandboxMode
from app.spawner.confine.isolation import CA_VARIABLES
from app.spawner.confine.sessionuser import hand_over, session_user
from app.spawner.network import netrelay
from app.spawner.network.netgates import NETS, SessionNetworks, session_dir
from app.spawner.network.netplan import (
    NetPlan,
    app_url_inside,
    plan_network,
    relay_argv,
    split_hostport,
)
from app.spawner.network.presets import CA_NAMES, EGRESS_PRESETS, expand_egress, tool_env
from app.spawner.network.registries import Registries, read_registries
from app.spawner.steps.sessionlimits import close_session_limits

if TYPE_CHECKING:
    from app.spawner.context import SpawnerContext

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
    with ctx.first_use:
        if ctx.networks is None:
            ctx.networks = SessionNetworks(ctx.state_dir / NETS, ctx.events.emit)
    return ctx.networks


def _plan(
    ctx: SpawnerContext, model_url: str | None, work_item_id: str
) -> tuple[NetPlan, dict[str, Any], dict[str, str]]:
    """The session's plan (egress presets expanded from the devbox's registries, its relayed
    services), the handlers of the sockets the spawner answers itself (its credential
    routes) and what its environment gains from them."""
    sandbox = ctx.config.routing.sandbox
    plan = egress_plan(ctx.app_url, model_url, sandbox, read_registries(ctx.env))
    if ctx.routes is None:
        return plan, {}, {}
    plan, served, env = ctx.routes.served(plan, work_item_id)
    return plan, served, env


def egress_plan(
    app_url: str, model_url: str | None, sandbox: Sandbox, registries: Registries
) -> NetPlan:
    """A session's network plan with `sandbox`'s egress presets expanded from `registries`
    (pure). A preset's hosts come from the devbox's own configuration (pip's, npm's), as the
    App's name does: a mirror there may lie on the operator's private network, so they are
    not held to the public-address rule a name written in `egress` is."""
    egress = expand_egress(sandbox.egress, registries)
    plan = plan_network(app_url, model_url, egress, sandbox.services)
    presets = [entry for entry in sandbox.egress if entry in EGRESS_PRESETS]
    configured = {split_hostport(entry) for entry in expand_egress(presets, registries)}
    return replace(plan, own=plan.own | configured)


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


def open_network(
    ctx: SpawnerContext, work_item_id: str, model_url: str | None, quiet: Iterable[str] = ()
) -> Opened:
    """Serve `work_item_id`'s sockets (replacing any it had) for its next launch; refusals
    of the `quiet` hosts (the harness's own) are marked so nobody is asked to allow them."""
    plan, served, routed = _plan(ctx, model_url, work_item_id)
    plan = replace(plan, quiet=frozenset(h.lower() for h in quiet))
    env = {**plan.env, **launch_env(ctx, plan), **routed}
    return Opened(session_networks(ctx).open(work_item_id, plan, served), plan, env)


def launch_env(ctx: SpawnerContext, plan: NetPlan) -> dict[str, str]:
    """What a closed network's session gains for its package tools: the devbox's registries
    and CA bundle, and the proxy in each tool's words (`presets.tool_env`)."""
    proxy = plan.env["HTTPS_PROXY"]
    egress = ctx.config.routing.sandbox.egress
    told = tool_env(read_registries(ctx.env), egress, proxy)
    # What the spawner's own environment already says (an index; certificates, e.g. the
    # App's private CA in `SSL_CERT_DIR`) reaches the session as it is: never overridden.
    if any(name in ctx.env for name in CA_VARIABLES):
        told = {name: value for name, value in told.items() if name not in CA_NAMES}
    return {name: value for name, value in told.items() if name not in ctx.env}


def allow_host(
    ctx: SpawnerContext, work_item_id: str, host: str, port: int, by: str
) -> dict[str, Any]:
    """An authorized human let `work_item_id`'s session through to `host:port`: its live
    proxy does so from the next request on (and after a relaunch by this spawner)."""
    allowed = ctx.networks is not None and ctx.networks.allow(work_item_id, host, port)
    if allowed:
        ctx.events.emit(
            "session.egress_allowed",
            work_item_id,
            host=host,
            port=port,
            target=f"{host}:{port}",
            by=by,
        )
    return {"allowed": allowed}


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
    user = session_user()
    for item in live:
        # Made anew by this spawner: the sockets are handed to the sessions' user again.
        plan, served, _ = _plan(ctx, model_url, item)
        hand_over([session_networks(ctx).open(item, plan, served)], user)
