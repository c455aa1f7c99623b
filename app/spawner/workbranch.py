"""The work branch and the push credential helper of a work item's checkout.

The branch is the App's (every job names it: `the-loop/issue-7`, or a labelled pull
request's head branch); the spawner only puts the checkout on it — tracking the remote
branch when one exists, so a respawn elsewhere picks up what was pushed.

The checkout's `origin` is the App's git gateway (`<THE_LOOP_URL>/git/<owner>/<repo>.git`),
not GitHub: the session fetches and pushes through the App, which lets only the work branch
through. Its local config names one credential helper, `the-loop git-credential`, after an
empty entry that switches off every helper from the user's or the system's config (one of
those could otherwise store the token on disk); the helper gives the session's own token,
to the gateway only. `credential.useHttpPath` makes git say which repository it wants.
`push.autoSetupRemote` lets a plain `git push` publish a new branch.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from app.spawner.checkout import TOKEN_VARIABLE, CheckoutError

GIT_TIMEOUT = 60


def helper_command(python: str = sys.executable) -> str:
    """The `credential.helper` value: this interpreter running the-loop's helper (git runs a
    value starting with `!` through the shell and appends the operation)."""
    return f"!{shlex.quote(python)} -m app.cli git-credential"


def _git(
    path: Path, env: Mapping[str, str], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    quiet = {k: v for k, v in env.items() if k != TOKEN_VARIABLE} | {"GIT_TERMINAL_PROMPT": "0"}
    proc = subprocess.run(
        ["git", "-C", str(path), *args],
        env=quiet,
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT,
        check=False,
    )
    if check and proc.returncode != 0:
        raise CheckoutError(f"git {args[0]} failed: {proc.stderr.strip()[:500]}")
    return proc


def gateway_remote(app_url: str, repo: str) -> str:
    """The App's git gateway URL for `owner/repo` (pure)."""
    return f"{app_url.rstrip('/')}/git/{repo}.git"


def configure_push(
    path: Path, env: Mapping[str, str], remote: str, helper: str | None = None
) -> None:
    """Point `origin` at `remote` (the App's gateway) and name the-loop's credential helper
    (and only it) in the checkout's local config."""
    if _git(path, env, "remote", "set-url", "origin", remote, check=False).returncode != 0:
        _git(path, env, "remote", "add", "origin", remote)  # a session removed it
    _git(path, env, "config", "--local", "--unset-all", "credential.helper", check=False)
    _git(path, env, "config", "--local", "--add", "credential.helper", "")
    _git(path, env, "config", "--local", "--add", "credential.helper", helper or helper_command())
    _git(path, env, "config", "--local", "credential.useHttpPath", "true")
    _git(path, env, "config", "--local", "push.autoSetupRemote", "true")


def _exists(path: Path, env: Mapping[str, str], ref: str) -> bool:
    return _git(path, env, "rev-parse", "--verify", "--quiet", ref, check=False).returncode == 0


def switch_to(path: Path, branch: str, env: Mapping[str, str]) -> str:
    """Put the checkout on `branch`; returns how: `current`, `switched`, `tracking` (made
    from the remote branch) or `created` (from the checked-out commit). Raises
    CheckoutError when git refuses (a bad name, local changes in the way)."""
    if _git(path, env, "check-ref-format", "--branch", branch, check=False).returncode != 0:
        raise CheckoutError(f"{branch!r} is not a branch name git accepts")
    current = _git(path, env, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if current.stdout.strip() == branch:
        return "current"
    if _exists(path, env, f"refs/heads/{branch}"):
        _git(path, env, "switch", "--quiet", branch)
        return "switched"
    if _exists(path, env, f"refs/remotes/origin/{branch}"):
        _git(path, env, "switch", "--quiet", "--create", branch, "--track", f"origin/{branch}")
        return "tracking"
    _git(path, env, "switch", "--quiet", "--create", branch)
    return "created"
