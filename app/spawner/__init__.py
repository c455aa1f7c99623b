"""The devbox agent: claims jobs from the App and runs Claude Code sessions in tmux.

Pure parts (argv building, trust-file editing, screen classification, drift) sit beside thin
I/O parts (tmux runner, git checkout, registry file, HTTP client, the claim loop).
"""


class SpawnerError(Exception):
    """The devbox agent could not run a job, a session or a step of one. The room's one
    exception root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""
