"""OpenAI's Codex CLI as a harness.

- argv: `codex --no-daemon --dangerously-bypass-hook-trust --enable hooks <operator args>
  <model/effort>` (the background daemon would copy hundreds of megabytes into the home; the
  hook flags keep the "Hooks need review" screen away and hooks on whatever a config file
  the session writes says, see `codex_config`); a relaunch is `codex resume
  --last …` in the session's own `CODEX_HOME`, which holds that session only. Codex names its
  sessions itself: the spawner's session id is the-loop's, not Codex's;
- home: `CODEX_HOME` is `<the session's own home>/.codex` (confined or not), its
  `config.toml` written before every launch (`codex_config.session_config`: the gateway as
  the model provider, trust for the checkout, nothing outbound; the stop gate as a Stop
  hook only when unconfined) without following a link the session planted, and its `.env`
  removed (Codex loads that file into its own environment, which its hooks inherit: a
  session could blank the gate's `THE_LOOP_WORK_ITEM` there); git's identity beside it;
- managed: a sandboxed session's stop gate is in `/etc/codex/requirements.toml`
  (`write_managed`: the spawner's `<state dir>/codex-managed/`, shown read-only at
  `/etc/codex`), hooks switched on by the launch: nothing the session writes removes or
  disables it;
- model: the pass in `THE_LOOP_MODEL_PASS` (the provider's `env_key`), never on a command
  line; the gateway's URL is in the config;
- screens: `codex_screens.CODEX_SCREENS`; a paste is a bracketed paste and its Enter comes at
  least `enter_after` later (an Enter right behind the text is swallowed);
- transcript: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`, the newest;
- `models check`: `codex exec --skip-git-repo-check --ephemeral <args> <fragment> -- <prompt>`.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from app.files import FileLock, remove_within, write_text_atomic, write_within
from app.gateway import SessionModel
from app.spawner.harness import HomeReady, HomeSetup, TrustOutcome
from app.spawner.harness.codex_config import (
    PASS_VARIABLE,
    CodexSetup,
    carried_settings,
    managed_requirements,
    session_config,
)
from app.spawner.harness.codex_screens import CODEX_SCREENS
from app.spawner.workspace.gitidentity import write_git_identity
from hooks.gate_entry import direct_command, managed_command

HOME_DIR = ".codex"
CONFIG = "config.toml"
DOTENV = ".env"  # loaded by Codex into its own environment at start
MANAGED = "codex-managed"  # under the state directory: shown as /etc/codex inside
MANAGED_AT = Path("/etc/codex")  # Codex's system layer on Unix
REQUIREMENTS = "requirements.toml"  # admin-enforced: no user or project setting overrides it
NO_DAEMON = "--no-daemon"
HOOK_TRUST = "--dangerously-bypass-hook-trust"
HOOKS_ON = ("--enable", "hooks")  # above every config layer, so no file switches hooks off
NO_GATEWAY = (
    "Codex sessions reach the model only through the model gateway, which is not running: "
    "set OPENAI_API_KEY (or routing.sandbox.openaiKeyFile) for the spawner"
)


def codex_home(home: Path) -> Path:
    return home / HOME_DIR


def _operator_config(real_home: Path, env: dict[str, str]) -> Path:
    custom = env.get("CODEX_HOME")
    return (Path(custom).expanduser() if custom else codex_home(real_home)) / CONFIG


def _read(path: Path) -> tuple[str, list[str]]:
    with FileLock(path):
        try:
            return path.read_text(), []
        except FileNotFoundError:
            return "", []
        except (OSError, UnicodeDecodeError) as exc:
            return "", [f"{path}: {exc}"]


class CodexAdapter:
    name = "codex"
    wire = "responses"  # the model gateway's API it speaks (app.gateway.wires)
    deny: tuple[str, ...] = ()
    own_home_unconfined = True  # a home of its own even when the sandbox is off
    screens = CODEX_SCREENS
    enter_after = 0.1
    # Codex just started takes a paste in without showing it (for seconds): the Enter goes
    # `enter_after` behind the paste, not once the box shows it.
    enter_when_shown = False
    closed_network_env: dict[str, str] = {}
    own_hosts: tuple[str, ...] = ()
    managed_at = MANAGED_AT

    def write_managed(self, state_dir: Path, host: Path = MANAGED_AT) -> Path:
        """The spawner's copy of the host's `/etc/codex` (its top-level files), with the
        stop gate added to `requirements.toml` (`codex_config.managed_requirements`)."""
        directory = state_dir / MANAGED
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        kept = {REQUIREMENTS}
        if host.is_dir():
            for entry in sorted(host.iterdir()):
                if entry.name != REQUIREMENTS and entry.is_file() and not entry.is_symlink():
                    write_text_atomic(directory / entry.name, entry.read_text(), 0o644)
                    kept.add(entry.name)
        for stale in directory.iterdir():  # not another launch's temporary (dot) file
            if stale.name not in kept and not stale.name.startswith("."):
                stale.unlink(missing_ok=True)
        source = host / REQUIREMENTS
        try:
            text = source.read_text()
        except FileNotFoundError:
            text = ""
        wanted = managed_requirements(text, str(source), managed_command())
        write_text_atomic(directory / REQUIREMENTS, wanted, 0o644)
        return directory

    def launch_head(self, session_id: str, resume: bool) -> tuple[str, ...]:
        flags = (NO_DAEMON, HOOK_TRUST, *HOOKS_ON)
        return ("resume", "--last", *flags) if resume else flags

    def effort_fragment(self, level: str) -> tuple[str, ...]:
        return ("-c", f"model_reasoning_effort={json.dumps(level)}")

    def probe(self, prompt: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """`codex exec` with the operator's own Codex config (their provider: the Responses
        API), leaving no session behind; the prompt after `--`, so no flag takes it."""
        return ("exec", "--skip-git-repo-check", "--ephemeral"), ("--", prompt)

    def prepare_home(self, setup: HomeSetup) -> HomeReady:
        home = setup.own_home
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        ready = HomeReady(home)
        source = _operator_config(setup.real_home, dict(setup.env))
        text, ready.failures = _read(source)
        carried, provider, problems = carried_settings(text, str(source))
        ready.failures += problems
        if setup.model is None:
            ready.failures.append(NO_GATEWAY)
        checkout = str(setup.checkout.resolve())
        wanted = CodexSetup(
            gateway_url=setup.model.url if setup.model is not None else "",
            checkout=checkout,
            stop_command=None if setup.sandboxed else direct_command(),
            carried=carried,
            provider=provider,
        )
        relative = f"{HOME_DIR}/{CONFIG}"
        try:
            write_within(home, relative, session_config(wanted), 0o600)
            ready.trust = TrustOutcome(directories=[checkout], written=True)
        except OSError as exc:
            ready.failures.append(f"{home / relative}: {exc}")
            ready.trust = TrustOutcome(failures=[f"{home / relative}: {exc}"])
        try:
            remove_within(home, f"{HOME_DIR}/{DOTENV}")
        except OSError as exc:
            ready.failures.append(f"{home / HOME_DIR / DOTENV}: {exc}")
        ready.failures += write_git_identity(setup.real_home, home)
        return ready

    def session_env(
        self, model: SessionModel | None, home: Path
    ) -> tuple[dict[str, str], dict[str, str]]:
        env = {"CODEX_HOME": str(codex_home(home))}
        return env, ({PASS_VARIABLE: model.key} if model is not None else {})

    def transcript(self, home: Path, session_id: str) -> Path | None:
        """The newest rollout file under the home's `sessions/`, no link followed."""
        return newest_rollout(codex_home(home) / "sessions")


def _plain_entries(directory: Path, *, dirs: bool) -> list[os.DirEntry[str]]:
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            return []
        entries = list(os.scandir(directory))
    except OSError:
        return []
    if dirs:
        return [e for e in entries if e.is_dir(follow_symlinks=False)]
    return [e for e in entries if e.is_file(follow_symlinks=False)]


def newest_rollout(sessions: Path) -> Path | None:
    """`sessions/YYYY/MM/DD/rollout-*.jsonl` with the greatest date and name, or None."""
    found: Path = sessions
    for _ in range(3):  # year, month, day
        entries = sorted(_plain_entries(found, dirs=True), key=lambda e: e.name)
        if not entries:
            return None
        found = Path(entries[-1].path)
    files = sorted(
        (e for e in _plain_entries(found, dirs=False) if e.name.startswith("rollout-")),
        key=lambda e: e.name,
    )
    return Path(files[-1].path) if files else None


ADAPTER = CodexAdapter()
