"""The aiohttp session the backend makes: its read timeout, kept by one timer per connection (`_aiohttp_owned`).

The timeout must fire exactly where aiohttp's own would: a peer silent for
longer than ``read`` (before the head, after it, mid-body) times out; a peer
slow but never silent that long does not, however long the whole answer takes;
``total`` still bounds the call (tests/adapters/test_transport_limits.py).
"""

from __future__ import annotations

import asyncio
import gzip
import threading
from typing import Any

import aiohttp
import pytest
from aiohttp.client_proto import ResponseHandler
from scripted_http import Reply, ScriptedServer, gate

from toolfold import ProviderError, ProviderTimeoutError
from toolfold.adapters import HttpLimits, Timeouts, Transport
from toolfold.adapters._http._aiohttp_owned import WatchedReads, watch_reads
from toolfold.adapters._http._sender import Sender

KEY = "sk-reads-0123456789"


def post(server: ScriptedServer, read: float, *, stream: bool = False) -> Any:
    """One call through a transport on the aiohttp backend with read timeout ``read``."""

    async def run() -> Any:
        transport = Transport(
            "openai", f"{server.url}/v1", KEY, http="aiohttp", retry=0, timeout=Timeouts(read=read)
        )
        try:
            if stream:
                return [e async for e in transport.stream("chat/completions", {"m": 1})]
            return await transport.post_json("chat/completions", {"m": 1})
        finally:
            await transport.aclose()

    return asyncio.run(run())


def test_the_owned_session_opens_connections_with_one_read_timer() -> None:
    """The session the aiohttp backend makes opens its connections with WatchedReads."""

    async def run() -> Any:
        transport = Transport("openai", "http://127.0.0.1:9/v1", KEY, http="aiohttp")
        try:
            backend = await transport._sender.clients.get_async()
            return backend.session.connector._factory()
        finally:
            await transport.aclose()

    assert type(asyncio.run(run())) is WatchedReads


@pytest.mark.parametrize("stream", [False, True], ids=["post", "stream"])
def test_a_head_then_silence_times_out(
    http_server: ScriptedServer, released: list[threading.Event], stream: bool
) -> None:
    """A server that sends the head and then nothing is a read timeout, posted or streamed."""
    http_server.add(Reply(chunks=[gate(released)]))
    with pytest.raises(ProviderTimeoutError, match="timed out"):
        post(http_server, 0.3, stream=stream)


def test_silence_before_the_head_times_out(
    http_server: ScriptedServer, released: list[threading.Event]
) -> None:
    """A server that reads the request and never answers is a read timeout."""
    http_server.add(Reply(stall=gate(released)))
    with pytest.raises(ProviderTimeoutError, match="timed out"):
        post(http_server, 0.3)


def test_a_slow_steady_answer_longer_than_the_read_timeout_arrives(
    http_server: ScriptedServer,
) -> None:
    """Head and body dripped a byte every 30 ms, about 4 s in all, pass a 3 s read
    timeout (each byte restarts it; a 100-fold margin per byte, so a loaded machine that
    starves the server for a moment does not fail it, and a slower drip only lasts longer)."""
    body = b'{"answer": "' + b"x" * 60 + b'"}'
    head = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: %d\r\n\r\n" % len(body)
    assert (len(head) + len(body)) * 0.03 > 3.9  # the whole answer outlasts the timeout
    http_server.add(Reply(drip=0.03, raw=head + body))
    assert post(http_server, 3.0) == {"answer": "x" * 60}


def test_a_shorter_read_timeout_on_a_reused_connection_fires_at_its_own_deadline(
    http_server: ScriptedServer, released: list[threading.Event]
) -> None:
    """After a call with a 60 s read timeout, the same connection's 0.3 s one fires (not at 60 s)."""
    http_server.add(Reply(json={"ok": 1}), Reply(stall=gate(released)))

    async def run() -> None:
        connector = aiohttp.TCPConnector(limit=1)
        watch_reads(connector)
        async with aiohttp.ClientSession(connector=connector) as session:
            url = f"{http_server.url}/v1/x"
            long = aiohttp.ClientTimeout(total=None, sock_read=60)
            async with session.post(url, data=b"{}", timeout=long) as response:
                assert await response.json() == {"ok": 1}
            short = aiohttp.ClientTimeout(total=None, sock_read=0.3)
            # The guard's TimeoutError is not aiohttp's: it would mean the 60 s timer ran.
            with pytest.raises(aiohttp.ServerTimeoutError):
                await asyncio.wait_for(session.post(url, data=b"{}", timeout=short), 5)

    asyncio.run(run())
    assert http_server.connections == 1


def test_an_aiohttp_without_the_watchers_hooks_keeps_its_own_timers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With one of aiohttp's internals renamed, watch_reads leaves the connector's factory alone."""

    from toolfold.adapters._http import _aiohttp_owned

    assert _aiohttp_owned.HOOKS_PRESENT  # this aiohttp has them all
    monkeypatch.delattr(ResponseHandler, "_on_read_timeout")
    assert not _aiohttp_owned._hooks_present()
    monkeypatch.setattr(_aiohttp_owned, "HOOKS_PRESENT", _aiohttp_owned._hooks_present())

    async def factory() -> object:
        connector = aiohttp.TCPConnector()
        try:
            watch_reads(connector)
            return connector._factory.func  # type: ignore[attr-defined]
        finally:
            await connector.close()

    assert asyncio.run(factory()) is ResponseHandler


def test_an_aiohttp_whose_start_timeout_does_more_keeps_its_own_timers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watcher takes ``start_timeout`` for a restart only while that is all aiohttp's does."""

    from toolfold.adapters._http import _aiohttp_owned

    def start_timeout(self: ResponseHandler) -> None:
        self._reschedule_timeout()
        self.pause_reading()

    assert _aiohttp_owned._hooks_present()
    monkeypatch.setattr(ResponseHandler, "start_timeout", start_timeout)
    assert not _aiohttp_owned._hooks_present()


@pytest.mark.parametrize("how", ["whole", "gzipped", "dripped"])
def test_an_answer_that_came_with_its_head_is_taken_at_once(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A body that came whole with its head (plain or gzipped) is taken without reading it in
    pieces; a dripped one is read in pieces; the answer is the same."""
    read_in_pieces: list[str] = []
    original = Sender._read_pieces

    async def counted(self: Sender, response: Any, call: Any) -> bytes:
        read_in_pieces.append(call.url)
        return await original(self, response, call)

    monkeypatch.setattr(Sender, "_read_pieces", counted)
    body = b'{"x": [1, 2, 3]}'
    if how == "dripped":
        head = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body)
        http_server.add(Reply(drip=0.001, raw=head + body))
    elif how == "gzipped":
        http_server.add(Reply(headers={"content-encoding": "gzip"}, body=gzip.compress(body)))
    else:
        http_server.add(Reply(headers={"content-type": "application/json"}, body=body))
    assert post(http_server, 30.0) == {"x": [1, 2, 3]}
    assert len(read_in_pieces) == (1 if how == "dripped" else 0)


@pytest.mark.parametrize("encoding", [None, "identity"])
@pytest.mark.parametrize("limit", ["max_body_bytes", "max_decoded_bytes"])
def test_an_answer_taken_at_once_keeps_the_body_limits(
    http_server: ScriptedServer, encoding: str | None, limit: str
) -> None:
    """A whole uncompressed answer taken with its head is refused one byte past either
    limit and taken at the limit, with or without ``content-encoding: identity``."""
    body = b'{"x": [1, 2, 3]}'
    headers = {} if encoding is None else {"content-encoding": encoding}

    async def run(cap: int) -> Any:
        transport = Transport(
            "openai",
            f"{http_server.url}/v1",
            KEY,
            http="aiohttp",
            retry=0,
            limits=HttpLimits(**{limit: cap}),
        )
        try:
            return await transport.post_json("chat/completions", {"m": 1})
        finally:
            await transport.aclose()

    http_server.add(Reply(headers=headers, body=body))
    with pytest.raises(ProviderError, match=f"larger than {limit}={len(body) - 1} bytes"):
        asyncio.run(run(len(body) - 1))
    http_server.add(Reply(headers=headers, body=body))
    assert asyncio.run(run(len(body))) == {"x": [1, 2, 3]}


def test_the_owned_session_posts_with_aiohttps_request_coroutine(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owned session's POST is aiohttp's request coroutine itself (no context manager and
    wrapper per exchange); with ``_request`` gone, it is ``post``."""

    from toolfold.adapters._http._aiohttp_owned import Reply as OwnedReply
    from toolfold.adapters._http._backends import AiohttpBackend

    http_server.add(Reply(headers={"content-type": "application/json"}, body=b'{"x": 1}'))

    async def run() -> tuple[bool, Any]:
        transport = Transport("openai", f"{http_server.url}/v1", KEY, http="aiohttp", retry=0)
        try:
            backend = await transport._sender.clients.get_async()
            request = backend.send(f"{http_server.url}/v1/chat/completions", b"{}", {}, None)
            coroutine = asyncio.iscoroutine(request)
            response = await request
            await response.aclose()
            return coroutine, response
        finally:
            await transport.aclose()

    coroutine, response = asyncio.run(run())
    assert coroutine
    assert type(response) is OwnedReply
    assert response.status_code == 200

    async def posts() -> Any:
        session = aiohttp.ClientSession()
        try:
            return AiohttpBackend(session, owned=True)._post
        finally:
            await session.close()

    plain = asyncio.run(posts())
    assert plain.func.__name__ == "_request"
    assert plain.args == ("POST",)
    monkeypatch.delattr(aiohttp.ClientSession, "_request")
    assert asyncio.run(posts()).__func__ is aiohttp.ClientSession.post
