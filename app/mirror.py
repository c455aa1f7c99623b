"""Where the App tells a chat surface what happened. The Slack mirror implements it;
`NullMirror` is used when no chat surface is configured."""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy.orm import Session


class Mirror(Protocol):
    def post(self, session: Session, work_item: str, kind: str, payload: dict[str, Any]) -> None:
        """Queue a message about `work_item` inside the caller's transaction."""


class NullMirror:
    def post(self, session: Session, work_item: str, kind: str, payload: dict[str, Any]) -> None:
        return None
