"""A session's `origin`: the App's git gateway, git's smart HTTP checked and forwarded to GitHub."""
