"""`the-loop worker` as an operator runs it: it says who it is and what it is set to when it
starts, and that it stopped when told to — with the store's password never printed."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

from tests.support import start_the_loop, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_the_worker_says_who_it_is_and_its_settings(settings_env, tmp_path):
    env = {**os.environ, **settings_env, "THE_LOOP_INBOX_WORKERS": "2", "PYTHONPATH": str(ROOT)}
    env["THE_LOOP_INBOX_LEASE_SECONDS"] = "90"
    log = tmp_path / "worker.log"
    proc = start_the_loop(["worker"], tmp_path, env, log)
    try:
        wait_for(lambda: "the-loop worker: pid" in log.read_text() or proc.poll() is not None, 60)
        assert proc.poll() is None, log.read_text()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    text = log.read_text()
    line = next(x for x in text.splitlines() if x.startswith("the-loop worker: pid"))
    assert f"pid {proc.pid} on {socket.gethostname()}" in line
    assert "2 inbox workers" in line and "held 90 s" in line and "tried 8 times" in line
    if "@" in settings_env["DATABASE_URL"]:  # PostgreSQL: user and host shown, password not
        assert ":***@" in line and ":loop@" not in line
    assert f"the-loop worker: pid {proc.pid} stopped" in text
