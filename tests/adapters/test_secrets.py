"""The API key never shows: not in any error or what it was raised from, tracebacks, states or logs."""

from __future__ import annotations

import asyncio
import json
import logging
from types import ModuleType
from typing import Any

import aiohttp
import httpx
import pytest
from backends import OWNED
from leaks import chain, every_text
from scripted_http import Recorded, Reply, ScriptedServer, sse

import toolfold
from toolfold import (
    Agent,
    ImagePart,
    ProviderError,
    RunState,
    TextPart,
    Tool,
    ToolResultPart,
    agenerate_text,
    generate_text,
)
from toolfold.runtime import Message, ModelRequest
from toolfold.testing import override_models

httpx2: ModuleType | None  # None where it is not installed (Python 3.10)
try:
    import httpx2
except ImportError:
    httpx2 = None

KEY = "sk-secret-key-0123456789abcdefXYZ"


def _assert_hidden(error: BaseException) -> None:
    text = every_text(error)
    assert KEY not in text
    state = getattr(error, "state", None)
    if state is not None:
        assert KEY not in state.to_json()


def _model(url: str, opened: list[Any], client: Any = None, key: str = KEY) -> Any:
    """A model on the default client, or on ``client`` (an httpx client, closed after the test)."""
    options: dict[str, Any] = {"http_client": client} if client is not None else {}
    made = toolfold.model(
        "openai-compatible:m", base_url=f"{url}/v1", api_key=key, retry=0, **options
    )
    opened.append(made)
    if client is not None:
        opened.append(client)
    return made


def _echo(status: int, body: bytes, *, stream: bool = False) -> Any:
    """A handler answering ``body`` with the request's Authorization header spliced in (a leaky server)."""

    def handler(request: Recorded) -> Reply:
        auth = request.headers.get("authorization", "").encode()
        filled = body.replace(b"AUTH", auth)
        if stream:
            return Reply(
                status=status, headers={"content-type": "text/event-stream"}, chunks=[filled]
            )
        return Reply(
            status=status,
            body=filled,
            headers={"content-type": "application/json", "x-echo": auth.decode()},
        )

    return handler


LEAKS = [
    (200, b"<html>AUTH</html>"),  # not JSON: a JSONDecodeError whose .doc is the body
    (200, b'{"choices": 8, "echo": "AUTH"}'),  # malformed
    (401, b'{"error": {"message": "bad key AUTH", "code": "AUTH"}}'),
    (500, b"AUTH"),
    (200, b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "AUTH"}}'),
]


@pytest.mark.parametrize("client", ["default", "httpx"])
@pytest.mark.parametrize(("status", "body"), LEAKS)
def test_an_echoed_key_is_scrubbed_from_the_whole_errorchain(
    http_server: ScriptedServer, opened: list[Any], status: int, body: bytes, client: str
) -> None:
    """A server echoing the key in a body or header: no error in the chain, traceback or state shows it."""
    http_server.handler = _echo(status, body)
    injected = httpx.Client() if client == "httpx" else None
    with pytest.raises(ProviderError) as caught:
        generate_text(_model(http_server.url, opened, injected), "hi")
    assert "***" in every_text(caught.value)  # the key was echoed, and masked
    _assert_hidden(caught.value)


def test_an_echoed_key_in_a_stream_is_scrubbed(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A stream event that is not JSON and holds the key: the StreamError chain never shows it."""
    http_server.handler = _echo(200, b"data: {AUTH\n\n", stream=True)
    with pytest.raises(toolfold.StreamError) as caught:
        for _ in Agent(model=_model(http_server.url, opened)).stream("hi"):
            pass
    _assert_hidden(caught.value)


@pytest.mark.parametrize("client", ["default", "httpx"])
def test_a_connection_error_does_not_keep_the_request_headers(
    opened: list[Any], client: str, refused_port: int
) -> None:
    """The exception under a ConnectionError (httpx's holds the request) never shows the key."""
    port = refused_port
    injected = httpx.Client() if client == "httpx" else None
    with pytest.raises(toolfold.ProviderConnectionError) as caught:
        generate_text(_model(f"http://127.0.0.1:{port}", opened, injected), "hi")
    if injected is not None:
        chained = [e for e in chain(caught.value) if getattr(e, "_request", None) is not None]
        assert chained  # the request object is there, so the check below checks something
    _assert_hidden(caught.value)


#: Every client a model can run on, its own or injected: (kind, mode).
LOGGED = [
    pytest.param(kind, mode, id=f"{kind}-{mode}")
    for kind in [*(f"own-{n}" for n in OWNED), "httpx", *(["httpx2"] if httpx2 else []), "aiohttp"]
    for mode in ("sync", "async")
    if not (mode == "sync" and kind in ("aiohttp", "own-aiohttp"))  # aiohttp is async only
]
#: The loggers of the HTTP stack, all at DEBUG in the test.
HTTP_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2", "aiohttp", "toolfold")


def _logged_model(url: str, kind: str, client: Any) -> Any:
    """A model on its own client (``own-<backend>``) or on ``client``, injected."""
    options: dict[str, Any] = {}
    if kind.startswith("own-"):
        options["http"] = kind.removeprefix("own-")
    elif isinstance(client, (httpx.Client, *([httpx2.Client] if httpx2 else []))):
        options["http_client"] = client
    else:
        options["async_http_client"] = client
    return toolfold.model(
        "openai-compatible:m", base_url=f"{url}/v1", api_key=KEY, retry=0, **options
    )


def _injected(kind: str, mode: str) -> Any:
    """The client to inject for ``kind`` (made in the loop that uses it), or None."""
    if kind.startswith("own-"):
        return None
    if kind == "aiohttp":
        return aiohttp.ClientSession()
    package: Any = httpx2 if kind == "httpx2" else httpx
    return package.Client() if mode == "sync" else package.AsyncClient()


def _two_calls(url: str, kind: str, mode: str) -> None:
    """An answer, then a 401 whose body echoes the key, through ``kind`` in ``mode``."""
    if mode == "sync":
        client = _injected(kind, mode)
        model = _logged_model(url, kind, client)
        try:
            assert generate_text(model, "hi").text == "hello"
            with pytest.raises(toolfold.AuthenticationError):
                generate_text(model, "hi")
        finally:
            model.close()
            if client is not None:
                client.close()
        return

    async def run() -> None:
        client = _injected(kind, mode)
        model = _logged_model(url, kind, client)
        try:
            assert (await agenerate_text(model, "hi")).text == "hello"
            with pytest.raises(toolfold.AuthenticationError):
                await agenerate_text(model, "hi")
        finally:
            await model.aclose()
            if isinstance(client, aiohttp.ClientSession):
                await client.close()
            elif client is not None:
                await client.aclose()

    asyncio.run(run())


@pytest.mark.parametrize(("kind", "mode"), LOGGED)
def test_debug_logs_of_the_http_stack_never_show_the_key(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture, kind: str, mode: str
) -> None:
    """With the HTTP stack's loggers at DEBUG, no log line holds the key, on every client."""
    message = {"role": "assistant", "content": "hello"}
    answers = [
        lambda _: Reply(json={"id": "r", "choices": [{"message": message}]}),
        # The key echoed in the body and in a header: httpcore logs the headers at DEBUG.
        _echo(401, b'{"error": {"message": "bad key AUTH"}}'),
    ]
    http_server.handler = lambda request: answers[len(http_server.requests) - 1](request)
    for name in HTTP_LOGGERS:
        # set_level puts the level back after the test: left at DEBUG, these
        # loggers would fill every later test's log capture (and its memory).
        caplog.set_level(logging.DEBUG, logger=name)
    _two_calls(http_server.url, kind, mode)
    records = caplog.records
    package = kind.removeprefix("own-")
    if package in ("httpx", "httpx2"):  # they did log, so the check below checks something
        core = package.replace("httpx", "httpcore")
        assert any(r.name == package and r.getMessage().startswith("HTTP Request") for r in records)
        assert any(
            r.name.startswith(core) and "send_request_headers" in r.getMessage() for r in records
        )
    assert any(r.name.startswith("toolfold") for r in records)
    assert not [r.getMessage() for r in records if KEY in r.getMessage()]


def test_a_state_never_holds_the_key(http_server: ScriptedServer, opened: list[Any]) -> None:
    """A finished run's state, plain or signed, does not hold the model's key."""
    message = {"role": "assistant", "content": "hello"}
    http_server.add(Reply(json={"id": "r", "choices": [{"message": message}]}))
    state = generate_text(_model(http_server.url, opened), "hi").state
    for text in (state.to_json(), state.to_json(key="signing-key")):
        assert KEY not in text
        assert RunState.from_json(text) == state
    assert KEY not in json.dumps(repr(state))


def test_a_stream_after_http_200_keeps_the_key_out(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """An in-band error echoing the key is scrubbed like an HTTP error."""
    http_server.handler = _echo(200, sse({"error": {"message": "AUTH"}})[0], stream=True)
    with pytest.raises(toolfold.StreamError) as caught:
        for _ in Agent(model=_model(http_server.url, opened)).stream("hi"):
            pass
    assert "***" in str(caught.value)
    _assert_hidden(caught.value)


IN_BAND_CODES = [
    # (model, stream, the answer's body): each provider's error with the key as its code.
    ("openai-responses:m", True, sse({"type": "error", "message": "no", "code": f"c-{KEY}"})[0]),
    ("openai-compatible:m", True, sse({"error": {"message": "no", "code": f"c-{KEY}"}})[0]),
    (
        "anthropic:m",
        True,
        b'event: error\ndata: {"type": "error", "error": {"type": "t-%s", "message": "no"}}\n\n'
        % KEY.encode(),
    ),
    (
        "anthropic:m",
        False,
        b'{"type": "error", "error": {"type": "t-%s", "message": "no"}}' % KEY.encode(),
    ),
    ("gemini:m", True, sse({"error": {"code": 500, "message": "no", "status": f"s-{KEY}"}})[0]),
]


@pytest.mark.parametrize(
    ("spec", "stream", "body"),
    IN_BAND_CODES,
    ids=[f"{spec}-{'stream' if stream else 'body'}" for spec, stream, _ in IN_BAND_CODES],
)
def test_a_key_in_an_in_band_error_code_is_scrubbed(
    http_server: ScriptedServer, opened: list[Any], spec: str, stream: bool, body: bytes
) -> None:
    """The ``code`` of an error sent inside a 200 answer is scrubbed like its message.

    The Responses API's ``error`` event kept the key in ``err.code``.
    """
    headers = {"content-type": "text/event-stream" if stream else "application/json"}
    http_server.add(Reply(headers=headers, chunks=[body]))
    base = http_server.url if spec.startswith(("anthropic", "gemini")) else f"{http_server.url}/v1"
    model = toolfold.model(spec, base_url=base, api_key=KEY, retry=0)
    opened.append(model)
    request = ModelRequest([Message.user("hi")])

    def ask() -> Any:
        return list(model.stream_sync(request)) if stream else model.request_sync(request)

    with pytest.raises(ProviderError) as caught:
        ask()
    assert caught.value.code is not None
    assert "***" in caught.value.code
    _assert_hidden(caught.value)


def _record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("httpcore.http11", logging.DEBUG, __file__, 1, message, args, None)


@pytest.mark.parametrize("make", ["guard", "redacting"])
def test_a_log_filter_passes_a_record_it_cannot_format_to_logging(make: str) -> None:
    """A record whose message does not format (``log.info("%d", "x")``) passes the
    transports' log guard and `RedactingFilter` as it was, for logging to report the
    mistake, instead of the filter raising it out of the caller's log call; its
    traceback is still scrubbed."""
    from toolfold.adapters import RedactingFilter, Secret
    from toolfold.adapters._http import _logs

    secret = Secret("secret-0123")
    found: logging.Filter
    if make == "guard":
        found = guard = _logs._KeyFilter()
        guard.add(secret)
    else:
        found = RedactingFilter([secret])
    record = _record("port %d", "x")
    record.stack_info = "Stack (most recent call last): secret-0123"
    assert found.filter(record)
    assert (record.msg, record.args) == ("port %d", ("x",))
    assert record.stack_info == "Stack (most recent call last): ***"


@pytest.mark.parametrize("make", ["guard", "redacting"])
def test_a_log_filter_sorts_its_secrets_once_not_per_record(
    make: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transports' log guard and `RedactingFilter` work out what to replace when their
    secrets change; each record is only scrubbed (a secret inside another still hidden)."""
    from toolfold.adapters import RedactingFilter, Secret
    from toolfold.adapters._http import _keys, _logs

    inner, outer = Secret("secret-0123"), Secret("hunter2-secret-0123")
    found: logging.Filter
    if make == "guard":
        found = guard = _logs._KeyFilter()
        for secret in (inner, outer):
            guard.add(secret)
    else:
        found = RedactingFilter([inner, outer])

    def per_record(*args: object) -> object:
        raise AssertionError("secrets sorted for a record")

    monkeypatch.setattr(_keys, "scrubs", per_record)
    monkeypatch.setattr(_logs, "scrubs", per_record, raising=False)
    for _ in range(3):
        record = _record("< %s: %s", "x-echo", "hunter2-secret-0123 and secret-0123")
        assert found.filter(record)
        assert record.getMessage() == "< x-echo: *** and ***"


@toolfold.tool
def relay_error() -> str:
    """Calls another service with the model's own credentials, which refuses them."""
    raise PermissionError(f"upstream refused Authorization: Bearer {KEY}")


@toolfold.tool
def config_dump() -> dict[str, str]:
    """Returns a configuration dump holding the model's key."""
    return {"api_key": KEY, "region": "eu"}


def _tool_then_text(tool_name: str, stream: bool) -> list[Reply]:
    """A call of ``tool_name``, then a text answer (streamed when ``stream``)."""
    call = {"id": "c1", "type": "function", "function": {"name": tool_name, "arguments": "{}"}}
    if stream:
        delta = {"tool_calls": [{"index": 0, **call}]}
        events = (
            sse(
                {"choices": [{"index": 0, "delta": delta, "finish_reason": "tool_calls"}]}, "[DONE]"
            ),
            sse(
                {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
                "[DONE]",
            ),
        )
        return [
            Reply(headers={"content-type": "text/event-stream"}, chunks=list(chunks))
            for chunks in events
        ]
    called = {"role": "assistant", "content": None, "tool_calls": [call]}
    return [
        Reply(json={"id": "r1", "choices": [{"message": called, "finish_reason": "tool_calls"}]}),
        Reply(json={"id": "r2", "choices": [{"message": {"role": "assistant", "content": "ok"}}]}),
    ]


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
@pytest.mark.parametrize(
    ("tool", "shown"),
    [
        (relay_error, "Error: PermissionError: upstream refused Authorization: Bearer ***"),
        (config_dump, '{"api_key":"***","region":"eu"}'),
    ],
    ids=["error", "result"],
)
def test_the_model_key_in_a_tool_text_is_masked(
    http_server: ScriptedServer, opened: list[Any], tool: Any, shown: str, how: str
) -> None:
    """The model's own key in a tool's error or result text is masked before it reaches
    the state and the next request, as the model's own text is (it was sent and kept)."""
    http_server.add(*_tool_then_text(tool.name, how == "stream"))
    agent = Agent(_model(http_server.url, opened), tools=[tool])
    if how == "run":
        state = agent.run("go").state
    elif how == "arun":
        state = asyncio.run(agent.arun("go")).state
    else:
        stream = agent.stream("go")
        for _ in stream:
            pass
        state = stream.response.state
    assert state.messages[2].tool_results[0].content == shown
    assert KEY not in state.to_json()
    assert "***" in http_server.requests[-1].body.decode()
    assert KEY not in http_server.requests[-1].body.decode()


@toolfold.tool
def queue_status() -> dict[str, str]:
    """Returns a status whose words are a local server's placeholder keys."""
    return {"queue": "EMPTY", "backend": "lm-studio", "sent": "Authorization: Bearer EMPTY"}


# (not "ollama": every key a transport is given stays in the process's log filters,
# and later tests read log lines that name the ollama provider)
@pytest.mark.parametrize("placeholder", ["EMPTY", "lm-studio"])
def test_a_placeholder_key_is_masked_in_a_tool_text_only_as_a_credential(
    http_server: ScriptedServer, opened: list[Any], placeholder: str
) -> None:
    """A local server's placeholder key (vLLM's ``EMPTY``, LM Studio's ``lm-studio``) is a word a
    tool's data holds: masked there only where it is written as a credential (it was
    masked wherever it stood: ``"queue": "***"``)."""
    http_server.add(*_tool_then_text(queue_status.name, False))
    made = toolfold.model(
        "openai-compatible:m", base_url=f"{http_server.url}/v1", api_key=placeholder, retry=0
    )
    opened.append(made)
    state = Agent(made, tools=[queue_status]).run("go").state
    sent = "Bearer ***" if placeholder == "EMPTY" else "Bearer EMPTY"
    expected = f'{{"queue":"EMPTY","backend":"lm-studio","sent":"Authorization: {sent}"}}'
    assert state.messages[2].tool_results[0].content == expected


def test_a_tool_text_is_masked_of_short_credentials_only_where_written_as_such() -> None:
    """In a tool's text a secret shorter than 16 characters (a key, a credential header's
    value) is masked where it is written as a credential, a longer one wherever it is."""
    short = toolfold.model(
        "openai-compatible:m",
        base_url="http://127.0.0.1:9/v1",
        api_key="lm-studio",
        headers={"x-session-id": "2024-06-01"},
    )
    mask = short.secret_masker()
    assert mask is not None
    for plain in ("booked for 2024-06-01", "the lm-studio build", "no secret here"):
        assert mask(plain) is plain
    assert mask("x-session-id: 2024-06-01") == "x-session-id: ***"
    assert mask("sent Bearer lm-studio") == "sent Bearer ***"
    long = toolfold.model("openai-compatible:m", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    long_mask = long.secret_masker()
    assert long_mask is not None
    assert long_mask(f"key={KEY}.") == "key=***."
    assert (
        toolfold.model("openai-compatible:m", base_url="http://127.0.0.1:9/v1").secret_masker()
        is None
    )


@pytest.mark.parametrize("kind", ["value", "error", "part", "parts"])
def test_a_caller_s_tool_result_quoting_the_key_is_masked(
    http_server: ScriptedServer, opened: list[Any], kind: str
) -> None:
    """A result given to resume(tool_results=) that quotes the model's key is masked as a
    tool's own result is: it reached the next request and the state as given."""
    http_server.add(*_tool_then_text(config_dump.name, False))
    agent = Agent(_model(http_server.url, opened), tools=[config_dump], auto_execute_tools=False)
    first = agent.run("go")
    (call,) = first.tool_calls
    given: Any = {
        "value": {"api_key": KEY},
        "error": PermissionError(f"refused Bearer {KEY}"),
        "part": ToolResultPart(call.id, call.name, f"key={KEY}"),
        "parts": [TextPart(f"key={KEY}"), TextPart("kept")],
    }[kind]
    state = agent.resume(first.state, tool_results={call.id: given}).state
    assert KEY not in http_server.requests[-1].body.decode()
    assert KEY not in state.to_json()
    assert "***" in state.messages[2].tool_results[0].content


def _called(tool_name: str, arguments: str) -> Reply:
    """A model's answer calling ``tool_name`` with ``arguments`` (JSON)."""
    call = {"id": "c1", "type": "function", "function": {"name": tool_name, "arguments": arguments}}
    called = {"role": "assistant", "content": None, "tool_calls": [call]}
    return Reply(json={"id": "r1", "choices": [{"message": called, "finish_reason": "tool_calls"}]})


def test_a_caller_s_answer_to_a_sub_run_is_masked_of_the_sub_run_s_key(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """An answer given to resume(tool_results=) for a call of a sub-run (an agent used as
    a tool) is masked of the key of that sub-run's model, which it is sent to: it was
    masked of the top model's key only, and the helper's key went on in its request."""
    helper_key = "sk-helper-key-0123456789abcdefHLP"
    text = Reply(
        json={"id": "r2", "choices": [{"message": {"role": "assistant", "content": "ok"}}]}
    )
    http_server.add(_called("ask", '{"input": "x"}'), _called("ext", "{}"), text, text)
    ext = Tool(name="ext", description="External.", parameters={"type": "object", "properties": {}})
    helper = Agent(_model(http_server.url, opened, key=helper_key), tools=[ext], name="helper")
    top = Agent(_model(http_server.url, opened), tools=[helper.as_tool(name="ask")])
    first = top.run("go")
    ((key, call),) = first.state.keyed_tool_calls
    assert call.name == "ext"
    answer = f"token {helper_key} and {KEY}"
    state = top.resume(first.state, tool_results={key: answer}).state
    sent = [request.body.decode() for request in http_server.requests[2:]]
    assert len(sent) == 2
    assert not any(helper_key in body or KEY in body for body in sent)
    stored = state.to_json()
    assert helper_key not in stored
    assert KEY not in stored
    assert "token ***" in sent[0]


def test_an_answer_to_a_sub_run_is_masked_of_the_key_of_the_model_an_override_gives_it(
    http_server: ScriptedServer, opened: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sub-run's agent made from a string, in an `override_models` block: an answer to its
    call is masked of the key of the model the block gives it, which its run calls (it was
    masked of the key of the model the string built, and the block's key went on)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-built-key-0123456789abcdefBLT")
    helper_key = "sk-override-key-0123456789abcdefOVR"
    text = Reply(
        json={"id": "r2", "choices": [{"message": {"role": "assistant", "content": "ok"}}]}
    )
    http_server.add(_called("ask", '{"input": "x"}'), _called("ext", "{}"), text, text)
    ext = Tool(name="ext", description="External.", parameters={"type": "object", "properties": {}})
    helper = Agent("openai:gpt-4o-mini", tools=[ext], name="helper")
    top = Agent(_model(http_server.url, opened), tools=[helper.as_tool(name="ask")])
    given = _model(http_server.url, opened, key=helper_key)  # (made outside the block)
    with override_models(lambda _: given):
        first = top.run("go")
        ((key, _),) = first.state.keyed_tool_calls
        top.resume(first.state, tool_results={key: f"token {helper_key}"})
    sent = [request.body.decode() for request in http_server.requests[2:]]
    assert len(sent) == 2
    assert not any(helper_key in body for body in sent)
    assert "token ***" in sent[0]


@toolfold.tool
def screenshot() -> list[Any]:
    """Returns a caption quoting the key, and an image."""
    return [
        TextPart(f"token used: {KEY}"),
        ImagePart(data=b"\x89PNG\r\n\x1a\n", media_type="image/png"),
    ]


def test_the_key_in_a_text_part_of_a_tool_result_is_masked(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A result with an image: its text part is masked as its content is (the part kept
    the key, and went to the next request with it)."""
    http_server.add(*_tool_then_text(screenshot.name, False))
    state = Agent(_model(http_server.url, opened), tools=[screenshot]).run("go").state
    (result,) = state.messages[2].tool_results
    assert result.content.startswith("token used: ***")
    assert result.parts[0] == TextPart("token used: ***")
    assert KEY not in state.to_json()
    assert KEY not in http_server.requests[-1].body.decode()
