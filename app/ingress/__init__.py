"""What arrives over HTTP before any room acts on it: which credential and how much body
each door asks for (`doors`), and the counter strangers' refusals go through (`sampling`)."""


class IngressError(Exception):
    """A request was refused or cut before any room saw it. The room's one exception root:
    every exception it defines derives from it (`tests/house/test_exception_roots.py`)."""
