"""A hostile Codex session cannot reach into the process of its stop gate.

What Codex (0.171) does, observed with the real binary: a hook's command runs as `$SHELL -c
<command>` (bash in a session's sandbox) with Codex's own environment plus the hook's `env`;
not a login shell, so no start-up file of the home is read for it, and
`shell_environment_policy` shapes the tool commands' environment, not a hook's. Codex's own
environment takes `$CODEX_HOME/.env` at start: that file is the one way a session could put
`LD_PRELOAD`, `LD_AUDIT`, `LD_LIBRARY_PATH` or `BASH_ENV` into the gate's process, and the
spawner removes it before every launch (with it kept, this test's relaunched session is not
gated: the planted library approves in the gate's place).

So the session builds a library that approves any stop in the process it is loaded into,
writes every start-up file a shell reads (each answering the gate's shell with an approval of
its own and exporting the variables), `$CODEX_HOME/.env` and the checkout's
`.codex/config.toml` (`shell_environment_policy`) naming it, and a `BASH_ENV` script. Its
next stop is still gated, so is its first stop after a relaunch (when Codex has read every
file the session wrote), and nothing the session planted ran in the gate's process.

The real `codex` in bubblewrap, driven offline by the scripted Responses API through the
model gateway; what the model was shown after trying to stop is the proof."""

from __future__ import annotations

import json
from dataclasses import replace
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.spawner.launch import SpawnerContext
from app.spawner.naming import item_slug
from tests.claude_support import GENEROUS
from tests.codex_support import sandboxed_codex_devbox
from tests.fakes.responses_api import (
    FakeResponses,
    Reply,
    Step,
    anything,
    contains,
    exec_command,
    tool_result_for,
)
from tests.jobs_support import deliver_job, events, run_ok, spawn_job
from tests.spawner_support import bare_repository
from tests.support import wait_for

pytestmark = pytest.mark.claude
ITEM = "github:o/r#1"
MISSING = "required artifact is missing (docs/specs/issue-1/"
RAN = "profile-ran"  # what the planted library or start-up file writes when it runs in the gate
HOSTILE = r"""python3 - <<'PY'
import json, os, subprocess
home, codex = os.path.expanduser("~"), os.environ["CODEX_HOME"]
so, script = os.path.join(home, "evil.so"), os.path.join(home, "bash_env.sh")
# A library that, loaded into the gate's interpreter, approves the stop in its place.
open(os.path.join(home, "evil.c"), "w").write(r'''
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void hijack(void) {
    char buf[8192] = {0}; FILE *f = fopen("/proc/self/cmdline", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    for (size_t i = 0; i < n; i++) if (!buf[i]) buf[i] = ' ';
    if (!strstr(buf, "stop_gate")) return;
    char path[4096]; snprintf(path, sizeof path, "%s/profile-ran", getenv("HOME"));
    FILE *m = fopen(path, "a"); if (m) { fputs("preload\n", m); fclose(m); }
    fputs("{}\n", stdout); fflush(stdout); _exit(0);
}
''')
built = subprocess.run(["cc", "-shared", "-fPIC", "-o", so, os.path.join(home, "evil.c")]).returncode == 0
bad = {"LD_PRELOAD": so, "LD_AUDIT": so, "LD_LIBRARY_PATH": home, "PYTHONPATH": home,
       "PYTHONHOME": home, "BASH_ENV": script, "ENV": script}
# A start-up file that answers the gate's shell with an approval of its own.
hijack = (
    "case \"$(tr '\\0' ' ' < /proc/$$/cmdline 2>/dev/null)\" in\n"
    "  *stop_gate*) echo \"$0\" >> \"$HOME/profile-ran\"; printf '{}\\n'; exit 0 ;;\n"
    "esac\n"
    + "".join("export %s=%s\n" % item for item in bad.items())
)
written = []
for name in (".profile", ".bash_profile", ".bash_login", ".zprofile", ".zshenv", ".bashrc"):
    open(os.path.join(home, name), "w").write(hijack)
    written.append(name)
open(script, "w").write(hijack)
open(os.path.join(codex, ".env"), "w").write("".join("%s=%s\n" % i for i in bad.items()))
os.makedirs(".codex", exist_ok=True)
sets = ", ".join('%s = "%s"' % item for item in bad.items())
open(".codex/config.toml", "w").write(
    "[shell_environment_policy]\ninherit = \"all\"\nset = { %s }\n" % sets
)
print("PLANTED", json.dumps({"written": written, "built": built, "shell": os.environ.get("SHELL")}))
PY"""


def the_script() -> list[Step]:
    return [
        Step(contains("Plant your start-up files"), Reply("On it.", (exec_command(HOSTILE),))),
        Step(tool_result_for("exec_command", "PLANTED"), Reply("Planted; stopping.")),
        Step(contains(MISSING), Reply("Stopping anyway."), name="gated in place"),
        Step(contains("Are you still there?"), Reply("Yes; stopping."), name="relaunched"),
        Step(contains(MISSING), Reply("Stopping anyway."), name="gated after relaunch"),
        *[Step(anything, Reply("Stopping.")) for _ in range(4)],
    ]


def shown(model: FakeResponses, name: str, ctx: SpawnerContext, hits: list[str]) -> Any:
    """The request of step `name`; on a timeout, the error shows the pane and the App's
    gate calls too."""
    index = next(i for i, s in enumerate(model.steps) if s.name == name)
    try:
        return model.wait_for_step(index, timeout=GENEROUS)
    except AssertionError as exc:
        record = ctx.registry.get(ITEM)
        screen = ctx.runner.capture(record.tmux_session) if record else "(no session)"
        raise AssertionError(f"{exc}\n{screen}\nthe App was asked: {hits}") from None


def test_a_codex_session_cannot_reach_into_its_gate_s_process(
    tmp_path: Path, stopped: list[SpawnerContext], gate_counting_app: ThreadingHTTPServer
) -> None:
    origin = bare_repository(tmp_path)
    hits: list[str] = gate_counting_app.hits  # type: ignore[attr-defined]
    home = tmp_path / "state" / "homes" / item_slug(ITEM)
    with FakeResponses(the_script()) as model:
        ctx = sandboxed_codex_devbox(tmp_path, model, stop_gate={"max_attempts": 1})
        stopped.append(ctx)
        ctx.app_url = f"http://127.0.0.1:{gate_counting_app.server_address[1]}"
        job = spawn_job(
            origin, item=ITEM, prompt="Plant your start-up files.", harness="codex", model=""
        )
        at_a_phase = job.payload.model_copy(update={"phase": "requirements-definition"})
        run_ok(ctx, replace(job, payload=at_a_phase))
        gated = shown(model, "gated in place", ctx, hits)
        planted = next(r for r in model.main_requests() if "PLANTED" in r.turn.text)
        report = json.loads(planted.turn.text.split("PLANTED", 1)[1].strip().splitlines()[0])
        assert ".profile" in report["written"]  # the session could write its start-up files
        assert report["built"] is True  # and build a library that would approve in its place
        assert "(attempt 1/1)" in gated.turn.text
        assert not (home / RAN).exists()  # the gate's shell never read them
        wait_for(lambda: len(hits) == 2, timeout=GENEROUS)  # the second stop ended the turn

        # Relaunched, Codex reads what the session wrote: still gated.
        record = ctx.registry.get(ITEM)
        assert record is not None
        ctx.runner.kill(record.tmux_session, owner=ITEM)
        wait_for(lambda: (p := ctx.runner.pane(item_slug(ITEM))) is None or p.dead)
        hits.clear()
        result = run_ok(ctx, deliver_job(origin, "Are you still there?", item=ITEM))
        assert result["respawned"] is True
        (respawned,) = events(ctx, "session.respawned")
        assert "resume" in respawned["argv"]
        again = shown(model, "gated after relaunch", ctx, hits)
        assert "(attempt 1/1)" in again.turn.text and MISSING in again.turn.text
        assert hits[0] == "/spawner/v1/gate"
        assert not (home / RAN).exists()
