"""A session in its tmux pane: starting it, pasting into it, reading its screen, and the
watchdog that notices when it waits on a question or has died."""
