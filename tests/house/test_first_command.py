"""The README's first command, `scripts/up.sh`, on a machine that lacks what sessions need:
from a fresh clone, in a fresh virtualenv and HOME, with bubblewrap (and the codex CLI)
missing, it installs them, says so in one line each, and brings the App up. Without root or
sudo, its session-tools step installs nothing and prints the exact commands to run.

The machine is the test's own PATH (links to this machine's programs, some left out) with
stand-in installers (`tests/install_support.py`): nothing is installed on the host."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.install_support import (
    calls,
    stand_in_apt_get,
    stand_in_npm,
    stand_in_sudo,
    tools_on_path,
)
from tests.support import free_port, wait_serving

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "session-tools.sh"
CLEAN = ("GITHUB_", "THE_LOOP_", "DATABASE_URL", "PYTHON", "VIRTUAL_ENV", "PYENV", "PIP_")


def fresh_clone(dest: Path) -> Path:
    """A clone of this repository, with this checkout's changes not yet committed (edits, and
    new files git does not ignore) laid on top: what is tested is what is here."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    git = ["git", "-C", str(ROOT)]
    diff = subprocess.run([*git, "diff", "HEAD", "--binary"], capture_output=True, check=True)
    if diff.stdout:
        subprocess.run(["git", "-C", str(dest), "apply"], input=diff.stdout, check=True)
    new = subprocess.run(
        [*git, "ls-files", "-z", "--others", "--exclude-standard"], capture_output=True, check=True
    )
    for name in filter(None, new.stdout.decode().split("\0")):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    return dest


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEAN)}
    return {**env, "LANG": "C.UTF-8", **extra}


def run_tools(env: dict[str, str], *prefix: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*prefix, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.timeout(300)  # the first command has 3 minutes; cloning and a venv come first
def test_the_first_command_installs_what_is_missing_and_brings_the_app_up(tmp_path: Path) -> None:
    repo = fresh_clone(tmp_path / "the-loop")
    tools = tools_on_path(tmp_path / "tools", {"bwrap", "codex", "apt-get", "npm", "sudo"})
    assert shutil.which("bwrap", path=str(tools)) is None
    apt_log = stand_in_apt_get(tools, tmp_path / "apt")
    npm_log = stand_in_npm(tools, tmp_path / "npm.log")
    if os.geteuid() != 0:
        stand_in_sudo(tools)
    venv = tmp_path / "venv"
    # The project's dependencies (and pip) come from this Python, the project from the clone.
    make_venv = [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip"]
    subprocess.run([*make_venv, str(venv)], check=True)
    (tmp_path / "home").mkdir()
    port = free_port()
    env = clean_env(
        HOME=str(tmp_path / "home"),
        PATH=f"{venv / 'bin'}{os.pathsep}{tools}",
        PORT=str(port),
        TMUX_TMPDIR=str(tmp_path),  # its spawner's own tmux server, gone with the test
    )
    log = tmp_path / "up.log"
    with log.open("wb") as output:  # a file: nobody reads a pipe while the App runs
        proc = subprocess.Popen(
            [str(repo / "scripts" / "up.sh")],
            cwd=repo,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_serving(f"http://127.0.0.1:{port}", proc, log, timeout=180)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        subprocess.run(["tmux", "-L", "the-loop", "kill-server"], env=env, check=False)
    said = log.read_text()
    assert "session-tools: installing bubblewrap (apt): the sandbox every session runs in" in said
    assert "session-tools: installing the codex CLI (npm @openai/codex)" in said
    assert "tmux (apt)" not in said and "claude CLI" not in said  # present: left alone
    assert "sessions run in a bubblewrap sandbox" in said
    assert [c.split()[0] for c in calls(apt_log)] == ["update", "install"]
    assert calls(apt_log)[1].split()[-1] == "bubblewrap"
    assert calls(npm_log) == ["install -g @openai/codex"]
    assert Path(os.path.realpath(tools / "bwrap")).is_relative_to(tmp_path / "apt" / "fs")
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import app; print(app.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(repo)  # the clone's code was served

    again = run_tools(env)  # everything is present now: nothing said, nothing installed
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")
    assert len(calls(apt_log)) == 2 and len(calls(npm_log)) == 1


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can read (pytest's own are private to this user)."""
    folder = Path(tempfile.mkdtemp(prefix="the-loop-tools-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def as_another_user() -> tuple[str, ...]:
    """How to run a command as a user who is not root: `nobody` when this runner is root."""
    if os.geteuid() != 0:
        return ()
    return ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


def test_without_root_or_sudo_it_prints_the_commands_and_installs_nothing(
    shared_dir: Path,
) -> None:
    left_out = {"bwrap", "claude", "codex", "node", "nodejs", "npm", "sudo", "apt-get"}
    tools = tools_on_path(shared_dir / "tools", left_out)
    records = shared_dir / "records"
    records.mkdir(mode=0o777)
    records.chmod(0o777)
    apt_log = stand_in_apt_get(tools, records)
    home = shared_dir / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)
    env = clean_env(HOME=str(home), PATH=str(tools))
    done = run_tools(env, *as_another_user())
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert lines[-2:] == [
        "  apt-get update && apt-get install -y bubblewrap nodejs npm",
        "  npm install -g @anthropic-ai/claude-code @openai/codex",
    ]
    assert lines[-3].startswith("session-tools: not root, and no sudo: as root, run these")
    missing = [line for line in lines if line.startswith("session-tools: missing: ")]
    assert len(missing) == 4  # bubblewrap, Node.js, and the two CLIs: one line each
    assert calls(apt_log) == [] and list(home.iterdir()) == []


def test_without_root_the_clis_go_under_the_home_when_npm_is_here(shared_dir: Path) -> None:
    tools = tools_on_path(shared_dir / "tools", {"codex", "npm", "sudo", "apt-get"})
    npm_log = shared_dir / "npm.log"
    npm_log.touch(mode=0o666)
    npm_log.chmod(0o666)
    stand_in_npm(tools, npm_log)
    (shared_dir / "tools").chmod(0o777)  # the stand-in npm puts its CLI there
    home = shared_dir / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)
    done = run_tools(clean_env(HOME=str(home), PATH=str(tools)), *as_another_user())
    assert done.returncode == 0, done.stderr
    assert calls(npm_log) == [f"install -g --prefix {home}/.local @openai/codex"]
    assert "installing the codex CLI (npm @openai/codex): the Codex harness, under ~/.local" in (
        done.stderr
    )
