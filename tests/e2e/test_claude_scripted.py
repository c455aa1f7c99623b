"""The real Claude Code binary, interactive in tmux, driven offline by the scripted model: it
runs the tools the script calls in its working directory, sends their results back, obeys a
Stop hook that blocks, reads pasted follow-ups, and its side requests are answered without
disturbing the script. Timings are printed in the run's summary, never asserted."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.claude_support import Launcher, report_timing
from tests.fakes.anthropic import (
    SIDE_TEXT,
    Reply,
    Step,
    bash,
    contains,
    tool_result_for,
    write,
)
from tests.support import wait_for

pytestmark = pytest.mark.claude

STOP_HOOK = r"""
import json, os, sys, time
event = json.load(sys.stdin)
event["at"] = time.monotonic()  # system-wide clock: comparable with the fake's records
log = {log!r}
with open(log, "a") as fh:
    fh.write(json.dumps(event) + "\n")
blocked = sum(1 for line in open(log) if '"stop_hook_active": true' in line)
if not os.path.exists(os.path.join(event["cwd"], "design.md")) and blocked < 3:
    print("design.md is missing: write it before you stop", file=sys.stderr)
    sys.exit(2)
"""


def test_a_scripted_write_creates_the_file_and_its_result_comes_back(
    scripted_claude: Launcher, tmp_path: Path
) -> None:
    work = tmp_path / "repo"
    target = work / "notes.txt"
    script = [
        Step(
            contains("create the notes"), Reply("Creating it.", (write(str(target), "one\ntwo\n"),))
        ),
        Step(tool_result_for("Write"), Reply("Created notes.txt.")),
    ]
    session = scripted_claude(script, "please create the notes", workdir=work)
    asked = session.wait_step(0)
    answered = session.wait_step(1)
    report_timing("launch → first model request", asked.at - session.launched)

    assert target.read_text() == "one\ntwo\n"
    sent_id = next(b["id"] for b in asked.reply if b["type"] == "tool_use")
    (result,) = answered.turn.results
    assert result.tool_use_id == sent_id and not result.is_error
    assert str(target) in result.content
    session.wait_screen("Created notes.txt.")
    session.api.assert_script_done()


def test_b_a_bash_call_runs_in_the_workdir_and_its_output_comes_back(
    scripted_claude: Launcher, tmp_path: Path
) -> None:
    work = tmp_path / "repo"
    command = "printf 'from the shell\\n' > shell.txt && echo \"ran in $(pwd)\""
    script = [
        Step(contains("run the command"), Reply(tools=(bash(command),))),
        Step(tool_result_for("Bash", "ran in"), Reply("The command ran.")),
    ]
    session = scripted_claude(script, "run the command", workdir=work)
    answered = session.wait_step(1)

    assert (work / "shell.txt").read_text() == "from the shell\n"
    (result,) = answered.turn.results
    assert result.content.strip() == f"ran in {work}"
    session.api.assert_script_done()


def test_c_a_blocking_stop_hook_continues_the_turn_with_its_reason(
    scripted_claude: Launcher, tmp_path: Path
) -> None:
    work = tmp_path / "repo"
    hook, log = tmp_path / "stop_hook.py", tmp_path / "stop_hook.log"
    hook.write_text(STOP_HOOK.format(log=str(log)))
    script = [
        Step(contains("finish up"), Reply("All finished.")),
        Step(
            contains("design.md is missing"),
            Reply("Writing the design.", (write(str(work / "design.md"), "# Design\n"),)),
        ),
        Step(tool_result_for("Write"), Reply("Design written; stopping now.")),
    ]
    command = shlex.join([sys.executable, "-S", str(hook)])
    session = scripted_claude(script, "finish up", stop_hook=command, workdir=work)
    blocked = session.wait_step(1)
    session.wait_step(2)

    # The model was shown the hook's own words as the newest user turn.
    assert "design.md is missing: write it before you stop" in blocked.turn.text
    assert "Stop hook" in blocked.turn.text
    assert (work / "design.md").read_text() == "# Design\n"
    events = wait_for(lambda: len(lines := log.read_text().splitlines()) >= 2 and lines)
    first, last = json.loads(events[0]), json.loads(events[-1])
    assert (first["stop_hook_active"], first["last_assistant_message"]) == (False, "All finished.")
    assert last["last_assistant_message"] == "Design written; stopping now."
    report_timing("stop hook blocks → next model request", blocked.at - first["at"])
    session.api.assert_script_done()


def test_d_pasted_follow_ups_reach_the_model_as_user_messages(
    scripted_claude: Launcher,
) -> None:
    multi = (
        "A follow-up from octocat on the issue:\n"
        "please also check that the README names the new command,\n"
        "  and keep this indented line as it is."
    )
    script = [
        Step(contains("start here"), Reply("Waiting for more.")),
        Step(contains("a one-line follow-up"), Reply("Noted the first.")),
        Step(contains("the README names the new command"), Reply("Noted the second.")),
    ]
    session = scripted_claude(script, "start here")
    session.wait_step(0)
    session.wait_turn_end("Waiting for more.")

    session.type_keys("half-typed words")  # left in the input line: the paste clears it
    session.wait_screen("half-typed words")
    sent = session.paste("a one-line follow-up")
    one = session.wait_step(1)
    report_timing("paste (one line) → model request", one.at - sent)
    session.wait_turn_end("Noted the first.")
    sent = session.paste(multi)
    two = session.wait_step(2)
    report_timing("paste (three lines) → model request", two.at - sent)

    # Exactly the pasted text, nothing typed before it and no clearing keys left in it.
    assert one.turn.texts[-1] == "a one-line follow-up"
    assert two.turn.texts[-1] == multi
    session.api.assert_script_done()


def test_e_side_requests_are_answered_without_spending_steps(scripted_claude: Launcher) -> None:
    script = [Step(contains("name this session"), Reply("Named."))]
    session = scripted_claude(script, "please name this session")
    main = session.wait_step(0)
    side = session.wait_request(lambda r: r.kind == "side")
    report_timing("launch → first side request", side.at - session.launched)

    assert not side.has_tools and side.step is None
    schema = side.body["output_config"]["format"]["schema"]
    answer = json.loads(side.reply[0]["text"])
    assert set(answer) == set(schema["properties"]) and answer.get("title") == SIDE_TEXT
    # The title request does not spend the script: the main turn got step 0, and the
    # session shows the main answer, not the side one.
    assert main.turn.texts[-1] == "please name this session"
    session.wait_screen("Named.")
    session.api.assert_script_done()
