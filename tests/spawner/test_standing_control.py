"""The spawner's control socket on its own: requests read or refused saying why, the answer
handed back, one spawner per state directory, a socket left by a crash replaced, and only the
operator's user let in (by the file's mode, and by the peer's credentials should the mode
ever be looser). What the spawner does with a request is `test_standing_claude.py`'s and
`test_spawner_cli.py`'s."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.spawner.standing_control import (
    ControlError,
    ControlServer,
    Request,
    ask,
    control_path,
    parse_request,
)

ASK_AS_NOBODY = r"""
import json, socket, sys
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    try:
        s.connect(sys.argv[1])
    except OSError as exc:
        print(json.dumps({"connect": type(exc).__name__}))
        sys.exit(0)
    try:  # the spawner may answer, and hang up, before it is asked anything
        s.sendall(b'{"command": "stop", "name": "ops"}\n')
    except OSError:
        pass
    print(s.makefile().readline().strip())
"""


class Recorder:
    """An `act` that answers every request and keeps it."""

    def __init__(self) -> None:
        self.asked: list[Request] = []

    def __call__(self, request: Request) -> dict[str, Any]:
        self.asked.append(request)
        return {"ok": True, "killed": False, "name": request.name}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ControlServer, Recorder]]:
    act = Recorder()
    server = ControlServer(tmp_path, act).start()
    yield server, act
    server.stop()


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b"stop ops", "not a JSON request"),
        (b"[]", "a request is a JSON object"),
        (b'{"command": "rm", "name": "ops"}', "command must be one of start, stop"),
        (b'{"command": "start"}', "name must be a non-empty string"),
        (b'{"command": "start", "name": "ops", "restart": "yes"}', "restart must be true"),
    ],
)
def test_a_bad_request_is_refused_saying_why(line: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_request(line)


def test_a_request_is_read() -> None:
    line = b'{"command": "start", "name": "ops", "restart": true}'
    assert parse_request(line) == Request("start", "ops", True)
    assert parse_request(b'{"command": "stop", "name": "ops"}') == Request("stop", "ops")


def test_without_a_spawner_the_asker_is_told_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(ControlError, match=r"no spawner is running .*`the-loop spawner`"):
        ask(tmp_path, Request("start", "ops"))


def test_a_request_is_answered_by_the_spawner_serving_the_socket(
    tmp_path: Path, served: tuple[ControlServer, Recorder]
) -> None:
    server, act = served
    assert stat.S_IMODE(server.path.stat().st_mode) == 0o600
    assert ask(tmp_path, Request("start", "ops", True)) == {
        "ok": True,
        "killed": False,
        "name": "ops",
    }
    assert act.asked == [Request("start", "ops", True)]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(server.path))
        raw.sendall(b'{"command": "rm -rf", "name": "ops"}\n')
        answer = json.loads(raw.makefile().readline())
    assert answer == {"ok": False, "error": "command must be one of start, stop"}
    assert len(act.asked) == 1  # a bad request reaches nothing
    with pytest.raises(ControlError, match="another spawner already serves"):
        ControlServer(tmp_path, Recorder()).start()
    server.stop()
    assert not server.path.exists()
    with pytest.raises(ControlError, match="no spawner is running"):
        ask(tmp_path, Request("stop", "ops"))


def test_a_socket_left_by_a_crashed_spawner_is_replaced(tmp_path: Path) -> None:
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(str(control_path(tmp_path)))
    left.close()  # the file stays; nobody answers on it
    act = Recorder()
    server = ControlServer(tmp_path, act).start()
    try:
        assert ask(tmp_path, Request("stop", "ops"))["ok"] is True
    finally:
        server.stop()


def test_a_long_state_directory_still_gets_its_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    server = ControlServer(deep, Recorder()).start()
    try:
        assert ask(deep, Request("stop", "ops"))["name"] == "ops"
    finally:
        server.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_another_user_is_refused() -> None:
    python = shutil.which("python3", path="/usr/bin:/bin")
    assert python is not None
    # Outside the test's own (0700) temporary tree, so another user may reach the directory.
    shared = Path(tempfile.mkdtemp(prefix="the-loop-control-"))
    try:
        shared.chmod(0o755)
        act = Recorder()
        server = ControlServer(shared, act).start()
        try:

            def as_nobody() -> dict[str, Any]:
                run = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
                out = subprocess.run(
                    [*run, python, "-c", ASK_AS_NOBODY, str(server.path)],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=True,
                )
                answer: dict[str, Any] = json.loads(out.stdout)
                return answer

            assert as_nobody() == {"connect": "PermissionError"}  # the socket's mode
            server.path.chmod(0o666)  # were it ever looser: the peer's credentials
            assert as_nobody() == {"ok": False, "error": "refused: another user"}
            assert act.asked == []
        finally:
            server.stop()
    finally:
        shutil.rmtree(shared, ignore_errors=True)
