"""Limits and guarantees the transport keeps above every client (httpx, httpx2, aiohttp).

``total`` bounds a call even when the server drips one byte at a time; body
and decompressed sizes are capped; a request that reached the server is sent
again only when the retry policy says so; 1,000 failures of every kind leave
the pool, file descriptors and threads as they were; bad headers, keys and
URLs are refused when the model is built, before any connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import gzip
import importlib
import json
import os
import random
import re
import socket
import threading
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from backends import OWNED, cases, post_once
from fault_matrix import resources
from leaks import every_text
from scripted_http import Cut, Reply, ScriptedServer, gate, sse

import toolfold
from toolfold import (
    MalformedResponseError,
    ModelConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamError,
)
from toolfold.adapters import HttpLimits, RetryPolicy, Secret, Timeouts, Transport
from toolfold.adapters._http import _deadlines
from toolfold.adapters._http._body import BodyReader

KEY = "sk-limits-0123456789"
MODES = ("post-sync", "post-async", "stream-sync", "stream-async")


def call(
    transport: Transport, mode: str, headers: dict[str, str] | None = None, body: Any = None
) -> Any:
    """One call in ``mode`` (``post``/``stream`` x ``sync``/``async``) posting ``body`` (by
    default ``{"m": 1}``); the transport is closed after."""
    what, flavour = mode.split("-")
    body = {"m": 1} if body is None else body
    if flavour == "sync":
        try:
            if what == "post":
                return transport.post_json_sync("chat/completions", body, headers=headers)
            return list(transport.stream_sync("chat/completions", body, headers=headers))
        finally:
            transport.close()

    async def run() -> Any:
        try:
            if what == "post":
                return await transport.post_json("chat/completions", body, headers=headers)
            return [e async for e in transport.stream("chat/completions", body, headers=headers)]
        finally:
            await transport.aclose()

    return asyncio.run(run())


def make(server: ScriptedServer, backend: str, **options: Any) -> Transport:
    options.setdefault("retry", 0)
    return Transport("openai", f"{server.url}/v1", KEY, http=backend, **options)


# --- total ----------------------------------------------------------------------------


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
@pytest.mark.parametrize("where", ["body", "head"])
def test_total_bounds_a_dripping_answer(
    http_server: ScriptedServer, backend: str, mode: str, where: str
) -> None:
    """A server sending a byte every 20 ms (never silent, so no read timeout) hits the total."""
    head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-pad: " + b"a" * 5000 + b"\r\n\r\n{}"
    http_server.add(Reply(drip=0.02, raw=head if where == "head" else None))
    transport = make(http_server, backend, timeout=Timeouts(read=30.0, total=0.3))
    with pytest.raises(ProviderTimeoutError, match=r"total timeout of 0\.3 s"):
        call(transport, mode)


# A dripping answer's head is 5,000 bytes, 100 s at a byte every 20 ms: a call
# not bounded by its total of 0.3 s is still reading it when this guard, far
# beyond the total, gives up on it (it fails the test instead of hanging it).
GUARD = 30.0
INJECTED = [name for name in OWNED if name != "aiohttp"]  # blocking clients with httpx's API


def guarded(work: Any) -> BaseException | None:
    """What ``work()`` raised (None: nothing), once it ended; it must end within `GUARD`."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:
            raised.append(exc)
        else:
            raised.append(None)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(GUARD)
    assert raised, f"the call was still running {GUARD} s after it started"
    return raised[0]


@pytest.mark.parametrize("package", INJECTED)
@pytest.mark.parametrize("mode", ["post-sync", "stream-sync"])
@pytest.mark.parametrize("where", ["head", "body"])
@pytest.mark.parametrize("opened", [True, False], ids=["connection-open", "no-connection"])
def test_total_bounds_a_dripping_answer_on_an_injected_blocking_client(
    http_server: ScriptedServer, package: str, mode: str, where: str, opened: bool
) -> None:
    """An injected blocking client reading a dripping answer stops at the total, and stays usable.

    Only the clients toolfold made had their socket reads capped by the total:
    an injected one read a head dripping a byte a second to its end (about
    three minutes for a common head) before the deadline was checked between
    the pieces of the body. Its connection to the dripping server is closed,
    not kept: a one-connection pool serves the next request; and a connection
    the client had open before the model was made (``connection-open``, which
    the call reuses) is capped as well as one it opens for the call.
    """
    client_class = importlib.import_module(package)
    head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-pad: " + b"a" * 5000 + b"\r\n\r\n{}"
    if opened:
        http_server.add(Reply(json={"before": True}))
    http_server.add(Reply(drip=0.02, raw=head if where == "head" else None))
    http_server.add(Reply(json={"after": True}))
    limits = client_class.Limits(max_connections=1)
    timeout = client_class.Timeout(30.0, pool=GUARD / 3)  # a slot never given back fails
    with client_class.Client(timeout=timeout, limits=limits) as client:
        if opened:
            assert client.post(f"{http_server.url}/before").json() == {"before": True}
        transport = Transport(
            "openai",
            f"{http_server.url}/v1",
            KEY,
            http_client=client,
            retry=0,
            timeout=Timeouts(total=0.3),
        )
        raised = guarded(lambda: call(transport, mode))
        assert isinstance(raised, ProviderTimeoutError), raised
        assert "total timeout of 0.3 s" in str(raised)
        assert client.post(f"{http_server.url}/after").json() == {"after": True}
    assert http_server.connections == 2  # the one opened first, then one for the last request


@pytest.mark.parametrize("package", INJECTED)
def test_a_client_injected_twice_is_capped_once(package: str) -> None:
    """A blocking client given to two transports gets one deadline layer, not one per transport
    (each would cost every socket read of the client a call more)."""
    client_class = importlib.import_module(package)
    with client_class.Client() as client:
        for _ in range(2):
            Transport("openai", "http://127.0.0.1:9/v1", KEY, http_client=client).close()
        capped = client._transport._pool._network_backend
        assert isinstance(capped, _deadlines._DeadlineBackend)
        assert not isinstance(capped._inner, _deadlines._DeadlineBackend)


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
def test_total_bounds_an_error_body_that_never_ends(
    http_server: ScriptedServer, released: list[threading.Event], backend: str, mode: str
) -> None:
    """A 429 whose body stalls past the total is a total timeout, in every mode.

    Reading the error body swallowed the total timeout (as it does a body over
    the limits) and raised the 429 with an empty body instead, except on a
    blocking async call, whose one timeout scope gave the ProviderTimeoutError.
    """
    http_server.add(Reply(status=429, chunks=[b'{"error": ', gate(released)]))
    transport = make(http_server, backend, timeout=Timeouts(read=30.0, total=0.3))
    with pytest.raises(ProviderTimeoutError, match=r"total timeout of 0\.3 s"):
        call(transport, mode)


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
@pytest.mark.parametrize("ending", ["close", "feed"])
@pytest.mark.parametrize("status", [500, 200])
def test_a_body_failing_as_the_total_runs_out_is_a_total_timeout(
    http_server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    mode: str,
    ending: str,
    status: int,
) -> None:
    """A 500's or a 200's gzip body that turns out cut (``close``: no trailer) or past
    max_decoded_bytes (``feed``) as the total deadline passes is the total timeout, as a
    stalled one is.

    It read as an answer or stream cut before its end (ProviderConnectionError /
    StreamError), or as one over the limit: the call was over, but the error said
    the server had failed it.
    """
    now = [0.0]
    decode = getattr(BodyReader, ending)

    def late(reader: BodyReader, *args: Any) -> Any:
        now[0] = 100.0  # the deadline passes while the body is read
        return decode(reader, *args)

    monkeypatch.setattr(BodyReader, ending, late)
    if status != 200:
        said = b'{"error": {"message": "' + b"slow down " * 50 + b'"}}'
    elif mode.startswith("stream"):
        said = b"".join(sse({"i": 0}, {"i": 1})) * 20  # no [DONE]: not a stream that ended
    else:
        said = b'{"ok": 1}' * 20
    body = gzip.compress(said)
    http_server.add(
        Reply(
            status=status,
            headers={"content-encoding": "gzip"},
            body=body[:-8] if ending == "close" else body,
        )
    )
    transport = make(
        http_server,
        backend,
        timeout=Timeouts(read=30.0, total=30.0),
        limits=HttpLimits(max_decoded_bytes=100 if ending == "feed" else None),
        clock=lambda: now[0],
    )
    with pytest.raises(ProviderTimeoutError, match=r"total timeout of 30\.0 s"):
        call(transport, mode)


# --- write timeout --------------------------------------------------------------------


@pytest.fixture
def deaf_url() -> Iterator[str]:
    """The base URL of a listener on 127.0.0.1 whose connections are never accepted nor read.

    The kernel completes each connection in the backlog and takes a few KiB
    of the request into its small receive buffer: then the client's writes wait.
    """
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


# Past every buffer between the client and the deaf listener (Linux lets a
# socket on 127.0.0.1 queue 4 MiB at most); a read timeout and a total far
# beyond the write timeout, so only the write timeout can end the call early.
BIG_REQUEST = {"m": "x" * (16 * 2**20)}
WRITE_SHORT = Timeouts(connect=10.0, write=0.3, read=20.0, total=20.0)
# aiohttp advises streaming a body over 1 MiB (a ResourceWarning): the body is in memory anyway.
LARGE_BODY_ADVICE = "ignore:Sending a large body directly:ResourceWarning"


@pytest.mark.filterwarnings(LARGE_BODY_ADVICE)
@pytest.mark.parametrize(("backend", "mode"), cases(("post-sync", "post-async")))
def test_a_request_never_read_ends_at_the_write_timeout(
    deaf_url: str, backend: str, mode: str
) -> None:
    """A 16 MiB request to a server that never reads it fails at the write timeout, on aiohttp too.

    aiohttp has no write timeout of its own (its read timeout starts once the
    request is written): the call waited for the total, for ever without one.
    """
    transport = Transport("openai", deaf_url, KEY, http=backend, retry=0, timeout=WRITE_SHORT)
    with pytest.raises(ProviderTimeoutError, match="not written within the write timeout"):
        call(transport, mode, body=BIG_REQUEST)


@pytest.mark.filterwarnings(LARGE_BODY_ADVICE)
def test_an_injected_aiohttp_session_keeps_the_write_timeout(deaf_url: str) -> None:
    """An injected aiohttp session's request that is never read fails at the model's write timeout."""
    import aiohttp

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            transport = Transport(
                "openai", deaf_url, KEY, http_client=session, retry=0, timeout=WRITE_SHORT
            )
            await transport.post_json("chat/completions", BIG_REQUEST)

    with pytest.raises(ProviderTimeoutError, match=r"timeout of 0\.3 s") as caught:
        asyncio.run(run())
    assert "sending the request to openai at" in str(caught.value)


def _open_fds() -> int:
    """How many file descriptors this process has open (a held socket is one)."""
    return len(os.listdir("/proc/self/fd"))


#: How a call mid-body ends: (its Timeouts, or None for none; the caller's cancel after; injected session).
_MID_BODY_ENDS: dict[str, tuple[Timeouts | None, float | None, bool]] = {
    "total-timeout": (Timeouts(connect=10.0, write=30.0, read=30.0, total=0.3), None, False),
    "caller-cancel": (Timeouts(connect=10.0, write=30.0, read=30.0, total=30.0), 0.3, False),
    "no-write-timeout, total": (
        Timeouts(connect=10.0, write=None, read=30.0, total=0.3),
        None,
        False,
    ),
    "no-write-timeout, cancel": (Timeouts(connect=10.0, write=None, read=30.0), 0.3, False),
    "no-timeouts, cancel": (None, 0.3, False),
    "injected-session, cancel": (None, 0.3, True),
}


@pytest.mark.filterwarnings(LARGE_BODY_ADVICE)
@pytest.mark.parametrize("how", list(_MID_BODY_ENDS))
def test_an_aiohttp_request_ended_mid_body_releases_its_socket(deaf_url: str, how: str) -> None:
    """A call ended while its body is written (total timeout, caller's cancel) closes its socket.

    Only the write timeout aborted the connection: closed, its socket waited for
    the queued body the server never reads, held while the loop ran. Without a
    write timeout (write=None, no timeouts, an injected session) nothing aborted.
    """
    import aiohttp

    timeout, cancel_after, injected = _MID_BODY_ENDS[how]

    async def run() -> int:
        before = _open_fds()
        session = aiohttp.ClientSession() if injected else None
        if session is not None:
            transport = Transport("openai", deaf_url, KEY, http_client=session, retry=0)
        else:
            transport = Transport("openai", deaf_url, KEY, http="aiohttp", retry=0, timeout=timeout)
        # (asyncio.TimeoutError: not the built-in one on Python 3.10)
        with pytest.raises((ProviderTimeoutError, TimeoutError, asyncio.TimeoutError)):
            await asyncio.wait_for(
                transport.post_json("chat/completions", BIG_REQUEST), cancel_after or 30.0
            )
        await transport.aclose()
        if session is not None:
            await session.close()
        for _ in range(100):  # the loop's turns that close what was aborted; no waiting
            if _open_fds() <= before:
                break
            await asyncio.sleep(0)
        return _open_fds() - before

    assert asyncio.run(run()) <= 0


@pytest.mark.filterwarnings(LARGE_BODY_ADVICE)
def test_an_aiohttp_request_answered_before_its_body_was_read_releases_its_socket() -> None:
    """A 413 sent before the server reads the body leaves no client socket once the loop ends.

    The body's write goes on after the answer until the write timeout or the
    loop's end cancels it: cancelled, the connection was closed, not aborted,
    and its socket stayed open for the queued body ("unclosed transport").
    """
    held: list[socket.socket] = []
    answer = b'{"error": {"message": "too large"}}'

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)

        def answer_early() -> None:
            conn, _ = listener.accept()
            held.append(conn)
            conn.recv(2048)
            head = f"HTTP/1.1 413 Too Large\r\ncontent-length: {len(answer)}\r\n\r\n"
            conn.sendall(head.encode() + answer)

        server = threading.Thread(target=answer_early, daemon=True)
        server.start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"

        async def run() -> None:
            transport = Transport("openai", url, KEY, http="aiohttp", retry=0, timeout=30.0)
            with pytest.raises(ProviderError, match="HTTP 413"):
                await transport.post_json("chat/completions", BIG_REQUEST)
            await transport.aclose()

        before = _open_fds()
        try:
            asyncio.run(run())  # ends with the body's write still waiting: cancelled
            server.join()
            assert _open_fds() - len(held) <= before  # the server's end is still open
        finally:
            for conn in held:
                conn.close()


#: How the body of an early-answered call is sent: (its Timeouts, or None; injected session).
_EARLY_ANSWERS: dict[str, tuple[Timeouts | None, bool]] = {
    "default-timeouts": (Timeouts(), False),  # write 600 s
    "no-write-timeout": (Timeouts(write=None), False),
    "no-timeouts": (None, False),
    "injected-session": (None, True),
}


@pytest.mark.filterwarnings(LARGE_BODY_ADVICE)
@pytest.mark.parametrize("how", list(_EARLY_ANSWERS))
def test_an_aiohttp_request_answered_early_releases_its_socket_with_the_answer(how: str) -> None:
    """A 413 sent before the server reads the body frees the client's socket as the error is
    raised, the loop still running, not at the write timeout (600 s) nor the loop's end.

    aiohttp cancels the body's write once the answer has arrived (its response's
    end, ``release()`` and ``close()`` do), and a cancelled body aborts its connection.
    """
    import aiohttp

    timeout, injected = _EARLY_ANSWERS[how]
    held: list[socket.socket] = []
    answered = threading.Event()
    answer = b'{"error": {"message": "too large"}}'

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)

        def answer_early() -> None:
            conn, _ = listener.accept()
            held.append(conn)
            conn.recv(2048)
            head = f"HTTP/1.1 413 Too Large\r\ncontent-length: {len(answer)}\r\n\r\n"
            conn.sendall(head.encode() + answer)
            answered.set()

        server = threading.Thread(target=answer_early, daemon=True)
        server.start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"

        async def run() -> int:
            before = _open_fds()
            session = aiohttp.ClientSession() if injected else None
            if session is not None:
                transport = Transport("openai", url, KEY, http_client=session, retry=0)
            else:
                transport = Transport("openai", url, KEY, http="aiohttp", retry=0, timeout=timeout)
            try:
                with pytest.raises(ProviderError, match="HTTP 413"):
                    await transport.post_json("chat/completions", BIG_REQUEST)
                # The server thread sets `answered` after its sendall returns, which may be
                # after the client has read the answer and raised: let it end first.
                server.join(timeout=10)
                assert answered.is_set()
                for _ in range(100):  # the loop's turns that close what was aborted; no waiting
                    if _open_fds() - len(held) <= before:
                        break
                    await asyncio.sleep(0)
                return _open_fds() - len(held) - before  # (the server's end is still open)
            finally:
                await transport.aclose()
                if session is not None:
                    await session.close()

        try:
            assert asyncio.run(run()) <= 0
            server.join()
        finally:
            for conn in held:
                conn.close()


# --- body limits ------------------------------------------------------------------------


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
def test_a_body_over_max_body_bytes_is_refused(
    http_server: ScriptedServer, backend: str, mode: str
) -> None:
    """A body past max_body_bytes (whole or streamed) ends with an error naming the limit."""
    if mode.startswith("post"):
        http_server.add(Reply(json={"pad": "x" * 20_000}))
    else:
        http_server.add(Reply(chunks=sse(*[{"pad": "x" * 1000}] * 40)))
    transport = make(http_server, backend, limits=HttpLimits(max_body_bytes=10_000))
    with pytest.raises(ProviderError, match="max_body_bytes=10000"):
        call(transport, mode)


@pytest.mark.parametrize(("backend", "mode"), cases(("post-sync", "post-async")))
@pytest.mark.parametrize("over", [0, 1])
def test_max_body_bytes_holds_to_the_byte_for_an_announced_length(
    http_server: ScriptedServer, backend: str, mode: str, over: int
) -> None:
    """A whole answer whose content-length equals max_body_bytes is read; one byte more is refused."""
    body = b'{"pad": "' + b"x" * 990 + b'"}'
    http_server.add(Reply(headers={"content-type": "application/json"}, body=body))
    transport = make(http_server, backend, limits=HttpLimits(max_body_bytes=len(body) - over))
    if over:
        with pytest.raises(ProviderError, match=f"max_body_bytes={len(body) - 1}"):
            call(transport, mode)
    else:
        assert call(transport, mode) == {"pad": "x" * 990}


@pytest.mark.parametrize(("backend", "mode"), cases(("post-sync", "post-async")))
@pytest.mark.parametrize("over", [0, 1])
def test_max_decoded_bytes_holds_to_the_byte_for_an_uncompressed_answer(
    http_server: ScriptedServer, backend: str, mode: str, over: int
) -> None:
    """An uncompressed answer of max_decoded_bytes (below max_body_bytes) is read; one byte more is refused."""
    body = b'{"pad": "' + b"x" * 990 + b'"}'
    http_server.add(Reply(headers={"content-type": "application/json"}, body=body))
    limits = HttpLimits(max_body_bytes=10 * len(body), max_decoded_bytes=len(body) - over)
    transport = make(http_server, backend, limits=limits)
    if over:
        with pytest.raises(ProviderError, match=f"max_decoded_bytes={len(body) - 1}"):
            call(transport, mode)
    else:
        assert call(transport, mode) == {"pad": "x" * 990}


@functools.cache
def _bomb() -> bytes:
    return gzip.compress(b"\0" * 64 * 2**20, compresslevel=9)


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
def test_a_gzip_bomb_stops_at_max_decoded_bytes(
    http_server: ScriptedServer, backend: str, mode: str
) -> None:
    """64 MiB of zeros gzipped to ~64 KiB stop at max_decoded_bytes, not in memory."""
    http_server.add(Reply(headers={"content-encoding": "gzip"}, body=_bomb()))
    transport = make(http_server, backend, limits=HttpLimits(max_decoded_bytes=2**20))
    with pytest.raises(ProviderError, match=r"max_decoded_bytes=1048576"):
        call(transport, mode)


def test_a_gzip_bomb_costs_the_cap_not_a_whole_inflate_step() -> None:
    """Past max_decoded_bytes=4 KiB a 64 MiB bomb is refused having inflated about 4 KiB, not 1 MiB."""
    import tracemalloc

    from toolfold.adapters._http._body import BodyError, BodyReader

    bomb = _bomb()
    reader = BodyReader("gzip", HttpLimits(max_decoded_bytes=4096))
    tracemalloc.start()
    try:
        with pytest.raises(BodyError, match="max_decoded_bytes=4096"):
            reader.feed(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, peak


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
def test_an_encoding_not_asked_for_is_refused_and_the_pool_stays_usable(
    http_server: ScriptedServer, backend: str, mode: str
) -> None:
    """A br answer (only gzip, deflate are asked) is refused; the one-connection pool still works."""
    limits = HttpLimits(max_connections=1)
    http_server.add(Reply(headers={"content-encoding": "br"}, json={"x": 1}))
    with pytest.raises(ProviderError, match="content-encoding 'br'"):
        call(make(http_server, backend, limits=limits), mode)
    assert http_server.requests[0].headers["accept-encoding"] == "gzip, deflate"


def _compressed(encoding: str, data: bytes) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data)
    if encoding == "deflate":
        return zlib.compress(data)
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)  # "deflate" as some servers send it
    return raw.compress(data) + raw.flush()


@pytest.mark.parametrize("cut", [1, 4, 8])
@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_a_compressed_body_cut_before_its_end_is_refused(encoding: str, cut: int) -> None:
    """A gzip body short of its CRC/length trailer (deflate: its checksum or last block) is cut.

    httpx and aiohttp hand such a body over as whole; all of its data inflates.
    """
    from toolfold.adapters._http._body import BodyCut, BodyReader

    name = encoding.removeprefix("raw-")
    body = _compressed(encoding, b'{"choices": []}' * 50)
    whole = BodyReader(name, HttpLimits())
    assert whole.feed(body) + whole.close() == b'{"choices": []}' * 50
    reader = BodyReader(name, HttpLimits())
    reader.feed(body[:-cut])
    with pytest.raises(BodyCut, match=f"its {name} data stops before its end"):
        reader.close()


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_a_compressed_body_fed_one_byte_at_a_time_inflates(encoding: str) -> None:
    """Pieces of one byte: deflate's form (zlib header or raw) is told from two bytes, not one.

    A raw deflate body's first byte alone was taken for the start of a zlib
    header, and its second was then refused as a bad header.
    """
    from toolfold.adapters._http._body import BodyReader

    data = b'{"choices": []}' * 50
    body = _compressed(encoding, data)
    reader = BodyReader(encoding.removeprefix("raw-"), HttpLimits())
    out = b"".join(reader.feed(body[i : i + 1]) for i in range(len(body)))
    assert out + reader.close() == data


@pytest.mark.parametrize(("backend", "mode"), cases(("post-sync", "post-async")))
@pytest.mark.parametrize("encoding", ["deflate", "raw-deflate"])
def test_a_deflate_answer_sent_one_byte_at_a_time_is_read(
    http_server: ScriptedServer, backend: str, mode: str, encoding: str
) -> None:
    """A server writing its answer a byte at a time: the first piece of the body is one byte."""
    data = b'{"choices": [], "pad": "' + b"x" * 40 + b'"}'
    body = _compressed(encoding, data)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: deflate\r\n"
    raw = head + b"content-length: %d\r\n\r\n" % len(body) + body
    http_server.add(Reply(drip=0.001, raw=raw))
    assert call(make(http_server, backend), mode) == json.loads(data)


def _members(*parts: bytes) -> bytes:
    """A gzip body of one member per part (RFC 1952: a gzip file is a series of members)."""
    return b"".join(gzip.compress(part) for part in parts)


@pytest.mark.parametrize(
    "body",
    [
        _members(b'{"choices": ', b"[], ", b'"ok": 1}'),
        _members(b'{"choices": ', b"", b'[], "ok": 1}'),  # an empty member between
        _members(b'{"choices": [], ', b'"ok": 1}') + b"\0" * 5,  # zero padding, as gzip allows
        gzip.compress(b'{"choices": ') + b"\0\0" + _members(b'[], "ok": 1}'),
    ],
    ids=["three", "empty-member", "padding-after", "padding-between"],
)
@pytest.mark.parametrize("piece", [1, 7, 10**6])
def test_a_gzip_body_of_several_members_inflates_whole(body: bytes, piece: int) -> None:
    """Every member inflates, whatever the pieces, as Python's gzip.decompress reads the body.

    Only the first member was read and the rest dropped without a word.
    """
    reader = BodyReader("gzip", HttpLimits())
    out = b"".join(reader.feed(body[i : i + piece]) for i in range(0, len(body), piece))
    assert out + reader.close() == gzip.decompress(body) == b'{"choices": [], "ok": 1}'


@pytest.mark.parametrize("piece", [1, 10**6])
@pytest.mark.parametrize(
    "after", [b"JUNK", b"\0\0junk", b"\x1f\x8c", b"\x1f"], ids=["junk", "padded", "near", "lone"]
)
def test_bytes_after_a_gzip_member_that_start_no_member_are_refused(
    piece: int, after: bytes
) -> None:
    """Trailing bytes that are no gzip member are an error naming the gzip problem, not dropped."""
    from toolfold.adapters._http._body import BodyError

    body = gzip.compress(b'{"ok": 1}') + after
    with pytest.raises(gzip.BadGzipFile):
        gzip.decompress(body)
    reader = BodyReader("gzip", HttpLimits())

    def read() -> None:
        for i in range(0, len(body), piece):
            reader.feed(body[i : i + piece])
        reader.close()

    with pytest.raises(BodyError, match=r"gzip data is followed by \d+ bytes that are not another"):
        read()


def test_the_decoded_cap_holds_over_all_gzip_members() -> None:
    """Members each below max_decoded_bytes but past it together are refused."""
    from toolfold.adapters._http._body import BodyError

    reader = BodyReader("gzip", HttpLimits(max_decoded_bytes=3000))
    with pytest.raises(BodyError, match="max_decoded_bytes=3000"):
        reader.feed(_members(b"x" * 2000, b"y" * 2000))


class _CountingInflater:
    """A zlib inflater counting the compressed bytes it is given (zlib copies what it leaves)."""

    fed = 0
    calls = 0

    def __init__(self, wbits: int) -> None:
        self._inner = _REAL_DECOMPRESSOBJ(wbits)

    def decompress(self, data: Any, max_length: int = 0) -> bytes:
        _CountingInflater.fed += len(data)
        _CountingInflater.calls += 1
        return self._inner.decompress(data, max_length)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


_REAL_DECOMPRESSOBJ = zlib.decompressobj


def test_a_body_of_many_tiny_gzip_members_costs_work_linear_in_its_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """20,000 empty gzip members in one piece give zlib a bounded window each, not the piece's rest.

    Each member was given (and zlib copied) the whole rest of the piece: quadratic
    in the piece's size, 19 s for 4 MiB. Counted in bytes given to zlib, not timed:
    the whole piece once (the first member), then windows of at most 64 B per member.
    """
    monkeypatch.setattr(zlib, "decompressobj", _CountingInflater)
    monkeypatch.setattr(_CountingInflater, "fed", 0)
    body = gzip.compress(b"") * 20_000 + gzip.compress(b'{"ok": 1}')
    reader = BodyReader("gzip", HttpLimits())
    assert reader.feed(body) + reader.close() == b'{"ok": 1}'
    assert 0 < _CountingInflater.fed <= len(body) + 4 * len(body)


def test_a_piece_inside_one_gzip_member_goes_to_zlib_in_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 64 KiB piece of an ordinary one-member gzip body is one zlib call, not 16 KiB windows.

    Windows are for the members after one that ended inside the piece: four
    calls and a join per piece made the hot path ~15% slower.
    """
    monkeypatch.setattr(zlib, "decompressobj", _CountingInflater)
    monkeypatch.setattr(_CountingInflater, "calls", 0)
    text = random.Random(0).randbytes(2**20)  # 1 MiB that deflate does not shrink
    body = gzip.compress(text)
    piece = 65536
    reader = BodyReader("gzip", HttpLimits(max_decoded_bytes=None))
    out = [reader.feed(body[i : i + piece]) for i in range(0, len(body), piece)]
    assert b"".join(out) + reader.close() == text
    assert _CountingInflater.calls <= 2 * -(-len(body) // piece)


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
def test_a_gzip_answer_of_several_members_is_read_whole(
    http_server: ScriptedServer, backend: str, mode: str
) -> None:
    """A whole answer or a stream gzipped as two members reads to its end on every backend.

    The stream read as cut ("stream ended before the response finished"), the
    whole answer as a MalformedResponseError, not JSON.
    """
    if mode.startswith("stream"):
        first, second = sse({"i": 0})[0], b"".join(sse({"i": 1}, "[DONE]"))
    else:
        first, second = b'{"choices": ', b'[], "ok": 1}'
    http_server.add(Reply(headers={"content-encoding": "gzip"}, body=_members(first, second)))
    got = call(make(http_server, backend), mode)
    if mode.startswith("stream"):
        assert [event.data for event in got] == ['{"i": 0}', '{"i": 1}', "[DONE]"]
    else:
        assert got == {"choices": [], "ok": 1}


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
def test_a_gzip_answer_with_bytes_after_its_data_is_refused(
    http_server: ScriptedServer, backend: str, mode: str
) -> None:
    """Junk after a gzip answer's data is an error naming it, on every backend; it was accepted."""
    payload = b"".join(sse({"i": 0}, "[DONE]")) if mode.startswith("stream") else b'{"ok": 1}'
    http_server.add(
        Reply(headers={"content-encoding": "gzip"}, body=gzip.compress(payload) + b"JUNK")
    )
    with pytest.raises(
        ProviderError, match="gzip data is followed by 4 bytes that are not another"
    ):
        call(make(http_server, backend), mode)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_an_empty_compressed_body_is_empty(encoding: str) -> None:
    """No bytes at all under content-encoding gzip (a 204, a proxy's empty error) are no data, not a cut."""
    from toolfold.adapters._http._body import BodyReader

    assert BodyReader(encoding, HttpLimits()).close() == b""


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
def test_a_gzip_answer_without_its_trailer_is_a_cut_answer(
    http_server: ScriptedServer, backend: str, mode: str
) -> None:
    """All the JSON inflates, but the last 8 bytes (CRC-32, length) are missing: a cut body or
    stream (ProviderConnectionError / StreamError) naming gzip, not an answer taken as whole."""
    payload = sse({"i": 0}, {"i": 1}) if mode.startswith("stream") else [b'{"ok": 1}']
    body = gzip.compress(b"".join(payload))[:-8]
    http_server.add(Reply(headers={"content-encoding": "gzip"}, body=body))
    error = StreamError if mode.startswith("stream") else ProviderConnectionError
    with pytest.raises(error, match=r"was cut before it ended: its gzip data stops before its end"):
        call(make(http_server, backend), mode)


@pytest.mark.parametrize(("backend", "mode"), cases(("stream-sync", "stream-async")))
@pytest.mark.parametrize("where", ["trailer", "connection"])
def test_a_stream_cut_after_its_done_event_is_whole(
    http_server: ScriptedServer, backend: str, mode: str, where: str
) -> None:
    """``data: [DONE]`` arrived, then the gzip trailer is missing (``trailer``) or the
    connection closes before the chunked body's end: every event is there, none is lost.

    It was a StreamError after the last event: a reader of the whole stream lost a
    complete answer. Without [DONE] it still is one (the test above).
    """
    payload = b"".join(sse({"i": 0}, {"i": 1}, "[DONE]"))
    if where == "trailer":
        reply = Reply(headers={"content-encoding": "gzip"}, body=gzip.compress(payload)[:-8])
    else:
        reply = Reply(chunks=[payload, Cut()])
    http_server.add(reply)
    events = call(make(http_server, backend), mode)
    assert [event.data for event in events] == ['{"i": 0}', '{"i": 1}', "[DONE]"]


@pytest.mark.parametrize(("backend", "mode"), cases(("stream-sync", "stream-async")))
def test_a_stream_whose_end_is_found_cut_as_the_total_runs_out_stays_ended(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, backend: str, mode: str
) -> None:
    """``data: [DONE]`` arrived, then the missing gzip trailer is found as the total deadline
    passes: the stream had ended, and it still ends quietly with every event.

    The total timeout came first and was raised: a complete answer was lost to a
    deadline that passed after its last event.
    """
    now = [0.0]
    close = BodyReader.close

    def late(reader: BodyReader, *args: Any) -> Any:
        now[0] = 100.0  # the deadline passes as the body's end is read
        return close(reader, *args)

    monkeypatch.setattr(BodyReader, "close", late)
    payload = b"".join(sse({"i": 0}, {"i": 1}, "[DONE]"))
    http_server.add(Reply(headers={"content-encoding": "gzip"}, body=gzip.compress(payload)[:-8]))
    transport = make(
        http_server, backend, timeout=Timeouts(read=30.0, total=30.0), clock=lambda: now[0]
    )
    events = call(transport, mode)
    assert [event.data for event in events] == ['{"i": 0}', '{"i": 1}', "[DONE]"]
    assert now[0] == 100.0  # the deadline did pass as the end was read


async def _closed(stream: Any) -> None:
    """Until aiohttp's ``stream`` holds the failure of its closed connection (loop turns only)."""
    while stream.exception() is None:
        await asyncio.sleep(0)


@pytest.mark.parametrize("session", ["owned", "injected"])
def test_aiohttp_gives_what_arrived_before_the_cut_first(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, session: str
) -> None:
    """The last chunk with [DONE] arrives and the connection closes while the reader is busy
    with the first event: the reader still gets every event, and no StreamError.

    aiohttp's ``readany`` raises the failure it stored before the data that arrived
    before it: a slower reader lost [DONE] (a StreamError), a faster one did not. Here
    the client has seen the close (its stream holds the failure) before the reader goes
    on, every time: no timing decides.
    """
    import aiohttp

    from toolfold.adapters._http import _aiohttp_owned, _backends

    go = threading.Event()
    http_server.add(
        Reply(chunks=[b"".join(sse({"i": 0})), go, b"".join(sse({"i": 1}, "[DONE]")), Cut()])
    )
    streams: list[Any] = []
    for kind in (_aiohttp_owned.Reply, _backends.AiohttpReply):
        read = kind.aiter_raw

        def noted(reply: Any, read: Any = read) -> Any:
            streams.append(getattr(reply, "_response", reply).content)
            return read(reply)

        monkeypatch.setattr(kind, "aiter_raw", noted)

    async def run() -> list[str]:
        client = aiohttp.ClientSession() if session == "injected" else None
        how: dict[str, Any] = {"http_client": client} if client else {"http": "aiohttp"}
        transport = Transport("openai", f"{http_server.url}/v1", KEY, retry=0, **how)
        seen: list[str] = []
        try:
            async for event in transport.stream("chat/completions", {"m": 1}):
                seen.append(event.data)
                if len(seen) == 1:
                    go.set()  # the server sends the rest and closes
                    await asyncio.wait_for(_closed(streams[0]), 10)
        finally:
            await transport.aclose()
            if client is not None:
                await client.close()
        return seen

    assert asyncio.run(run()) == ['{"i": 0}', '{"i": 1}', "[DONE]"]
    assert len(streams) == 1


@pytest.mark.parametrize("session", ["owned", "injected"])
@pytest.mark.parametrize(
    ("what", "total"),
    [("post", None), ("stream", 30.0)],
    ids=["read-pieces", "aiohttp-pieces"],  # Sender._read_pieces; _read_all over AiohttpPieces
)
def test_aiohttp_keeps_what_arrived_of_an_error_body_before_the_cut(
    http_server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    session: str,
    what: str,
    total: float | None,
) -> None:
    """A 503's body comes in two pieces and the connection closes after the second while the
    reader still holds the first: the ServerError keeps both pieces.

    aiohttp's ``readany`` raises the failure it stored before the data that arrived before
    it: without `left_over` the second piece was lost whenever the reader was slower than
    the server. Here the client has seen the close (its stream holds the failure, the
    second piece buffered) before the reader asks again, every time: no timing decides.
    """
    import aiohttp

    go = threading.Event()
    first, second = b'{"error": {"message": "overloaded, ', b'try the eu region"}}'
    http_server.add(Reply(status=503, chunks=[first, go, second, Cut()]))
    readany = aiohttp.StreamReader.readany

    async def slow_reader(stream: Any) -> bytes:
        piece: bytes = await readany(stream)
        if piece and not go.is_set():
            go.set()  # the server sends the second piece and closes
            await asyncio.wait_for(_closed(stream), 10)
        return piece

    monkeypatch.setattr(aiohttp.StreamReader, "readany", slow_reader)

    async def run() -> Any:
        client = aiohttp.ClientSession() if session == "injected" else None
        how: dict[str, Any] = {"http_client": client} if client else {"http": "aiohttp"}
        transport = Transport(
            "openai", f"{http_server.url}/v1", KEY, retry=0, timeout=Timeouts(total=total), **how
        )
        try:
            if what == "post":
                return await transport.post_json("chat/completions", {"m": 1})
            return [e async for e in transport.stream("chat/completions", {"m": 1})]
        finally:
            await transport.aclose()
            if client is not None:
                await client.close()

    with pytest.raises(ServerError) as caught:
        asyncio.run(run())
    assert go.is_set()
    assert caught.value.body == (first + second).decode()
    assert str(caught.value).endswith(
        ": overloaded, try the eu region (its body was cut before its end)"
    )


class _FlagDecoder:
    """A user's decoder with a flag of its own named ``ended`` (not toolfold's method)."""

    def __init__(self) -> None:
        self.ended = False

    def feed(self, chunk: bytes) -> list[bytes]:
        self.ended = self.ended or b"END" in chunk
        return [chunk]

    def close(self) -> list[bytes]:
        return []


def _decoded(transport: Transport, decoder: Any, mode: str) -> list[Any]:
    """What `stream_decoded` (``mode``: sync or async) yields with ``decoder``; closes the transport."""
    if mode == "sync":
        with transport:
            return list(transport.stream_decoded_sync("x", {}, decoder, accept=None))

    async def run() -> list[Any]:
        async with transport:
            return [item async for item in transport.stream_decoded("x", {}, decoder, accept=None)]

    return asyncio.run(run())


@pytest.mark.parametrize(("backend", "mode"), cases())
def test_a_users_decoder_with_an_ended_flag_reads_a_cut_stream_as_cut(
    http_server: ScriptedServer, backend: str, mode: str
) -> None:
    """``ended = False`` on a user's decoder is the user's: a cut stream is a StreamError
    that hides the URL's password. It was called as toolfold's ``SSEDecoder.ended``: a
    TypeError, with the unscrubbed URL in the StreamError under it."""
    from leaks import every_text

    http_server.add(
        Reply(headers={"content-encoding": "gzip"}, body=gzip.compress(b"part1 part2")[:-8])
    )
    url = http_server.url.replace("://", "://bob:hunter2pw-secret@") + "/v1"
    transport = Transport(
        "anthropic", url, KEY, http=backend, retry=0, auth_header="x-api-key", auth_scheme=""
    )
    with pytest.raises(StreamError, match="its gzip data stops before its end") as caught:
        _decoded(transport, _FlagDecoder(), mode)
    assert "hunter2pw-secret" not in every_text(caught.value)


@pytest.mark.parametrize(("backend", "mode"), cases())
def test_an_sse_decoder_used_again_does_not_take_a_cut_stream_for_whole(
    http_server: ScriptedServer, backend: str, mode: str
) -> None:
    """One `SSEDecoder` reads a whole stream ending in [DONE], then a stream cut with no
    [DONE]: the second is a StreamError. The first's [DONE] stayed in the decoder, and the
    cut second stream passed for one cut after its end."""
    from toolfold.adapters import SSEDecoder

    decoder = SSEDecoder()
    http_server.add(Reply(chunks=[b"".join(sse({"i": 0}, "[DONE]"))]))
    first = _decoded(make(http_server, backend), decoder, mode)
    assert [event.data for event in first] == ['{"i": 0}', "[DONE]"]
    http_server.add(Reply(chunks=[b"".join(sse({"i": 1})), Cut()]))
    with pytest.raises(StreamError, match="cut before it ended"):
        _decoded(make(http_server, backend), decoder, mode)


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
@pytest.mark.parametrize(
    ("encoding", "where"),
    [
        ("gzip", "trailer"),
        ("deflate", "trailer"),  # its Adler-32
        ("gzip", "connection"),
        ("deflate", "connection"),
        ("raw-deflate", "connection"),  # no trailer: its last block missing
    ],
)
def test_a_compressed_error_body_cut_keeps_what_decoded(
    http_server: ScriptedServer, backend: str, mode: str, encoding: str, where: str
) -> None:
    """A 503 whose gzip/deflate body stops short (``trailer``: all its data but the end of the
    compressed stream; ``connection``: closed in the middle) keeps the text that inflated, and
    the message says the body was cut. It was dropped: the status spoke alone.
    """
    said = b'{"error": {"message": "overloaded, try the eu region", "type": "overloaded"}}'
    body = _compressed(encoding, said)
    if where == "trailer":
        reply = Reply(
            status=503,
            headers={"content-encoding": encoding.removeprefix("raw-")},
            body=body[: -8 if encoding == "gzip" else -4],
        )
    else:
        whole = zlib.compressobj(wbits={"gzip": 31, "deflate": 15}.get(encoding, -15))
        head = whole.compress(said) + whole.flush(zlib.Z_SYNC_FLUSH)  # all of it inflates
        reply = Reply(
            status=503,
            headers={"content-encoding": encoding.removeprefix("raw-")},
            chunks=[head, Cut()],
        )
    http_server.add(reply)
    with pytest.raises(ServerError) as caught:
        call(make(http_server, backend), mode)
    assert caught.value.body == said.decode()
    assert caught.value.provider_message == "overloaded, try the eu region"
    assert str(caught.value).endswith(
        ": overloaded, try the eu region (its body was cut before its end)"
    )


CUT_PASSWORD = "hunter2-pw-0123456789"


@pytest.mark.parametrize(("backend", "mode"), cases(("post-sync", "post-async")))
@pytest.mark.parametrize("secret", ["key", "password", "basic"])
@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_an_error_body_cut_inside_an_echoed_secret_hides_its_start(
    http_server: ScriptedServer, backend: str, mode: str, secret: str, encoding: str
) -> None:
    """A 401 echoing the key (or the URL's password, or the Basic credentials made of it) is cut
    six characters before the secret's end: what arrived of it shows as ``***``.

    A cut body is kept, and was scrubbed of whole secrets only: the part of the key
    that arrived showed in the message, ``body`` and ``provider_message``.
    """
    import base64

    value = {
        "key": KEY,
        "password": CUT_PASSWORD,
        "basic": base64.b64encode(f"bob:{CUT_PASSWORD}".encode()).decode(),
    }[secret]
    said = b'{"error": {"message": "Incorrect API key provided: ' + value[:-6].encode()
    if encoding == "gzip":
        whole = zlib.compressobj(wbits=31)
        chunks: list[Any] = [whole.compress(said) + whole.flush(zlib.Z_SYNC_FLUSH), Cut()]
    else:
        chunks = [said, Cut()]
    http_server.add(
        Reply(status=401, headers={"content-encoding": encoding}, chunks=chunks),
    )
    url = http_server.url.replace("://", f"://bob:{CUT_PASSWORD}@") + "/v1"
    # The key in its own header: the Basic credentials take Authorization.
    transport = Transport(
        "openai", url, KEY, http=backend, retry=0, auth_header="x-api-key", auth_scheme=""
    )
    with pytest.raises(toolfold.AuthenticationError) as caught:
        call(transport, mode)
    shown = '{"error": {"message": "Incorrect API key provided: ***'
    assert caught.value.body == shown
    assert str(caught.value).endswith(f"{shown} (its body was cut before its end)")
    assert value[:-6] not in every_text(caught.value)
    assert value[:8] not in every_text(caught.value)


STALLED = " (the read of its body timed out before its end)"


def _stalled(
    http_server: ScriptedServer,
    released: list[threading.Event],
    backend: str,
    mode: str,
    reply: functools.partial[Reply],
    first: bytes,
) -> ProviderError:
    """The error of a call whose answer (``reply``, its ``chunks`` still to give) sends
    ``first``, then stops until the client's read timeout has passed.

    The read timeout is real (the HTTP client's), so it may pass before ``first``
    arrives on a loaded machine: then (a timeout before the head, or an empty body)
    the call is made again with twice the read timeout, up to 4.8 s, no sleep.
    """
    read = 0.3
    while True:
        stop = gate(released)
        http_server.add(reply(chunks=[first, stop]))
        transport = make(http_server, backend, timeout=Timeouts(read=read, total=60.0))
        with pytest.raises(ProviderError) as caught:
            call(transport, mode)
        stop.set()  # the client has given up: the server's thread may go
        early = isinstance(caught.value, ProviderTimeoutError) or not caught.value.body
        if not early or read >= 4.8:
            return caught.value
        read *= 2


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_an_error_body_that_stalls_past_the_read_timeout_keeps_what_arrived(
    http_server: ScriptedServer,
    released: list[threading.Event],
    backend: str,
    mode: str,
    encoding: str,
) -> None:
    """A 503 whose body stops arriving (the read timeout passes, not the total) keeps the text
    that arrived, and the ServerError says the read timed out. It was dropped: the status
    spoke alone, as if the server had sent no message."""
    said = b'{"error": {"message": "overloaded, try the eu region", "type": "overloaded"}}'
    if encoding == "gzip":
        whole = zlib.compressobj(wbits=31)
        said_on_wire = whole.compress(said) + whole.flush(zlib.Z_SYNC_FLUSH)  # all of it inflates
    else:
        said_on_wire = said
    reply = functools.partial(Reply, status=503, headers={"content-encoding": encoding})
    error = _stalled(http_server, released, backend, mode, reply, said_on_wire)
    assert isinstance(error, ServerError)
    assert error.status_code == 503
    assert error.body == said.decode()
    assert error.provider_message == "overloaded, try the eu region"
    assert str(error).endswith(f": overloaded, try the eu region{STALLED}")


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
def test_an_error_body_stalled_inside_an_echoed_key_hides_its_start(
    http_server: ScriptedServer, released: list[threading.Event], backend: str, mode: str
) -> None:
    """A 401 echoing the key stops arriving six characters before the key's end, and the read
    timeout passes: what arrived of the key shows as ``***``, as in a cut body."""
    said = b'{"error": {"message": "Incorrect API key provided: ' + KEY[:-6].encode()
    reply = functools.partial(Reply, status=401)
    error = _stalled(http_server, released, backend, mode, reply, said)
    assert isinstance(error, toolfold.AuthenticationError)
    shown = '{"error": {"message": "Incorrect API key provided: ***'
    assert error.body == shown
    assert str(error).endswith(f"{shown}{STALLED}")
    assert KEY[:8] not in every_text(error)


# --- what is sent again -----------------------------------------------------------------


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
@pytest.mark.parametrize(
    ("retry", "sent"),
    [(0, 1), (RetryPolicy(retry_connection_errors=False), 1), (RetryPolicy(), 2)],
    ids=["retry=0", "no-connection-retries", "default"],
)
def test_a_request_the_server_read_is_resent_only_when_the_policy_says(
    http_server: ScriptedServer, backend: str, mode: str, retry: Any, sent: int
) -> None:
    """Reset after the server read the request: one attempt unless connection errors are retried."""
    http_server.add(Reply(reset=True), Reply(reset=True), Reply(reset=True))
    transport = make(http_server, backend, retry=retry, sleep=_no_sleep, sleep_sync=lambda _: None)
    with pytest.raises(ProviderConnectionError):
        call(transport, mode)
    assert len(http_server.requests) == (1 if sent == 1 else 3)


async def _no_sleep(_: float) -> None:
    pass


@pytest.mark.parametrize(("backend", "mode"), cases(("post-sync", "post-async")))
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_whole_answer_cut_before_its_end_says_so_and_is_not_sent_again(
    http_server: ScriptedServer, backend: str, mode: str, framing: str
) -> None:
    """A 200 whose body the connection cuts is a ProviderConnectionError saying the answer was cut.

    It read "cannot reach openai at ...": the server was reached and answered.
    The class, and the request sent once, are unchanged.
    """
    body = b'{"choices": [], "pad": "' + b"x" * 200 + b'"}'
    if framing == "chunked":
        reply = Reply(headers={"content-type": "application/json"}, chunks=[body[:100], Cut()])
    else:
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        reply = Reply(raw=head + b"content-length: %d\r\n\r\n" % len(body) + body[:100])
    http_server.add(reply, Reply(json={"sent": "again"}))
    transport = make(
        http_server, backend, retry=RetryPolicy(), sleep=_no_sleep, sleep_sync=lambda _: None
    )
    with pytest.raises(ProviderConnectionError) as caught:
        call(transport, mode)
    assert str(caught.value).startswith(f"the answer from openai at {http_server.url}/v1/")
    assert "was cut before it ended (" in str(caught.value)
    assert "cannot reach" not in str(caught.value)
    assert len(http_server.requests) == 1


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
@pytest.mark.parametrize("line", ["retry-after: 300", "x-should-retry: false"])
def test_a_header_sent_twice_still_keeps_the_request_from_being_sent_again(
    http_server: ScriptedServer, backend: str, mode: str, line: str
) -> None:
    """A 429 with ``retry-after: 300`` twice, or a 500 with ``x-should-retry: false`` twice, is not retried.

    httpx and httpx2 joined the two lines into one value ("false, false"),
    read as nonsense: the paid request was sent again at once (aiohttp read the first).
    """
    status = 429 if line.startswith("retry-after") else 500
    body = b'{"error": {"message": "slow down"}}'
    head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
    head += f"content-length: {len(body)}\r\n{line}\r\n{line}\r\n\r\n"
    http_server.add(Reply(raw=head.encode() + body), Reply(json={"sent": "again"}))
    transport = make(
        http_server, backend, retry=RetryPolicy(), sleep=_no_sleep, sleep_sync=lambda _: None
    )
    with pytest.raises(RateLimitError if status == 429 else ServerError) as caught:
        call(transport, mode)
    assert len(http_server.requests) == 1
    if status == 429:
        assert isinstance(caught.value, RateLimitError)
        assert caught.value.retry_after == 300.0


@pytest.mark.parametrize(("backend", "mode"), cases(("stream-sync", "stream-async")))
@pytest.mark.parametrize("encoding", [None, "gzip"])
def test_a_whole_answer_to_a_streamed_request_is_named_on_every_backend(
    http_server: ScriptedServer, backend: str, mode: str, encoding: str | None
) -> None:
    """A 200 JSON answer (a server ignoring "stream": true) to a stream is a StreamError quoting it.

    It read as a stream that ended without an event, and nothing showed what came instead.
    """
    answer = b'{"id": "c1", "choices": [{"message": {"content": "hi"}}]}'
    headers = {"content-type": "application/json"}
    if encoding:
        headers["content-encoding"] = encoding
    http_server.add(Reply(headers=headers, body=gzip.compress(answer) if encoding else answer))
    with pytest.raises(
        StreamError, match=r"not an event stream \(content-type: application/json\): '\{\"id"
    ) as caught:
        call(make(http_server, backend), mode)
    assert caught.value.body == answer.decode()


@pytest.mark.parametrize("at", [190, 1990])
@pytest.mark.parametrize("mode", ["stream-sync", "stream-async"])
def test_a_page_that_is_no_event_stream_never_shows_the_start_of_an_echoed_key(
    http_server: ScriptedServer, mode: str, at: int
) -> None:
    """A key echoed across the message's 200-character or the body's 2,000-character cut is masked.

    The text was cut before the key was looked for, and a cut key is no whole key to scrub.
    """
    page = f"<html>{'x' * (at - 13)}Bearer {KEY}</html>{'y' * 3000}"
    http_server.add(Reply(headers={"content-type": "text/html"}, body=page.encode()))
    with pytest.raises(StreamError, match="not an event stream") as caught:
        call(make(http_server, "httpx"), mode)
    shown = f"{caught.value} {caught.value.body}"
    assert KEY[:6] not in shown
    assert "Bearer ***" in shown


# --- answers that are not HTTP ---------------------------------------------------------

# Past h11's 100 KiB (httpx, httpx2) and aiohttp's 8,190 bytes: refused by every client.
LONG_LINE = b"x-long: " + b"a" * 200_000 + b"\r\n"
CHUNKED = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"

#: Answers whose head no HTTP/1.1 client may accept, each the connection's last bytes.
MALFORMED_HEADS = {
    "bad-status": b"HTTP/1.1 2OO OK\r\ncontent-length: 2\r\n\r\n{}",
    "negative-length": b"HTTP/1.1 200 OK\r\ncontent-length: -5\r\n\r\n{}",
    "plus-length": b"HTTP/1.1 200 OK\r\ncontent-length: +2\r\n\r\n{}",
    "underscore-length": b"HTTP/1.1 200 OK\r\ncontent-length: 1_0\r\n\r\n{}",
    "conflicting-lengths": b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
    "long-header": b"HTTP/1.1 200 OK\r\n" + LONG_LINE + b"content-length: 2\r\n\r\n{}",
    "unasked-101": b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n"
    b"connection: upgrade\r\n\r\n",
    "status-99": b"HTTP/1.1 099 Odd\r\ncontent-length: 2\r\n\r\n{}",
}  # fmt: skip

#: Answers whose head is fine and whose chunked body is not, sent with the head.
MALFORMED_BODIES = {
    "chunk-0x": CHUNKED + b"0x2\r\n{}\r\n0\r\n\r\n",
    "long-trailer": CHUNKED + b"2\r\n{}\r\n0\r\n" + LONG_LINE + b"\r\n",
}


def _malformed(server: ScriptedServer, backend: str, mode: str, raw: bytes) -> ProviderError:
    """What a call in ``mode`` raises when every answer is ``raw``, under the default retries."""
    server.handler = lambda _: Reply(raw=raw)
    transport = make(
        server, backend, retry=RetryPolicy(), sleep=_no_sleep, sleep_sync=lambda _: None
    )
    with pytest.raises(ProviderError) as caught:
        call(transport, mode)
    return caught.value


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
@pytest.mark.parametrize("kind", list(MALFORMED_HEADS))
def test_an_answer_that_is_not_http_is_a_connection_error_and_not_sent_again(
    http_server: ScriptedServer, backend: str, mode: str, kind: str
) -> None:
    """A malformed head (an unasked 101 too) is a ProviderConnectionError saying so on every
    client and mode, and the default policy does not send the request again: it was answered."""
    error = _malformed(http_server, backend, mode, MALFORMED_HEADS[kind])
    assert type(error) is ProviderConnectionError
    where = f"openai at {http_server.url}/v1/chat/completions"
    assert f"{where} sent a malformed HTTP answer: " in str(error)
    if kind == "unasked-101":
        assert "HTTP 101 (Switching Protocols)" in str(error)
    if kind == "status-99":  # h11 refuses it as a status; aiohttp hands it on as the answer
        assert "status_code should be in range [100, 200), not 99" in str(error) or (
            "HTTP 99 as its final answer" in str(error)
        )
    assert len(http_server.requests) == 1


@pytest.mark.parametrize(("backend", "mode"), cases(MODES))
@pytest.mark.parametrize("kind", list(MALFORMED_BODIES))
def test_a_body_that_is_not_http_is_refused_and_not_sent_again(
    http_server: ScriptedServer, backend: str, mode: str, kind: str
) -> None:
    """A bad chunk size or an over-long trailer: a ProviderConnectionError for a whole answer;
    a StreamError once a stream started (httpx, httpx2), while aiohttp, which parses the
    body's first bytes with its head, refuses the answer before any stream starts. Sent once."""
    error = _malformed(http_server, backend, mode, MALFORMED_BODIES[kind])
    streamed_past_head = mode.startswith("stream") and backend != "aiohttp"
    assert type(error) is (StreamError if streamed_past_head else ProviderConnectionError)
    assert len(http_server.requests) == 1


async def _astream_until_error(transport: Transport, first: threading.Event) -> BaseException:
    try:
        async for _ in transport.stream("chat/completions", {"m": 1}):
            first.set()
    except ProviderError as exc:
        return exc
    finally:
        await transport.aclose()
    raise AssertionError("the stream ended without an error")


def _stream_until_error(transport: Transport, mode: str, first: threading.Event) -> BaseException:
    """The error ending a stream in ``mode``; ``first`` is set once its first event arrived."""
    if mode == "stream-async":
        return asyncio.run(_astream_until_error(transport, first))
    try:
        for _ in transport.stream_sync("chat/completions", {"m": 1}):
            first.set()
    except ProviderError as exc:
        return exc
    finally:
        transport.close()
    raise AssertionError("the stream ended without an error")


@pytest.mark.parametrize(("backend", "mode"), cases(("stream-sync", "stream-async")))
@pytest.mark.parametrize("kind", list(MALFORMED_BODIES))
def test_a_stream_whose_framing_breaks_after_an_event_ends_with_a_stream_error(
    http_server: ScriptedServer,
    released: list[threading.Event],
    backend: str,
    mode: str,
    kind: str,
) -> None:
    """A bad chunk size or an over-long trailer once an event was read: a StreamError on every
    client. aiohttp put its parser's failure on the connection only, and the stream waited
    for ever (its read timeout stopped too): the total timeout here would have ended it."""
    first = gate(released)
    event = sse({"n": 1})[0]
    broken = MALFORMED_BODIES[kind].removeprefix(CHUNKED).removeprefix(b"2\r\n{}\r\n")
    http_server.add(
        Reply(raw=CHUNKED + b"%x\r\n%s\r\n" % (len(event), event), then=[first, broken])
    )
    transport = make(http_server, backend, timeout=Timeouts(read=10.0, total=10.0))
    error = _stream_until_error(transport, mode, first)
    assert type(error) is StreamError
    assert len(http_server.requests) == 1


#: Answers h11 (httpx, httpx2) reads and aiohttp refuses, each with what aiohttp says.
STRICTER_IN_AIOHTTP = {
    # RFC 9110 section 8.6 lets a recipient take or refuse a repeated equal Content-Length.
    "equal-lengths": (
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\n{}",
        "Duplicate Content-Length",
    ),
    # aiohttp's limit is 8,190 bytes a line; h11's is 100 KiB for the whole head.
    "9-kib-header": (
        b"HTTP/1.1 200 OK\r\nx-long: " + b"a" * 9000 + b"\r\ncontent-length: 2\r\n\r\n{}",
        "Got more than 8190 bytes",
    ),
}


@pytest.mark.parametrize(("backend", "mode"), cases(("post-sync", "post-async")))
@pytest.mark.parametrize("kind", list(STRICTER_IN_AIOHTTP))
def test_what_h11_reads_aiohttp_refuses_as_an_answer_that_is_not_http(
    http_server: ScriptedServer, backend: str, mode: str, kind: str
) -> None:
    """An equal repeated Content-Length or a 9 KiB header line: h11 reads the answer, aiohttp
    refuses it with the malformed answer's error (left as each parser draws its line)."""
    raw, said = STRICTER_IN_AIOHTTP[kind]
    if backend == "aiohttp":
        error = _malformed(http_server, backend, mode, raw)
        assert type(error) is ProviderConnectionError
        assert "sent a malformed HTTP answer" in str(error)
        assert said in str(error)
        assert len(http_server.requests) == 1
    else:
        http_server.add(Reply(raw=raw))
        assert call(make(http_server, backend), mode) == {}


# --- 1,000 failures of every kind leak nothing -------------------------------------------

# (A request never written, the fault matrix's reset-before, needs a run's own listener:
# the matrix has it. Here the server resets after reading: reset-after.)
KINDS = ["500", "429-ms", "reset-after", "cut-stream", "inband-error", "malformed-json", "big",
         "br", "bomb", "bad-status", "bad-length", "bad-chunk", "unasked-101",
         "endless-header", "endless-chunk-size", "endless-trailer"]  # fmt: skip
FAILURES = 1000
#: The error of each kind when posted, the same on every client; streamed, that or a
#: StreamError (a stream may have started before the fault showed).
FAILS_AS = {"500": ServerError, "429-ms": RateLimitError, "reset-after": ProviderConnectionError,
            "cut-stream": ProviderConnectionError, "inband-error": StreamError,
            "malformed-json": MalformedResponseError, "big": ProviderError, "br": ProviderError,
            "bomb": ProviderError, "bad-status": ProviderConnectionError,
            "bad-length": ProviderConnectionError, "bad-chunk": ProviderConnectionError,
            "unasked-101": ProviderConnectionError, "endless-header": ProviderConnectionError,
            "endless-chunk-size": ProviderConnectionError,
            "endless-trailer": ProviderConnectionError}  # fmt: skip
POOL = 2
#: Answers the transport hands over as they came, (kind, post or stream, backend or "*"):
#: what is wrong with them shows in the adapter above it, which raises (the fault matrix
#: checks it). Their connections come back all the same.
HANDED_OVER = {
    ("inband-error", "post", "*"),  # a 200 whose JSON is an error object
    ("malformed-json", "stream", "*"),  # an SSE event whose data is not JSON
    ("unasked-101", "stream", "aiohttp"),  # aiohttp reads a 101 as an empty body: no event
}
#: Cells left out, each a bug found and not yet fixed.
# aiohttp with max_body_bytes set: after two errors in a chunked body's lines ("Chunk
# size overflow", "Got more than 8190 bytes" in a trailer) on the pool's two
# connections, a later call hangs; neither the read nor the pool timeout ends it.
# Without max_body_bytes the same calls fail at once, as on httpx and httpx2.
LEFT_OUT: set[tuple[str, str]] = set()


@pytest.mark.once  # 1,000 requests per cell: the load is the subject; first Python only
@pytest.mark.timeout(300)  # 1-10 s a cell on a loaded 2-core machine
@pytest.mark.parametrize(
    ("kind", "backend", "mode"),
    [
        pytest.param(kind, *case.values, id=f"{kind}-{case.id}")
        for kind in KINDS
        for case in cases(MODES)
        if (kind, case.values[0]) not in LEFT_OUT
    ],
)
def test_a_thousand_failures_leak_nothing(
    fault_url: str, backend: str, mode: str, kind: str
) -> None:
    """1,000 failures of a kind on a 2-connection pool leave both connections free (two calls
    the server answers only once both have arrived get through) and fds and threads as before.

    Each call raises its kind's class (`FAILS_AS`; streamed, that or a StreamError), or for
    the answers in `HANDED_OVER` returns.

    A leaked connection would leave one free: the second of the two calls would wait for
    the pool and fail with its timeout, ProviderTimeoutError, instead of the answer.
    """
    before = resources()
    transport = Transport(
        "openai",
        fault_url,
        KEY,
        http=backend,
        retry=0,
        timeout=Timeouts(pool=5.0),
        limits=HttpLimits(max_connections=POOL, max_body_bytes=65536, max_decoded_bytes=2**17),
    )
    fail = {"x-fault": kind}
    what, flavour = mode.split("-")
    body = {"stream": True} if what == "stream" else {}
    handed_over = bool({(kind, what, "*"), (kind, what, backend)} & HANDED_OVER)
    failures = 0
    raised: set[type[ProviderError]] = set()  # the classes the failures had
    if flavour == "sync":
        for _ in range(FAILURES):
            try:
                if what == "stream":
                    list(transport.stream_sync("chat/completions", body, headers=fail))
                else:
                    transport.post_json_sync("chat/completions", body, headers=fail)
            except ProviderError as error:
                failures += 1
                raised.add(type(error))
            else:
                failures += handed_over
        answers = _whole_pool_sync(transport)
        transport.close()
    else:

        async def run() -> list[Any]:
            nonlocal failures
            for _ in range(FAILURES):
                try:
                    if what == "stream":
                        async for _ in transport.stream("chat/completions", body, headers=fail):
                            pass
                    else:
                        await transport.post_json("chat/completions", body, headers=fail)
                except ProviderError as error:
                    failures += 1
                    raised.add(type(error))
                else:
                    failures += handed_over
            try:
                return await _whole_pool(transport)
            finally:
                await transport.aclose()

        answers = asyncio.run(run())
    assert failures == FAILURES
    # Streamed, the same fault is the one or the other as it comes (aiohttp reads a body's
    # first bytes with the head when they arrive together: docs, "where the parsers differ").
    expected = {FAILS_AS[kind]} if what == "post" else {FAILS_AS[kind], StreamError}
    assert raised <= expected
    assert answers == ["The sum is 5."] * POOL
    assert resources() == before


def _barrier() -> dict[str, str]:
    """Headers of a call ``fault_server`` holds until `POOL` calls with the same headers are held."""
    return {"x-fault": f"barrier-{POOL}", "x-barrier": uuid.uuid4().hex}


def _whole_pool_sync(transport: Transport) -> list[Any]:
    """`POOL` blocking calls at once (threads that end before this returns), each held until all arrived."""
    headers = _barrier()
    with concurrent.futures.ThreadPoolExecutor(POOL) as threads:
        calls = [
            threads.submit(transport.post_json_sync, "chat/completions", {}, headers=headers)
            for _ in range(POOL)
        ]
    return [call.result()["choices"][0]["message"]["content"] for call in calls]


async def _whole_pool(transport: Transport) -> list[Any]:
    """`POOL` async calls at once, each held by the server until all have arrived."""
    headers = _barrier()
    calls = [transport.post_json("chat/completions", {}, headers=headers) for _ in range(POOL)]
    return [answer["choices"][0]["message"]["content"] for answer in await asyncio.gather(*calls)]


# --- configuration checked when the model is built ------------------------------------------


BAD_OPTIONS = [
    ({"headers": {"x-a": "one\r\nx-b: two"}}, r"headers\['x-a'\].*CR, LF or NUL"),
    ({"headers": {"x-a": "nul\x00"}}, r"headers\['x-a'\].*CR, LF or NUL"),
    # A non-ASCII header value is sent as UTF-8 (see below), but no key has one: a paste error.
    ({"api_key": "sk-clé"}, r"api_key: the value has non-ASCII characters"),
    # What no backend can encode, or a C1 control character (U+0085 NEL).
    ({"headers": {"x-a": "caf\udce9"}}, r"headers\['x-a'\].*a lone surrogate"),
    ({"headers": {"x-a": "a\x85b"}}, r"headers\['x-a'\].*a control character"),
    ({"headers": {"x a": "v"}}, r"headers: 'x a' is not a valid HTTP header name"),
    ({"headers": {"x-a\n": "v"}}, r"headers: 'x-a\\n' is not a valid HTTP header name"),
    ({"api_key": "sk-abc\ndef"}, r"api_key: the value contains CR, LF or NUL"),
    ({"api_key": "sk-ключ"}, r"api_key: the value has non-ASCII characters"),
    # A credential given as a header is checked as api_key is: it was sent as UTF-8.
    ({"headers": {"api-key": "sk-clé"}}, r"headers\['api-key'\]: the value has non-ASCII"),
    (
        # (no api_key: with one, the header the key goes in is refused itself)
        {"headers": {"Authorization": "Bearer sk-clé"}, "api_key": None},
        r"'Authorization'\]: the value has non-ASCII",
    ),
    ({"headers": {"x-api-key": "sk-clé"}}, r"headers\['x-api-key'\]: the value has non-ASCII"),
    ({"headers": {"x-goog-api-key": "sk-clé"}}, r"'x-goog-api-key'\]: the value has non-ASCII"),
    ({"headers": {"x-a": Secret("sk-clé")}}, r"headers\['x-a'\]: the value has non-ASCII"),
    # Other control characters (not HTAB): sent raw, refused by h11 at send, or a bare ValueError.
    ({"headers": {"x-a": "a\x0bb"}}, r"headers\['x-a'\].*a control character"),
    ({"headers": {"x-a": "a\x7fb"}}, r"headers\['x-a'\].*a control character"),
    ({"api_key": "sk-abc\x01def"}, r"api_key: the value contains a control character"),
    ({"headers": {"Content-Length": "5"}}, r"headers: 'Content-Length' is set by the transport"),
    ({"headers": {"transfer-encoding": "chunked"}}, r"'transfer-encoding' is set by the transport"),
    ({"headers": {"Connection": "close"}}, r"headers: 'Connection' is set by the transport"),
    ({"headers": {"X-Team": "a", "x-team": "b"}}, r"headers: 'x-team' is given twice"),
    ({"base_url": "http://exa mple.com/v1"}, r"base_url .* spaces"),
    ({"base_url": "http://ünï.example/v1"}, r"base_url .*non-ASCII"),
    ({"base_url": "ftp://example.com/v1"}, r"base_url .*http:// or https://"),
    ({"base_url": "http:///v1"}, r"base_url .*name a host"),
    ({"base_url": "http://example.com:99999/v1"}, r"base_url .*not a valid URL"),
    # Basic credentials in the URL take the Authorization header the key goes in:
    # httpx sent them instead of the key, aiohttp raised a bare ValueError.
    ({"base_url": "http://alice:pw-1234@127.0.0.1:9/v1"}, r"base_url carries user:password@"),
    (
        # (no api_key: with one, the header the key goes in is refused itself)
        {
            "base_url": "http://alice@127.0.0.1:9/v1",
            "headers": {"Authorization": "Bearer x"},
            "api_key": None,
        },
        r"base_url carries user:password@",
    ),
]


@pytest.mark.parametrize("backend", OWNED)
@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_bad_headers_keys_and_urls_are_refused_when_the_model_is_built(
    http_server: ScriptedServer, backend: str, options: dict[str, Any], message: str
) -> None:
    """A ModelConfigError names the option (never the key) before any connection is opened."""
    options = {"base_url": f"{http_server.url}/v1", "api_key": KEY, **options}
    with pytest.raises(ModelConfigError, match=message) as caught:
        toolfold.model("openai:m", http=backend, **options)
    assert "sk-abc" not in str(caught.value)
    assert "ключ" not in str(caught.value)
    assert "clé" not in str(caught.value)
    assert "été" not in str(caught.value)
    assert "pw-1234" not in str(caught.value)
    assert http_server.connections == 0


TITLE = "Mon appli été ✓"
TITLE_SENT = b"x-title: Mon appli \xc3\xa9t\xc3\xa9 \xe2\x9c\x93\r\n"


@pytest.mark.parametrize("backend", OWNED)
@pytest.mark.parametrize("mode", ["sync", "async", "stream-async", "per-request"])
def test_a_non_ascii_header_value_is_sent_as_utf8_on_every_backend(
    http_server: ScriptedServer, backend: str, mode: str
) -> None:
    """headers={'X-Title': 'Mon appli été ✓'} reaches the server UTF-8 encoded, blocking and async.

    aiohttp sent it so on async calls; httpx and httpx2 (and so the blocking
    calls of an aiohttp model) failed every call with a UnicodeEncodeError.
    """
    per_request = mode == "per-request"
    title = {"X-Title": TITLE}
    transport = Transport(
        "openai", f"{http_server.url}/v1", KEY, http=backend, headers=None if per_request else title
    )
    if mode == "stream-async":
        http_server.add(Reply(chunks=sse({"a": 1})))

        async def stream() -> list[Any]:
            async with transport:
                return [event async for event in transport.stream("chat", {"m": 1})]

        assert len(asyncio.run(stream())) == 1
    elif per_request:
        http_server.add(Reply(json={"ok": 1}))

        async def post() -> Any:
            async with transport:
                return await transport.post_json("chat", {"m": 1}, headers=title)

        assert asyncio.run(post()) == {"ok": 1}
    else:
        http_server.add(Reply(json={"ok": 1}))
        assert post_once(transport, mode) == {"ok": 1}
    assert TITLE_SENT in http_server.requests[-1].head


@pytest.mark.parametrize("name", ["Helicone-Session-Name", "x-portkey-metadata", "X-Author"])
def test_a_non_ascii_value_of_a_header_named_like_a_credential_is_sent(
    http_server: ScriptedServer, name: str
) -> None:
    """Only headers that hold nothing but a credential must be ASCII: a session name or
    metadata whose header name has "session", "key" or "auth" in it is sent UTF-8 (the wide
    rule that hides such values refused them)."""
    http_server.add(Reply(json={"ok": 1}))
    transport = Transport("openai", f"{http_server.url}/v1", KEY, headers={name: TITLE})
    assert post_once(transport, "sync") == {"ok": 1}
    assert TITLE_SENT.replace(b"x-title", name.lower().encode()) in http_server.requests[-1].head


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_non_ascii_header_value_is_sent_as_utf8_by_an_injected_httpx_client(
    http_server: ScriptedServer, mode: str
) -> None:
    """A user's own httpx client (its requests go through its send) is given the UTF-8 bytes too."""
    import httpx

    http_server.add(Reply(json={"ok": 1}))
    url = f"{http_server.url}/v1"
    if mode == "sync":
        with httpx.Client() as client:
            transport = Transport(
                "openai", url, KEY, http_client=client, headers={"X-Title": TITLE}
            )
            assert transport.post_json_sync("chat", {"m": 1}) == {"ok": 1}
    else:

        async def run() -> Any:
            async with httpx.AsyncClient() as client:
                transport = Transport(
                    "openai", url, KEY, http_client=client, headers={"X-Title": TITLE}
                )
                return await transport.post_json("chat", {"m": 1})

        assert asyncio.run(run()) == {"ok": 1}
    assert TITLE_SENT in http_server.requests[-1].head


@pytest.mark.parametrize("backend", OWNED)
def test_an_agent_with_a_non_ascii_header_runs_blocking_and_async(
    http_server: ScriptedServer, backend: str
) -> None:
    """The reviewer's setup: an agent's model with headers={'X-Title': 'Mon appli été'}, run and arun."""
    answer = {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
    }
    http_server.add(Reply(json=answer), Reply(json=answer))
    model = toolfold.model(
        "openai:m",
        base_url=f"{http_server.url}/v1",
        api_key=KEY,
        http=backend,
        headers={"X-Title": "Mon appli été"},
    )
    agent = toolfold.Agent(model)
    assert agent.run("x").text == "ok"
    assert asyncio.run(agent.arun("x")).text == "ok"
    assert len(http_server.requests) == 2
    for request in http_server.requests:
        assert b"x-title: Mon appli \xc3\xa9t\xc3\xa9\r\n" in request.head


def test_a_non_ascii_auth_header_name_is_refused_when_the_transport_is_made() -> None:
    """auth_header names a header: sent as ASCII by every client, so 'x-clé' is refused at once."""
    with pytest.raises(
        ModelConfigError,
        match=r"auth_header: 'x-clé' has non-ASCII characters, which a header name cannot have",
    ):
        Transport("openai", "http://127.0.0.1:9/v1", KEY, auth_header="x-clé")


@pytest.mark.parametrize("name", ["x a", "x:a", "x\ta", ""])
def test_an_auth_header_that_is_no_header_name_is_refused_when_the_transport_is_made(
    name: str,
) -> None:
    """auth_header is checked as a header name: 'x a' or 'x:a' was built and failed at the call."""
    with pytest.raises(
        ModelConfigError, match=rf"^auth_header: {re.escape(repr(name))} is not a valid HTTP header"
    ):
        Transport("openai", "http://127.0.0.1:9/v1", KEY, auth_header=name)


def test_an_unknown_backend_is_refused() -> None:
    """http= names one of the backends."""
    with pytest.raises(ModelConfigError, match="httpx, httpx2, aiohttp"):
        toolfold.model("openai:m", base_url="http://127.0.0.1:9/v1", api_key=KEY, http="curl")


#: Base URLs each provider's model refuses: a request path joined to the first two
#: went into the query (``POST /v1?x=1/chat/completions``); ``""`` read as none and
#: fell back to the provider's own host.
BAD_BASE_URLS = [
    # (a query value or fragment is quoted masked: a key may be written there)
    ("{root}/v1?x=1", r"base_url '[^']*/v1\?x=\*\*\*' must not have a \?query"),
    ("{root}/v1?", r"base_url '[^']*/v1\?' must not have a \?query"),
    ("{root}/v1#top", r"base_url '[^']*/v1#\*\*\*' must not have a #fragment"),
    ("{root}/v1#", r"base_url '[^']*/v1#' must not have a #fragment"),
    ("{root}/v%zz1", r"base_url '[^']*/v%zz1' has a % that is not followed by two hex digits"),
    ("{root}/v1%2", r"base_url '[^']*/v1%2' has a % that is not followed by two hex digits"),
    ("http://127.0.0.1:0/v1", r"base_url 'http://127.0.0.1:0/v1' names port 0"),
    ("", r"base_url is empty"),
]
PROVIDERS = [
    "openai:m",
    "groq:m",
    "openai-responses:m",
    "anthropic:claude-x",
    "gemini:g",
    "ollama:l",
]


@pytest.mark.parametrize("model", PROVIDERS)
@pytest.mark.parametrize(("url", "message"), BAD_BASE_URLS)
def test_a_base_url_requests_cannot_be_joined_to_is_refused_when_the_model_is_built(
    http_server: ScriptedServer, model: str, url: str, message: str
) -> None:
    """A query, fragment, bad percent escape, port 0 or empty base URL is a ModelConfigError
    naming base_url and the problem, before any connection, for every provider."""
    with pytest.raises(ModelConfigError, match=message):
        toolfold.model(model, base_url=url.format(root=http_server.url), api_key=KEY)
    assert http_server.connections == 0


def test_a_query_in_the_base_url_is_told_where_a_query_parameter_goes() -> None:
    """Azure's ?api-version= in base_url is told to use the v1 API or a client's params= (it
    was told to send it in headers=, which Azure does not read it from)."""
    url = "https://r.openai.azure.com/openai/deployments/gpt4o?api-version=2024-10-21"
    with pytest.raises(ModelConfigError) as raised:
        toolfold.model("openai-compatible:gpt4o", base_url=url, headers={"api-key": KEY})
    message = str(raised.value)
    assert "http_client=httpx.Client(params={'api-version': ...})" in message
    assert "base_url='https://<resource>.openai.azure.com/openai/v1'" in message
    assert "send what it carries in headers= instead" not in message
    assert "2024-10-21" not in message
    assert KEY not in message


@pytest.mark.parametrize("model", PROVIDERS)
def test_a_base_url_with_a_percent_escape_is_taken(model: str) -> None:
    """A well-formed escape (``%2F``, ``%7e``) is no bad escape: the model is built."""
    built = toolfold.model(model, base_url="http://127.0.0.1:9/v1%2Fx/%7e", api_key=KEY)
    assert built.base_url == "http://127.0.0.1:9/v1%2Fx/%7e"


#: Options of the wrong type: each raised a bare AttributeError or TypeError from
#: deep in the transport (``'int' object has no attribute 'strip'``).
WRONG_TYPES = [
    ({"api_key": 123}, r"^api_key for provider '[\w-]+' must be a string or a Secret, not int$"),
    ({"api_key": ["sk-k"]}, r"must be a string or a Secret, not list$"),
    ({"api_key": 1.5}, r"must be a string or a Secret, not float$"),
    ({"headers": "x"}, r"^headers must be a mapping of header names to values.*, not str$"),
    ({"headers": [("a", "b")]}, r"^headers must be a mapping .*, not list$"),
    ({"base_url": 123}, r"^base_url must be a string, not int$"),
    ({"base_url": b"http://127.0.0.1:9/v1"}, r"^base_url must be a string, not bytes$"),
    ({"limits": "x"}, r"^limits must be an HttpLimits .*, not str$"),
    ({"limits": {"max_connections": 1}}, r"^limits must be an HttpLimits .*, not dict$"),
]


@pytest.mark.parametrize(
    "model",
    [
        "openai-compatible:m",
        "openai:m",
        "anthropic:m",
        "gemini:m",
        "ollama:m",
        "openai-responses:m",
    ],
)
@pytest.mark.parametrize(("options", "message"), WRONG_TYPES)
def test_an_option_of_the_wrong_type_is_a_model_config_error_naming_it(
    model: str, options: dict[str, Any], message: str
) -> None:
    """api_key, headers, base_url and limits of the wrong type are refused by name, on every provider."""
    options = {"base_url": "http://127.0.0.1:9/v1", "api_key": KEY, **options}
    with pytest.raises(ModelConfigError, match=message) as caught:
        toolfold.model(model, **options)
    assert "sk-k" not in str(caught.value)


@pytest.mark.parametrize("http", [backend for backend in OWNED if backend != "httpx"])
def test_a_call_finding_no_free_connection_within_the_pool_timeout_says_so(
    http_server: ScriptedServer, released: list[threading.Event], http: str
) -> None:
    """A pool-wait timeout names the pool, not a connection to the server (aiohttp as httpx2).

    (httpx leaves out: it does not apply its pool timeout to async calls.)
    """
    hold = gate(released)
    http_server.handler = lambda request: Reply(json={"ok": 1}, delay_headers=hold)
    transport = Transport(
        "openai",
        http_server.url,
        KEY,
        http=http,
        retry=0,
        timeout=Timeouts(pool=0.05),
        limits=HttpLimits(max_connections=1),
    )

    async def second_waits_for_the_first() -> ProviderTimeoutError:
        first = asyncio.ensure_future(transport.post_json("x", {}))
        await asyncio.to_thread(http_server.wait_request)  # the one connection is in use
        try:
            with pytest.raises(ProviderTimeoutError) as caught:
                await transport.post_json("x", {})
        finally:
            hold.set()
            assert await first == {"ok": 1}
            await transport.aclose()
        return caught.value

    error = asyncio.run(second_waits_for_the_first())
    assert "no free connection" in str(error)
    assert "within the pool timeout" in str(error)
