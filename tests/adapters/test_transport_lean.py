"""The lean HTTP/1.1 clients the transport uses by default, and their pure parser."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import socket
import ssl
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import trustme
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_http import Reply, ScriptedServer, sse

from toolfold import ProviderConnectionError, ProviderTimeoutError
from toolfold.adapters._http import _clients
from toolfold.adapters._http._aio_http import LeanClient
from toolfold.adapters._http._http11 import BodyDecoder, LeanRequest, ResponseParser, encode_request
from toolfold.adapters._http._sync_http import LeanSyncClient
from toolfold.adapters._http._transport import Transport

TIMEOUT = httpx.Timeout(5.0)


def parse(data: bytes, chunks: list[int] | None = None, eof: bool = False) -> ResponseParser:
    parser = ResponseParser()
    points = sorted(c % (len(data) + 1) for c in (chunks or []))
    for a, b in zip([0, *points], [*points, len(data)], strict=True):
        parser.feed(data[a:b])
    if eof:
        parser.eof()
    return parser


def body_of(parser: ResponseParser) -> bytes:
    return b"".join(parser.pieces)


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\nx-a: 2\r\n\r\n"
    b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\n"
)


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_chunked_body_parses_whatever_the_splits(cuts: list[int]) -> None:
    """A chunked body with extensions and trailers parses the same however the bytes are split."""
    parser = parse(CHUNKED, cuts)
    assert parser.head == (200, {"transfer-encoding": "chunked", "x-a": "1, 2"})
    assert body_of(parser) == b"hello world"
    assert parser.done
    assert parser.reusable


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_content_length_body_whatever_the_splits(cuts: list[int]) -> None:
    """A content-length body ends exactly at its length; extra bytes are left for the next answer."""
    data = b"HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1"
    parser = parse(data, cuts)
    assert parser.head is not None
    assert parser.head[0] == 201
    assert body_of(parser) == b"abc"
    assert parser.done
    assert not parser.reusable  # unexpected bytes after the body: do not reuse


def test_interim_1xx_answers_are_skipped() -> None:
    """A 100 Continue before the real answer is skipped."""
    parser = parse(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
    assert parser.head == (200, {"content-length": "0"})
    assert parser.done


def test_read_until_close_and_http10() -> None:
    """Without a length the body runs to the end of the connection, which is then not reused."""
    parser = parse(b"HTTP/1.0 200 OK\r\n\r\npart one, part two", eof=True)
    assert body_of(parser) == b"part one, part two"
    assert parser.done
    assert not parser.reusable


def test_no_body_statuses_and_connection_close() -> None:
    """204 has no body; connection: close forbids reuse."""
    parser = parse(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
    assert parser.done
    assert body_of(parser) == b""
    assert not parser.reusable


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"SMTP ready\r\n\r\n", "malformed status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n", "content-length"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nabc", "CRLF"),
    ],
)
def test_malformed_answers_raise_protocol_errors(data: bytes, message: str) -> None:
    """Malformed answers raise httpx.RemoteProtocolError naming the problem."""
    with pytest.raises(httpx.RemoteProtocolError, match=message):
        parse(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "without sending a response"),
        (b"HTTP/1.1 200", "middle of the headers"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", "complete message body"),
    ],
)
def test_early_end_of_connection(data: bytes, message: str) -> None:
    """A connection that ends early says where the answer stopped."""
    with pytest.raises(httpx.RemoteProtocolError, match=message):
        parse(data, eof=True)


def test_request_bytes() -> None:
    """A request is one buffer: request line, host (with a non-default port), headers, length, body."""
    request = LeanRequest("POST", "http://h:8080/v1/x?alt=sse", b"{}", {"a": "b"}, TIMEOUT)
    assert encode_request(request) == (
        b"POST /v1/x?alt=sse HTTP/1.1\r\nhost: h:8080\r\na: b\r\n"
        b"accept-encoding: gzip, deflate\r\ncontent-length: 2\r\n\r\n{}"
    )
    mine = LeanRequest("POST", "http://h/x", b"", {"accept-encoding": "identity"}, TIMEOUT)
    assert encode_request(mine).count(b"accept-encoding") == 1
    https = LeanRequest("POST", "https://api.openai.com/v1", b"", {}, TIMEOUT)
    assert b"host: api.openai.com\r\n" in encode_request(https)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_lean_clients_ask_for_compressed_bodies(http_server: ScriptedServer, mode: str) -> None:
    """The lean clients send accept-encoding: gzip, deflate (they decode both) and decode gzip."""
    http_server.add(Reply(body=gzip.compress(b'{"z": 1}'), headers={"content-encoding": "gzip"}))
    transport = Transport("p", http_server.url, retry=0)
    if mode == "sync":
        with transport:
            assert transport.post_json_sync("x", {}) == {"z": 1}
    else:

        async def run() -> Any:
            async with transport:
                return await transport.post_json("x", {})

        assert asyncio.run(run()) == {"z": 1}
    assert http_server.requests[0].headers["accept-encoding"] == "gzip, deflate"


def test_header_injection_is_refused() -> None:
    """A header value with a line break cannot smuggle another header."""
    request = LeanRequest("POST", "http://h/x", b"", {"x": "a\r\nevil: 1"}, TIMEOUT)
    with pytest.raises(httpx.LocalProtocolError):
        encode_request(request)


def test_bad_urls() -> None:
    """Unsupported schemes and missing hosts are refused before any connection."""
    with pytest.raises(httpx.UnsupportedProtocol):
        LeanRequest("POST", "ftp://h/x", b"", {}, TIMEOUT)
    with pytest.raises(httpx.InvalidURL):
        LeanRequest("POST", "http:///x", b"", {}, TIMEOUT)


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send
    ],
)
def test_body_decoders(encoding: str, compress: Any) -> None:
    """gzip, zlib deflate and raw deflate bodies decode, even split in small pieces."""
    data = b'{"text": "' + b"x" * 5000 + b'"}'
    packed = compress(data)
    decoder = BodyDecoder({"content-encoding": encoding})
    out = b"".join(decoder.decode(packed[i : i + 7]) for i in range(0, len(packed), 7))
    assert out + decoder.flush() == data


def test_unknown_encoding_is_a_decoding_error() -> None:
    """An encoding the client did not ask for is refused clearly."""
    with pytest.raises(httpx.DecodingError, match="br"):
        BodyDecoder({"content-encoding": "br"})


# --- over sockets -----------------------------------------------------------------


@pytest.fixture
def released() -> Iterator[list[threading.Event]]:
    events: list[threading.Event] = []
    yield events
    for event in events:
        event.set()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_stale_keepalive_connection_is_replaced_without_a_retry(
    http_server: ScriptedServer, mode: str
) -> None:
    """A keep-alive connection the server dropped while idle is replaced at once, no backoff."""
    http_server.add(Reply(json={"n": 1}, close_after=True), Reply(json={"n": 2}))
    sleeps: list[float] = []

    async def fake_sleep(delay: float) -> None:
        sleeps.append(delay)

    transport = Transport("p", http_server.url, sleep=fake_sleep, sleep_sync=sleeps.append, retry=0)
    if mode == "sync":
        results = [transport.post_json_sync("x", {}) for _ in range(2)]
        transport.close()
    else:

        async def run() -> list[Any]:
            async with transport:
                first = await transport.post_json("x", {})
                await asyncio.sleep(0)  # let the loop see the close, or not: both must work
                return [first, await transport.post_json("x", {})]

        results = asyncio.run(run())
    assert results == [{"n": 1}, {"n": 2}]
    assert sleeps == []
    assert http_server.connections == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_malformed_answer_over_the_wire(http_server: ScriptedServer, mode: str) -> None:
    """A server speaking something else is a ProviderConnectionError, not a crash."""
    http_server.add(Reply(raw=b"SSH-2.0-OpenSSH\r\n\r\n"))
    transport = Transport("p", http_server.url, retry=0)

    def call() -> object:
        if mode == "sync":
            return transport.post_json_sync("x", {})
        return asyncio.run(transport.post_json("x", {}))

    with pytest.raises(ProviderConnectionError, match="malformed status line"):
        call()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_http10_answer_read_to_close(http_server: ScriptedServer, mode: str) -> None:
    """An HTTP/1.0 answer without a length is read to the end of the connection."""
    http_server.add(
        Reply(raw=b'HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n{"v": 10}')
    )
    transport = Transport("p", http_server.url, retry=0)
    if mode == "sync":
        assert transport.post_json_sync("x", {}) == {"v": 10}
        transport.close()
    else:

        async def run() -> Any:
            async with transport:
                return await transport.post_json("x", {})

        assert asyncio.run(run()) == {"v": 10}


def test_async_pool_limit_and_pool_timeout(
    http_server: ScriptedServer, released: list[threading.Event]
) -> None:
    """With the pool full, a request waits for a free connection, then times out as a pool timeout."""
    stall = threading.Event()
    released.append(stall)
    http_server.add(Reply(delay_headers=stall, json={"first": True}))

    async def run() -> None:
        client = LeanClient(max_connections=1)
        transport = Transport("p", http_server.url, http_client=client, retry=0)
        first = asyncio.ensure_future(transport.post_json("x", {}))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        with pytest.raises(ProviderTimeoutError, match="pool"):
            await Transport(
                "p", http_server.url, http_client=client, retry=0, timeout=httpx_timeouts(0.1)
            ).post_json("x", {})
        stall.set()
        assert await first == {"first": True}
        await client.aclose()

    asyncio.run(run())


def test_sync_pool_limit_and_pool_timeout(
    http_server: ScriptedServer, released: list[threading.Event]
) -> None:
    """The blocking pool also bounds connections and times out waiting for one."""
    stall = threading.Event()
    released.append(stall)
    http_server.add(Reply(delay_headers=stall, json={"first": True}))
    client = LeanSyncClient(max_connections=1)
    transport = Transport("p", http_server.url, http_client=client, retry=0)
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(transport.post_json_sync("x", {})))
    worker.start()
    http_server.wait_request()
    other = Transport(
        "p", http_server.url, http_client=client, retry=0, timeout=httpx_timeouts(0.1)
    )
    with pytest.raises(ProviderTimeoutError, match="pool"):
        other.post_json_sync("x", {})
    stall.set()
    worker.join()
    assert results == [{"first": True}]
    client.close()


def httpx_timeouts(pool: float) -> Any:
    from toolfold.adapters._http._retry import Timeouts

    return Timeouts(pool=pool)


def test_proxy_variables_switch_to_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a proxy configured the owned clients are httpx's, which speak proxy protocols."""
    timeout = httpx.Timeout(1.0)
    assert isinstance(_clients.default_sync_client(timeout), LeanSyncClient)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.local:3128")
    client = _clients.default_sync_client(timeout)
    assert isinstance(client, httpx.Client)
    client.close()

    async def make_async() -> Any:
        made = _clients.default_async_client(timeout)
        await made.aclose()
        return made

    assert isinstance(asyncio.run(make_async()), httpx.AsyncClient)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_reused_connection_dropped_without_answer_is_resent_once(
    http_server: ScriptedServer, mode: str
) -> None:
    """A reused connection closed before any answer byte is resent once on a new one, no backoff."""
    http_server.add(Reply(json={"n": 1}), Reply(reset=True), Reply(json={"n": 2}))
    transport = Transport("p", http_server.url, retry=0)
    if mode == "sync":
        results = [transport.post_json_sync("x", {}) for _ in range(2)]
        transport.close()
    else:

        async def run() -> list[Any]:
            async with transport:
                return [await transport.post_json("x", {}) for _ in range(2)]

        results = asyncio.run(run())
    assert results == [{"n": 1}, {"n": 2}]
    assert len(http_server.requests) == 3
    assert http_server.connections == 2


@pytest.fixture
def tls() -> Iterator[tuple[ScriptedServer, ssl.SSLContext]]:
    """A scripted HTTPS server on 127.0.0.1 with a certificate from a test CA, and a client
    context that trusts that CA."""
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    authority.configure_trust(client_context)
    server = ScriptedServer(ssl_context=server_context)
    try:
        yield server, client_context
    finally:
        server.close()


def test_https_sync(tls: tuple[ScriptedServer, ssl.SSLContext]) -> None:
    """The blocking client speaks TLS: JSON and a stream over one kept-alive connection."""
    server, context = tls
    server.add(Reply(json={"secure": True}), Reply(chunks=sse({"i": 1}, "[DONE]")))
    with LeanSyncClient(ssl_context=context) as client:
        transport = Transport("p", server.url, "sk-tls", http_client=client)
        assert transport.post_json_sync("x", {}) == {"secure": True}
        assert [e.data for e in transport.stream_sync("x", {})] == ['{"i": 1}', "[DONE]"]
    assert server.connections == 1
    assert server.requests[0].headers["authorization"] == "Bearer sk-tls"


def test_https_async(tls: tuple[ScriptedServer, ssl.SSLContext]) -> None:
    """The async client speaks TLS: JSON and a stream over one kept-alive connection."""
    server, context = tls
    server.add(Reply(json={"secure": True}), Reply(chunks=sse({"i": 1}, "[DONE]")))

    async def run() -> list[Any]:
        async with LeanClient(ssl_context=context) as client:
            transport = Transport("p", server.url, http_client=client)
            first = await transport.post_json("x", {})
            events = [e.data async for e in transport.stream("x", {})]
            return [first, events]

    assert asyncio.run(run()) == [{"secure": True}, ['{"i": 1}', "[DONE]"]]
    assert server.connections == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_untrusted_certificate_is_refused(
    tls: tuple[ScriptedServer, ssl.SSLContext], mode: str
) -> None:
    """The default TLS settings refuse a certificate from an unknown CA: a ProviderConnectionError."""
    server, _ = tls
    transport = Transport("p", server.url, retry=0)

    def call() -> object:
        if mode == "sync":
            return transport.post_json_sync("x", {})
        return asyncio.run(transport.post_json("x", {}))

    with pytest.raises(ProviderConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        call()
    transport.close()


class _FakeTransport(asyncio.Transport):
    """Records what the connection does to its transport."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.aborted

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


HEAD_AND_FIRST_CHUNK = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n"


@pytest.mark.parametrize("arrives", [True, False])
def test_async_abandoned_stream_is_drained_to_keep_the_connection(
    monkeypatch: pytest.MonkeyPatch, arrives: bool
) -> None:
    """A caller that stops reading early (at [DONE]) leaves the body to finish in the background:
    the connection goes back to the pool when it ends, or is dropped when it does not come."""
    from toolfold.adapters._http import _aio_http

    monkeypatch.setattr(_aio_http, "_DRAIN_SECONDS", 0.0)

    async def run() -> tuple[bool, bool]:
        client = LeanClient()
        conn = _aio_http._Connection(client, ("http", "h", 80))
        transport = _FakeTransport()
        conn.connection_made(transport)
        client._counted.add(conn)
        conn.send(LeanRequest("POST", "http://h/x", b"{}", {}, TIMEOUT), None)
        conn.data_received(HEAD_AND_FIRST_CHUNK)
        response = _aio_http.LeanResponse(conn, *await conn.head())
        assert await conn.next_piece() == b"hello"
        await response.aclose()
        assert not transport.aborted
        if arrives:
            conn.data_received(b"0\r\n\r\n")
        await asyncio.sleep(0)  # the (zero) drain limit fires
        await asyncio.sleep(0)
        return conn in client._idle.get(("http", "h", 80), []), transport.aborted

    pooled, aborted = asyncio.run(run())
    assert pooled is arrives
    assert aborted is not arrives


@pytest.mark.parametrize("arrived", [True, False])
def test_sync_abandoned_stream_keeps_the_connection_if_the_end_is_there(arrived: bool) -> None:
    """The blocking client reads what already arrived of an abandoned body, without waiting."""
    import socket

    from toolfold.adapters._http import _sync_http

    ours, theirs = socket.socketpair()
    with theirs:
        client = LeanSyncClient()
        conn = _sync_http._SyncConnection(client, ("http", "h", 80), ours)
        client._open.add(conn)
        conn.send(LeanRequest("POST", "http://h/x", b"{}", {}, TIMEOUT), TIMEOUT)
        theirs.sendall(HEAD_AND_FIRST_CHUNK)
        response = _sync_http.LeanSyncResponse(conn, *conn.head())
        assert conn.next_piece() == b"hello"
        if arrived:
            theirs.sendall(b"0\r\n\r\n")
        response.close()
        assert (conn in client._idle.get(("http", "h", 80), [])) is arrived
        assert conn.closed is not arrived
        client.close()


class _StrayAfterAnswer:
    """A keep-alive server that, after its first answer, sends a stray 408 on the idle connection."""

    STRAY = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        b'content-length: 28\r\n\r\n{"error":{"message":"idle"}}'
    )

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.first_read = threading.Event()  # the test has the first answer
        self.stray_sent = threading.Event()
        self.connections = 0
        self.answered = 0
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            self.sockets.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        buffer = b""
        with contextlib.suppress(OSError):
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                while len(buffer) < length:
                    buffer += sock.recv(65536)
                buffer = buffer[length:]
                self.answered += 1
                body = b'{"n": %d}' % self.answered
                sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
                if self.answered == 1:
                    self.first_read.wait(SAFETY)
                    sock.sendall(self.STRAY)
                    self.stray_sent.set()

    def close(self) -> None:
        self.first_read.set()
        self.listener.close()
        for sock in self.sockets:
            sock.close()


SAFETY = 10.0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_stray_bytes_on_an_idle_connection_are_never_an_answer(mode: str) -> None:
    """A 408 a server sends on an idle keep-alive connection is not taken as the next answer."""
    server = _StrayAfterAnswer()
    transport = Transport("p", server.url, retry=0)
    try:
        if mode == "sync":
            first = transport.post_json_sync("x", {})
            server.first_read.set()
            assert server.stray_sent.wait(SAFETY)
            results = [first, transport.post_json_sync("x", {})]
            transport.close()
        else:

            async def run() -> list[Any]:
                async with transport:
                    first = await transport.post_json("x", {})
                    server.first_read.set()
                    assert server.stray_sent.wait(SAFETY)
                    (conn,) = transport._async_client._idle[("http", "127.0.0.1", server.port)]
                    for _ in range(100_000):  # until the loop has read the stray bytes
                        if conn.closed or conn.parser.buffer:
                            break
                        await asyncio.sleep(0)
                    return [first, await transport.post_json("x", {})]

            results = asyncio.run(run())
    finally:
        server.close()
    assert results == [{"n": 1}, {"n": 2}]
    assert server.connections == 2
