"""A hostile session, launched through the real spawn path of `the-loop up` (App, local
spawner process, tmux, git, bubblewrap), goes looking for the App's and the spawner's secrets:
every process environment it can see, the spawner's token file, the App's `.env`, the SQLite
database, the spawner's state, another item's checkout and home, `~/.ssh`, and every file
under the test's directory; then it tries each token it found on the App. Sandboxed, it finds
nothing. The same search run on the host beside it finds plenty, which is what shows the
search itself works (a root spawner never runs a session unconfined)."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from app.spawner.naming import item_slug
from app.spawner.workspace.checkout import checkout_dir
from tests.fakes.github_api import FakeGitHub, generate_private_key_pem
from tests.fakes.server import LiveServer
from tests.hostile_support import HARNESS, SEARCH
from tests.spawner_support import bare_repository
from tests.support import (
    fixture_json,
    free_port,
    post_webhook,
    start_the_loop,
    wait_for,
    wait_serving,
    with_installation,
)

ROOT = Path(__file__).resolve().parents[2]
REPO, USER, SECRET = "Codertocat/Hello-World", "Codertocat", "hostile-test-webhook-secret"
SSH_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nssh-key-of-the-devbox-user\n"


@dataclass
class Devbox:
    url: str
    fake: FakeGitHub
    tmp: Path
    home: Path
    work: Path
    records: Path
    origin: Path

    @property
    def state(self) -> Path:
        return self.home / ".local" / "state" / "the-loop"

    def item(self, number: int) -> str:
        return f"github:{REPO}#{number}"

    def release(self, number: int) -> None:
        """Label issue `number` (cloned from a local repository), then reply execute."""
        labeled = copy.deepcopy(with_installation(fixture_json("github/issues.labeled.json")))
        labeled["label"]["name"] = "the-loop: auto-execute"
        labeled["issue"]["number"] = number
        labeled["repository"]["clone_url"] = str(self.origin)
        assert post_webhook(self.url, "issues", labeled, secret=SECRET).status_code == 202
        wait_for(lambda: len(self.fake.issue_comments(REPO, number)) >= 1, timeout=30)
        reply = copy.deepcopy(fixture_json("github/issue_comment.created.with-installation.json"))
        reply["issue"]["number"] = number
        reply["comment"].update(body="the-loop execute", id=7000 + number)
        reply["comment"]["user"]["login"] = USER
        assert post_webhook(self.url, "issue_comment", reply, secret=SECRET).status_code == 202

    def report(self, number: int) -> dict[str, Any]:
        path = self.records / quote(self.item(number), safe="") / "found.json"
        wait_for(path.exists, timeout=90)
        return dict(json.loads(path.read_text()))


def _targets(box: Devbox, app_dir: Path) -> dict[str, Any]:
    spawner = box.state / "spawner"
    other = box.item(2)
    return {
        "files": [
            str(spawner / "local-spawner.token"),
            str(app_dir / ".env"),
            str(box.state / "the-loop.db"),
            str(box.state / "events.jsonl"),
            str(spawner / "events.jsonl"),
            str(spawner / "sessions.json"),
            str(checkout_dir(box.work, other) / "README.md"),
            str(spawner / "homes" / item_slug(other) / ".claude.json"),
            str(box.home / ".ssh" / "id_ed25519"),
        ],
        "walk": [str(box.tmp)],
        "skip": [str(box.records), str(box.tmp / "hostile" / "bin")],  # its own files
        "other_item": other,
    }


@contextmanager
def devbox(tmp_path: Path) -> Iterator[Devbox]:
    key = generate_private_key_pem()
    fake = FakeGitHub(app_id=4242, private_key_pem=key)
    fake.grant(REPO, USER, "write")
    app_dir, home, hostile = tmp_path / "app", tmp_path / "home", tmp_path / "hostile"
    for folder in (app_dir, home / ".ssh", hostile / "bin", hostile / "records", tmp_path / "tmux"):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SSH_KEY)
    (hostile / "records").chmod(0o777)  # a root spawner's session is another user
    box = Devbox("", fake, tmp_path, home, tmp_path / "work", hostile / "records", Path())
    box.origin = bare_repository(tmp_path)
    harness = hostile / "bin" / "claude"
    harness.write_text(HARNESS.format(python=sys.executable, records=str(box.records)))
    harness.chmod(0o755)
    (hostile / "bin" / "search.py").write_text(SEARCH)
    (hostile / "bin" / "targets.json").write_text(json.dumps(_targets(box, app_dir)))
    port = free_port()
    sandbox = {
        "mode": "bubblewrap",
        "readOnly": [str(harness.parent)],
        "readWrite": [str(box.records)],
    }
    (app_dir / "cli-config.yaml").write_text(
        json.dumps(
            {
                "harnesses": [{"name": "claude", "default": True, "command": str(harness)}],
                "routing": {"workspace": {"root": str(box.work)}, "sandbox": sandbox},
            }
        )
    )
    with LiveServer(fake.wsgi()) as github:
        pem = key.replace("\n", "\\n")
        (app_dir / ".env").write_text(
            f'GITHUB_APP_ID=4242\nGITHUB_PRIVATE_KEY="{pem}"\nGITHUB_WEBHOOK_SECRET={SECRET}\n'
            f"GITHUB_API_URL={github.url}\nPORT={port}\n"
        )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(ROOT),
            "TMUX_TMPDIR": str(tmp_path / "tmux"),  # its own tmux server, gone with the test
            # The operator's model key: without one a devbox refuses to launch sessions.
            "ANTHROPIC_API_KEY": "sk-ant-api03-the-hostile-devbox-operator-key-0000",
        }
        log = tmp_path / "up.log"
        proc = start_the_loop(["up"], app_dir, env, log)
        box.url = f"http://127.0.0.1:{port}"
        try:
            wait_serving(box.url, proc, log, timeout=60)
            wait_for(lambda: (box.state / "spawner" / "local-spawner.token").exists(), timeout=30)
            yield box
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            subprocess.run(["tmux", "-L", "the-loop", "kill-server"], env=env, check=False)


def _secrets(box: Devbox, app_dir: Path) -> list[str]:
    token = (box.state / "spawner" / "local-spawner.token").read_text().strip()
    return [token, SECRET, "PRIVATE KEY-----", "ssh-key-of-the-devbox-user"]


def test_a_hostile_session_finds_no_secret_of_the_app_or_the_spawner(tmp_path: Path) -> None:
    with devbox(tmp_path) as box:
        box.release(2)  # another work item: its checkout and home exist first
        other = box.report(2)
        box.release(1)
        report = box.report(1)
        assert report["own_checkout_readable"] and other["own_checkout_readable"]
        spilled = [s for s in _secrets(box, tmp_path / "app") if s in json.dumps(report)]
        control = _search_on_the_host(box)
    assert spilled == []  # what it recorded never holds a secret itself
    assert report["found"] == []
    # Item 2 looked at the same list, which names its own checkout, home and item.
    assert all("Hello-World-2-" in json.dumps(f) or "#2" in json.dumps(f) for f in other["found"])
    assert report["pids"] <= 3  # bwrap's init, itself (and a shell, if any)
    assert report["home"] == str(box.state / "spawner" / "homes" / item_slug(box.item(1)))
    # The control: the same search run on the host, as the spawner's user, finds the secrets
    # and gets in with them, which is what shows the search itself works.
    kinds = {next(iter(f)) for f in control["found"]}
    assert {"exists", "file", "app_accepted"} <= kinds, control["found"]
    exists = {f["exists"] for f in control["found"] if "exists" in f}
    assert str(tmp_path / "app" / ".env") in exists
    assert str(box.home / ".ssh" / "id_ed25519") in exists


def _search_on_the_host(box: Devbox) -> dict[str, Any]:
    """The hostile search, run unconfined beside the devbox (item 1's name, the App's URL)."""
    tools = box.tmp / "hostile" / "bin"
    out = box.tmp / "control.json"
    env = {
        "PATH": os.environ["PATH"],
        "THE_LOOP_URL": box.url,
        "THE_LOOP_WORK_ITEM_ID": box.item(1),
    }
    subprocess.run(
        [sys.executable, str(tools / "search.py"), str(tools / "targets.json"), str(out)],
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    return dict(json.loads(out.read_text()))
