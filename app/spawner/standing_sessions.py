"""Standing sessions: long-lived sessions the operator declares under
`standingSessions.sessions[]` (a supervisor, an ops helper), started by
`the-loop standing start <name>` — which hands the request to the running spawner
(`standing_control.py`), where this module does the work.

A standing session is launched as a work item's is as far as credentials and network go: a
pass of the spawner's model gateway (never the operator's key), the configured
`routing.sandbox.network` (with the same warning for `host`), its pass and sockets gone when
it ends or is stopped. An entry that omits `harnessArgs` inherits its harness's resolved
launch arguments (the one resolver); an explicit `[]` means none. It is not a work item: no
deny token, no `THE_LOOP_WORK_ITEM` (the stop gate stays off), its directory trusted on its
own.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from app.config import StandingSession, TrustScope, default_harness
from app.spawner.argv import standing_launch
from app.spawner.context import SpawnerContext
from app.spawner.harness import adapter_of
from app.spawner.launch import prepare_launch, send_first_message
from app.spawner.naming import item_slug
from app.spawner.registry import SessionRecord, SessionState, record_for
from app.spawner.spawner_errors import SpawnerError
from app.spawner.steps.netlaunch import session_over

PREFIX = "standing:"


class StandingError(SpawnerError, RuntimeError):
    """The standing session cannot be started or stopped; the message says why."""


def standing_item(name: str) -> str:
    return PREFIX + name


def tmux_name(name: str) -> str:
    return item_slug(standing_item(name))


@dataclass(frozen=True)
class StandingStatus:
    entry: StandingSession
    record: SessionRecord | None
    alive: bool


@dataclass(frozen=True)
class Launched:
    """A standing session just started: its record and the network it was given."""

    record: SessionRecord
    network: str
    model_gateway: bool


def entry_named(ctx: SpawnerContext, name: str) -> StandingSession:
    sessions = ctx.config.standing_sessions.sessions
    entry = next((s for s in sessions if s.name == name), None)
    if entry is None:
        declared = ", ".join(s.name for s in sessions) or "none"
        raise StandingError(
            f"no standing session {name!r} in {ctx.config.source} (declared: {declared})"
        )
    return entry


def statuses(ctx: SpawnerContext) -> list[StandingStatus]:
    panes = ctx.runner.panes()
    out = []
    for entry in ctx.config.standing_sessions.sessions:
        record = ctx.registry.get(standing_item(entry.name))
        pane = panes.get(tmux_name(entry.name))
        alive = pane is not None and not pane.dead and pane.owner == standing_item(entry.name)
        out.append(StandingStatus(entry, record, alive))
    return out


def start(ctx: SpawnerContext, name: str, *, restart: bool = False) -> Launched:
    """Launch `name` (replacing a running one only with `restart`), in the spawner's process:
    the item's lock held, as a job holds it, so the watchdog never looks at a half-launch."""
    entry = entry_named(ctx, name)
    session = tmux_name(name)
    item = standing_item(name)
    harness = entry.harness or default_harness(ctx.config, ctx.hosts)
    if harness not in ctx.hosts:
        raise StandingError(f"harness {harness!r} cannot host a session on this machine")
    cwd = entry.cwd.expanduser()
    if not cwd.is_dir():
        raise StandingError(f"{name!r}: cwd {cwd} is not a directory")
    adapter = adapter_of(harness)
    if ctx.models is not None:  # a session its gateway cannot answer would only retry
        missing = ctx.models.missing_credential(adapter.wire)
        if missing is not None:
            raise StandingError(missing)
    launch = standing_launch(
        ctx.config, harness, entry.harness_args, session_id=str(uuid.uuid4()), prompt=entry.prompt
    )
    trust = ctx.config.routing.harness_trust.model_copy(update={"scope": TrustScope.DIRECTORY})
    with ctx.locks.hold(item):
        pane = ctx.runner.pane(session)
        if pane is not None and not pane.dead and not restart:
            raise StandingError(
                f"{name!r} is already running: tmux -L {ctx.runner.socket} "
                f"attach -t {session} (or --restart)"
            )
        ctx.runner.kill(session, owner=item)
        session_over(ctx, item)  # a replaced session's pass and sockets die first
        model = ctx.models.for_session(item) if ctx.models is not None else None
        try:
            prepared = prepare_launch(ctx, item, cwd, launch, trust, model)
            # The gateway's URL and the pass, as the harness takes them (never on a command
            # line); the egress proxy, in a network of its own.
            shown, secret = adapter.session_env(model, prepared.home)
            env = {**shown, **prepared.env}
            target = ctx.runner.start(
                session, cwd, prepared.argv, owner=item, env=env, hidden_env=secret or None
            )
        except BaseException:
            session_over(ctx, item)  # a launch that failed leaves no pass and no sockets
            raise
        record = ctx.registry.put(record_for(launch, item, session, target, cwd, standing=True))
        ctx.events.emit(
            "standing.started",
            item,
            name=name,
            harness=harness,
            harness_args=list(launch.harness_args),
            session_id=launch.session_id,
            tmux_target=target,
            argv=launch.argv,
            sandbox=prepared.sandbox,
            network=prepared.network,
            model_gateway=model is not None,
            cwd=str(cwd),
        )
        if launch.prompt:
            send_first_message(ctx, record, launch.prompt)
    return Launched(record, prepared.network, model is not None)


def stop(ctx: SpawnerContext, name: str) -> bool:
    """End `name`: its pass and sockets first, then its pane; False when none was running."""
    entry_named(ctx, name)
    item = standing_item(name)
    with ctx.locks.hold(item):
        session_over(ctx, item)
        killed = ctx.runner.kill(tmux_name(name), owner=item)
        if ctx.registry.update(item, state=SessionState.STOPPED.value) is not None or killed:
            ctx.events.emit("standing.stopped", item, name=name)
    return killed
