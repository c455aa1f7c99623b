"""What a webhook handler is given: the delivery, a database session and the clients.

Handlers never build clients or read the environment; everything comes in here, so tests can
hand them fakes at the network boundary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

import orjson
from sqlalchemy.orm import Session

from app.audit import EventLog
from app.config import OperatorConfig, Settings
from app.github.client import GitHubApp
from app.github.permissions import PermissionCache
from app.mirror import Mirror, NullMirror
from app.store import utcnow


@dataclass
class Services:
    """The long-lived things a process shares between handlers."""

    settings: Settings
    config: OperatorConfig
    events: EventLog
    github: GitHubApp
    mirror: Mirror = field(default_factory=NullMirror)
    clock: Callable[[], datetime] = utcnow
    # Who may act on which repository, as GitHub last answered (briefly): this App's own.
    permissions: PermissionCache = field(default_factory=PermissionCache)


@dataclass
class HandlerContext:
    """One delivery being handled inside one database transaction."""

    services: Services
    session: Session
    delivery_id: str
    event: str
    action: str | None
    body: bytes

    @cached_property
    def payload(self) -> dict[str, Any]:
        data = orjson.loads(self.body)
        return data if isinstance(data, dict) else {}

    @property
    def config(self) -> OperatorConfig:
        return self.services.config

    @property
    def github(self) -> GitHubApp:
        return self.services.github

    @property
    def mirror(self) -> Mirror:
        return self.services.mirror

    def now(self) -> datetime:
        return self.services.clock()

    def emit(self, event: str, work_item_id: str | None = None, **fields: Any) -> None:
        """Record an event in this delivery's transaction (and in events.jsonl)."""
        self.services.events.emit(
            event, work_item_id, session=self.session, delivery=self.delivery_id, **fields
        )

    @property
    def installation_id(self) -> int | None:
        inst = self.payload.get("installation")
        return int(inst["id"]) if isinstance(inst, dict) and "id" in inst else None
