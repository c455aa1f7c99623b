"""Spawner and session credentials: hashed storage, authentication, repository scopes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session

from app.fleet.tokens import (
    SESSION_TOKEN_TTL,
    TokenError,
    authenticate,
    create_token,
    hosted_harnesses,
    mint_session_token,
    narrow,
    normalize_repositories,
    register,
    renew_session_tokens,
    revoke_session_tokens,
    revoke_spawner,
    serves,
)
from app.store.tables import Spawner

NOW = datetime.now(UTC)


def _every_stored_value(engine) -> str:
    """Every cell of every table, as text: what someone holding a database copy could read."""
    chunks = []
    with engine.connect() as conn:
        for table in inspect(engine).get_table_names():
            for row in conn.execute(text(f'SELECT * FROM "{table}"')):
                chunks.append(repr(tuple(row)))
    return "\n".join(chunks)


def test_spawner_token_is_stored_only_as_a_hash(engine, database_url):
    with Session(engine) as session, session.begin():
        token = create_token(session, "devbox-1", ["Octo/Repo"])
        session_token = mint_session_token(session, "github:octo/repo#1", NOW)
    stored = _every_stored_value(engine)
    assert token not in stored and token[5:] not in stored
    assert session_token not in stored and session_token[5:] not in stored
    if database_url.startswith("sqlite"):
        raw = b"".join(p.read_bytes() for p in _sqlite_files(database_url))
        assert token.encode() not in raw and session_token.encode() not in raw
    with Session(engine) as session:
        spawner = session.scalars(select(Spawner)).one()
        assert spawner.repositories == ["octo/repo"]
        assert spawner.name == "devbox-1"


def _sqlite_files(url: str):
    from pathlib import Path

    base = Path(url.split("///", 1)[1])
    return [p for p in (base, Path(f"{base}-wal")) if p.exists()]


def test_authenticate_tells_spawners_sessions_and_strangers_apart(engine):
    with Session(engine) as session, session.begin():
        token = create_token(session, "devbox", [])
        item_token = mint_session_token(session, "github:octo/repo#1", NOW)
    with Session(engine) as session:
        spawner = authenticate(session, f"Bearer {token}", NOW)
        assert spawner is not None and spawner.spawner is not None
        assert spawner.spawner.repositories == ["*"]
        assert spawner.may_act_on("github:other/thing#9", "other/thing")
        item = authenticate(session, f"Bearer {item_token}", NOW)
        assert item is not None and item.spawner is None
        assert item.may_act_on("github:octo/repo#1", "octo/repo")
        assert not item.may_act_on("github:octo/repo#2", "octo/repo")
        for header in (None, "", token, f"Basic {token}", "Bearer tlsp_nope", "Bearer x"):
            assert authenticate(session, header, NOW) is None


def test_revoked_session_tokens_stop_working(engine):
    with Session(engine) as session, session.begin():
        first = mint_session_token(session, "github:octo/repo#1", NOW)
        second = mint_session_token(session, "github:octo/repo#1", NOW)
        other = mint_session_token(session, "github:octo/repo#2", NOW)
    with Session(engine) as session, session.begin():
        assert revoke_session_tokens(session, "github:octo/repo#1") == 2
    with Session(engine) as session:
        assert authenticate(session, f"Bearer {first}", NOW) is None
        assert authenticate(session, f"Bearer {second}", NOW) is None
        assert authenticate(session, f"Bearer {other}", NOW) is not None


def test_session_tokens_expire_unless_renewed_while_the_session_lives(engine):
    item, other = "github:octo/repo#1", "github:octo/repo#2"
    with Session(engine) as session, session.begin():
        token = mint_session_token(session, item, NOW)
        idle = mint_session_token(session, other, NOW)
    almost, later = NOW + SESSION_TOKEN_TTL - timedelta(minutes=1), NOW + SESSION_TOKEN_TTL
    with Session(engine) as session, session.begin():
        assert authenticate(session, f"Bearer {token}", almost) is not None
        renew_session_tokens(session, [item], almost)  # e.g. a job handed out for the item
    with Session(engine) as session, session.begin():
        assert authenticate(session, f"Bearer {token}", later) is not None
        assert authenticate(session, f"Bearer {idle}", later) is None  # lapsed
        renew_session_tokens(session, [other], later + timedelta(seconds=1))
    with Session(engine) as session:
        assert authenticate(session, f"Bearer {idle}", later) is None  # stays lapsed
        gone = almost + SESSION_TOKEN_TTL
        assert authenticate(session, f"Bearer {token}", gone) is None


def test_a_revoked_spawner_token_stops_working(engine, settings_env, monkeypatch, capsys):
    from app.cli import main

    with Session(engine) as session, session.begin():
        gone = create_token(session, "devbox-1", [])
        kept = create_token(session, "devbox-2", [])
    for key, value in settings_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DATABASE_URL", str(engine.url.render_as_string(hide_password=False)))
    assert main(["spawner", "token", "revoke", "--name", "devbox-1"]) == 0
    assert main(["spawner", "token", "revoke", "--name", "devbox-1"]) == 1
    assert "no spawner named 'devbox-1'" in capsys.readouterr().err
    with Session(engine) as session:
        assert authenticate(session, f"Bearer {gone}", NOW) is None
        assert authenticate(session, f"Bearer {kept}", NOW) is not None
        assert revoke_spawner(session, "nobody") == 0


def test_bad_names_are_refused_with_the_offending_value():
    with pytest.raises(TokenError, match="owner/repo"):
        normalize_repositories(["not-a-repo"])
    with pytest.raises(TokenError, match="owner/repo"):
        normalize_repositories(["a/b; rm -rf /"])
    assert normalize_repositories(["A/B", "a/b", "c/d"]) == ["a/b", "c/d"]
    assert normalize_repositories(["a/b", "*"]) == ["*"]


def test_create_token_refuses_a_bad_spawner_name(engine):
    with Session(engine) as session, pytest.raises(TokenError, match="spawner name"):
        create_token(session, "--evil", [])


def test_registering_narrows_to_what_the_token_allows():
    assert narrow([], ["a/b"]) == ["a/b"]
    assert narrow(["*"], ["a/b"]) == ["a/b"]
    assert narrow(["a/b", "x/y"], ["a/b"]) == ["a/b"]
    assert narrow(["x/y"], ["*"]) == ["x/y"]
    assert narrow(["X/Y"], ["a/b"]) == []
    assert serves(["*"], "any/thing")
    assert serves(["a/b"], "A/B")
    assert not serves(["a/b"], "a/c")


def test_hosted_harnesses_come_from_registered_spawners_serving_the_repo(engine):
    now = datetime.now(UTC)
    with Session(engine) as session, session.begin():
        create_token(session, "unregistered", [])
        create_token(session, "one", ["a/b"])
        create_token(session, "two", [])
    with Session(engine) as session, session.begin():
        rows = {s.name: s for s in session.scalars(select(Spawner))}
        assert hosted_harnesses(session) == set()
        register(session, rows["one"], [], ["claude"], "1.0", now)
        register(session, rows["two"], ["c/d"], ["codex", "claude"], None, now)
    with Session(engine) as session:
        assert hosted_harnesses(session) == {"claude", "codex"}
        assert hosted_harnesses(session, "a/b") == {"claude"}
        assert hosted_harnesses(session, "c/d") == {"claude", "codex"}
        assert hosted_harnesses(session, "e/f") == set()


def test_register_refuses_a_harness_name_that_is_not_a_name(engine):
    with Session(engine) as session, session.begin():
        create_token(session, "one", [])
    with Session(engine) as session:
        spawner = session.scalars(select(Spawner)).one()
        with pytest.raises(TokenError, match="harness"):
            register(session, spawner, [], ["claude --yolo"], None, datetime.now(UTC))
