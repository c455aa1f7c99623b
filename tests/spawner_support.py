"""Test helpers for the spawner: a stand-in harness that records what it was started with,
a tmux runner on a unique socket, and a local bare git repository to clone."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from app.audit import read_jsonl
from app.config.operator_config import OperatorConfig
from app.gateway.access import open_model_access, without_credentials
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.registry import Registry, SessionRecord
from app.spawner.session.tmux import TmuxRunner
from app.spawner.session.watchdog import Watchdog
from tests.support import wait_for

# What these test devboxes' operators pass to their sessions (`routing.sandbox.env.passEnv`):
# this tree's code for a session's `the-loop`, git kept off the machine's own config, a
# committer, and a harness that calls no one at start.
TEST_PASS_ENV = (
    "PYTHONPATH",
    "PYTHONDONTWRITEBYTECODE",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "DISABLE_AUTOUPDATER",
    "DISABLE_TELEMETRY",
    "DISABLE_ERROR_REPORTING",
)
STANDIN = r"""#!{python}
# Stand-in harness: records argv, cwd, env and raw stdin under {records}/<work item>/.
# What a run does comes from plan.json there (one entry per start: {{"exit": n}} or
# {{"screen": text[, "until_key": true]}}, after an optional {{"transcript": [entries]}} written
# where Claude Code keeps it and {{"commit": {{path: text}}}}), or, for a direct tmux test, from its last
# argument (EXIT:n, SCREEN:path). Otherwise it shows Claude Code's input box (the sign that a
# pasted message lands), keeps every byte that reaches its terminal and echoes each message.
import json, os, sys, time, tty, urllib.parse
item = os.environ.get("THE_LOOP_WORK_ITEM_ID") or os.environ.get("THE_LOOP_WORK_ITEM")
out = os.path.join({records!r}, urllib.parse.quote(item or "standing-" + os.getcwd(), safe=""))
os.makedirs(out, exist_ok=True)
n = len([f for f in os.listdir(out) if f.startswith("start")])
with open(os.path.join(out, ".tmp"), "w") as fh:
    json.dump({{"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ), "ts": time.time()}}, fh)
os.replace(os.path.join(out, ".tmp"), os.path.join(out, f"start{{n}}.json"))
plan_file = os.path.join(out, "plan.json")
plan = json.load(open(plan_file)) if os.path.exists(plan_file) else []
step = plan[n] if n < len(plan) else {{}}
last = sys.argv[-1]
if last.startswith("EXIT:"):
    step = {{"exit": int(last[5:])}}
elif last.startswith("SCREEN:"):
    step = {{"screen": open(last[7:]).read()}}
if "--resume" in sys.argv and os.path.exists(os.path.join({records!r}, "no-resume")):
    print("No conversation found with session ID: " + sys.argv[sys.argv.index("--resume") + 1])
    sys.exit(1)
if "transcript" in step:  # what Claude Code would have written in its home
    flag = "--session-id" if "--session-id" in sys.argv else "--resume"
    sid = sys.argv[sys.argv.index(flag) + 1] if flag in sys.argv else "none"
    slug = "".join(c if c.isalnum() else "-" for c in os.getcwd())
    folder = os.path.join(os.environ["HOME"], ".claude", "projects", slug)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, sid + ".jsonl"), "a") as fh:
        for entry in step["transcript"]:
            fh.write(json.dumps(entry) + "\n")
if "commit" in step:  # files the agent changed and committed on its branch
    import subprocess
    for name, text in step["commit"].items():
        os.makedirs(os.path.dirname(os.path.abspath(name)), exist_ok=True)
        with open(name, "w") as fh:
            fh.write(text)
    subprocess.run(["git", "add", "-A"], check=True, capture_output=True)
    who = ["-c", "user.name=agent", "-c", "user.email=agent@example.com"]
    subprocess.run(["git", *who, "commit", "-qm", "work"], check=True, capture_output=True)
if "exit" in step:
    print("exiting as asked", flush=True)
    time.sleep(0.1)
    sys.exit(step["exit"])
if os.isatty(0):
    tty.setraw(0)
rule = "\u2500" * 40
box = "stand-in harness\r\n\r\n" + rule + "\r\n\u276f \r\n" + rule + "\r\n"
boxed = True  # the box is the last thing on the pane: a paste can be shown in it
if "screen" in step:
    sys.stdout.write(step["screen"].replace("\n", "\r\n"))
    boxed = False
    if step.get("until_key"):  # a human answers the screen with a key, then it goes away
        sys.stdout.flush()
        os.read(0, 1)
        sys.stdout.write("\x1b[2J\x1b[H" + box)
        boxed = True
else:
    sys.stdout.write(box)
sys.stdout.write("\x1b[?2004h")
sys.stdout.flush()


def show_in_box(line):
    # The cursor sits under the box's bottom rule: up two, rewrite the prompt line, back.
    if boxed:
        sys.stdout.write("\x1b[2A\r\x1b[2K\u276f " + line + "\r\x1b[2B")
        sys.stdout.flush()


# Like claude, a paste is held in the box (its first non-empty line shows) until an Enter
# that follows it; the message then shows as one transcript line above a fresh, empty box.
pending, held, in_paste = b"", None, False
with open(os.path.join(out, "stdin.bin"), "ab") as fh:
    while True:
        data = os.read(0, 65536)
        if not data:
            break
        fh.write(data)
        fh.flush()
        pending += data
        while True:
            if in_paste:
                end = pending.find(b"\x1b[201~")
                if end < 0:
                    break
                text = pending[:end].decode("utf-8", "replace")
                pending, in_paste = pending[end + 6 :], False
                held = next((ln for ln in text.splitlines() if ln.strip()), "")[:60]
                show_in_box(held)
                continue
            start, enter = pending.find(b"\x1b[200~"), pending.find(b"\r")
            if enter >= 0 and (start < 0 or enter < start):
                pending = pending[enter + 1 :]
                if held is not None:
                    show_in_box("")
                    sys.stdout.write("\r\n\u276f " + held + "\r\n\r\n" + box)
                    sys.stdout.flush()
                    held, boxed = None, True
                continue
            if start >= 0:
                pending, in_paste = pending[start + 6 :], True
                continue
            pending = pending[-5:]  # the start of a paste's marker is kept until it is whole
            break
"""


class StandIn:
    """A harness executable written for the test, and what its runs recorded.

    Both live apart from everything else of the test (`<dir>/standin/`), so a sandboxed
    session can be shown exactly them: `sandbox` is the `routing.sandbox` that does.
    """

    def __init__(self, directory: Path, script: str = STANDIN) -> None:
        base = directory / "standin"
        self.records = base / "records"
        self.records.mkdir(parents=True, exist_ok=True)
        self.records.chmod(0o777)  # a spawner run as root runs sessions as another user
        (base / "bin").mkdir()
        self.path = base / "bin" / "standin-harness"
        self.path.write_text(script.format(python=sys.executable, records=str(self.records)))
        self.path.chmod(0o755)

    @property
    def sandbox(self) -> dict[str, Any]:
        """The `routing.sandbox` that lets a sandboxed session run this harness and record."""
        return {"readOnly": [str(self.path.parent)], "readWrite": [str(self.records)]}

    def folder(self, work_item_id: str) -> Path:
        """Where the runs of `work_item_id` record (one folder per exact work item id), made
        writable for the session's user (not the test's when the test runs as root)."""
        folder = self.records / quote(work_item_id, safe="")
        folder.mkdir(exist_ok=True)
        folder.chmod(0o777)
        return folder

    def starts(self, work_item_id: str) -> list[dict[str, Any]]:
        folder = self.folder(work_item_id)
        files = sorted(folder.glob("start*.json"), key=lambda p: int(p.stem[5:]))
        return [json.loads(f.read_text()) for f in files]

    def wait_start(self, work_item_id: str, count: int = 1, timeout: float = 10) -> dict[str, Any]:
        wait_for(lambda: len(self.starts(work_item_id)) >= count, timeout=timeout)
        return self.starts(work_item_id)[count - 1]

    def stdin(self, work_item_id: str) -> bytes:
        path = self.folder(work_item_id) / "stdin.bin"
        return path.read_bytes() if path.exists() else b""

    def plan(self, work_item_id: str, *steps: dict[str, Any]) -> None:
        """What the next starts of `work_item_id` do, in order ({"exit": n}, {"screen": text},
        or {} for an ordinary session; any of them may first write a `transcript` and
        `commit` files); later starts are ordinary."""
        self.folder(work_item_id).mkdir(parents=True, exist_ok=True)
        (self.folder(work_item_id) / "plan.json").write_text(json.dumps(list(steps)))

    def refuse_resume(self) -> None:
        (self.records / "no-resume").touch()


@pytest.fixture
def standin(tmp_path: Path) -> StandIn:
    return StandIn(tmp_path)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def runner(home: Path) -> Iterator[TmuxRunner]:
    """A tmux runner on a socket of its own; the server is killed at teardown."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    tmux = TmuxRunner(f"the-loop-test-{uuid.uuid4().hex[:10]}", env=env)
    try:
        yield tmux
    finally:
        tmux.kill_server()


def git(*args: str, cwd: Path | None = None) -> str:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd or Path.cwd()),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        # The session's user owns the checkout when the tests run as root.
        "GIT_CONFIG_PARAMETERS": "'safe.directory=*'",
    }
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


def bare_repository(tmp_path: Path, name: str = "origin.git") -> Path:
    """A bare repository with one commit on `main`, usable as a `clone_url`."""
    work = tmp_path / f"{name}-src"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    (work / "README.md").write_text("hello\n")
    git("add", "README.md", cwd=work)
    git("commit", "-q", "-m", "init", cwd=work)
    bare = tmp_path / name
    git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    return bare


class Fleet:
    """Sessions started straight in tmux panes, with a registry, events and a watchdog."""

    def __init__(self, runner: TmuxRunner, tmp_path: Path) -> None:
        self.runner = runner
        self.registry = Registry(tmp_path / "sessions.json")
        self.events = SpawnerEvents(tmp_path)
        self.dog = Watchdog(runner, self.registry, self.events.emit)
        self.tmp = tmp_path

    def start(self, name: str, script: str) -> SessionRecord:
        target = self.runner.start(name, self.tmp, ["sh", "-c", script], owner=f"github:o/r#{name}")
        return self.registry.put(
            SessionRecord(
                work_item_id=f"github:o/r#{name}",
                harness="claude",
                model="",
                effort="",
                harness_args=[],
                session_id=f"sid-{name}",
                tmux_session=name,
                tmux_target=target,
                checkout=str(self.tmp),
                interaction="work-item",
            )
        )

    def events_named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in read_jsonl(self.events.path) if e["event"] == name]

    def state(self, name: str) -> str:
        record = self.registry.get(f"github:o/r#{name}")
        assert record is not None
        return record.state


@pytest.fixture
def fleet(runner: TmuxRunner, tmp_path: Path) -> Fleet:
    return Fleet(runner, tmp_path)


BRANCH = "the-loop/issue-7"


def on_branch(job: ClaimedJob) -> ClaimedJob:
    """`job` naming the work branch, as the App's jobs do."""
    payload = job.payload.model_copy(update={"branch": BRANCH})
    return dataclasses.replace(job, payload=payload)


def talk_unix(path: Path, data: bytes) -> bytes:
    """Send `data` to the socket at `path` (reached through its directory's descriptor: the
    path is too long to name), then read until the far side is done."""
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(30)
        try:
            conn.connect(f"/proc/self/fd/{folder}/{path.name}")
        finally:
            os.close(folder)
        conn.sendall(data)
        conn.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := conn.recv(4096):
            got += chunk
        return got


ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def spawner_process(env: Mapping[str, str], state_dir: Path, *args: str) -> Iterator[Path]:
    """`the-loop spawner …` as the operator runs it, in a process of its own with `env` (its
    App, its token, the operator's model key), until its control socket in `state_dir`
    answers; yields that socket, and stops the spawner as a signal does on leaving. Its log
    is shown when it ends before serving."""
    state_dir.parent.mkdir(parents=True, exist_ok=True)
    log = state_dir.parent / f"spawner-{uuid.uuid4().hex[:6]}.log"
    control = state_dir / "control.sock"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "spawner", *args],
            cwd=ROOT,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: control.exists() or proc.poll() is not None, timeout=60)
        if proc.poll() is not None:
            raise AssertionError(f"the spawner exited {proc.returncode}:\n{log.read_text()}")
        yield control
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def gateway_url(state_dir: Path) -> str:
    """The model gateway's URL, as the spawner running on `state_dir` keeps its port there."""
    port = json.loads((state_dir / "gateway.json").read_text())["port"]
    return f"http://127.0.0.1:{port}"


def ask_model(gateway: str, key: str) -> httpx.Response:
    """One side request (no tools: it spends no step of a scripted model) to the model
    gateway at `gateway`, with `key` as the session's credential."""
    body = {
        "model": "claude-haiku-4",
        "max_tokens": 8,
        "tools": [],
        "messages": [{"role": "user", "content": "hi"}],
    }
    return httpx.post(gateway + "/v1/messages", headers={"x-api-key": key}, json=body, timeout=60)


def gateway_context(
    config: OperatorConfig,
    env: Mapping[str, str],
    home: Path,
    state: Path,
    *,
    tmux: str,
    size: tuple[int, int] = (160, 50),
    hosts: frozenset[str] = frozenset({"claude"}),
    app_url: str = "http://127.0.0.1:9",
    client: Any = None,
    upstream_env: Mapping[str, str] | None = None,
    **options: Any,
) -> SpawnerContext:
    """A spawner's context as `the-loop spawner` builds it: its own tmux server (`tmux`-<id>),
    registry and event queue under `state`, clone tokens asked of the App through `client`,
    the operator's model credential read once from
    `upstream_env` (default `env`) into its model gateway and kept out of what sessions
    inherit."""
    pass_env = [*config.routing.sandbox.env.pass_env, *TEST_PASS_ENV]
    runner = TmuxRunner(
        f"{tmux}-{uuid.uuid4().hex[:8]}", env=dict(env), pass_env=pass_env, size=size
    )
    events = SpawnerEvents(state, client)
    return SpawnerContext(
        config=config,
        runner=runner,
        registry=Registry(state / "sessions.json"),
        events=events,
        home=home,
        state_dir=state,
        app_url=app_url,
        hosts=hosts,
        env=without_credentials(env),
        models=open_model_access(config, upstream_env or env, events.emit),
        ask_token=client.job_token if client is not None else None,
        **options,
    )


# The sandbox modes a launch test runs in: `none` only where the tests do not run as root (a
# root spawner refuses it: its unconfined sessions would run as root).
SANDBOX_MODES = [
    "bubblewrap",
    pytest.param(
        "none",
        marks=pytest.mark.skipif(os.geteuid() == 0, reason="a root spawner refuses mode: none"),
    ),
]


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(b"echo: " + self.rfile.readline())


@pytest.fixture
def far_echo() -> Iterator[int]:
    """A TCP server on loopback that answers a line with `echo: <line>`: a far host a
    session's proxy lets through, or not; its port."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
