"""The operator's git identity (`user.name`, `user.email`) a session's home is given, whatever
its harness: read from the operator's `~/.gitconfig` through the one git door (`hostgit`),
written as the home's `.gitconfig`. The session writes its home, so the identity is written
through `app.files`' `…_within` functions: a link it planted is replaced, never written
through.
"""

from __future__ import annotations

import os
from pathlib import Path

from app.files import write_within
from app.spawner.workspace.hostgit import run_git

GIT_IDENTITY = ("user.name", "user.email")


def _git_identity(real_home: Path) -> str:
    """`[user]` name and email from the operator's git config, as a git config text."""
    source = real_home / ".gitconfig"
    if not source.is_file():
        return ""
    found = run_git(
        ["config", "--file", str(source), "--get-regexp", r"^user\.(name|email)$"],
        {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(real_home)},
        cwd=real_home,
    ).stdout
    lines = [
        f"\t{key.split('.', 1)[1]} = {value}"
        for key, _, value in (line.partition(" ") for line in found.splitlines())
        if key in GIT_IDENTITY and value
    ]
    return "[user]\n" + "\n".join(lines) + "\n" if lines else ""


def write_git_identity(real_home: Path, home: Path) -> list[str]:
    """The operator's git `user.name` / `user.email` as the session home's `.gitconfig`
    (written without following a link); returns what went wrong."""
    identity = _git_identity(real_home)
    if not identity:
        return []
    try:
        write_within(home, ".gitconfig", identity, 0o600)
    except OSError as exc:
        return [f"{home / '.gitconfig'}: {exc}"]
    return []
