"""A daily spend cap on the real spawn path: the App, the spawner's agent loop, the real
`claude` inside bubblewrap, and the scripted model behind the gateway serving known `usage`.

Issue 1's first answer spends 91 % of the installation's 10k-token day; its session is told,
in the same pasted wrap-up an item budget sends, to wrap up. Its answer to that reaches the
cap: the gateway refuses the next request and the spawner stops the session on the way. An
execute on issue 2 then waits, its progress comment saying
`waiting: daily budget reached (resets 00:00 UTC)`, until an authorized `the-loop budget`
lifts the cap for the day and its session launches.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.config.operator_config import parse_config
from app.spawner.context import SpawnerContext
from app.store.tables import Job, JobKind, JobState, WorkItemStatus
from tests.claude_support import GENEROUS, claude_binary
from tests.devbox_support import running_devbox, scripted_env, scripted_home
from tests.fakes.anthropic import FakeAnthropic, Recorded, Reply, Step, anything, bash, contains
from tests.gate_support import ITEM, REPO, comment, deliver, item_row, jobs, labeled, progress_of
from tests.spawner_support import bare_repository
from tests.support import RunningApp, wait_for

pytestmark = [pytest.mark.claude, pytest.mark.sqlite_only]
KEY = "sk-ant-api03-operator-key-of-the-spend-cap-walk-0000"
EXECUTE = "the-loop execute\n- [ ] requirements-definition\n"
WARNING = "the-loop: budget — 90% or more of the daily budget is used"
SECOND = f"github:{REPO}#2"
FIRST = (("input_tokens", 9000), ("output_tokens", 100))  # 91 % of 10k with the title's
PAST = (("input_tokens", 1000), ("output_tokens", 50))  # the wrap-up's answer: past 100 %
WAITING = "waiting: daily budget reached (resets 00:00 UTC)"

# The App's own config holds the cap: the App is the one that weighs it.
OPERATOR_YAML = "routing:\n  budget: {daily: {tokens: 10000}}\n"


@pytest.fixture
def gate_dir(tmp_path: Path) -> Path:
    """Where the test lets the wrap-up's Bash call finish (a `go` file)."""
    found = tmp_path / "gate"
    found.mkdir()
    return found


def model_script(gate_dir: Path) -> list[Step]:
    # The wrap-up's Bash call waits for the test, so its result comes after the App found
    # the cap reached and told the gateway.
    hold = f"while [ ! -e {gate_dir}/go ]; do sleep 0.2; done; echo released"
    return [
        Step(contains("Work on the GitHub issue"), Reply("Starting.", usage=FIRST)),
        Step(contains(WARNING), Reply("Committing and pushing.", (bash(hold),), PAST)),
        Step(contains("Work on the GitHub issue"), Reply("The second one starts.")),
        *[Step(anything, Reply("Stopping here.")) for _ in range(12)],
    ]


MODEL_SCRIPT = model_script


@pytest.fixture
def cap_devbox(
    running_app: RunningApp, model: FakeAnthropic, gate_dir: Path, tmp_path: Path
) -> Iterator[SpawnerContext]:
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
                "sandbox": {"readWrite": [str(gate_dir)]},
            },
        }
    )
    home = scripted_home(tmp_path)
    env = scripted_env(model.url, home, ANTHROPIC_API_KEY=KEY)
    registered = lambda: running_app.events("spawner.registered")  # noqa: E731
    engine = running_app.state.engine
    with running_devbox(running_app.url, engine, REPO, config, home, env, registered) as ctx:
        ctx.budget_grace = GENEROUS * 2  # the refusal, not the grace, ends the wait here
        yield ctx


def shown(request: Recorded, text: str) -> bool:
    return any(block.startswith(text) for block in request.turn.texts)


def on_issue(payload: dict[str, Any], number: int) -> dict[str, Any]:
    """`payload` re-pointed at issue `number` of the same repository."""
    moved = copy.deepcopy(payload)
    issue = moved["issue"]
    issue["id"] = int(issue["id"]) + number
    issue["number"] = number
    for key in ("html_url", "url"):
        issue[key] = str(issue[key]).rsplit("/", 1)[0] + f"/{number}"
    return moved


def spawn_of(app: RunningApp) -> Job:
    (spawn,) = [j for j in jobs(app, JobKind.SPAWN) if j.work_item_id == SECOND]
    return spawn


def test_a_daily_cap_stops_the_session_queues_the_next_execute_and_is_lifted(
    running_app: RunningApp,
    fake_github: Any,
    cap_devbox: SpawnerContext,
    model: FakeAnthropic,
    gate_dir: Path,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    labelled = copy.deepcopy(labeled())
    labelled["repository"]["clone_url"] = str(bare_repository(tmp_path))
    deliver(running_app, "issues", labelled, "label")
    deliver(running_app, "issue_comment", comment(EXECUTE, cid=9001), "execute")

    # At 90 % of the day's cap the session is told, once, to wrap up.
    warned = model.wait_for_step(1, timeout=GENEROUS * 2)
    assert shown(warned, WARNING) and "commit your work, push it" in warned.turn.text

    # Its answer reaches the cap: the gateway refuses, the spawner stops the session.
    assert cap_devbox.models is not None
    gateway = cap_devbox.models.gateway
    wait_for(lambda: ITEM in gateway.spent, timeout=GENEROUS)
    before = len(model.main_requests())
    (gate_dir / "go").touch()
    wait_for(lambda: gateway.spent_refusals(ITEM) >= 1, timeout=GENEROUS)
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.STOPPED, timeout=GENEROUS)
    assert len(model.main_requests()) == before  # nothing reached the model past the cap
    (reached,) = running_app.events("budget.cap_reached")
    assert reached["cap"] == "daily budget"
    wait_for(lambda: "**stopped: spend cap**" in progress_of(fake), timeout=GENEROUS)

    # The next execute waits in line, saying why; no spawner is offered it.
    deliver(running_app, "issues", on_issue(labelled, 2), "label-2")
    deliver(running_app, "issue_comment", on_issue(comment(EXECUTE, cid=9002), 2), "execute-2")
    wait_for(lambda: WAITING in progress_of(fake, 2), timeout=GENEROUS)
    assert spawn_of(running_app).state == JobState.QUEUED

    # A stranger cannot lift it; an authorized person can, and the waiting session launches.
    stranger = on_issue(comment("the-loop budget", login="mallory", cid=9003), 2)
    deliver(running_app, "issue_comment", stranger, "stranger")
    lift = on_issue(comment("the-loop budget", cid=9004), 2)
    deliver(running_app, "issue_comment", lift, "lift")
    model.wait_for_step(2, timeout=GENEROUS * 2)  # issue 2's session asks the model
    wait_for(lambda: spawn_of(running_app).state == JobState.DONE, timeout=GENEROUS)
    assert item_row(running_app).state == WorkItemStatus.STOPPED  # issue 1 waits for its own
    (lifted,) = running_app.events("budget.lifted")
    assert lifted["by"] == "Codertocat"
    wait_for(lambda: WAITING not in progress_of(fake, 2), timeout=GENEROUS)
    bodies = [c["body"] for c in fake.issue_comments(REPO, 2)]
    assert any("@Codertocat lifted the daily and monthly spend caps" in b for b in bodies)
