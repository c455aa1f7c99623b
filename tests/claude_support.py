"""The real `claude` binary in tmux against the scripted model (tests/fakes/anthropic.py).

`prepare_home` makes a throwaway HOME from which the binary starts straight into a session:
no onboarding, no API-key prompt, no trust dialog, no bypass disclaimer. `claude_env` is
the environment that points it at the fake and keeps it off the network. `ClaudeSession`
is one running binary: its screen, pasted follow-ups, waits that fail with the screen and
the model's view attached. The `scripted_claude` fixture ties them together and cleans up.

The minimal recipe (claude 2.1.197 and 2.1.332, as root):
- `~/.claude.json`: `hasCompletedOnboarding: true`; `customApiKeyResponses.approved` holding
  the last 20 characters of `ANTHROPIC_API_KEY`; `projects[<workdir>]` with
  `hasTrustDialogAccepted` and `hasCompletedProjectOnboarding` (written by the product's
  own `app.spawner.harness.claude_trust.pretrust`, which also writes the next item).
- `~/.claude/settings.json`: `skipDangerousModePermissionPrompt: true` (bypass mode only).
- env: `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`, `DISABLE_AUTOUPDATER=1`,
  `DISABLE_TELEMETRY=1`, `DISABLE_ERROR_REPORTING=1` (`QUIET_ENV`); `IS_SANDBOX=1` when root
  runs `--dangerously-skip-permissions`, which Claude Code otherwise refuses.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.config import HarnessTrust, TrustScope
from app.config.operator_config import parse_config
from app.spawner.context import SpawnerContext
from app.spawner.harness.claude import SESSION_FLAG
from app.spawner.harness.claude_trust import (
    BYPASS_FLAG,
    claude_config_path,
    claude_settings_path,
    pretrust,
    update_json_file,
)
from app.spawner.session.input_box import submit
from app.spawner.session.tmux import TmuxRunner
from hooks.gate_entry import install_stop_hook, read_settings, write_settings
from tests.fakes.anthropic import FakeAnthropic, Recorded, Step
from tests.spawner_support import gateway_context
from tests.support import wait_for

DUMMY_KEY = "sk-ant-api03-scripted-model-dummy-key-000000"
# No auto-update (it would replace the machine's shared binary mid-run), telemetry or error
# reports. Not CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: from 2.1.3xx it also drops the
# session-title request, which real sessions send and the scripted model must answer.
QUIET_ENV = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
PROMPT_READY = "bypass permissions on"
GENEROUS = 90.0  # seconds: the machine is slow and shared; never a speed assertion


def approve_key(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    """`~/.claude.json` with onboarding done and `key` approved, or None when it already is."""
    responses = data.get("customApiKeyResponses") or {}
    approved = list(responses.get("approved") or [])
    if data.get("hasCompletedOnboarding") is True and key[-20:] in approved:
        return None
    new_responses = {"rejected": [], **responses, "approved": [*approved, key[-20:]]}
    return {**data, "hasCompletedOnboarding": True, "customApiKeyResponses": new_responses}


def prepare_home(
    home: Path, workdir: Path, args: Sequence[str] = (BYPASS_FLAG,), key: str = DUMMY_KEY
) -> None:
    """Make `home` start `claude <args>` in `workdir` with no dialog.

    Trust and the bypass pre-accept go through the product's own `pretrust` (the spawner
    does exactly this before a launch); only the key approval is the test's own doing.
    """
    home.mkdir(parents=True, exist_ok=True)
    update_json_file(claude_config_path(home), lambda data: approve_key(data, key))
    trust = HarnessTrust(enabled=True, scope=TrustScope.DIRECTORY)
    outcome = pretrust(home, workdir, workdir, trust, list(args))
    if outcome.failures:
        raise RuntimeError(f"could not prepare {home}: {outcome.failures}")


def install_stop_command(home: Path, command: str, timeout: int = 30) -> None:
    """Add a Stop hook running `command` to `home`'s Claude Code settings, through the
    same pure edit `the-loop hooks install` uses (a non-gate command is added beside it)."""
    path = claude_settings_path(home)
    settings, changed = install_stop_hook(read_settings(path), command, timeout)
    if changed:
        write_settings(path, settings)


def claude_env(base_url: str, home: Path, key: str = DUMMY_KEY) -> dict[str, str]:
    """The session's environment: the fake as the API, the approved key, no network chatter."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": key,
        **QUIET_ENV,
    }
    if os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"  # root may use --dangerously-skip-permissions only so
    return env


def claude_binary() -> str:
    """The binary under test: `$THE_LOOP_CLAUDE` (to try another version) or `claude` on
    PATH; a skip where there is none, a failure in CI (these tests must run there)."""
    found = shutil.which(os.environ.get("THE_LOOP_CLAUDE") or "claude")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install the claude binary: its tests never skip there")
        pytest.skip("claude is not installed")
    return found


@dataclass
class ClaudeSession:
    """One real `claude` running in tmux against `api`."""

    runner: TmuxRunner
    name: str
    api: FakeAnthropic
    home: Path
    workdir: Path
    session_id: str
    launched: float  # time.monotonic() at launch, comparable with `Recorded.at`

    def screen(self) -> str:
        return self.runner.capture(self.name, history=200)

    def paste(self, text: str) -> float:
        """Deliver `text` as a follow-up, as the spawner does (pasted, then watched until it
        was sent); returns when the paste began."""
        sent = time.monotonic()
        submit(self.runner, self.name, self.name, text)
        return sent

    def type_keys(self, text: str) -> None:
        """Type `text` into the input without submitting it (a human at the keyboard)."""
        target = f"={self.name}:"
        subprocess.run(
            ["tmux", "-L", self.runner.socket, "send-keys", "-t", target, "-l", text],
            check=True,
            timeout=30,
        )

    def describe(self) -> str:
        return f"{self.api.describe()}\n--- screen ---\n{self.screen()}"

    def wait_step(self, index: int, timeout: float = GENEROUS) -> Recorded:
        """The main request that spent script step `index`; on timeout the error shows what
        the model was shown and the screen."""
        return self.wait_request(lambda r: r.kind == "main" and r.step == index, timeout)

    def wait_request(
        self, predicate: Callable[[Recorded], bool], timeout: float = GENEROUS
    ) -> Recorded:
        try:
            return self.api.wait_for_request(predicate, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- screen ---\n{self.screen()}") from None

    def wait_turn_end(self, answer: str, timeout: float = GENEROUS) -> str:
        """Wait until `answer` is shown and the turn has ended under it (Claude Code prints
        "✻ <verb> for <n>s" then). Pasting while a turn winds down is what a live session
        gets too, but claude 2.1.197 then drops the Enter about once in twenty pastes;
        tests that are not about that wait for the turn's end first."""
        pattern = re.compile(re.escape(answer) + r".*?\n\s*✻ [^\n]* for \d", re.DOTALL)
        try:
            return wait_for(lambda: pattern.search(s := self.screen()) and s, timeout=timeout)
        except AssertionError:
            raise AssertionError(
                f"no turn end after {answer!r} in {timeout}s\n{self.describe()}"
            ) from None

    def wait_screen(self, needle: str, timeout: float = GENEROUS) -> str:
        try:
            return wait_for(lambda: needle in (s := self.screen()) and s, timeout=timeout)
        except AssertionError:
            raise AssertionError(
                f"{needle!r} not on screen in {timeout}s\n{self.describe()}"
            ) from None


def launch_claude(
    runner: TmuxRunner,
    api: FakeAnthropic,
    home: Path,
    workdir: Path,
    prompt: str,
    args: Sequence[str] = (BYPASS_FLAG,),
    name: str = "claude",
) -> ClaudeSession:
    """Prepare `home` and start `claude --session-id <uuid> <args> <prompt>` in `workdir`."""
    executable = claude_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    prepare_home(home, workdir, args)
    session_id = str(uuid.uuid4())
    argv = [executable, SESSION_FLAG, session_id, *args, prompt]
    launched = time.monotonic()
    runner.start(name, workdir, argv, env=claude_env(api.url, home), owner=name)
    return ClaudeSession(runner, name, api, home, workdir, session_id, launched)


Launcher = Callable[..., ClaudeSession]


@pytest.fixture
def scripted_claude(tmp_path: Path) -> Iterator[Launcher]:
    """`start(script, prompt, *, stop_hook=None, args=…, workdir=None)` → a `ClaudeSession`
    on its own tmux server, HOME and fake API; everything is stopped at teardown."""
    claude_binary()
    started: list[tuple[TmuxRunner, FakeAnthropic]] = []

    def start(
        script: Iterable[Step],
        prompt: str,
        *,
        stop_hook: str | None = None,
        args: Sequence[str] = (BYPASS_FLAG,),
        workdir: Path | None = None,
    ) -> ClaudeSession:
        base = tmp_path / f"claude-{len(started)}"
        home = base / "home"
        runner = TmuxRunner(
            f"the-loop-claude-{uuid.uuid4().hex[:10]}",
            env={"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"},
            size=(160, 50),
        )
        api = FakeAnthropic(script).start()
        started.append((runner, api))
        home.mkdir(parents=True)
        if stop_hook is not None:
            install_stop_command(home, stop_hook)
        return launch_claude(runner, api, home, workdir or base / "work", prompt, args)

    try:
        yield start
    finally:
        for runner, api in started:
            runner.kill_server()
            api.stop()


_TIMINGS: list[str] = []


def report_timing(label: str, seconds: float) -> None:
    """Note a measured figure; they are printed in the run's summary, never asserted."""
    line = f"{label}: {seconds:.2f}s"
    _TIMINGS.append(line)
    print(f"[claude timing] {line}", file=sys.stderr)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _TIMINGS:
        terminalreporter.section("real claude timings (measured, not asserted)")
        for line in _TIMINGS:
            terminalreporter.write_line(line)


def sandboxed_devbox(
    tmp_path: Path,
    model: FakeAnthropic,
    mode: str = "bubblewrap",
    env: dict[str, str] | None = None,
    **sandbox: Any,
) -> SpawnerContext:
    """A spawner context whose sessions run the real claude against `model`, through the
    spawner's model gateway; `env` adds to the spawner's environment."""
    home = tmp_path / "devbox-home"
    home.mkdir()
    update_json_file(claude_config_path(home), lambda data: approve_key(data, DUMMY_KEY))
    env = {
        **claude_env(model.url, home),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        **(env or {}),
    }
    config = parse_config(
        {
            "harnesses": [{"name": "claude", "command": claude_binary(), "args": [BYPASS_FLAG]}],
            "routing": {
                "workspace": {"root": str(tmp_path / "work")},
                "sandbox": {"mode": mode, **sandbox},
            },
        }
    )
    return gateway_context(
        config, env, home, tmp_path / "state", tmux="the-loop-sbx", ready_timeout=GENEROUS
    )


def transcript_answer(message_id: str, usage: Any, *blocks: dict[str, Any]) -> dict[str, Any]:
    """One assistant line of a Claude Code transcript, as the harness writes it."""
    content = list(blocks) or [{"type": "text", "text": "ok"}]
    return {"type": "assistant", "message": {"id": message_id, "usage": usage, "content": content}}


# A Claude Code transcript with the lines a usage reader must count once, and the nonsense it
# must skip.
TRANSCRIPT = [
    {"type": "user", "message": {"role": "user", "content": "Work on issue 1"}},
    # One answer, written as two lines (a text block, then a tool call): counted once.
    transcript_answer(
        "msg_1", {"input_tokens": 100, "output_tokens": 3, "cache_read_input_tokens": 50}
    ),
    transcript_answer(
        "msg_1",
        {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 50},
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}},
    ),
    transcript_answer(
        "msg_2", {"input_tokens": 7, "output_tokens": 1, "cache_creation_input_tokens": 9}
    ),
    transcript_answer(
        "msg_3", {"input_tokens": -5, "output_tokens": True, "requests": 10**6}
    ),  # nonsense
    transcript_answer("msg_4", {"input_tokens": 10**12}),  # beyond any one answer
    {"type": "assistant", "message": {"usage": {"input_tokens": 999}}},  # no id
]
