"""What the doors in front of the App's WSGI application read of the process that built them:
its settings, its sampled-event log, and whether a bearer token is one it issued. The App's
state has all three; the doors name only these, so they sit below the App that assembles
them."""

from __future__ import annotations

from typing import Protocol

from app.config import Settings
from app.ingress.sampling import SampledLog


class DoorState(Protocol):
    """The process as a door sees it (the App's `AppState` is one)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def sampled(self) -> SampledLog: ...

    def known_token(self, authorization: str) -> bool: ...
