"""Spawn, deliver and stop jobs on real tmux and git, with a stand-in harness that records
exactly how it was started and what reached its terminal."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from app.config.operator_config import ModelChoice, parse_config
from app.protocol import DeliverJob, StopJob
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.harness.claude import DENY_TOKEN
from app.spawner.jobkinds import followup_text, run_job
from app.spawner.registry import SessionState
from app.spawner.session.tmux import TmuxRunner
from app.spawner.session.watchdog import Watchdog
from app.spawner.workspace.checkout import checkout_dir
from hooks.gate_entry import managed_command
from tests.jobs_support import (
    END_PASTE,
    FLAG,
    NAME,
    SESSION_TOKEN,
    TOKEN,
    WI,
    deliver_job,
    events,
    make_config,
    pasted,
    run_ok,
    spawn_job,
)
from tests.spawner_support import StandIn
from tests.support import FIXTURES, wait_for


def test_a_spawn_launches_exactly_base_args_choice_deny_prompt(
    ctx: SpawnerContext, standin: StandIn, origin: Path, home: Path, tmp_path: Path
) -> None:
    result = run_ok(ctx, spawn_job(origin))
    record = standin.wait_start(WI)
    sid = result["session_id"]
    assert record["argv"] == [
        str(standin.path),
        "--session-id",
        sid,
        FLAG,
        "--model",
        "claude-opus-4-1",
        "--effort",
        "high",
        DENY_TOKEN,
    ]
    wait_for(lambda: standin.stdin(WI) == pasted("Work on issue 7"))  # the first message
    checkout = tmp_path / "work" / NAME
    assert record["cwd"] == str(checkout)
    assert record["env"]["THE_LOOP_WORK_ITEM"] == "issue-7"
    assert record["env"]["THE_LOOP_WORK_ITEM_ID"] == WI
    assert record["env"]["THE_LOOP_GATE_MAX_ATTEMPTS"] == "3"  # stopGate.maxAttempts
    assert record["env"]["THE_LOOP_SESSION_TOKEN"] == SESSION_TOKEN
    assert result == {
        "session_id": sid,
        "tmux_target": f"{ctx.runner.socket}:{NAME}",
        "harness": "claude",
        "model": "opus",
        "effort": "high",
        "harness_args": [FLAG, "--model", "claude-opus-4-1", "--effort", "high"],
        "checkout": str(checkout),
        "respawned": False,
    }
    saved = ctx.registry.get(WI)
    assert saved is not None and DENY_TOKEN not in saved.harness_args
    (spawned,) = events(ctx, "session.spawned")
    assert spawned["gh_event"] == "issue_comment" and spawned["action"] == "created"
    assert spawned["harness_args"] == result["harness_args"] and spawned["runner"] == "tmux"
    assert spawned["interaction"] == "work-item" and spawned["argv"] == record["argv"]
    (prompted,) = events(ctx, "session.prompted")
    assert prompted["chars"] == len("Work on issue 7") and prompted["late"] is False
    (trusted,) = events(ctx, "workspace.trusted")
    assert trusted["directories"] == [str(checkout), str(tmp_path / "work")]
    # Trust and the bypass acceptance go into the session's own home, which it runs with.
    own = ctx.state_dir / "homes" / NAME
    assert record["env"]["HOME"] == str(own) and spawned["sandbox"] == "bubblewrap"
    projects = json.loads((own / ".claude.json").read_text())["projects"]
    assert projects[str(checkout)] == {
        "hasTrustDialogAccepted": True,
        "hasCompletedProjectOnboarding": True,
    }
    settings = json.loads((own / ".claude" / "settings.json").read_text())
    assert settings["skipDangerousModePermissionPrompt"] is True
    assert "hooks" not in settings  # the gate is in the managed settings, read-only inside
    managed = json.loads((ctx.state_dir / "managed" / "managed-settings.json").read_text())
    assert [g["hooks"][0]["command"] for g in managed["hooks"]["Stop"]] == [managed_command()]
    assert not (home / ".claude.json").exists()  # the operator's own home is not touched
    assert (
        json.loads((checkout / "docs/specs/issue-7/work-item-state.json").read_text())["model"]
        == "opus"
    )


def test_the_installation_token_is_in_no_file_event_or_session_environment(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path
) -> None:
    run_ok(ctx, spawn_job(origin))
    run_ok(ctx, deliver_job(origin))
    env = standin.wait_start(WI)["env"]
    assert TOKEN not in json.dumps(env)
    for path in [*tmp_path.rglob("*")]:
        if path.is_file() and "records" not in path.parts:
            assert TOKEN.encode() not in path.read_bytes(), path


def test_a_frozen_choice_this_spawner_does_not_declare_falls_back_with_a_warning(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    run_ok(ctx, spawn_job(origin, model="gpt-9", effort="ludicrous", harness="codex"))
    argv = standin.wait_start(WI)["argv"]
    assert argv[3:] == [FLAG, DENY_TOKEN]
    warnings = [e["warning"] for e in events(ctx, "session.choice_fallback")]
    assert len(warnings) == 3 and all(
        e == "warning" for e in [x["level"] for x in events(ctx, "session.choice_fallback")]
    )


def test_cli_mode_launches_without_the_deny_token(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path
) -> None:
    ctx.config = make_config(standin, tmp_path, interaction={"mode": "cli"})
    run_ok(ctx, spawn_job(origin))
    assert DENY_TOKEN not in standin.wait_start(WI)["argv"]


def test_a_spawn_offered_again_reports_the_live_session_instead_of_a_second_one(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    first = run_ok(ctx, spawn_job(origin))
    standin.wait_start(WI)
    again = run_ok(ctx, spawn_job(origin))
    assert again == first
    assert len(standin.starts(WI)) == 1 and len(events(ctx, "session.spawned")) == 1


def test_a_followup_is_pasted_into_the_live_session(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    spawned = run_ok(ctx, spawn_job(origin))
    standin.wait_start(WI)
    wait_for(lambda: (standin.folder(WI) / "stdin.bin").exists())
    result = run_ok(ctx, deliver_job(origin, "handle `$(id)`; and -rf"))
    assert result == {"delivered": True, "respawned": False, "session_id": spawned["session_id"]}
    text = followup_text(
        DeliverJob(
            work_item_id=WI, author="octocat", source="github", body="handle `$(id)`; and -rf"
        )
    )
    wait_for(lambda: standin.stdin(WI) == pasted("Work on issue 7") + pasted(text))
    (delivered,) = events(ctx, "session.delivered")
    assert delivered["comment_id"] == 99 and delivered["respawned"] is False


def test_a_dead_session_is_resumed_with_the_comment_as_its_first_message(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    standin.plan(WI, {"exit": 0})  # dies before it could take its first message
    spawned = run_ok(ctx, spawn_job(origin))
    (pending,) = events(ctx, "session.prompt_pending")
    assert pending["reason"] == "exited" and pending["level"] == "warning"
    wait_for(lambda: (p := ctx.runner.pane(NAME)) and p.dead)
    result = run_ok(ctx, deliver_job(origin, "are you there?"))
    assert result == {"delivered": True, "respawned": True, "session_id": spawned["session_id"]}
    argv = standin.wait_start(WI, count=2)["argv"]
    assert argv[1:3] == ["--resume", spawned["session_id"]] and argv[-1] == DENY_TOKEN
    assert FLAG in argv
    followup = followup_text(deliver_job(origin, "are you there?").payload)
    # The first message it never got goes in front of the comment, in one paste.
    wait_for(lambda: standin.stdin(WI) == pasted(f"Work on issue 7\n\n{followup}"))
    (respawned,) = events(ctx, "session.respawned")
    assert respawned["reason"] == "session ended" and respawned["resumed"] is True
    assert ctx.registry.get(WI).pending == ""  # type: ignore[union-attr]


def test_a_resume_that_dies_at_once_becomes_a_fresh_session(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    standin.plan(WI, {"exit": 0})
    spawned = run_ok(ctx, spawn_job(origin))
    wait_for(lambda: (p := ctx.runner.pane(NAME)) and p.dead)
    standin.refuse_resume()
    result = run_ok(ctx, deliver_job(origin))
    fresh = standin.wait_start(WI, count=3)["argv"]
    assert fresh[1] == "--session-id" and fresh[2] == result["session_id"] != spawned["session_id"]
    followup = followup_text(deliver_job(origin).payload).replace("\n", "\r").encode()
    wait_for(lambda: standin.stdin(WI).endswith(followup + END_PASTE + b"\r"))
    assert b"docs/specs/issue-7/work-item-state.json" in standin.stdin(WI)
    (failed,) = events(ctx, "session.resume_failed")
    assert any("No conversation found" in line for line in failed["last_lines"])


def test_a_drifted_session_is_relaunched_resuming_with_old_and_new_named(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path
) -> None:
    spawned = run_ok(ctx, spawn_job(origin))
    standin.wait_start(WI)
    entry = ctx.config.harnesses[0]
    ctx.config = ctx.config.model_copy(
        update={"harnesses": [entry.model_copy(update={"args": [FLAG, "--verbose"]})]}
    )
    result = run_ok(ctx, deliver_job(origin))
    assert result["respawned"] is True and result["session_id"] == spawned["session_id"]
    argv = standin.wait_start(WI, count=2)["argv"]
    assert argv[1:5] == ["--resume", spawned["session_id"], FLAG, "--verbose"]
    (respawned,) = events(ctx, "session.respawned")
    assert respawned["reason"] == "drift"
    assert respawned["old"] == {"harness_args": spawned["harness_args"]}
    assert respawned["new"]["harness_args"][:2] == [FLAG, "--verbose"]


def test_upgrading_to_the_deny_token_is_not_drift(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path
) -> None:
    ctx.config = make_config(standin, tmp_path, interaction={"mode": "cli"})
    run_ok(ctx, spawn_job(origin))
    standin.wait_start(WI)
    ctx.config = make_config(standin, tmp_path)  # work-item mode now: deny token added
    assert run_ok(ctx, deliver_job(origin))["respawned"] is False


def test_a_session_waiting_at_a_blocking_screen_is_not_pasted_into(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    screen = FIXTURES / "claude-screens" / "02-trust-dialog.txt"
    standin.plan(WI, {"screen": screen.read_text()})
    run_ok(ctx, spawn_job(origin))  # the first message waits, the stall is reported at once
    assert "Quick safety check" in ctx.runner.capture(NAME)
    (stalled,) = events(ctx, "session.stalled")
    assert stalled["screen"] == "trust-dialog"
    (pending,) = events(ctx, "session.prompt_pending")
    assert pending["reason"] == "blocked" and pending["screen"] == "trust-dialog"
    ok, _, error = run_job(ctx, deliver_job(origin))
    assert not ok and error is not None and "trust-dialog" in error
    assert standin.stdin(WI) == b""
    assert len(events(ctx, "session.stalled")) == 1
    saved = ctx.registry.get(WI)
    assert saved is not None and saved.state == SessionState.STALLED
    assert saved.pending == "Work on issue 7"


def test_stop_ends_the_session(ctx: SpawnerContext, standin: StandIn, origin: Path) -> None:
    run_ok(ctx, spawn_job(origin))
    standin.wait_start(WI)
    stop = ClaimedJob(3, StopJob(work_item_id=WI, repo="o/r", reason="issue closed"), 60)
    assert run_ok(ctx, stop) == {"stopped": True, "found": True}
    assert not ctx.runner.exists(NAME)
    saved = ctx.registry.get(WI)
    assert saved is not None and saved.state == SessionState.STOPPED
    assert events(ctx, "session.stopped")[0]["reason"] == "issue closed"


def test_a_failing_clone_is_reported_without_the_token(ctx: SpawnerContext, tmp_path: Path) -> None:
    job = spawn_job(tmp_path / "nowhere.git")
    bad_url = f"{tmp_path}/nowhere-{TOKEN}.git"
    job = replace(job, payload=job.payload.model_copy(update={"clone_url": bad_url}))
    ok, _, error = run_job(ctx, job)
    assert not ok and error is not None and "git clone failed" in error
    assert TOKEN not in error
    assert TOKEN not in ctx.events.path.read_text()


def test_a_config_conflict_is_reported_once_at_load_and_never_per_spawn(
    standin: StandIn, origin: Path, runner: TmuxRunner, home: Path, tmp_path: Path
) -> None:
    from app.config.process_settings import load_settings
    from app.spawner.assembly import build_context

    config = parse_config(
        {
            "harnesses": [{"name": "claude", "command": str(standin.path), "args": [FLAG]}],
            "routing": {
                "harnessArgs": {"claude": ["--permission-mode", "plan"]},
                "workspace": {"root": str(tmp_path / "work")},
                "sandbox": standin.sandbox,
            },
        }
    )
    settings = load_settings({"THE_LOOP_STATE_DIR": str(tmp_path / "st")}, dotenv=None)
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    ctx = build_context(settings, config, client=None, socket=runner.socket, env=env)
    assert ctx.hosts == frozenset({"claude"})
    run_ok(ctx, spawn_job(origin))
    assert standin.wait_start(WI)["argv"][3:5] == [FLAG, DENY_TOKEN]
    run_ok(ctx, deliver_job(origin))
    (conflict,) = events(ctx, "config.conflict")
    assert conflict["key"] == "routing.harnessArgs.claude" and "wins" in conflict["message"]


def test_a_followup_for_an_item_this_spawner_never_ran_starts_a_fresh_session(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    result = run_ok(ctx, deliver_job(origin, "pick this up please"))
    argv = standin.wait_start(WI)["argv"]
    assert result["respawned"] is True and argv[1:3] == ["--session-id", result["session_id"]]
    assert argv[3] == FLAG and argv[-1] == DENY_TOKEN
    wait_for(lambda: b"pick this up please" in standin.stdin(WI))
    assert events(ctx, "session.respawned")[0]["reason"] == "no session on this spawner"


def test_a_followup_for_an_item_this_spawner_never_ran_keeps_the_frozen_choice(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    frozen = {
        "decisions": {"phase-selection": {"at": "t", "by": "octocat"}},
        "skips": {},
        "harness": "claude",
        "model": "opus",
        "effort": "high",
        "dropped": [],
    }
    run_ok(ctx, deliver_job(origin, "carry on", frozen=frozen))
    argv = standin.wait_start(WI)["argv"]
    assert argv[3:8] == [FLAG, "--model", "claude-opus-4-1", "--effort", "high"]


def test_an_agent_that_edits_the_model_in_the_state_file_still_relaunches_on_the_frozen_one(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path
) -> None:
    ctx.config = ctx.config.model_copy(
        update={"models": [*ctx.config.models, ModelChoice(name="sonnet")]}
    )
    frozen = spawn_job(origin).payload.frozen.model_dump()
    standin.plan(WI, {"exit": 0})
    run_ok(ctx, spawn_job(origin))
    wait_for(lambda: (p := ctx.runner.pane(NAME)) and p.dead)
    state = checkout_dir(tmp_path / "work", WI) / "docs/specs/issue-7/work-item-state.json"
    edited = {**json.loads(state.read_text()), "model": "sonnet", "effort": ""}
    state.write_text(json.dumps(edited))  # what an agent inside the checkout can do
    run_ok(ctx, deliver_job(origin, "carry on", frozen=frozen))
    argv = standin.wait_start(WI, count=2)["argv"]
    assert argv[3:8] == [FLAG, "--model", "claude-opus-4-1", "--effort", "high"]
    assert "sonnet" not in argv
    assert [e["model"] for e in events(ctx, "session.respawned")] == ["opus"]


def test_a_first_message_held_back_by_a_dialog_is_pasted_once_the_dialog_is_answered(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    screen = FIXTURES / "claude-screens" / "02-trust-dialog.txt"
    standin.plan(WI, {"screen": screen.read_text(), "until_key": True})
    run_ok(ctx, spawn_job(origin))
    assert ctx.registry.get(WI).pending == "Work on issue 7"  # type: ignore[union-attr]
    ctx.runner._run(["send-keys", "-t", f"={NAME}:", "1"])  # a human answers it in tmux
    dog = Watchdog(ctx.runner, ctx.registry, ctx.events.emit, ctx.locks)
    wait_for(lambda: dog.tick() or standin.stdin(WI) == pasted("Work on issue 7"))
    (prompted,) = events(ctx, "session.prompted")
    assert prompted["late"] is True
    saved = ctx.registry.get(WI)
    assert saved is not None and saved.pending == "" and saved.state == SessionState.RUNNING
    assert [e["was"] for e in events(ctx, "session.unstalled")] == ["trust-dialog"]
