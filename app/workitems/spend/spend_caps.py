"""Spend caps across work items (`routing.budget.daily` / `monthly`), their one owner: the
ledger of what each repository spent per UTC day, how far every cap is, and its lift.

Every `session.usage` report adds its tokens and dollars (at the item's model price; an item
with no price adds no dollars) to its repository's row for the UTC day (`record_spend`). A
cap counts its window's rows: the installation's caps every repository of it, a repository
cap that repository's. A cap reached holds the repository's new executes in the one line of
waiting items (`held_repositories`, read by the claim; `waiting_words`, shown on the
progress comment) until its window resets or an authorized `the-loop budget` on an item
lifts the caps of that item's repository for the rest of the UTC day (`lift`). Running
sessions are warned and stopped by `spending.py`, from `cap_level` here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import Budget, Cap, OperatorConfig
from app.store import Job, JobKind, JobState, SpendDay, WorkItem, WorkItemStatus
from app.workitems.flow.capacity import HELD_KEY, hold_line, waiting_items
from app.workitems.spend.budgets import BudgetLevel, Limits, Spent, budget_text, level_of, tokens_in
from app.workitems.spend.spend_windows import WINDOWS, Window, day_key, first_day, reset_text
from app.workitems.spend.usage import priced

INSTALLATION = "installation"
REPOSITORY = "repository"
MICROS = 1_000_000


@dataclass(frozen=True)
class CapStanding:
    """One cap in force for a repository: its window and scope, its limits, what was spent."""

    window: Window
    scope: str  # INSTALLATION or REPOSITORY
    limits: Limits
    spent: Spent

    @property
    def level(self) -> tuple[BudgetLevel, str]:
        return level_of(self.limits, self.spent)

    @property
    def name(self) -> str:
        """`daily budget` (the installation's) or `daily budget of this repository`."""
        of = "" if self.scope == INSTALLATION else " of this repository"
        return f"{self.window.value} budget{of}"

    def words(self) -> str:
        """`daily budget: tokens 9.1M of 10M · $41.00 of $50.00`."""
        return f"{self.name}: {budget_text(self.limits, self.spent)}"


def caps_of(budget: Budget) -> Iterator[tuple[Window, str, Cap]]:
    """The caps the config sets (pure): each window's installation and repository cap."""
    for window in WINDOWS:
        caps = budget.daily if window is Window.DAILY else budget.monthly
        for scope, cap in ((INSTALLATION, caps.installation), (REPOSITORY, caps.repository)):
            if not cap.empty:
                yield window, scope, cap


def any_cap(config: OperatorConfig) -> bool:
    return next(caps_of(config.routing.budget), None) is not None


def _repo(name: str) -> str:
    return name.lower()[:256]


def record_spend(
    config: OperatorConfig,
    session: Session,
    item: WorkItem,
    counts: dict[str, int],
    now: datetime,
) -> None:
    """Add one usage report of `item` to its repository's row for the UTC day (inside the
    caller's transaction; one statement, so two replicas adding at once both count)."""
    tokens = tokens_in(counts)
    frozen = item.frozen if isinstance(item.frozen, dict) else {}
    cost = priced(config, str(frozen.get("model") or ""), counts)
    micros = round(cost * MICROS) if cost is not None else 0
    if not tokens and not micros:
        return
    key = (int(item.installation_id or 0), _repo(item.repo_full_name), day_key(now))
    where = (
        (SpendDay.installation_id == key[0])
        & (SpendDay.repo_full_name == key[1])
        & (SpendDay.day == key[2])
    )
    add = {"tokens": SpendDay.tokens + tokens, "usd_micros": SpendDay.usd_micros + micros}
    if getattr(session.execute(update(SpendDay).where(where).values(**add)), "rowcount", 0):
        return
    try:
        with session.begin_nested():
            session.add(
                SpendDay(
                    installation_id=key[0],
                    repo_full_name=key[1],
                    day=key[2],
                    tokens=tokens,
                    usd_micros=micros,
                )
            )
    except IntegrityError:  # another writer made the row first: add to it
        session.execute(update(SpendDay).where(where).values(**add))


def _spent(session: Session, installation_id: int, repo: str | None, since: str) -> Spent:
    query = select(func.sum(SpendDay.tokens), func.sum(SpendDay.usd_micros)).where(
        SpendDay.installation_id == installation_id, SpendDay.day >= since
    )
    if repo is not None:
        query = query.where(SpendDay.repo_full_name == repo)
    tokens, micros = session.execute(query).one()
    return Spent(tokens=int(tokens or 0), usd=int(micros or 0) / MICROS)


def standing(
    config: OperatorConfig, session: Session, installation_id: int | None, repo: str, now: datetime
) -> list[CapStanding]:
    """Every cap in force for `repo` of `installation_id`, with what its window spent."""
    out: list[CapStanding] = []
    inst, name = int(installation_id or 0), _repo(repo)
    for window, scope, cap in caps_of(config.routing.budget):
        since = first_day(window, now)
        spent = _spent(session, inst, None if scope == INSTALLATION else name, since)
        out.append(CapStanding(window, scope, Limits(tokens=cap.tokens, usd=cap.usd), spent))
    return out


def lifted_by(
    session: Session, installation_id: int | None, repo: str, now: datetime
) -> str | None:
    """Who lifted the caps of `repo` for the UTC day `now` is in, if anyone did."""
    row = session.get(SpendDay, (int(installation_id or 0), _repo(repo), day_key(now)))
    return row.lifted_by if row is not None and row.lifted_by else None


def cap_level(
    config: OperatorConfig, session: Session, installation_id: int | None, repo: str, now: datetime
) -> tuple[BudgetLevel, CapStanding | None]:
    """How far the furthest cap of `repo` is (UNDER when none is set or they are lifted for
    the day), and that cap."""
    if not any_cap(config) or lifted_by(session, installation_id, repo, now):
        return BudgetLevel.UNDER, None
    found = [(cap.level[0], cap) for cap in standing(config, session, installation_id, repo, now)]
    level, cap = max(found, key=lambda pair: pair[0], default=(BudgetLevel.UNDER, None))
    return level, cap if level > BudgetLevel.UNDER else None


def waiting_words(
    config: OperatorConfig, session: Session, installation_id: int | None, repo: str, now: datetime
) -> str:
    """`daily budget reached (resets 00:00 UTC)` while a cap holds `repo`'s executes, else
    ""."""
    level, cap = cap_level(config, session, installation_id, repo, now)
    if level is not BudgetLevel.SPENT or cap is None:
        return ""
    return f"{cap.name} reached ({reset_text(cap.window, now)})"


def held_repositories(config: OperatorConfig, session: Session, now: datetime) -> list[str]:
    """The repositories (lower case) whose spawns, and follow-ups that would relaunch an
    ended session, wait now because a cap holds them: every repository that has such a job
    in line is weighed."""
    if not any_cap(config):
        return []
    waiting = session.execute(
        select(WorkItem.installation_id, WorkItem.repo_full_name)
        .distinct()
        .join(Job, Job.work_item_id == WorkItem.id)
        .where(
            Job.state == JobState.QUEUED,
            Job.kind.in_([JobKind.SPAWN, JobKind.DELIVER]),
            WorkItem.state.in_([WorkItemStatus.FROZEN, WorkItemStatus.EXITED]),
        )
    ).all()
    held = {
        _repo(repo)
        for installation_id, repo in waiting
        if cap_level(config, session, installation_id, repo, now)[0] is BudgetLevel.SPENT
    }
    return sorted(held)


def lift(session: Session, installation_id: int | None, repo: str, by: str, now: datetime) -> bool:
    """Lift the caps of `repo` for the rest of the UTC day, recording who; False when they
    were lifted already."""
    key = (int(installation_id or 0), _repo(repo), day_key(now))
    row = session.get(SpendDay, key, with_for_update=True)
    if row is None:
        try:
            with session.begin_nested():
                fresh = SpendDay(
                    installation_id=key[0],
                    repo_full_name=key[1],
                    day=key[2],
                    tokens=0,
                    usd_micros=0,
                )
                session.add(fresh)
        except IntegrityError:  # a usage report made the day's row first
            pass
        row = session.get(SpendDay, key, with_for_update=True, populate_existing=True)
    if row is None or row.lifted_by:
        return False
    row.lifted_by = by[:256]
    row.lifted_at = now
    session.flush()
    return True


def mark_held(config: OperatorConfig, session: Session, now: datetime) -> None:
    """Write on every waiting item why a cap holds it (`HELD_KEY` in its session facts, shown
    on its progress comment), or clear it (inside the caller's transaction; the line is
    held first, as `capacity.hold_line` orders)."""
    if not any_cap(config):
        return
    hold_line(session)
    words: dict[tuple[int | None, str], str] = {}
    for item in waiting_items(session):
        scope = (item.installation_id, _repo(item.repo_full_name))
        if scope not in words:
            words[scope] = waiting_words(config, session, item.installation_id, scope[1], now)
        facts = dict(item.session or {})
        if facts.get(HELD_KEY, "") == words[scope]:
            continue
        if words[scope]:
            facts[HELD_KEY] = words[scope]
        else:
            facts.pop(HELD_KEY, None)
        item.session = facts


@dataclass(frozen=True)
class CapSpend:
    """One cap against what its window spent, for `/metrics` and the status page."""

    window: Window
    scope: str
    installation_id: int
    repository: str  # "" for an installation's cap
    kind: str  # tokens | usd
    limit: float
    spent: float
    lifted_by: str  # "" unless lifted for the day (a repository's caps)


def spend_report(config: OperatorConfig, session: Session, now: datetime) -> list[CapSpend]:
    """Every cap in force, against what each installation and repository that spent this
    month spent in its window (a cap with nothing spent yet shows no row)."""
    caps = list(caps_of(config.routing.budget))
    if not caps:
        return []
    rows = session.execute(
        select(
            SpendDay.installation_id,
            SpendDay.repo_full_name,
            SpendDay.day,
            SpendDay.tokens,
            SpendDay.usd_micros,
            SpendDay.lifted_by,
        ).where(SpendDay.day >= first_day(Window.MONTHLY, now))
    ).all()
    today = day_key(now)
    lifted = {(i, r): by for i, r, d, _, _, by in rows if d == today and by}
    sums: dict[tuple[Window, int, str], list[int]] = {}
    for inst, repo, day, tokens, micros, _ in rows:
        for window in WINDOWS:
            if day < first_day(window, now):
                continue
            for key in ((window, inst, ""), (window, inst, repo)):
                total = sums.setdefault(key, [0, 0])
                total[0] += int(tokens or 0)
                total[1] += int(micros or 0)
    out: list[CapSpend] = []
    for (window, inst, repo), (tokens, micros) in sorted(sums.items()):
        for cap_window, scope, cap in caps:
            if cap_window is not window or (scope == REPOSITORY) != bool(repo):
                continue
            by = lifted.get((inst, repo), "") if repo else ""
            for kind, limit, spent in (
                ("tokens", cap.tokens, float(tokens)),
                ("usd", cap.usd, micros / MICROS),
            ):
                if limit is not None:
                    out.append(CapSpend(window, scope, inst, repo, kind, limit, spent, by))
    return out
