"""A fake Socket Mode endpoint: a minimal WebSocket server on loopback speaking Slack's
envelope protocol (`{"envelope_id", "type", "payload"}` out, `{"envelope_id"}` acks in).

Enough of RFC 6455 for slack_sdk's built-in client: the upgrade handshake, unmasked server
text frames, masked client frames (text, ping → pong, close). One client at a time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import struct
import threading
import uuid
from typing import Any

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def frame(opcode: int, data: bytes) -> bytes:
    """A final, unmasked frame (servers never mask)."""
    head = bytes([0x80 | opcode])
    if len(data) < 126:
        return head + bytes([len(data)]) + data
    if len(data) < 1 << 16:
        return head + bytes([126]) + struct.pack("!H", len(data)) + data
    return head + bytes([127]) + struct.pack("!Q", len(data)) + data


def _read_exact(conn: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise ConnectionError("client went away")
        data += chunk
    return data


def read_frame(conn: socket.socket) -> tuple[int, bytes]:
    first, second = _read_exact(conn, 2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", _read_exact(conn, 2))[0]
    elif length == 127:
        length = struct.unpack("!Q", _read_exact(conn, 8))[0]
    mask = _read_exact(conn, 4) if second & 0x80 else b"\0\0\0\0"
    data = bytes(b ^ mask[i % 4] for i, b in enumerate(_read_exact(conn, length)))
    return first & 0x0F, data


class FakeSocketMode:
    """Accepts one Socket Mode client; tests push envelopes and read the acks."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.url = f"ws://127.0.0.1:{self.port}/link?ticket=test"
        self.acks: list[dict[str, Any]] = []
        self.connected = threading.Event()
        self._conn: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> FakeSocketMode:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.close()
        if self._conn is not None:
            self._conn.close()

    def send(self, payload: dict[str, Any], kind: str = "events_api") -> str:
        """Push one envelope to the connected client; returns its envelope id."""
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "accepts_response_payload": kind != "events_api",
            "payload": payload,
        }
        assert self._conn is not None, "no Socket Mode client connected"
        with self._send_lock:
            self._conn.sendall(frame(0x1, json.dumps(envelope).encode()))
        return envelope_id

    def _handshake(self, conn: socket.socket) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = conn.recv(4096)
            if not chunk:
                raise ConnectionError("no handshake")
            request += chunk
        headers = dict(
            line.split(": ", 1) for line in request.decode().split("\r\n")[1:] if ": " in line
        )
        key = headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        conn.sendall(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            ).encode()
        )

    def _serve(self) -> None:
        try:
            conn, _ = self._server.accept()
        except OSError:
            return
        self._conn = conn
        try:
            self._handshake(conn)
            self.connected.set()
            while True:
                opcode, data = read_frame(conn)
                if opcode == 0x9:
                    with self._send_lock:
                        conn.sendall(frame(0xA, data))
                elif opcode == 0x1:
                    self.acks.append(json.loads(data))
                elif opcode == 0x8:
                    return
        except (ConnectionError, OSError):
            return
