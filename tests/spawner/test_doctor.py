"""`the-loop doctor` on a devbox: a healthy one passes every check; each fault, introduced in
turn, fails exactly the check it should, with a fix, and exits 1. Real tools on a PATH built
for the test, a temp HOME, the App served on 127.0.0.1 with a real spawner token."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config.operator_config import load_config
from app.fleet.tokens import create_token, mint_session_token
from app.spawner.devbox_checks import Level, check_disk, check_session_user
from app.spawner.probes import Result, Verdict, VerdictCache, plan_probes
from tests.support import RunningApp, free_port

pytestmark = pytest.mark.sqlite_only

ROOT = Path(__file__).resolve().parents[2]
REPO = "octo/loop"
KEY = "sk-ant-test-key-0123456789abcdefghijklmnop"
DEVBOX_YAML = """
harnesses: [{name: claude, default: true, args: [--dangerously-skip-permissions]}]
models: [opus]
effort: [high]
routing: {harnessTrust: {enabled: true, acceptBypassPermissions: auto}}
"""


@dataclass
class Devbox:
    """Everything `doctor` looks at, healthy until a test breaks one part."""

    root: Path
    env: dict[str, str]
    tools: list[str] = field(default_factory=lambda: ["claude", "tmux", "git", "bwrap"])

    @property
    def home(self) -> Path:
        return Path(self.env["HOME"])

    def write_json(self, relative: str, data: Any) -> None:
        path = self.home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data if isinstance(data, str) else json.dumps(data))

    def doctor(self) -> tuple[int, dict[str, dict[str, str]]]:
        bin_dir = self.root / "bin"
        shutil.rmtree(bin_dir, ignore_errors=True)
        bin_dir.mkdir()
        for tool in self.tools:
            found = shutil.which(tool)
            assert found, f"{tool} is needed on this machine"
            (bin_dir / tool).symlink_to(found)
        env = {**self.env, "PATH": str(bin_dir), "COLUMNS": "200"}
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "doctor", "--json"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode in (0, 1), done.stderr
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        return done.returncode, {row.pop("check"): row for row in rows}


@pytest.fixture
def doctor_devbox(tmp_path: Path, running_app: RunningApp) -> Devbox:
    with running_app.state.sessions() as session, session.begin():
        token = create_token(session, "devbox-1", [REPO])
    config = tmp_path / "devbox.yaml"
    config.write_text(DEVBOX_YAML)
    home = tmp_path / "home"
    env = {
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "THE_LOOP_URL": running_app.url,
        "THE_LOOP_SPAWNER_TOKEN": token,
        "THE_LOOP_CONFIG": str(config),
        "THE_LOOP_STATE_DIR": str(tmp_path / "devbox-state"),
        "ANTHROPIC_API_KEY": KEY,
        "IS_SANDBOX": "1",  # claude runs the bypass flag as root only in a sandbox
    }
    box = Devbox(tmp_path, env)
    box.write_json(
        ".claude.json",
        {
            "hasCompletedOnboarding": True,
            "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
        },
    )
    probes = plan_probes(load_config(config), ["claude"])
    cache = VerdictCache(tmp_path / "devbox-state" / "spawner" / "models-cache.json")
    cache.put_many([Result(p, Verdict.OK, "") for p in probes])
    return box


def test_a_healthy_devbox_passes_every_check(doctor_devbox, running_app):
    code, checks = doctor_devbox.doctor()
    assert code == 0, json.dumps(checks, indent=1)
    assert {name: row["level"] for name, row in checks.items()} == {
        "operator config": "ok",
        "claude": "ok",
        "tmux": "ok",
        "git": "ok",
        "sandbox (bwrap)": "ok",
        "network": "ok",
        "session limits": "ok",
        "session user": "ok",
        "session disk": "ok",
        "session environment": "ok",
        "sandbox shows claude": "ok",
        "App reachable": "ok",
        "spawner token": "ok",
        "~/.claude.json": "ok",
        "Claude credential": "ok",
        "bypass disclaimer": "ok",
        "models check": "ok",
    }
    assert "(Claude Code)" in checks["claude"]["detail"]
    assert checks["tmux"]["detail"].startswith("tmux ")
    assert "bubblewrap" in checks["sandbox (bwrap)"]["detail"]
    assert checks["network"]["detail"] == "gateways: the App, the model gateway; egress: none"
    limits = checks["session limits"]["detail"]  # the defaults, by a cgroup of its own
    assert limits.startswith("cgroup") and limits.endswith(": memory 4.0GiB, processes 512")
    # Never root: the spawner's own user, or as root the unprivileged session account.
    user = checks["session user"]["detail"]
    assert ("the-loop-session (uid" in user) if os.geteuid() == 0 else ("never root" in user)
    assert checks["session disk"]["detail"].startswith("20.0GiB per session")
    session_env = checks["session environment"]["detail"]  # names, harmless values only
    assert "PATH=" in session_env and "THE_LOOP_SESSION_TOKEN" in session_env
    assert "THE_LOOP_SPAWNER_TOKEN" not in session_env
    claude = os.path.realpath(shutil.which("claude") or "claude")
    assert f"-> {claude}" in checks["sandbox shows claude"]["detail"]
    assert "spawner devbox-1" in checks["spawner token"]["detail"]
    assert REPO in checks["spawner token"]["detail"]
    assert "harnessTrust" in checks["bypass disclaimer"]["detail"]
    assert checks["models check"]["detail"] == "2 ok"


def _no_tool(name: str) -> Callable[[Devbox], None]:
    return lambda box: box.tools.remove(name)


def _set(key: str, value: str | None) -> Callable[[Devbox], None]:
    def apply(box: Devbox) -> None:
        if value is None:
            box.env.pop(key, None)
        else:
            box.env[key] = value

    return apply


def _refused_verdict(box: Devbox) -> None:
    config = load_config(Path(box.env["THE_LOOP_CONFIG"]))
    cache = VerdictCache(Path(box.env["THE_LOOP_STATE_DIR"]) / "spawner" / "models-cache.json")
    (model, _effort) = plan_probes(config, ["claude"])
    cache.put_many([Result(model, Verdict.REFUSED, "issue with the selected model")])


def _login_only(box: Devbox) -> None:
    box.env.pop("ANTHROPIC_API_KEY")
    box.write_json(".claude/.credentials.json", {"claudeAiOauth": {"accessToken": "x"}})


FAULTS: dict[str, tuple[Callable[[Devbox], None], str, str]] = {
    "no tmux": (_no_tool("tmux"), "tmux", "apt-get install tmux"),
    "no git": (_no_tool("git"), "git", "apt-get install git"),
    "no claude": (_no_tool("claude"), "claude", "npm install"),
    "no sandbox": (_no_tool("bwrap"), "sandbox (bwrap)", "bubblewrap"),
    "App down": (
        _set("THE_LOOP_URL", f"http://127.0.0.1:{free_port()}"),
        "App reachable",
        "start the App",
    ),
    "bad token": (_set("THE_LOOP_SPAWNER_TOKEN", "tlsp_not-a-token"), "spawner token", "create"),
    "no token": (_set("THE_LOOP_SPAWNER_TOKEN", None), "spawner token", "create"),
    "unparseable claude.json": (
        lambda box: box.write_json(".claude.json", '{"projects": {'),
        "~/.claude.json",
        "repair or move aside",
    ),
    "a login not shared": (_login_only, "Claude credential", "shareLogin: true"),
    "unreadable key file": (
        lambda box: Path(box.env["THE_LOOP_CONFIG"]).write_text(
            DEVBOX_YAML.replace("routing: {", "routing: {sandbox: {apiKeyFile: /nonexistent/key}, ")
        ),
        "Claude credential",
        "routing.sandbox.apiKeyFile",
    ),
    "no key, no login": (_set("ANTHROPIC_API_KEY", None), "Claude credential", "claude /login"),
    "bypass not pre-accepted": (
        lambda box: Path(box.env["THE_LOOP_CONFIG"]).write_text(
            DEVBOX_YAML.replace("acceptBypassPermissions: auto", "acceptBypassPermissions: never")
        ),
        "bypass disclaimer",
        "skipDangerousModePermissionPrompt",
    ),
    "refused model": (_refused_verdict, "models check", "fix or remove"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_fails_its_check_with_a_fix(doctor_devbox, fault):
    breaks, check, fix = FAULTS[fault]
    breaks(doctor_devbox)
    code, checks = doctor_devbox.doctor()
    assert code == 1
    failed = {name for name, row in checks.items() if row["level"] == "fail"}
    assert check in failed, checks[check]
    assert fix in checks[check]["fix"]
    if fault == "App down":
        assert checks["spawner token"]["level"] == "warn"  # cannot be checked without the App
    if fault == "unparseable claude.json":
        assert (
            doctor_devbox.home.joinpath(".claude.json").read_text() == '{"projects": {'
        )  # untouched


def test_remedies_doctor_accepts(doctor_devbox):
    """A login shared with sessions instead of a key; the disclaimer pre-accepted by hand
    instead of harnessTrust."""
    _login_only(doctor_devbox)
    Path(doctor_devbox.env["THE_LOOP_CONFIG"]).write_text(
        DEVBOX_YAML.replace(
            "acceptBypassPermissions: auto", "acceptBypassPermissions: never"
        ).replace("routing: {", "routing: {sandbox: {shareLogin: true}, ")
    )
    doctor_devbox.write_json(".claude/settings.json", {"skipDangerousModePermissionPrompt": True})
    code, checks = doctor_devbox.doctor()
    assert code == 0, json.dumps(checks, indent=1)
    assert checks["Claude credential"]["detail"].startswith("logged in")
    assert "pre-accepted in" in checks["bypass disclaimer"]["detail"]


@pytest.mark.skipif(os.geteuid() != 0, reason="claude refuses the bypass flag only as root")
def test_root_without_a_sandbox_cannot_bypass(doctor_devbox):
    doctor_devbox.env.pop("IS_SANDBOX")
    code, checks = doctor_devbox.doctor()
    assert code == 1 and checks["bypass disclaimer"]["level"] == "fail"
    assert "as root" in checks["bypass disclaimer"]["detail"]


def test_whoami_answers_spawner_tokens_only(doctor_devbox, running_app):
    url = f"{running_app.url}/spawner/v1/whoami"
    token = doctor_devbox.env["THE_LOOP_SPAWNER_TOKEN"]
    me = httpx.get(url, headers={"Authorization": f"Bearer {token}"}).json()
    assert me["name"] == "devbox-1" and me["allowed"] == [REPO] and me["serves"] is None
    assert httpx.get(url).status_code == 401
    with running_app.state.sessions() as session, session.begin():
        session_token = mint_session_token(session, f"github:{REPO}#1", datetime.now(UTC))
    refused = httpx.get(url, headers={"Authorization": f"Bearer {session_token}"})
    assert refused.status_code == 403


def test_pure_verdicts_on_the_edges():
    from app.config.operator_config import HarnessTrust
    from app.spawner import devbox_checks as dc

    ok = dc.HttpOutcome(200, {"ok": True, "version": "0.1.0"})
    assert dc.check_app("http://127.0.0.1:3000", ok).level is dc.Level.OK
    assert dc.check_app("http://localhost:3000", ok).level is dc.Level.OK
    assert dc.check_app("http://the-loop.example.com", ok).level is dc.Level.WARN
    assert dc.check_app("https://the-loop.example.com", ok).level is dc.Level.OK
    assert dc.check_app("https://x", dc.HttpOutcome(502)).level is dc.Level.FAIL

    nothing = dc.JsonFile("c", None)
    verdict = dc.check_credential("ANTHROPIC_API_KEY", None, nothing, False)
    assert verdict.level is dc.Level.OK and "gateway" in verdict.detail
    verdict = dc.check_credential(None, None, nothing, True)
    assert verdict.level is dc.Level.FAIL and "claude /login" in verdict.fix

    auto = HarnessTrust(accept_bypass_permissions="auto")
    broken = dc.JsonFile("~/.claude/settings.json", "{nope")
    args = ["--dangerously-skip-permissions"]
    verdict = dc.check_bypass(args, auto, broken, root=False, sandboxed=False)
    assert verdict.level is dc.Level.FAIL and "repair" in verdict.fix

    whoami = dc.HttpOutcome(200, {"name": "d", "allowed": ["o/a"], "serves": []})
    assert dc.check_token(True, whoami).level is dc.Level.FAIL  # registered, serves nothing


def test_the_network_check_says_the_mode():
    from app.config.sandbox_config import Sandbox
    from app.spawner import devbox_checks as dc

    listed = Sandbox(egress=["pypi.org:443"])
    verdict = dc.check_network(listed, True)
    assert verdict.level is dc.Level.OK and verdict.detail.endswith("egress: pypi.org:443")
    verdict = dc.check_network(Sandbox(network="host"), True)
    assert verdict.level is dc.Level.WARN and verdict.detail.startswith("host:")
    verdict = dc.check_network(Sandbox(), False, "bwrap: loopback: Failed RTM_NEWADDR")
    assert verdict.level is dc.Level.FAIL and "RTM_NEWADDR" in verdict.detail
    assert dc.check_network(Sandbox(mode="none"), True).level is dc.Level.WARN


def test_doctor_says_what_each_preset_expands_to_and_which_services_answer(doctor_devbox):
    import re
    import socket

    listening = socket.create_server(("127.0.0.1", 0))
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    port = listening.getsockname()[1]
    services = [f"127.0.0.1:{port}", f"127.0.0.1:{closed_port}"]
    sandbox = {"egress": ["python", "node", "rust"], "services": services}
    Path(doctor_devbox.env["THE_LOOP_CONFIG"]).write_text(
        DEVBOX_YAML.replace("routing: {", f"routing: {{sandbox: {json.dumps(sandbox)}, ")
    )
    doctor_devbox.tools += ["python3", "npm", "node"]
    try:
        _, checks = doctor_devbox.doctor()
    finally:
        listening.close()
    hosts = re.compile(r"^[a-z0-9.-]+:\d+(, [a-z0-9.-]+:\d+)*$")
    for preset in ("python", "node"):  # this machine's pip and npm name their registries
        row = checks[f"egress preset {preset}"]
        assert row["level"] == "ok" and hosts.match(row["detail"]), row
    rust = checks["egress preset rust"]  # this devbox's cargo names no registry of its own
    assert rust["level"] == "warn" and rust["detail"].startswith("nothing (")
    assert checks[f"service 127.0.0.1:{port}"]["level"] == "ok"
    down = checks[f"service 127.0.0.1:{closed_port}"]
    assert down["level"] == "warn" and "does not answer" in down["detail"]


def test_doctor_says_who_sessions_run_as_and_fails_a_root_spawner_without_a_sandbox():
    as_user = check_session_user(1000, sandboxed=True, account=None, name="the-loop-session")
    assert as_user.level is Level.OK and "uid 1000" in as_user.detail
    made = check_session_user(0, sandboxed=True, account=("the-loop-session", 999), name="x")
    assert made.level is Level.OK and made.detail.startswith("the-loop-session (uid 999)")
    later = check_session_user(0, sandboxed=True, account=None, name="the-loop-session")
    assert later.level is Level.OK and "made on the first launch" in later.detail
    root = check_session_user(0, sandboxed=False, account=None, name="the-loop-session")
    assert root.level is Level.FAIL and "as root" in root.detail and "bubblewrap" in root.fix
    unbounded = check_disk(None, "")
    assert unbounded.level is Level.WARN and "routing.sandbox.limits.disk" in unbounded.fix
