"""Where an App opens its database sessions, and how its hooks reach them.

Each App makes one `Sessions` for its engine and opens every session from it. What the App
hangs on it — its progress watch's flush hook (`listen`) and, in `info`, its job signal and
its publishers' wake-up — reaches that App's sessions only: nothing sits on SQLAlchemy's
`Session` class and nothing is kept in a table keyed by engine, so two Apps in one process
(the tests, a worker beside the Slack runner) never see each other's hooks, and an App's
shutdown takes its hooks away with it. A command with no App (`the-loop spawner token`)
makes a `Sessions` of its own, which carries nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker


class Sessions:
    """The session factory of one App's engine: `sessions()` opens a session (keywords as
    `Session` takes them, e.g. `expire_on_commit=False` or `bind=connection`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Copied into each new session's `info`: what a session's code looks up to find the
        # App it belongs to (`hooked`). The maker keeps this very dict, so a hook put here
        # later reaches every session opened after.
        self._info: dict[str, Any] = {}
        self._maker = sessionmaker(engine, info=self._info)

    def __call__(self, **kw: Any) -> Session:
        return self._maker(**kw)

    def put(self, key: str, value: object) -> None:
        """Carry `value` in the `info` of every session opened from now on, under `key`."""
        self._info[key] = value

    def drop(self, key: str) -> None:
        self._info.pop(key, None)

    def listen(self, name: str, hook: Callable[..., Any]) -> None:
        """Run `hook` on session event `name` (e.g. `before_flush`) of these sessions only
        (idempotent)."""
        if not event.contains(self._maker, name, hook):
            event.listen(self._maker, name, hook)

    def forget(self, name: str, hook: Callable[..., Any]) -> None:
        if event.contains(self._maker, name, hook):
            event.remove(self._maker, name, hook)


def hooked(session: Session, key: str) -> Any:
    """What the App that opened `session` put under `key` (`Sessions.put`), else None."""
    return session.info.get(key)
