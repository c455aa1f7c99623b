"""Every git command the spawner runs goes through here: a checkout is its session's writing.

Git trusts the repository it runs in. A session writes all of its own: `.git/config`, the
hooks, the index, the reflogs, `.gitattributes`. Left alone, `git switch` on a relaunch
would run a planted `post-checkout` hook, a `core.fsmonitor` command or a filter's `clean`
or `smudge` as the spawner's user, follow an `include.path`, write the work tree where
`core.worktree` says, or append a reflog line through a link to the operator's shell
profile. So, for a git command on a checkout (`HostGit.run`):

1. **Refused first.** A `.git` that is a link or a file (`gitdir:` naming a repository
   elsewhere), one holding `commondir` or `objects/info/alternates` (they borrow another
   repository), anything in it (hooks aside: none runs) that is not a plain file or
   directory — a link, a fifo, a socket, a device, where git would follow, block or read
   without end — seen with `lstat` before any git runs; then a config naming
   `core.worktree`, or a repository git cannot read or use, or one it does not answer about
   in time: `refusal` says why, and the caller re-clones.
2. **Confined.** With sessions in bubblewrap, a command that reads the index or writes the
   work tree, the index, refs or reflogs (`switch`, and anything not in `ON_THE_HOST`)
   runs in a sandbox of its own: the system directories read-only, the checkout writable,
   no home, no network, a PID namespace, nothing else. Whatever the repository still made
   git do — or a link in `.git` where git writes the index or appends a reflog — reaches no
   further than the session itself could. Commands that only read refs and settings or
   edit `.git/config` run on the host. (With `routing.sandbox.mode: none` the session runs
   unconfined as the spawner's user, so there is no more reach to take; every command runs
   on the host, with everything below still in force.) Git on the host has a short
   timeout and an address-space limit, so what `refusal` cannot foresee (an include naming
   a fifo in the work tree) costs seconds and a refusal, never the spawner's memory.
3. **Neutralised.** Settings given through `GIT_CONFIG_COUNT` outrank every config file and
   include: hooks at `/dev/null`, no fsmonitor, every filter driver the repository's config
   names emptied and not required, no pager, no automatic gc or maintenance, no transport
   at all (`GIT_ALLOW_PROTOCOL` names none: nothing is fetched, lazily or otherwise).
   `--git-dir` and `--work-tree` are explicit, so `core.worktree` has no say.
4. **A clean process.** Only PATH and the locale come from the spawner's environment (no
   token, no key); stdin is `/dev/null` and git starts a session of its own (no terminal
   to push keystrokes into).

The clone of a fresh checkout and the read of the operator's git identity run here too
(`run_git`), with the same settings; only a clone may use a transport.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.spawner.confine.isolation import system_mounts, system_secrets
from app.spawner.confine.sandbox import Bind, SandboxPlan, lies_within, sandbox_argv
from app.spawner.confine.sessionuser import SessionUserError, session_user
from app.spawner.spawner_errors import SpawnerError

GIT_TIMEOUT = 60
HOST_TIMEOUT = 10  # seconds for a command on a checkout that runs on the host
HOST_MEMORY = 1024**3  # bytes of address space git on the host may map
NEUTRAL = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("safe.bareRepository", "explicit"),
)
OFFLINE = (("protocol.allow", "never"),)
# Pack windows small enough for git to work within HOST_MEMORY.
SMALL_WINDOWS = (("core.packedGitWindowSize", "32m"), ("core.packedGitLimit", "256m"))
KEPT_VARIABLES = ("PATH", "LANG", "LC_ALL")
FILTER_KEYS = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
BORROWED = ("commondir", "objects/info/alternates")
# Commands that read refs and settings, or edit `.git/config` through git's lock file (which
# `refusal` has seen to be a plain file): none of them reads the index or the work tree, so
# no hook, filter or fsmonitor is reachable from them, and they write nothing else. They
# run on the host (a sandbox costs more than the command); every other command is confined.
ON_THE_HOST = frozenset({"config", "rev-parse", "symbolic-ref"})
# What git always needs, as plain files (anything else in `.git` is checked as it is found).
NEEDED_FILES = ("config", "HEAD")
UNREAD = frozenset({"hooks"})  # `.git`'s own entries git never reads here (hooks are off)
REPOSITORY_SCOPES = ("local", "worktree")  # the files in `.git`, and what they include


class CheckoutError(SpawnerError, RuntimeError):
    """The checkout cannot be prepared; the message is safe to log (no token)."""


def _count_env(settings: Sequence[tuple[str, str]]) -> dict[str, str]:
    """`settings` as GIT_CONFIG_COUNT variables: key and value apart, so a name holding `=`
    cannot be split the way `-c name=value` would split it."""
    env = {"GIT_CONFIG_COUNT": str(len(settings))}
    for n, (key, value) in enumerate(settings):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env


def run_git(
    args: Sequence[str],
    env: Mapping[str, str],
    *,
    settings: Sequence[tuple[str, str]] = (),
    cwd: Path | None = None,
    timeout: float = GIT_TIMEOUT,
    confine: SandboxPlan | None = None,
    memory: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `git args` with `env` plus the neutral settings (and `settings`), inside
    `confine` when given, its address space capped at `memory` bytes when given. Raises
    CheckoutError when git does not finish in `timeout`."""
    full = {**env, **_count_env([*NEUTRAL, *settings]), "GIT_TERMINAL_PROMPT": "0"}
    argv = ["git", *args]
    if memory is not None:
        # The shell caps its own address space, then becomes git: no Python runs between fork
        # and exec, which a process with threads (the spawner's job pool) must not risk.
        argv = ["/bin/sh", "-c", 'ulimit -v "$0" && exec "$@"', str(memory // 1024), *argv]
    if confine is not None:
        argv = sandbox_argv(confine, argv)
    try:
        return subprocess.run(
            argv,
            env=full,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        raise CheckoutError(f"git {_verb(args)} timed out after {timeout:g}s") from exc


def _verb(args: Sequence[str]) -> str:
    """The sub-command's name among git's arguments (options and `-c` values skipped)."""
    return next((a for a in args if not a.startswith("-") and "=" not in a), "")


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def confinement(checkout: Path, path_variable: str) -> SandboxPlan:
    """The sandbox a git command on `checkout` runs in: system directories read-only (and
    git's own, when it lives elsewhere), the checkout writable, no network."""
    binds, links = system_mounts()
    found = shutil.which("git", path=path_variable)
    if found is not None:
        where = _real(Path(found)).parent
        if not any(lies_within(where, b.path) for b in binds):
            binds.append(Bind(where))
    binds.append(Bind(_real(checkout), writable=True))
    return SandboxPlan(
        binds=tuple(binds),
        secrets=tuple(system_secrets()),
        symlinks=tuple(links),
        chdir=_real(checkout),
        network=False,
    )


def _kind(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


@dataclass
class HostGit:
    """Git on work items' checkouts, for one spawner: `env` is the spawner's environment
    (only PATH and the locale are taken from it); `confined` runs each command in its own
    sandbox (False only when sessions themselves run unconfined)."""

    env: Mapping[str, str]
    confined: bool = True
    _listed: dict[Path, list[tuple[str, str]] | str] = field(default_factory=dict, repr=False)
    # (uid, gid) confined commands run as, the sessions' own (None: the spawner's): a
    # checkout is its session's user's, and git on it reaches no further than that user.
    owner: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.confined and self.owner is None:
            try:
                user = session_user()
            except SessionUserError as exc:
                raise CheckoutError(str(exc)) from exc
            self.owner = user.ids if user is not None else None

    def _environment(self) -> dict[str, str]:
        env = {k: self.env[k] for k in KEPT_VARIABLES if k in self.env}
        env.setdefault("PATH", os.defpath)
        # Confined, there is no home to read a config from; on the host, the operator's
        # own `~/.gitconfig` is theirs to trust.
        env["HOME"] = "/nonexistent" if self.confined else self.env.get("HOME", "/nonexistent")
        env.update(GIT_ALLOW_PROTOCOL="none", GIT_NO_LAZY_FETCH="1")
        return env

    def _call(
        self,
        checkout: Path,
        args: Sequence[str],
        settings: Sequence[tuple[str, str]],
        timeout: float = GIT_TIMEOUT,
    ) -> subprocess.CompletedProcess[str]:
        env = self._environment()
        # The directory itself is the spawner's (made in a parent no session writes), so
        # it is resolved once: the sandbox shows it at its real path.
        where = _real(checkout)
        place = [f"--git-dir={where / '.git'}", f"--work-tree={where}"]
        reading = args[0] in ON_THE_HOST
        confine = None
        if self.confined and not reading:
            confine = replace(confinement(where, env["PATH"]), user=self.owner)
        on_host = confine is None
        return run_git(
            [*place, *args],
            env,
            settings=[*OFFLINE, *(SMALL_WINDOWS if on_host else ()), *settings],
            cwd=where,
            confine=confine,
            timeout=min(timeout, HOST_TIMEOUT) if reading else timeout,
            memory=HOST_MEMORY if on_host else None,
        )

    def _settings_named(self, checkout: Path) -> list[tuple[str, str]] | str:
        """(scope, name) of every setting git reads for `checkout`, includes and all, or
        why git cannot read them. Listed once per checkout for this `HostGit`; raises
        CheckoutError when git does not answer in time (and nothing is kept)."""
        if checkout not in self._listed:
            args = ["config", "--list", "--show-scope", "--name-only", "-z"]
            listed = self._call(checkout, args, ())
            if listed.returncode != 0:
                self._listed[checkout] = _first_line(listed)
            else:
                words = listed.stdout.split("\0")
                self._listed[checkout] = list(zip(words[0::2], words[1::2], strict=False))
        return self._listed[checkout]

    def _filter_settings(self, checkout: Path) -> list[tuple[str, str]]:
        """Every filter driver the config names, emptied and not required."""
        named = self._settings_named(checkout)
        drivers = {
            name[len("filter.") :].rpartition(".")[0]
            for _, name in ([] if isinstance(named, str) else named)
            if name.startswith("filter.") and name.count(".") >= 2
        }
        return [
            (f"filter.{driver}.{key}", value)
            for driver in sorted(drivers)
            for key, value in FILTER_KEYS
        ]

    def local_names(self, checkout: Path) -> set[str]:
        """The settings `checkout`'s own config (`.git/config` and what it includes) named
        when git listed it for this `HostGit`; raises CheckoutError as the listing does."""
        named = self._settings_named(checkout)
        listed = [] if isinstance(named, str) else named
        return {name for scope, name in listed if scope in REPOSITORY_SCOPES}

    def forget(self, checkout: Path) -> None:
        """Drop what was listed for `checkout` (it was replaced by a fresh clone)."""
        self._listed.pop(checkout, None)

    def run(
        self, checkout: Path, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        """`git args` on `checkout`, confined and neutralised as above. With `check`, a
        failure raises CheckoutError with git's first lines; so does git taking longer than
        `timeout` seconds (HOST_TIMEOUT at most for a command on the host)."""
        proc = self._call(checkout, args, self._filter_settings(checkout), timeout)
        if check and proc.returncode != 0:
            raise CheckoutError(f"git {_verb(args)} failed: {proc.stderr.strip()[:500]}")
        return proc

    def branch_name_ok(self, name: str) -> bool:
        """Whether git takes `name` as a branch name (checked outside any repository)."""
        args = ["check-ref-format", "--branch", name]
        return run_git(args, self._environment(), cwd=Path("/")).returncode == 0

    def refusal(self, checkout: Path) -> str | None:
        """Why `checkout` must not be used (it is re-cloned), or None when it may. Never
        raises: git not answering in time is a refusal too."""
        dot_git = checkout / ".git"
        mode = _kind(dot_git)
        if mode is None:
            return ".git is missing"
        if stat.S_ISLNK(mode):
            return ".git is a symbolic link"
        if not stat.S_ISDIR(mode):
            return ".git is not a directory (a gitdir file names a repository elsewhere)"
        for name in BORROWED:
            if _kind(dot_git / name) is not None:
                return f".git/{name} borrows from a repository elsewhere"
        odd = next(_not_plain(dot_git), None)
        if odd is not None:
            return odd
        for name in NEEDED_FILES:
            if not stat.S_ISREG(_kind(dot_git / name) or 0):
                return f".git/{name} is not a regular file"
        try:
            named = self._settings_named(checkout)
            if isinstance(named, str):
                return f"git cannot read its config ({named})"
            if any(s in REPOSITORY_SCOPES and n == "core.worktree" for s, n in named):
                return "its config names a work tree elsewhere (core.worktree)"
            usable = self._call(checkout, ["rev-parse", "--git-dir"], ())
        except CheckoutError as exc:  # a timeout: something in it blocks git
            return f"git did not answer about this repository ({exc})"
        if usable.returncode != 0:  # e.g. a repository format git refuses
            return f"git cannot use this repository ({_first_line(usable)})"
        return None


KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a fifo"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def _not_plain(dot_git: Path) -> Iterator[str]:
    """Why each entry under `dot_git` that is neither a plain file nor a directory is
    refused (hooks aside), found with lstat and never followed: a link in `refs` or
    `logs` would have host git read where it points, a fifo would block it, a device
    would feed it without end."""
    pending = [dot_git]
    while pending:
        here = pending.pop()
        try:
            with os.scandir(here) as listing:
                entries = list(listing)
        except OSError as exc:
            yield f".git/{Path(here).relative_to(dot_git)} cannot be listed ({exc.strerror})"
            continue
        for entry in entries:
            if here == dot_git and entry.name in UNREAD:
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
            elif not entry.is_file(follow_symlinks=False):
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError:
                    mode = 0  # gone since it was listed
                kind = next((k for test, k in KINDS if test(mode)), "not a plain file")
                where = Path(entry.path).relative_to(dot_git)
                yield f".git/{where} is not a regular file ({kind})"


def _first_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    return (lines[0] if lines else f"exit {proc.returncode}")[:200]
