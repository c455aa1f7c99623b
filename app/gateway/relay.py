"""The model gateway's server: sessions' model API requests in, the operator's upstream out.

One asyncio loop in a thread of the spawner serves HTTP/1.1 on 127.0.0.1 (read by httptools,
written by the gateway itself: `framing.py`) and forwards each request through one pool of
kept-alive upstream connections (`transport.py`; a failed connect is tried once more). A
request must present a live pass (`passes.py`) or it is refused 401 in the API's error shape,
and only a model API's own requests are forwarded (403 for anything else of the account),
before anything goes upstream. Which API a request speaks — Anthropic's Messages API or
OpenAI's Responses API — picks its upstream, its error shape and how its usage reads
(`wires.py`); the rest is one. A request's body is read whole before it goes on (a slow sender
holds no upstream connection), up to `max_request_bytes` (a larger one is refused 413 as soon
as its length or its bytes say so, the rest never read) and within a budget for all bodies
held at once: past it, a 529 the harness retries. A body is parsed and judged off the loop
(`judging.py`), within bounds of depth and values and with no key twice;
one that would make the provider's servers reach out for the session (MCP, server tools the
operator did not allow, media by URL or file, fields it does not know: `reach.py`) is refused
403 in its API's shape. An upstream that fails before answering is a 502 in that shape; one
that breaks off mid-answer closes the session's connection. The answer is relayed as it
arrives, chunk by chunk and byte for byte (an SSE stream is never buffered), while
`metering.py` reads its usage into the tally, charged to the pass's work item (a session that
leaves mid-answer does not end the reading: the rest is read for its usage, within bounds),
and the tally keeps how long the item's harness was working. An item whose budget the App
found spent is refused 400 in its API's shape (as the API refuses a spent credit balance),
with the App's words, until a new launch of it is asked for.

Sessions are not trusted, and connections are accepted before any pass is seen, so none may
hoard them: a connection whose first request head has not come within `head_wait` seconds is
hung up on, one pass may hold `per_pass` connections at once (a request on one more is
refused 529, which the harness retries, and that connection closed), and past
`max_connections` in all a new connection is closed at once. Each connection closed unserved
is counted (`dropped`), never stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from app.config import BODIES_IN_FLIGHT, HEAD_WAIT, MAX_REQUEST, PER_PASS
from app.gateway.exchange import GatewayRefusal, SessionExchange
from app.gateway.forwarding import (
    Upstream,
    downstream_headers,
    upstream_headers,
)
from app.gateway.framing import RequestHead
from app.gateway.judging import Judges
from app.gateway.metering import Tally, Usage, meter_for
from app.gateway.passes import Passes
from app.gateway.reach import RefusalLog, reaching_headers_dropped
from app.gateway.transport import Timeouts, UpstreamAnswer, UpstreamError, UpstreamPool
from app.gateway.wires import MESSAGES, RESPONSES, Wire

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 512  # sessions' connections open at once, over all sessions
# After a session leaves mid-answer, the upstream is still read (not relayed) for its usage,
# for this long and this much at most; what was read by then is charged.
DRAIN_SECONDS = 120.0
DRAIN_BYTES = 16 * 1024 * 1024
SPENT = "the-loop: budget spent: this work item may not use the model any more"
TIMEOUTS = Timeouts(connect=15.0, read=600.0, write=60.0, pool=60.0)


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # the App's own event loop, when installed

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


class ModelGateway:
    """The gateway: `start()` binds 127.0.0.1 on a free port (`url`), `stop()` ends it."""

    def __init__(
        self,
        upstream: Upstream,
        passes: Passes | None = None,
        tally: Tally | None = None,
        *,
        responses: Upstream | None = None,
        model_tools: frozenset[str] = frozenset(),
        host: str = "127.0.0.1",
        port: int = 0,
        body_budget: int = BODIES_IN_FLIGHT,
        max_connections: int = MAX_CONNECTIONS,
        per_pass: int = PER_PASS,
        head_wait: float = HEAD_WAIT,
        max_request_bytes: int = MAX_REQUEST,
    ) -> None:
        self.upstream = upstream  # the Messages API's
        self.upstreams: dict[str, Upstream] = {
            MESSAGES.name: upstream,
            RESPONSES.name: responses or Upstream(RESPONSES.public_base),
        }
        self.passes = passes or Passes()
        self.model_tools = model_tools  # server tools the operator allows (`reach.py`)
        self.reach_refused: dict[str, int] = {}  # per item: requests refused by `reach.py`
        self.refusal_log = RefusalLog()  # what of them the App is told (`access.py`)
        self.drained = 0  # answers read on for their usage after their session left
        self.tally = tally or Tally()
        self.host, self.port = host, port
        self.refusals = 0
        self.held = 0  # bytes of request bodies in flight (the loop's thread only)
        self.body_budget = body_budget
        self.max_request_bytes = max_request_bytes
        self.max_connections, self.per_pass, self.head_wait = max_connections, per_pass, head_wait
        self.held_by: dict[str, int] = {}  # connections open per pass holder (the loop's thread)
        self.dropped = 0  # connections closed unserved: past a cap, or silent too long
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping: asyncio.Event | None = None
        self._pool: UpstreamPool | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._judges: Judges | None = None
        # Items whose budget the App found spent, with what their session is told; read on
        # every request (one dict lookup), written by the spawner's job threads.
        self.spent: dict[str, str] = {}
        self.spent_refused: dict[str, int] = {}

    # -- lifecycle (from any thread) -------------------------------------------------------

    def start(self, timeout: float = 10.0) -> ModelGateway:
        ready = threading.Event()
        failed: list[BaseException] = []
        self._loop = _new_loop()
        self._thread = threading.Thread(
            target=self._run, args=(ready, failed), name="model-gateway", daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout) or failed:
            raise RuntimeError(f"the model gateway did not start: {failed or 'timeout'}")
        return self

    def stop(self) -> None:
        loop, stopping = self._loop, self._stopping
        if loop is None or stopping is None or self._thread is None:
            return
        loop.call_soon_threadsafe(stopping.set)
        self._thread.join(timeout=10)

    def __enter__(self) -> ModelGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event, failed: list[BaseException]) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main(ready))
        except BaseException as exc:  # reported to start(), which raises it
            failed.append(exc)
            ready.set()
        finally:
            self._loop.close()

    async def _main(self, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        self._judges = Judges()
        try:
            await self._serve(ready)
        finally:
            self._judges.close()

    async def _serve(self, ready: threading.Event) -> None:
        assert self._stopping is not None
        async with UpstreamPool(
            max_connections=200, max_idle=40, timeouts=TIMEOUTS, retries=1
        ) as pool:
            self._pool = pool
            server = await asyncio.start_server(self._accept, self.host, self.port)
            self.port = server.sockets[0].getsockname()[1]
            self.url = f"http://{self.host}:{self.port}"
            ready.set()
            await self._stopping.wait()
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _accept(self, reader: Any, writer: Any) -> Awaitable[None] | None:
        if (
            len(self._tasks) >= self.max_connections
        ):  # the spawner's descriptors are not for hoarding
            self.dropped += 1
            writer.close()
            return None
        task = asyncio.ensure_future(SessionExchange(self, reader, writer).serve())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def attach(self, exchange: SessionExchange, work_item_id: str) -> bool:
        """Count `exchange` as `work_item_id`'s; False when that pass holds its share."""
        if exchange.holder == work_item_id:
            return True
        if self.held_by.get(work_item_id, 0) >= self.per_pass:
            self.dropped += 1
            log.info("model gateway: %s holds %d connections already", work_item_id, self.per_pass)
            return False
        self.detach(exchange)
        self.held_by[work_item_id] = self.held_by.get(work_item_id, 0) + 1
        exchange.holder = work_item_id
        return True

    def detach(self, exchange: SessionExchange) -> None:
        holder, exchange.holder = exchange.holder, None
        if holder is not None:
            left = self.held_by.pop(holder, 1) - 1
            if left > 0:
                self.held_by[holder] = left

    # -- budgets (from any thread) ---------------------------------------------------------

    def refuse_spent(self, work_item_id: str, message: str) -> None:
        """Refuse `work_item_id`'s requests from now on, answering `message`."""
        self.spent_refused[work_item_id] = 0
        self.spent[work_item_id] = message or SPENT

    def allow(self, work_item_id: str) -> None:
        """Serve `work_item_id` again (a launch the App asked for after a raise or an execute)."""
        self.spent.pop(work_item_id, None)
        self.spent_refused.pop(work_item_id, None)

    def spent_refusals(self, work_item_id: str) -> int:
        """How many of `work_item_id`'s requests were refused since its budget was spent."""
        return self.spent_refused.get(work_item_id, 0)

    # -- one request -----------------------------------------------------------------------

    def hold(self, size: int) -> bool:
        """Count `size` more bytes of bodies in flight (negative: given back); False, and
        nothing counted, when that would pass the budget."""
        if size > 0 and self.held + size > self.body_budget:
            return False
        self.held += size
        return True

    async def check_reach(self, body: bytes, work_item_id: str, wire: Wire) -> None:
        """Refuse (403) a body that would make the provider's servers reach out for the
        session, or that is past the bounds of a parse (`reach.py`); the operator sees it in
        the spawner's log, the App as an event. Judged off the loop (`judging.py`), so a
        large body's parse does not hold up the other sessions' requests."""
        assert self._judges is not None
        why = await self._judges.refusal(body, wire, self.model_tools)
        if why is None:
            return
        self.reach_refused[work_item_id] = self.reach_refused.get(work_item_id, 0) + 1
        self.refusal_log.note(work_item_id, why)
        log.warning("model gateway refused a request of %s: %s", work_item_id, why)
        raise GatewayRefusal(403, "permission_error", "the-loop model gateway: " + why.reason)

    async def forward(
        self,
        exchange: SessionExchange,
        request: RequestHead,
        body: bytes,
        work_item_id: str,
        wire: Wire,
    ) -> bool:
        """Send the request to `wire`'s upstream and relay the answer, counting its usage;
        whether the answer asked for tool calls (the harness goes on working)."""
        assert self._pool is not None
        upstream = self.upstreams[wire.name]
        try:
            headers = upstream_headers(request.headers, upstream, len(body))
            answer = await self._pool.request(
                upstream.origin[0],
                request.method,
                upstream.target(wire.upstream_target(request.target)),
                reaching_headers_dropped(headers, self.model_tools),
                body,
            )
            try:
                return await self._relay(exchange, answer, work_item_id, wire)
            finally:
                await answer.aclose()
        except UpstreamError as exc:
            log.warning("model gateway: upstream %s failed: %r", upstream.base_url, exc)
            if exchange.answering:
                # Part of the answer went out already: only closing the connection says so.
                raise ConnectionError("the upstream broke off an answer") from exc
            message = f"the model gateway could not reach its upstream ({exc.__class__.__name__})"
            refused = GatewayRefusal(502, "api_error", message)
            refused.shape = wire
            await exchange.refuse(refused)
            return False

    async def _relay(
        self, exchange: SessionExchange, answer: UpstreamAnswer, work_item_id: str, wire: Wire
    ) -> bool:
        headers = downstream_headers(answer.headers)
        kind = next((v for n, v in headers if n.lower() == b"content-type"), b"")
        read = meter_for(kind.decode("latin-1"), wire)
        framing = exchange.framing(answer.status, headers, answer.length)
        # The head waits for the first chunk: one write, one wake-up of the session.
        head = framing.head
        chunks = answer.chunks()
        try:
            try:
                async for chunk in chunks:
                    read(chunk)
                    await exchange.write(head + framing.body(chunk))
                    head = b""
                await exchange.write(head + framing.end)
            except ConnectionError:
                # The session left mid-answer: the rest is read for its usage, not relayed.
                self.drained += 1
                await _drain(chunks, read)
                raise
        finally:
            usage = read(None)
            if usage is not None:
                self.tally.add(work_item_id, usage)
        return usage is not None and usage.tool_calls > 0


async def _drain(chunks: Any, read: Callable[[bytes | None], Usage | None]) -> None:
    """Read what is left of an answer into `read`, within `DRAIN_SECONDS` and `DRAIN_BYTES`."""
    size = 0
    with contextlib.suppress(TimeoutError, UpstreamError):
        async with asyncio.timeout(DRAIN_SECONDS):
            async for chunk in chunks:
                read(chunk)
                size += len(chunk)
                if size > DRAIN_BYTES:
                    return
