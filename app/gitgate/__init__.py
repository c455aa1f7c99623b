"""A session's `origin`: the App's git gateway, git's smart HTTP checked and forwarded to GitHub."""

from app.gitgate.git_caps import GitCaps
from app.gitgate.git_gateway import bp as git_bp

__all__ = ["GitCaps", "git_bp"]
