"""Keep the installations and repositories tables current from `installation*` deliveries."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete

from app.github.services import HandlerContext
from app.store import Installation, Repository


def _upsert_repositories(ctx: HandlerContext, installation_id: int, repos: list[Any]) -> None:
    for repo in repos:
        ctx.session.merge(
            Repository(
                id=int(repo["id"]),
                installation_id=installation_id,
                full_name=repo["full_name"],
                private=bool(repo.get("private")),
            )
        )


def record_installation(ctx: HandlerContext) -> None:
    """Remember an installation and its repositories (created, unsuspend, new permissions)."""
    inst = ctx.payload["installation"]
    account = inst.get("account") or {}
    ctx.session.merge(
        Installation(
            id=int(inst["id"]),
            account_login=account.get("login", ""),
            account_type=account.get("type"),
            repository_selection=inst.get("repository_selection"),
            suspended=ctx.action == "suspend",
        )
    )
    ctx.session.flush()
    _upsert_repositories(ctx, int(inst["id"]), ctx.payload.get("repositories") or [])
    ctx.emit("installation.recorded", installation=int(inst["id"]), action=ctx.action)


def forget_installation(ctx: HandlerContext) -> None:
    """`installation.deleted`: the App no longer acts on these repositories."""
    inst_id = int(ctx.payload["installation"]["id"])
    ctx.session.execute(delete(Repository).where(Repository.installation_id == inst_id))
    ctx.session.execute(delete(Installation).where(Installation.id == inst_id))
    ctx.emit("installation.removed", installation=inst_id)


def update_repositories(ctx: HandlerContext) -> None:
    """`installation_repositories.added|removed`: follow the repositories granted."""
    inst = ctx.payload["installation"]
    inst_id = int(inst["id"])
    if ctx.session.get(Installation, inst_id) is None:
        account = inst.get("account") or {}
        ctx.session.add(
            Installation(
                id=inst_id,
                account_login=account.get("login", ""),
                account_type=account.get("type"),
                repository_selection=ctx.payload.get("repository_selection"),
            )
        )
        ctx.session.flush()
    _upsert_repositories(ctx, inst_id, ctx.payload.get("repositories_added") or [])
    removed = [int(r["id"]) for r in ctx.payload.get("repositories_removed") or []]
    if removed:
        ctx.session.execute(delete(Repository).where(Repository.id.in_(removed)))
    ctx.emit(
        "installation.repositories",
        installation=inst_id,
        added=[r["full_name"] for r in ctx.payload.get("repositories_added") or []],
        removed=[r["full_name"] for r in ctx.payload.get("repositories_removed") or []],
    )
