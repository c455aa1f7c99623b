"""A job's checkout, made ready for its session: cloned (or reused), `origin` at the App's
git gateway, on the job's branch.

A GitHub token is asked of the App only when there is a clone to make — a reused checkout,
a follow-up pasted into a live session, never needs one — and it lives only for that clone
(the App revokes it when the job ends). Git on the tree runs through one `HostGit` per
launch: confined in a sandbox of its own unless sessions themselves run unconfined.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from app.config import SandboxMode
from app.retry import Backoff
from app.spawner.appclient import AppError, AppUnavailable, ClaimedJob, NotHeld
from app.spawner.confine.isolation import trusted_by_variable
from app.spawner.steps.netlaunch import session_app_url
from app.spawner.workspace.checkout import Checkout, CheckoutError, prepare_checkout, write_askpass
from app.spawner.workspace.hostgit import HostGit
from app.spawner.workspace.workbranch import app_trust, configure_push, gateway_remote, switch_to

if TYPE_CHECKING:
    from app.spawner.context import SpawnerContext


ASK_ATTEMPTS = 4  # asks for a clone's token while the App or GitHub is briefly away


def ask_clone_token(ctx: SpawnerContext, job: ClaimedJob) -> str | None:
    """The token the clone for `job` authenticates with, asked of the App now (None: the
    App has no GitHub identity, or this spawner talks to no App). The App being away or
    GitHub not minting (`AppUnavailable`) is asked again, ASK_ATTEMPTS times in all with
    growing pauses; a refusal, or the last failure, fails the job: without a token a private
    repository cannot be cloned. `NotHeld` (the job's lease lapsed, or another spawner holds
    it) goes up as it is: the job is no longer this spawner's to clone for, nor to fail."""
    if ctx.ask_token is None:
        return None
    backoff, attempt = Backoff(first=0.5, cap=4.0), 1
    while True:
        try:
            return ctx.ask_token(job.id)
        except NotHeld:
            raise
        except AppUnavailable as exc:
            if attempt == ASK_ATTEMPTS:
                raise CheckoutError(f"no token to clone {job.repo} with: {exc}") from exc
        except AppError as exc:
            raise CheckoutError(f"the App gave no token to clone {job.repo} with: {exc}") from exc
        time.sleep(backoff.next())
        attempt += 1


def checkout_for(ctx: SpawnerContext, job: ClaimedJob) -> Checkout:
    """Clone (or reuse) the work item's tree; reports `workspace.cloned` on a fresh clone
    and `workspace.recloned` (a warning, with the reason) when the tree there was refused."""
    payload = job.payload
    git = HostGit(ctx.env, confined=ctx.config.routing.sandbox.resolved is not SandboxMode.NONE)
    asked: list[str] = []

    def ask() -> str | None:
        token = ask_clone_token(ctx, job)
        if token:
            asked.append(token)
        return token

    try:
        checkout = prepare_checkout(
            ctx.workspace_root,
            job.work_item_id,
            payload.clone_url,
            ask_token=ask,
            askpass=write_askpass(ctx.state_dir),
            env=ctx.env,
            git=git,
        )
    except (CheckoutError, OSError) as exc:  # what the job's failure says never shows the token
        said = str(exc)
        for token in asked:
            said = said.replace(token, "[token]")
        raise CheckoutError(said) from None
    if checkout.refused:
        ctx.events.emit(
            "workspace.recloned",
            job.work_item_id,
            level="warning",
            checkout=str(checkout.path),
            reason=checkout.refused,
        )
    elif not checkout.reused:
        ctx.events.emit("workspace.cloned", job.work_item_id, checkout=str(checkout.path))
    on_work_branch(ctx, job, checkout, git)
    return checkout


def on_work_branch(ctx: SpawnerContext, job: ClaimedJob, checkout: Checkout, git: HostGit) -> None:
    """`origin` at the App's git gateway with the push helper (and the App's CA, when the
    spawner trusts a private one) in the checkout's config, and the checkout on the job's
    branch (a new one cut from the frozen base branch, when the execute named one). A
    reused checkout that cannot switch (local changes in the way) is left where it is."""
    app_url = session_app_url(ctx)  # as the session sees it
    trust = app_trust(app_url, trusted_by_variable(ctx.env))
    configure_push(checkout.path, git, gateway_remote(app_url, job.payload.repo), trust=trust)
    branch = job.payload.branch
    if not branch:
        return
    try:
        how = switch_to(checkout.path, branch, git, job.payload.frozen.base)
    except CheckoutError as exc:
        if not checkout.reused:
            raise
        ctx.events.emit(
            "workspace.branch_failed",
            job.work_item_id,
            level="warning",
            branch=branch,
            error=str(exc),
        )
        return
    if how != "current":
        ctx.events.emit("workspace.branch", job.work_item_id, branch=branch, how=how)
