"""Claude Code hook entry points. Imported on every turn of every session: keep it empty."""
