"""What a session writes in its home and checkout cannot make the spawner hold it in memory,
and what the operator's settings hold for themselves never reaches the session's home.

A session can `truncate -s 20G` any file it owns; the spawner reads its state file, its
`~/.claude.json`, its transcript and its `tasks.md`. Each is planted here as a huge sparse
file, and the spawner's reads run in a child process whose peak memory is measured."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.files import FileTooLarge, read_within, update_within
from app.spawner.context import SpawnerContext
from app.spawner.workspace.checkout import checkout_dir
from tests.jobs_support import NAME, WI, deliver_job, events, run_ok, spawn_job
from tests.spawner_support import StandIn
from tests.support import wait_for

HUGE = 1 << 30  # sparse: no disk, but a whole read would take a GiB of memory
BOUND = 100 * 1024 * 1024  # what the reads may add to the reader's peak memory
STATE = "docs/specs/issue-7/work-item-state.json"
SESSION_ID = "0b9e0bd4-7d1c-4c1e-9d4c-1f2e3a4b5c6d"
CANARY = "canary-7f3a91"
ROOT = Path(__file__).resolve().parents[2]  # the repository: the child imports its app


def sparse(path: Path, size: int = HUGE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.truncate(size)


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# Runs in a child process: every spawner read of a session-writable file, then how much
# the child's peak memory grew while they ran.
READS = """
import json, resource, sys
from pathlib import Path
from app.files import FileTooLarge
from app.protocol import Frozen
from app.spawner.harness.claude_home import seed_home
from app.spawner.harness.claude_trust import claude_config_path, update_json_file
from app.spawner.session.transcript_usage import claude_usage
from app.spawner.workspace.checkout import read_checkout_state, write_frozen_state
from app.spawner.workspace.evidence import host_evidence
from app.spawner.session.leftovers import transcript_tail

real, home, checkout, sid = (Path(a) for a in sys.argv[1:5])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
found = {}
found["state"] = read_checkout_state(checkout, "issue-7") is None
frozen = Frozen(harness="claude", model="opus", effort="high")
write_frozen_state(checkout, "issue-7", frozen)
found["rewritten"] = json.loads(
    (checkout / "docs/specs/issue-7/work-item-state.json").read_text()
)["model"]
found["seed"] = seed_home(real, home, {})
try:
    update_json_file(claude_config_path(home), lambda data: data, home)
except FileTooLarge as exc:
    found["config"] = str(exc)
found["usage"] = repr(claude_usage(home, str(sid)))
found["tail"] = len(transcript_tail(home, str(sid)))
evidence = host_evidence(checkout, "issue-7")
found["tasks"] = [sorted(evidence.present), sorted(evidence.empty), evidence.tasks_total]
found["grew"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(json.dumps(found))
"""


def test_huge_files_a_session_planted_cost_the_spawner_no_memory(tmp_path: Path) -> None:
    real, home, checkout = tmp_path / "real", tmp_path / "home", tmp_path / "checkout"
    real.mkdir()
    sparse(checkout / STATE)
    sparse(checkout / "docs/specs/issue-7/tasks.md")
    sparse(home / ".claude.json")
    sparse(home / ".claude" / "projects" / "-work-x" / f"{SESSION_ID}.jsonl")
    child = subprocess.run(
        [sys.executable, "-c", READS, str(real), str(home), str(checkout), SESSION_ID],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(real)},
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    found = json.loads(child.stdout)
    assert found["grew"] < BOUND, found
    assert found["state"] is True  # read as no state file: the App's record replaces it
    assert found["rewritten"] == "opus"
    assert (checkout / STATE).stat().st_size < 4096
    (failure,) = found["seed"]
    assert str(home / ".claude.json") in failure and f"{HUGE} bytes" in failure
    assert "not read" in found["config"]
    assert (home / ".claude.json").stat().st_size == HUGE  # refused, not half-read
    assert found["tasks"] == [[], ["tasks.md"], 0]  # its head read: no task, so no task list
    assert found["tail"] > 0 and found["usage"].startswith("Usage(")


def test_a_relaunch_over_huge_session_files_still_starts_and_says_what_it_refused(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path
) -> None:
    frozen = spawn_job(origin).payload.frozen.model_dump()
    standin.plan(WI, {"exit": 0})
    run_ok(ctx, spawn_job(origin))
    wait_for(lambda: (p := ctx.runner.pane(NAME)) and p.dead)
    checkout = checkout_dir(tmp_path / "work", WI)
    own = ctx.state_dir / "homes" / NAME
    sparse(checkout / STATE)
    sparse(own / ".claude.json")
    before = peak_kib()
    run_ok(ctx, deliver_job(origin, "carry on", frozen=frozen))
    assert (peak_kib() - before) * 1024 < BOUND
    assert standin.wait_start(WI, count=2)["argv"][0] == str(standin.path)
    assert [e["model"] for e in events(ctx, "session.respawned")] == ["opus"]
    reasons = [e["reason"] for e in events(ctx, "session.home_failed")]
    assert any(".claude.json" in r and f"{HUGE} bytes" in r for r in reasons), reasons
    assert (checkout / STATE).stat().st_size == HUGE  # a relaunch leaves it unread


def test_a_file_past_the_bound_is_refused_whole_and_a_kept_mode_loses_its_special_bits(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.json").write_text("x" * 11)
    with pytest.raises(FileTooLarge, match="11 bytes"):
        read_within(tmp_path, "a.json", limit=10)
    with pytest.raises(FileTooLarge):
        update_within(tmp_path, "a.json", lambda text: "never", limit=10)
    assert (tmp_path / "a.json").read_text() == "x" * 11
    assert read_within(tmp_path, "a.json", limit=11) == "x" * 11
    os.chmod(tmp_path / "a.json", 0o4777)  # what a session may set on a file it owns
    assert update_within(tmp_path, "a.json", lambda text: text + "y")
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o666


SECRETS = {
    "env": {
        "GH_TOKEN": f"ghp_{CANARY}",
        "AWS_SECRET_ACCESS_KEY": f"aws-{CANARY}",
        "ANTHROPIC_CUSTOM_HEADERS": f"X-Key: {CANARY}",
    },
    "apiKeyHelper": f"/opt/{CANARY}/key.sh",
    "otelHeadersHelper": f"/opt/{CANARY}/otel.sh",
    "awsCredentialExport": f"/opt/{CANARY}/aws.sh",
    "awsAuthRefresh": f"/opt/{CANARY}/sso.sh",
    "statusLine": {"type": "command", "command": f"/opt/{CANARY}/line.sh"},
    "hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": f"{CANARY}.sh"}]}]},
    "someSettingAddedLater": CANARY,
}


def test_the_operators_credentials_in_settings_never_reach_the_session_home(
    ctx: SpawnerContext, standin: StandIn, origin: Path, home: Path
) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    wanted = {"model": "opus", "permissions": {"deny": ["WebFetch"]}, "cleanupPeriodDays": 9}
    settings.write_text(json.dumps({**SECRETS, **wanted}))
    run_ok(ctx, spawn_job(origin))
    record = standin.wait_start(WI)
    own = ctx.state_dir / "homes" / NAME
    files = [p for p in own.rglob("*") if p.is_file() and not p.is_symlink()]
    assert files
    for path in files:
        assert CANARY not in path.read_text(errors="replace"), path
    assert CANARY not in json.dumps(record["env"])
    kept = json.loads((own / ".claude" / "settings.json").read_text())
    assert {k: kept[k] for k in wanted} == wanted
    assert not set(SECRETS) & set(kept)
