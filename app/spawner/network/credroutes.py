"""A spawner's credential routes (`routing.sandbox.routes`): resolved once at its start, served
into each session's closed network, their requests counted per work item and reported to
the App as `session.routes` events (requests passed and refused, per route, since the last
report), the way the model gateway reports its usage.

Each session gets its own server per route, on a unix socket in its network's directory
(`netgates`), which the relay inside listens for at a loopback port (`routerules.with_routes`):
no port on the host's loopback serves a route, so no other process of the devbox can use one,
and what comes through a session's socket is that session's. The credential stays in the
spawner: the session's environment holds only the loopback URL (`route_env`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from app.protocol import ROUTES_EVENT
from app.spawner.confine.sandbox import Secret
from app.spawner.network.netplan import NetPlan
from app.spawner.network.routecreds import ResolvedRoute
from app.spawner.network.routerules import route_env, socket_name, with_routes
from app.spawner.network.routeserve import Counted, serve_route

log = logging.getLogger(__name__)
Emit = Callable[..., Any]


class CredentialRoutes:
    """The routes a spawner serves and what their requests counted."""

    def __init__(self, routes: tuple[ResolvedRoute, ...], emit: Emit) -> None:
        self.routes = routes
        self.emit = emit
        self._lock = threading.Lock()
        # item → route's env → [passed, refused]
        self._counts: dict[str, dict[str, list[int]]] = {}

    def served(
        self, plan: NetPlan, work_item_id: str
    ) -> tuple[NetPlan, dict[str, Any], dict[str, str]]:
        """`plan` with the routes' ports, the handler of each route's socket, and what the
        session's environment gains."""
        plan, ports = with_routes(plan, self.routes)
        handlers = {
            socket_name(route): serve_route(
                route, ports[route.env], self._counter(work_item_id, route.env)
            )
            for route in self.routes
        }
        return plan, handlers, route_env(self.routes, ports)

    def hidden(self) -> list[Secret]:
        """The files the routes' credentials were read from, hidden from every sandbox
        (an operator may keep one in a directory sessions see, such as `/etc`)."""
        found = {Path(os.path.realpath(p)) for route in self.routes for p in route.files}
        return [Secret(path, directory=False) for path in sorted(found) if path.is_file()]

    def _counter(self, work_item_id: str, env: str) -> Counted:
        def counted(refused: bool) -> None:
            with self._lock:
                row = self._counts.setdefault(work_item_id, {}).setdefault(env, [0, 0])
                row[1 if refused else 0] += 1

        return counted

    def take(self, work_item_id: str | None = None) -> dict[str, dict[str, list[int]]]:
        """What was counted since the last `take` (of one item, or all), forgotten here."""
        with self._lock:
            if work_item_id is None:
                taken, self._counts = self._counts, {}
                return taken
            one = self._counts.pop(work_item_id, None)
            return {work_item_id: one} if one else {}

    def report(self, work_item_id: str | None = None) -> int:
        """Emit one `session.routes` event per item that used a route since the last report;
        how many."""
        taken = self.take(work_item_id)
        for item, counts in taken.items():
            self.emit(ROUTES_EVENT, item, routes=as_reported(counts))
        return len(taken)

    def run(self, stop: threading.Event, interval: float = 5.0) -> None:
        """Report every `interval` until `stop`, then once more."""
        while not stop.wait(interval):
            try:
                self.report()
            except Exception:  # a failed report must not end the reporter
                log.exception("route counts report failed")
        self.report()


def as_reported(counts: Mapping[str, list[int]]) -> dict[str, dict[str, int]]:
    """Counts in the event's shape: `{env: {"requests": n, "refused": m}}` (pure)."""
    return {env: {"requests": row[0], "refused": row[1]} for env, row in counts.items()}
