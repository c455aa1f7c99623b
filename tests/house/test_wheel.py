"""The project as a wheel: built, installed in a fresh virtualenv outside the repository, and
run from an empty directory. Everything the App reads at run time (the GitHub manifest, the
templates, the migrations) must be package data, or these fail where an editable install
would pass."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import free_port, healthy, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A virtualenv holding the wheel built from this tree: its `bin/`.

    The venv sees the system's site-packages for the dependencies (nothing is downloaded);
    the wheel's own `app` comes first on its path, which the fixture checks."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(work / "dist"),
            str(ROOT),
        ],
        check=True,
        cwd=work,
        timeout=300,
    )
    wheel = next((work / "dist").glob("the_loop-*.whl"))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        cwd=work,
        timeout=300,
    )
    where = subprocess.run(
        [str(python), "-c", "import app, hooks; print(app.__file__); print(hooks.__file__)"],
        check=True,
        cwd=work,
        capture_output=True,
        text=True,
        env=_clean_env(work),
    ).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in where), where
    yield venv / "bin"


def _clean_env(home: Path, **more: str) -> dict[str, str]:
    """The test's environment minus the App's variables and any path to this tree."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "THE_LOOP_", "DATABASE_URL", "PYTHON"))
    }
    env.update({"HOME": str(home), **more})
    return env


def _stop(proc: subprocess.Popen[bytes]) -> str:
    """What the process printed, once it is stopped (if it is still running)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.communicate(timeout=30)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0].decode(errors="replace")


def test_the_installed_wheel_runs_up_from_an_empty_directory(installed, tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [str(installed / "the-loop"), "up", "--no-spawner"],
        cwd=tmp_path,
        env=_clean_env(tmp_path, PORT=str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: healthy(url) or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, "the-loop up exited"
        assert httpx.get(f"{url}/status").status_code == 401  # a page rendered from a template
    finally:
        out = _stop(proc)
    assert (tmp_path / ".local/state/the-loop/the-loop.db").exists(), out


def test_the_installed_wheel_serves_the_setup_page(installed, tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [str(installed / "the-loop"), "setup", "--no-browser", "--port", str(port)],
        cwd=tmp_path,
        env=_clean_env(tmp_path, PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:

        def page() -> httpx.Response | None:
            try:
                return httpx.get(url, timeout=5)
            except httpx.HTTPError:
                return None

        wait_for(lambda: page() is not None or proc.poll() is not None, timeout=60)
        answer = page()
        assert answer is not None, "the setup page never answered"
        assert answer.status_code == 200
        assert "issues" in answer.text  # a permission the manifest asks for, with its reason
    finally:
        out = _stop(proc)
    assert "Open http://127.0.0.1" in out, out
