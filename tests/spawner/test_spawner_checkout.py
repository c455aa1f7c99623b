"""The checkout: one tree per work item, reused on respawn, the installation token passed
through the environment only (a real git clone over HTTP with basic auth)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.protocol import Frozen
from app.spawner.naming import item_slug
from app.spawner.workspace.checkout import (
    CheckoutError,
    checkout_dir,
    prepare_checkout,
    read_checkout_state,
    write_askpass,
    write_frozen_state,
)
from app.workstate import read_state, state_path
from tests.fakes.git_http import GitHttp
from tests.fakes.server import LiveServer
from tests.spawner_support import bare_repository, git

TOKEN = "ghs_" + "S3cr3tInstallationToken0123456789"


def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "git-home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}


def test_a_fresh_clone_then_reuse(tmp_path: Path) -> None:
    origin = bare_repository(tmp_path)
    root = tmp_path / "work"
    askpass = write_askpass(tmp_path / "state")
    asked: list[str] = []

    def ask() -> None:
        asked.append("token")

    first = prepare_checkout(
        root, "github:o/r#7", str(origin), ask_token=ask, askpass=askpass, env=env(tmp_path)
    )
    assert asked == ["token"]  # a clone asks for its token
    assert first.path == root / item_slug("github:o/r#7") and not first.reused
    assert (first.path / "README.md").read_text() == "hello\n"
    (first.path / "work-in-progress.txt").write_text("kept")
    again = prepare_checkout(
        root, "github:o/r#7", str(origin), ask_token=ask, askpass=askpass, env=env(tmp_path)
    )
    assert asked == ["token"]  # a reused tree needs none
    assert again.reused and (again.path / "work-in-progress.txt").read_text() == "kept"
    assert [p.name for p in root.iterdir()] == [first.path.name]  # no staging leftovers


def test_a_clone_from_a_local_path_shares_no_file_with_its_source(tmp_path: Path) -> None:
    """The checkout is handed to the session's user: a hard link into the source would let
    a change of owner or mode there reach the source's own objects."""
    origin = bare_repository(tmp_path)
    root = tmp_path / "work"
    checkout = prepare_checkout(
        root,
        "github:o/r#8",
        str(origin),
        ask_token=None,
        askpass=write_askpass(tmp_path / "state"),
        env=env(tmp_path),
    )
    objects = [p for p in (checkout.path / ".git" / "objects").rglob("*") if p.is_file()]
    assert objects
    assert [p for p in objects if p.stat().st_nlink > 1] == []


def test_a_failed_clone_leaves_nothing_behind(tmp_path: Path) -> None:
    root = tmp_path / "work"
    with pytest.raises(CheckoutError, match="git clone failed"):
        prepare_checkout(
            root,
            "github:o/r#7",
            str(tmp_path / "missing.git"),
            ask_token=None,
            askpass=write_askpass(tmp_path),
            env=env(tmp_path),
        )
    assert list(root.iterdir()) == []


@pytest.mark.parametrize(
    "url",
    ["https://x-access-token:abc@github.com/o/r.git", "ext::sh -c touch% /tmp/x", "-uhttps://x"],
)
def test_a_dangerous_clone_url_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(CheckoutError):
        prepare_checkout(
            tmp_path / "w",
            "github:o/r#7",
            url,
            ask_token=None,
            askpass=write_askpass(tmp_path),
            env=env(tmp_path),
        )


def test_directories_stay_inside_the_root() -> None:
    etc = checkout_dir(Path("/w"), "github:../../etc#1")
    assert etc.parent == Path("/w") and etc.name.startswith("etc-1-")
    shell = checkout_dir(Path("/w"), "github:o/r; rm -rf ~#2")
    assert shell.parent == Path("/w") and shell.name.startswith("o-r-rm--rf-2-")
    assert checkout_dir(Path("/w"), "github:o/r#3").parent == Path("/w")


def test_work_items_whose_readable_names_collide_get_separate_directories() -> None:
    pairs = [
        ("github:acme-web/api#1", "github:acme/web-api#1"),
        ("github:acme/x.y#7", "github:acme/x-y#7"),
    ]
    for one, other in pairs:
        a, b = checkout_dir(Path("/w"), one), checkout_dir(Path("/w"), other)
        assert a != b and a.name[:-9] == b.name[:-9]


def test_the_token_authenticates_over_http_and_is_never_in_ps_config_or_errors(
    tmp_path: Path,
) -> None:
    projects = tmp_path / "srv"
    projects.mkdir()
    bare_repository(projects, "r.git")
    server = GitHttp(projects, TOKEN)
    with LiveServer(server) as live:
        url = f"{live.url}/r.git"
        checkout = prepare_checkout(
            tmp_path / "work",
            "github:o/r#9",
            url,
            ask_token=lambda: TOKEN,
            askpass=write_askpass(tmp_path / "state"),
            env=env(tmp_path),
        )
        with pytest.raises(CheckoutError) as refused:
            prepare_checkout(
                tmp_path / "work",
                "github:o/r#10",
                url,
                ask_token=lambda: "ghs_wrong",
                askpass=write_askpass(tmp_path / "state"),
                env=env(tmp_path),
            )
    assert server.authorized >= 1 and server.refused >= 1
    assert (checkout.path / "README.md").exists()
    assert any("git" in table for table in server.process_tables)
    assert not [t for t in server.process_tables if TOKEN in t]
    config = (checkout.path / ".git" / "config").read_text()
    assert TOKEN not in config and "x-access-token" not in config
    assert git("config", "--get", "remote.origin.url", cwd=checkout.path).strip() == url
    assert "ghs_wrong" not in str(refused.value)
    assert TOKEN not in (tmp_path / "state" / "git-askpass.sh").read_text()
    assert not (tmp_path / "git-home" / ".git-credentials").exists()


def test_the_frozen_record_is_written_and_the_pointer_kept_on_reuse(tmp_path: Path) -> None:
    frozen = {
        "decisions": {"phase-selection": {"at": "2026-01-01T00:00:00+00:00", "by": "octocat"}},
        "skips": {"brainstorming": {"by": "octocat"}},
        "harness": "claude",
        "model": "opus",
        "effort": "high",
        "dropped": [],
    }
    path = write_frozen_state(tmp_path, "issue-7", Frozen.model_validate(frozen))
    assert path == state_path(tmp_path, "issue-7")
    data = json.loads(path.read_text())
    assert data == {
        "workItem": "issue-7",
        "currentNode": "phase-selection",
        "decisions": frozen["decisions"],
        "parked": None,
        "skips": frozen["skips"],
        "harness": "claude",
        "model": "opus",
        "effort": "high",
    }
    data["currentNode"] = "design"
    data["model"] = "--dangerously-skip-permissions"  # an agent edited it
    path.write_text(json.dumps(data))
    write_frozen_state(tmp_path, "issue-7", Frozen.model_validate(frozen))
    state = read_state(path)
    assert state is not None and state.currentNode == "design" and state.model == "opus"


def test_an_unsafe_spec_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckoutError):
        write_frozen_state(tmp_path, "../../etc", Frozen())


def test_the_state_file_is_written_and_read_without_following_a_planted_link(
    tmp_path: Path,
) -> None:
    checkout, host = tmp_path / "checkout", tmp_path / "host"
    checkout.mkdir()
    host.mkdir()
    (host / "work-item-state.json").write_text('{"currentNode": "review", "host": 1}')
    (checkout / "docs" / "specs").mkdir(parents=True)
    (checkout / "docs" / "specs" / "issue-7").symlink_to(host)
    assert read_checkout_state(checkout, "issue-7") is None  # the link reads as no file
    path = write_frozen_state(checkout, "issue-7", Frozen(), phase="design")
    assert (host / "work-item-state.json").read_text() == '{"currentNode": "review", "host": 1}'
    assert not path.parent.is_symlink()
    state = read_checkout_state(checkout, "issue-7")
    assert state is not None and state.currentNode == "design"
    (checkout / "docs").rename(tmp_path / "moved")
    (checkout / "docs").symlink_to(host)
    write_frozen_state(checkout, "issue-7", Frozen(), phase="design")
    assert sorted(p.name for p in host.iterdir()) == ["work-item-state.json"]
