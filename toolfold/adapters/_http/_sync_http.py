"""A lean blocking HTTP/1.1 client: the transport's default sync client.

The blocking twin of `_aio_http`: sockets, a thread-safe keep-alive pool, and
the pure `ResponseParser`. One request costs one ``sendall`` and usually one
``recv``, which made a sequential tool loop faster than with ``httpx.Client``
(see ``bench/bench_http.py``). It has the part of ``httpx.Client``'s API the
transport uses and raises httpx's exception classes. No proxy support: the
transport uses httpx when proxy variables are set.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Iterator

import httpx

from toolfold.adapters._http._http11 import (
    BodyDecoder,
    LeanRequest,
    PoolSettings,
    ResponseParser,
    encode_request,
)

__all__ = ["LeanSyncClient", "LeanSyncResponse"]


class LeanSyncResponse:
    """A response; its body is read in full (``send(stream=False)``) or streamed."""

    __slots__ = ("_conn", "_decoder", "content", "headers", "is_closed", "status_code")

    def __init__(self, conn: _SyncConnection, status: int, headers: dict[str, str]) -> None:
        self._conn: _SyncConnection | None = conn
        self.status_code = status
        self.headers = headers
        self.content = b""
        self.is_closed = False
        self._decoder = BodyDecoder(headers)

    def read(self) -> bytes:
        """Read the rest of the body (again: the body read before)."""
        if self._conn is None:
            return self.content
        self.content = b"".join(self.iter_bytes())
        return self.content

    def iter_bytes(self) -> Iterator[bytes]:
        """The (decoded) body, piece by piece, as it arrives."""
        conn = self._conn
        if conn is None:
            return
        decoder = self._decoder if self._decoder.active else None
        try:
            while True:
                piece = conn.next_piece()
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
            self.close()

    def close(self) -> None:
        """Give the connection back (or drop it if the body was not read to its end)."""
        conn, self._conn = self._conn, None
        self.is_closed = True
        if conn is not None:
            conn.release()


class _SyncConnection:
    """One HTTP/1.1 connection over a blocking socket."""

    def __init__(self, pool: LeanSyncClient, key: tuple[str, str, int], sock: socket.socket):
        self.pool = pool
        self.key = key
        self.sock = sock
        self.parser = ResponseParser()
        self.reused = False
        self.got_bytes = False
        self.closed = False
        self.idle_since = 0.0

    def send(self, request: LeanRequest, timeout: httpx.Timeout) -> None:
        self.parser.reset()
        self.got_bytes = False
        self.sock.settimeout(timeout.write)
        try:
            self.sock.sendall(encode_request(request))
        except TimeoutError as exc:
            raise httpx.WriteTimeout(f"sending the request timed out: {exc}") from exc
        except OSError as exc:
            raise httpx.WriteError(f"sending the request failed: {exc}") from exc
        self.sock.settimeout(timeout.read)

    def head(self) -> tuple[int, dict[str, str]]:
        while self.parser.head is None:
            self._receive()
        return self.parser.head

    def next_piece(self) -> bytes | None:
        parser = self.parser
        while not parser.pieces:
            if parser.done:
                return None
            self._receive()
        return parser.pieces.popleft()

    def _receive(self) -> None:
        try:
            data = self.sock.recv(65536)
        except TimeoutError as exc:
            raise httpx.ReadTimeout("timed out waiting for the server") from exc
        except OSError as exc:
            raise httpx.ReadError(f"reading the response failed: {exc}") from exc
        if data:
            self.got_bytes = True
            self.parser.feed(data)
        else:
            self.parser.eof()

    def alive(self) -> bool:
        """Whether an idle connection is still open (the server may have closed it)."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        if not readable:
            return True
        # Readable while idle: either the server closed it, or TLS housekeeping
        # (a TLS 1.3 session ticket) that carries no data.
        self.sock.setblocking(False)
        try:
            self.sock.recv(1)
        except (ssl.SSLWantReadError, BlockingIOError):
            return True
        except OSError:
            return False
        finally:
            if not self.closed:
                self.sock.setblocking(True)
        return False

    def release(self) -> None:
        if not self.parser.reusable and not self.closed:
            self._drain()
        if self.parser.reusable and not self.closed:
            self.pool._give_back(self)
        else:
            self.close()
            self.pool._forget(self)

    def _drain(self) -> None:
        # The caller stopped early (a codec breaks at [DONE]): the rest of the
        # body (often just the chunked terminator) may already be here. Read
        # what has arrived, without waiting, to keep the connection.
        parser = self.parser
        if parser.head is None or parser.done or not parser.keep_alive:
            return
        parser.pieces.clear()
        self.sock.setblocking(False)
        if self._read_available():
            self.sock.setblocking(True)
        else:
            self.close()

    def _read_available(self) -> bool:
        parser = self.parser
        try:
            for _ in range(16):
                data = self.sock.recv(65536)
                if not data:
                    return False
                parser.feed(data)
                parser.pieces.clear()
                if parser.done:
                    return True
        except (OSError, httpx.RemoteProtocolError):
            pass  # nothing more has arrived yet (or the connection broke)
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool._sockets.discard(self.sock)
            self.sock.close()


class LeanSyncClient(PoolSettings):
    """A thread-safe keep-alive pool with the slice of ``httpx.Client``'s API the transport uses.

    Args:
        timeout: Default timeouts.
        max_connections: Open connections allowed at once, over all hosts.
        keepalive_expiry: Seconds an idle connection is kept for reuse.
        ssl_context: TLS settings; by default httpx's (certifi, ``SSL_CERT_FILE``).
    """

    def _setup(self) -> None:
        self._idle: dict[tuple[str, str, int], list[_SyncConnection]] = {}
        self._open: set[object] = set()  # connections, and slots being opened
        # Sockets still open, closed quietly if the client is dropped unclosed
        # (a model made from a string is rarely closed by its user).
        self._sockets: set[socket.socket] = set()
        weakref.finalize(self, _close_sockets, self._sockets)
        self._lock = threading.Condition()

    def send(self, request: LeanRequest, *, stream: bool = False) -> LeanSyncResponse:
        """Send ``request``; with ``stream=False`` the body is read before returning."""
        if self.is_closed:
            raise RuntimeError("the client has been closed")
        for attempt in (0, 1):
            conn = self._acquire(request)
            try:
                conn.send(request, request.timeout)
                status, headers = conn.head()
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                stale = conn.reused and not conn.got_bytes
                conn.close()
                self._forget(conn)
                # A kept-alive connection the server closed while idle: the
                # request never reached it, so one immediate resend is safe.
                if stale and attempt == 0:
                    continue
                raise
            except BaseException:
                conn.close()
                self._forget(conn)
                raise
            response = LeanSyncResponse(conn, status, headers)
            if not stream:
                try:
                    response.read()
                except BaseException:
                    response.close()
                    raise
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            self.is_closed = True
            conns = [c for c in self._open if isinstance(c, _SyncConnection)]
            self._open.clear()
            self._idle.clear()
            self._lock.notify_all()
        for conn in conns:
            conn.close()

    def __enter__(self) -> LeanSyncClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the pool ----------------------------------------------------------------

    def _acquire(self, request: LeanRequest) -> _SyncConnection:
        key = request.key
        deadline = None if request.timeout.pool is None else time.monotonic() + request.timeout.pool
        with self._lock:
            while True:
                idle = self._idle.get(key)
                while idle:
                    conn = idle.pop()
                    expired = time.monotonic() - conn.idle_since > self.keepalive_expiry
                    if expired or not conn.alive():
                        conn.close()
                        self._open.discard(conn)
                        continue
                    conn.reused = True
                    return conn
                if len(self._open) < self.max_connections:
                    placeholder = _Slot()
                    self._open.add(placeholder)
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise httpx.PoolTimeout("no connection became free within the pool timeout")
                self._lock.wait(remaining)
        try:
            conn = _SyncConnection(self, key, self._connect(request))
        except BaseException:
            with self._lock:
                self._open.discard(placeholder)
                self._lock.notify()
            raise
        with self._lock:
            self._open.discard(placeholder)
            self._open.add(conn)
            self._sockets.add(conn.sock)
        return conn

    def _connect(self, request: LeanRequest) -> socket.socket:
        host, port = request.host, request.port
        try:
            sock = socket.create_connection((host, port), timeout=request.timeout.connect)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if request.scheme != "https":
            return sock
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context()
            self._ssl.set_alpn_protocols(["http/1.1"])
        try:
            return self._ssl.wrap_socket(sock, server_hostname=host)
        except TimeoutError as exc:
            sock.close()
            raise httpx.ConnectTimeout(f"the TLS handshake with {host}:{port} timed out") from exc
        except OSError as exc:
            sock.close()
            raise httpx.ConnectError(f"TLS with {host}:{port} failed: {exc}") from exc

    def _give_back(self, conn: _SyncConnection) -> None:
        with self._lock:
            if self.is_closed:
                conn.close()
                return
            conn.idle_since = time.monotonic()
            self._idle.setdefault(conn.key, []).append(conn)
            self._lock.notify()

    def _forget(self, conn: _SyncConnection) -> None:
        with self._lock:
            self._open.discard(conn)
            self._lock.notify()


class _Slot:
    """Holds a place in the pool while a connection is being opened."""


def _close_sockets(sockets: set[socket.socket]) -> None:
    for sock in list(sockets):
        sock.close()
    sockets.clear()
