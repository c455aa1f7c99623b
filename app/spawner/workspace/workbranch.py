"""The work branch and the push credential helper of a work item's checkout.

The branch is the App's (every job names it: `the-loop/issue-7`, or a labelled pull
request's head branch); the spawner only puts the checkout on it — tracking the remote
branch when one exists, so a respawn elsewhere picks up what was pushed, else cut from the
base branch the execute named (`origin/<base>`, which a clone has), else from the checkout's
default branch.

The checkout's `origin` is the App's git gateway (`<THE_LOOP_URL>/git/<owner>/<repo>.git`),
not GitHub: the session fetches and pushes through the App, which lets only the work branch
through. Its local config names one credential helper, `the-loop git-credential`, after an
empty entry that switches off every helper from the user's or the system's config (one of
those could otherwise store the token on disk); the helper gives the session's own token,
to the gateway only. `credential.useHttpPath` makes git say which repository it wants.
`push.autoSetupRemote` lets a plain `git push` publish a new branch.

An App served over https with a certificate from a private CA is trusted by the spawner
through `SSL_CERT_FILE` (or `SSL_CERT_DIR`, `CURL_CA_BUNDLE`, `REQUESTS_CA_BUNDLE`), which
the sandbox shows and the session inherits. Git built on libcurl with GnuTLS (Debian's
git, for one: its own trust store, no variable) reads none of those, only `GIT_SSL_CAINFO`
or `http.sslCAInfo` (for a directory, `GIT_SSL_CAPATH` or `http.sslCAPath`); so the
checkout's config names the same bundle (or directory) for the App's URL alone
(`http.<App URL>.sslCAInfo`, or `.sslCAPath`), leaving every other host to git's own
bundle. Verification stays on.

The checkout is its session's writing: every git command here goes through
`hostgit.HostGit` (refused, confined and neutralised there), never straight to git.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from app.spawner.workspace.hostgit import CheckoutError, HostGit

# Git reads these itself: a session that inherits one needs nothing in its config.
GIT_CA_VARIABLES = ("GIT_SSL_CAINFO", "GIT_SSL_CAPATH")
# What the spawner's other TLS clients trust and git on libcurl-gnutls does not read: a
# bundle file (the first one set), else a directory of certificates.
CA_FILE_VARIABLES = ("SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE")
CA_DIR_VARIABLES = ("SSL_CERT_DIR",)
CA_KEYS = r"^http\..+\.sslca(info|path)$"  # what `app_trust` writes, for any URL
# At most this many of those are removed at a launch: the config is the session's writing,
# and a session that planted thousands must not cost the spawner a git run for each.
CA_KEYS_REMOVED = 16


def helper_command(python: str = sys.executable) -> str:
    """The `credential.helper` value: this interpreter running the-loop's helper (git runs a
    value starting with `!` through the shell and appends the operation)."""
    return f"!{shlex.quote(python)} -m app.cli git-credential"


def _git(
    path: Path, git: HostGit, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Every git command here runs through the one safe door (see `hostgit`)."""
    return git.run(path, *args, check=check)


def gateway_remote(app_url: str, repo: str) -> str:
    """The App's git gateway URL for `owner/repo` (pure)."""
    return f"{app_url.rstrip('/')}/git/{repo}.git"


def app_trust(app_url: str, trusted: Mapping[str, Path]) -> list[tuple[str, str]]:
    """The checkout's settings that make git trust the App's certificate as the spawner's
    environment does: `http.<app_url>.sslCAInfo` naming the bundle (or `.sslCAPath` the
    directory) that `trusted` (variable → real path, see `isolation.trusted_by_variable`)
    has. None for an App on http, or when git's own variables already say (pure)."""
    if urlsplit(app_url).scheme != "https" or any(n in trusted for n in GIT_CA_VARIABLES):
        return []
    scope = f"http.{app_url.rstrip('/')}/"
    for names, key in ((CA_FILE_VARIABLES, "sslCAInfo"), (CA_DIR_VARIABLES, "sslCAPath")):
        found = [trusted[name] for name in names if name in trusted]
        if found:
            return [(f"{scope}.{key}", str(found[0]))]
    return []


def _trust_app(path: Path, git: HostGit, trust: Sequence[tuple[str, str]]) -> None:
    """Replace the CA settings the checkout's config has (an earlier launch's, for an App URL
    since changed, or a bundle since dropped) with `trust`; `trust` is set in any case."""
    named = _git(
        path, git, "config", "--local", "--name-only", "--get-regexp", CA_KEYS, check=False
    )
    for key in list(dict.fromkeys(named.stdout.splitlines()))[:CA_KEYS_REMOVED]:
        _git(path, git, "config", "--local", "--unset-all", key, check=False)
    for key, value in trust:
        _git(path, git, "config", "--local", "--replace-all", key, value)


def configure_push(
    path: Path,
    git: HostGit,
    remote: str,
    helper: str | None = None,
    trust: Sequence[tuple[str, str]] = (),
) -> None:
    """Point `origin` at `remote` (the App's gateway), name the-loop's credential helper
    (and only it) and `trust` (`app_trust`'s settings) in the checkout's local config."""
    if any(name.startswith("remote.origin.") for name in git.local_names(path)):
        # Its one URL, set on the host (`config` only edits `.git/config`), as `remote
        # set-url` would set it, without a sandbox of its own on every launch.
        _git(path, git, "config", "--local", "--replace-all", "remote.origin.url", remote)
    else:
        _git(path, git, "remote", "add", "origin", remote)  # a session removed it
    _trust_app(path, git, trust)
    _git(path, git, "config", "--local", "--unset-all", "credential.helper", check=False)
    _git(path, git, "config", "--local", "--add", "credential.helper", "")
    _git(path, git, "config", "--local", "--add", "credential.helper", helper or helper_command())
    _git(path, git, "config", "--local", "credential.useHttpPath", "true")
    _git(path, git, "config", "--local", "push.autoSetupRemote", "true")


def _exists(path: Path, git: HostGit, ref: str) -> bool:
    return _git(path, git, "rev-parse", "--verify", "--quiet", ref, check=False).returncode == 0


def switch_to(path: Path, branch: str, git: HostGit, base: str = "") -> str:
    """Put the checkout on `branch`; returns how: `current`, `switched`, `tracking` (made
    from the remote branch) or `created` (from the checked-out commit, or from `origin/<base>`
    when the execute named a base; not tracking it, so a plain `git push` publishes the work
    branch). Raises CheckoutError when git refuses (a bad name, local changes in the way)
    or a new branch's base is not in the checkout."""
    for name in (branch, base) if base else (branch,):
        if not git.branch_name_ok(name):
            raise CheckoutError(f"{name!r} is not a branch name git accepts")
    current = _git(path, git, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    if current.stdout.strip() == branch:
        return "current"
    if _exists(path, git, f"refs/heads/{branch}"):
        _git(path, git, "switch", "--quiet", branch)
        return "switched"
    if _exists(path, git, f"refs/remotes/origin/{branch}"):
        _git(path, git, "switch", "--quiet", "--create", branch, "--track", f"origin/{branch}")
        return "tracking"
    if not base:
        _git(path, git, "switch", "--quiet", "--create", branch)
        return "created"
    if not _exists(path, git, f"refs/remotes/origin/{base}"):
        raise CheckoutError(f"the base branch {base!r} is not in the checkout (origin/{base})")
    _git(path, git, "switch", "--quiet", "--create", branch, "--no-track", f"origin/{base}")
    return "created"
