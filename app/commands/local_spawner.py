"""The spawner `the-loop up` starts beside the App: a child `the-loop spawner` process with
a token minted for it in the local store.

The token is kept in the spawner's state directory (mode 0600, the directory 0700), reused on
the next `up` — so the local spawner stays one row in the store and keeps the sessions it
hosts — and handed to the child as that file's path, never through its environment.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from app.config import Settings
from app.files import private_dir, write_text_atomic

LOCAL_NAME = "local"
TOKEN_FILE = "local-spawner.token"


def local_url(args: argparse.Namespace, settings: Settings) -> str:
    """Where the child reaches the App: the bind address, or loopback for a wildcard bind."""
    bind = getattr(args, "bind", None) or f"127.0.0.1:{settings.port}"
    host, _, port = bind.rpartition(":")
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    return f"http://{host}:{port}"


def local_token(settings: Settings) -> str:
    """The local spawner's token: the saved one while the store still knows it, else new."""
    from sqlalchemy import select

    from app.fleet import create_token, hash_token
    from app.spawner import spawner_state_dir
    from app.store import Sessions, Spawner, make_engine, migrate

    path = spawner_state_dir(settings) / TOKEN_FILE
    saved = path.read_text().strip() if path.exists() else ""
    engine = make_engine(settings.database_url)
    try:
        migrate(engine)
        with Sessions(engine)() as session, session.begin():
            known = (
                saved
                and session.scalars(
                    select(Spawner).where(Spawner.token_hash == hash_token(saved))
                ).first()
            )
            if known:
                return saved
            token = create_token(session, LOCAL_NAME, [])
    finally:
        engine.dispose()
    _save(path, token)
    return token


def _save(path: Path, token: str) -> None:
    private_dir(path.parent)
    write_text_atomic(path, token + "\n", 0o600)


def start(args: argparse.Namespace, settings: Settings) -> subprocess.Popen[Any] | None:
    """The child spawner. Its token stays in the private token file, which it is pointed at:
    it is never in the child's environment, where `/proc/<pid>/environ` would show it."""
    if getattr(args, "no_spawner", False):
        return None
    from app.spawner import spawner_state_dir

    local_token(settings)
    env = {k: v for k, v in os.environ.items() if k != "THE_LOOP_SPAWNER_TOKEN"}
    env["THE_LOOP_URL"] = local_url(args, settings)
    token_file = spawner_state_dir(settings) / TOKEN_FILE
    return subprocess.Popen(
        # The App is on this machine: reconnect quickly while it starts or restarts.
        [
            sys.executable,
            "-m",
            "app.cli",
            "spawner",
            "--name",
            LOCAL_NAME,
            "--max-backoff",
            "2",
            "--token-file",
            str(token_file),
        ],
        env=env,
    )


def stop(child: subprocess.Popen[Any] | None) -> None:
    if child is None:
        return
    child.terminate()
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
