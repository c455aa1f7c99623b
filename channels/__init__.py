"""The Slack mirror: one thread per work item, the checklist as a Block Kit control, and
replies from the thread back to the issue. Built on slack-bolt; off without a bot token."""
