"""The transport's scenarios through every kind of client: its own (httpx, httpx2, aiohttp) and injected ones.

httpx2 has httpx's API but its own classes (its own ``Timeout``, its own
exceptions), so an injected httpx2 client checks that the transport never
hands a client another package's objects and maps that client's failures.
httpx2 needs Python 3.11+; `lookalike_http` checks the same contract on
every Python CI runs.
"""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time
from types import ModuleType
from typing import Any

import aiohttp
import httpx
import lookalike_http
import pytest
from backends import OWNED
from scripted_http import Cut, Reply, ScriptedServer, gate, sse

import toolfold
from toolfold import (
    AuthenticationError,
    ModelConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamError,
    UsageError,
)
from toolfold.adapters._http._retry import Timeouts
from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters._http._transport import Transport
from toolfold.runtime import Message, ModelRequest

httpx2: ModuleType | None  # None where it is not installed
try:
    import httpx2
except ImportError:  # Python 3.10: httpx2 needs 3.11+ (lookalike_http covers its contract)
    httpx2 = None

KEY = "sk-test-key-0123456789"
PACKAGES: dict[str, Any] = {"httpx": httpx, "lookalike": lookalike_http}
if httpx2 is not None:
    PACKAGES["httpx2"] = httpx2
OWN = [f"own-{name}" for name in OWNED]
KINDS = [*OWN, *PACKAGES, "aiohttp"]
CASES = [
    pytest.param(kind, mode, id=f"{kind}-{mode}")
    for kind in KINDS
    for mode in ("sync", "async")
    if not (mode == "sync" and kind in ("aiohttp", "own-aiohttp"))
]
INJECTED = [case for case in CASES if not str(case.values[0]).startswith("own-")]


class Sleeps:
    """Fake sleeps that record the waits instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)

    def sleep_sync(self, delay: float) -> None:
        self.delays.append(delay)


def _client(kind: str, mode: str, options: dict[str, Any]) -> Any:
    if kind.startswith("own-"):
        return None
    if kind == "aiohttp":
        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(sock_read=options.get("timeout"))
        )
    package = PACKAGES[kind]
    return (package.Client if mode == "sync" else package.AsyncClient)(**options)


def call(
    server: ScriptedServer,
    kind: str,
    mode: str,
    what: str = "post",
    *,
    sleeps: Sleeps | None = None,
    client_options: dict[str, Any] | None = None,
    seen: list[SSEEvent] | None = None,
    on_event: Any = None,
    **options: Any,
) -> Any:
    """POST (``what="post"``) or stream through a transport on that kind of client, then close."""
    sleeps = sleeps or Sleeps()
    seen = [] if seen is None else seen

    def make(client: Any) -> Transport:
        if kind.startswith("own-"):
            options["http"] = kind[4:]
        return Transport(
            "openai",
            f"{server.url}/v1",
            KEY,
            http_client=client,
            sleep=sleeps.sleep,
            sleep_sync=sleeps.sleep_sync,
            random=lambda: 0.0,
            **options,
        )

    def note(event: SSEEvent) -> None:
        seen.append(event)
        if on_event is not None:
            on_event(event)

    if mode == "sync":
        client = _client(kind, mode, client_options or {})
        transport = make(client)
        try:
            if what == "post":
                return transport.post_json_sync("chat/completions", {"model": "m"})
            for event in transport.stream_sync("chat/completions", {"stream": True}):
                note(event)
            return seen
        finally:
            transport.close()
            if client is not None:
                client.close()

    async def run() -> Any:
        client = _client(kind, mode, client_options or {})
        transport = make(client)
        try:
            if what == "post":
                return await transport.post_json("chat/completions", {"model": "m"})
            async for event in transport.stream("chat/completions", {"stream": True}):
                note(event)
            return seen
        finally:
            await transport.aclose()
            if client is not None:
                await (client.close() if kind == "aiohttp" else client.aclose())

    return asyncio.run(run())


@pytest.mark.parametrize(("kind", "mode"), CASES)
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_post_and_stream_succeed(
    http_server: ScriptedServer, kind: str, mode: str, timeout: float | None
) -> None:
    """A JSON answer and a stream come back, with the key sent, with and without timeout=."""
    options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    http_server.add(Reply(json={"ok": 1}), Reply(chunks=sse({"i": 0}, "[DONE]")))
    assert call(http_server, kind, mode, **options) == {"ok": 1}
    events = call(http_server, kind, mode, "stream", **options)
    assert [e.data for e in events] == ['{"i": 0}', "[DONE]"]
    assert [r.headers["authorization"] for r in http_server.requests] == [f"Bearer {KEY}"] * 2


class _TracedClient(httpx.Client):
    """A user's own subclass of httpx.Client, in a module of theirs (here: this one)."""


def test_a_users_subclass_of_an_httpx_client_takes_timeout(http_server: ScriptedServer) -> None:
    """A subclass of httpx.Client defined in the user's module is httpx's client: timeout=
    is given as httpx's Timeout (the package was read from the subclass's own module, which
    has none, and every call failed: "'<' not supported between 'float' and 'dict'")."""
    http_server.add(Reply(json={"ok": 1}))
    client = _TracedClient()
    transport = Transport(
        "openai", f"{http_server.url}/v1", KEY, http_client=client, timeout=30.0, retry=0
    )
    try:
        assert transport.post_json_sync("chat/completions", {"model": "m"}) == {"ok": 1}
    finally:
        transport.close()
        client.close()


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_429_with_retry_after_then_success(
    http_server: ScriptedServer, kind: str, mode: str
) -> None:
    """A 429 is retried after the server's retry-after, then the answer is returned."""
    sleeps = Sleeps()
    http_server.add(Reply(status=429, headers={"retry-after": "3"}), Reply(json={"ok": 1}))
    assert call(http_server, kind, mode, sleeps=sleeps, timeout=5.0) == {"ok": 1}
    assert sleeps.delays == [3.0]


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_a_retry_after_date_past_year_9999_is_ignored(
    http_server: ScriptedServer, kind: str, mode: str
) -> None:
    """A date the calendar cannot hold is nonsense like any other: the backoff applies.

    It escaped from the transport as a bare ValueError (``year 99999 is out of range``).
    """
    sleeps = Sleeps()
    late = {"retry-after": "Fri, 31 Dec 99999 23:59:59 GMT"}
    http_server.add(Reply(status=429, headers=late), Reply(json={"ok": 1}))
    assert call(http_server, kind, mode, sleeps=sleeps, timeout=5.0) == {"ok": 1}
    assert sleeps.delays == [0.5]


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_a_merged_retry_after_of_a_delay_and_a_date_counts_for_its_longest(
    http_server: ScriptedServer, kind: str, mode: str
) -> None:
    """retry-after: 3, <a past date> (a proxy joined two) waits 3 s; beside a date 600 s ahead,
    the 600 s wait is too long to retry and reaches the RateLimitError.

    The line read as nonsense (a date has a comma) and the request was retried after
    the 0.5 s backoff.
    """
    sleeps = Sleeps()
    merged = {"retry-after": "3, Wed, 21 Oct 2015 07:28:00 GMT"}
    http_server.add(Reply(status=429, headers=merged), Reply(json={"ok": 1}))
    assert call(http_server, kind, mode, sleeps=sleeps, timeout=5.0) == {"ok": 1}
    assert sleeps.delays == [3.0]
    ahead = email.utils.formatdate(time.time() + 600, usegmt=True)
    http_server.add(Reply(status=429, headers={"retry-after": f"300, {ahead}"}))
    with pytest.raises(RateLimitError) as caught:
        call(http_server, kind, mode, sleeps=sleeps, timeout=5.0)
    assert caught.value.retry_after == pytest.approx(600.0, abs=30.0)
    assert sleeps.delays == [3.0]  # not retried


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_server_errors_then_success(http_server: ScriptedServer, kind: str, mode: str) -> None:
    """500, 501, 520 and 524 are all retried with exponential backoff; the fifth answer returns."""
    sleeps = Sleeps()
    http_server.add(*(Reply(status=s) for s in (500, 501, 520, 524)), Reply(json={"n": 5}))
    assert call(http_server, kind, mode, sleeps=sleeps, retry=4) == {"n": 5}
    assert sleeps.delays == [0.5, 1.0, 2.0, 4.0]


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_exhausted_server_errors_and_401_map(
    http_server: ScriptedServer, kind: str, mode: str
) -> None:
    """A 503 after the retries is ServerError; a 401 is AuthenticationError with its message."""
    http_server.add(Reply(status=503), Reply(status=503))
    with pytest.raises(ServerError):
        call(http_server, kind, mode, retry=1)
    http_server.add(Reply(status=401, json={"error": {"message": "bad key"}}))
    with pytest.raises(AuthenticationError, match="bad key") as caught:
        call(http_server, kind, mode, timeout=5.0)
    assert caught.value.status_code == 401


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_reset_is_retried_then_a_connection_error(
    http_server: ScriptedServer, kind: str, mode: str
) -> None:
    """A reset before any answer is retried; without retries it is a ProviderConnectionError."""
    http_server.add(Reply(reset=True), Reply(json={"ok": 1}))
    assert call(http_server, kind, mode) == {"ok": 1}
    http_server.add(Reply(reset=True))
    with pytest.raises(ProviderConnectionError, match=r"openai at http://127\.0\.0\.1"):
        call(http_server, kind, mode, retry=0, timeout=5.0)


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_read_timeout(
    http_server: ScriptedServer, kind: str, mode: str, released: list[threading.Event]
) -> None:
    """A server that never answers is a ProviderTimeoutError after the read timeout."""
    http_server.add(Reply(stall=gate(released)))
    with pytest.raises(ProviderTimeoutError, match=r"timed out.*\(the read timeout is 0\.2 s\)$"):
        call(http_server, kind, mode, retry=None, timeout=Timeouts(read=0.2))


@pytest.mark.parametrize(("kind", "mode"), INJECTED)
def test_injected_client_default_timeout_applies(
    http_server: ScriptedServer, kind: str, mode: str, released: list[threading.Event]
) -> None:
    """Without timeout=, the injected client's own timeout is used (and maps to ProviderTimeoutError)."""
    http_server.add(Reply(stall=gate(released)))
    with pytest.raises(ProviderTimeoutError):
        call(http_server, kind, mode, retry=None, client_options={"timeout": 0.2})


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_cut_stream_is_a_stream_error(http_server: ScriptedServer, kind: str, mode: str) -> None:
    """A stream cut mid-body is a StreamError after the events that arrived; nothing is resent."""
    http_server.add(Reply(chunks=[*sse({"i": 0}), b'data: {"i": 1', Cut()]))
    seen: list[SSEEvent] = []
    with pytest.raises(StreamError, match="cut"):
        call(http_server, kind, mode, "stream", seen=seen, timeout=5.0)
    if "aiohttp" in kind:
        # aiohttp raises a connection's error before data it still buffers: an
        # event that arrived in the same read as the cut may be lost with it.
        assert [e.json() for e in seen] in ([{"i": 0}], [])
    else:
        assert [e.json() for e in seen] == [{"i": 0}]
    assert len(http_server.requests) == 1


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_slow_stream_delivers_each_event_as_it_comes(
    http_server: ScriptedServer, kind: str, mode: str, released: list[threading.Event]
) -> None:
    """Each event reaches the caller before the server sends the next one."""
    gates = [gate(released) for _ in range(3)]
    chunks: list[Any] = []
    for number, event in enumerate(gates):
        chunks.extend(sse({"i": number}))
        chunks.append(event)
    http_server.add(Reply(chunks=chunks))

    def release(event: SSEEvent) -> None:
        number = event.json()["i"]
        assert not gates[number].is_set()  # nothing was buffered ahead of the caller
        gates[number].set()

    assert len(call(http_server, kind, mode, "stream", on_event=release)) == 3


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_stalled_stream_times_out(
    http_server: ScriptedServer, kind: str, mode: str, released: list[threading.Event]
) -> None:
    """A stream that stalls after its first event is a ProviderTimeoutError, not a retry."""
    # The read timeout leaves room for the first event to arrive on a loaded machine
    # (three suites share two cores in CI); what is checked is the stall after it.
    http_server.add(Reply(chunks=[*sse({"i": 0}), gate(released)]))
    seen: list[SSEEvent] = []
    with pytest.raises(ProviderTimeoutError):
        call(http_server, kind, mode, "stream", seen=seen, timeout=Timeouts(read=1.0))
    assert len(seen) == 1
    assert len(http_server.requests) == 1


class _Boom(Exception):
    """An exception class from no known HTTP package."""


class _OddClient:
    """A client with httpx's API that fails in its own way."""

    def build_request(self, method: str, url: str, **kwargs: Any) -> Any:
        return (method, url)

    def send(self, request: Any, *, stream: bool = False) -> Any:
        raise _Boom("socket layer gave up")

    def close(self) -> None:
        pass


def test_a_foreign_clients_unknown_exception_is_mapped() -> None:
    """Whatever an injected client raises reaches the caller as a ProviderError, chained."""
    transport = Transport("openai", "http://127.0.0.1:9/v1", KEY, http_client=_OddClient())
    with pytest.raises(ProviderError, match="socket layer gave up") as caught:
        transport.post_json_sync("chat/completions", {})
    assert isinstance(caught.value.__cause__, _Boom)


@pytest.mark.parametrize("option", ["http_client", "async_http_client"])
@pytest.mark.parametrize("client", [5, "httpx", object()], ids=["int", "str", "object"])
def test_something_that_is_not_a_client_is_refused_when_the_model_is_built(
    option: str, client: Any
) -> None:
    """http_client=5 is a ModelConfigError naming the option (it failed at the first call)."""
    with pytest.raises(ModelConfigError, match=f"^{option}=.* is not an HTTP client"):
        Transport("openai", "http://127.0.0.1:9/v1", KEY, **{option: client})


REAL = {name: package for name, package in PACKAGES.items() if name != "lookalike"}


@pytest.mark.parametrize("package", list(REAL.values()), ids=list(REAL))
def test_a_blocking_client_as_the_async_one_is_refused_when_the_model_is_built(
    package: Any,
) -> None:
    """Its blocking send ran on the event loop, stalling every other run on it.

    httpx's and httpx2's ``Client`` (and subclasses) are known blocking; any other
    client is taken at its word (a wrapper's ``send`` may return a coroutine).
    """
    with (
        package.Client() as client,
        pytest.raises(ModelConfigError, match=r"^async_http_client=Client is a blocking client"),
    ):
        Transport("openai", "http://127.0.0.1:9/v1", KEY, async_http_client=client)


def test_an_async_client_whose_send_is_wrapped_is_accepted() -> None:
    """Instrumentation wraps ``send`` in a plain function that returns the coroutine: still async."""
    original = httpx.AsyncClient.send

    class Traced(httpx.AsyncClient):
        def send(self, request: Any, **kw: Any) -> Any:
            return original(self, request, **kw)

    Transport("openai", "http://127.0.0.1:9/v1", KEY, async_http_client=Traced())


@pytest.mark.parametrize("timeout", [-1, float("nan"), "soon"])
def test_a_bad_timeout_is_refused_when_the_model_is_built(timeout: Any) -> None:
    """timeout=-1 is a ModelConfigError naming the option (it was a bare ValueError)."""
    with pytest.raises(ModelConfigError, match=r"^timeout=.* is not valid"):
        Transport("openai", "http://127.0.0.1:9/v1", KEY, timeout=timeout)


@pytest.mark.parametrize("package", list(PACKAGES.values()), ids=list(PACKAGES))
def test_a_client_for_one_mode_refuses_the_other(http_server: ScriptedServer, package: Any) -> None:
    """A sync client alone makes async calls fail clearly (and vice versa), never bypassed."""
    with package.Client() as client:
        transport = Transport("openai", http_server.url, KEY, http_client=client)
        with pytest.raises(ModelConfigError, match="async_http_client="):
            asyncio.run(transport.post_json("x", {}))

    async def only_async() -> None:
        async with package.AsyncClient() as client:
            transport = Transport("openai", http_server.url, KEY, http_client=client)
            with pytest.raises(ModelConfigError, match="http_client="):
                transport.post_json_sync("x", {})

    asyncio.run(only_async())
    assert http_server.requests == []


@pytest.mark.parametrize("package", list(PACKAGES.values()), ids=list(PACKAGES))
def test_a_pair_of_clients_serves_both_modes(http_server: ScriptedServer, package: Any) -> None:
    """http_client= (sync) with async_http_client= carries each mode on the user's client."""
    http_server.add(Reply(json={"sync": 1}), Reply(json={"async": 1}))
    sync_client = package.Client(headers={"x-mine": "sync"})

    async def run() -> Any:
        async with package.AsyncClient(headers={"x-mine": "async"}) as async_client:
            transport = Transport(
                "openai",
                http_server.url,
                KEY,
                http_client=sync_client,
                async_http_client=async_client,
            )
            assert transport.post_json_sync("x", {}) == {"sync": 1}
            return await transport.post_json("x", {})

    try:
        assert asyncio.run(run()) == {"async": 1}
    finally:
        sync_client.close()
    assert [r.headers["x-mine"] for r in http_server.requests] == ["sync", "async"]


@pytest.mark.parametrize(("kind", "mode"), CASES)
def test_error_headers_have_lower_case_names_on_every_client(
    http_server: ScriptedServer, kind: str, mode: str
) -> None:
    """A ProviderError's headers have lower-case names whatever the client (aiohttp's kept
    the server's case: ``X-Request-ID``)."""
    http_server.add(Reply(status=429, headers={"X-Request-ID": "req_abc", "Retry-After": "7"}))
    with pytest.raises(RateLimitError) as caught:
        call(http_server, kind, mode, retry=0)
    headers = caught.value.headers
    assert headers.get("x-request-id") == "req_abc"
    assert headers.get("retry-after") == "7"
    assert all(name == name.lower() for name in headers)


@pytest.mark.parametrize("kind", list(PACKAGES))
def test_rate_limit_keeps_retry_after(http_server: ScriptedServer, kind: str) -> None:
    """Another package's headers are read like httpx's: retry_after reaches the RateLimitError."""
    http_server.add(Reply(status=429, headers={"retry-after": "7"}))
    with pytest.raises(RateLimitError) as caught:
        call(http_server, kind, "sync", retry=0)
    assert caught.value.retry_after == 7.0


@pytest.mark.parametrize(("kind", "mode"), INJECTED)
def test_an_injected_client_that_follows_redirects_does_not_follow_a_call(
    http_server: ScriptedServer, kind: str, mode: str
) -> None:
    """A 307 elsewhere is the caller's error: the key header and the POST never go to the new host.

    httpx drops only ``Authorization`` on a redirect to another host, so a
    client made with ``follow_redirects=True`` sent Anthropic's ``x-api-key``
    (Gemini's ``x-goog-api-key``) there, and sent the generation request again
    outside the retry policy.
    """
    elsewhere = ScriptedServer()
    try:
        target = elsewhere.url.replace("127.0.0.1", "localhost") + "/steal"
        http_server.add(Reply(status=307, headers={"location": target}))
        options = {} if kind in ("aiohttp", "lookalike") else {"follow_redirects": True}
        request = ModelRequest([Message.user("hi")])

        def model(client: Any) -> Any:
            return toolfold.model(
                "anthropic:claude-x",
                base_url=http_server.url,
                api_key=KEY,
                retry=0,
                http_client=client,
            )

        async def run() -> Any:
            client = _client(kind, mode, options)
            try:
                return await model(client).request(request)
            finally:
                await (client.close() if kind == "aiohttp" else client.aclose())

        def run_sync() -> Any:
            with _client(kind, mode, options) as client:
                return model(client).request_sync(request)

        with pytest.raises(ProviderError) as caught:
            run_sync() if mode == "sync" else asyncio.run(run())
        assert caught.value.status_code == 307
        assert f"redirected to {target}; " in str(caught.value)
        assert "point base_url= at the new address" in str(caught.value)
        assert len(http_server.requests) == 1
        assert elsewhere.requests == []
    finally:
        elsewhere.close()


def test_an_injected_aiohttp_session_used_on_another_loop_is_a_usage_error_naming_its_loop(
    http_server: ScriptedServer,
) -> None:
    """A session made on one event loop, called from another: a UsageError naming the loop, nothing sent."""
    home = asyncio.new_event_loop()

    async def make() -> aiohttp.ClientSession:
        return aiohttp.ClientSession()

    session = home.run_until_complete(make())
    try:
        transport = Transport("openai", http_server.url, KEY, http_client=session)
        with pytest.raises(UsageError, match="aiohttp uses a session only on the loop") as caught:
            asyncio.run(transport.post_json("x", {}))
        assert repr(home) in str(caught.value)
        assert http_server.requests == []
    finally:
        home.run_until_complete(session.close())
        home.close()


@pytest.mark.parametrize("package", list(PACKAGES.values()), ids=list(PACKAGES))
def test_an_injected_async_client_reused_on_a_new_loop_is_a_usage_error(
    http_server: ScriptedServer, package: Any
) -> None:
    """An AsyncClient whose pooled connection is of another event loop: a UsageError saying so."""
    http_server.handler = lambda request: Reply(json={"ok": 1})
    client = package.AsyncClient()
    transport = Transport("openai", http_server.url, KEY, http_client=client)
    first = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(transport.post_json("x", {})) == {"ok": 1}  # pooled
        with pytest.raises(UsageError, match="connections of another event loop"):
            asyncio.run(transport.post_json("x", {}))
    finally:
        first.run_until_complete(client.aclose())
        first.close()


def test_error_headers_given_as_pairs_are_taken_as_dict_takes_them() -> None:
    """ProviderError(headers=[pairs]) keeps working (as before lower-casing), names lower-cased."""
    error = toolfold.ProviderError("m", provider="p", headers=[("X-Request-Id", "r1")])  # type: ignore[arg-type]
    assert error.headers == {"x-request-id": "r1"}
