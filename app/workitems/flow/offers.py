"""What the store says about the offer: the harnesses spawners can host, refused choices.

These are the gate's only reads besides the work item itself; `current_offer` combines them
with the operator config through the pure `build_offer`.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import HOSTING_ADAPTERS, NAME_RE, OperatorConfig
from app.gate import Offer, build_offer
from app.store import ModelVerdict, Spawner


def spawner_hosts(session: Session) -> frozenset[str]:
    """The union of harnesses registered spawners can host; the built-in adapters when none
    is registered yet (a token minted but never used registers nothing). Names that are not
    valid harness names are ignored."""
    reported = session.scalars(select(Spawner.harnesses).where(Spawner.serves.is_not(None))).all()
    if not reported:
        return HOSTING_ADAPTERS
    return frozenset(
        name
        for names in reported
        for name in (names or [])
        if isinstance(name, str) and NAME_RE.match(name)
    )


def refused_choices(session: Session) -> set[str]:
    """Row tokens `models check` refused (`model-opus`, `effort-max`)."""
    query = select(ModelVerdict.token).where(ModelVerdict.verdict == "refused")
    return set(session.scalars(query))


def current_offer(session: Session, config: OperatorConfig) -> Offer:
    """The offer as of now: declared ∩ hostable harnesses, minus refused models and efforts."""
    return build_offer(config, spawner_hosts(session), refused_choices(session))
