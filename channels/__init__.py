"""The Slack mirror: one thread per work item, the checklist as a Block Kit control, and
replies from the thread back to the issue. Built on slack-bolt; off without a bot token."""


class ChannelsError(Exception):
    """The Slack mirror could not render or reach Slack. The room's one exception root:
    every exception it defines derives from it (`tests/house/test_exception_roots.py`)."""
