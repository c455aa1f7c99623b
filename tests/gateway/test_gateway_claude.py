"""The model gateway on the real spawn path: an issue executed on a running App, the spawner's
agent loop launching the real `claude` inside bubblewrap, the scripted model behind the
gateway serving known `usage` numbers.

The operator's API key and tokens (in the spawner's environment), their OAuth login and their
`primaryApiKey` (in the devbox user's home) are canaries: a Bash tool call inside the
session looks for them in every environment it can read — its own, and bwrap's own
through `/proc/1/environ` when it may read it (not as the session's user of a root spawner) — and in every file of its home, and finds none. The model was
sent the operator's key on every request and never the session's pass; the App's count
for the item is exactly what the model served; a wrong pass is refused from inside the
session, and the session's own pass is refused once the issue is closed.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config.operator_config import parse_config
from app.gateway.metering import COUNTED
from app.spawner.context import SpawnerContext
from app.store.tables import WorkItemStatus
from app.workitems.spend.usage import usage_of
from tests.claude_support import GENEROUS, claude_binary
from tests.devbox_support import running_devbox, scripted_env, scripted_home
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything, bash, contains
from tests.fakes.model_script import tool_result_for
from tests.gate_support import ITEM, REPO, comment, deliver, item_row, labeled, progress_of
from tests.spawner_support import bare_repository
from tests.support import RunningApp, fixture_json, wait_for, with_installation

pytestmark = [
    pytest.mark.claude,
    pytest.mark.parametrize("database_url", ["sqlite"], indirect=True),
]
CANARY_KEY = "sk-ant-api03-CANARY-operator-key-in-the-spawner-env-000"
CANARY_ACCESS = "sk-ant-oat01-CANARY-oauth-access-token-of-the-operator"
CANARY_REFRESH = "sk-ant-ort01-CANARY-oauth-refresh-token-of-the-operator"
CANARY_PRIMARY = "sk-ant-api03-CANARY-primary-api-key-in-claude-json"
CANARY_BEARER = "CANARY-operator-bearer-token-in-the-spawner-env"
CANARY_OAUTH_ENV = "sk-ant-oat01-CANARY-oauth-token-in-the-spawner-env"
CANARIES = [
    CANARY_KEY,
    CANARY_ACCESS,
    CANARY_REFRESH,
    CANARY_PRIMARY,
    CANARY_BEARER,
    CANARY_OAUTH_ENV,
]
WRONG_PASS = "sk-ant-api03-" + "w" * 43 + "-tlgw"
FIRST = (
    ("input_tokens", 3001),
    ("output_tokens", 41),
    ("cache_read_input_tokens", 2000),
    ("cache_creation_input_tokens", 500),
)
SECOND = (
    ("input_tokens", 3107),
    ("output_tokens", 17),
    ("cache_read_input_tokens", 4500),
    ("cache_creation_input_tokens", 0),
)
EXECUTE = "the-loop execute\n- [ ] requirements-definition\n"
# What the session's Bash tool runs: every environment it can read, every file of its home,
# and one request to the gateway with a pass that is nobody's.
SCAN = r"""
import json, os, sys, urllib.error, urllib.request
canaries = json.load(open(sys.argv[1]))
found, environs = [], []
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        data = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        continue
    environs.append(int(pid))
    found += [f"/proc/{pid}/environ" for c in canaries if c.encode() in data]
found += ["os.environ" for c in canaries if any(c in v for v in os.environ.values())]
for root, _, files in os.walk(os.environ["HOME"]):
    for name in files:
        path = os.path.join(root, name)
        try:
            data = open(path, "rb").read()
        except OSError:
            continue
        found += [path for c in canaries if c.encode() in data]
wrong = urllib.request.Request(
    os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=b"{}", method="POST",
    headers={"x-api-key": sys.argv[3], "content-type": "application/json"})
try:
    refused = urllib.request.urlopen(wrong, timeout=30).status
except urllib.error.HTTPError as exc:
    refused = exc.code
report = {
    "found": found, "environs": environs, "refused": refused,
    "pid1": open("/proc/1/cmdline", "rb").read().split(b"\0")[0].decode(),
    "key": os.environ.get("ANTHROPIC_API_KEY", ""),
    "base_url": os.environ.get("ANTHROPIC_BASE_URL", ""),
}
json.dump(report, open(sys.argv[2], "w"))
print("scanned", len(environs), "environments")
"""


def the_script(command: str) -> list[Step]:
    return [
        Step(contains("Work on the GitHub issue"), Reply("Scanning.", (bash(command),), FIRST)),
        Step(tool_result_for("Bash", "scanned"), Reply("Scanned.", usage=SECOND)),
        # What the stop gate's feedback brings (no phase artifact was written).
        *[Step(anything, Reply("Stopping here.")) for _ in range(6)],
    ]


@pytest.fixture
def tools(tmp_path: Path) -> tuple[Path, Path]:
    tools, reports = tmp_path / "tools", tmp_path / "reports"
    tools.mkdir()
    reports.mkdir()
    reports.chmod(0o777)  # a root spawner's session is another user
    (tools / "scan.py").write_text(SCAN)
    (tools / "canaries.json").write_text(json.dumps(CANARIES))
    return tools, reports


def model_script(tools: tuple[Path, Path]) -> list[Step]:
    tool_dir, reports = tools
    command = (
        f"python3 {tool_dir}/scan.py {tool_dir}/canaries.json {reports}/scan.json {WRONG_PASS}"
    )
    return the_script(command)


MODEL_SCRIPT = model_script


def operator_home(tmp_path: Path) -> Path:
    """The devbox user's home, holding a login and a primary key (canaries both)."""
    home = scripted_home(tmp_path)
    login = {
        "claudeAiOauth": {
            "accessToken": CANARY_ACCESS,
            "refreshToken": CANARY_REFRESH,
            "expiresAt": 4102444800000,
            "scopes": ["user:inference"],
        }
    }
    (home / ".claude" / ".credentials.json").write_text(json.dumps(login))
    config = json.loads((home / ".claude.json").read_text())
    config["primaryApiKey"] = CANARY_PRIMARY
    (home / ".claude.json").write_text(json.dumps(config))
    return home


@pytest.fixture
def canary_devbox(
    running_app: RunningApp, model: FakeAnthropic, tools: tuple[Path, Path], tmp_path: Path
) -> Iterator[SpawnerContext]:
    tool_dir, reports = tools
    config = parse_config(
        {
            "harnesses": [
                {
                    "name": "claude",
                    "default": True,
                    "command": claude_binary(),
                    "args": ["--dangerously-skip-permissions"],
                }
            ],
            "routing": {
                "workspace": {"root": str(tmp_path / "work")},
                "sandbox": {"readOnly": [str(tool_dir)], "readWrite": [str(reports)]},
            },
        }
    )
    home = operator_home(tmp_path)
    env = scripted_env(
        model.url,
        home,
        ANTHROPIC_API_KEY=CANARY_KEY,
        ANTHROPIC_AUTH_TOKEN=CANARY_BEARER,
        CLAUDE_CODE_OAUTH_TOKEN=CANARY_OAUTH_ENV,
    )
    registered = lambda: running_app.events("spawner.registered")  # noqa: E731
    engine = running_app.state.engine
    with running_devbox(running_app.url, engine, REPO, config, home, env, registered) as ctx:
        yield ctx


def served(model: FakeAnthropic) -> dict[str, int]:
    """What the model's answers reported, summed, how many answers there were and how many
    tool calls they asked for."""
    answered = [r for r in model.snapshot() if r.kind in ("main", "side")]
    totals = {name: sum(r.served.get(name, 0) for r in answered) for name in COUNTED}
    tools = sum(1 for r in answered for block in r.reply if block.get("type") == "tool_use")
    return {**totals, "requests": len(answered), "tool_calls": tools}


def counted(app: RunningApp) -> dict[str, int]:
    """The App's counts for the item (but the harness's working time: see `active`)."""
    with app.state.sessions() as session:
        found = usage_of(session, [ITEM])[ITEM]
    return {name: value for name, value in found.items() if name != "active_ms"}


def active(app: RunningApp) -> int:
    with app.state.sessions() as session:
        return usage_of(session, [ITEM])[ITEM]["active_ms"]


def close_issue(app: RunningApp) -> None:
    closed = with_installation(fixture_json("github/issues.closed.json"))
    closed["repository"] = labeled()["repository"]
    closed["issue"]["number"] = 1
    deliver(app, "issues", closed, "closed")


def test_a_session_reaches_the_model_only_through_the_gateway_and_its_usage_is_counted(
    running_app: RunningApp,
    fake_github: Any,
    canary_devbox: SpawnerContext,
    model: FakeAnthropic,
    tools: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    labelled = copy.deepcopy(labeled())
    labelled["repository"]["clone_url"] = str(bare_repository(tmp_path))
    deliver(running_app, "issues", labelled, "label")
    deliver(running_app, "issue_comment", comment(EXECUTE, cid=9001), "execute")

    model.wait_for_step(1, timeout=GENEROUS)  # the scan ran and its result reached the model
    report = json.loads((tools[1] / "scan.json").read_text())
    assert report["found"] == []
    assert report["pid1"].endswith("bwrap") and report["environs"]
    # bwrap's own environment is read (and clean), unless the session runs as its own user.
    assert (1 in report["environs"]) == (os.geteuid() != 0)
    assert report["refused"] == 401
    assert canary_devbox.models is not None
    assert report["base_url"] == canary_devbox.models.gateway.url
    session_pass = report["key"]
    assert session_pass.startswith("sk-ant-api03-") and session_pass.endswith("-tlgw")
    socket = canary_devbox.runner.socket
    tmux_env = subprocess.run(
        ["tmux", "-L", socket, "show-environment", "-g"], capture_output=True, text=True
    ).stdout
    assert CANARY_KEY not in tmux_env and session_pass not in tmux_env

    close_issue(running_app)
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.STOPPED, timeout=GENEROUS)
    wait_for(lambda: running_app.events("session.stopped"), timeout=GENEROUS)
    after = httpx.post(
        canary_devbox.models.gateway.url + "/v1/messages",
        headers={"x-api-key": session_pass},
        json={"model": "claude-opus-4", "messages": []},
        timeout=30,
    )
    assert after.status_code == 401 and after.json()["error"]["type"] == "authentication_error"

    credentials = {r.credential for r in model.snapshot()}
    assert credentials == {CANARY_KEY}  # never the pass, never nothing
    first, second = model.main_requests()[0], model.wait_for_step(1)
    assert first.served == dict(FIRST) and second.served == {**dict(SECOND)}
    try:
        wait_for(lambda: counted(running_app) == served(model), timeout=GENEROUS)
    except AssertionError:
        raise AssertionError(
            f"the App counted {counted(running_app)}, the model served {served(model)}"
        ) from None
    assert counted(running_app)["requests"] >= 2
    assert counted(running_app)["tool_calls"] == 1  # the scan
    assert active(running_app) > 0  # the harness worked: a turn, its scan included
    assert counted(running_app)["cache_read_input_tokens"] >= 6500

    # The progress comment shows what was counted (no model was frozen: no price for it).
    requests = served(model)["requests"]
    wait_for(lambda: f"· {requests} requests" in progress_of(fake), timeout=GENEROUS)
    assert "**Usage:**" in progress_of(fake) and "cost unknown" in progress_of(fake)
