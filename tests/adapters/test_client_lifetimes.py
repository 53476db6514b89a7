"""The clients a transport makes, used from several event loops and threads, closed and reused.

Over real sockets on 127.0.0.1 (`scripted_http`): every wait is on an event
or a request the server received, never on time.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from backends import OWNED, STREAMED, cases
from child_processes import in_forked_child
from scripted_http import Cut, Recorded, Reply, ScriptedServer, sse

from toolfold import UsageError
from toolfold.adapters._http._transport import Transport

KEY = "sk-test-key-0123456789"


class LoopThread:
    """An event loop running forever in a thread of its own (a server's, a notebook's)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def submit(self, coroutine: Any) -> Any:
        """``coroutine`` run on the loop: a concurrent future."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def settle(self) -> None:
        """Wait until the loop has run what was scheduled on it so far (a few passes)."""
        for _ in range(5):
            self.submit(asyncio.sleep(0)).result(timeout=10)

    def stop(self) -> None:
        self.submit(self.loop.shutdown_asyncgens()).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    """A loop running in another thread, stopped (its async generators shut down) after the test."""
    running = LoopThread()
    try:
        yield running
    finally:
        running.stop()


def _transport(server: ScriptedServer, http: str, **options: Any) -> Transport:
    return Transport("openai", f"{server.url}/v1", KEY, http=http, **options)


@pytest.mark.parametrize("http", OWNED)
def test_a_loop_in_another_thread_keeps_its_client_while_a_call_is_in_flight(
    http_server: ScriptedServer, loop_thread: LoopThread, http: str
) -> None:
    """A second loop's first call does not close the first loop's client under its call."""
    hold = threading.Event()
    first = [True]

    def answer(request: Recorded) -> Reply:
        if first[0]:
            first[0] = False
            return Reply(json={"n": 1}, delay_headers=hold)
        return Reply(json={"n": 2})

    http_server.handler = answer
    transport = _transport(http_server, http)
    in_flight = loop_thread.submit(transport.post_json("x", {}))
    try:
        http_server.wait_request()  # the first loop's call is at the server
        assert asyncio.run(transport.post_json("x", {})) == {"n": 2}  # another loop, ended
        loop_thread.settle()  # whatever the second loop scheduled on the first has run
    finally:
        hold.set()
    assert in_flight.result(timeout=10) == {"n": 1}
    # The first loop's client is still open, and still its own.
    assert loop_thread.submit(transport.post_json("x", {})).result(timeout=10) == {"n": 2}
    loop_thread.submit(transport.aclose()).result(timeout=10)


def test_threads_first_blocking_calls_at_once_make_one_client(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight threads' first blocking calls, released together, share one client; close() closes it."""
    from toolfold.adapters._http import _clients

    made: list[Any] = []
    real = _clients.make_sync

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(_clients, "make_sync", counted)
    http_server.handler = lambda request: Reply(json={"ok": 1})
    transport = _transport(http_server, "httpx")
    start = threading.Barrier(8)

    def first_call() -> Any:
        start.wait(timeout=10)
        return transport.post_json_sync("x", {})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: first_call(), range(8)))
    transport.close()
    assert answers == [{"ok": 1}] * 8
    assert len(made) == 1
    assert made[0].client.is_closed


def test_a_closed_blocking_client_is_freed_when_the_transport_is_reused(
    http_server: ScriptedServer,
) -> None:
    """Call, close(), call again: each closed client is freed, not kept by its finaliser."""
    http_server.handler = lambda request: Reply(json={"ok": 1})
    transport = _transport(http_server, "httpx")
    closed: list[weakref.ref[Any]] = []
    for _ in range(3):
        assert transport.post_json_sync("x", {}) == {"ok": 1}
        closed.append(weakref.ref(transport._sender.clients.get_sync().client))
        transport.close()
    gc.collect()
    assert [ref() for ref in closed] == [None, None, None]


def _is_closed(backend: Any) -> bool:
    session = getattr(backend, "session", None)
    return bool(session.closed if session is not None else backend.client.is_closed)


def test_aclose_from_another_loop_names_the_idle_loop_owning_an_aiohttp_session(
    http_server: ScriptedServer,
) -> None:
    """An aiohttp session of a loop that is not running: aclose() elsewhere is a UsageError; its loop closes it."""
    http_server.handler = lambda request: Reply(json={"ok": 1})
    transport = _transport(http_server, "aiohttp")
    owner = asyncio.new_event_loop()
    try:
        assert owner.run_until_complete(transport.post_json("x", {})) == {"ok": 1}
        (backend,) = [entry[0] for entry in transport._sender.clients._loops.values()]
        with pytest.raises(UsageError, match="only on the loop it was opened on") as caught:
            asyncio.run(transport.aclose())
        assert repr(owner) in str(caught.value)
        assert not _is_closed(backend)
        owner.run_until_complete(transport.aclose())
        assert _is_closed(backend)
    finally:
        owner.run_until_complete(owner.shutdown_asyncgens())
        owner.close()


@pytest.mark.parametrize("http", OWNED)
def test_aclose_closes_the_client_of_a_loop_running_in_another_thread(
    http_server: ScriptedServer, loop_thread: LoopThread, http: str
) -> None:
    """aclose() on one loop closes another running loop's client, on that loop."""
    http_server.handler = lambda request: Reply(json={"ok": 1})
    transport = _transport(http_server, http)
    assert loop_thread.submit(transport.post_json("x", {})).result(timeout=10) == {"ok": 1}
    (backend,) = [entry[0] for entry in transport._sender.clients._loops.values()]
    asyncio.run(transport.aclose())
    loop_thread.settle()
    assert _is_closed(backend)


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.mark.parametrize("http", OWNED)
def test_aclose_during_a_call_is_a_usage_error_and_nothing_is_sent_again(
    http_server: ScriptedServer, http: str
) -> None:
    """The model closed under an async call: a UsageError saying so, no retry sent."""
    hold = threading.Event()
    http_server.handler = lambda request: Reply(json={"ok": 1}, delay_headers=hold)
    transport = _transport(http_server, http, retry=3, sleep=_no_sleep)

    async def close_under_the_call() -> None:
        call = asyncio.ensure_future(transport.post_json("x", {}))
        await asyncio.to_thread(http_server.wait_request)
        await transport.aclose()
        with pytest.raises(UsageError, match=r"closed .* while its call to openai was in flight"):
            await call

    try:
        asyncio.run(close_under_the_call())
    finally:
        hold.set()
    assert len(http_server.requests) == 1


@pytest.mark.parametrize("http", [name for name in OWNED if name != "aiohttp"])
def test_close_during_a_blocking_call_is_a_usage_error_and_nothing_is_sent_again(
    http_server: ScriptedServer, http: str
) -> None:
    """The model closed under a blocking call in another thread: a UsageError saying so, no retry.

    (A blocking read is not woken by the close: the server then drops the
    connection, which would be retried on an open client.)
    """
    hold = threading.Event()
    http_server.handler = lambda request: Reply(stall=hold)
    transport = _transport(http_server, http, retry=3, sleep_sync=lambda seconds: None)
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(transport.post_json_sync, "x", {})
        try:
            http_server.wait_request()
            transport.close()
            hold.set()
            with pytest.raises(
                UsageError, match=r"closed .* while its call to openai was in flight"
            ):
                call.result(timeout=10)
        finally:
            hold.set()
    assert len(http_server.requests) == 1


CLOSED_DURING = r"closed .* while its call to openai was in flight"


@pytest.mark.parametrize(("http", "mode"), cases(STREAMED))
def test_closing_the_model_while_a_body_is_read_fails_the_call_with_a_usage_error(
    http_server: ScriptedServer, http: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close()/aclose() while an answer's body (whole or streamed) is read: the documented UsageError."""
    from toolfold.adapters._http._sender import Sender

    hold = threading.Event()
    first, rest = (
        (sse({"n": 1}), sse({"n": 2})) if mode.startswith("stream") else ([b'{"ok":'], [b"1}"])
    )
    # (Cut: a blocking read the close does not wake ends as the connection then breaks)
    http_server.handler = lambda request: Reply(chunks=[*first, hold, *rest, Cut()])
    transport = _transport(http_server, http, retry=3, sleep=_no_sleep, sleep_sync=lambda s: None)
    reading = threading.Event()  # the body's reading began: the head was read
    on_loop: list[asyncio.Event] = []  # the same, for an async call (set on its loop)
    real = Sender._reader

    def reader(self: Sender, response: Any, call: Any) -> Any:
        reading.set()
        for event in on_loop:
            event.set()
        return real(self, response, call)

    monkeypatch.setattr(Sender, "_reader", reader)

    async def close_under_async() -> None:
        if mode == "stream-async":
            events = transport.stream("x", {})
            assert (await asyncio.wait_for(events.__anext__(), 10)).data == '{"n": 1}'
            await transport.aclose()
            with pytest.raises(UsageError, match=CLOSED_DURING):
                await asyncio.wait_for(events.__anext__(), 10)  # (a hang fails here)
            return
        on_loop.append(asyncio.Event())
        call = asyncio.ensure_future(transport.post_json("x", {}))
        await asyncio.wait_for(on_loop[0].wait(), 10)
        await transport.aclose()
        with pytest.raises(UsageError, match=CLOSED_DURING):
            await asyncio.wait_for(call, 10)

    try:
        if mode.endswith("async"):
            asyncio.run(close_under_async())
        elif mode == "stream-sync":
            events = transport.stream_sync("x", {})
            assert next(events).data == '{"n": 1}'
            transport.close()
            hold.set()
            with pytest.raises(UsageError, match=CLOSED_DURING):
                next(events)
        else:
            with ThreadPoolExecutor(1) as pool:
                future = pool.submit(transport.post_json_sync, "x", {})
                assert reading.wait(10)
                transport.close()
                hold.set()
                with pytest.raises(UsageError, match=CLOSED_DURING):
                    future.result(timeout=10)
    finally:
        hold.set()
    assert len(http_server.requests) == 1  # never sent again


def _ssl_context(backend: Any) -> Any:
    return backend.client._transport._pool._ssl_context


@pytest.mark.parametrize("http", [name for name in OWNED if name != "aiohttp"])
def test_new_models_share_one_ssl_context_unless_the_certificate_settings_change(
    http_server: ScriptedServer, http: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new model's client reuses the SSL context (no 30-60 ms build on the loop); SSL_CERT_FILE changes it."""
    import certifi

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    http_server.handler = lambda request: Reply(json={"ok": 1})

    async def async_client_context() -> Any:
        transport = _transport(http_server, http)
        try:
            assert await transport.post_json("x", {}) == {"ok": 1}
            return _ssl_context(transport._sender.clients.ready_async())
        finally:
            await transport.aclose()

    first, second = asyncio.run(async_client_context()), asyncio.run(async_client_context())
    blocking = _transport(http_server, http)
    assert blocking.post_json_sync("x", {}) == {"ok": 1}
    assert first is second is _ssl_context(blocking._sender.clients.get_sync())
    blocking.close()
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    assert asyncio.run(async_client_context()) is not first


@pytest.mark.parametrize("trust_env", [True, False])
@pytest.mark.parametrize("http", [name for name in OWNED if name != "aiohttp"])
def test_the_shared_ssl_context_follows_sslkeylogfile_whatever_trust_env(
    http_server: ScriptedServer,
    http: str,
    trust_env: bool,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    """After SSLKEYLOGFILE is set, a new client's SSL context logs keys as its package's own would."""
    import importlib

    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)
    first = _transport(http_server, http, trust_env=trust_env)
    before = _ssl_context(first._sender.clients.get_sync())
    first.close()
    keys = str(tmp_path / "keys.log")
    monkeypatch.setenv("SSLKEYLOGFILE", keys)
    second = _transport(http_server, http, trust_env=trust_env)
    after = _ssl_context(second._sender.clients.get_sync())
    second.close()
    package = importlib.import_module(http)
    own = package.create_ssl_context(trust_env=trust_env).keylog_filename
    assert before.keylog_filename is None
    assert after.keylog_filename == own
    if http == "httpx":  # (ssl.create_default_context reads it; httpx2 without trust_env does not)
        assert own == keys


@pytest.mark.parametrize(("http", "mode"), cases())
def test_a_forked_child_opens_its_own_connections_and_reads_its_own_answers(
    http_server: ScriptedServer, http: str, mode: str
) -> None:
    """After os.fork() the child's calls use new connections, not the parent's pooled ones."""
    http_server.handler = lambda request: Reply(json=request.json())  # each its own body
    transport = _transport(http_server, http)
    loop = asyncio.new_event_loop()  # kept by the parent across the fork, as a kept loop is

    def call(body: dict[str, Any]) -> Any:
        if mode == "sync":
            return transport.post_json_sync("x", body)
        return loop.run_until_complete(transport.post_json("x", body))

    try:
        assert call({"who": "parent"}) == {"who": "parent"}  # a keep-alive connection pooled
        assert in_forked_child(lambda: call({"who": "child"})) == {"value": {"who": "child"}}
        assert http_server.connections == 2  # the child's own
        assert call({"who": "parent again"}) == {"who": "parent again"}
        assert http_server.connections == 2  # the parent's connection still works
    finally:
        transport.close()
        loop.run_until_complete(transport.aclose())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


@pytest.mark.parametrize("http", OWNED)
def test_a_transport_dropped_inside_asyncio_run_closes_all_its_pooled_connections(
    http_server: ScriptedServer, http: str
) -> None:
    """A transport made and dropped inside ``asyncio.run`` after concurrent calls leaves no socket unclosed."""
    all_in = threading.Event()
    arrived: list[Recorded] = []

    def answer(request: Recorded) -> Reply:
        arrived.append(request)
        if len(arrived) == 8:
            all_in.set()
        return Reply(json={"ok": 1}, delay_headers=all_in)  # eight connections open at once

    http_server.handler = answer

    async def main() -> None:
        transport = _transport(http_server, http)
        await asyncio.gather(*[transport.post_json("x", {}) for _ in range(8)])
        # (dropped here: its client is closed as asyncio.run shuts the loop down)

    def child() -> list[str]:
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            asyncio.run(main())
            gc.collect()
        return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]

    assert in_forked_child(child) == {"value": []}
    assert http_server.connections == 8


def test_a_close_that_hangs_at_loop_end_is_cut_and_the_loop_shuts_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client whose close never ends is cancelled after CLOSE_GRACE: asyncio.run still returns."""
    from toolfold.adapters._http import _backends

    monkeypatch.setattr(_backends, "CLOSE_GRACE", 0.01)
    cut: list[str] = []

    class Hung:
        def __init__(self, name: str) -> None:
            self.name = name

        async def aclose(self) -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cut.append(self.name)
                raise

    kept: list[Any] = []

    async def main() -> None:
        dropped = _backends.close_when_loop_ends(Hung("dropped"), lambda: None)
        await dropped.__anext__()  # finalised as main returns, closed among the cancelled tasks
        kept.append(_backends.close_when_loop_ends(Hung("kept"), lambda: None))
        await kept[0].__anext__()  # closed by the shutdown of async generators

    def child() -> list[str]:
        asyncio.run(main())
        return sorted(cut)

    assert in_forked_child(child) == {"value": ["dropped", "kept"]}


def test_an_explicit_aclose_whose_close_hangs_is_a_timeout_error_not_a_stray_cancel(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """await aclose() whose client close hangs: a TimeoutError saying how long it waited; its caller goes on."""
    from toolfold.adapters._http import _backends

    monkeypatch.setattr(_backends, "CLOSE_GRACE", 0.01)
    http_server.handler = lambda request: Reply(json={"ok": 1})
    transport = _transport(http_server, "httpx")

    async def hung(backend: Any) -> None:
        await asyncio.Event().wait()

    async def main() -> str:
        await transport.post_json("x", {})
        (backend,) = [entry[0] for entry in transport._sender.clients._loops.values()]
        closes = type(backend).aclose
        monkeypatch.setattr(type(backend), "aclose", hung)
        with pytest.raises(TimeoutError, match="did not finish within") as caught:
            await transport.aclose()
        await closes(backend)  # (the real close: no socket left to the collector)
        await asyncio.sleep(0)  # the caller was not cancelled: it goes on
        return str(caught.value)

    assert "did not finish within 0.01 seconds" in asyncio.run(main())


def test_a_close_failing_after_its_caller_was_cancelled_is_retrieved_and_logged_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aclose() cancelled, then its close raises: no 'exception was never retrieved'; DEBUG log."""
    import logging

    from toolfold.adapters._http import _backends

    caplog.set_level(logging.DEBUG, logger="toolfold.http")
    reported: list[str] = []
    go = asyncio.Event()

    class Failing:
        async def aclose(self) -> None:
            await go.wait()
            raise OSError("close failed")

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(
            lambda loop, context: reported.append(context["message"])
        )
        closer = _backends.close_when_loop_ends(Failing(), lambda: None)
        await closer.__anext__()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(_backends.close_now(closer), 0.001)
        go.set()
        (closing,) = asyncio.all_tasks() - {asyncio.current_task()}
        await asyncio.wait({closing})
        del closing
        gc.collect()

    asyncio.run(main())
    assert reported == []
    assert "OSError('close failed')" in caplog.text


@pytest.mark.parametrize("shutdown_asyncgens", [True, False])
@pytest.mark.parametrize("http", [name for name in OWNED if name != "aiohttp"])
def test_a_transport_dropped_one_await_before_a_plain_loop_closes_closes_its_connections(
    http_server: ScriptedServer, http: str, shutdown_asyncgens: bool
) -> None:
    """Dropped one await before run_until_complete returns: its close ends by loop.close() (3.12+), or with shutdown_asyncgens() before it (all)."""
    http_server.handler = lambda request: Reply(json={"ok": 1})

    async def main() -> None:
        transport = _transport(http_server, http)
        await asyncio.gather(*[transport.post_json("x", {}) for _ in range(4)])
        del transport  # its closer is finalised: its close starts on the next turn
        await asyncio.sleep(0)  # the loop's last turn but one

    def child() -> list[str]:
        import warnings

        reported: list[str] = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loop = asyncio.new_event_loop()
            loop.set_exception_handler(lambda loop, context: reported.append(context["message"]))
            loop.run_until_complete(main())
            if shutdown_asyncgens:
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            gc.collect()
        return reported + [str(w.message) for w in caught]

    left = in_forked_child(child)["value"]
    if shutdown_asyncgens or sys.version_info >= (3, 12):
        assert left == []
    else:  # no eager tasks: the close waits for a loop turn that never comes
        assert "Task was destroyed but it is pending!" in left


class _Lookups:
    """A finder that records every module Python searches ``sys.path`` for, and finds none."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        self.names.append(name)


@pytest.mark.parametrize("http", OWNED)
def test_a_call_searches_for_no_module(http_server: ScriptedServer, http: str) -> None:
    """Once a client is warm, a call imports nothing: no module is looked up on ``sys.path``.

    A missing module is not cached, so an ``import`` of it inside a call searches the whole
    path every time: httpcore 1.0 imports ``sniffio`` at each pool operation, and without
    it (anyio no longer installs it) that search was 37% of the CPU of 100 concurrent runs
    on httpx (``bench/bench_http.py --only concurrency --backends httpx``): toolfold
    depends on ``sniffio`` for that reason.
    """
    http_server.handler = lambda request: Reply(json={"n": 1})
    transport = _transport(http_server, http)
    lookups = _Lookups()

    async def calls() -> None:
        await transport.post_json("x", {})  # the client, its pool and their imports
        sys.meta_path.insert(0, lookups)
        try:
            await asyncio.gather(*(transport.post_json("x", {}) for _ in range(3)))
        finally:
            sys.meta_path.remove(lookups)
        await transport.aclose()

    asyncio.run(calls())
    assert lookups.names == []
