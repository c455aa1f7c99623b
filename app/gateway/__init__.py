"""The model gateway: a session reaches the model only through it, holding a pass that dies
with the session, while the operator's credential stays in the spawner. It relays each
answer unchanged and counts its tokens per work item (relay, passes, forwarding, metering).
"""


class GatewayError(Exception):
    """The model gateway could not relay a request or its answer. The room's one exception
    root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""
