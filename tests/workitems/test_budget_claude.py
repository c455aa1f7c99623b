"""A work item's budget on the real spawn path: the App, the spawner's agent loop, the real
`claude` inside bubblewrap, and the scripted model behind the gateway serving known `usage`.

The walk spends 91 % of a 10k-token budget on its first answer; the session is then told,
in a pasted message that starts `the-loop: budget`, to wrap up — and the model is shown it.
Its answer to that passes the limit while a Bash call of the session's is still running: the
gateway refuses the next request (the model never sees it), the spawner stops the session,
the status says `stopped: budget`, and one comment names the branch and what was spent.
`the-loop budget +20k` by an authorized person relaunches it, and the model serves it again.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.config.operator_config import parse_config
from app.spawner.context import SpawnerContext
from app.spawner.session.leftovers import session_home
from app.store.tables import WorkItemStatus
from tests.claude_support import GENEROUS, claude_binary
from tests.devbox_support import running_devbox, scripted_env, scripted_home
from tests.fakes.anthropic import FakeAnthropic, Recorded, Reply, Step, anything, bash, contains
from tests.gate_support import ITEM, REPO, comment, deliver, item_row, labeled, progress_of
from tests.spawner_support import bare_repository
from tests.support import RunningApp, wait_for

ADMIN = "admin-token-for-the-budget-walk-0123456789"
pytestmark = [
    pytest.mark.claude,
    pytest.mark.sqlite_only,
    pytest.mark.app_env(THE_LOOP_ADMIN_TOKEN=ADMIN),
]
KEY = "sk-ant-api03-operator-key-of-the-budget-walk-000000"
EXECUTE = "the-loop execute\n- [ ] requirements-definition\n"
WARNING = "the-loop: budget — "
RAISED = "the-loop: budget raised by @Codertocat"
FIRST = (("input_tokens", 9000), ("output_tokens", 100))  # 91 % of 10k with the title's
PAST = (("input_tokens", 1000), ("output_tokens", 50))  # the wrap-up's answer: past 100 %


# The App's own config holds the budget: the App is the one that weighs it.
OPERATOR_YAML = "routing:\n  budget: {tokens: 10000}\n"


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    found = tmp_path / "reports"
    found.mkdir()
    return found


def model_script(reports: Path) -> list[Step]:
    # The wrap-up's Bash call waits for the test, so its result comes after the App found
    # the budget spent and told the gateway.
    hold = f"while [ ! -e {reports}/go ]; do sleep 0.2; done; echo released"
    return [
        Step(contains("Work on the GitHub issue"), Reply("Starting.", usage=FIRST)),
        Step(contains(WARNING), Reply("Committing and pushing.", (bash(hold),), PAST)),
        Step(contains(RAISED), Reply("Going on.")),
        # What the stop gate's feedback brings (no phase artifact was written).
        *[Step(anything, Reply("Stopping here.")) for _ in range(12)],
    ]


MODEL_SCRIPT = model_script


@pytest.fixture
def budget_devbox(
    running_app: RunningApp, model: FakeAnthropic, reports: Path, tmp_path: Path
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
                "sandbox": {"readWrite": [str(reports)]},
                "budget": {"tokens": 10_000},
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


def status_of(app: RunningApp) -> dict[str, Any]:
    answer = httpx.get(f"{app.url}/status", headers={"Authorization": f"Bearer {ADMIN}"})
    return next(row for row in answer.json()["recent"] if row["work_item_id"] == ITEM)


def budget_comments(fake: Any) -> list[str]:
    bodies = [c["body"] for c in fake.issue_comments(REPO, 1)]
    return [b for b in bodies if "its budget is spent" in b]


def test_a_session_is_warned_refused_and_stopped_at_its_budget_and_goes_on_when_raised(
    running_app: RunningApp,
    fake_github: Any,
    budget_devbox: SpawnerContext,
    model: FakeAnthropic,
    reports: Path,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    labelled = copy.deepcopy(labeled())
    labelled["repository"]["clone_url"] = str(bare_repository(tmp_path))
    deliver(running_app, "issues", labelled, "label")
    deliver(running_app, "issue_comment", comment(EXECUTE, cid=9001), "execute")

    # At 90 % the session is told, once, to wrap up; the model is shown those words.
    warned = model.wait_for_step(1, timeout=GENEROUS * 2)
    assert shown(warned, WARNING)
    assert "commit your work, push it" in warned.turn.text
    assert re.search(r"\(tokens 9\.\d+k of 10k\)", warned.turn.text)

    # Its answer passes the limit: the App finds the budget spent, the gateway refuses.
    assert budget_devbox.models is not None
    gateway = budget_devbox.models.gateway
    wait_for(lambda: ITEM in gateway.spent, timeout=GENEROUS)
    before = len(model.main_requests())
    (reports / "go").touch()
    wait_for(lambda: gateway.spent_refusals(ITEM) >= 1, timeout=GENEROUS)
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.STOPPED, timeout=GENEROUS)
    assert not any("released" in r.turn.text for r in model.main_requests())
    assert len(model.main_requests()) == before  # nothing reached the model past the limit
    assert sum(shown(r, WARNING) for r in model.main_requests()) == 1  # told once

    # The harness showed the gateway's refusal: it is in the session's own transcript.
    home = session_home(budget_devbox.config, budget_devbox.home, budget_devbox.state_dir, ITEM)
    written = "".join(p.read_text() for p in (home / ".claude" / "projects").rglob("*.jsonl"))
    assert "API Error: 400 the-loop: budget spent (tokens 10." in written
    stopped = wait_for(lambda: running_app.events("session.stopped"), timeout=GENEROUS)
    assert [e["reason"] for e in stopped] == ["budget"]
    row = status_of(running_app)
    assert row["status"] == "stopped: budget" and row["health"] == "stopped: budget"
    assert row["budget"]["state"] == "spent" and row["budget"]["limit"] == "tokens"
    assert row["budget"]["limits"]["tokens"] == 10_000 and row["budget"]["spent"]["tokens"] > 10_000
    assert row["usage"]["input_tokens"] >= 10_000
    wait_for(lambda: budget_comments(fake), timeout=GENEROUS)
    (body,) = budget_comments(fake)
    tree = f"https://github.com/{REPO}/tree/the-loop/issue-1"
    assert f"**Where the work is:** [`the-loop/issue-1`]({tree})" in body
    assert "**Budget:** tokens 10." in body and "of 10k" in body
    assert "**Usage:** 10" in body and "`the-loop budget +<amount>`" in body
    page = httpx.get(f"{running_app.url}/", headers={"Authorization": f"Bearer {ADMIN}"}).text
    cells = page[page.index(f'data-item="{ITEM}"') :]
    assert 'data-health="stopped: budget"' in cells[:200]
    usage = cells[cells.index('class="usage"') :]
    assert re.match(r'class="usage">10k tokens .* requests · 1 tool call · ', usage)
    # The progress comment shows the budget and the session's time with the usage.
    wait_for(lambda: "**Budget:** tokens 10." in progress_of(fake), timeout=GENEROUS)
    wait_for(lambda: "**stopped: budget**" in progress_of(fake), timeout=GENEROUS)
    assert re.search(r"\d+ requests · (<1|\d+) min", progress_of(fake))

    # /metrics, read by prometheus_client's own parser: the tokens by harness and model are
    # what the App counted, the budget stop is counted, the item shows as stopped.
    text = httpx.get(f"{running_app.url}/metrics", headers={"Authorization": f"Bearer {ADMIN}"})
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.text)
        for s in family.samples
    }
    tokens = {k[1]: v for k, v in samples.items() if k[0] == "the_loop_model_tokens"}
    ran = (("harness", "claude"), ("kind", "input_tokens"), ("model", "default"))
    assert tokens == {**tokens, ran: row["usage"]["input_tokens"]}, tokens
    assert samples[("the_loop_budget_stops", ())] == 1
    assert samples[("the_loop_work_items", (("status", "stopped"),))] == 1
    assert samples[("the_loop_jobs", (("kind", "stop"), ("state", "done")))] == 1

    # A stranger cannot raise it; an authorized person can, and the session goes on.
    deliver(
        running_app,
        "issue_comment",
        comment("the-loop budget +20k", login="mallory", cid=9002),
        "stranger",
    )
    assert item_row(running_app).state == WorkItemStatus.STOPPED
    deliver(running_app, "issue_comment", comment("the-loop budget +20k", cid=9003), "raise")
    resumed = model.wait_for_step(2, timeout=GENEROUS * 2)
    assert shown(resumed, RAISED) and "(+20k tokens; now tokens 10." in resumed.turn.text
    assert ITEM not in gateway.spent
    raised = running_app.events("budget.raised")
    assert [(e["by"], e["kind"], e["amount"]) for e in raised] == [("Codertocat", "tokens", 20000)]
    bodies = [c["body"] for c in fake.issue_comments(REPO, 1)]
    assert any("@Codertocat added 20k tokens to this item's budget" in b for b in bodies)
    assert any("@mallory, this did not raise the budget" in b for b in bodies)
