"""Claude Code as a harness.

- argv: `claude --session-id <uuid> <operator args> <model/effort> [--disallowedTools=
  AskUserQuestion]`; a relaunch `--resume <uuid>` (argv.py composes it);
- home: the session's own (`claude_home.seed_home`: `~/.claude.json` with onboarding done
  and its gateway pass approved, `~/.claude/settings.json` without hooks (the stop gate is in
  read-only managed settings the launch binds at /etc/claude-code), no
  credential of the operator's); unconfined, the operator's own home with the pass approved;
- trust: `claude_trust.pretrust` (both trust keys for the checkout, the bypass disclaimer when due);
- model: the gateway's URL as `ANTHROPIC_BASE_URL`, the pass as `ANTHROPIC_API_KEY`;
- screens: `claude_screens.CLAUDE_SCREENS`; a paste is Ctrl-U then a bracketed paste, its Enter
  once the box shows it (`sending.submit`);
- transcript: `~/.claude/projects/<dir>/<session id>.jsonl`.
"""

from __future__ import annotations

from pathlib import Path

from app.gateway import SessionModel
from app.spawner.harness import HomeReady, HomeSetup
from app.spawner.harness.claude_home import (
    HOST_MANAGED,
    seed_home,
    transcript_path,
    with_approved_key,
    write_managed,
)
from app.spawner.harness.claude_screens import CLAUDE_SCREENS
from app.spawner.harness.claude_trust import (
    TrustFileError,
    claude_config_path,
    pretrust,
    update_json_file,
)

# Its flags: the deny token (one `=` spelling, so the variadic flag never swallows what
# follows), a new session's id and a relaunch's, and the one-shot probe's prompt.
DENY_TOKEN = "--disallowedTools=AskUserQuestion"
SESSION_FLAG = "--session-id"
RESUME_FLAG = "--resume"
PRINT_FLAG = "-p"


class ClaudeAdapter:
    name = "claude"
    wire = "messages"  # the model gateway's API it speaks (app.gateway.wires)
    deny = (DENY_TOKEN,)
    own_home_unconfined = False  # a home of its own even when the sandbox is off
    screens = CLAUDE_SCREENS
    enter_after = 0.0
    enter_when_shown = True  # its box shows a paste before it is taken in
    # The first is documented as DISABLE_AUTOUPDATER, DISABLE_BUG_COMMAND,
    # DISABLE_ERROR_REPORTING and DISABLE_TELEMETRY at once, and spares the start-up its calls
    # to those hosts. It leaves the official plugin marketplace's install, which a home that
    # has not had it tries at start (downloads.claude.ai, then github.com): in a closed
    # network each session would knock at the egress proxy twice, two warnings for nothing.
    closed_network_env = {
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    }
    own_hosts = ("statsig.anthropic.com", "downloads.claude.ai")
    managed_at = HOST_MANAGED.parent

    def write_managed(self, state_dir: Path) -> Path:
        return write_managed(state_dir)

    def launch_head(self, session_id: str, resume: bool) -> tuple[str, ...]:
        return (RESUME_FLAG if resume else SESSION_FLAG, session_id)

    def effort_fragment(self, level: str) -> tuple[str, ...]:
        return ("--effort", level)

    def probe(self, prompt: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return (PRINT_FLAG, prompt), ()

    def prepare_home(self, setup: HomeSetup) -> HomeReady:
        key = setup.model.key if setup.model is not None else None
        if not setup.sandboxed:
            ready = HomeReady(setup.real_home)
            if key:
                ready.failures += _approve_in(setup.real_home, key)
            ready.trust = pretrust(
                setup.real_home,
                setup.checkout,
                setup.workspace_root,
                setup.trust,
                setup.launch_args,
            )
            return ready
        home = setup.own_home
        ready = HomeReady(home)
        ready.failures += seed_home(
            setup.real_home, home, setup.env, api_key=key, share_login=setup.share_login
        )
        ready.trust = pretrust(
            home,
            setup.checkout,
            setup.workspace_root,
            setup.trust,
            setup.launch_args,
            session_home=True,
        )
        return ready

    def session_env(
        self, model: SessionModel | None, home: Path
    ) -> tuple[dict[str, str], dict[str, str]]:
        if model is None:
            return {}, {}
        return model.env, model.hidden

    def transcript(self, home: Path, session_id: str) -> Path | None:
        return transcript_path(home, session_id)


def _approve_in(home: Path, api_key: str) -> list[str]:
    """An unconfined session uses the operator's own home: its pass is approved there."""
    config = claude_config_path(home)
    try:
        update_json_file(config, lambda data: with_approved_key(data, api_key))
    except (TrustFileError, OSError) as exc:
        return [f"{config}: {exc}"]
    return []


ADAPTER = ClaudeAdapter()
