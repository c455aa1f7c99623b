"""Shared set-up of the spawner benchmarks (bench/spawn.py, followup.py, fleet.py, e2e.py).

Everything real on one machine: a fake GitHub REST server on loopback (the tests' fake), the
App (`create_app`, its inbox worker and spawner API, SQLite) in this process, or with
`Stack(serve=True)` as a `the-loop serve` process (gunicorn, two workers, inbox workers on,
SQLite or `database_url`), and `the-loop spawner` as its own process on its own tmux
socket. The harness is a tiny shell script standing in for `claude`: it records the moment
it was exec'd, then appends each message sent to it (pasted, then its Enter) to a file, so
launch and delivery times are read from the files it writes.

Issues are released the way a human releases them: the labelled webhook, then an
`issue_comment` "the-loop execute" from an authorized user, both signed.
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from benchkit import free_port, percentile, start_process, wait_healthy  # noqa: E402

from app.gate.markers import MARKER_PREFIX, MarkerKind  # noqa: E402
from app.spawner.confine.cgroups import release_spawners_under  # noqa: E402
from app.spawner.session.tmux import TmuxRunner  # noqa: E402
from tests.fakes.github_api import FakeGitHub, generate_private_key_pem  # noqa: E402
from tests.fakes.server import LiveServer  # noqa: E402
from tests.support import fixture_json, post_webhook, with_installation  # noqa: E402

REPO = "Codertocat/Hello-World"
USER = "Codertocat"
SECRET = "bench-webhook-secret"
HARNESS = r"""#!/bin/sh
# Stands in for claude: note when it was exec'd, show an input box (where the spawner pastes
# the first message), then keep each message sent to it. Like claude it asks for bracketed
# paste and holds a paste in its box (its first non-empty line shows there) until the Enter
# after it; then the message shows as one transcript line above a fresh, empty box and is
# appended to a file. The spawner presses Enter once the box shows the paste and confirms it
# from that line. The terminal is read a line at a time, so a paste shows in the box once its
# first line ends: a one-line paste only with its Enter (which then comes seconds late).
date +%s.%N > "$BENCH_DIR/$THE_LOOP_WORK_ITEM.start"
esc=$(printf '\033')
box() { printf '%s\n\342\235\257 %.60s\n%s\n' "$RULE" "$1" "$RULE"; }
redraw() { printf '\033[3A\033[J'; }  # the cursor sits under the box: back to its top rule
stty -echo
printf '\033[?2004hstand-in\n'
box ""
pasting=no msg="" first=""
while IFS= read -r line; do
  case $line in
    "$esc[200~"*) line=${line#"$esc[200~"}; pasting=yes msg="" first="" ;;
  esac
  case $line in
    *"$esc[201~") line=${line%"$esc[201~"}; pasting=no ;;  # this line ended with the Enter
  esac
  msg="$msg$line
"
  if [ -z "$first" ] && [ -n "$line" ]; then
    first=$line
    if [ "$pasting" = yes ]; then redraw; box "$first"; fi
  fi
  [ "$pasting" = yes ] && continue
  if [ -n "$first" ]; then
    printf '%s' "$msg" >> "$BENCH_DIR/$THE_LOOP_WORK_ITEM.stdin"
    redraw; printf '\342\235\257 %.60s\n' "$first"; box ""
  fi
  msg="" first=""
done
"""
RULE = "\u2500" * 40
CHECKLIST_MARKER = MARKER_PREFIX + MarkerKind.CHECKLIST


def summary(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    p50, p99 = percentile(ms, 0.5), percentile(ms, 0.99)
    return (
        f"{name}: n={len(ms)} p50={p50:.0f} ms p99={p99:.0f} ms "
        f"max={max(ms):.0f} ms mean={statistics.mean(ms):.0f} ms"
    )


def git(*args: str, cwd: Path) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(cwd),
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.com",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.com",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


class Stack:
    """Fake GitHub + App + a `the-loop spawner` process, in a temporary directory.

    `serve=True` runs the App as `the-loop serve --workers 2 --threads 8` (its stderr in
    `<tmp>/server-0.log`) instead of in this process, where its GIL would be shared with the
    benchmark's own threads; `database_url` replaces the SQLite file (an empty database)."""

    def __init__(
        self,
        *,
        concurrency: int = 4,
        sandbox: str = "bubblewrap",
        serve: bool = False,
        database_url: str | None = None,
    ) -> None:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self.tmp = Path(tempfile.mkdtemp(prefix="the-loop-bench-"))
        self.bench_dir = self.tmp / "harness"
        self.bench_dir.mkdir()
        self.work = self.tmp / "work"
        self.socket = f"the-loop-bench-{uuid.uuid4().hex[:8]}"
        self.concurrency = concurrency
        self.origin = self._origin()
        self.sandbox = sandbox
        (self.tmp / "bin").mkdir()
        self.harness = self.tmp / "bin" / "claude-standin"
        self.harness.write_text(HARNESS)
        self.harness.chmod(0o755)
        self._comment_ids = iter(range(10_000, 10**9))
        self.spawner: subprocess.Popen[bytes] | None = None
        self.serve = serve
        self.database_url = database_url or f"sqlite:///{self.tmp / 'the-loop.db'}"
        self.app_process: subprocess.Popen[bytes] | None = None

    def _origin(self) -> Path:
        src = self.tmp / "src"
        src.mkdir()
        git("init", "-q", "-b", "main", cwd=src)
        (src / "README.md").write_text("bench\n")
        git("add", ".", cwd=src)
        git("commit", "-q", "-m", "init", cwd=src)
        git("clone", "-q", "--bare", str(src), str(self.tmp / "origin.git"), cwd=self.tmp)
        return self.tmp / "origin.git"

    def __enter__(self) -> Stack:
        from sqlalchemy.orm import Session

        from app.fleet.tokens import create_token

        key = generate_private_key_pem()
        self.fake = FakeGitHub(app_id=4242, private_key_pem=key)
        self.fake.grant(REPO, USER, "write")
        self.github = LiveServer(self.fake.wsgi()).start()
        config = self.tmp / "cli-config.yaml"
        config.write_text(
            f"harnesses:\n  - {{name: claude, default: true, command: {self.harness}, "
            f"args: [--dangerously-skip-permissions]}}\n"
            f"models: [{{name: opus}}]\neffort: [high]\n"
            f"routing: {{workspace: {{root: {self.work}}}, sandbox: {{mode: {self.sandbox}, "
            f"readOnly: [{self.harness.parent}], readWrite: [{self.bench_dir}]}}}}\n"
        )
        self.env = {
            "GITHUB_APP_ID": "4242",
            "GITHUB_PRIVATE_KEY": key,
            "GITHUB_WEBHOOK_SECRET": SECRET,
            "GITHUB_API_URL": self.github.url,
            "DATABASE_URL": self.database_url,
            "THE_LOOP_STATE_DIR": str(self.tmp / "state"),
            "THE_LOOP_CONFIG": str(config),
        }
        if self.serve:
            self._start_serve()
        else:
            self._start_in_process()
        with Session(self.engine) as session, session.begin():
            token = create_token(session, "bench", [REPO])
        self._start_spawner(token)
        return self

    def _start_in_process(self) -> None:
        from app.config.process_settings import load_settings
        from app.runtime.flask_app import create_app

        self.app = create_app(load_settings(self.env, dotenv=None))
        self.state = self.app.extensions["the-loop"]
        self.server = LiveServer(self.app).start()
        self.url = self.server.url
        self.engine = self.state.engine

    def _start_serve(self) -> None:
        """`the-loop serve` as deployed; this process reads and writes the same database."""
        from app.store.engines import make_engine

        port = free_port()
        args = ["serve", "--workers", "2", "--threads", "8"]
        env = {**os.environ, **self.env, "PORT": str(port)}
        self.app_process = start_process(args, env, self.tmp)
        self.url = f"http://127.0.0.1:{port}"
        if not wait_healthy(self.url):
            raise RuntimeError(f"the-loop serve did not start; see {self.tmp}/server-0.log")
        self.engine = make_engine(self.database_url)

    def _start_spawner(self, token: str) -> None:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.tmp / "home"),
            "PYTHONPATH": str(ROOT),
            "BENCH_DIR": str(self.bench_dir),
            "RULE": RULE,
            "THE_LOOP_URL": self.url,
            "THE_LOOP_SPAWNER_TOKEN": token,
            "THE_LOOP_CONFIG": self.env["THE_LOOP_CONFIG"],
            "THE_LOOP_STATE_DIR": str(self.tmp / "spawner-state"),
            # The stand-in harness never asks the model, but a launch needs a credential for
            # the model gateway to answer with, as on any devbox.
            "ANTHROPIC_API_KEY": "sk-ant-bench-stand-in-never-sent-000000",
        }
        (self.tmp / "home").mkdir()
        self._log = open(self.tmp / "spawner.log", "wb")  # noqa: SIM115 (closed in __exit__)
        self.spawner = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "spawner",
                "--name",
                "bench",
                "--tmux-socket",
                self.socket,
                "--concurrency",
                str(self.concurrency),
                "--watchdog-interval",
                "5",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        deadline = time.monotonic() + 30
        while not self._registered():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the spawner did not register; see {self.tmp}/spawner.log")
            time.sleep(0.05)

    def _registered(self) -> bool:
        from sqlalchemy import select
        from sqlalchemy.orm import Session

        from app.store.tables import Spawner

        with Session(self.engine) as session:
            return any(s.serves is not None for s in session.scalars(select(Spawner)))

    def __exit__(self, *exc: object) -> None:
        if self.spawner is not None:
            self.spawner.terminate()
            try:
                self.spawner.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.spawner.kill()
            self._log.close()
        TmuxRunner(self.socket).kill_server()
        release_spawners_under([self.tmp])  # its sessions' cgroups end with the bench
        if self.app_process is not None:
            os.killpg(self.app_process.pid, signal.SIGTERM)
            self.app_process.wait(timeout=30)
        else:
            self.server.stop()
            self.state.stop_workers()
        self.engine.dispose()
        self.github.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- what a human does on GitHub --------------------------------------------------------

    def webhook(self, event: str, payload: dict[str, Any]) -> None:
        response = post_webhook(self.url, event, payload, secret=SECRET)
        if response.status_code != 202:
            raise RuntimeError(f"{event}: {response.status_code} {response.text}")

    def label(self, number: int) -> None:
        payload = copy.deepcopy(with_installation(fixture_json("github/issues.labeled.json")))
        payload["label"]["name"] = "the-loop: auto-execute"
        payload["issue"]["number"] = number
        payload["repository"]["clone_url"] = str(self.origin)
        self.webhook("issues", payload)

    def comment(self, number: int, body: str) -> None:
        payload = copy.deepcopy(fixture_json("github/issue_comment.created.with-installation.json"))
        payload["issue"]["number"] = number
        payload["comment"].update(body=body, id=next(self._comment_ids))
        payload["comment"]["user"]["login"] = USER
        self.webhook("issue_comment", payload)

    def checklist_posted(self, number: int) -> bool:
        from app.store.tables import WorkItem

        with self._session() as session:
            item = session.get(WorkItem, f"github:{REPO}#{number}")
            return item is not None and item.checklist_comment_id is not None

    def checklist_on_github(self, number: int) -> bool:
        """Whether the App's checklist comment was created on issue `number` of the fake."""
        return any(
            CHECKLIST_MARKER in str(c["body"]) for c in self.fake.issue_comments(REPO, number)
        )

    def _session(self) -> Any:
        from sqlalchemy.orm import Session

        return Session(self.engine)

    def warm_checkout(self, number: int) -> None:
        """Clone the item's tree ahead of time, as a respawn or an earlier run left it."""
        from app.spawner.workspace.checkout import checkout_dir

        self.work.mkdir(exist_ok=True)
        target = checkout_dir(self.work, f"github:{REPO}#{number}")
        git("clone", "-q", str(self.origin), str(target), cwd=self.tmp)

    # -- what the stand-in harness saw ------------------------------------------------------

    def started_at(self, number: int) -> float | None:
        path = self.bench_dir / f"issue-{number}.start"
        text = path.read_text().strip() if path.exists() else ""
        return float(text) if text else None

    def received(self, number: int, text: str) -> bool:
        path = self.bench_dir / f"issue-{number}.stdin"
        return path.exists() and text.encode() in path.read_bytes()

    def spawner_rss_kib(self) -> tuple[int, int]:
        """(VmRSS, VmHWM) of the spawner process, in KiB."""
        assert self.spawner is not None
        status = Path(f"/proc/{self.spawner.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def wait_until(predicate: Any, timeout: float = 30.0, interval: float = 0.002) -> float:
    """Poll until true; returns the time it became true (time.time())."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached within {timeout}s")
        time.sleep(interval)
    return time.time()


def release(stack: Stack, number: int) -> float:
    """Label issue `number`, wait for its checklist, then reply execute; returns when it was
    sent (the clock of the spawn benchmark starts there)."""
    stack.label(number)
    wait_until(lambda: stack.checklist_posted(number), interval=0.01)
    sent = time.time()
    stack.comment(number, "the-loop execute\n\n- [x] model-opus\n- [x] effort-high")
    return sent


def launched(stack: Stack, number: int, timeout: float = 30.0) -> float:
    wait_until(lambda: stack.started_at(number) is not None, timeout=timeout)
    started = stack.started_at(number)
    assert started is not None
    return started


threading.excepthook = lambda args: None  # a server thread ending at shutdown is not a result
