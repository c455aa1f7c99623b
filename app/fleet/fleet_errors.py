"""The fleet room's one exception root."""


class FleetError(Exception):
    """The App's side of the spawner protocol refused or failed a request. The room's one
    exception root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""
