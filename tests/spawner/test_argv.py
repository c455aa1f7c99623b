"""The argv rules (specs 000, 001, 002): one resolver, the choice path derived from the
no-choice path, the deny token as one token and last (the prompt is never in the argv),
re-validated choices.
The `claude`-marked tests run the built argv through the real Claude Code binary."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config.operator_config import InteractionMode, parse_config
from app.spawner.argv import (
    Choice,
    adapter_for,
    build_launch,
    probe_argv,
    standing_launch,
    validate_choice,
)
from app.spawner.harness.claude import DENY_TOKEN
from tests.claude_support import QUIET_ENV

SID = "3f0c3a36-0d4e-4f32-a0a5-000000000001"
FLAG = "--dangerously-skip-permissions"


def config(**data: Any):
    return parse_config(data, "test.yaml")


def launch(cfg, choice: Choice | None = None, **kw: Any):
    kw.setdefault("prompt", "Work on issue 42")
    return build_launch(cfg, choice or Choice("claude"), session_id=SID, **kw)


def test_args_declared_only_under_harnesses_reach_a_session_without_a_choice() -> None:
    cfg = config(harnesses=[{"name": "claude", "default": True, "args": [FLAG]}])
    assert launch(cfg).argv == ["claude", "--session-id", SID, FLAG, DENY_TOKEN]


def test_args_declared_only_under_the_deprecated_home_reach_a_session() -> None:
    cfg = config(routing={"harnessArgs": {"claude": [FLAG, "--verbose"]}})
    assert launch(cfg).argv[3:5] == [FLAG, "--verbose"]


def test_harnesses_args_win_over_the_deprecated_home_and_are_never_merged() -> None:
    cfg = config(
        harnesses=[{"name": "claude", "args": ["--permission-mode", "acceptEdits"]}],
        routing={"harnessArgs": {"claude": [FLAG]}},
    )
    argv = launch(cfg).argv
    assert argv[3:5] == ["--permission-mode", "acceptEdits"]
    assert FLAG not in argv


def test_nothing_declared_means_no_extra_arguments_and_no_permission_flag() -> None:
    argv = launch(config()).argv
    assert argv == ["claude", "--session-id", SID, DENY_TOKEN]
    assert not any("permission" in a.lower() for a in argv)


def test_model_and_effort_fragments_follow_the_operator_args_in_order() -> None:
    cfg = config(
        harnesses=[{"name": "claude", "args": [FLAG]}],
        models=[{"name": "opus", "id": "claude-opus-4-1"}, {"name": "sonnet"}],
        effort=["low", "high"],
    )
    result = launch(cfg, Choice("claude", "opus", "high"))
    assert result.argv == [
        "claude",
        "--session-id",
        SID,
        FLAG,
        "--model",
        "claude-opus-4-1",
        "--effort",
        "high",
        DENY_TOKEN,
    ]
    assert result.harness_args == (FLAG, "--model", "claude-opus-4-1", "--effort", "high")


def test_entries_own_args_replace_the_default_fragment() -> None:
    cfg = config(
        models=[{"name": "fast", "args": ["--model", "haiku", "--fallback-model", "sonnet"]}],
        effort=[{"name": "deep", "args": ["--effort", "max"]}],
    )
    argv = launch(cfg, Choice("claude", "fast", "deep")).argv
    assert argv[3:9] == ["--model", "haiku", "--fallback-model", "sonnet", "--effort", "max"]


def test_the_executable_is_the_declared_command() -> None:
    cfg = config(harnesses=[{"name": "claude", "command": "/opt/claude/bin/claude"}])
    assert launch(cfg).argv[0] == "/opt/claude/bin/claude"


@given(
    args=st.lists(st.sampled_from([FLAG, "--verbose", "--add-dir", "/x", "--model", "y"])),
    model=st.sampled_from(["", "opus"]),
    effort=st.sampled_from(["", "low"]),
)
def test_the_choice_path_is_always_a_superset_of_the_no_choice_path(
    args: list[str], model: str, effort: str
) -> None:
    cfg = config(
        harnesses=[{"name": "claude", "args": args}], models=[{"name": "opus"}], effort=["low"]
    )
    bare = launch(cfg).harness_args
    chosen = launch(cfg, Choice("claude", model, effort)).harness_args
    assert chosen[: len(bare)] == bare == tuple(adapter_for(cfg, "claude").args)


def test_deny_is_one_token_and_the_last_in_work_item_mode() -> None:
    cfg = config(harnesses=[{"name": "claude", "args": [FLAG]}], models=[{"name": "opus"}])
    argv = launch(cfg, Choice("claude", "opus")).argv
    assert argv.count(DENY_TOKEN) == 1
    assert argv[-1] == DENY_TOKEN
    assert "AskUserQuestion" not in argv[:-1]


@pytest.mark.parametrize("mode", ["work-item", "workitem", "WORK-ITEM", "", "banana"])
def test_every_mode_but_cli_denies_the_question_tool(mode: str) -> None:
    cfg = config(routing={"interaction": {"mode": mode}})
    assert launch(cfg).deny == (DENY_TOKEN,)
    assert launch(cfg).interaction == "work-item"


def test_cli_mode_is_unchanged_by_the_deny_rule() -> None:
    cfg = config(
        harnesses=[{"name": "claude", "args": [FLAG]}], routing={"interaction": {"mode": "cli"}}
    )
    assert launch(cfg).argv == ["claude", "--session-id", SID, FLAG]


def test_the_recorded_arguments_exclude_the_deny_token() -> None:
    cfg = config(harnesses=[{"name": "claude", "args": [FLAG]}])
    launched = launch(cfg)
    cli = launch(cfg, mode=InteractionMode.CLI)
    assert launched.harness_args == cli.harness_args == (FLAG,)
    assert launched.argv[-1] == DENY_TOKEN


def test_a_resume_uses_the_same_arguments_with_resume() -> None:
    cfg = config(harnesses=[{"name": "claude", "args": [FLAG]}])
    resumed = launch(cfg, resume=True)
    assert resumed.argv[:4] == ["claude", "--resume", SID, FLAG]
    assert resumed.argv[-1] == DENY_TOKEN


def test_operator_args_ending_in_the_variadic_spelling_still_end_with_deny() -> None:
    cfg = config(harnesses=[{"name": "claude", "args": ["--disallowedTools", "AskUserQuestion"]}])
    argv = launch(cfg).argv
    assert argv[3:] == ["--disallowedTools", "AskUserQuestion", DENY_TOKEN]


@given(text=st.text(min_size=1))
def test_the_prompt_is_never_in_the_argv_it_is_the_first_message(text: str) -> None:
    built = launch(config(), prompt=text)
    assert built.prompt == text
    assert built.argv == ["claude", "--session-id", SID, DENY_TOKEN]


def test_standing_sessions_inherit_resolved_args_when_omitted_and_never_get_deny() -> None:
    cfg = config(harnesses=[{"name": "claude", "args": [FLAG]}])
    inherited = standing_launch(cfg, "claude", None, session_id=SID, prompt=None)
    explicit_none = standing_launch(cfg, "claude", [], session_id=SID, prompt=None)
    declared = standing_launch(cfg, "claude", ["--verbose"], session_id=SID, prompt="hi")
    assert inherited.argv == ["claude", "--session-id", SID, FLAG]
    assert explicit_none.argv == ["claude", "--session-id", SID]
    assert declared.argv == ["claude", "--session-id", SID, "--verbose"]
    assert declared.prompt == "hi"


def test_a_probe_uses_the_base_args_with_the_prompt_first_and_no_deny() -> None:
    cfg = config(harnesses=[{"name": "claude", "args": [FLAG, "--disallowedTools", "X"]}])
    argv = probe_argv(adapter_for(cfg, "claude"), ["--model", "opus"])
    assert argv[:3] == ["claude", "-p", argv[2]]
    assert argv[3:] == [FLAG, "--disallowedTools", "X", "--model", "opus"]
    assert DENY_TOKEN not in argv


# -- re-validation of a frozen choice read back from agent-writable state ------------------

CHOICES = config(
    harnesses=[{"name": "claude", "default": True}, {"name": "codex"}],
    models=[{"name": "opus"}, {"name": "gpt", "harnesses": ["codex"]}],
    effort=["low", "high"],
)


def test_a_valid_frozen_choice_is_kept() -> None:
    result = validate_choice(CHOICES, Choice("claude", "opus", "high"))
    assert result.choice == Choice("claude", "opus", "high")
    assert result.warnings == ()


@pytest.mark.parametrize(
    ("frozen", "expected", "why"),
    [
        (Choice("cursor"), Choice("claude"), "not declared"),
        (Choice("codex"), Choice("claude"), "cannot host"),
        (Choice("claude", "gpt"), Choice("claude"), "not offered"),
        (Choice("claude", "--dangerously-skip-permissions"), Choice("claude"), "not offered"),
        (Choice("claude", "", "ultra"), Choice("claude"), "not declared"),
        (Choice("claude", "opus", "$(rm -rf ~)"), Choice("claude", "opus"), "not declared"),
    ],
)
def test_a_forged_or_unhostable_frozen_value_falls_back_with_a_warning(
    frozen: Choice, expected: Choice, why: str
) -> None:
    result = validate_choice(CHOICES, frozen, hosts={"claude"})  # a spawner without codex
    assert result.choice == expected
    assert len(result.warnings) == 1 and why in result.warnings[0]


def test_a_refused_probe_verdict_drops_that_choice() -> None:
    result = validate_choice(CHOICES, Choice("claude", "opus", "high"), refused={"model-opus"})
    assert result.choice == Choice("claude", "", "high")
    assert "opus" in result.warnings[0]
    result = validate_choice(CHOICES, Choice("claude", "opus", "high"), refused={"effort-high"})
    assert result.choice == Choice("claude", "opus", "")


# -- what the real Claude Code binary accepts ----------------------------------------------

PARSE_FAILURES = (
    "was read as a value of --disallowedTools",
    "Unknown --effort value",
    "Permission deny rule",
    "Input must be provided",
    "unknown option",
)


def _own_session(argv: list[str]) -> list[str]:
    """`argv` with a session id of its own: concurrent runs must never share one."""
    return [str(uuid.uuid4()) if word == SID else word for word in argv]


def run_claude_print(argvs: list[list[str]], home: Path) -> list[str]:
    """Run each argv with `-p` after the executable, concurrently, offline, each in a temp
    HOME of its own and with a session id of its own."""
    procs = []
    for index, argv in enumerate(argvs):
        own_home = home / f"home-{index}"
        own_home.mkdir(parents=True, exist_ok=True)
        env = {"PATH": os.environ["PATH"], "HOME": str(own_home), **QUIET_ENV}
        procs.append(
            subprocess.Popen(
                [argv[0], "-p", *_own_session(argv)[1:]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                cwd=own_home,
            )
        )
    return [proc.communicate(timeout=60)[0] for proc in procs]


claude = pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed")


@pytest.mark.claude
@claude
def test_the_real_binary_accepts_every_built_argv(tmp_path: Path) -> None:
    levels = ["low", "medium", "high", "xhigh", "max"]
    cfg = config(
        harnesses=[{"name": "claude", "args": ["--verbose"]}],
        models=[{"name": "opus"}],
        effort=levels,
    )
    variadic = config(
        harnesses=[{"name": "claude", "args": ["--disallowedTools", "AskUserQuestion"]}]
    )
    # `-p` needs its prompt on the command line: it goes right after the built argv.
    argvs = [[*launch(cfg, Choice("claude", "opus", lv)).argv, "Work on 42"] for lv in levels]
    # Wherever a prompt IS positional, right after the deny token, it stays a prompt.
    argvs.append([*launch(variadic).argv, "Reply with PONG"])
    outputs = run_claude_print(argvs, tmp_path)
    for argv, output in zip(argvs, outputs, strict=True):
        assert not [m for m in PARSE_FAILURES if m in output], (argv, output)
        assert "Not logged in" in output, (argv, output)


@pytest.mark.claude
@claude
def test_the_real_binary_shows_what_the_deny_token_prevents(tmp_path: Path) -> None:
    """Control: without the `=` spelling, the variadic flag eats the prompt (spec 001)."""
    bare = [
        "claude",
        "--session-id",
        SID,
        "--disallowedTools",
        "AskUserQuestion",
        "Reply with PONG",
    ]
    bogus = ["claude", "--session-id", SID, "--effort", "bogus", "hi"]
    eaten, effort = run_claude_print([bare, bogus], tmp_path)
    assert any(m in eaten for m in PARSE_FAILURES[:4]), eaten
    assert "Unknown --effort value" in effort
