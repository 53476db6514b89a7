"""The transport against real HTTP servers on 127.0.0.1, sync and async alike."""

from __future__ import annotations

import asyncio
import gzip
import logging
import threading
from typing import Any

import httpx
import pytest
from scripted_http import Cut, Reply, ScriptedServer, gate, sse

from toolfold import (
    AuthenticationError,
    BadRequestError,
    MalformedResponseError,
    ProviderConnectionError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamError,
)
from toolfold.adapters._http._retry import RetryPolicy, Timeouts
from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters._http._transport import USER_AGENT, Transport

MODES = ["sync", "async"]


class Sleeps:
    """Fake sleeps that record the waits instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)

    def sleep_sync(self, delay: float) -> None:
        self.delays.append(delay)


def make(server: ScriptedServer, sleeps: Sleeps | None = None, **options: Any) -> Transport:
    sleeps = sleeps or Sleeps()
    options.setdefault("random", lambda: 0.0)
    return Transport(
        "openai",
        f"{server.url}/v1",
        "sk-test-key-0123456789",
        sleep=sleeps.sleep,
        sleep_sync=sleeps.sleep_sync,
        **options,
    )


def post(transport: Transport, mode: str, body: Any = None, path: str = "chat/completions") -> Any:
    body = {"model": "m"} if body is None else body
    if mode == "sync":
        try:
            return transport.post_json_sync(path, body)
        finally:
            transport.close()

    async def run() -> Any:
        try:
            return await transport.post_json(path, body)
        finally:
            await transport.aclose()

    return asyncio.run(run())


def stream(
    transport: Transport, mode: str, on_event: Any = None, path: str = "chat/completions"
) -> list[SSEEvent]:
    """Collect a stream's events; on_event(event) runs after each one (to release pauses)."""
    seen: list[SSEEvent] = []
    if mode == "sync":
        try:
            for event in transport.stream_sync(path, {"stream": True}):
                seen.append(event)
                if on_event:
                    on_event(event)
        finally:
            transport.close()
        return seen

    async def run() -> None:
        try:
            async for event in transport.stream(path, {"stream": True}):
                seen.append(event)
                if on_event:
                    on_event(event)
        finally:
            await transport.aclose()

    try:
        asyncio.run(run())
    finally:
        pass
    return seen


@pytest.mark.parametrize("mode", MODES)
def test_post_json_sends_json_with_headers(http_server: ScriptedServer, mode: str) -> None:
    """The body goes as compact JSON to base_url/path with the key, content type and user agent."""
    http_server.add(Reply(json={"id": "x", "ok": True}))
    result = post(make(http_server, headers={"X-Extra": "1"}), mode, {"a": "é"})
    assert result == {"id": "x", "ok": True}
    (request,) = http_server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.json() == {"a": "é"}
    assert request.headers["authorization"] == "Bearer sk-test-key-0123456789"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"] == USER_AGENT
    assert request.headers["x-extra"] == "1"


@pytest.mark.parametrize("mode", MODES)
def test_custom_auth_header_without_scheme(http_server: ScriptedServer, mode: str) -> None:
    """Providers with their own key header (x-api-key) get the bare key there, not a bearer."""
    http_server.add(Reply(json={}))
    post(make(http_server, auth_header="x-api-key", auth_scheme=""), mode)
    headers = http_server.requests[0].headers
    assert headers["x-api-key"] == "sk-test-key-0123456789"
    assert "authorization" not in headers


@pytest.mark.parametrize("mode", MODES)
def test_429_with_retry_after_then_success(http_server: ScriptedServer, mode: str) -> None:
    """A 429 with retry-after is retried after exactly the wait the server asked for."""
    sleeps = Sleeps()
    http_server.add(
        Reply(status=429, headers={"retry-after": "3"}, json={"error": {"message": "slow"}}),
        Reply(json={"ok": 1}),
    )
    assert post(make(http_server, sleeps), mode) == {"ok": 1}
    assert sleeps.delays == [3.0]
    assert len(http_server.requests) == 2


@pytest.mark.parametrize("mode", MODES)
def test_retry_after_ms_wins_over_retry_after(http_server: ScriptedServer, mode: str) -> None:
    """retry-after-ms is read before retry-after, as the official SDKs do."""
    sleeps = Sleeps()
    http_server.add(
        Reply(status=503, headers={"retry-after-ms": "250", "retry-after": "9"}),
        Reply(json={}),
    )
    post(make(http_server, sleeps), mode)
    assert sleeps.delays == [0.25]


@pytest.mark.parametrize("mode", MODES)
def test_two_500s_then_success_backs_off_exponentially(
    http_server: ScriptedServer, mode: str
) -> None:
    """Two 500s are retried with 0.5 s then 1 s backoff, and the third answer is returned."""
    sleeps = Sleeps()
    http_server.add(Reply(status=500), Reply(status=500), Reply(json={"n": 3}))
    assert post(make(http_server, sleeps), mode) == {"n": 3}
    assert sleeps.delays == [0.5, 1.0]


@pytest.mark.parametrize("mode", MODES)
def test_retries_exhausted_raise_server_error(http_server: ScriptedServer, mode: str) -> None:
    """After max_retries the last failure is raised with status, body and provider message."""
    body = {"error": {"message": "upstream broke", "type": "server_error", "code": "e1"}}
    http_server.add(*[Reply(status=502, json=body)] * 3)
    with pytest.raises(ServerError) as caught:
        post(make(http_server), mode)
    error = caught.value
    assert error.status_code == 502
    assert error.provider == "openai"
    assert error.provider_message == "upstream broke"
    assert error.code == "e1"
    assert "upstream broke" in str(error)
    assert len(http_server.requests) == 3


@pytest.mark.parametrize("mode", MODES)
def test_retries_switched_off(http_server: ScriptedServer, mode: str) -> None:
    """retry=None sends one request only (a durable engine owns retries)."""
    http_server.add(Reply(status=500), Reply(json={}))
    with pytest.raises(ServerError):
        post(make(http_server, retry=None), mode)
    assert len(http_server.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_x_should_retry_overrides_status(http_server: ScriptedServer, mode: str) -> None:
    """x-should-retry: false stops a 503 retry; true makes a 400 retried."""
    http_server.add(Reply(status=503, headers={"x-should-retry": "false"}))
    with pytest.raises(ServerError):
        post(make(http_server), mode)
    http_server.add(Reply(status=400, headers={"x-should-retry": "true"}), Reply(json={"ok": 1}))
    assert post(make(http_server), mode) == {"ok": 1}
    assert len(http_server.requests) == 3


@pytest.mark.parametrize("mode", MODES)
def test_long_retry_after_goes_to_caller(http_server: ScriptedServer, mode: str) -> None:
    """A server asking for more than 120 s is not waited for: RateLimitError carries retry_after."""
    sleeps = Sleeps()
    http_server.add(Reply(status=429, headers={"retry-after": "600"}))
    with pytest.raises(RateLimitError) as caught:
        post(make(http_server, sleeps), mode)
    assert caught.value.retry_after == 600.0
    assert sleeps.delays == []


@pytest.mark.parametrize("mode", MODES)
def test_a_wait_over_max_retry_after_says_why_it_was_not_made(
    http_server: ScriptedServer, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The error names the wait asked for and the bound (logged at INFO): it read "fake 429", no word of 500 s."""
    http_server.add(Reply(status=503, headers={"retry-after": "500"}))
    with caplog.at_level(logging.INFO, "toolfold.http"), pytest.raises(ServerError) as caught:
        post(make(http_server), mode)
    assert str(caught.value).endswith(
        "(not retried: the server asked for a wait of 500 s, over max_retry_after=120 s)"
    )
    assert caught.value.retry_after == 500.0
    assert "giving up on POST" in caplog.text


@pytest.mark.parametrize("mode", MODES)
def test_retries_used_up_say_how_many_attempts_were_made(
    http_server: ScriptedServer, mode: str
) -> None:
    """The last error says it was the third attempt, and that max_retries stopped there."""
    http_server.add(*[Reply(status=500, json={"error": {"message": "down"}})] * 3)
    with pytest.raises(ServerError) as caught:
        post(make(http_server), mode)
    assert str(caught.value).endswith("down (3 attempts; max_retries=2 used up)")
    assert (caught.value.status_code, caught.value.provider_message) == (500, "down")


@pytest.mark.parametrize("mode", MODES)
def test_a_wait_past_the_total_timeout_says_so(http_server: ScriptedServer, mode: str) -> None:
    """A retry the total timeout has no room for says so on the error."""
    http_server.add(Reply(status=429, headers={"retry-after": "5"}), Reply(json={}))
    with pytest.raises(RateLimitError) as caught:
        post(make(http_server, timeout=Timeouts(total=3)), mode)
    assert str(caught.value).endswith(
        "(not retried: a wait of 5 s would end past the total timeout)"
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_first_failure_not_retried_gets_no_note(http_server: ScriptedServer, mode: str) -> None:
    """A 401 is its provider's message alone: one attempt, nothing to explain."""
    http_server.add(Reply(status=401, json={"error": {"message": "bad key"}}))
    with pytest.raises(AuthenticationError) as caught:
        post(make(http_server), mode)
    assert str(caught.value).endswith("bad key")


@pytest.mark.parametrize("mode", MODES)
def test_client_errors_are_not_retried(http_server: ScriptedServer, mode: str) -> None:
    """401 and 400 fail at once, with the provider's own message."""
    http_server.add(Reply(status=401, json={"error": {"message": "bad key"}}))
    with pytest.raises(AuthenticationError, match="bad key"):
        post(make(http_server), mode)
    http_server.add(Reply(status=400, json={"error": {"message": "bad param", "param": "x"}}))
    with pytest.raises(BadRequestError) as caught:
        post(make(http_server), mode)
    assert caught.value.provider_message == "bad param"
    assert len(http_server.requests) == 2


@pytest.mark.parametrize("mode", MODES)
def test_connection_reset_is_retried(http_server: ScriptedServer, mode: str) -> None:
    """A connection closed without an answer is retried on a new connection."""
    sleeps = Sleeps()
    http_server.add(Reply(reset=True), Reply(json={"ok": 1}))
    assert post(make(http_server, sleeps), mode) == {"ok": 1}
    assert sleeps.delays == [0.5]
    assert http_server.connections == 2


@pytest.mark.parametrize("mode", MODES)
def test_connection_reset_without_retries_is_connection_error(
    http_server: ScriptedServer, mode: str
) -> None:
    """Without retries a reset connection raises ProviderConnectionError naming the provider and URL."""
    http_server.add(Reply(reset=True))
    with pytest.raises(ProviderConnectionError, match=r"openai at http://127\.0\.0\.1"):
        post(make(http_server, retry=0), mode)


@pytest.mark.parametrize("mode", MODES)
def test_connection_refused(mode: str, refused_port: int) -> None:
    """Nobody listening on the port is a ProviderConnectionError after the retries."""
    port = refused_port
    sleeps = Sleeps()
    transport = Transport(
        "openai", f"http://127.0.0.1:{port}", None, sleep=sleeps.sleep, sleep_sync=sleeps.sleep_sync
    )
    with pytest.raises(ProviderConnectionError) as caught:
        post(transport, mode)
    assert type(caught.value.__cause__).__name__ == "ConnectError"
    assert len(sleeps.delays) == 2


def test_a_refused_plain_http_connection_under_aiohttp_names_no_tls(refused_port: int) -> None:
    """aiohttp's text of a refused ``http://`` connection is quoted without its ``ssl:default``:
    it read ``Cannot connect to host 127.0.0.1:<port> ssl:default [...]``, as if TLS had been
    tried on a plain URL."""
    url = f"http://127.0.0.1:{refused_port}"
    with pytest.raises(ProviderConnectionError) as caught:
        post(Transport("openai", url, None, http="aiohttp", retry=0), "async")
    assert type(caught.value.__cause__).__name__ == "ClientConnectorError"
    message = str(caught.value)
    assert f"Cannot connect to host 127.0.0.1:{refused_port} [" in message
    assert "ssl:" not in message


@pytest.mark.parametrize("mode", MODES)
def test_read_timeout(
    http_server: ScriptedServer, mode: str, released: list[threading.Event]
) -> None:
    """A server that accepts and never answers raises ProviderTimeoutError after the read timeout."""
    stall = gate(released)
    http_server.add(Reply(stall=stall))
    transport = make(http_server, timeout=Timeouts(read=0.2), retry=None)
    with pytest.raises(ProviderTimeoutError, match="timed out") as caught:
        post(transport, mode)
    stall.set()
    assert str(caught.value).endswith("(the read timeout is 0.2 s)")  # which limit it was


@pytest.mark.parametrize("mode", MODES)
def test_read_timeout_is_retried(
    http_server: ScriptedServer, mode: str, released: list[threading.Event]
) -> None:
    """A read timeout counts as a retryable failure; the retry's answer is returned."""
    http_server.add(Reply(stall=gate(released)), Reply(json={"ok": 2}))
    assert post(make(http_server, timeout=Timeouts(read=0.2)), mode) == {"ok": 2}


@pytest.mark.parametrize("mode", MODES)
def test_total_timeout(
    http_server: ScriptedServer, mode: str, released: list[threading.Event]
) -> None:
    """The total timeout bounds the call even when the read timeout is longer."""
    http_server.add(Reply(stall=gate(released)))
    transport = make(http_server, timeout=Timeouts(read=30.0, total=0.2), retry=None)
    with pytest.raises(ProviderTimeoutError):
        post(transport, mode)


@pytest.mark.parametrize("mode", MODES)
def test_non_json_success_body(http_server: ScriptedServer, mode: str) -> None:
    """A 200 whose body is not JSON is a MalformedResponseError that shows the start of the body."""
    http_server.add(Reply(body=b"<html>proxy page</html>"))
    with pytest.raises(MalformedResponseError, match="not JSON: '<html>proxy page"):
        post(make(http_server), mode)


@pytest.mark.parametrize("mode", MODES)
def test_gzip_body_is_decoded(http_server: ScriptedServer, mode: str) -> None:
    """A gzip-encoded answer is decompressed before parsing."""
    http_server.add(Reply(body=gzip.compress(b'{"z": 1}'), headers={"content-encoding": "gzip"}))
    assert post(make(http_server), mode) == {"z": 1}


@pytest.mark.parametrize("mode", MODES)
def test_stream_yields_events(http_server: ScriptedServer, mode: str) -> None:
    """A streamed answer yields its SSE events in order, [DONE] included, with accept: SSE."""
    http_server.add(Reply(chunks=sse({"i": 0}, {"i": 1}, "[DONE]")))
    events = stream(make(http_server), mode)
    assert [e.data for e in events] == ['{"i": 0}', '{"i": 1}', "[DONE]"]
    assert http_server.requests[0].headers["accept"] == "text/event-stream"


@pytest.mark.parametrize("mode", MODES)
def test_slow_stream_delivers_each_event_as_it_comes(
    http_server: ScriptedServer, mode: str, released: list[threading.Event]
) -> None:
    """Each event reaches the caller before the server sends the next one."""
    gates = [gate(released) for _ in range(3)]
    chunks: list[Any] = []
    for number, event in enumerate(gates):
        chunks.extend(sse({"i": number}))
        chunks.append(event)
    http_server.add(Reply(chunks=chunks))
    order: list[str] = []

    def release(event: SSEEvent) -> None:
        number = event.json()["i"]
        order.append(f"got {number}")
        assert not gates[number].is_set()  # the server is still waiting: nothing was buffered
        gates[number].set()

    events = stream(make(http_server), mode, release)
    assert order == ["got 0", "got 1", "got 2"]
    assert len(events) == 3


@pytest.mark.parametrize("mode", MODES)
def test_cut_stream_is_a_stream_error_and_not_resent(
    http_server: ScriptedServer, mode: str
) -> None:
    """A stream cut mid-body raises StreamError after the events that arrived; nothing is resent."""
    http_server.add(Reply(chunks=[*sse({"i": 0}, {"i": 1}), b'data: {"i": 2', Cut()]))
    transport = make(http_server)
    seen: list[SSEEvent] = []
    with pytest.raises(StreamError, match="cut"):
        stream(transport, mode, seen.append)
    assert [e.json() for e in seen] == [{"i": 0}, {"i": 1}]
    assert len(http_server.requests) == 1
    # The transport is still usable: the caller can resume with a new request.
    http_server.add(Reply(json={"resumed": True}))
    assert post(transport, mode) == {"resumed": True}


@pytest.mark.parametrize("mode", MODES)
def test_stream_read_timeout(
    http_server: ScriptedServer, mode: str, released: list[threading.Event]
) -> None:
    """A stream that stalls after its first event times out with ProviderTimeoutError, not a retry."""
    http_server.add(Reply(chunks=[*sse({"i": 0}), gate(released)]))
    seen: list[SSEEvent] = []
    with pytest.raises(ProviderTimeoutError, match="stream"):
        stream(make(http_server, timeout=Timeouts(read=0.2)), mode, seen.append)
    assert len(seen) == 1
    assert len(http_server.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_stream_inband_error(http_server: ScriptedServer, mode: str) -> None:
    """An error event inside a 200 stream raises StreamError with the provider's message."""
    error = {"error": {"message": "The server had an error", "type": "server_error"}}
    http_server.add(Reply(chunks=sse({"i": 0}, error)))
    seen: list[SSEEvent] = []
    with pytest.raises(StreamError, match="The server had an error") as caught:
        stream(make(http_server), mode, seen.append)
    assert caught.value.provider_message == "The server had an error"
    assert len(seen) == 1


@pytest.mark.parametrize("mode", MODES)
def test_stream_inband_errors_can_be_left_to_the_codec(
    http_server: ScriptedServer, mode: str
) -> None:
    """With inband_errors=False error events are yielded like any other."""
    http_server.add(Reply(chunks=sse({"error": {"message": "x"}}, event="error")))
    events = stream(make(http_server, inband_errors=False), mode)
    assert [e.event for e in events] == ["error"]


@pytest.mark.parametrize("mode", MODES)
def test_stream_retries_before_it_starts(http_server: ScriptedServer, mode: str) -> None:
    """A 503 before the stream starts is retried; then the stream flows."""
    http_server.add(Reply(status=503), Reply(chunks=sse({"ok": 1})))
    assert [e.json() for e in stream(make(http_server), mode)] == [{"ok": 1}]


@pytest.mark.parametrize("mode", MODES)
def test_stream_error_status_maps(http_server: ScriptedServer, mode: str) -> None:
    """A 401 to a stream request is an AuthenticationError with the JSON body's message."""
    http_server.add(Reply(status=401, json={"error": {"message": "Incorrect API key"}}))
    with pytest.raises(AuthenticationError, match="Incorrect API key"):
        stream(make(http_server), mode)


@pytest.mark.parametrize("mode", MODES)
def test_stream_lines_for_ndjson(http_server: ScriptedServer, mode: str) -> None:
    """stream_lines yields NDJSON lines whole, however the chunks fall."""
    http_server.add(Reply(chunks=[b'{"a":1}\n{"b"', b":2}\n", b'{"c":3}']))
    transport = make(http_server)
    if mode == "sync":
        lines = list(transport.stream_lines_sync("api/chat", {}))
        transport.close()
    else:

        async def run() -> list[str]:
            async with transport:
                return [line async for line in transport.stream_lines("api/chat", {})]

        lines = asyncio.run(run())
    assert lines == ['{"a":1}', '{"b":2}', '{"c":3}']


@pytest.mark.parametrize("mode", MODES)
def test_stream_bytes(http_server: ScriptedServer, mode: str) -> None:
    """stream_bytes yields the body as it arrives, for formats the transport does not parse."""
    http_server.add(Reply(chunks=[b"[{", b"}]"]))
    transport = make(http_server)
    if mode == "sync":
        data = b"".join(transport.stream_bytes_sync("x", {}))
        transport.close()
    else:

        async def run() -> bytes:
            async with transport:
                return b"".join([c async for c in transport.stream_bytes("x", {})])

        data = asyncio.run(run())
    assert data == b"[{}]"


def test_injected_sync_client_is_used_and_left_open(http_server: ScriptedServer) -> None:
    """An injected httpx.Client carries the requests and is not closed by the transport."""
    http_server.add(Reply(json={"ok": 1}))
    with httpx.Client(headers={"x-from-user": "yes"}) as client:
        transport = make(http_server, http_client=client)
        assert transport.post_json_sync("x", {}) == {"ok": 1}
        transport.close()
        assert not client.is_closed
    assert http_server.requests[0].headers["x-from-user"] == "yes"


def test_injected_async_client_is_used_and_left_open(http_server: ScriptedServer) -> None:
    """An injected httpx.AsyncClient (given as http_client) carries the async requests."""
    http_server.add(Reply(json={"ok": 1}))

    async def run() -> None:
        async with httpx.AsyncClient(headers={"x-from-user": "async"}) as client:
            transport = make(http_server, http_client=client)
            assert await transport.post_json("x", {}) == {"ok": 1}
            await transport.aclose()
            assert not client.is_closed

    asyncio.run(run())
    assert http_server.requests[0].headers["x-from-user"] == "async"


def test_injected_client_keeps_its_own_timeout(
    http_server: ScriptedServer, released: list[threading.Event]
) -> None:
    """Without timeout=, an injected client's own timeout applies."""
    http_server.add(Reply(stall=gate(released)))
    with httpx.Client(timeout=0.2) as client:
        transport = make(http_server, http_client=client, retry=None)
        with pytest.raises(ProviderTimeoutError):
            transport.post_json_sync("x", {})


def test_owned_async_client_survives_new_event_loops(http_server: ScriptedServer) -> None:
    """The same transport works across asyncio.run calls (one client per loop, closed with it)."""
    http_server.add(Reply(json={"n": 1}), Reply(json={"n": 2}))
    transport = make(http_server)

    async def once() -> Any:
        return await transport.post_json("x", {})

    assert asyncio.run(once()) == {"n": 1}
    assert asyncio.run(once()) == {"n": 2}


def test_connections_are_reused(http_server: ScriptedServer) -> None:
    """Sequential requests share one keep-alive connection."""
    http_server.add(*[Reply(json={})] * 3)
    transport = make(http_server)
    for _ in range(3):
        transport.post_json_sync("x", {})
    transport.close()
    assert http_server.connections == 1


def test_policy_and_timeouts_are_normalised() -> None:
    """A number of retries, a number of seconds and None are accepted shorthands."""
    transport = Transport("p", "http://h/v1/", retry=5, timeout=3)
    assert transport.retry == RetryPolicy(max_retries=5)
    assert transport.timeouts == Timeouts(read=3.0, write=3.0, total=3.0)
    assert transport.url("/chat") == "http://h/v1/chat"
    assert Transport("p", "http://h", retry=None).retry.max_retries == 0
    assert Transport("p", "http://h", timeout=None).timeouts == Timeouts.of(None)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_cut_stream_in_a_run_keeps_the_state_and_resumes(http_server: ScriptedServer) -> None:
    """A stream cut in step 2 raises StreamError carrying the run's state; resuming it continues
    from step 2 without running step 1's tool again."""
    import toolfold

    executed: list[int] = []

    @toolfold.tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: The first.
            b: The second.
        """
        executed.append(a)
        return a + b

    call = {"index": 0, "id": "call_1", "type": "function"}
    http_server.add(
        Reply(
            chunks=sse(
                _chunk({"role": "assistant", "tool_calls": [{**call, "function": {"name": "add", "arguments": ""}}]}),
                _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 2, "b": 3}'}}]}),
                _chunk({}, "tool_calls"),
                "[DONE]",
            )
        ),
        Reply(chunks=[*sse(_chunk({"role": "assistant", "content": "The sum"})), Cut()]),
    )  # fmt: skip
    model = toolfold.model("openai:m", base_url=f"{http_server.url}/v1", api_key="sk-x", retry=0)
    agent = toolfold.Agent(model, tools=[add], max_steps=5)
    seen: list[Any] = []
    with pytest.raises(StreamError) as caught:
        seen.extend(agent.stream("add 2 and 3"))
    state = caught.value.state  # type: ignore[attr-defined]
    assert executed == [2]
    assert any(getattr(e, "text", None) == "The sum" for e in seen)

    http_server.add(Reply(json={
        "id": "c2",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "The sum is 5."}, "finish_reason": "stop"}],
    }))  # fmt: skip
    response = toolfold.resume(state, model=model, tools=[add])
    assert response.text == "The sum is 5."
    assert executed == [2]  # step 1's tool did not run again
    resent = http_server.requests[-1].json()["messages"]
    assert [m["role"] for m in resent][-2:] == ["assistant", "tool"]
    assert resent[-1]["content"] == "5"


def test_a_retry_log_line_escapes_the_providers_error_text(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The retry's log record is one line: a newline or an escape sequence in the provider's
    error message is written as an escape (it forged a second record); the error keeps its text."""
    message = "overloaded\nWARNING forged record \x1b[31mred\x1b[0m"
    http_server.add(Reply(status=500, json={"error": {"message": message}}), Reply(json={}))
    transport = Transport("openai", http_server.url, "k", sleep_sync=lambda _: None)
    with caplog.at_level(logging.INFO, logger="toolfold.http"):
        transport.post_json_sync("x", {})
    transport.close()
    (retried,) = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert retried.endswith(r": overloaded\x0aWARNING forged record \x1b[31mred\x1b[0m")
    assert "\n" not in retried
    assert "\x1b" not in retried
