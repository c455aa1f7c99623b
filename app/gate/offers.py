"""What the store says about the offer: the harnesses spawners can host, refused choices.

These are the gate's only reads besides the work item itself; `current_offer` combines them
with the operator config through the pure `build_offer`.
"""

from __future__ import annotations

from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session

from app.config import NAME_RE, OperatorConfig
from app.gate.checklist import Offer, build_offer
from app.harnesses import HOSTING_ADAPTERS
from app.store.models import Spawner

# The seam for `the-loop models check` verdicts: a table with one row per probed choice,
# `token` (`model-<name>` / `effort-<level>`) and `verdict` (`ok` / `refused` / `unknown`).
# Until that table exists nothing is hidden.
VERDICTS_TABLE = "model_verdicts"


def spawner_hosts(session: Session) -> frozenset[str]:
    """The union of harnesses registered spawners can host; the built-in adapters when none
    is registered. Names that are not valid harness names are ignored."""
    reported = session.scalars(select(Spawner.harnesses)).all()
    if not reported:
        return HOSTING_ADAPTERS
    return frozenset(
        name
        for names in reported
        for name in (names or [])
        if isinstance(name, str) and NAME_RE.match(name)
    )


def refused_choices(session: Session) -> set[str]:
    """Row tokens `models check` refused (`model-opus`, `effort-max`); empty without verdicts."""
    connection = session.connection()
    if not inspect(connection).has_table(VERDICTS_TABLE):
        return set()
    rows = connection.execute(
        text(f"SELECT token FROM {VERDICTS_TABLE} WHERE verdict = :verdict"),
        {"verdict": "refused"},
    )
    return {str(token) for (token,) in rows}


def current_offer(session: Session, config: OperatorConfig) -> Offer:
    """The offer as of now: declared ∩ hostable harnesses, minus refused models and efforts."""
    return build_offer(config, spawner_hosts(session), refused_choices(session))
