"""Looking at this machine to confine one session: which system directories exist, where the
Python and the project's code live, where the harness is installed, where the secrets are,
whether bubblewrap works.

Thin I/O around `sandbox.sandbox_argv` and `installs.expose` (pure). `confined_argv` refuses
— with one line that says what to do — rather than start a session the sandbox cannot host.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import app
import hooks
from app.config import Sandbox
from app.spawner.confine.installs import Exposure, Located, expose, harness_argv, interpreter_of
from app.spawner.confine.sandbox import (
    BWRAP,
    INSIDE_DIR,
    Bind,
    SandboxPlan,
    Secret,
    lies_within,
    sandbox_argv,
    unix_dirs,
)
from app.spawner.confine.sessionenv import CA_VARIABLES
from app.spawner.spawner_errors import SpawnerError
from hooks.stop_gate import FACTS_AT

SYSTEM_DIRS = ("/usr", "/etc")
MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
HOST_SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
HOST_SECRET_DIRS = ("/etc/ssh",)
ETC_DEPTH, ETC_ENTRIES = 6, 20_000  # how far `unreadable_in` looks into /etc
OTHERS_DIR = stat.S_IROTH | stat.S_IXOTH
MANAGED_DIR = Path("/etc/claude-code")  # Claude Code's managed settings on Linux
UNSET = (
    "CLAUDE_CONFIG_DIR",
    "TMUX",
    "TMUX_PANE",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
)
MISSING = (
    "bubblewrap (bwrap) is not installed, and sessions run in its sandbox: install it "
    "(apt-get install bubblewrap){opt_out}"
)
OPT_OUT = " or set routing.sandbox.mode: none in {config} to run sessions unconfined"


def missing_bubblewrap(config_source: str) -> str:
    """The line for a devbox without bubblewrap; a root spawner is not offered `mode: none`
    (its sessions would run as root)."""
    opt_out = "" if os.geteuid() == 0 else OPT_OUT.format(config=config_source)
    return MISSING.format(opt_out=opt_out)


class SandboxError(SpawnerError, RuntimeError):
    """A session cannot be confined here; the message says what to do."""


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path.expanduser()))


def bubblewrap_problem(config_source: str, env: Mapping[str, str]) -> str | None:
    """One line saying why bubblewrap cannot confine sessions here, or None when it can."""
    found = shutil.which(BWRAP, path=env.get("PATH"))
    if found is None:
        return missing_bubblewrap(config_source)
    probe = [found, "--ro-bind", "/", "/", "--cap-drop", "ALL", "--unshare-pid", "true"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot start here ({exc}); see routing.sandbox in {config_source}"
    if proc.returncode != 0:
        why = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        return f"bubblewrap cannot start here ({why[0]}); see routing.sandbox in {config_source}"
    return None


def system_mounts() -> tuple[list[Bind], list[tuple[str, Path]]]:
    """The system directories every sandbox shows read-only, and the merged-usr links."""
    binds = [Bind(Path(d)) for d in SYSTEM_DIRS if Path(d).is_dir()]
    links: list[tuple[str, Path]] = []
    for name in MERGED_USR:
        path = Path(name)
        if path.is_symlink():
            links.append((os.readlink(path), path))
        elif path.is_dir():
            binds.append(Bind(path))
    resolv = _real(Path("/etc/resolv.conf"))
    if resolv.exists() and not any(lies_within(resolv, b.path) for b in binds):
        binds.append(Bind(resolv))  # e.g. /run/systemd/resolve/stub-resolv.conf
    return binds, links


def code_dirs() -> list[Path]:
    """Where this installation's Python and the project's code live (read-only inside)."""
    found = {_real(Path(sys.prefix)), _real(Path(sys.base_prefix))}
    found |= {_real(Path(app.__file__).parent), _real(Path(hooks.__file__).parent)}
    return sorted(found)


def secrets(
    *,
    state_dir: Path,
    real_home: Path,
    workspace_root: Path,
    socket_dir: Path,
    env: Mapping[str, str],
) -> list[Secret]:
    """Everything of the App's and the spawner's a session must not see, where it exists."""
    hard_dirs = [state_dir, real_home / ".ssh", workspace_root, socket_dir]
    if state_dir.name == "spawner":
        hard_dirs.append(state_dir.parent)  # the App's state dir, under `the-loop up`
    if env.get("THE_LOOP_STATE_DIR"):
        hard_dirs.append(Path(env["THE_LOOP_STATE_DIR"]))
    hard_files = [Path.cwd() / ".env"]
    if env.get("GITHUB_PRIVATE_KEY_PATH"):
        hard_files.append(Path(env["GITHUB_PRIVATE_KEY_PATH"]))
    found = [Secret(_real(p)) for p in hard_dirs] + system_secrets()
    found += [Secret(_real(p), directory=False) for p in hard_files]
    found.append(Secret(_real(Path.cwd()), hard=False))  # the App's working directory
    return [s for s in found if s.path.exists() and (s.path.is_dir() == s.directory)]


def system_secrets() -> list[Secret]:
    """The system's own secrets inside `/etc`: the known ones (password hashes, the host's
    ssh keys) and whatever else in it is not for every user to read (`unreadable_in`)."""
    found = [Secret(_real(Path(p))) for p in HOST_SECRET_DIRS]
    found += [Secret(_real(Path(p)), directory=False) for p in HOST_SECRET_FILES]
    known = {s.path for s in found}
    found += [s for s in unreadable_in(Path("/etc")) if s.path not in known]
    return [s for s in found if s.path.exists() and (s.path.is_dir() == s.directory)]


def unreadable_in(root: Path, depth: int = ETC_DEPTH, budget: int = ETC_ENTRIES) -> list[Secret]:
    """Files and directories under `root` that other users may not read (a file without
    read for others, a directory without read or search for them): what a sandbox shows
    of `root` must not be more than an unprivileged user of the host sees. Links are not
    followed (what they name is judged where it lies); the walk is bounded in depth and
    entries."""
    found: list[Secret] = []
    pending = [(root, 0)]
    while pending and budget > 0:
        directory, level = pending.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries[:budget]:
            budget -= 1
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            path = Path(entry.path)
            if stat.S_ISDIR(mode):
                if mode & OTHERS_DIR != OTHERS_DIR:
                    found.append(Secret(path))
                elif level + 1 < depth:
                    pending.append((path, level + 1))
            elif stat.S_ISREG(mode) and not mode & stat.S_IROTH:
                found.append(Secret(path, directory=False))
    return found


def trusted_by_variable(env: Mapping[str, str]) -> dict[str, Path]:
    """Each of `CA_VARIABLES` that `env` sets, to the real path of what it names, where that
    exists: what a sandbox shows, and where it shows it."""
    named = {name: _real(Path(env[name])) for name in CA_VARIABLES if env.get(name)}
    return {name: path for name, path in named.items() if path.exists()}


def trusted_certificates(env: Mapping[str, str]) -> list[Path]:
    """The certificate files and directories `env` names (`CA_VARIABLES`) that exist."""
    return sorted(set(trusted_by_variable(env).values()))


def shared_plan(
    *, sandbox: Sandbox, env: Mapping[str, str], hidden: Sequence[Secret]
) -> SandboxPlan:
    """What every session on this machine sees, before its own checkout and home: the
    system, this installation's Python and code, the certificates the spawner's environment
    trusts, the directories under `routing.sandbox`, and a PATH with this installation's
    Python first. Certificates are shown as the operator's directories are: never from
    among the secrets; each variable naming one names its real path, which is where the
    sandbox shows it (a link to it may lie where the sandbox shows nothing)."""
    system, links = system_mounts()
    binds = [*system, *(Bind(p) for p in code_dirs() if p.exists())]
    binds += [Bind(p, own=False) for p in trusted_certificates(env)]
    binds += [Bind(_real(p), own=False) for p in sandbox.read_only if _real(p).exists()]
    binds += [
        Bind(_real(p), writable=True, own=False) for p in sandbox.read_write if _real(p).exists()
    ]
    python_bins = [str(Path(p) / "bin") for p in (sys.prefix, sys.base_prefix)]
    path = os.pathsep.join(dict.fromkeys([*python_bins, env.get("PATH", "/usr/bin:/bin")]))
    return SandboxPlan(
        binds=tuple(binds),
        secrets=tuple(hidden),
        symlinks=tuple(links),
        setenv=(("PATH", path), *((k, str(p)) for k, p in trusted_by_variable(env).items())),
        unsetenv=UNSET,
    )


def host_plan(
    *,
    sandbox: Sandbox,
    checkout: Path,
    home: Path,
    env: Mapping[str, str],
    hidden: Sequence[Secret],
    sockets: Path | None = None,
    managed: tuple[Path, Path] | None = None,
    facts: Path | None = None,
    user: tuple[int, int] | None = None,
) -> SandboxPlan:
    """The plan for one session on this machine. With `sockets` (its closed network's
    directory, see `netgates`) the session gets a network namespace of its own and sees
    that directory read-only at `sandbox.INSIDE_DIR`; `managed` (a directory, and where it
    shows) is the harness's managed settings, read-only; `facts` the stop gate's facts
    file, shown read-only at `stop_gate.FACTS_AT`; `user` (uid, gid) who the session runs
    as, from a sandbox started as root (see `sessionuser`). Its `/tmp` holds at most
    `routing.sandbox.limits.disk`."""
    shared = shared_plan(sandbox=sandbox, env=env, hidden=hidden)
    own = [Bind(_real(checkout), writable=True), Bind(_real(home), writable=True)]
    if sockets is not None:
        own.append(Bind(_real(sockets), inside=Path(INSIDE_DIR)))
    if facts is not None:
        own.append(Bind(_real(facts), inside=Path(FACTS_AT)))
    setenv = (
        ("HOME", str(_real(home))),
        *shared.setenv,
        ("THE_LOOP_STATE_DIR", str(_real(home) / ".local" / "state" / "the-loop")),
    )
    plan = replace(
        shared,
        binds=(*shared.binds, *own),
        setenv=setenv,
        chdir=_real(checkout),
        network=sockets is None,
        user=user,
        tmp_size=int(sandbox.limits.disk) if sandbox.limits.disk is not None else None,
        # The relay inside makes the devbox's listed unix sockets at their own paths.
        scratch=tuple(Path(d) for d in unix_dirs(sandbox.services)) if sockets else (),
    )
    if managed is None:
        return plan
    return with_managed(plan, _real(managed[0]), managed[1])


def with_managed(plan: SandboxPlan, managed: Path, at: Path = MANAGED_DIR) -> SandboxPlan:
    """`plan` showing the directory `managed` read-only as `at` (`/etc/claude-code`, or
    Codex's `/etc/codex`): the managed settings the harness reads and no user or project
    setting overrides.

    A mount needs its mount point, and the sandbox's `/etc` is the host's, read-only. When
    the host has no `at`, `/etc` is shown entry by entry instead (each one bound read-only,
    each link re-made, the secrets among them left out), beside it."""
    inside = Bind(managed, inside=at)
    etc = at.parent
    if at.is_dir() or not any(b.path == etc and b.inside is None for b in plan.binds):
        return replace(plan, binds=(*plan.binds, inside))
    covered = {s.path for s in plan.secrets}
    binds = [b for b in plan.binds if b.path != etc]
    links = list(plan.symlinks)
    for entry in sorted(etc.iterdir()):
        if entry in covered or entry == at:
            continue
        if entry.is_symlink():
            links.append((os.readlink(entry), entry))
        elif entry.exists():
            binds.append(Bind(entry))
    return replace(plan, binds=(*binds, inside), symlinks=tuple(links))


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            return file.read(256)
    except OSError:
        return b""


def locate(name: str, path: str) -> Located:
    """Where `path` (a PATH) finds the harness `name`, resolved, with its script's
    interpreter resolved the same way."""
    found = shutil.which(name, path=path)
    if found is None:
        return Located(name)
    executable = _real(Path(found))
    program = interpreter_of(_head(executable))
    interpreter = None
    if program is not None:
        where = program if os.path.isabs(program) else shutil.which(program, path=path)
        interpreter = _real(Path(where)) if where else None
    return Located(name, Path(os.path.abspath(found)), executable, interpreter)


def harness_exposure(plan: SandboxPlan, name: str, env: Mapping[str, str]) -> Exposure:
    """`plan` showing the harness `name` as this machine has it (see `installs`), found on
    the sandbox's PATH; the spawner's home is where it may be installed."""
    search = dict(plan.setenv).get("PATH") or env.get("PATH", "")
    home = _real(Path(env.get("HOME") or Path.home()))
    return expose(plan, locate(name, search), home)


def confined_argv(
    plan: SandboxPlan,
    argv: Sequence[str],
    env: Mapping[str, str],
    wrap: Callable[[list[str]], list[str]] | None = None,
) -> list[str]:
    """`argv` inside the sandbox, its harness's installation shown read-only; refuses a
    harness the sandbox cannot show. `wrap` turns the harness's argv into what the sandbox
    runs (the closed network's relay in front of it)."""
    exposure = harness_exposure(plan, argv[0], env)
    if exposure.located.found is None:
        raise SandboxError(f"{argv[0]} is not on PATH")
    if exposure.hidden:
        raise SandboxError(
            f"the harness needs {', '.join(map(str, exposure.hidden))}, which the sandbox "
            "cannot show (it lies among the spawner's or the App's private files): install "
            "it elsewhere"
        )
    inner = harness_argv(exposure, argv)
    return sandbox_argv(exposure.plan, wrap(inner) if wrap is not None else inner)
