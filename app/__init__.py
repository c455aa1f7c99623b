"""the-loop: a GitHub App that turns a labelled issue into an unattended Claude Code session.

The App's Flask application is built by `app.runtime.create_app(settings)`; nothing is built
at import time. This module holds only the version: the stop gate imports `app.graph` and
`app.workstate` on every turn, and importing them must not load the App.
"""

__version__ = "0.1.0"
