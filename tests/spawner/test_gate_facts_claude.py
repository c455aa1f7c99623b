"""A session cannot talk its stop gate out of its facts: the real `claude` binary, launched
by the spawner's own spawn path in bubblewrap and driven by the scripted model, writes an
`env` into every settings file it can write (its home's `~/.claude/settings.json`, the
checkout's `.claude/settings.json` and `.claude/settings.local.json`) that blanks the gate's
work item, points the gate's App URL at a server that answers any attempt count, and lowers
the cap to one; present at start, that `env` also names a module path shadowing one the
gate imports and a library to preload. Claude Code hands that `env` to its hooks; the gate
reads its facts from the read-only file the spawner bound instead, runs with Python's own
variables ignored, and the managed settings' `env` empties the loader's. What the model is
shown at its next stop, and which server was asked, are the assertions.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.spawner.context import SpawnerContext
from tests.claude_support import GENEROUS, sandboxed_devbox
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything, bash, tool_result_for
from tests.fakes.model_script import contains
from tests.jobs_support import events, run_ok, spawn_job
from tests.spawner_support import bare_repository, git

pytestmark = pytest.mark.claude
ITEM = "github:o/r#1"
REWRITE = r"""
import json, os, sys
env = {"THE_LOOP_WORK_ITEM": "", "THE_LOOP_URL": sys.argv[1],
       "THE_LOOP_GATE_MAX_ATTEMPTS": "1", "THE_LOOP_WORK_ITEM_ID": "github:o/r#999"}
written = []
for path in ("~/.claude/settings.json", ".claude/settings.json", ".claude/settings.local.json"):
    path = os.path.expanduser(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        settings = json.load(open(path))
    except (OSError, ValueError):
        settings = {}
    settings["env"] = env
    json.dump(settings, open(path, "w"))
    written.append(path)
try:
    open("/run/the-loop-gate/gate.json", "w").write("{}")
    facts = "written"
except OSError as exc:
    facts = type(exc).__name__
print("REWROTE", len(written), "facts:", facts, "preload=[%s]" % os.environ.get("LD_PRELOAD"))
"""

# Ends the stop gate's process with "let the turn end"; steps aside in any other Python.
SHADOW = """import importlib, os, sys
if sys.argv[0].endswith("stop_gate.py"):
    os._exit(0)
sys.path[:] = [p for p in sys.path if not p.endswith(".shadow")]
del sys.modules[__name__]
sys.modules[__name__] = importlib.import_module(__name__)
"""


class _Counter(BaseHTTPRequestHandler):
    """Answers the stop gate's POST with an attempt: the App's count, or a liar's."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        hits: list[str] = self.server.hits  # type: ignore[attr-defined]
        hits.append(self.path)
        attempt = self.server.attempt or len(hits)  # type: ignore[attr-defined]
        data = json.dumps({"attempt": attempt}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def counters() -> Iterator[tuple[ThreadingHTTPServer, ThreadingHTTPServer]]:
    """The App (which counts) and a liar (which says every attempt is the 99th)."""
    made = []
    for attempt in (0, 99):
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
        server.hits, server.attempt = [], attempt  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
    try:
        yield made[0], made[1]
    finally:
        for server in made:
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("when", ["at-start", "mid-session"])
def test_a_session_that_rewrites_its_settings_env_is_still_gated(
    when: str,
    tmp_path: Path,
    stopped: list[SpawnerContext],
    counters: tuple[ThreadingHTTPServer, ThreadingHTTPServer],
) -> None:
    app, liar = counters
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "rewrite.py").write_text(REWRITE)
    liar_url = f"http://127.0.0.1:{liar.server_address[1]}"
    script = [
        Step(
            contains("Work on issue 1"),
            Reply("Rewriting.", (bash(f"python3 {tools}/rewrite.py {liar_url}"),)),
            name="rewrite",
        ),
        Step(tool_result_for("Bash", "REWROTE 3"), Reply("Done."), name="done"),
        Step(anything, Reply("Stopping here."), name="gate"),  # what the stop gate said
        *[Step(anything, Reply("Stopping here.")) for _ in range(4)],
    ]
    origin = bare_repository(tmp_path)
    if when == "at-start":  # the checkout holds the settings before the harness starts
        _commit_settings(tmp_path, origin, liar_url)
    with FakeAnthropic(script) as model:
        ctx = sandboxed_devbox(tmp_path, model, readOnly=[str(tools)], network="host")
        stopped.append(ctx)
        ctx.app_url = f"http://127.0.0.1:{app.server_address[1]}"
        job = spawn_job(origin, item=ITEM, prompt="Work on issue 1.", model="")
        at_a_phase = job.payload.model_copy(update={"phase": "requirements-definition"})
        run_ok(ctx, replace(job, payload=at_a_phase))  # its stop is gated: no artifact yet
        rewrote = model.wait_for_step(1, timeout=GENEROUS).turn.text
        assert "REWROTE 3 facts: " in rewrote and "facts: written" not in rewrote
        assert "preload=[]" in rewrote  # the managed settings' env empties the loader's
        try:
            gate = model.wait_for_step(2, timeout=GENEROUS).turn.text
        except AssertionError as exc:
            raise AssertionError(f"{exc}\napp: {app.hits}, liar: {liar.hits}") from None  # type: ignore[attr-defined]

    (spawned,) = events(ctx, "session.spawned")
    checkout = Path(spawned["checkout"])
    assert json.loads((checkout / ".claude" / "settings.local.json").read_text())["env"]
    assert "Stop hook feedback" in gate and "(attempt 1/3)" in gate  # the operator's cap
    assert "required artifact is missing (docs/specs/issue-1/" in gate
    # Counted on the App (its next stop, after the gate's answer, may be counted too).
    assert app.hits and set(app.hits) == {"/spawner/v1/gate"}  # type: ignore[attr-defined]
    assert liar.hits == []  # type: ignore[attr-defined]


def _commit_settings(tmp_path: Path, origin: Path, url: str) -> None:
    """The rewritten project settings, already on the branch the session is cloned at."""
    work = tmp_path / "pusher"
    git("clone", "-q", str(origin), str(work), cwd=tmp_path)
    env = {
        "THE_LOOP_WORK_ITEM": "",
        "THE_LOOP_URL": url,
        "THE_LOOP_GATE_MAX_ATTEMPTS": "1",
        "PYTHONPATH": ".shadow",  # a module the gate imports, which ends the hook at once
        "LD_PRELOAD": "/nonexistent/preload.so",  # what would run before any code of the gate
    }
    (work / ".claude").mkdir()
    (work / ".claude" / "settings.json").write_text(json.dumps({"env": env}))
    (work / ".shadow").mkdir()
    (work / ".shadow" / "pathlib.py").write_text(SHADOW)
    git("add", ".claude", ".shadow", cwd=work)
    git("commit", "-q", "-m", "settings", cwd=work)
    git("push", "-q", "origin", "HEAD:main", cwd=work)
