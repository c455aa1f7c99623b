"""The commands room's one exception root."""


class CommandError(Exception):
    """A `the-loop` sub-command could not do what it was asked. The room's one exception
    root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""
