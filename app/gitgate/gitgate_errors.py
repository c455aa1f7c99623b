"""The gitgate room's one exception root."""


class GitGateError(Exception):
    """The git gateway refused or could not forward a session's git request. The room's one
    exception root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""
