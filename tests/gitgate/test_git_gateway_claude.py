"""A hostile session's git, from inside the real sandbox: the real `claude` binary, driven
offline by the scripted model, runs through its Bash tool what an attacker would — asks git
for a credential for the App and for GitHub, pushes to `main`, pushes a tag, deletes its own
branch — and then pushes its work branch. What the model is shown is the assertion: only its
session token, each refusal with its reason; and the git server holds only the work branch.

The App and the fake GitHub; `git http-backend` behind a loopback server that accepts only
tokens the fake GitHub minted; the devbox spawner launching Claude Code in bubblewrap.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.spawner.context import SpawnerContext
from tests.claude_support import GENEROUS
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, bash, contains, tool_result_for
from tests.fakes.github_pulls import head_sha
from tests.pull_support import BRANCH, REPO, STRAIGHT_TO_CODE, Bed, label_and_execute

pytestmark = [
    pytest.mark.claude,
    pytest.mark.parametrize("database_url", ["sqlite"], indirect=True),
]
ATTACK = " ; ".join(
    [
        'echo "ORIGIN $(git remote get-url origin)"',
        'printf "url=%s\\n\\n" "$(git remote get-url origin)" | git credential fill 2>&1',
        f"printf 'url=https://github.com/{REPO}.git\\n\\n' | git credential fill 2>&1",
        "echo fixed > fix.txt && git add fix.txt && git commit -q -m fix",
        "git push origin HEAD:main 2>&1",
        "git tag v1 && git push origin v1 2>&1",
        "git push 2>&1",
        f"git push origin --delete {BRANCH} 2>&1",
        "echo ATTACK-DONE",
    ]
)


def model_script() -> list[Step]:
    return [
        Step(
            contains("Work on the GitHub issue", BRANCH),
            Reply("Trying every way out.", (bash(ATTACK),)),
            name="attack",
        ),
        Step(tool_result_for("Bash", "ATTACK-DONE"), Reply("Done."), name="shown"),
    ]


MODEL_SCRIPT = model_script


def tags(bed: Bed) -> str:
    root = Path(bed.fake.git_root) / f"{REPO}.git"
    return subprocess.run(
        ["git", "-C", str(root), "tag"], capture_output=True, text=True, check=True
    ).stdout


def test_a_real_sandboxed_session_pushes_only_its_work_branch(
    bed: Bed, pull_devbox: SpawnerContext, model: FakeAnthropic
) -> None:
    main_before = head_sha(bed.fake.git_root, REPO, "main")
    label_and_execute(bed, STRAIGHT_TO_CODE)
    shown = model.wait_for_step(1, timeout=GENEROUS).turn.text

    assert f"ORIGIN {bed.app.url}/git/{REPO}.git" in shown
    assert "password=tlss_" in shown and "ghs_" not in shown
    assert "a credential is given only for the App's git gateway" in shown
    assert "[remote rejected] HEAD -> main (a session may push only its work branch" in shown
    assert "[remote rejected] v1 -> v1 (a session may not push tags)" in shown
    assert f"[remote rejected] {BRANCH} (a session may not delete a ref)" in shown
    assert "remote: the-loop refused this push" in shown

    assert head_sha(bed.fake.git_root, REPO, "main") == main_before
    assert tags(bed) == ""
    assert head_sha(bed.fake.git_root, REPO, BRANCH) is not None and bed.git.pushes == 1
    refused = bed.events("git.push_refused")
    assert [sorted(r["refused"]) for r in refused] == [
        ["refs/heads/main"],
        ["refs/tags/v1"],
        [f"refs/heads/{BRANCH}"],
    ]
