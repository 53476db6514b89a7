"""A scriptable HTTP/1.1 server on 127.0.0.1 for adapter tests (fixture: ``http_server``).

Tests queue `Reply` values (or a handler function) and the server answers the
requests in order, over real sockets, with keep-alive. A reply can stream a
chunked body whose pieces wait on `threading.Event`s the test controls, cut the
connection in the middle of the body, reset the connection before answering,
or stall until the test releases it. Nothing here waits on wall-clock time:
every pause is an event the test sets (with a generous safety limit so a broken
test fails instead of hanging).

    def test_x(http_server):
        http_server.add(Reply(status=429, headers={"retry-after": "0"}))
        http_server.add(Reply(json={"ok": True}))
        ... Transport("openai", http_server.url, ...) ...
        assert len(http_server.requests) == 2
"""

from __future__ import annotations

import contextlib
import json as _json
import socket
import ssl
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

SAFETY_WAIT = 10.0  # seconds a paused reply waits for its event before giving up
# Seconds `wait_request` waits for a request before failing: a guard against a hang only.
# The request may need much work first (a client's first call imports and sets up
# its library, on a thread of its own), and a loaded machine (CI runs 8 suites on 2
# cores) once took more than 10 s over it (importing aiohttp: 0.3 s of CPU, 6.5 s of wall
# clock on this loaded machine).
REQUEST_WAIT = 60.0


@attrs.frozen
class Recorded:
    """A request the server received."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    head: bytes = attrs.field(default=b"", repr=False)  # the request line and headers as sent

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.body)


class Cut:
    """In `Reply.chunks`: close the socket here, leaving the chunked body unfinished."""


@attrs.frozen
class Reply:
    """One scripted answer.

    Attributes:
        status: The HTTP status.
        headers: Response headers (content-length / transfer-encoding are added).
        body: A whole body, sent with content-length (ignored when ``chunks`` is set).
        json: A body to send as JSON (sets content-type).
        chunks: A streamed body: bytes are sent as HTTP chunks; a
            `threading.Event` pauses until it is set; `Cut()` closes the
            socket without finishing the body.
        reset: Close the connection without answering (connection reset).
        stall: Wait for this event before answering (read timeout tests); the
            connection is then closed without an answer.
        delay_headers: Wait for this event before sending the status line.
        close_after: Close the connection after this answer without saying so
            (no ``connection: close``), as a server dropping an idle
            keep-alive connection does.
        raw: Send these bytes as the whole answer, verbatim (malformed
            answers, HTTP/1.0, 1xx...); the connection is closed after.
        then: After ``raw``, more bytes sent verbatim; a `threading.Event`
            pauses until it is set (an answer that breaks after a point).
        drip: Send ``raw`` (or, without it, a 200 head and an endless
            chunked body) one byte every this many seconds, until the
            server closes: a peer that is slow but never silent.
    """

    status: int = 200
    headers: Mapping[str, str] = attrs.field(factory=dict)
    body: bytes = b""
    json: Any = None
    chunks: Sequence[bytes | threading.Event | Cut] | None = None
    reset: bool = False
    stall: threading.Event | None = None
    delay_headers: threading.Event | None = None
    close_after: bool = False
    raw: bytes | None = None
    then: Sequence[bytes | threading.Event] = ()
    drip: float | None = None


def gate(released: list[threading.Event]) -> threading.Event:
    """A new event for a reply to wait on, added to ``released`` (the fixture sets them all at teardown)."""
    event = threading.Event()
    released.append(event)
    return event


def sse(*payloads: Any, event: str | None = None) -> list[bytes]:
    """SSE chunks: one ``data:`` event per payload (dicts become JSON, strings go as is)."""
    out = []
    for payload in payloads:
        data = payload if isinstance(payload, str) else _json.dumps(payload)
        head = f"event: {event}\n" if event else ""
        out.append(f"{head}data: {data}\n\n".encode())
    return out


Handler = Callable[[Recorded], Reply]


class ScriptedServer:
    """The server behind the `http_server` fixture (see the module docstring)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._ssl = ssl_context
        scheme = "https" if ssl_context else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.requests: list[Recorded] = []
        self.connections = 0
        self.handler: Handler | None = None
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.received = threading.Semaphore(0)  # released once per request received
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    def add(self, *replies: Reply) -> None:
        """Queue replies, answered in order."""
        with self._lock:
            self._replies.extend(replies)

    def wait_request(self, timeout: float = REQUEST_WAIT) -> Recorded:
        """Block until one more request has arrived; return the latest request."""
        if not self.received.acquire(timeout=timeout):
            raise AssertionError("the server received no request")
        return self.requests[-1]

    def close(self) -> None:
        """Stop serving and release every paused reply."""
        self._stopping.set()
        # Closing alone does not wake a thread blocked in accept() on Linux.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=SAFETY_WAIT)

    # --- serving -------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                self._sockets.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, sock: socket.socket) -> None:
        buffer = b""
        try:
            if self._ssl is not None:
                sock = self._ssl.wrap_socket(sock, server_side=True)
            while not self._stopping.is_set():
                request, buffer = _read_request(sock, buffer)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                    reply = self._next_reply(request)
                self.received.release()
                if not self._answer(sock, reply):
                    return
        except OSError:
            return
        finally:
            sock.close()

    def _next_reply(self, request: Recorded) -> Reply:
        if self._replies:
            return self._replies.popleft()
        if self.handler is not None:
            return self.handler(request)
        return Reply(status=599, json={"error": {"message": "no reply scripted"}})

    def _wait(self, event: threading.Event) -> None:
        waited = 0.0
        while not event.wait(0.05):
            waited += 0.05
            if self._stopping.is_set() or waited > SAFETY_WAIT:
                raise OSError("released by server shutdown")

    def _drip(self, sock: socket.socket, reply: Reply) -> None:
        assert reply.drip is not None
        head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        data = reply.raw if reply.raw is not None else head
        sent = 0
        while not self._stopping.wait(reply.drip):
            if sent < len(data):
                sock.sendall(data[sent : sent + 1])
                sent += 1
            else:
                sock.sendall(b"1\r\nx\r\n")  # one more byte of an endless body

    def _answer(self, sock: socket.socket, reply: Reply) -> bool:
        """Send the reply; return whether the connection stays open."""
        if reply.reset:
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            return False
        if reply.stall is not None:
            self._wait(reply.stall)
            return False
        if reply.delay_headers is not None:
            self._wait(reply.delay_headers)
        if reply.drip is not None:
            self._drip(sock, reply)
            return False
        if reply.raw is not None:
            sock.sendall(reply.raw)
            for piece in reply.then:
                if isinstance(piece, threading.Event):
                    self._wait(piece)
                else:
                    sock.sendall(piece)
            return False
        headers = {k.lower(): v for k, v in reply.headers.items()}
        body = reply.body
        if reply.json is not None:
            body = _json.dumps(reply.json).encode()
            headers.setdefault("content-type", "application/json")
        if reply.chunks is None:
            headers["content-length"] = str(len(body))
        else:
            headers["transfer-encoding"] = "chunked"
            headers.setdefault("content-type", "text/event-stream")
        head = f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        if reply.chunks is None:
            sock.sendall(head.encode() + body)
            return headers.get("connection") != "close" and not reply.close_after
        sock.sendall(head.encode())
        for piece in reply.chunks:
            if isinstance(piece, Cut):
                return False
            if isinstance(piece, threading.Event):
                self._wait(piece)
                continue
            if piece:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        sock.sendall(b"0\r\n\r\n")
        return headers.get("connection") != "close" and not reply.close_after


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def _read_request(sock: socket.socket, buffer: bytes) -> tuple[Recorded | None, bytes]:
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        if not data:
            return None, b""
        buffer += data
    head, _, buffer = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(buffer) < length:
        data = sock.recv(65536)
        if not data:
            return None, b""
        buffer += data
    body, buffer = buffer[:length], buffer[length:]
    return Recorded(method, path, headers, body, head), buffer
