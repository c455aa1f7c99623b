"""Git requests answered before their body was read (a token that is not live: 401, past
the caps: 503) under plain gunicorn's threaded worker do not hold up the rest of the App
while their clients go on sending.

Left to itself, gunicorn would read such a body to its end on the request's thread (for
seconds) to keep the connection, then close it on its one main thread, the thread that
accepts every connection, lingering there while the client still sends. Real App under
`gunicorn -k gthread`, real SQLite; the trickling requests are raw sockets on loopback, with
a session-shaped password no session holds (the caps count it before the view refuses it).
The refusals of a live session's requests are tested with a whole session in test_git_limits.
"""

from __future__ import annotations

import httpx
import pytest

from tests.support import gunicorn_app, wait_for
from tests.trickle_support import Tricklers, status_of

TOKEN = "tlss_" + "t" * 40
TRICKLERS = 24
THREADS = 4
HEALTHZ_SECONDS = 15.0  # generous: left to gunicorn, `/healthz` waited far longer


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_trickling_git_requests_refused_unread_leave_healthz_answering(
    settings_env: dict[str, str],
) -> None:
    with gunicorn_app(settings_env, THREADS) as app:
        port = int(app.url.rsplit(":", 1)[1])
        tricklers = Tricklers(port, TOKEN, TRICKLERS, "Codertocat/Hello-World")
        try:
            for _ in range(4):
                answer = httpx.get(f"{app.url}/healthz", timeout=HEALTHZ_SECONDS)
                assert answer.status_code == 200
                tricklers.collect()
            assert wait_for(lambda: tricklers.collect() == TRICKLERS, timeout=120)
            answers = tricklers.answers.values()
            assert {status_of(a) for a in answers} <= {401, 503}
            assert any(b"this session token is not live" in a for a in answers)
            assert httpx.get(f"{app.url}/healthz", timeout=HEALTHZ_SECONDS).status_code == 200
        finally:
            tricklers.close()
