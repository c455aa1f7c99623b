"""The repository's own set-up, run in a fresh checkout before its session's harness starts.

What runs (`workspace.setupplan`): the operator's `routing.setup.command`, else the
devcontainer file's lifecycle commands, else `.the-loop/setup`. It is the repository's code,
so it runs exactly as untrusted as the session: the same bubblewrap plan (the checkout and
the session's own home writable, nothing of the spawner's), the same user (never root: see
`sessionuser`), the same closed network (the egress proxy and its allow-list; no model
gateway), the same limits (the session's cgroup or rlimits, entered first), the same
environment (the allow-list of `sessionenv`, plus the proxy's variables), and no credential
at all.

Events say what happens: `session.setup_started`, `session.setup_running` (the time so far,
every HEARTBEAT seconds, for the progress comment), `session.setup_finished` and
`session.setup_failed` (the command, its exit status and the output's tail). A failure
raises `SetupFailed`: the job fails, nothing is launched, and an `execute` tries again.

Warm start (`workspace.prepared`): a set-up that succeeded is kept as a prepared copy under
its manifest key; the next fresh checkout at the same key gets a copy of it instead of
running the set-up again. A reused checkout already set up is left as it is (the session
may have changed it since).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.config import SandboxMode
from app.files import write_text_atomic
from app.spawner.confine.isolation import host_plan, secrets
from app.spawner.confine.sandbox import sandbox_argv
from app.spawner.confine.sessionenv import session_environment
from app.spawner.confine.sessionhome import home_for
from app.spawner.confine.sessionuser import SessionUserError, hand_over, session_user
from app.spawner.naming import item_slug
from app.spawner.spawner_errors import SpawnerError
from app.spawner.steps.netlaunch import closed, open_network
from app.spawner.steps.sessionlimits import (
    close_session_limits,
    enter_session_limits,
    inner_wrap,
)
from app.spawner.workspace import prepared
from app.spawner.workspace.hostgit import HostGit
from app.spawner.workspace.setupplan import (
    DEVCONTAINER_FILES,
    MAX_SETUP_FILE,
    SETUP_SCRIPT,
    Command,
    SetupFileError,
    SetupPlan,
    Stage,
    command_plan,
    devcontainer_plan,
    is_manifest,
    manifest_key,
    script_plan,
    tail,
)

if TYPE_CHECKING:
    from app.spawner.context import SpawnerContext

HEARTBEAT = 30.0  # seconds between `session.setup_running` events
TAIL_LINES = 400
LINE_CHARS = 2000
TAIL_CHARS = 4000  # of the output's tail an event carries
MAX_MANIFEST = 64 * 1024 * 1024
DONE = "setup-done"  # per item: the key its checkout was last set up at


class SetupFailed(SpawnerError, RuntimeError):
    """The repository's set-up failed: the session is not launched."""


@dataclass(frozen=True)
class Ran:
    """How a set-up's run ended: the first failing command (if any) and the output's tail."""

    exit_status: int | None  # None: it ran out of time
    command: Command | None
    tail: str


def _regular(checkout: Path, relative: str, limit: int) -> bytes | None:
    """The bytes of the plain file `relative` in the checkout (None: absent, or a link or
    anything else, or above it a link)."""
    if not prepared.plain_parents(checkout, relative):
        return None
    try:
        fd = os.open(checkout / relative, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        return file.read(limit + 1)


def find_plan(ctx: SpawnerContext, checkout: Path) -> tuple[SetupPlan, dict[str, bytes]] | None:
    """The set-up to run in `checkout` and the files it came from (None: there is none)."""
    command = ctx.config.routing.setup.command
    if command:
        return command_plan(command), {}
    for relative in DEVCONTAINER_FILES:
        data = _regular(checkout, relative, MAX_SETUP_FILE)
        if data is None:
            continue
        if len(data) > MAX_SETUP_FILE:
            raise SetupFileError(f"{relative} is larger than {MAX_SETUP_FILE} bytes")
        return devcontainer_plan(data.decode("utf-8", "replace"), relative), {relative: data}
    script = _regular(checkout, SETUP_SCRIPT, MAX_SETUP_FILE)
    if script is not None and os.access(checkout / SETUP_SCRIPT, os.X_OK):
        return script_plan(), {SETUP_SCRIPT: script}
    return None


def manifests(git: HostGit, checkout: Path) -> dict[str, bytes]:
    """The tracked dependency manifests' contents, by path (a link's own text, never what
    it names)."""
    listed = git.run(checkout, "ls-files", "-z", timeout=300).stdout.split("\0")
    found: dict[str, bytes] = {}
    for path in filter(is_manifest, filter(None, listed)):
        if os.path.islink(checkout / path):
            found[path] = b"link:" + os.readlink(checkout / path).encode()
            continue
        data = _regular(checkout, path, MAX_MANIFEST)
        if data is not None:
            found[path] = data
    return found


def setup_env(ctx: SpawnerContext) -> dict[str, str]:
    """The environment a set-up starts with: a session's, built from the allow-list
    (`sessionenv`), never the spawner's own."""
    return session_environment(ctx.env, ctx.config.routing.sandbox.env.pass_env)


class _Output:
    """The output's last lines, from every command of a stage at once."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=TAIL_LINES)
        self.lock = threading.Lock()

    def read(self, stream: object, label: str) -> None:
        for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
            line = raw.decode("utf-8", "replace")[:LINE_CHARS]
            with self.lock:
                self.lines.append(f"{label}{line if line.endswith(chr(10)) else line + chr(10)}")

    def tail(self) -> str:
        with self.lock:
            return tail(list(self.lines), TAIL_CHARS)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def _run_stage(
    stage: Stage,
    argv_of: Callable[[Command], list[str]],
    cwd: Path,
    env: dict[str, str],
    deadline: float,
    output: _Output,
    tick: Callable[[], None],
) -> tuple[int | None, Command | None]:
    """Run a stage's commands together; (status, command) of the first that failed, or
    (0, None). Past `deadline` every one still running is killed: (None, it)."""
    started: list[tuple[Command, subprocess.Popen[bytes], threading.Thread]] = []
    several = len(stage.commands) > 1
    for command in stage.commands:
        proc = subprocess.Popen(
            argv_of(command),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        label = f"[{command.name}] " if several else ""
        reader = threading.Thread(target=output.read, args=(proc.stdout, label), daemon=True)
        reader.start()
        started.append((command, proc, reader))
    failed: tuple[int | None, Command | None] = (0, None)
    for command, proc, reader in started:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                for _, each, _ in started:
                    _kill(each)
                proc.wait()
                failed = failed if failed[1] else (None, command)
                break
            tick()
            time.sleep(0.2)
        reader.join(timeout=5)
        if proc.returncode and failed[1] is None:
            failed = (proc.returncode, command)
    return failed


def execute(ctx: SpawnerContext, work_item_id: str, checkout: Path, plan: SetupPlan) -> Ran:
    """Run `plan` in `checkout`, confined as the item's session will be."""
    env = setup_env(ctx)
    env["GIT_TERMINAL_PROMPT"] = "0"
    home = home_for(ctx.state_dir, item_slug(work_item_id))
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    sandboxed = ctx.config.routing.sandbox.resolved is not SandboxMode.NONE
    net = open_network(ctx, work_item_id, None) if sandboxed and closed(ctx) else None
    wrap = inner_wrap(ctx, net.wrap if net is not None else None)
    if net is not None:
        env.update(net.env)
    box = None
    if sandboxed:
        try:
            user = session_user()
        except SessionUserError as exc:
            raise SetupFailed(str(exc)) from None
        # As the session will be: its user's tree, nothing set-uid in it.
        hand_over([checkout, home, *([net.sockets] if net is not None else [])], user)
        hidden = secrets(
            state_dir=ctx.state_dir,
            real_home=ctx.home,
            workspace_root=ctx.workspace_root,
            socket_dir=ctx.runner.socket_path.parent,
            env=ctx.env,
        )
        box = host_plan(
            sandbox=ctx.config.routing.sandbox,
            checkout=checkout,
            home=home,
            env=ctx.env,
            hidden=hidden,
            sockets=net.sockets if net is not None else None,
            user=user.ids if user is not None else None,
        )
    else:
        env["HOME"] = str(home)
    output = _Output()
    limit = ctx.config.routing.setup.timeout_seconds
    began = time.monotonic()
    beat = [began]

    def tick() -> None:
        now = time.monotonic()
        if now - beat[0] >= HEARTBEAT:
            beat[0] = now
            ctx.events.emit("session.setup_running", work_item_id, seconds=round(now - began))

    try:
        prefix = enter_session_limits(ctx, work_item_id, [])

        def argv_of(command: Command) -> list[str]:
            inner = wrap(list(command.argv))
            return [*prefix, *(sandbox_argv(box, inner) if box is not None else inner)]

        for stage in plan.stages:
            status, failed = _run_stage(stage, argv_of, checkout, env, began + limit, output, tick)
            if failed is not None:
                return Ran(status, failed, output.tail())
        return Ran(0, None, output.tail())
    finally:
        if ctx.networks is not None:
            ctx.networks.close(work_item_id)
        close_session_limits(ctx, work_item_id)


def _done_file(ctx: SpawnerContext, work_item_id: str) -> Path:
    return ctx.state_dir / DONE / item_slug(work_item_id)


def set_up_here(ctx: SpawnerContext, work_item_id: str, checkout: Path) -> bool:
    """Did a set-up succeed in this item's checkout (the tree there now)?"""
    done = _done_file(ctx, work_item_id)
    try:
        return done.read_text().split(" ", 1)[1].strip() == str(checkout)
    except (OSError, IndexError):
        return False


def run_setup(
    ctx: SpawnerContext, work_item_id: str, repo: str, checkout: Path, *, fresh: bool
) -> None:
    """Set `checkout` up for its session (warm when a prepared copy fits), once per tree:
    a reused checkout already set up is left as it is; a `fresh` one (just cloned) always
    runs. Raises SetupFailed, after its event, when the set-up fails."""
    settings = ctx.config.routing.setup
    if not settings.enabled:
        return
    if fresh:
        _done_file(ctx, work_item_id).unlink(missing_ok=True)
    elif set_up_here(ctx, work_item_id, checkout):
        return
    emit = ctx.events.emit
    try:
        found = find_plan(ctx, checkout)
    except SetupFileError as exc:
        emit("session.setup_failed", work_item_id, level="warning", command="", error=str(exc))
        raise SetupFailed(f"the repository's set-up cannot be read: {exc}") from None
    if found is None or not found[0].stages:
        return
    plan, sources = found
    git = HostGit(ctx.env, confined=ctx.config.routing.sandbox.resolved is not SandboxMode.NONE)
    key = manifest_key(repo, {**manifests(git, checkout), **sources}, plan)
    done = _done_file(ctx, work_item_id)
    store = prepared.store_of(ctx.state_dir, repo)
    shown = [c.shown for c in plan.commands]
    emit("session.setup_started", work_item_id, source=plan.source, commands=shown, key=key)
    began = time.monotonic()
    put = prepared.restore(store, key, checkout) if settings.warm_start else None
    if put is not None:
        seconds = round(time.monotonic() - began, 3)
        emit("session.setup_finished", work_item_id, warm=True, exit_status=0, seconds=seconds)
        _mark_done(done, key, checkout)
        return
    ran = execute(ctx, work_item_id, checkout, plan)
    seconds = round(time.monotonic() - began, 3)
    if ran.command is not None:
        status = "timed out" if ran.exit_status is None else f"exited {ran.exit_status}"
        emit(
            "session.setup_failed",
            work_item_id,
            level="warning",
            command=ran.command.shown,
            step=ran.command.name,
            exit_status=ran.exit_status,
            timed_out=ran.exit_status is None,
            seconds=seconds,
            tail=ran.tail,
        )
        raise SetupFailed(f"the repository's set-up failed: {ran.command.name} {status}")
    kept = False
    if settings.warm_start:
        try:
            kept = prepared.save(store, key, checkout, prepared.produced(git, checkout))
        except OSError as exc:
            emit("session.setup_unkept", work_item_id, level="warning", error=str(exc)[:500])
    emit(
        "session.setup_finished",
        work_item_id,
        warm=False,
        exit_status=0,
        seconds=seconds,
        kept=kept,
        tail=ran.tail,
    )
    _mark_done(done, key, checkout)


def _mark_done(done: Path, key: str, checkout: Path) -> None:
    done.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(done, f"{key} {checkout}\n")
