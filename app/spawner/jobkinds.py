"""What the spawner does with each kind of job: spawn, deliver, stop (answer: keypick.py).

- spawn: clone or reuse the checkout, run the repository's set-up in it (`setup_run`: a
  failed set-up fails the job and launches nothing), write the App's frozen record into it
  (the state file the stop gate reads), launch on that record's choice, re-validated. A
  spawn job offered again after its session already started (a lease that ran out while
  the result was in flight) reports that session: never two.
- deliver: paste the comment into the live session. A session that waits at a blocking
  screen is not pasted into (the text would be lost in a menu); a dead session is respawned
  with `--resume` and the comment as its prompt (fresh `--session-id` if the resume dies at
  once); a session whose launch facts drifted from what would be resolved now is relaunched
  resuming its conversation, with an event naming old and new.
- stop: end the session.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.protocol import AllowJob, AnswerJob, DeliverJob, SpawnJob, StopJob
from app.spawner.appclient import ClaimedJob
from app.spawner.argv import Choice, Launch, build_launch
from app.spawner.confine.isolation import SandboxError
from app.spawner.context import SpawnerContext
from app.spawner.harness import screens_of
from app.spawner.launch import LaunchRefused, frozen_choice, session_result, start_session
from app.spawner.registry import Drift, SessionRecord, SessionState, drift
from app.spawner.session.input_box import paste_first_message, submit, watch_unsent
from app.spawner.session.leftovers import describe_session, session_home, transcript_tail
from app.spawner.session.tmux import Pane, TmuxError
from app.spawner.session.transcript_usage import report_ended
from app.spawner.session.watchdog import Readiness, await_input, report_stall
from app.spawner.setup_run import SetupFailed, run_setup
from app.spawner.spawner_errors import SpawnerError
from app.spawner.steps.itemcheckout import checkout_for
from app.spawner.steps.keypick import AnswerFailed, answer
from app.spawner.steps.netlaunch import allow_host, session_over
from app.spawner.workspace.checkout import CheckoutError, read_checkout_state, write_frozen_state

NOTICE_SOURCE = "notice"  # the App's own words, not a person's
BUDGET_REASON = "budget"
SPENT_WORDS = "budget spent"  # in the gateway's refusal, as the transcript records it
SHOW_REFUSAL = 10.0  # seconds a refused session is given to show the refusal
PROMPT_FALLBACK = "Work on {url} ({title}). Nobody watches this terminal: ask on the issue."


class JobFailed(SpawnerError, RuntimeError):
    """The job cannot be done; the message is reported to the App."""


def followup_text(payload: DeliverJob) -> str:
    """A follow-up as the session reads it: who said it, where, then their words verbatim.
    A notice of the App's own (a budget's warning) is its words alone."""
    if payload.source == NOTICE_SOURCE:
        return payload.body
    author = payload.author or "someone"
    source = "Slack" if payload.source == "slack" else "GitHub"
    return f"Follow-up from @{author} on {source}:\n\n{payload.body}"


def fresh_prompt(job: ClaimedJob, spec_id: str, text: str) -> str:
    """A follow-up that starts a new conversation: where the work stands comes first, since
    the earlier conversation is not there to say it."""
    return (
        f"You are resuming work item {job.work_item_id} in this checkout; the earlier "
        f"conversation could not be restored. Where it stands: "
        f"docs/specs/{spec_id}/work-item-state.json and `the-loop check`.\n\n{text}"
    )


def spawn_prompt(payload: SpawnJob) -> str:
    if payload.prompt.strip():
        return payload.prompt
    return PROMPT_FALLBACK.format(url=payload.html_url, title=payload.title)


def _alive(ctx: SpawnerContext, record: SessionRecord | None) -> bool:
    """A live record whose pane runs and is tagged as the record's own."""
    if record is None or not record.live:
        return False
    return _runs(record, ctx.runner.pane(record.tmux_session))


def _runs(record: SessionRecord, pane: Pane | None) -> bool:
    """`pane` runs and is tagged as live `record`'s own."""
    return record.live and pane is not None and not pane.dead and pane.owner == record.work_item_id


def spawn(ctx: SpawnerContext, job: ClaimedJob, payload: SpawnJob) -> dict[str, Any]:
    existing = ctx.registry.get(job.work_item_id)
    if existing is not None and _alive(ctx, existing):
        return session_result(existing, respawned=False)
    checkout = checkout_for(ctx, job)
    # Before anything of ours is written into the tree.
    run_setup(ctx, job.work_item_id, payload.repo, checkout.path, fresh=not checkout.reused)
    write_frozen_state(checkout.path, payload.spec_id, payload.frozen, payload.phase, payload.gates)
    choice = frozen_choice(ctx, job)
    launch = build_launch(
        ctx.config, choice, session_id=str(uuid.uuid4()), prompt=spawn_prompt(payload)
    )
    started = start_session(ctx, job, checkout.path, launch, event="session.spawned")
    return session_result(started.record, respawned=False)


def deliver(ctx: SpawnerContext, job: ClaimedJob, payload: DeliverJob) -> dict[str, Any]:
    text = followup_text(payload)
    record = ctx.registry.get(job.work_item_id)
    # The pane and what it shows, in one look: whether the session runs, and the screen the
    # paste is judged against.
    pane, shown = ctx.runner.look(record.tmux_session) if record and record.live else (None, "")
    if record is None or not _runs(record, pane):
        reason = "no session on this spawner" if record is None else "session ended"
        return _respawn(ctx, job, record, text, reason=reason)
    # A relaunch keeps its session's harness and runs the App's frozen model and effort.
    choice = frozen_choice(ctx, job, harness=record.harness, fallback=record)
    now = build_launch(ctx.config, choice, session_id=record.session_id, prompt=text, resume=True)
    moved = drift(record, now)
    if moved is not None:
        ctx.runner.kill(record.tmux_session, owner=record.work_item_id)
        return _respawn(ctx, job, record, text, reason="drift", moved=moved, launch=now)
    if payload.phase and record.spec_id:
        # The App's record of where the item stands wins over whatever the agent wrote.
        write_frozen_state(
            Path(record.checkout), record.spec_id, payload.frozen, payload.phase, payload.gates
        )
    screen = screens_of(record.harness).classify(shown)
    if screen is not None:
        report_stall(ctx.registry, ctx.events.emit, record, screen, shown)
        raise JobFailed(f"the session waits at a {screen.value} screen; the comment was not pasted")
    if record.pending:
        _paste_pending(ctx, record)
    before = None if record.pending else shown  # a pending paste changed the pane since
    name, harness = record.tmux_session, record.harness
    sent = submit(ctx.runner, name, record.work_item_id, text, harness, shown=before)
    watch_unsent(ctx.registry, ctx.events.emit, record, text, sent, first=False)
    _delivered(ctx, job, record.session_id, respawned=False, removed=sent.removed)
    return {"delivered": True, "respawned": False, "session_id": record.session_id}


def _paste_pending(ctx: SpawnerContext, record: SessionRecord) -> None:
    """The session's first message, still pending, goes in before any follow-up."""
    waited = await_input(ctx.runner, record, ctx.ready_timeout)
    if waited.state is not Readiness.READY:
        raise JobFailed(
            f"the session is not ready for input ({waited.state.value}); the comment was not pasted"
        )
    emit = ctx.events.emit
    paste_first_message(
        ctx.runner, ctx.registry, emit, record, record.pending, late=True, shown=waited.text
    )


def _delivered(
    ctx: SpawnerContext, job: ClaimedJob, session_id: str, *, respawned: bool, removed: int = 0
) -> None:
    """`session.delivered`; `removed_controls` says how many control characters the text lost
    on its way into the pane (never there when none did)."""
    payload = job.payload
    assert isinstance(payload, DeliverJob)
    note = {"removed_controls": removed} if removed else {}
    ctx.events.emit(
        "session.delivered",
        job.work_item_id,
        session_id=session_id,
        respawned=respawned,
        source=payload.source,
        ref=payload.ref,
        comment_id=payload.comment_id,
        job=job.id,
        **note,
    )


def _respawn(
    ctx: SpawnerContext,
    job: ClaimedJob,
    record: SessionRecord | None,
    text: str,
    *,
    reason: str,
    moved: Drift | None = None,
    launch: Launch | None = None,
) -> dict[str, Any]:
    """Relaunch a work item's session with `text` as its first message, resuming when it
    can. A first message the old session never got goes in front of `text`."""
    payload = job.payload
    spec_id = payload.spec_id or (record.spec_id if record else "")
    made = checkout_for(ctx, job)
    checkout = made.path
    if not made.reused:  # cloned now (its tree was gone, or refused): set up as a spawn's
        run_setup(ctx, job.work_item_id, payload.repo, checkout, fresh=True)
    facts: dict[str, Any] = {"reason": reason}
    if moved is not None:
        facts.update(old=moved.old, new=moved.new)
    if record is not None and record.pending:
        text = f"{record.pending}\n\n{text}"
    if record is None and read_checkout_state(checkout, spec_id) is None:
        write_frozen_state(checkout, spec_id, payload.frozen, payload.phase, payload.gates)
    if launch is None:
        harness = record.harness if record else None
        choice = frozen_choice(ctx, job, harness=harness, fallback=record)
        session_id = record.session_id if record else str(uuid.uuid4())
        prompt = text if record is not None else fresh_prompt(job, spec_id, text)
        launch = build_launch(
            ctx.config, choice, session_id=session_id, prompt=prompt, resume=record is not None
        )
    else:
        launch = replace(launch, prompt=text)
    started = start_session(ctx, job, checkout, launch, event="session.respawned", **facts)
    if launch.resumed and started.waited.state is Readiness.EXITED:
        ctx.events.emit(
            "session.resume_failed",
            job.work_item_id,
            level="warning",
            session_id=launch.session_id,
            last_lines=started.waited.last_lines,
        )
        fresh = build_launch(
            ctx.config,
            Choice(launch.harness, launch.model, launch.effort),
            session_id=str(uuid.uuid4()),
            prompt=fresh_prompt(job, spec_id, text),
        )
        started = start_session(
            ctx, job, checkout, fresh, event="session.respawned", reason="resume failed"
        )
    session_id = started.record.session_id
    if started.waited.state is not Readiness.READY:
        return {"delivered": False, "respawned": True, "pending": True, "session_id": session_id}
    _delivered(ctx, job, session_id, respawned=True)
    return {"delivered": True, "respawned": True, "session_id": session_id}


def _refuse_then_wait(ctx: SpawnerContext, job: ClaimedJob, payload: StopJob) -> None:
    """A budget stop: the gateway refuses the item's model requests from now on, and the
    session is given until it meets that refusal (its turn then ends) or `budget_grace`
    seconds pass, so a commit or push it is running finishes before it is stopped."""
    if ctx.models is None:
        return
    gateway = ctx.models.gateway
    gateway.refuse_spent(job.work_item_id, payload.note)
    record = ctx.registry.get(job.work_item_id)
    deadline = time.monotonic() + ctx.budget_grace
    while time.monotonic() < deadline and _alive(ctx, record):
        if gateway.spent_refusals(job.work_item_id):
            break
        time.sleep(0.2)
    # Refused: the harness records the refusal as its turn's end (a few seconds at most)
    # before it is stopped. What the session wrote only ends this wait early: it gains nothing.
    if record is None:
        return
    home = session_home(ctx.config, ctx.home, ctx.state_dir, record.work_item_id)
    shown = time.monotonic() + SHOW_REFUSAL
    while time.monotonic() < min(deadline, shown) and _alive(ctx, record):
        if SPENT_WORDS in transcript_tail(home, record.session_id):
            return
        time.sleep(0.2)


def stop(ctx: SpawnerContext, job: ClaimedJob, payload: StopJob) -> dict[str, Any]:
    if payload.reason == BUDGET_REASON:
        _refuse_then_wait(ctx, job, payload)
    record = ctx.registry.get(job.work_item_id)
    counted = session_over(ctx, job.work_item_id)  # pass, sockets, cgroup die first
    if record is None:
        return {"stopped": True, "found": False}
    ctx.runner.kill(record.tmux_session, owner=record.work_item_id)
    ctx.registry.update(job.work_item_id, state=SessionState.STOPPED.value)
    if ctx.models is None:  # no gateway counted it: its transcript says what it used
        report_ended(ctx.config, ctx.home, ctx.state_dir, ctx.events.emit, record)
    left = describe_session(ctx.config, ctx.home, ctx.state_dir, ctx.env)(record)
    ctx.events.emit(
        "session.stopped",
        job.work_item_id,
        session_id=record.session_id,
        reason=payload.reason,
        was_live=record.live,
        **counted,
        **left,
    )
    return {"stopped": True, "found": True}


def _dispatch(ctx: SpawnerContext, job: ClaimedJob) -> dict[str, Any]:
    payload = job.payload
    if isinstance(payload, SpawnJob):
        return spawn(ctx, job, payload)
    if isinstance(payload, DeliverJob):
        return deliver(ctx, job, payload)
    if isinstance(payload, AnswerJob):
        return answer(ctx, job, payload)
    if isinstance(payload, AllowJob):
        return allow_host(ctx, payload.work_item_id, payload.host, payload.port, payload.author)
    return stop(ctx, job, payload)


def run_job(ctx: SpawnerContext, job: ClaimedJob) -> tuple[bool, dict[str, Any], str | None]:
    """Run one job under its work item's lock: (ok, result, error)."""
    with ctx.locks.hold(job.work_item_id):
        try:
            return True, _dispatch(ctx, job), None
        except (
            JobFailed,
            LaunchRefused,
            SetupFailed,
            AnswerFailed,
            CheckoutError,
            SandboxError,
            TmuxError,
            OSError,
            ValueError,
        ) as exc:
            error = str(exc)
            ctx.events.emit(
                "session.job_failed",
                job.work_item_id,
                level="warning",
                kind=job.kind,
                error=error,
                job=job.id,
            )
            return False, {}, error
