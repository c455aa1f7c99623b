"""A router keyed by `(event, action)`; `(event, None)` matches every action of the event."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.github.services import HandlerContext

Handler = Callable[["HandlerContext"], None]
RouteTable = Mapping[tuple[str, str | None], Sequence[Handler]]


class Router:
    def __init__(self, table: RouteTable) -> None:
        self._table = {key: tuple(handlers) for key, handlers in table.items()}

    def handlers_for(self, event: str, action: str | None) -> tuple[Handler, ...]:
        exact = self._table.get((event, action), ()) if action is not None else ()
        return exact + self._table.get((event, None), ())

    def routes(self, event: str, action: str | None) -> bool:
        """Whether any handler acts on this delivery (the intake stores the rest as done)."""
        return bool(self.handlers_for(event, action))

    def dispatch(self, ctx: HandlerContext) -> int:
        """Run every handler for the context's delivery; returns how many ran."""
        handlers = self.handlers_for(ctx.event, ctx.action)
        for handler in handlers:
            handler(ctx)
        return len(handlers)
