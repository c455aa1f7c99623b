"""The workitems room's one exception root."""


class WorkItemError(Exception):
    """A work item refused a move or a request. The room's one exception root: every
    exception it defines derives from it (`tests/house/test_exception_roots.py`)."""
