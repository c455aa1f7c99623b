"""Run a server on a real loopback port in a background thread."""

from __future__ import annotations

import threading
from typing import Any, Self

from werkzeug.serving import make_server


class ServedInThread:
    """The lifecycle of a socketserver-style server (`serve_forever`, `shutdown`,
    `server_close`) run in a daemon thread: `start()`, `stop()`, or a `with` block."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LiveServer(ServedInThread):
    """A threaded WSGI server on 127.0.0.1 with an ephemeral port."""

    def __init__(self, wsgi_app: Any) -> None:
        super().__init__(make_server("127.0.0.1", 0, wsgi_app, threaded=True))
        self.port = self._server.server_port
        self.url = f"http://127.0.0.1:{self.port}"
