"""The fallback without a cgroup, as an ordinary user's spawner has it: `enter_limits` run
inside bubblewrap (which gives an unprivileged user a user namespace of its own) with the
plan's resource limits. Forks past `processes` fail — counted in the session's namespace,
so other processes of the same user elsewhere do not count — and an allocation past
`memory` fails in the process that tries it.

Run as root, the test drops to `nobody` (`setpriv`) for the sandbox: root is the one user
RLIMIT_NPROC never binds (tests/spawner/test_limits_choice.py has the plan saying so)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from app.config.sandbox_config import SessionLimits
from app.spawner.confine import enter_limits
from app.spawner.confine.limits import HostOffer, Mechanism, choose_plan, rlimit_args
from app.spawner.confine.sandbox import BWRAP, ISOLATION

PYTHON = "/usr/bin/python3"  # readable by nobody (the test's own may live in /root)
HOSTILE = """
import json, os
made = refused = 0
for _ in range(60):
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        continue
    if pid == 0:
        os.execv("/bin/sleep", ["sleep", "30"])
    made += 1
try:
    held = b"x" * (320 << 20)
    memory = "held"
except MemoryError:
    memory = "refused"
print(json.dumps({"made": made, "refused": refused, "memory": memory}))
"""

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv") or not Path(PYTHON).exists(),
    reason="drops to nobody from root (as any other user the spawn-path test covers it)",
)


def _as_nobody_in_a_sandbox(words: list[str]) -> dict[str, object]:
    # `nobody` must read the wrapper wherever the repository lies (under /root, or under
    # /tmp, which the sandbox replaces with its own): a world-readable copy, bound in.
    shelf = Path(tempfile.mkdtemp(prefix="the-loop-rlimit-"))
    try:
        shelf.chmod(0o755)
        script = shelf / "enter_limits.py"
        shutil.copyfile(enter_limits.__file__, script)
        script.chmod(0o644)
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        argv += [BWRAP, "--ro-bind", "/", "/", *ISOLATION]
        argv += ["--ro-bind", str(script), "/tmp/enter_limits.py", "--"]
        argv += [PYTHON, "-S", "/tmp/enter_limits.py", *words]
        argv += ["--", PYTHON, "-S", "-c", HOSTILE]
        # The sleeps die with the sandbox's PID namespace when its first process exits.
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    finally:
        shutil.rmtree(shelf)
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_the_fallback_bounds_forks_and_allocations_in_the_sandbox() -> None:
    limits = SessionLimits(memory=256 << 20, processes=16)
    plan = choose_plan(HostOffer(root=False), limits, sandboxed=True)
    assert plan.mechanism is Mechanism.RLIMIT and not plan.weak

    bounded = _as_nobody_in_a_sandbox(rlimit_args(plan))

    assert bounded["memory"] == "refused"
    assert isinstance(bounded["made"], int) and 0 < bounded["made"] < 16
    assert bounded["refused"] == 60 - bounded["made"]


def test_without_the_limits_the_same_session_is_unbounded() -> None:
    free = _as_nobody_in_a_sandbox([])
    assert free == {"made": 60, "refused": 0, "memory": "held"}
