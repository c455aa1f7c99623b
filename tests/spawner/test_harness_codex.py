"""The Codex adapter, without a binary: its argv, the files it writes into a session's home,
and how it reads the screens captured from the real binary (tests/data/codex-screens/)."""

from __future__ import annotations

import os
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from app.config.offered_harnesses import HOSTING_ADAPTERS
from app.config.operator_config import HarnessTrust, parse_config
from app.gateway.access import SessionModel
from app.spawner.argv import Choice, build_launch
from app.spawner.harness import HomeSetup, adapter_of
from app.spawner.harness.codex import ADAPTER as CODEX
from app.spawner.harness.codex import newest_rollout
from app.spawner.harness.codex_config import PASS_VARIABLE
from app.spawner.harness.codex_screens import CODEX_SCREENS
from app.spawner.harness.screens import Screen
from app.spawner.session.dialogs import keystrokes, parse_dialog
from hooks.gate_entry import managed_command

SCREENS = Path(__file__).parents[1] / "data" / "codex-screens"
CONFIG = parse_config(
    {
        "harnesses": [{"name": "claude", "default": True}, {"name": "codex"}],
        "models": [{"name": "gpt", "id": "gpt-5.1-codex", "harnesses": ["codex"]}],
        "effort": ["high"],
    }
)
PASS = "sk-ant-api03-session-pass-tlgw"


def screen(name: str) -> str:
    return (SCREENS / f"{name}.txt").read_text()


def test_codex_is_in_the_harness_table_and_its_launch_says_only_codex_flags() -> None:
    assert {"claude", "codex"} <= HOSTING_ADAPTERS
    launch = build_launch(CONFIG, Choice("codex", "gpt", "high"), session_id="u-1", prompt="hi")
    assert launch.argv == [
        "codex",
        "--no-daemon",
        "--dangerously-bypass-hook-trust",
        "--enable",
        "hooks",
        "--model",
        "gpt-5.1-codex",
        "-c",
        'model_reasoning_effort="high"',
    ]
    assert "hi" not in launch.argv  # the prompt is pasted, never an argument
    again = build_launch(CONFIG, Choice("codex"), session_id="u-1", prompt=None, resume=True)
    assert again.argv[:3] == ["codex", "resume", "--last"]
    claude = build_launch(CONFIG, Choice("claude", "", "high"), session_id="u-1", prompt=None)
    assert claude.argv[:3] == ["claude", "--session-id", "u-1"]
    assert claude.argv[3:5] == ["--effort", "high"]


def _setup(tmp_path: Path, real_home: Path) -> HomeSetup:
    checkout = tmp_path / "work" / "item"
    checkout.mkdir(parents=True)
    return HomeSetup(
        real_home=real_home,
        own_home=tmp_path / "state" / "homes" / "item",
        sandboxed=True,
        checkout=checkout,
        workspace_root=tmp_path / "work",
        env={},
        trust=HarnessTrust(),
        launch_args=(),
        model=SessionModel("http://127.0.0.1:4567", PASS),
        share_login=False,
    )


def test_the_session_s_config_points_at_the_gateway_trusts_the_checkout_and_holds_no_hook(
    tmp_path: Path,
) -> None:
    real = tmp_path / "operator"
    (real / ".codex").mkdir(parents=True)
    (real / ".codex" / "config.toml").write_text(
        'model = "gpt-5.1-codex"\nmodel_reasoning_effort = "medium"\n'
        'model_provider = "azure"\nexperimental_bearer_token = "sk-operator-secret"\n'
        '[model_providers.azure]\nbase_url = "https://x"\nenv_key = "AZURE_KEY"\n'
        'request_max_retries = 2\nhttp_headers = { "api-key" = "sk-header-secret" }\n'
        'query_params = { api-version = "2025-04-01-preview" }\n'
    )
    setup = _setup(tmp_path, real)
    adapter = adapter_of("codex")
    ready = adapter.prepare_home(setup)
    assert ready.failures == [] and ready.home == setup.own_home
    text = (setup.own_home / ".codex" / "config.toml").read_text()
    assert "sk-operator-secret" not in text and "azure" not in text and PASS not in text
    assert "sk-header-secret" not in text and "AZURE_KEY" not in text
    data = tomllib.loads(text)
    assert data["model"] == "gpt-5.1-codex" and data["model_reasoning_effort"] == "medium"
    provider = data["model_providers"][data["model_provider"]]
    assert provider == {
        "request_max_retries": 2,
        "query_params": {"api-version": "2025-04-01-preview"},
        "name": "the-loop model gateway",
        "base_url": "http://127.0.0.1:4567/v1",
        "wire_api": "responses",
        "env_key": PASS_VARIABLE,
    }
    assert (data["approval_policy"], data["sandbox_mode"]) == ("never", "danger-full-access")
    assert data["check_for_update_on_startup"] is False and data["allow_login_shell"] is False
    assert data["web_search"] == "disabled"  # the gateway refuses hosted search unless listed
    assert data["analytics"] == {"enabled": False} and data["features"] == {"plugins": False}
    checkout = str(setup.checkout.resolve())
    assert data["projects"] == {checkout: {"trust_level": "trusted"}}
    assert "hooks" not in data  # the gate is in the managed requirements, out of its reach
    env, hidden = adapter.session_env(setup.model, ready.home)
    assert env == {"CODEX_HOME": str(setup.own_home / ".codex")}
    assert hidden == {PASS_VARIABLE: PASS}


def test_an_unconfined_session_s_config_carries_the_stop_gate_and_no_env_file_survives(
    tmp_path: Path,
) -> None:
    setup = replace(_setup(tmp_path, tmp_path / "operator"), sandboxed=False)
    planted = setup.own_home / ".codex" / ".env"
    planted.parent.mkdir(parents=True)
    planted.write_text("THE_LOOP_WORK_ITEM=\n")  # what Codex would load into the gate's env
    ready = adapter_of("codex").prepare_home(setup)
    assert ready.failures == [] and not planted.exists()
    data = tomllib.loads((setup.own_home / ".codex" / "config.toml").read_text())
    (hook,) = data["hooks"]["Stop"][0]["hooks"]
    assert hook["type"] == "command" and hook["command"].endswith("hooks/stop_gate.py")


def test_the_managed_requirements_hold_the_host_s_own_and_the_stop_gate(tmp_path: Path) -> None:
    host = tmp_path / "etc-codex"
    host.mkdir()
    (host / "requirements.toml").write_text('allowed_approval_policies = ["never"]\n')
    (host / "managed_config.toml").write_text('model = "gpt-5.1-codex"\n')
    state = tmp_path / "state"
    (state / "codex-managed").mkdir(parents=True)
    (state / "codex-managed" / "gone.toml").write_text("x = 1\n")  # the host no longer has it
    managed = CODEX.write_managed(state, host)
    assert managed == state / "codex-managed" and CODEX.managed_at == Path("/etc/codex")
    assert sorted(p.name for p in managed.iterdir()) == ["managed_config.toml", "requirements.toml"]
    data = tomllib.loads((managed / "requirements.toml").read_text())
    assert data["allowed_approval_policies"] == ["never"]
    (hook,) = data["hooks"]["Stop"][0]["hooks"]
    assert hook["type"] == "command" and hook["command"] == managed_command()
    assert "features" not in data  # hooks go on from the command line (see codex_config)
    assert (managed / "managed_config.toml").read_text() == 'model = "gpt-5.1-codex"\n'
    # No host /etc/codex at all: the gate alone.
    alone = CODEX.write_managed(tmp_path / "bare", tmp_path / "absent")
    assert set(tomllib.loads((alone / "requirements.toml").read_text())) == {"hooks"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[hooks.Stop]]\n", "sets hooks"),
        ("[features]\nhooks = false\n", "sets hooks"),
        ("[features]\ncodex_hooks = false\n", "sets hooks"),
        ("x = [\n", "not valid TOML"),
    ],
)
def test_host_requirements_that_would_lose_the_gate_are_refused_by_name(
    text: str, says: str
) -> None:
    from app.spawner.harness.codex_config import managed_requirements

    with pytest.raises(ValueError) as caught:
        managed_requirements(text, "/etc/codex/requirements.toml", "gate")
    assert str(caught.value).startswith("/etc/codex/requirements.toml") and says in str(
        caught.value
    )


def test_a_link_the_session_planted_is_replaced_never_written_through(tmp_path: Path) -> None:
    setup = _setup(tmp_path, tmp_path / "operator")
    victim = tmp_path / "operator-file"
    victim.write_text("keep me")
    (setup.own_home / ".codex").mkdir(parents=True)
    os.symlink(victim, setup.own_home / ".codex" / "config.toml")
    ready = adapter_of("codex").prepare_home(setup)
    assert ready.failures == []
    assert victim.read_text() == "keep me"
    assert not (setup.own_home / ".codex" / "config.toml").is_symlink()


def test_an_operator_config_that_is_not_toml_is_named_and_nothing_is_carried(
    tmp_path: Path,
) -> None:
    real = tmp_path / "operator"
    (real / ".codex").mkdir(parents=True)
    (real / ".codex" / "config.toml").write_text("model = [unclosed\n")
    ready = adapter_of("codex").prepare_home(_setup(tmp_path, real))
    assert len(ready.failures) == 1 and "config.toml: not valid TOML" in ready.failures[0]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("trust-dialog", Screen.TRUST_DIALOG),
        ("hooks-review", Screen.HOOKS_REVIEW),
        ("approval-prompt", Screen.PERMISSION_PROMPT),
        ("ready", None),
        ("pasted", None),
        ("working", None),
    ],
)
def test_the_blocking_screens_of_the_real_binary_are_recognised(
    name: str, expected: Screen | None
) -> None:
    assert CODEX_SCREENS.classify(screen(name)) == expected
    assert CODEX_SCREENS.input_ready(screen(name)) is (expected is None)


def test_the_input_box_is_read_empty_holding_a_paste_and_after_sending() -> None:
    pasted = "hello there, please run the command for me now"
    assert CODEX_SCREENS.input_line(screen("ready")) == ""
    assert CODEX_SCREENS.input_line(screen("pasted")) == pasted
    assert CODEX_SCREENS.unsent(screen("pasted"), pasted)
    assert CODEX_SCREENS.echoes(screen("pasted"), pasted) == 0
    assert CODEX_SCREENS.echoes(screen("working"), pasted) == 1
    assert not CODEX_SCREENS.unsent(screen("working"), pasted)
    assert CODEX_SCREENS.transcript_messages(screen("ready")) == 0


def test_each_blocking_screen_is_a_question_the_answer_keys_can_pick() -> None:
    approval = parse_dialog(screen("approval-prompt"))
    assert approval is not None and approval.options[0] == "Yes, proceed (y)"
    assert keystrokes(approval, 1) == ["Enter"] and keystrokes(approval, 3) == [
        "Down",
        "Down",
        "Enter",
    ]
    trust = parse_dialog(screen("trust-dialog"))
    assert trust is not None and trust.question == "Trust this folder?"
    hooks = parse_dialog(screen("hooks-review"))
    assert hooks is not None and hooks.options[1] == "Trust all and continue"
    assert keystrokes(hooks, 2) == ["Down", "Enter"]


def test_the_transcript_is_the_newest_rollout_and_a_link_is_never_followed(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / ".codex" / "sessions"
    for day in ("2026/12/02", "2026/12/03"):
        (sessions / day).mkdir(parents=True)
    (sessions / "2026/12/02" / "rollout-a.jsonl").write_text("{}\n")
    (sessions / "2026/12/03" / "rollout-b.jsonl").write_text("{}\n")
    assert newest_rollout(sessions) == sessions / "2026/12/03" / "rollout-b.jsonl"
    assert adapter_of("codex").transcript(tmp_path, "any") == newest_rollout(sessions)
    os.symlink(tmp_path, sessions / "2027")
    assert newest_rollout(sessions) == sessions / "2026/12/03" / "rollout-b.jsonl"


def test_doctor_names_the_codex_binary_and_the_openai_credential(tmp_path: Path) -> None:
    from app.commands.doctor import find_tool, openai_credential
    from app.spawner.devbox_checks import Level, check_tool

    missing = check_tool(find_tool("codex", "codex", "--version", {"PATH": str(tmp_path)}))
    assert missing.level is Level.FAIL and "npm install -g @openai/codex" in missing.fix
    assert openai_credential(CONFIG, {}).level is Level.FAIL
    keyed = openai_credential(CONFIG, {"OPENAI_API_KEY": "sk-x"})
    assert (
        keyed.level is Level.OK and "OPENAI_API_KEY" in keyed.detail and "sk-x" not in keyed.detail
    )


@pytest.mark.parametrize(
    "checkout",
    ['/work/a "quoted" dir', "/work/back\\slash", "/work/naïve-ünïcode", "/work/tab\there"],
)
def test_any_checkout_path_reads_back_exactly_from_the_written_toml(checkout: str) -> None:
    from app.spawner.harness.codex_config import CodexSetup, session_config

    text = session_config(CodexSetup("http://127.0.0.1:1", checkout, 'py -S "/x y"/g.py', {}))
    data = tomllib.loads(text)
    assert data["projects"] == {checkout: {"trust_level": "trusted"}}
    assert data["hooks"]["Stop"][0]["hooks"][0]["command"] == 'py -S "/x y"/g.py'
