"""What the gate may offer, as the store says: registered spawners' harnesses, refused rows."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.config.offered_harnesses import HOSTING_ADAPTERS
from app.store.engines import make_engine, migrate
from app.store.tables import ModelVerdict, Spawner
from app.workitems.flow.offers import refused_choices, spawner_hosts


def test_offers_follow_registered_spawners_and_verdicts(database_url):
    engine = make_engine(database_url)
    migrate(engine)
    try:
        with Session(engine) as session, session.begin():
            # A token minted but never used registers nothing: the built-in adapters apply.
            session.add(Spawner(name="minted", token_hash="h1", harnesses=[]))
            session.flush()
            assert spawner_hosts(session) == HOSTING_ADAPTERS
            session.add(
                Spawner(
                    name="devbox",
                    token_hash="h2",
                    serves=["*"],
                    harnesses=["claude", "codex", "--evil"],
                )
            )
            session.add(ModelVerdict(token="model-opus", verdict="refused"))
            session.add(ModelVerdict(token="model-sonnet", verdict="ok"))
            session.flush()
            assert spawner_hosts(session) == {"claude", "codex"}
            assert refused_choices(session) == {"model-opus"}
    finally:
        engine.dispose()
