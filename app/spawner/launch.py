"""The steps every launch of a work item's session shares once its checkout is ready
(`workspace.itemcheckout`): the App's frozen choice re-validated, the trust pre-seed, the
tmux session, the registry record, the `session.spawned` / `session.respawned` event that
says exactly what was launched, and the first message, pasted once the session shows its
input box (kept as pending, and pasted by the watchdog, when it is not ready in time)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.config import HarnessTrust, NetworkMode, SandboxMode
from app.gateway import SessionModel
from app.spawner.appclient import ClaimedJob
from app.spawner.argv import Choice, Launch, validate_choice
from app.spawner.confine.isolation import (
    SandboxError,
    confined_argv,
    host_plan,
    missing_bubblewrap,
    secrets,
)
from app.spawner.confine.sandbox import BWRAP
from app.spawner.confine.sessionhome import home_for, write_gate_facts
from app.spawner.confine.sessionuser import (
    SessionUserError,
    hand_over,
    session_user,
    unconfined_as_root,
)
from app.spawner.context import SpawnerContext
from app.spawner.harness import HomeSetup, TrustOutcome, adapter_of
from app.spawner.naming import item_slug
from app.spawner.registry import SessionRecord, record_for
from app.spawner.session.input_box import paste_first_message
from app.spawner.session.watchdog import Readiness, Waited, await_input, report_stall
from app.spawner.spawner_errors import SpawnerError
from app.spawner.steps.netlaunch import SHARED_NETWORK, closed, open_network, session_app_url
from app.spawner.steps.sessionlimits import enter_session_limits, inner_wrap

RUNNER = "tmux"


class LaunchRefused(SpawnerError, RuntimeError):
    """A launch that cannot work on this devbox as it is (its reason is for the operator)."""


def frozen_choice(
    ctx: SpawnerContext,
    job: ClaimedJob,
    *,
    harness: str | None = None,
    fallback: SessionRecord | None = None,
) -> Choice:
    """The choice the App froze for the job's item, re-validated against this spawner's
    config (declared, hostable, not refused). The checkout's state file is never read for
    it: that file is agent-writable, and the App's record travels in every job.

    `harness` pins the harness (a relaunch keeps its session's); `fallback` stands in for a
    job that carries no frozen record. Every fallback is reported as a warning.
    """
    frozen = job.payload.frozen
    if frozen.decisions or fallback is None:
        raw = Choice(frozen.harness, frozen.model, frozen.effort)
    else:
        raw = Choice(fallback.harness, fallback.model, fallback.effort)
    if harness:
        raw = Choice(harness, raw.model, raw.effort)
    checked = validate_choice(ctx.config, raw, ctx.hosts, ctx.refused)
    for warning in checked.warnings:
        ctx.events.emit(
            "session.choice_fallback", job.work_item_id, level="warning", warning=warning
        )
    return checked.choice


UNSANDBOXED = (
    "routing.sandbox.mode is none: this session runs unconfined, as the spawner's user, and "
    "can read every file that user can"
)


@dataclass(frozen=True)
class Prepared:
    """What to start: the argv (inside the sandbox, unless it is off) and the home trusted."""

    argv: list[str]
    home: Path
    sandbox: str
    network: str = "host"  # `gateways`: a network of its own, `host`: the devbox's
    # What the session's env adds in a network of its own (the proxy, the harness's quiet).
    env: dict[str, str] = field(default_factory=dict)


def prepare_launch(
    ctx: SpawnerContext,
    work_item_id: str,
    cwd: Path,
    launch: Launch,
    trust: HarnessTrust,
    model: SessionModel | None = None,
    network: NetworkMode | None = None,
    gate: Mapping[str, str] | None = None,
) -> Prepared:
    """Prepare the home the session will see — its harness adapter's business: trust for
    `cwd`, the gateway's pass — and confine the launch (the stop gate's hook in read-only
    managed settings, and `gate`, its facts, in a read-only file beside them: none, no
    gate); `network` overrides `routing.sandbox.network`."""
    mode = ctx.config.routing.sandbox.resolved
    sandboxed = mode is not SandboxMode.NONE
    if not sandboxed:
        as_root = unconfined_as_root(ctx.config.source)
        if as_root is not None:
            raise SandboxError(as_root)
        ctx.events.emit("session.unsandboxed", work_item_id, level="warning", message=UNSANDBOXED)
    elif shutil.which(BWRAP, path=ctx.env.get("PATH")) is None:
        raise SandboxError(missing_bubblewrap(ctx.config.source))
    setup = HomeSetup(
        real_home=ctx.home,
        own_home=home_for(ctx.state_dir, item_slug(work_item_id)),
        sandboxed=sandboxed,
        checkout=cwd,
        workspace_root=ctx.workspace_root,
        env=ctx.env,
        trust=trust,
        launch_args=launch.harness_args,
        model=model,
        share_login=ctx.config.routing.sandbox.share_login,
    )
    adapter = adapter_of(launch.harness)
    ready = adapter.prepare_home(setup)
    for failure in ready.failures:
        ctx.events.emit("session.home_failed", work_item_id, level="warning", reason=failure)
    if ready.trust is not None:
        report_trust(ctx, work_item_id, ready.trust)
    if not sandboxed:
        argv = inner_wrap(ctx)(list(launch.argv))
        return Prepared(enter_session_limits(ctx, work_item_id, argv), ready.home, mode.value)
    hidden = secrets(
        state_dir=ctx.state_dir,
        real_home=ctx.home,
        workspace_root=ctx.workspace_root,
        socket_dir=ctx.runner.socket_path.parent,
        env=ctx.env,
    )
    if ctx.routes is not None:  # the files its credential routes read their secrets from
        hidden += ctx.routes.hidden()
    sandbox = ctx.config.routing.sandbox
    try:
        managed = (adapter.write_managed(ctx.state_dir), adapter.managed_at)
        facts = {**(gate or {}), "CLAUDE_PROJECT_DIR": os.path.realpath(cwd)}
        facts_file = write_gate_facts(ctx.state_dir, item_slug(work_item_id), facts)
    except (OSError, ValueError) as exc:
        raise SandboxError(f"the stop gate's managed settings cannot be written: {exc}") from exc
    try:
        user = session_user()
    except SessionUserError as exc:
        raise SandboxError(str(exc)) from exc
    net = None
    if closed(ctx, network):
        gateway = model.url if model is not None else None
        net = open_network(ctx, work_item_id, gateway, quiet=adapter.own_hosts)
    else:
        warning = {"level": "warning", "message": SHARED_NETWORK}
        ctx.events.emit("session.network_shared", work_item_id, **warning)
    # The session's own tree is its user's, and holds nothing a host user could abuse.
    hand_over([cwd, ready.home, *([net.sockets] if net is not None else [])], user)
    plan = host_plan(
        sandbox=sandbox,
        checkout=cwd,
        home=ready.home,
        env=ctx.env,
        hidden=hidden,
        sockets=net.sockets if net is not None else None,
        managed=managed,
        facts=facts_file,
        user=user.ids if user is not None else None,
    )
    argv = confined_argv(plan, launch.argv, ctx.env, inner_wrap(ctx, net.wrap if net else None))
    argv = enter_session_limits(ctx, work_item_id, argv)  # the last step: nothing fails after
    if net is None:
        return Prepared(argv, ready.home, mode.value)
    env = {**net.env, **adapter.closed_network_env}
    return Prepared(argv, ready.home, mode.value, NetworkMode.GATEWAYS.value, env)


def report_trust(ctx: SpawnerContext, work_item_id: str, outcome: TrustOutcome) -> None:
    trust = ctx.config.routing.harness_trust
    for failure in outcome.failures:
        ctx.events.emit("workspace.trust_failed", work_item_id, level="warning", reason=failure)
    if outcome.directories:
        ctx.events.emit(
            "workspace.trusted",
            work_item_id,
            directories=outcome.directories,
            scope=trust.scope.value,
            written=outcome.written,
            bypass_accepted=outcome.bypass_accepted,
            warnings=outcome.warnings,
            level="warning" if outcome.warnings else "info",
        )


@dataclass(frozen=True)
class Started:
    """A launched session's record and how the wait for its first message ended."""

    record: SessionRecord
    waited: Waited


def send_first_message(ctx: SpawnerContext, record: SessionRecord, text: str) -> Waited:
    """Paste `text` once the session is ready. A session that is not — it stopped at a
    dialog, is still starting, or ended — keeps the text as pending, says why, and the
    watchdog pastes it when the input box shows."""
    waited = await_input(ctx.runner, record, ctx.ready_timeout)
    emit = ctx.events.emit
    if waited.state is Readiness.READY:
        paste_first_message(
            ctx.runner, ctx.registry, emit, record, text, late=False, shown=waited.text
        )
        return waited
    pending = ctx.registry.update(record.work_item_id, pending=text) or record
    if waited.screen is not None:
        report_stall(ctx.registry, emit, pending, waited.screen, waited.text)
    emit(
        "session.prompt_pending",
        record.work_item_id,
        level="warning",
        session_id=record.session_id,
        reason=waited.state.value,
        screen=waited.screen.value if waited.screen else None,
    )
    return waited


def start_session(
    ctx: SpawnerContext,
    job: ClaimedJob,
    checkout: Path,
    launch: Launch,
    *,
    event: str,
    **facts: Any,
) -> Started:
    """Pre-trust, start in tmux, record, announce, hand over the first message. `facts` join
    the event (reason, drift…)."""
    payload = job.payload
    spec_id = payload.spec_id
    trust = ctx.config.routing.harness_trust
    if ctx.models is not None:
        # A session its gateway cannot answer would only retry, then sit at its prompt.
        missing = ctx.models.missing_credential(adapter_of(launch.harness).wire)
        if missing is not None:
            raise LaunchRefused(missing)
    model = ctx.models.for_session(job.work_item_id) if ctx.models is not None else None
    gate = {
        "THE_LOOP_WORK_ITEM": spec_id,  # what the stop gate and `check` look up in the checkout
        "THE_LOOP_WORK_ITEM_ID": job.work_item_id,  # what `comment` / `ask` name to the App
        "THE_LOOP_URL": session_app_url(ctx),  # relayed into a closed network
        # The stop gate reads its cap from here rather than parsing YAML on every turn.
        "THE_LOOP_GATE_MAX_ATTEMPTS": str(ctx.config.stop_gate.max_attempts),
    }
    # Sandboxed, the gate reads these from a read-only file; the environment keeps them for
    # the session's own tools and for an unconfined session's gate.
    prepared = prepare_launch(ctx, job.work_item_id, checkout, launch, trust, model, gate=gate)
    name = item_slug(job.work_item_id)
    # git never prompts in a pane nobody watches: without a credential, it fails at once.
    env = {**gate, "GIT_TERMINAL_PROMPT": "0"}
    hidden = {"THE_LOOP_SESSION_TOKEN": job.session_token} if job.session_token else {}
    # The gateway's URL and the session's pass (never on a command line), as the harness
    # takes them.
    shown, secret = adapter_of(launch.harness).session_env(model, prepared.home)
    env.update(shown)
    hidden.update(secret)
    env.update(prepared.env)  # its egress proxy, in a network of its own
    target = ctx.runner.start(
        name, checkout, prepared.argv, owner=job.work_item_id, env=env, hidden_env=hidden or None
    )
    record = record_for(
        launch,
        job.work_item_id,
        name,
        target,
        checkout,
        spec_id=spec_id,
        repo=payload.repo,
        issue_number=payload.issue_number,
        clone_url=payload.clone_url,
    )
    ctx.registry.put(record)
    ctx.events.emit(
        event,
        job.work_item_id,
        harness=launch.harness,
        harness_args=list(launch.harness_args),
        model=launch.model,
        effort=launch.effort,
        runner=RUNNER,
        interaction=launch.interaction,
        gh_event=getattr(payload, "gh_event", ""),
        action=getattr(payload, "action", ""),
        session_id=launch.session_id,
        resumed=launch.resumed,
        tmux_target=target,
        checkout=str(checkout),
        argv=launch.argv,
        sandbox=prepared.sandbox,
        network=prepared.network,
        model_gateway=model is not None,
        job=job.id,
        **facts,
    )
    if launch.prompt is None:
        return Started(record, Waited(Readiness.READY))
    return Started(record, send_first_message(ctx, record, launch.prompt))


def session_result(record: SessionRecord, *, respawned: bool) -> dict[str, Any]:
    """A spawn job's result, in the protocol's shape."""
    return {
        "session_id": record.session_id,
        "tmux_target": record.tmux_target,
        "harness": record.harness,
        "model": record.model,
        "effort": record.effort,
        "harness_args": list(record.harness_args),
        "checkout": record.checkout,
        "respawned": respawned,
    }
