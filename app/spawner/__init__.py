"""The devbox agent: claims jobs from the App and runs Claude Code sessions in tmux.

Pure parts (argv building, trust-file editing, screen classification, drift) sit beside thin
I/O parts (tmux runner, git checkout, registry file, HTTP client, the claim loop).
"""
