"""What the spawner sees of a session's artifacts, read from the host: regular files only,
through no link, at any depth of `docs/specs/<item>/` (real files, links and a FIFO)."""

from __future__ import annotations

import os
from pathlib import Path

from app.graph import Evidence, evidence_fields, evidence_from
from app.spawner.workspace.evidence import host_evidence
from tests.support import artifact

SPEC = "issue-7"


def folder(checkout: Path) -> Path:
    path = checkout / "docs" / "specs" / SPEC
    path.mkdir(parents=True)
    return path


def test_regular_files_are_seen_with_the_task_list_counted(tmp_path):
    specs = folder(tmp_path)
    (specs / "design.md").write_text(artifact())
    (specs / "requirements.md").write_text("")
    (specs / "tasks.md").write_text("- [x] one\n- [ ] two\n- [ ] three\n")
    (specs / "notes.txt").write_text("not an artifact\n")
    assert host_evidence(tmp_path, SPEC) == Evidence(
        frozenset({"design.md", "tasks.md"}), frozenset({"requirements.md"}), 2, 3
    )


def test_a_link_is_no_artifact_wherever_it_points(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "design.md").write_text(artifact("Elsewhere"))
    (outside / "tasks.md").write_text("- [x] all done\n")
    checkout = tmp_path / "checkout"
    specs = folder(checkout)
    (specs / "design.md").symlink_to(outside / "design.md")
    (specs / "tasks.md").symlink_to(outside / "tasks.md")
    (specs / "inside.md").write_text(artifact("Real"))
    (specs / "verification.md").symlink_to(specs / "inside.md")  # a link inside counts neither
    os.mkfifo(specs / "testing-plan.md")  # would block a reader that did not check
    seen = host_evidence(checkout, SPEC)
    assert seen.present == {"inside.md"} and seen.tasks_total == 0


def test_a_linked_folder_on_the_way_shows_nothing(tmp_path):
    outside = tmp_path / "outside"
    (outside / "specs" / SPEC).mkdir(parents=True)
    (outside / "specs" / SPEC / "design.md").write_text("# elsewhere\n")
    for link_at in ("docs", "docs/specs", f"docs/specs/{SPEC}"):
        checkout = tmp_path / link_at.replace("/", "-")
        target = {
            "docs": outside,
            "docs/specs": outside / "specs",
            f"docs/specs/{SPEC}": outside / "specs" / SPEC,
        }[link_at]
        (checkout / link_at).parent.mkdir(parents=True, exist_ok=True)
        (checkout / link_at).symlink_to(target)
        assert host_evidence(checkout, SPEC) == Evidence(), link_at


def test_a_name_that_is_not_an_item_reads_nothing(tmp_path):
    (tmp_path / "docs" / "specs").mkdir(parents=True)
    (tmp_path / "docs" / "design.md").write_text("# one level up\n")
    assert host_evidence(tmp_path, "..") == Evidence()
    assert host_evidence(tmp_path / "missing", SPEC) == Evidence()


def test_what_a_spawner_reports_round_trips_and_junk_is_not_evidence():
    seen = Evidence(frozenset({"design.md"}), frozenset({"tasks.md"}), 1, 2)
    assert evidence_from(evidence_fields(seen)) == seen
    junk = {"present": ["../x", 5, "design.md"], "tasks_open": 0, "tasks_total": 0}
    assert evidence_from(junk) == Evidence(frozenset({"design.md"}))
    assert evidence_from({"present": ["design.md"], "tasks_open": -1, "tasks_total": 0}) is None
    assert evidence_from(None) is None


def test_a_move_asks_the_spawners_evidence_only_for_what_the_phase_needs():
    from app.store.tables import WorkItem
    from app.workitems.decide.advance import host_problems

    item = WorkItem(id="github:o/r#7", repo_full_name="o/r", issue_number=7, session={})
    assert host_problems(item, "design", []) == [
        "the devbox has not reported what it sees in the checkout yet"
    ]
    assert host_problems(item, "implementation", ["tasks-breakdown"]) == []  # needs nothing
    assert host_problems(item, "review", []) == []
    item.session = {"evidence": evidence_fields(Evidence(frozenset({"design.md"})))}
    assert host_problems(item, "design", []) == []
    assert host_problems(item, "verification", []) == [
        "required artifact is missing (docs/specs/issue-7/verification.md)"
    ]
