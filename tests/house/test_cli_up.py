"""The README's first command on a fresh directory: `the-loop up` answers a signed ping and
refuses a forged one, on its embedded SQLite default."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from dotenv import dotenv_values

from tests.support import fixture_bytes, free_port, healthy, post_webhook, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_up_on_a_fresh_directory(tmp_path):
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "THE_LOOP_", "DATABASE_URL"))
    }
    env.update({"PORT": str(port), "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "up", "--no-spawner"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: healthy(url), timeout=30)
        secret = dotenv_values(tmp_path / ".env")["GITHUB_WEBHOOK_SECRET"]
        assert secret and len(secret) == 64
        ping = fixture_bytes("github/ping.json")
        assert post_webhook(url, "ping", ping, secret=secret).status_code == 200
        assert post_webhook(url, "ping", ping, secret="forged").status_code == 401
        assert (tmp_path / ".local/state/the-loop/the-loop.db").exists()
        admin = dotenv_values(tmp_path / ".env")["THE_LOOP_ADMIN_TOKEN"]
        assert admin and len(admin) >= 32
        assert httpx.get(f"{url}/status").status_code == 401
        signed_in = httpx.get(f"{url}/?token={admin}", follow_redirects=True)
        assert signed_in.status_code == 200 and str(signed_in.url) == f"{url}/"
        events = (tmp_path / ".local/state/the-loop/events.jsonl").read_text()
        assert '"webhook.rejected"' in events
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        out = proc.communicate(timeout=20)[0].decode()
    assert "wrote a new GITHUB_WEBHOOK_SECRET" in out
    assert out.count(f"{url}/?token={admin}") == 1  # the sign-in URL, shown once


def test_plain_gunicorn_serves_the_wsgi_app(settings_env):
    """`gunicorn 'app.runtime:create_app()'` with a stock worker: the App as plain WSGI."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-k",
            "gthread",
            "--threads",
            "4",
            "--bind",
            f"127.0.0.1:{port}",
            "app.runtime:create_app()",
        ],
        cwd=ROOT,
        env={**os.environ, **settings_env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: healthy(url) or proc.poll() is not None, timeout=30)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        body = fixture_bytes("github/installation.created.json")
        first = post_webhook(url, "installation", body, delivery="g-1")
        again = post_webhook(url, "installation", body, delivery="g-1")
        assert first.status_code == 202 and first.json()["duplicate"] is False
        assert again.json()["duplicate"] is True
        forged = post_webhook(url, "ping", fixture_bytes("github/ping.json"), secret="forged")
        assert forged.status_code == 401
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
