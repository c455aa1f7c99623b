"""The model gateway's upstream sockets: httpcore's network backend interface on asyncio's own
streams.

httpcore's default backend wraps every read and write in anyio's cancel scopes and asks sniffio
which event loop runs, on each call; the gateway runs on one asyncio loop it owns, so it
gives its connection pool this backend instead (`bench/gateway` prints what a relayed stream
costs). Timeouts and errors map to httpcore's own exceptions, so the pool and the relay see
exactly what they would from the default backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Coroutine, Iterable
from typing import Any

import httpcore

READ_ERRORS = (OSError, asyncio.IncompleteReadError, ConnectionError)


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One upstream connection as asyncio's reader and writer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc)) from exc
        except READ_ERRORS as exc:
            raise httpcore.ReadError(str(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                self._writer.write(buffer)
                await self._writer.drain()
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc)) from exc
        except READ_ERRORS as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(*READ_ERRORS):
            await self._writer.wait_closed()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except (*READ_ERRORS, ssl.SSLError) as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            # An idle keep-alive connection its server closed cannot be reused: the pool
            # drops it rather than send a request into it.
            return self._reader.at_eof()
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Opens upstream connections with `asyncio.open_connection` (TCP_NODELAY is asyncio's
    default for TCP)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = (local_address, 0) if local_address else None
        opening = asyncio.open_connection(host, port, local_addr=local)
        return await _connected(opening, timeout, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await _connected(asyncio.open_unix_connection(path), timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _apply(writer: asyncio.StreamWriter, options: Iterable[Any] | None) -> None:
    sock: socket.socket | None = writer.get_extra_info("socket")
    for option in options or ():
        if sock is not None:
            sock.setsockopt(*option)


async def _connected(
    opening: Coroutine[Any, Any, tuple[asyncio.StreamReader, asyncio.StreamWriter]],
    timeout: float | None,
    socket_options: Iterable[Any] | None,
) -> AsyncioStream:
    """The stream `opening` makes, within `timeout`; failures in httpcore's own terms."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await opening
    except TimeoutError as exc:
        raise httpcore.ConnectTimeout(str(exc)) from exc
    except OSError as exc:
        raise httpcore.ConnectError(str(exc)) from exc
    _apply(writer, socket_options)
    return AsyncioStream(reader, writer)
