"""Standing sessions: long-lived sessions the operator declares under
`standingSessions.sessions[]` (a supervisor, an ops helper), started by
`the-loop standing start <name>`.

An entry that omits `harnessArgs` inherits its harness's resolved launch arguments (the one
resolver); an explicit `[]` means none. A standing session is not a work item: no deny
token, no `THE_LOOP_WORK_ITEM` (the stop gate stays off), its directory trusted on its own.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from app.config import NetworkMode, StandingSession, TrustScope
from app.gateway.access import SessionModel
from app.harnesses import default_harness
from app.spawner.argv import standing_launch
from app.spawner.launch import SpawnerContext, prepare_launch, send_first_message
from app.spawner.naming import item_slug
from app.spawner.registry import SessionRecord, SessionState, record_for

PREFIX = "standing:"


class StandingError(RuntimeError):
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


def start(ctx: SpawnerContext, name: str, *, restart: bool = False) -> SessionRecord:
    entry = entry_named(ctx, name)
    session = tmux_name(name)
    pane = ctx.runner.pane(session)
    if pane is not None and not pane.dead and not restart:
        raise StandingError(
            f"{name!r} is already running: tmux -L {ctx.runner.socket} "
            f"attach -t {session} (or --restart)"
        )
    harness = entry.harness or default_harness(ctx.config, ctx.hosts)
    if harness not in ctx.hosts:
        raise StandingError(f"harness {harness!r} cannot host a session on this machine")
    cwd = entry.cwd.expanduser()
    if not cwd.is_dir():
        raise StandingError(f"{name!r}: cwd {cwd} is not a directory")
    launch = standing_launch(
        ctx.config, harness, entry.harness_args, session_id=str(uuid.uuid4()), prompt=entry.prompt
    )
    trust = ctx.config.routing.harness_trust.model_copy(update={"scope": TrustScope.DIRECTORY})
    item = standing_item(name)
    # The operator's own session, started by the operator's command, in which no model
    # gateway runs (the spawner's serves the passes it minted itself): it is handed the
    # operator's key, as the operator's own shell would be, and so reaches the model's API
    # on the devbox's own network (`network: host`, warned about on every start).
    key = ctx.env.get("ANTHROPIC_API_KEY")
    model = SessionModel("", key) if key else None
    prepared = prepare_launch(ctx, item, cwd, launch, trust, model, NetworkMode.HOST)
    hidden = model.hidden if model is not None else None
    target = ctx.runner.start(session, cwd, prepared.argv, owner=item, hidden_env=hidden)
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
        cwd=str(cwd),
    )
    if launch.prompt:
        send_first_message(ctx, record, launch.prompt)
    return record


def stop(ctx: SpawnerContext, name: str) -> bool:
    entry_named(ctx, name)
    item = standing_item(name)
    killed = ctx.runner.kill(tmux_name(name), owner=item)
    if ctx.registry.update(item, state=SessionState.STOPPED.value) is not None or killed:
        ctx.events.emit("standing.stopped", item, name=name)
    return killed
