"""Run a WSGI app on a real loopback port in a background thread."""

from __future__ import annotations

import threading
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server


class LiveServer:
    """A threaded WSGI server on 127.0.0.1 with an ephemeral port."""

    def __init__(self, wsgi_app: Any) -> None:
        self._server: BaseWSGIServer = make_server("127.0.0.1", 0, wsgi_app, threaded=True)
        self.port = self._server.server_port
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def start(self) -> LiveServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
