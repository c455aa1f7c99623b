"""A work item's budget, as rules (pure): what it may spend, what it has spent, how far along
that is, and the words of `the-loop budget +<amount>`.

Limits are `routing.budget` (tokens, usd, minutes; each optional) plus whatever authorized
people added on the issue. Spent is measured from the start of the budget's run: tokens are
input, output, cache-read and cache-write summed (what the usage line calls tokens), dollars
are those tokens at the item's model price (unknown when its model has none, and then never
counted against a usd limit), minutes are its sessions' wall-clock time, launch to end (the
time an item waits between sessions is not counted).
The share that matters is the largest of the three: at `WARN_AT` the session is told to wrap
up, at 1 it is stopped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from app.config import Budget

WARN_AT = 0.9
KINDS = ("tokens", "usd", "minutes")
TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
# What one raise may add: beyond these a typo, not a budget.
MAX_RAISE = {"tokens": 10**10, "usd": 100_000.0, "minutes": 60.0 * 24 * 30}
_AMOUNT_RE = re.compile(
    r"^\+\s*(?P<usd>\$)?(?P<number>\d{1,12}(?:\.\d{1,4})?)\s*(?P<unit>[A-Za-z]*)$"
)
_TOKEN_UNITS = {"": 1, "k": 1000, "K": 1000, "M": 1_000_000}
_MINUTE_UNITS = frozenset({"min", "mins", "minute", "minutes"})
SYNTAX = "`+200k` (tokens; `k` thousands, `M` millions), `+$5` (dollars) or `+30min` (minutes)"


class BudgetLevel(IntEnum):
    """How far a run is into its budget."""

    UNDER = 0
    WARN = 1  # past `WARN_AT` of some limit: time to commit, push and stop
    SPENT = 2  # some limit reached: the model is refused and the session stopped


@dataclass(frozen=True)
class Limits:
    tokens: int | None = None
    usd: float | None = None
    minutes: float | None = None

    @property
    def empty(self) -> bool:
        return self.tokens is None and self.usd is None and self.minutes is None


@dataclass(frozen=True)
class Spent:
    tokens: int = 0
    usd: float | None = None  # None: the model has no price
    minutes: float = 0.0


@dataclass(frozen=True)
class Raise:
    """`the-loop budget +<amount>`: `amount` more of `kind`."""

    kind: str
    amount: float

    @property
    def words(self) -> str:
        return amount_text(self.kind, self.amount)


def limits_of(configured: Budget, extra: Mapping[str, Any]) -> Limits:
    """The configured limits plus what was added on the issue; only a configured limit can
    be raised (`extra` of another kind is ignored)."""

    def plus(kind: str, base: float | None) -> float | None:
        added = extra.get(kind)
        if base is None:
            return None
        return base + (added if isinstance(added, int | float) and added > 0 else 0)

    tokens = plus("tokens", configured.tokens)
    return Limits(
        tokens=int(tokens) if tokens is not None else None,
        usd=plus("usd", configured.usd),
        minutes=plus("minutes", configured.minutes),
    )


def tokens_in(counts: Mapping[str, int]) -> int:
    """Every token a run's counts hold, cache included."""
    return sum(int(counts.get(name, 0) or 0) for name in TOKEN_FIELDS)


def since_base(counts: Mapping[str, int], base: Mapping[str, Any]) -> dict[str, int]:
    """`counts` less what was counted before the run began (`base`), never below zero."""
    out: dict[str, int] = {}
    for name, value in counts.items():
        before = base.get(name, 0)
        before = before if isinstance(before, int) and not isinstance(before, bool) else 0
        out[name] = max(0, value - before)
    return out


def shares(limits: Limits, spent: Spent) -> dict[str, float]:
    """Each limited kind's share spent (1.0 = the whole limit); a usd limit with no known
    cost is left out."""
    found: dict[str, float] = {}
    if limits.tokens is not None:
        found["tokens"] = spent.tokens / limits.tokens
    if limits.usd is not None and spent.usd is not None:
        found["usd"] = spent.usd / limits.usd
    if limits.minutes is not None:
        found["minutes"] = spent.minutes / limits.minutes
    return found


def level_of(limits: Limits, spent: Spent) -> tuple[BudgetLevel, str]:
    """How far the run is, and which limit says so ("" while under every one)."""
    found = shares(limits, spent)
    if not found:
        return BudgetLevel.UNDER, ""
    kind, share = max(found.items(), key=lambda pair: pair[1])
    if share >= 1:
        return BudgetLevel.SPENT, kind
    if share >= WARN_AT:
        return BudgetLevel.WARN, kind
    return BudgetLevel.UNDER, ""


def _tokens(count: float) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.3g}M"
    if count >= 1000:
        return f"{count / 1000:.3g}k"
    return f"{count:.0f}"


def amount_text(kind: str, amount: float) -> str:
    """`200k tokens`, `$5.00`, `30 min`."""
    if kind == "tokens":
        return f"{_tokens(amount)} tokens"
    if kind == "usd":
        return f"${amount:.2f}"
    return f"{amount:.0f} min"


def budget_text(limits: Limits, spent: Spent) -> str:
    """`tokens 9.2k of 10k · $0.41 of $2.00 · 12 of 30 min` (the limited kinds only)."""
    parts: list[str] = []
    if limits.tokens is not None:
        parts.append(f"tokens {_tokens(spent.tokens)} of {_tokens(limits.tokens)}")
    if limits.usd is not None:
        cost = f"${spent.usd:.2f}" if spent.usd is not None else "cost unknown"
        parts.append(f"{cost} of ${limits.usd:.2f}")
    if limits.minutes is not None:
        parts.append(f"{spent.minutes:.0f} of {limits.minutes:.0f} min")
    return " · ".join(parts)


def parse_raise(body: str, keyword: str) -> Raise | str:
    """The raise a `<keyword> +<amount>` comment asks for, or why it names none (pure).

    Tokens: `+50000`, `+200k`, `+1.5M`; dollars: `+$5`, `+$2.50`; minutes: `+30min`. A lone
    `m` is refused: it could mean minutes or millions.
    """
    text = body.lstrip("\ufeff \t\r\n")
    rest = text[len(keyword.strip()) :].strip().splitlines()
    words = rest[0].strip() if rest else ""
    match = _AMOUNT_RE.match(words)
    if match is None:
        return f"say how much to add: {SYNTAX}"
    number, unit, usd = float(match["number"]), match["unit"], bool(match["usd"])
    if usd:
        if unit:
            return f"`{words}`: a dollar amount takes no unit; {SYNTAX}"
        kind, amount = "usd", number
    elif unit.lower() in _MINUTE_UNITS:
        kind, amount = "minutes", number
    elif unit in _TOKEN_UNITS:
        kind, amount = "tokens", float(round(number * _TOKEN_UNITS[unit]))
    else:
        return f"`{words}`: unknown unit `{unit}`; {SYNTAX}"
    if amount <= 0:
        return "the amount must be more than zero"
    if amount > MAX_RAISE[kind]:
        return f"{amount_text(kind, amount)} is more than one raise may add"
    return Raise(kind, amount)


def asks_lift(body: str, keyword: str) -> bool:
    """Whether a `<keyword>` comment says nothing more (or `lift`): it lifts the spend caps
    for the day rather than adding to the item's budget."""
    text = body.lstrip("\ufeff \t\r\n")
    if text[: len(keyword.strip())].lower() != keyword.strip().lower():
        return False
    rest = text[len(keyword.strip()) :].strip().splitlines()
    words = rest[0].strip().lower() if rest else ""
    return words in ("", "lift")
