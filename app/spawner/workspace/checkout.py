"""One working tree per work item under `routing.workspace.root`, cloned from the job's
`clone_url` and reused on every respawn. Its directory is named by `item_slug`, so two work
items never share a tree.

A clone asks for its token (`ask_token`) only once it knows it must clone: a reused tree
needs none. The token reaches git only through the environment: `GIT_ASKPASS` names a
small script (no secret in it) that prints the token from `THE_LOOP_GIT_TOKEN`. The token is
never in an argv (visible in `ps`), never in a git config, never in a log line; a URL that
carries credentials of its own is refused. `credential.helper` is emptied for the clone so no
helper stores the token either.

A tree that is there already was written by its session: it is reused only when
`HostGit.refusal` finds nothing wrong with its `.git`, and removed and cloned afresh
otherwise. Git runs only through `hostgit`.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app.config import NAME_RE
from app.files import FileTooLarge, json_text, read_within, write_within
from app.graph import START_NODE
from app.protocol import Frozen
from app.spawner.confine.hostwalk import tidy
from app.spawner.naming import item_slug
from app.spawner.workspace.hostgit import CheckoutError, HostGit, run_git
from app.workstate import WorkItemState, parse_state, state_path

TOKEN_VARIABLE = "THE_LOOP_GIT_TOKEN"
MAX_STATE_BYTES = 1024 * 1024  # of a checkout's work-item-state.json (a few KiB is usual)
LOG = logging.getLogger(__name__)
ASKPASS = """#!/bin/sh
# Answers git's credential prompts from the environment; holds no secret itself.
case "$1" in
  Username*) printf '%s\\n' x-access-token ;;
  *) printf '%s\\n' "$THE_LOOP_GIT_TOKEN" ;;
esac
"""
CLONE_TIMEOUT = 600


@dataclass(frozen=True)
class Checkout:
    """A work item's tree; `refused` says why a tree that was there was not reused."""

    path: Path
    reused: bool
    refused: str | None = None


def checkout_dir(root: Path, work_item_id: str) -> Path:
    """`<root>/<owner>-<repo>-<n>-<hash>`: one directory per work item, always inside `root`."""
    return root / item_slug(work_item_id)


def check_clone_url(url: str) -> str:
    """Refuse a URL carrying its own credentials (they would land in `.git/config`)."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https") and (parts.username or parts.password):
        raise CheckoutError("clone_url carries credentials; refusing to write them to git config")
    if parts.scheme not in ("http", "https", "ssh", "git", "file", ""):
        raise CheckoutError(f"clone_url scheme {parts.scheme!r} is not supported")
    if url.startswith("-"):
        raise CheckoutError("clone_url must not start with '-'")
    return url


def private_root(root: Path) -> None:
    """The workspace root, made when missing, and searchable by its owner only: no other
    user of the host reaches a checkout (nor anything a session left in one)."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(os.lstat(root).st_mode) != 0o700:
        root.chmod(0o700)


def write_askpass(directory: Path) -> Path:
    """The askpass helper, written once into the spawner's state directory."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "git-askpass.sh"
    if not path.exists() or path.read_text() != ASKPASS:
        path.write_text(ASKPASS)
    path.chmod(0o700)
    return path


def git_env(base: Mapping[str, str], askpass: Path, token: str | None) -> dict[str, str]:
    """The environment a git command runs with: never prompts, token only as a variable."""
    env = {k: v for k, v in base.items() if k != TOKEN_VARIABLE}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": str(askpass)})
    if token:
        env[TOKEN_VARIABLE] = token
    return env


def _scrub(text: str, token: str | None) -> str:
    return text.replace(token, "[token]") if token else text


def prepare_checkout(
    root: Path,
    work_item_id: str,
    clone_url: str,
    *,
    ask_token: Callable[[], str | None] | None,
    askpass: Path,
    env: Mapping[str, str] | None = None,
    git: HostGit | None = None,
) -> Checkout:
    """Clone into the work item's directory, or reuse the tree already there when `git`
    finds nothing in it to refuse (a refused tree is removed and cloned afresh). `ask_token`
    is called only for a clone, for the token it authenticates with (None: none needed).

    The clone goes to a temporary sibling and is renamed into place, so a half-finished clone
    never looks like a checkout.
    """
    base = os.environ if env is None else env
    git = git or HostGit(base)
    private_root(root)
    target = checkout_dir(root, work_item_id)
    refused = None
    if os.path.lexists(target):
        if target.is_dir() and not target.is_symlink():
            # No set-uid file or world-writable directory meets the host's git; the tree
            # is the sessions' user's, as the confined git runs.
            tidy(target, git.owner)
        refused = git.refusal(target)
        if refused is None:
            return Checkout(target, reused=True)
    check_clone_url(clone_url)
    token = ask_token() if ask_token is not None else None
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{target.name}."))
    # --no-hardlinks: a clone from a local path shares no file with its source, so the
    # session user's tree (chowned to it by `tidy`) never changes the source's objects, and
    # parallel clones of one source never see each other's chown mid-clone.
    command = [
        "-c",
        "credential.helper=",
        "clone",
        "--quiet",
        "--no-hardlinks",
        "--",
        clone_url,
        str(staging),
    ]
    try:
        proc = run_git(command, git_env(base, askpass, token), timeout=CLONE_TIMEOUT)
        if proc.returncode != 0:
            raise CheckoutError(f"git clone failed: {_scrub(proc.stderr.strip(), token)}")
        if refused:  # the tree there, refused (an empty leftover included)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)  # never follows a link inside it
            else:
                target.unlink()
        staging.rename(target)
        git.forget(target)
        tidy(target, git.owner)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return Checkout(target, reused=False, refused=refused)


def write_frozen_state(
    checkout: Path,
    spec_id: str,
    frozen: Frozen,
    phase: str = "",
    gates: Mapping[str, Any] | None = None,
) -> Path:
    """Write `docs/specs/<spec>/work-item-state.json` from the App's record (no link in
    the checkout is followed: a linked directory on the way is replaced by a real one).

    The pointer is the App's `phase` when the job carries one (else the one already in a
    reused checkout is kept); the decisions and choices are the App's (it is the authority)
    and replace whatever an agent wrote there. The file is read only when no `phase` comes
    with the job: a follow-up to a live session never reads what its session wrote.
    """
    path = state_path(checkout, _safe_spec(spec_id))
    previous = None if phase else read_checkout_state(checkout, spec_id)
    state = WorkItemState(
        workItem=spec_id,
        currentNode=phase
        or (previous.currentNode if previous and previous.currentNode else "")
        or START_NODE,
        decisions={**frozen.decisions, **(gates or {})},
        parked=None,
        skips=dict(frozen.skips),
        harness=frozen.harness,
        model=frozen.model,
        effort=frozen.effort,
    )
    relative = path.relative_to(checkout).as_posix()
    write_within(checkout, relative, json_text(state.to_dict()), 0o644, dir_mode=0o755)
    return path


def _safe_spec(spec_id: str) -> str:
    if not NAME_RE.match(spec_id):
        raise CheckoutError(f"spec id {spec_id!r} is not a safe directory name")
    return spec_id


def read_checkout_state(checkout: Path, spec_id: str) -> WorkItemState | None:
    """The state file in a checkout, read as the session left it but without following a
    link (one reads as no file): the host never reads a file elsewhere through it. One of
    more than `MAX_STATE_BYTES` is not read: it reads as no file (so the App's record is
    written over it) and a warning names it."""
    relative = state_path(checkout, _safe_spec(spec_id)).relative_to(checkout).as_posix()
    try:
        return parse_state(read_within(checkout, relative, MAX_STATE_BYTES))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except FileTooLarge as exc:
        LOG.warning("%s: %s; the App's record replaces it", checkout / relative, exc)
        return None
