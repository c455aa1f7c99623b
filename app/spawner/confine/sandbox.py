"""Confining a session with bubblewrap: what it may see is listed, everything else is absent.

A session runs text anyone who can open an issue wrote, with its permission checks off. So it
gets a filesystem of its own: the system directories read-only, the project's code read-only
(the stop gate and `the-loop comment/ask/phase` run inside), the Python it runs on, its
checkout and its own home read-write, its harness's own installation read-only (see
`installs`), and any directory the operator adds under `routing.sandbox`. Nothing else
exists inside — not the spawner's state directory (registry, token, events), not the App's
working directory or `.env`, not another item's checkout, not the real home or `~/.ssh`. It
gets its own PID namespace (no other process, and no other process's environment, is
visible), no capabilities, and dies with the tmux server. Its network is its own
(`--unshare-net`: only a loopback inside, see `netplan`) unless the operator shares the
devbox's (`routing.sandbox.network: host`).

`sandbox_argv` is pure: a `SandboxPlan` of paths in, the bwrap argv out. Where a secret lies
inside a directory that is bound (the App's `.env` inside a directory the operator exposed,
`/etc/shadow` inside `/etc`), it is covered (an empty tmpfs, or `/dev/null` for a file), and
the session's own paths beneath it are bound again on top.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

BWRAP = "bwrap"
INSIDE_DIR = PurePosixPath("/run/the-loop-net")  # where a closed network's sockets show inside
ISOLATION = (
    "--die-with-parent",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--cap-drop",
    "ALL",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
)
# Started as root, the sandbox keeps only what it needs to become the session's user (and
# to enter that user's checkout, mode 0700, as its working directory): the first thing it
# runs drops to that user, with no capability left and none to gain.
DROP_TO = ("setpriv", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--clear-groups")
KEPT_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_DAC_READ_SEARCH")
KEPT_TO_DROP = tuple(word for cap in KEPT_CAPS for word in ("--cap-add", cap))


@dataclass(frozen=True)
class Bind:
    """A directory (or file) visible at the same path inside; `own` ones are the session's
    (system, code, checkout, home), the others were declared by the operator."""

    path: Path
    writable: bool = False
    own: bool = True
    inside: Path | None = None  # shown at another path inside (the session's sockets)

    @property
    def target(self) -> Path:
        return self.inside or self.path


@dataclass(frozen=True)
class Secret:
    """A path no session may see. `hard` ones (state, keys, other checkouts) cannot be
    re-exposed by an operator's directory inside them; a soft one (the App's working
    directory) only stays covered."""

    path: Path
    directory: bool = True
    hard: bool = True


@dataclass(frozen=True)
class SandboxPlan:
    binds: tuple[Bind, ...]
    secrets: tuple[Secret, ...] = ()
    symlinks: tuple[tuple[str, Path], ...] = ()  # (target, link), e.g. ("usr/bin", /bin)
    setenv: tuple[tuple[str, str], ...] = ()
    unsetenv: tuple[str, ...] = ()
    chdir: Path = Path("/")
    network: bool = True  # False: a network namespace of its own, with nothing in it
    # (uid, gid) the session runs as, from a sandbox started as root (None: the caller's).
    user: tuple[int, int] | None = None
    tmp_size: int | None = None  # bytes the session's `/tmp` may hold (None: unbounded)
    # Empty writable directories (a tmpfs each), e.g. where a relayed unix socket is made.
    scratch: tuple[Path, ...] = ()


def unix_dirs(services: Iterable[str]) -> tuple[PurePosixPath, ...]:
    """The directories a closed network's sandbox gets empty and writable (a tmpfs each) so
    the relay inside can make the listed unix sockets there."""
    return tuple(dict.fromkeys(PurePosixPath(s).parent for s in services if s.startswith("/")))


def lies_within(path: Path, parent: Path) -> bool:
    """Is `path` `parent` itself or below it? Lexical (no link is followed: plans hold
    resolved paths), on the paths' parts: `parent in path.parents` says the same but builds a
    path per ancestor, and a plan showing `/etc` entry by entry asks it thousands of times on
    every launch."""
    return path.anchor == parent.anchor and path.parts[: len(parent.parts)] == parent.parts


def kept_binds(plan: SandboxPlan) -> list[Bind]:
    """The plan's binds minus the operator's that equal a secret or lie inside a hard one."""

    def refused(bind: Bind) -> bool:
        return not bind.own and any(
            bind.path == s.path or (s.hard and lies_within(bind.path, s.path)) for s in plan.secrets
        )

    return [b for b in plan.binds if not refused(b)]


def shown(plan: SandboxPlan, path: Path) -> bool:
    """Is `path` visible inside? The deepest bind or cover holding it decides (a cover is
    mounted after a bind at the same depth, so it wins a tie)."""
    deepest: tuple[int, int] | None = None
    for bind in kept_binds(plan):
        if bind.inside is None and lies_within(path, bind.path):
            deepest = max(deepest or (0, 0), (len(bind.path.parts), 0))
    for secret in plan.secrets:
        if lies_within(path, secret.path):
            deepest = max(deepest or (0, 0), (len(secret.path.parts), 1))
    return deepest is not None and deepest[1] == 0


def mount_args(plan: SandboxPlan) -> list[str]:
    """Bind and cover operations, shallowest first, a cover after the bind it lies in."""
    binds = kept_binds(plan)
    ops: list[tuple[int, int, list[str]]] = []
    for bind in binds:
        flag = "--bind" if bind.writable else "--ro-bind"
        ops.append((len(bind.target.parts), 0, [flag, str(bind.path), str(bind.target)]))
    for secret in plan.secrets:
        if not any(b.target != secret.path and lies_within(secret.path, b.target) for b in binds):
            continue  # not inside anything bound: it does not exist in the sandbox
        cover = ["--tmpfs", str(secret.path)]
        if not secret.directory:
            cover = ["--ro-bind", "/dev/null", str(secret.path)]
        ops.append((len(secret.path.parts), 1, cover))
    for path in plan.scratch:
        # The session's relays bind sockets in it: with a user to drop to, anyone's (it
        # exists only in this sandbox), as bubblewrap would otherwise make it root's.
        perms = ["--perms", "1777"] if plan.user is not None else []
        ops.append((len(path.parts), 2, [*perms, "--tmpfs", str(path)]))
    ops.sort(key=lambda op: (op[0], op[1]))
    if plan.user is not None:
        ops = _with_parents(ops, binds, plan)
    return [word for op in ops for word in op[2]]


def _with_parents(
    ops: list[tuple[int, int, list[str]]], binds: list[Bind], plan: SandboxPlan
) -> list[tuple[int, int, list[str]]]:
    """`ops` with, before each bind, the directories bubblewrap would make for it (mode
    0700 when it runs as root, which the session's user could not pass) made searchable
    first: those that lie on the sandbox's own root or inside a cover, not in a bind."""
    containers = [(b.target, False) for b in binds] + [(Path("/tmp"), True)]
    containers += [
        (s.path, True)
        for s in plan.secrets
        if s.directory and any(b.target != s.path and lies_within(s.path, b.target) for b in binds)
    ]
    made: set[Path] = set()
    out: list[tuple[int, int, list[str]]] = []
    for op in ops:
        if op[2][0] in ("--bind", "--ro-bind"):
            target = Path(op[2][2])
            for parent in reversed(target.parents[:-1]):  # shallowest first, `/` aside
                if parent in made or any(c == parent for c, _ in containers):
                    continue
                holding = [(c, t) for c, t in containers if lies_within(parent, c)]
                if holding and not max(holding, key=lambda h: len(h[0].parts))[1]:
                    continue  # inside a bind: the host's own directory
                made.add(parent)
                out.append((op[0], op[1], ["--perms", "0755", "--dir", str(parent)]))
        out.append(op)
    return out


def sandbox_argv(plan: SandboxPlan, argv: Sequence[str]) -> list[str]:
    """The bwrap command that runs `argv` confined by `plan`."""
    words = [BWRAP, *ISOLATION]
    if plan.user is not None:
        words += KEPT_TO_DROP
    if plan.user is not None or plan.tmp_size is not None:
        # A `/tmp` of its own again (ISOLATION's is root's alone), anyone's, bounded.
        words += ["--perms", "1777"]
        if plan.tmp_size is not None:
            words += ["--size", str(plan.tmp_size)]
        words += ["--tmpfs", "/tmp"]
    if not plan.network:
        words.append("--unshare-net")
    if plan.user is not None:  # a link's directory, made searchable before the link makes it
        binds = kept_binds(plan)
        made: list[Path] = []
        for _, link in plan.symlinks:
            for parent in reversed(link.parents[:-1]):
                if parent not in made and not any(lies_within(parent, b.target) for b in binds):
                    made.append(parent)
        for parent in made:
            words += ["--perms", "0755", "--dir", str(parent)]
    for target, link in plan.symlinks:
        words += ["--symlink", target, str(link)]
    words += mount_args(plan)
    for name, value in plan.setenv:
        words += ["--setenv", name, value]
    for name in plan.unsetenv:
        words += ["--unsetenv", name]
    if plan.user is not None:
        uid, gid = plan.user
        argv = [*DROP_TO, f"--reuid={uid}", f"--regid={gid}", "--", *argv]
    return [*words, "--chdir", str(plan.chdir), "--", *argv]
