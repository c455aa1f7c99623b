"""The spawner room's one exception root."""


class SpawnerError(Exception):
    """The devbox agent could not run a job, a session or a step of one. The room's one
    exception root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""
