#!/usr/bin/env python3
"""The repository's set-up, cold then warm: a real `pip install` of a few packages.

A repository whose `.devcontainer/devcontainer.json` makes a virtualenv and installs its
`requirements.txt` into it. For each of --rounds rounds, two work items of that repository
at the same lock files are launched's first steps — checkout (a clone), then the set-up —
by the spawner's own code (`checkout_for`, `run_setup`), sandboxed in bubblewrap with the
session's network (`--network`, `gateways` by default): the first item of the first round
runs the set-up (cold), every later one gets the prepared copy (warm). Each warm checkout's
virtualenv is then used (`python -m pip check`, a script of its `bin`), so a warm copy that
does not work counts as a failure.

pip installs from where this devbox's pip is configured to (its config files and `PIP_*`
variables, passed to the set-up as `PIP_*` variables since a config file in the spawner's
home is not in the sandbox): its local index and wheel directories, when it has any, are
shown to the sandbox read-only; a network index is reached through the session's proxy
(list it in `--egress`, or use the `python` preset where the spawner offers it); one the
proxy refuses is not retried (`PIP_RETRIES=0`).

Target: a warm set-up takes ≤ 10 % of the cold one.
Usage: bench/setup.py [--rounds N] [--packages "six idna ..."] [--network gateways|host]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.audit import read_jsonl  # noqa: E402
from app.config.operator_config import parse_config  # noqa: E402
from app.protocol import SpawnJob  # noqa: E402
from app.spawner.appclient import ClaimedJob  # noqa: E402
from app.spawner.context import SpawnerContext  # noqa: E402
from app.spawner.eventqueue import SpawnerEvents  # noqa: E402
from app.spawner.registry import Registry  # noqa: E402
from app.spawner.session.tmux import TmuxRunner  # noqa: E402
from app.spawner.setup_run import SetupFailed, run_setup  # noqa: E402
from app.spawner.steps.itemcheckout import checkout_for  # noqa: E402

REPO = "bench/setup.py"
TARGET = 0.10
PACKAGES = "requests six attrs packaging idna"
DEVCONTAINER = """{
  // a virtualenv with the repository's requirements
  "onCreateCommand": "python3 -m venv .venv",
  "postCreateCommand": [".venv/bin/python", "-m", "pip", "install", "-q", "-r", "requirements.txt"],
}
"""


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def origin(base: Path, packages: list[str]) -> Path:
    work = base / "src"
    (work / ".devcontainer").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)
    (work / ".devcontainer" / "devcontainer.json").write_text(DEVCONTAINER)
    (work / "requirements.txt").write_text("".join(f"{p}\n" for p in packages))
    (work / ".gitignore").write_text(".venv/\n")
    git("add", "-A", cwd=work)
    git("-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "init", cwd=work)
    git("clone", "-q", "--bare", str(work), str(base / "origin.git"), cwd=base)
    return base / "origin.git"


def pip_settings() -> dict[str, str]:
    """This devbox's pip configuration as `PIP_*` variables (what `pip config list` shows:
    its files, some in the spawner's home, which no sandbox shows), the spawner's own
    `PIP_*` variables winning."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    settings: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.partition(".")
        if section in ("global", "install") and name:
            settings[f"PIP_{name.upper().replace('-', '_')}"] = value.strip().strip("'\"")
    settings.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    return settings


def local_pip_sources(settings: dict[str, str]) -> list[str]:
    """The directories pip reads packages from (file indexes, find-links)."""
    found: list[str] = []
    for value in settings.values():
        for word in value.split():
            path = word.removeprefix("file://")
            if path.startswith("/") and Path(path).is_dir():
                # A simple index's pages link to files beside it (`../../files/…`).
                found.append(str(Path(path).parent if path.endswith("/simple") else path))
    return sorted(set(found))


def context(base: Path, network: str, egress: list[str]) -> SpawnerContext:
    pip = pip_settings()
    config = parse_config(
        {
            "harnesses": [{"name": "claude", "command": "true"}],
            "routing": {
                "workspace": {"root": str(base / "work")},
                "sandbox": {
                    "network": network,
                    "egress": egress,
                    "readOnly": local_pip_sources(pip),
                },
            },
        },
        "bench.yaml",
    )
    home = base / "home"
    home.mkdir()
    # A refused index is not retried for a minute before the next is tried.
    env = {**os.environ, **pip, "PIP_RETRIES": "0", "HOME": str(home)}
    state = base / "state"
    return SpawnerContext(
        config=config,
        runner=TmuxRunner(f"bench-setup-{os.getpid()}", env=env),
        registry=Registry(state / "sessions.json"),
        events=SpawnerEvents(state),
        home=home,
        state_dir=state,
        app_url="http://127.0.0.1:9",
        hosts=frozenset({"claude"}),
        env=env,
    )


def job(bare: Path, number: int) -> ClaimedJob:
    payload = {
        "work_item_id": f"github:{REPO}#{number}",
        "spec_id": f"issue-{number}",
        "repo": REPO,
        "issue_number": number,
        "clone_url": str(bare),
        "frozen": {},
    }
    return ClaimedJob(number, SpawnJob.model_validate(payload), 60)


def works(checkout: Path, packages: list[str]) -> bool:
    """The warm virtualenv runs: its pip checks the installed set, a `bin` script starts."""
    python = checkout / ".venv" / "bin" / "python"
    check = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True)
    pip = checkout / ".venv" / "bin" / "pip"  # its shebang names this checkout's python
    script = subprocess.run([str(pip), "--version"], capture_output=True)
    names = ",".join(packages)
    imported = subprocess.run([str(python), "-c", f"import {names.replace('-', '_')}"])
    return check.returncode == 0 and script.returncode == 0 and imported.returncode == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--packages", default=PACKAGES)
    parser.add_argument("--network", choices=["gateways", "host"], default="gateways")
    parser.add_argument("--egress", nargs="*", default=[])
    args = parser.parse_args()
    packages = args.packages.split()
    base = Path(tempfile.mkdtemp(prefix="bench-setup-"))
    ctx = context(base, args.network, args.egress)
    cold: list[float] = []
    warm: list[float] = []
    failed = 0
    try:
        bare = origin(base, packages)
        number = 0
        for _ in range(args.rounds):
            for _ in range(2):
                number += 1
                claimed = job(bare, number)
                checkout = checkout_for(ctx, claimed).path
                started = time.monotonic()
                try:
                    run_setup(ctx, claimed.payload.work_item_id, REPO, checkout, fresh=True)
                except SetupFailed as exc:
                    said = [e for e in read_jsonl(ctx.events.path) if "tail" in e]
                    print(f"{exc}:\n{said[-1]['tail'] if said else ''}")
                    return 1
                took = time.monotonic() - started
                finished = [
                    e
                    for e in read_jsonl(ctx.events.path)
                    if e["event"] == "session.setup_finished"
                    and e["work_item_id"] == claimed.payload.work_item_id
                ]
                is_warm = bool(finished and finished[-1]["warm"])
                (warm if is_warm else cold).append(took)
                if is_warm and not works(checkout, packages):
                    failed += 1
                print(f"item {number}: {'warm' if is_warm else 'cold'} set-up {took:.2f} s")
    finally:
        if ctx.limiter is not None:
            ctx.limiter.release()
        if ctx.networks is not None:
            ctx.networks.stop()
        shutil.rmtree(base, ignore_errors=True)
    if not cold or not warm:
        print("no cold or no warm set-up measured")
        return 1
    first, typical = max(cold), max(warm)
    ratio = typical / first
    print(json.dumps({"packages": packages, "cold_s": cold, "warm_s": warm}, default=str))
    print(
        f"cold {first:.2f} s, warm (slowest) {typical:.2f} s: {ratio * 100:.1f} % of cold; "
        f"target ≤ {TARGET * 100:.0f} %: {'met' if ratio <= TARGET and not failed else 'MISSED'}"
        + (f" ({failed} warm virtualenvs did not work)" if failed else "")
    )
    return 0 if ratio <= TARGET and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
