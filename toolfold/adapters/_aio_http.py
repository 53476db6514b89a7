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
import ssl
import zlib
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

_MAX_HEAD = 64 * 1024
_HIGH_WATER = 256 * 1024  # pause reading a stream the caller does not keep up with


class LeanRequest:
    """A request ready to send (what `LeanClient.build_request` returns)."""

    __slots__ = ("content", "headers", "host", "method", "port", "scheme", "target", "timeout")

    def __init__(
        self,
        method: str,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        timeout: Any,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {parts.scheme!r} in {url!r}")
        if not parts.hostname:
            raise httpx.InvalidURL(f"no host in URL {url!r}")
        self.method = method
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.content = content
        self.headers = headers
        self.timeout = timeout


class LeanResponse:
    """A response; its body is read in full (``send(stream=False)``) or streamed."""

    __slots__ = ("_conn", "_decoder", "content", "headers", "is_closed", "status_code")

    def __init__(self, conn: _Connection, status: int, headers: dict[str, str]) -> None:
        self._conn: _Connection | None = conn
        self.status_code = status
        self.headers = headers
        self.content = b""
        self.is_closed = False
        encoding = headers.get("content-encoding", "").strip().lower()
        self._decoder: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = _Deflate()

    async def aread(self) -> bytes:
        """Read the rest of the body (again: the body read before)."""
        if self._conn is None:
            return self.content
        self.content = b"".join([piece async for piece in self.aiter_bytes()])
        return self.content

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The (decoded) body, piece by piece, as it arrives."""
        conn = self._conn
        if conn is None:
            return
        try:
            while True:
                piece = await conn.next_piece()
                if piece is None:
                    break
                if self._decoder is not None:
                    piece = _decode(self._decoder, piece)
                if piece:
                    yield piece
            if self._decoder is not None:
                tail = self._decoder.flush()
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


class _Deflate:
    def __init__(self) -> None:
        self._obj: Any = None
        self._first = True

    def decompress(self, data: bytes) -> bytes:
        if self._first:
            self._first = False
            try:
                self._obj = zlib.decompressobj()
                return bytes(self._obj.decompress(data))
            except zlib.error:
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
        return bytes(self._obj.decompress(data))

    def flush(self) -> bytes:
        return bytes(self._obj.flush()) if self._obj is not None else b""


def _decode(decoder: Any, piece: bytes) -> bytes:
    try:
        return bytes(decoder.decompress(piece))
    except zlib.error as exc:
        raise httpx.DecodingError(f"cannot decode the compressed body: {exc}") from exc


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; parses responses as bytes arrive."""

    def __init__(self, pool: LeanClient, key: tuple[str, str, int]) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.buffer = bytearray()
        self.closed = False
        self.reused = False
        self.idle_since = 0.0
        self.read_timeout: float | None = None
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._head: tuple[int, dict[str, str]] | None = None
        self._pieces: deque[bytes] = deque()
        self._state = "idle"  # idle, head, body, done
        self._mode = ""  # length, chunked, close
        self._remaining = 0
        self._keep_alive = True
        self._got_bytes = False
        self._paused = False

    # --- asyncio callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        self.buffer += data
        try:
            self._parse()
        except httpx.RemoteProtocolError as exc:
            self._fail(exc)
            self._close_transport()

    def eof_received(self) -> bool | None:
        return None  # let the transport close; connection_lost handles the rest

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._state == "body" and self._mode == "close":
            self._state = "done"
            self._pieces.append(b"")
            self._wake()
            return
        if self._state in ("head", "body"):
            if self._state == "head" and not self._got_bytes:
                error: BaseException = httpx.RemoteProtocolError(
                    "server disconnected without sending a response"
                )
            elif self._state == "head":
                error = httpx.RemoteProtocolError(
                    "server disconnected in the middle of the headers"
                )
            else:
                error = httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            if exc is not None:
                error.__cause__ = exc
            self._fail(error)

    def pause_writing(self) -> None:  # pragma: no cover - bodies are small
        pass

    def resume_writing(self) -> None:  # pragma: no cover
        pass

    # --- request / response --------------------------------------------------

    def send(self, request: LeanRequest, read_timeout: float | None) -> None:
        assert self.transport is not None
        self.read_timeout = read_timeout
        self._state = "head"
        self._head = None
        self._got_bytes = False
        self._error = None
        self._pieces.clear()
        host = request.host if request.port in (80, 443) else f"{request.host}:{request.port}"
        lines = [f"{request.method} {request.target} HTTP/1.1\r\nhost: {host}\r\n"]
        for name, value in request.headers.items():
            lines.append(f"{name}: {value}\r\n")
        lines.append(f"content-length: {len(request.content)}\r\n\r\n")
        self.transport.write("".join(lines).encode("latin-1") + request.content)

    async def head(self) -> tuple[int, dict[str, str]]:
        while self._head is None:
            await self._wait()
        return self._head

    async def next_piece(self) -> bytes | None:
        """The next body piece, or None at the end of the body."""
        while not self._pieces:
            await self._wait()
        piece = self._pieces.popleft()
        if self._paused and not self._pieces and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return piece if piece else None

    async def _wait(self) -> None:
        if self._error is not None:
            raise self._error
        waiter = self.loop.create_future()
        self._waiter = waiter
        handle = None
        if self.read_timeout is not None:
            handle = self.loop.call_later(self.read_timeout, self._timed_out, waiter)
        try:
            await waiter
        finally:
            self._waiter = None
            if handle is not None:
                handle.cancel()

    def _timed_out(self, waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            waiter.set_exception(httpx.ReadTimeout("timed out waiting for the server"))
            self._error = httpx.ReadTimeout("timed out waiting for the server")
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
            waiter.set_exception(error)

    def release(self) -> None:
        """The response is finished with: keep the connection if it can serve another."""
        if self._state == "done" and self._keep_alive and not self.closed and not self.buffer:
            self._state = "idle"
            self.pool._give_back(self)
        else:
            self._close_transport()
            self.pool._forget(self)

    def _close_transport(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # --- parsing -------------------------------------------------------------

    def _parse(self) -> None:
        if self._state == "head":
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > _MAX_HEAD:
                    raise httpx.RemoteProtocolError("response headers are too large")
                return
            head = bytes(self.buffer[:end]).decode("latin-1")
            del self.buffer[: end + 4]
            self._start_body(head)
            if self._state == "head":  # a 1xx answer: the real one follows
                self._parse()
                return
            self._wake()
        if self._state == "body":
            self._parse_body()

    def _start_body(self, head: str) -> None:
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:100]!r}")
        status = int(parts[1])
        if 100 <= status < 200:
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise httpx.RemoteProtocolError(f"malformed header line {line[:100]!r}")
            name = name.strip().lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self._head = (status, headers)
        connection = headers.get("connection", "").lower()
        self._keep_alive = "close" not in connection and parts[0] != "HTTP/1.0"
        self._state = "body"
        if status in (204, 304):
            self._mode, self._remaining = "length", 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode, self._remaining = "chunked", -1
        elif "content-length" in headers:
            try:
                self._mode, self._remaining = "length", int(headers["content-length"])
            except ValueError:
                raise httpx.RemoteProtocolError("malformed content-length") from None
        else:
            self._mode, self._keep_alive = "close", False

    def _parse_body(self) -> None:
        buffer = self.buffer
        produced = False
        if self._mode == "length":
            if buffer and self._remaining:
                take = min(len(buffer), self._remaining)
                self._pieces.append(bytes(buffer[:take]))
                del buffer[:take]
                self._remaining -= take
                produced = True
            if self._remaining == 0:
                self._finish()
                produced = True
        elif self._mode == "close":
            if buffer:
                self._pieces.append(bytes(buffer))
                buffer.clear()
                produced = True
        else:
            produced = self._parse_chunks()
        if produced:
            self._wake()
            if (
                not self._paused
                and self.transport is not None
                and sum(map(len, self._pieces)) > _HIGH_WATER
            ):
                self._paused = True
                self.transport.pause_reading()

    def _parse_chunks(self) -> bool:
        buffer = self.buffer
        produced = False
        while True:
            if self._remaining == -1:  # expecting a chunk-size line
                end = buffer.find(b"\r\n")
                if end < 0:
                    return produced
                size_text = bytes(buffer[:end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(f"malformed chunk size {size_text!r}") from None
                del buffer[: end + 2]
                if size == 0:
                    self._remaining = -2
                else:
                    self._remaining = size
            if self._remaining == -2:  # trailers until an empty line
                end = buffer.find(b"\r\n")
                if end < 0:
                    return produced
                line = bytes(buffer[:end])
                del buffer[: end + 2]
                if not line:
                    self._finish()
                    return True
                continue
            if self._remaining > 0:
                if not buffer:
                    return produced
                take = min(len(buffer), self._remaining)
                self._pieces.append(bytes(buffer[:take]))
                del buffer[:take]
                self._remaining -= take
                produced = True
                if self._remaining:
                    return produced
                self._remaining = 0
            if self._remaining == 0:  # the CRLF after a chunk's data
                if len(buffer) < 2:
                    return produced
                if buffer[:2] != b"\r\n":
                    raise httpx.RemoteProtocolError("missing CRLF after a chunk")
                del buffer[:2]
                self._remaining = -1

    def _finish(self) -> None:
        self._state = "done"
        self._pieces.append(b"")


class LeanClient:
    """A keep-alive connection pool with the slice of ``httpx.AsyncClient``'s API the transport uses.

    Args:
        timeout: Default timeouts (connect, read, pool are used).
        max_connections: Open connections allowed at once, over all hosts.
        keepalive_expiry: Seconds an idle connection is kept for reuse.
        ssl_context: TLS settings; by default httpx's (certifi, ``SSL_CERT_FILE``).
    """

    def __init__(
        self,
        *,
        timeout: httpx.Timeout | None = None,
        max_connections: int = 1000,
        keepalive_expiry: float = 15.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.timeout = timeout or httpx.Timeout(600.0, connect=10.0)
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._counted: set[_Connection] = set()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.is_closed = False

    def build_request(
        self,
        method: str,
        url: str,
        *,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
        timeout: Any = None,
    ) -> LeanRequest:
        """A request for `send`; ``timeout`` is an ``httpx.Timeout`` or the client default."""
        chosen = timeout if isinstance(timeout, httpx.Timeout) else self.timeout
        return LeanRequest(method, url, content, headers or {}, chosen)

    async def send(self, request: LeanRequest, *, stream: bool = False) -> LeanResponse:
        """Send ``request``; with ``stream=False`` the body is read before returning."""
        if self.is_closed:
            raise RuntimeError("the client has been closed")
        timeout: httpx.Timeout = request.timeout
        key = (request.scheme, request.host, request.port)
        for attempt in (0, 1):
            conn = await self._acquire(key, timeout)
            conn.send(request, timeout.read)
            try:
                status, headers = await conn.head()
            except httpx.RemoteProtocolError:
                stale = conn.reused and not conn._got_bytes
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
                if conn.closed or transport is None or transport.is_closing() or expired:
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
