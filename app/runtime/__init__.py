"""One App process put together: its shared state (engine, services, router, inbox workers),
the table that routes GitHub's events to the work-item handlers, the webhook intake and the
ASGI application `the-loop serve` runs. The top of the house: it may import every room, and
no room imports it."""

from app.runtime.app_state import build_state, retention_of
from app.runtime.asgi import create_asgi_app
from app.runtime.event_routes import build_router
from app.runtime.flask_app import create_app

__all__ = ["build_router", "build_state", "create_app", "create_asgi_app", "retention_of"]
