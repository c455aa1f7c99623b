"""The gateway room's one exception root."""


class GatewayError(Exception):
    """The model gateway could not relay a request or its answer. The room's one exception
    root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""
