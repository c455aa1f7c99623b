"""The tmux runner on a real tmux server (a unique socket per test)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.spawner.session.tmux import TmuxError, TmuxRunner
from tests.spawner_support import StandIn
from tests.support import wait_for

WI = "github:o/r#7"


def test_the_argv_reaches_the_harness_exactly_with_no_shell_in_between(
    runner: TmuxRunner, standin: StandIn, tmp_path: Path
) -> None:
    argv = [str(standin.path), "--flag=a b", "$HOME", "; touch /tmp/pwned", "'q'", "`id`", "prompt"]
    runner.start("o-r-7", tmp_path, argv, env={"THE_LOOP_WORK_ITEM": WI}, owner="x")
    record = standin.wait_start(WI)
    assert record["argv"] == argv
    assert record["cwd"] == str(tmp_path)
    assert record["env"]["THE_LOOP_WORK_ITEM"] == WI


def test_neither_the_apps_secrets_nor_the_model_key_reach_a_session_but_its_pass_does(
    home: Path, standin: StandIn, tmp_path: Path
) -> None:
    dirty = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "THE_LOOP_SPAWNER_TOKEN": "tlsp_secret",
        "GITHUB_TOKEN": "ghs_secret",
        "SLACK_BOT_TOKEN": "xoxb-secret",
        "GITHUB_WEBHOOK_SECRET": "whsec",
        "ANTHROPIC_API_KEY": "sk-ant-operator",
        "ANTHROPIC_AUTH_TOKEN": "operator-bearer",
    }
    socket = f"the-loop-test-{os.getpid()}-{tmp_path.name}"
    # An operator started this server from a shell holding the secrets.
    subprocess.run(
        ["tmux", "-L", socket, "start-server", ";", "set", "-g", "exit-empty", "off"],
        env=dirty,
        check=True,
    )
    tmux = TmuxRunner(socket, env=dirty)
    try:
        tmux.start(
            "a",
            tmp_path,
            [str(standin.path), "x"],
            env={"THE_LOOP_WORK_ITEM": "a"},
            hidden_env={"THE_LOOP_SESSION_TOKEN": "tlss_a", "ANTHROPIC_API_KEY": "pass-a"},
            owner="a",
        )
        tmux.start(
            "b", tmp_path, [str(standin.path), "x"], env={"THE_LOOP_WORK_ITEM": "b"}, owner="b"
        )
        env_a = standin.wait_start("a")["env"]
        env_b = standin.wait_start("b")["env"]
    finally:
        tmux.kill_server()
    for env in (env_a, env_b):
        assert not {
            "THE_LOOP_SPAWNER_TOKEN",
            "GITHUB_TOKEN",
            "SLACK_BOT_TOKEN",
            "GITHUB_WEBHOOK_SECRET",
            "ANTHROPIC_AUTH_TOKEN",
        } & set(env)
        assert "sk-ant-operator" not in env.values()
    assert env_a["THE_LOOP_SESSION_TOKEN"] == "tlss_a" and env_a["ANTHROPIC_API_KEY"] == "pass-a"
    assert "THE_LOOP_SESSION_TOKEN" not in env_b and "ANTHROPIC_API_KEY" not in env_b


def test_a_session_credential_never_appears_on_a_tmux_command_line(
    home: Path, standin: StandIn, tmp_path: Path
) -> None:
    log = tmp_path / "tmux-argv.log"
    wrapper = tmp_path / "tmux"
    wrapper.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        f"open({str(log)!r}, 'a').write(repr(sys.argv) + '\\n')\n"
        "os.execvp('tmux', ['tmux', *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    tmux = TmuxRunner(f"the-loop-test-w{os.getpid()}", env=env, tmux=str(wrapper))
    try:
        tmux.start(
            "a",
            tmp_path,
            [str(standin.path), "x"],
            env={"THE_LOOP_WORK_ITEM": "a"},
            hidden_env={"THE_LOOP_SESSION_TOKEN": "tlss_hidden"},
            owner="a",
        )
        assert standin.wait_start("a")["env"]["THE_LOOP_SESSION_TOKEN"] == "tlss_hidden"
    finally:
        tmux.kill_server()
    assert "new-session" in log.read_text()
    assert "tlss_hidden" not in log.read_text()


def test_an_unlisted_variable_cannot_be_passed_hidden(runner: TmuxRunner, tmp_path: Path) -> None:
    with pytest.raises(TmuxError, match="not passable"):
        runner.start("a", tmp_path, ["sleep", "5"], hidden_env={"GITHUB_TOKEN": "x"}, owner="x")


def test_a_one_word_argv_is_refused_because_tmux_would_give_it_to_a_shell(
    runner: TmuxRunner, tmp_path: Path
) -> None:
    with pytest.raises(TmuxError, match="shell"):
        runner.start("a", tmp_path, ["rm -rf ~"], owner="x")


def test_a_dead_pane_stays_visible_with_its_exit_status(
    runner: TmuxRunner, standin: StandIn, tmp_path: Path
) -> None:
    runner.start(
        "a", tmp_path, [str(standin.path), "EXIT:3"], env={"THE_LOOP_WORK_ITEM": "a"}, owner="x"
    )
    pane = wait_for(lambda: (p := runner.pane("a")) and p.dead and p)
    assert pane.status == 3
    assert "exiting as asked" in runner.capture("a", history=100)


def test_a_followup_is_pasted_bracketed_after_clearing_the_line_and_entered_apart(
    runner: TmuxRunner, standin: StandIn, tmp_path: Path
) -> None:
    runner.start(
        "a", tmp_path, [str(standin.path), "x"], env={"THE_LOOP_WORK_ITEM": "a"}, owner="x"
    )
    standin.wait_start("a")
    wait_for(lambda: (standin.folder("a") / "stdin.bin").exists())
    runner.paste("a", "please also\nhandle `$(id)` and ; rm", owner="x")
    wait_for(lambda: standin.stdin("a").endswith(b"\x1b[201~"))  # no Enter of its own
    runner.press("a", ["Enter"], owner="x")
    expected = b"\x15\x1b[200~please also\rhandle `$(id)` and ; rm\x1b[201~\r"
    wait_for(lambda: standin.stdin("a") == expected)


def test_a_session_of_the_same_name_is_replaced(
    runner: TmuxRunner, standin: StandIn, tmp_path: Path
) -> None:
    runner.start(
        "a", tmp_path, [str(standin.path), "EXIT:1"], env={"THE_LOOP_WORK_ITEM": "a"}, owner="x"
    )
    wait_for(lambda: (p := runner.pane("a")) and p.dead)
    runner.start(
        "a", tmp_path, [str(standin.path), "x"], env={"THE_LOOP_WORK_ITEM": "a"}, owner="x"
    )
    standin.wait_start("a", count=2)
    assert runner.pane("a") is not None and not runner.pane("a").dead  # type: ignore[union-attr]
    assert list(runner.panes()) == ["a"]


def test_exact_names_only_a_prefix_never_matches(runner: TmuxRunner, tmp_path: Path) -> None:
    runner.start("o-r-10", tmp_path, ["sleep", "30"], owner="x")
    assert not runner.exists("o-r-1")
    assert not runner.kill("o-r-1", owner="x")
    assert runner.exists("o-r-10")


def test_capture_many_returns_each_pane(runner: TmuxRunner, tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        runner.start(name, tmp_path, ["sh", "-c", f"echo pane-{name}; sleep 30"], owner="x")
    wait_for(lambda: "pane-c" in runner.capture("c"))
    screens = runner.capture_many(["a", "b", "c"])
    assert {name: screens[name].strip() for name in screens} == {
        "a": "pane-a",
        "b": "pane-b",
        "c": "pane-c",
    }


def test_one_look_gives_a_sessions_pane_its_owner_and_its_text(
    runner: TmuxRunner, tmp_path: Path
) -> None:
    runner.start("o-r-10", tmp_path, ["sh", "-c", "echo ready-here; sleep 30"], owner=WI)
    runner.start("o-r-1", tmp_path, ["sh", "-c", "echo the-other; exit 4"], owner="y")
    pane, text = wait_for(
        lambda: (seen := runner.look("o-r-10")) and "ready-here" in seen[1] and seen
    )
    assert pane is not None and pane.session == "o-r-10" and pane.owner == WI and not pane.dead
    assert "the-other" not in text
    dead = wait_for(lambda: (seen := runner.look("o-r-1")[0]) and seen.dead and seen)
    assert dead.owner == "y"
    assert runner.look("o-r") == (None, "")  # no prefix matching, and no such session


def test_no_server_means_no_panes(runner: TmuxRunner) -> None:
    assert runner.panes() == {}


def test_a_session_is_tagged_with_its_owner_and_no_one_else_may_paste_or_kill(
    runner: TmuxRunner, standin: StandIn, tmp_path: Path
) -> None:
    runner.start("s", tmp_path, [str(standin.path), "x"], env={"THE_LOOP_WORK_ITEM": "s"}, owner=WI)
    standin.wait_start("s")
    wait_for(lambda: (standin.folder("s") / "stdin.bin").exists())
    assert runner.owner("s") == WI and runner.pane("s").owner == WI  # type: ignore[union-attr]
    other = "github:o/r#70"
    with pytest.raises(TmuxError, match="belongs to"):
        runner.paste("s", "not for you", owner=other)
    with pytest.raises(TmuxError, match="belongs to"):
        runner.kill("s", owner=other)
    with pytest.raises(TmuxError, match="belongs to"):
        runner.start("s", tmp_path, ["sleep", "30"], owner=other)
    assert runner.exists("s") and standin.stdin("s") == b""
    assert len(standin.starts("s")) == 1


def test_an_untagged_session_of_the_same_name_is_never_touched(
    runner: TmuxRunner, tmp_path: Path
) -> None:
    runner.start("t", tmp_path, ["sleep", "30"], owner="x")
    runner._run(["set-option", "-u", "-t", "=t:", "@the-loop-item"])  # e.g. made by hand
    assert runner.owner("t") == ""
    with pytest.raises(TmuxError, match="nobody"):
        runner.kill("t", owner="x")
    assert runner.exists("t")
