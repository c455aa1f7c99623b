"""The running spawner's control channel: `the-loop standing start|stop` hand their request
to it, so a standing session is launched where the model gateway and the network gates run —
with a pass of the gateway, never the operator's credential, which stays in the spawner.

A unix socket, `control.sock` in the spawner's state directory: the directory is 0700 and the
socket 0600, so only the operator's user reaches it; every sandbox masks that directory, so no
session does (it is a path, never an abstract socket, which a session sharing the devbox's
network could reach); and a peer of another user is refused by its credentials too. One JSON
line asks (`{"command": "start"|"stop", "name": …, "restart": …}`), one JSON line answers
(`{"ok": true, …}` or `{"ok": false, "error": …}`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.spawner.spawner_errors import SpawnerError

if TYPE_CHECKING:
    from app.spawner.context import SpawnerContext

log = logging.getLogger(__name__)

CONTROL_SOCKET = "control.sock"
COMMANDS = ("start", "stop")
MAX_LINE = 64 * 1024  # an answer carries an argv; a request is a name
SUN_PATH = 100  # a unix socket's address must stay under 108 bytes
NOT_RUNNING = (
    "no spawner is running for {state}: standing sessions are launched by the running "
    "spawner, with a pass of its model gateway; start it with `the-loop spawner` (or "
    "`the-loop up`) and try again"
)


class ControlError(SpawnerError, RuntimeError):
    """The control channel cannot be used; the message says why and what to do."""


def control_path(state_dir: Path) -> Path:
    return state_dir / CONTROL_SOCKET


@dataclass(frozen=True)
class Request:
    command: str
    name: str
    restart: bool = False


def parse_request(line: bytes) -> Request:
    """A request read from the socket (pure); `ValueError` says what is wrong with it."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"not a JSON request: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError("a request is a JSON object")
    command, name, restart = data.get("command"), data.get("name"), data.get("restart", False)
    if command not in COMMANDS:
        raise ValueError(f"command must be one of {', '.join(COMMANDS)}")
    if not isinstance(name, str) or not name:
        raise ValueError("name must be a non-empty string")
    if not isinstance(restart, bool):
        raise ValueError("restart must be true or false")
    return Request(command, name, restart)


@contextmanager
def _short(path: Path) -> Iterator[str]:
    """An address for `path` that fits a socket's (through `/proc/self/fd` when too long)."""
    if len(os.fsencode(path)) < SUN_PATH:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_LINE:
            raise ValueError("the line is too long")
    return data.split(b"\n", 1)[0]


def _send(conn: socket.socket, answer: dict[str, Any]) -> None:
    conn.sendall(json.dumps(answer).encode() + b"\n")


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a unix socket (the kernel's word)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _answering(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe, _short(path) as where:
            probe.settimeout(5)
            probe.connect(where)
        return True
    except OSError:
        return False


def ask(state_dir: Path, request: Request, timeout: float = 600.0) -> dict[str, Any]:
    """Hand `request` to the spawner running on `state_dir` and return its answer; raises
    `ControlError` when none runs (or it does not answer)."""
    path = control_path(state_dir)
    asked = {"command": request.command, "name": request.name, "restart": request.restart}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            with _short(path) as where:
                conn.connect(where)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            raise ControlError(NOT_RUNNING.format(state=state_dir)) from None
        except OSError as exc:
            raise ControlError(f"the spawner's control socket {path}: {exc}") from None
        try:
            _send(conn, asked)
            reply = _read_line(conn)
        except (OSError, ValueError) as exc:
            raise ControlError(f"the spawner did not answer on {path}: {exc}") from None
    try:
        answer = json.loads(reply)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise ControlError(f"the spawner's answer on {path} cannot be read")
    return answer


Act = Callable[[Request], dict[str, Any]]


def standing_answer(ctx: SpawnerContext) -> Act:
    """What the spawner does for a request: start or stop a standing session."""
    from app.spawner import standing_sessions as standing

    def act(request: Request) -> dict[str, Any]:
        try:
            if request.command == "stop":
                return {"ok": True, "killed": standing.stop(ctx, request.name)}
            launched = standing.start(ctx, request.name, restart=request.restart)
        except standing.StandingError as exc:
            return {"ok": False, "error": str(exc)}
        except Exception as exc:  # the launch failed: the operator is told why
            log.exception("standing %s %s failed", request.command, request.name)
            return {"ok": False, "error": f"{exc.__class__.__name__}: {exc}"}
        record = launched.record
        return {
            "ok": True,
            "harness_args": list(record.harness_args),
            "tmux_socket": ctx.runner.socket,
            "tmux_session": record.tmux_session,
            "network": launched.network,
            "model_gateway": launched.model_gateway,
        }

    return act


class ControlServer:
    """The socket, served on a thread of its own; each request on a thread of its own (a
    launch waits for its session's first message)."""

    def __init__(self, state_dir: Path, act: Act) -> None:
        self.path = control_path(state_dir)
        self.act = act
        self._sock: socket.socket | None = None
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ControlServer:
        """Bind and serve; raises `ControlError` when another spawner serves this socket."""
        if _answering(self.path):
            raise ControlError(f"another spawner already serves {self.path}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.path.unlink(missing_ok=True)  # left by a spawner that did not stop cleanly
            with _short(self.path) as where:
                sock.bind(where)
            os.chmod(self.path, 0o600)
            sock.listen(8)
        except OSError as exc:
            sock.close()
            raise ControlError(f"the control socket {self.path} cannot be served: {exc}") from exc
        sock.settimeout(0.5)  # how soon `stop` is noticed
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="control", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(30)
                if peer_uid(conn) != os.getuid():
                    _send(conn, {"ok": False, "error": "refused: another user"})
                    return
                try:
                    request = parse_request(_read_line(conn))
                except ValueError as exc:
                    _send(conn, {"ok": False, "error": str(exc)})
                    return
                conn.settimeout(None)
                _send(conn, self.act(request))
            except OSError as exc:  # the asker went away
                log.warning("control request not answered: %s", exc)

    def stop(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()
            self.path.unlink(missing_ok=True)
