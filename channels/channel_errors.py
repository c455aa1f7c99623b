"""The channels room's one exception root."""


class ChannelsError(Exception):
    """The Slack mirror could not render or reach Slack. The room's one exception root:
    every exception it defines derives from it (`tests/house/test_exception_roots.py`)."""
