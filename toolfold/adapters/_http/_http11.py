"""The HTTP/1.1 client protocol as pure code: request bytes out, response bytes in.

No sockets and no event loop here (as in h11): `encode_request` makes the bytes
of a request, `ResponseParser` is fed whatever the network delivers and exposes
the status, the headers and the body pieces as they complete. The async client
(`_aio_http`) and the blocking one (`_sync_http`) drive it.

Covers what provider APIs use: content-length, chunked (extensions and
trailers skipped) and read-until-close bodies, 1xx interim answers, 204/304
without a body, keep-alive rules, gzip and deflate. Errors are httpx's own
classes so they map like httpx's.
"""

from __future__ import annotations

import ssl
import zlib
from collections import deque
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

MAX_HEAD = 64 * 1024


class LeanRequest:
    """A request ready to send: what the lean clients' ``build_request`` returns."""

    __slots__ = ("content", "headers", "host", "method", "port", "scheme", "target", "timeout")

    def __init__(
        self,
        method: str,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        timeout: httpx.Timeout,
    ) -> None:
        self.method = method
        self.content = content
        self.headers = headers
        self.timeout = timeout
        known = _URLS.get(url)
        if known is None:
            known = _split(url)
            if len(_URLS) < 1024:  # bounded: URLs with ever-changing queries stay out
                _URLS[url] = known
        self.scheme, self.host, self.port, self.target = known

    @property
    def key(self) -> tuple[str, str, int]:
        """The pool key: scheme, host, port."""
        return (self.scheme, self.host, self.port)


# A transport posts to a handful of URLs: parse each once.
_URLS: dict[str, tuple[str, str, int, str]] = {}


def _split(url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise httpx.UnsupportedProtocol(f"unsupported URL scheme {parts.scheme!r} in {url!r}")
    if not parts.hostname:
        raise httpx.InvalidURL(f"no host in URL {url!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise httpx.InvalidURL(f"invalid port in URL {url!r}") from exc
    port = port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port, target


class PoolSettings:
    """What the sync and async lean clients share: their settings and `build_request`.

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
        self.is_closed = False
        self._setup()

    def _setup(self) -> None:
        """The client's own state: its pool (subclasses)."""

    def build_request(
        self,
        method: str,
        url: str,
        *,
        content: bytes = b"",
        headers: Mapping[str, str] | None = None,
        timeout: Any = None,
    ) -> LeanRequest:
        """A request for ``send``; ``timeout`` is an ``httpx.Timeout`` or the client default."""
        chosen = timeout if isinstance(timeout, httpx.Timeout) else self.timeout
        return LeanRequest(method, url, content, headers or {}, chosen)


def encode_request(request: LeanRequest) -> bytes:
    """The bytes of ``request``: one buffer, so it leaves in one write."""
    default_port = 443 if request.scheme == "https" else 80
    host = request.host if request.port == default_port else f"{request.host}:{request.port}"
    if ":" in request.host and not request.host.startswith("["):
        host = f"[{request.host}]" + ("" if request.port == default_port else f":{request.port}")
    lines = [f"{request.method} {request.target} HTTP/1.1\r\nhost: {host}\r\n"]
    for name, value in request.headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise httpx.LocalProtocolError(f"header {name!r} contains a line break")
        lines.append(f"{name}: {value}\r\n")
    if "accept-encoding" not in request.headers:
        # What BodyDecoder decodes; without it servers send plain bodies.
        lines.append("accept-encoding: gzip, deflate\r\n")
    lines.append(f"content-length: {len(request.content)}\r\n\r\n")
    return "".join(lines).encode("latin-1") + request.content


class ResponseParser:
    """Parses one response at a time from the bytes fed to it.

    After `feed`, ``head`` is ``(status, headers)`` once the headers are in,
    ``pieces`` holds body pieces not yet taken, and ``done`` is True when the
    body ended. Raises ``httpx.RemoteProtocolError`` on malformed input.
    """

    __slots__ = ("_mode", "_remaining", "buffer", "done", "head", "keep_alive", "pieces")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.pieces: deque[bytes] = deque()
        self.reset()

    def reset(self) -> None:
        """Expect the next response (bytes already buffered are kept)."""
        self.head: tuple[int, dict[str, str]] | None = None
        self.pieces.clear()
        self.done = False
        self.keep_alive = True
        self._mode = ""  # length, chunked, close
        self._remaining = 0

    def feed(self, data: bytes) -> None:
        """Take bytes from the network."""
        self.buffer += data
        if self.head is None:
            self._parse_head()
        if self.head is not None and not self.done:
            self._parse_body()

    def eof(self) -> None:
        """The server closed the connection: end a read-until-close body, else complain."""
        if self.done:
            return
        if self.head is not None and self._mode == "close":
            self.done = True
            return
        if self.head is None:
            if self.buffer:
                raise httpx.RemoteProtocolError("server disconnected in the middle of the headers")
            raise httpx.RemoteProtocolError("server disconnected without sending a response")
        raise httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body"
        )

    @property
    def reusable(self) -> bool:
        """Whether the connection can carry another request after this response."""
        return self.done and self.keep_alive and not self.buffer

    def _parse_head(self) -> None:
        while self.head is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD:
                    raise httpx.RemoteProtocolError("response headers are too large")
                return
            text = bytes(self.buffer[:end]).decode("latin-1")
            del self.buffer[: end + 4]
            self._start(text)

    def _start(self, text: str) -> None:
        lines = text.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:100]!r}")
        status = int(parts[1])
        if 100 <= status < 200:
            return  # an interim answer: the real one follows
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise httpx.RemoteProtocolError(f"malformed header line {line[:100]!r}")
            name = name.strip().lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.head = (status, headers)
        self.keep_alive = (
            "close" not in headers.get("connection", "").lower() and parts[0] != "HTTP/1.0"
        )
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
            self._mode, self.keep_alive = "close", False

    def _parse_body(self) -> None:
        buffer = self.buffer
        if self._mode == "length":
            if buffer and self._remaining:
                take = min(len(buffer), self._remaining)
                self.pieces.append(bytes(buffer[:take]))
                del buffer[:take]
                self._remaining -= take
            if self._remaining == 0:
                self.done = True
        elif self._mode == "close":
            if buffer:
                self.pieces.append(bytes(buffer))
                buffer.clear()
        else:
            self._parse_chunks()

    def _parse_chunks(self) -> None:
        buffer = self.buffer
        while True:
            if self._remaining == -1:  # a chunk-size line
                end = buffer.find(b"\r\n")
                if end < 0:
                    return
                size_text = bytes(buffer[:end]).split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise httpx.RemoteProtocolError(f"malformed chunk size {size_text!r}") from None
                del buffer[: end + 2]
                self._remaining = size if size else -2
            if self._remaining == -2:  # trailers, up to an empty line
                end = buffer.find(b"\r\n")
                if end < 0:
                    return
                line = bytes(buffer[:end])
                del buffer[: end + 2]
                if not line:
                    self.done = True
                    return
                continue
            if self._remaining > 0:
                if not buffer:
                    return
                take = min(len(buffer), self._remaining)
                self.pieces.append(bytes(buffer[:take]))
                del buffer[:take]
                self._remaining -= take
                if self._remaining:
                    return
            if len(buffer) < 2:  # the CRLF after a chunk's data
                return
            if buffer[:2] != b"\r\n":
                raise httpx.RemoteProtocolError("missing CRLF after a chunk")
            del buffer[:2]
            self._remaining = -1


class BodyDecoder:
    """Undoes ``content-encoding`` (gzip, deflate) piece by piece; identity passes through."""

    __slots__ = ("_obj", "_raw_deflate")

    def __init__(self, headers: Mapping[str, str]) -> None:
        encoding = headers.get("content-encoding", "").strip().lower()
        self._raw_deflate = False
        self._obj: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._obj = zlib.decompressobj()
            self._raw_deflate = True  # may turn out to be raw deflate (no zlib header)
        elif encoding not in ("", "identity"):
            raise httpx.DecodingError(f"unsupported content-encoding {encoding!r}")

    @property
    def active(self) -> bool:
        """Whether the body is compressed."""
        return self._obj is not None

    def decode(self, piece: bytes) -> bytes:
        """Decompress one piece."""
        try:
            out = bytes(self._obj.decompress(piece))
        except zlib.error as exc:
            if self._raw_deflate:
                self._raw_deflate = False
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.decode(piece)
            raise httpx.DecodingError(f"cannot decode the compressed body: {exc}") from exc
        self._raw_deflate = False
        return out

    def flush(self) -> bytes:
        """What the decompressor still holds at the end of the body."""
        return bytes(self._obj.flush()) if self._obj is not None else b""
