"""One App process put together: its shared state (engine, services, router, inbox workers),
the table that routes GitHub's events to the work-item handlers, the webhook intake and the
ASGI application `the-loop serve` runs. The top of the house: it may import every room, and
no room imports it."""
