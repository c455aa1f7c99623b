"""The ingress room's one exception root."""


class IngressError(Exception):
    """A request was refused or cut before any room saw it. The room's one exception root:
    every exception it defines derives from it (`tests/house/test_exception_roots.py`)."""
