"""A launch's limits, on the spawner's side: the plan made once per spawner (the best the
host offers, `limits.choose_plan`), the session's cgroup opened and entered before its
sandbox starts, the resource limits set inside it, a warning on every launch whose limits
are not all enforced, and, at the session's end, its cgroup emptied and removed and what it
counted said with the end."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.config import SandboxMode
from app.spawner.confine import enter_limits
from app.spawner.confine.cgroups import SessionLimiter, probe, spawner_tag
from app.spawner.confine.isolation import SandboxError
from app.spawner.confine.limits import Mechanism, describe_plan, ending_facts, rlimit_args
from app.spawner.confine.sessionhome import home_for
from app.spawner.confine.sessionuser import hand_over
from app.spawner.naming import item_slug
from app.spawner.steps.diskwatch import DISK

if TYPE_CHECKING:
    from app.spawner.context import SpawnerContext

Wrap = Callable[[list[str]], list[str]]


class LimitsError(SandboxError):
    """A session's cgroup cannot be made: the launch is refused (a failed job, with this
    reason) rather than run unbounded."""


def limiter_of(ctx: SpawnerContext) -> SessionLimiter:
    """The spawner's one `SessionLimiter`, made on first use from what the host offers."""
    with ctx.first_use:
        if ctx.limiter is None:
            sandbox = ctx.config.routing.sandbox
            offer = probe(spawner_tag(ctx.state_dir))
            sandboxed = sandbox.resolved is not SandboxMode.NONE
            ctx.limiter = SessionLimiter.for_host(offer, sandbox.limits, sandboxed=sandboxed)
    return ctx.limiter


def _entering(*words: str) -> list[str]:
    return [sys.executable, "-S", str(Path(enter_limits.__file__).resolve()), *words, "--"]


def inner_wrap(ctx: SpawnerContext, then: Wrap | None = None) -> Wrap:
    """What the sandbox runs in front of the harness (after `then`, e.g. the network's relay):
    the resource limits, when they are the mechanism."""
    words = rlimit_args(limiter_of(ctx).plan)

    def wrap(inner: list[str]) -> list[str]:
        argv = then(inner) if then is not None else inner
        return [*_entering(*words), *argv] if words else argv

    return wrap


def enter_session_limits(ctx: SpawnerContext, work_item_id: str, argv: list[str]) -> list[str]:
    """`argv` (bubblewrap, or an unconfined harness) started inside the session's fresh
    cgroups; warns (`session.unlimited`) when some asked-for limit is not enforced here."""
    limiter = limiter_of(ctx)
    plan = limiter.plan
    if plan.weak:
        ctx.events.emit(
            "session.unlimited",
            work_item_id,
            level="warning",
            mechanism=plan.mechanism.value,
            unenforced=[name for name, _ in plan.unenforced],
            message=describe_plan(plan),
        )
    if plan.mechanism not in (Mechanism.CGROUP2, Mechanism.CGROUP1):
        return argv
    try:
        procs = limiter.open(item_slug(work_item_id))
    except OSError as exc:
        raise LimitsError(f"the session's cgroup cannot be made: {exc}") from exc
    cgroups = [word for path in procs for word in ("--cgroup", str(path))]
    return [*_entering(*cgroups), *argv]


def close_session_limits(ctx: SpawnerContext, work_item_id: str) -> dict[str, Any]:
    """The session's cgroups emptied and removed, then its checkout and home tidied (no
    set-uid file, no world-writable directory left for the host's next step); what its
    limits counted, for its end's event (`limit: disk` when the disk watch stopped it)."""
    facts: dict[str, Any] = {}
    if ctx.limiter is not None:
        facts = ending_facts(ctx.limiter.close(item_slug(work_item_id)))
    record = ctx.registry.get(work_item_id)
    if record is not None and record.checkout:
        hand_over([Path(record.checkout), home_for(ctx.state_dir, item_slug(work_item_id))], None)
    used = ctx.disk.take(work_item_id)
    if used is not None:
        facts.update(limit=DISK, disk_used=used)
    return facts


def clean_stale_limits(ctx: SpawnerContext) -> list[str]:
    """At a spawner's start: the cgroups of its sessions that ended meanwhile, removed."""
    live = [item_slug(r.work_item_id) for r in ctx.registry.all() if r.live]
    return limiter_of(ctx).clean_stale(live)
