"""A hostile session's checkout and home, then a relaunch through the real spawn path (real
tmux, git and bubblewrap, the stand-in harness): nothing the session planted runs or is
written through on the host, and the session still starts.

The session's part is played by the test, writing into the checkout and the home exactly
what a session can write there (tests/spawner/test_hostgit_claude.py has the real `claude` do it).
Each plant is first shown to work: the same checkout under a plain `git switch` fires it."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from app.spawner.confine.hostwalk import tidy
from app.spawner.confine.sessionhome import home_for
from app.spawner.context import SpawnerContext
from app.spawner.workspace.checkout import checkout_dir
from app.spawner.workspace.hostgit import HostGit
from tests.jobs_support import NAME, WI, deliver_job, events, make_config, run_ok, spawn_job
from tests.spawner_support import (
    BRANCH,
    SANDBOX_MODES,
    StandIn,
    bare_repository,
    git,
    on_branch,
)

HOOKS = ("post-checkout", "post-index-change", "reference-transaction", "pre-auto-gc")


def _script(path: Path, canary: Path, tail: str = "") -> None:
    path.write_text(f"#!/bin/sh\necho ran >> {canary}\n{tail}")
    path.chmod(0o755)


def plant_git(checkout: Path, canaries: Path) -> None:
    """What a hostile session leaves behind: on its work branch a commit whose files a
    filter claims, then another branch checked out (so the relaunch switches back); hooks,
    an fsmonitor, two filter drivers (one defined through an include) and a hooks path."""
    (checkout / ".gitattributes").write_text("*.txt filter=x\n*.md filter=inc\n")
    (checkout / "data.txt").write_text("data\n")
    (checkout / "notes.md").write_text("notes\n")
    git("add", ".gitattributes", "data.txt", "notes.md", cwd=checkout)
    git("commit", "-q", "-m", "filtered files", cwd=checkout)
    git("switch", "-q", "-c", "elsewhere", "main", cwd=checkout)
    dot = checkout / ".git"
    for hook in HOOKS:
        _script(dot / "hooks" / hook, canaries / hook)
    _script(dot / "fsmonitor.sh", canaries / "fsmonitor", "exit 1\n")
    for name in ("clean", "smudge", "inc-clean", "inc-smudge"):
        _script(dot / f"{name}.sh", canaries / name, "cat\n")
    (dot / "planted.config").write_text(
        f'[filter "inc"]\n\tclean = {dot}/inc-clean.sh\n\tsmudge = {dot}/inc-smudge.sh\n'
        f"\trequired = true\n[core]\n\thooksPath = {dot}/hooks\n"
    )
    with (dot / "config").open("a") as config:
        config.write(
            f"[core]\n\tfsmonitor = {dot}/fsmonitor.sh\n"
            f'[filter "x"]\n\tclean = {dot}/clean.sh\n\tsmudge = {dot}/smudge.sh\n'
            "\trequired = true\n[include]\n\tpath = planted.config\n"
        )


def plain_switch_fires(copy: Path, canaries: Path, tmp_path: Path) -> set[str]:
    """The control: `copy` (the planted checkout, taken before the relaunch) under a plain
    `git switch`, as the spawner ran it before; returns the canaries that appeared."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-C", str(copy), "switch", "-q", BRANCH], env=env, check=True)
    return {p.name for p in canaries.iterdir()}


def context(ctx: SpawnerContext, standin: StandIn, tmp_path: Path, mode: str) -> SpawnerContext:
    sandbox = {**standin.sandbox, "mode": mode}
    return dataclasses.replace(ctx, config=make_config(standin, tmp_path, sandbox=sandbox))


def ended(ctx: SpawnerContext) -> None:
    """The session's pane goes away (it exited, or crashed)."""
    ctx.runner.kill(NAME, owner=WI)


@pytest.mark.parametrize("mode", SANDBOX_MODES)
def test_planted_hooks_fsmonitor_filters_and_includes_never_run_on_a_relaunch(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path, mode: str
) -> None:
    ctx = context(ctx, standin, tmp_path, mode)
    canaries = tmp_path / "canaries"
    canaries.mkdir()
    run_ok(ctx, on_branch(spawn_job(origin)))
    standin.wait_start(WI)
    checkout = checkout_dir(ctx.workspace_root, WI)
    ended(ctx)
    plant_git(checkout, canaries)
    control = tmp_path / "control"
    shutil.copytree(checkout, control, symlinks=True)

    result = run_ok(ctx, on_branch(deliver_job(origin, "carry on")))

    assert sorted(p.name for p in canaries.iterdir()) == []
    assert result["respawned"] and result["delivered"]
    standin.wait_start(WI, count=2)  # the relaunch started the session
    assert (checkout / ".git" / "HEAD").read_text() == f"ref: refs/heads/{BRANCH}\n"
    assert (checkout / "data.txt").read_text() == "data\n"
    assert events(ctx, "workspace.branch")[-1]["how"] == "switched"
    assert events(ctx, "workspace.recloned") == []  # a planted config alone is no refusal
    fired = plain_switch_fires(control, canaries, tmp_path)
    assert {"post-checkout", "post-index-change", "fsmonitor", "smudge", "inc-smudge"} <= fired


def _gitdir_file(checkout: Path, elsewhere: Path) -> None:
    shutil.rmtree(checkout / ".git")
    (checkout / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")


def _gitdir_link(checkout: Path, elsewhere: Path) -> None:
    shutil.rmtree(checkout / ".git")
    (checkout / ".git").symlink_to(elsewhere / ".git")


def _worktree_elsewhere(checkout: Path, elsewhere: Path) -> None:
    with (checkout / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tworktree = {elsewhere}\n")


def _alternates(checkout: Path, elsewhere: Path) -> None:
    (checkout / ".git" / "objects" / "info" / "alternates").write_text(
        f"{elsewhere / '.git' / 'objects'}\n"
    )


def _broken_config(checkout: Path, elsewhere: Path) -> None:
    with (checkout / ".git" / "config").open("a") as config:
        config.write("[core\n")


def _include_git_cannot_parse(checkout: Path, elsewhere: Path) -> None:
    with (checkout / ".git" / "config").open("a") as config:
        config.write("[include]\n\tpath = /dev/zero\n")


def _format_git_refuses(checkout: Path, elsewhere: Path) -> None:
    with (checkout / ".git" / "config").open("a") as config:
        config.write("[core]\n\trepositoryformatversion = 7\n")


def _git_removed(checkout: Path, elsewhere: Path) -> None:
    shutil.rmtree(checkout / ".git")


def _head_elsewhere(checkout: Path, elsewhere: Path) -> None:
    (checkout / ".git" / "HEAD").unlink()
    (checkout / ".git" / "HEAD").symlink_to(elsewhere / "host-file")


@pytest.mark.parametrize(
    ("plant", "reason"),
    [
        (_gitdir_file, ".git is not a directory"),
        (_gitdir_link, ".git is a symbolic link"),
        (_worktree_elsewhere, "core.worktree"),
        (_alternates, "alternates borrows"),
        (_broken_config, "git cannot read its config"),
        (_include_git_cannot_parse, "git cannot read its config"),
        (_format_git_refuses, "git cannot use this repository"),
        (_head_elsewhere, ".git/HEAD is not a regular file"),
        (_git_removed, ".git is missing"),
    ],
)
def test_a_git_pointing_elsewhere_is_refused_and_the_checkout_recloned(
    ctx: SpawnerContext,
    standin: StandIn,
    origin: Path,
    tmp_path: Path,
    plant: object,
    reason: str,
) -> None:
    elsewhere, canaries = tmp_path / "elsewhere", tmp_path / "canaries"
    canaries.mkdir()
    elsewhere.mkdir()
    git("init", "-q", "-b", "main", cwd=elsewhere)
    _script(elsewhere / ".git" / "hooks" / "post-checkout", canaries / "post-checkout")
    (elsewhere / "host-file").write_text("the host's")
    run_ok(ctx, on_branch(spawn_job(origin)))
    standin.wait_start(WI)
    checkout = checkout_dir(ctx.workspace_root, WI)
    (checkout / "left-behind").write_text("x")
    ended(ctx)
    assert callable(plant)
    plant(checkout, elsewhere)

    run_ok(ctx, on_branch(deliver_job(origin, "carry on")))

    recloned = events(ctx, "workspace.recloned")
    assert len(recloned) == 1 and reason in recloned[0]["reason"], recloned
    assert recloned[0]["level"] == "warning"
    assert (checkout / ".git").is_dir() and not (checkout / ".git").is_symlink()
    assert not (checkout / "left-behind").exists()  # a fresh clone
    assert (checkout / ".git" / "HEAD").read_text() == f"ref: refs/heads/{BRANCH}\n"
    assert list(canaries.iterdir()) == []
    assert (elsewhere / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert sorted(p.name for p in elsewhere.iterdir()) == [".git", "host-file"]
    standin.wait_start(WI, count=2)


def _real_claude_files(home: Path) -> dict[str, str]:
    (home / ".claude").mkdir(exist_ok=True)
    files = {
        ".claude.json": json.dumps({"hasCompletedOnboarding": True}),
        ".claude/settings.json": json.dumps({"theme": "dark"}),
        ".claude/.credentials.json": json.dumps({"claudeAiOauth": {"accessToken": "op"}}),
    }
    for name, text in files.items():
        (home / name).write_text(text)
    return files


@pytest.mark.parametrize("whole_directory", [False, True])
def test_links_planted_in_the_session_home_are_not_written_through_on_a_relaunch(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path, whole_directory: bool
) -> None:
    _real_claude_files(ctx.home)
    victims = tmp_path / "victims"
    victims.mkdir()
    kept = {name: f"host file {name}" for name in ("a", "b", "c")}
    for name, text in kept.items():
        (victims / name).write_text(text)
    run_ok(ctx, on_branch(spawn_job(origin)))
    standin.wait_start(WI)
    ended(ctx)
    home = home_for(ctx.state_dir, NAME)
    if whole_directory:
        shutil.rmtree(home / ".claude")
        (home / ".claude").symlink_to(victims)
    else:
        for name, victim in (
            (".claude/.credentials.json", "a"),
            (".claude/settings.json", "b"),
            (".claude.json", "c"),
        ):
            (home / name).unlink(missing_ok=True)  # no login is shared by default
            (home / name).symlink_to(victims / victim)

    run_ok(ctx, on_branch(deliver_job(origin, "carry on")))

    assert {p.name: p.read_text() for p in victims.iterdir()} == kept
    assert not any(p.is_symlink() for p in [home / ".claude", *home.rglob("*")])
    # The operator's login is not shared (routing.sandbox.shareLogin is off): a planted
    # link in its place is removed, never followed.
    assert not (home / ".claude" / ".credentials.json").exists()
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    # Written afresh from the operator's: their theme, no hooks (the stop gate's is in the
    # read-only managed settings the sandbox binds, where a session cannot reach it).
    assert settings["theme"] == "dark" and "hooks" not in settings
    config = json.loads((home / ".claude.json").read_text())
    checkout = str(checkout_dir(ctx.workspace_root, WI).resolve())
    assert config["hasCompletedOnboarding"] and checkout in config["projects"]
    start = standin.wait_start(WI, count=2)
    assert start["env"]["HOME"] == str(home.resolve())


HOOK = """#!/bin/sh
env > hook-env
echo ran > {host} 2>/dev/null
python3 -c '
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5)
    print("reached")
except OSError:
    print("unreachable")
' > hook-network
"""


@pytest.mark.parametrize("confined", [True, False])
def test_whatever_git_still_runs_is_held_in_the_checkout(tmp_path: Path, confined: bool) -> None:
    """The confinement alone, without the settings that switch hooks off: a hook forced on
    with `-c` runs, but sees no host file and no network; on the host (sessions unconfined,
    the control) it would. Neither way does it see the spawner's secrets."""
    checkout, host = tmp_path / "work", tmp_path / "host-canary"
    git("clone", "-q", str(bare_repository(tmp_path)), str(checkout), cwd=tmp_path)
    hooks = checkout / ".git" / "forced-hooks"
    hooks.mkdir()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        (hooks / "post-checkout").write_text(HOOK.format(host=host, port=port))
        (hooks / "post-checkout").chmod(0o755)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "THE_LOOP_GIT_TOKEN": "ghs_NeverShown",
            "ANTHROPIC_API_KEY": "sk-ant-never-shown",
        }
        forced = ("-c", f"core.hooksPath={hooks}", "switch", "-q", "-c", "feature")
        hostgit = HostGit(env, confined=confined)
        tidy(checkout, hostgit.owner)  # the sessions' user's, as `prepare_checkout` leaves it
        hostgit.run(checkout, *forced)
    seen = (checkout / "hook-env").read_text()  # the hook ran: inside the sandbox
    assert "ghs_NeverShown" not in seen and "sk-ant" not in seen
    if confined:
        assert "HOME=/nonexistent" in seen.splitlines()
        assert (checkout / "hook-network").read_text() == "unreachable\n"
        assert not host.exists()
    else:
        assert (checkout / "hook-network").read_text() == "reached\n"
        assert host.read_text() == "ran\n"


def test_a_checkout_reached_through_a_linked_workspace_is_switched_in_its_sandbox(
    tmp_path: Path,
) -> None:
    real = tmp_path / "disk" / "work"
    git("clone", "-q", str(bare_repository(tmp_path)), str(real), cwd=tmp_path)
    (tmp_path / "workspace").symlink_to(tmp_path / "disk")
    linked = tmp_path / "workspace" / "work"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    hostgit = HostGit(env, confined=True)
    tidy(real, hostgit.owner)  # the sessions' user's, as `prepare_checkout` leaves it
    assert hostgit.refusal(linked) is None
    hostgit.run(linked, "switch", "-q", "-c", "feature")
    assert (real / ".git" / "HEAD").read_text() == "ref: refs/heads/feature\n"


def test_a_filter_whose_name_holds_an_equals_sign_is_emptied_too(tmp_path: Path) -> None:
    """`-c filter.a=b.smudge=` would be read as setting `filter.a`; the settings go through
    GIT_CONFIG_COUNT, where a name is never split."""
    work, canary = tmp_path / "work", tmp_path / "canary"
    git("clone", "-q", str(bare_repository(tmp_path)), str(work), cwd=tmp_path)
    (work / ".gitattributes").write_text("*.txt filter=a=b\n")
    (work / "data.txt").write_text("data\n")
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "filtered", cwd=work)
    git("switch", "-q", "-c", "plain", "HEAD~1", cwd=work)
    _script(work / ".git" / "smudge.sh", canary, "cat\n")
    with (work / ".git" / "config").open("a") as config:
        config.write(f'[filter "a=b"]\n\tclean = cat\n\tsmudge = {work}/.git/smudge.sh\n')
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    HostGit(env, confined=False).run(work, "switch", "-q", "main")
    assert (work / "data.txt").read_text() == "data\n" and not canary.exists()
    git("switch", "-q", "plain", cwd=work)
    git("switch", "-q", "main", cwd=work)  # the control: a plain switch runs it
    assert canary.exists()
