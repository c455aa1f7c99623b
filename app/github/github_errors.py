"""The github room's one exception root."""


class GitHubError(Exception):
    """The GitHub edge could not reach GitHub or read what it sent. The room's one exception
    root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""
