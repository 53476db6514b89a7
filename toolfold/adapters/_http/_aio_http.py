"""A lean asyncio HTTP/1.1 client: the transport's default async client.

Why it exists: under 100 concurrent tool loops httpx 0.28's connection pool
(anyio + httpcore) reached a fraction of the runs per second of aiohttp on the
same machine (see ``bench/bench_http.py`` and docs/providers-and-transport.md),
and the core dependencies are fixed. Provider APIs need a small slice of HTTP:
POST with a body, HTTP/1.1 keep-alive, TLS, content-length or chunked answers,
gzip, timeouts. That slice fits on an ``asyncio.Protocol`` with one write per
request and no task per request.

It has the part of ``httpx.AsyncClient``'s API the transport uses
(`build_request`, `send`, `aclose`; responses with ``status_code``,
``headers``, ``content``, `aread`, `aiter_bytes`, `aclose`) and raises httpx's
own exception classes, so errors map exactly as httpx's do. Proxies are not
supported: the transport falls back to httpx when proxy variables are set.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

import httpx

from toolfold.adapters._http._http11 import (
    BodyDecoder,
    LeanRequest,
    PoolSettings,
    ResponseParser,
    encode_request,
)

__all__ = ["LeanClient", "LeanRequest", "LeanResponse"]

_HIGH_WATER = 256 * 1024  # pause reading a stream the caller does not keep up with
_DRAIN_SECONDS = 2.0  # how long the rest of an abandoned body may take to arrive


class LeanResponse:
    """A response; its body is read in full (``send(stream=False)``) or streamed."""

    __slots__ = ("_conn", "_decoder", "content", "headers", "is_closed", "status_code")

    def __init__(self, conn: _Connection, status: int, headers: dict[str, str]) -> None:
        self._conn: _Connection | None = conn
        self.status_code = status
        self.headers = headers
        self.content = b""
        self.is_closed = False
        self._decoder = BodyDecoder(headers)

    async def aread(self) -> bytes:
        """Read the rest of the body (again: the body read before)."""
        conn = self._conn
        if conn is None:
            return self.content
        if not self._decoder.active:
            # The common case, without an async generator per response.
            pieces = []
            try:
                while (piece := await conn.next_piece()) is not None:
                    pieces.append(piece)
            finally:
                self._release()
            self.content = b"".join(pieces)
            return self.content
        self.content = b"".join([piece async for piece in self.aiter_bytes()])
        return self.content

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The (decoded) body, piece by piece, as it arrives."""
        conn = self._conn
        if conn is None:
            return
        decoder = self._decoder if self._decoder.active else None
        try:
            while True:
                piece = await conn.next_piece()
                if piece is None:
                    break
                if decoder is not None:
                    piece = decoder.decode(piece)
                if piece:
                    yield piece
            if decoder is not None:
                tail = decoder.flush()
                if tail:
                    yield tail
        finally:
            self._release()

    async def aclose(self) -> None:
        """Give the connection back (or drop it if the body was not read to its end)."""
        self._release()

    def _release(self) -> None:
        conn, self._conn = self._conn, None
        self.is_closed = True
        if conn is not None:
            conn.release()


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection on the event loop, driving a `ResponseParser`."""

    def __init__(self, pool: LeanClient, key: tuple[str, str, int]) -> None:
        self.pool = pool
        self.key = key
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = ResponseParser()
        self.closed = False
        self.reused = False
        self.got_bytes = False
        self.busy = False
        self.idle_since = 0.0
        self.read_timeout: float | None = None
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._drain: asyncio.TimerHandle | None = None

    # --- asyncio callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self.busy and self._drain is None:
            # Bytes on an idle connection (a stray 408, junk after a body)
            # would be read as the answer to the next request: drop it.
            self._close_transport()
            return
        self.got_bytes = True
        parser = self.parser
        try:
            parser.feed(data)
        except httpx.RemoteProtocolError as exc:
            self._fail(exc)
            self._close_transport()
            self._end_drain()
            return
        if self._drain is not None:
            parser.pieces.clear()
            if parser.done:
                self._end_drain()
            return
        if parser.head is not None:
            self._wake()
            if (
                not self._paused
                and len(parser.pieces) > 1
                and self.transport is not None
                and sum(map(len, parser.pieces)) > _HIGH_WATER
            ):
                self._paused = True
                self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._drain is not None:
            self._end_drain()
            return
        if not self.busy:
            return
        try:
            self.parser.eof()
        except httpx.RemoteProtocolError as error:
            if exc is not None:
                error.__cause__ = exc
            self._fail(error)
        else:
            self._wake()

    # --- request / response --------------------------------------------------

    def send(self, request: LeanRequest, read_timeout: float | None) -> None:
        assert self.transport is not None
        self.read_timeout = read_timeout
        self.busy = True
        self.got_bytes = False
        self._error = None
        self.parser.reset()
        self.transport.write(encode_request(request))

    async def head(self) -> tuple[int, dict[str, str]]:
        while self.parser.head is None:
            await self._wait()
        return self.parser.head

    async def next_piece(self) -> bytes | None:
        """The next body piece, or None at the end of the body."""
        parser = self.parser
        while not parser.pieces:
            if parser.done:
                return None
            await self._wait()
        piece = parser.pieces.popleft()
        if self._paused and not parser.pieces and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return piece

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        waiter = self.loop.create_future()
        self._waiter = waiter
        handle = None
        if self.read_timeout is not None:
            handle = self.loop.call_later(self.read_timeout, self._timed_out)
        try:
            await waiter
        finally:
            self._waiter = None
            if handle is not None:
                handle.cancel()

    def _timed_out(self) -> None:
        self._fail(httpx.ReadTimeout("timed out waiting for the server"))
        self._close_transport()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(self._error)

    def release(self) -> None:
        """The response is finished with: keep the connection if it can serve another."""
        self.busy = False
        parser = self.parser
        if parser.reusable and not self.closed:
            self.pool._give_back(self)
        elif (
            not self.closed
            and self._error is None
            and parser.head is not None
            and parser.keep_alive
            and not parser.done
        ):
            # The caller stopped early (a codec breaks at [DONE], before the
            # chunked terminator arrives): let the rest of the body run out in
            # the background and keep the connection, rather than pay a new
            # TCP and TLS handshake on the next step.
            parser.pieces.clear()
            if self._paused and self.transport is not None:
                self._paused = False
                self.transport.resume_reading()
            self._drain = self.loop.call_later(_DRAIN_SECONDS, self._drain_expired)
        else:
            self._close_transport()
            self.pool._forget(self)

    def _end_drain(self) -> None:
        handle, self._drain = self._drain, None
        if handle is None:
            return
        handle.cancel()
        if self.parser.reusable and not self.closed:
            self.pool._give_back(self)
        else:
            self._close_transport()
            self.pool._forget(self)

    def _drain_expired(self) -> None:
        self._close_transport()
        self._end_drain()

    def _close_transport(self) -> None:
        self.closed = True
        if self.transport is not None:
            # abort, not close: a TLS close() waits (up to 30 s) for the peer's
            # close_notify, and a loop that ends first leaks the socket.
            self.transport.abort()


class LeanClient(PoolSettings):
    """A keep-alive connection pool with the slice of ``httpx.AsyncClient``'s API the transport uses.

    Args:
        timeout: Default timeouts (connect, read, pool are used).
        max_connections: Open connections allowed at once, over all hosts.
        keepalive_expiry: Seconds an idle connection is kept for reuse.
        ssl_context: TLS settings; by default httpx's (certifi, ``SSL_CERT_FILE``).
    """

    def _setup(self) -> None:
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._counted: set[_Connection] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def send(self, request: LeanRequest, *, stream: bool = False) -> LeanResponse:
        """Send ``request``; with ``stream=False`` the body is read before returning."""
        if self.is_closed:
            raise RuntimeError("the client has been closed")
        timeout: httpx.Timeout = request.timeout
        key = request.key
        for attempt in (0, 1):
            conn = await self._acquire(key, timeout)
            conn.send(request, timeout.read)
            try:
                status, headers = await conn.head()
            except httpx.RemoteProtocolError:
                stale = conn.reused and not conn.got_bytes
                conn.release()
                # A kept-alive connection the server closed while idle: the
                # request never reached it, so one immediate resend is safe.
                if stale and attempt == 0:
                    continue
                raise
            except BaseException:
                conn.release()
                raise
            response = LeanResponse(conn, status, headers)
            if not stream:
                try:
                    await response.aread()
                except BaseException:
                    await response.aclose()
                    raise
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        """Close every connection."""
        self.is_closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn._close_transport()
        self._idle.clear()
        for conn in list(self._counted):
            conn._close_transport()
        self._counted.clear()
        # Let the transports' close callbacks run on this loop before it ends.
        await asyncio.sleep(0)
        await asyncio.sleep(0)

    async def __aenter__(self) -> LeanClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- the pool ----------------------------------------------------------------

    async def _acquire(self, key: tuple[str, str, int], timeout: httpx.Timeout) -> _Connection:
        loop = asyncio.get_running_loop()
        while True:
            idle = self._idle.get(key)
            while idle:
                conn = idle.pop()
                transport = conn.transport
                expired = loop.time() - conn.idle_since > self.keepalive_expiry
                if (
                    conn.closed
                    or transport is None
                    or transport.is_closing()
                    or expired
                    or conn.parser.buffer  # bytes nobody asked for: not this request's answer
                ):
                    conn._close_transport()
                    self._forget(conn)
                    continue
                conn.reused = True
                return conn
            if len(self._counted) < self.max_connections:
                return await self._connect(key, timeout)
            await self._wait_for_slot(loop, timeout.pool)

    async def _wait_for_slot(self, loop: asyncio.AbstractEventLoop, limit: float | None) -> None:
        waiter = loop.create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, limit)
        except asyncio.TimeoutError:
            raise httpx.PoolTimeout("no connection became free within the pool timeout") from None
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    async def _connect(self, key: tuple[str, str, int], timeout: httpx.Timeout) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        conn = _Connection(self, key)
        self._counted.add(conn)
        context = None
        if scheme == "https":
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
                self._ssl.set_alpn_protocols(["http/1.1"])
            context = self._ssl
        try:
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: conn, host, port, ssl=context, server_hostname=host if context else None
                ),
                timeout.connect,
            )
        except asyncio.TimeoutError:
            self._forget(conn)
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            self._forget(conn)
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        except BaseException:
            self._forget(conn)
            raise
        return conn

    def _give_back(self, conn: _Connection) -> None:
        if self.is_closed:
            conn._close_transport()
            self._forget(conn)
            return
        conn.idle_since = conn.loop.time()
        self._idle.setdefault(conn.key, []).append(conn)
        self._notify()

    def _forget(self, conn: _Connection) -> None:
        if conn in self._counted:
            self._counted.discard(conn)
            self._notify()

    def _notify(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
