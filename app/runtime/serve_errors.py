"""The runtime room's one exception root."""

from __future__ import annotations

from app.files import CoreError


class ServeError(CoreError):
    """The App could not serve a request to its end (its client left, its body came too
    slowly or grew past the budget). The room's one exception root: every exception it
    defines derives from it (`tests/house/test_exception_roots.py`)."""
