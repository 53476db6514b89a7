"""API keys come from the environment and never show in a repr, an error or a log line."""

from __future__ import annotations

import asyncio
import io
import itertools
import logging
import pickle
import sys
from typing import Any

import httpx
import pytest
from backends import ASYNC_ONLY, OWNED
from scripted_http import Recorded, Reply, ScriptedServer, sse

import toolfold
from toolfold import ModelConfigError, ProviderError
from toolfold.adapters._http._keys import (
    API_KEY_ENV_VARS,
    RedactingFilter,
    Secret,
    keys_deferred,
    redact,
    redact_logs,
    resolve_api_key,
)
from toolfold.adapters._http._transport import Transport
from toolfold.runtime import Message, ModelRequest

KEY = "sk-proj-SECRET-abcdef0123456789"


@pytest.mark.parametrize(
    ("provider", "variable"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("groq", "GROQ_API_KEY"),
        ("mistral", "MISTRAL_API_KEY"),
        ("deepseek", "DEEPSEEK_API_KEY"),
        ("openrouter", "OPENROUTER_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
    ],
)
def test_keys_come_from_the_usual_variables(provider: str, variable: str) -> None:
    """Each provider reads its usual environment variable."""
    assert variable in API_KEY_ENV_VARS[provider]
    key = resolve_api_key(provider, None, environ={variable: KEY})
    assert key is not None
    assert key.reveal() == KEY


def test_explicit_key_wins_and_blank_is_refused() -> None:
    """api_key= wins over the environment; an empty key is a config error."""
    key = resolve_api_key("openai", "sk-given", environ={"OPENAI_API_KEY": KEY})
    assert key is not None
    assert key.reveal() == "sk-given"
    with pytest.raises(ModelConfigError, match="empty"):
        resolve_api_key("openai", "  ", environ={})


def test_missing_key_names_the_variable() -> None:
    """No key anywhere is an error that says which variable to set, unless not required."""
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        resolve_api_key("openai", None, environ={})
    assert resolve_api_key("ollama", None, environ={}, required=False) is None


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:gpt-4o", "OPENAI_API_KEY"),
        ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("gemini:gemini-2.5-flash", "GEMINI_API_KEY or GOOGLE_API_KEY"),
    ],
)
@pytest.mark.parametrize(
    ("backend", "mode"),
    [
        (backend, mode)
        for backend in OWNED
        for mode in ("sync", "async", "stream-sync", "stream-async")
        if not (backend in ASYNC_ONLY and mode in ("sync", "stream-sync"))
    ],
)
def test_a_model_built_without_its_key_under_keys_deferred_refuses_to_send(
    http_server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
    spec: str,
    variable: str,
    backend: str,
    mode: str,
) -> None:
    """Under keys_deferred a keyless model is built, and each call raises the missing key's error, sending nothing."""
    for name in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "")  # blank reads as missing
    options: dict[str, Any] = {"base_url": http_server.url, "retry": 0, "http": backend}
    with pytest.raises(ModelConfigError) as unbuilt:
        toolfold.model(spec, **options)
    with keys_deferred():
        model = toolfold.model(spec, **options)
    request = ModelRequest((Message.user("hi"),))

    def call() -> None:
        if mode == "sync":
            model.request_sync(request)
        elif mode == "stream-sync":
            list(model.stream_sync(request))
        else:
            asyncio.run(call_async())

    async def call_async() -> None:
        try:
            if mode == "stream-async":
                async for _ in model.stream(request):
                    pass
            else:
                await model.request(request)
        finally:
            await model.aclose()

    for _ in range(2):  # every call, not only the first
        with pytest.raises(ModelConfigError) as refused:
            call()
        provider = spec.partition(":")[0]
        assert str(refused.value).startswith(f"{unbuilt.value} (this model was built without")
        assert str(refused.value).startswith(
            f"no API key for provider {provider!r}: pass api_key=... to the model (toolfold.model('{provider}:...', api_key=...)) or set {variable} ("
        )
        assert "once the key is set" in str(refused.value)
    model.close()
    assert http_server.requests == []
    assert http_server.connections == 0


def test_keys_deferred_builds_models_as_usual_with_a_key_or_a_blank_api_key() -> None:
    """Under keys_deferred a model whose key is set is keyed as usual, and api_key="" is still refused."""
    with keys_deferred():
        model = toolfold.model("openai:gpt-4o", api_key=KEY)
        with pytest.raises(ModelConfigError, match="empty"):
            toolfold.model("openai:gpt-4o", api_key=" ")
    assert model._transport._refusal is None  # type: ignore[attr-defined]


def test_secret_never_prints() -> None:
    """repr, str, f-strings and %-formatting of a Secret hide the value."""
    secret = Secret(KEY)
    percent = "%s" % secret  # noqa: UP031  (the old style must be safe too)
    for text in (repr(secret), str(secret), f"{secret}", percent, f"{secret!r}"):
        assert KEY not in text
        assert "***" in text
    assert KEY not in repr([secret, {"k": secret}])
    assert secret == Secret(KEY)
    assert secret != Secret("other")


def test_secret_refuses_pickling() -> None:
    """A Secret cannot be pickled into a checkpoint by accident."""
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(Secret(KEY))


def test_an_agent_whose_model_has_a_key_can_be_deep_copied(http_server: ScriptedServer) -> None:
    """copy.deepcopy of an agent with api_key=...: the copy works, shares the key and the clients."""
    import copy

    http_server.handler = lambda request: Reply(
        json={"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
    )
    agent = toolfold.Agent(
        toolfold.model("openai:gpt-4o-mini", base_url=f"{http_server.url}/v1", api_key=KEY)
    )
    twin = copy.deepcopy(agent)
    assert twin is not agent
    assert twin.run("hello").text == "hi"
    assert http_server.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    secret = Secret(KEY)
    assert copy.deepcopy(secret) is secret
    assert copy.copy(secret) is secret
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(secret)
    agent.model.close()  # (the twin's model shares its clients)


def test_transport_repr_hides_the_key() -> None:
    """A transport's repr and vars-free printing never show the key."""
    transport = Transport("openai", "https://api.openai.com/v1", KEY)
    assert KEY not in repr(transport)
    assert KEY not in str(transport)


def test_error_never_echoes_the_key(http_server: ScriptedServer) -> None:
    """A server that echoes the Authorization header back gets it scrubbed from the error."""

    def echo(request):  # type: ignore[no-untyped-def]
        auth = request.headers["authorization"]
        return Reply(status=401, json={"error": {"message": f"Incorrect API key provided: {auth}"}})

    http_server.handler = echo
    transport = Transport("openai", http_server.url, KEY, retry=None)
    with pytest.raises(ProviderError) as caught:
        transport.post_json_sync("chat/completions", {})
    transport.close()
    error = caught.value
    for text in (
        str(error),
        repr(error),
        error.body,
        error.provider_message or "",
        repr(vars(error)),
    ):
        assert KEY not in text
    assert "Incorrect API key provided" in str(error)


LONG_KEY = "sk-proj-SECRETKEY1234567890abcdefghij"


def test_an_error_echoing_the_key_less_its_end_masks_that_start(
    http_server: ScriptedServer,
) -> None:
    """A server that echoes the key less its last characters (``key=sk-proj-...***``)
    gets that start of it (16 characters or more) masked too; a common start
    (``sk-proj-``) shorter than that is left."""
    message = f"key={LONG_KEY[:-4]}*** (from {LONG_KEY[:20]}); keys start with sk-proj-"
    http_server.add(Reply(status=401, json={"error": {"message": message}}))
    transport = Transport("openai", http_server.url, LONG_KEY, retry=None)
    with pytest.raises(ProviderError) as caught:
        transport.post_json_sync("chat/completions", {})
    transport.close()
    error = caught.value
    assert error.provider_message == "key=****** (from ***); keys start with sk-proj-"
    for text in (str(error), repr(error), error.body, repr(vars(error))):
        assert LONG_KEY[:16] not in text
    assert redact(f"{LONG_KEY[:15]}!", [Secret(LONG_KEY)]) == f"{LONG_KEY[:15]}!"
    assert redact(f"{LONG_KEY[:16]}!", [Secret(LONG_KEY)]) == "***!"
    assert redact(f"x{LONG_KEY}y", [Secret(LONG_KEY)]) == "x***y"
    # (a character JSON writes as an escape goes on under the mask: decoded, none shows)
    escaped = f"{LONG_KEY[:20]}\\u{ord(LONG_KEY[20]):04x}{LONG_KEY[21:-4]}!"
    assert redact(escaped, [Secret(LONG_KEY)]) == "***!"


@pytest.mark.parametrize("cuts", [(), (10,), (20,), (12, 24), (30,)])
def test_an_answer_writing_a_start_of_the_key_is_the_same_streamed_or_whole(
    cuts: tuple[int, ...],
) -> None:
    """A successful answer masks the whole key only: a 16+ character start of it (not the
    key) stays, the same in a whole answer and in a stream however its deltas split it."""
    import json

    from toolfold.adapters._http._echoes import Echoes
    from toolfold.adapters._split_echoes import SplitEchoes
    from toolfold.runtime import TextDelta

    text = f"key {LONG_KEY[:16]}XYZ rest; {LONG_KEY[:-4]}*** is bad; and {LONG_KEY}."
    expected = f"key {LONG_KEY[:16]}XYZ rest; {LONG_KEY[:-4]}*** is bad; and ***."
    echoes = Echoes([Secret(LONG_KEY)])

    def answered(piece: str) -> str:  # (a whole answer's string, or a stream's event)
        return str(json.loads(echoes.masked_text(json.dumps({"text": piece})))["text"])

    assert answered(text) == expected
    split = SplitEchoes(echoes.pairs)
    ends = [0, *cuts, len(text)]
    pieces = [answered(text[a:b]) for a, b in itertools.pairwise(ends)]
    out = [e for piece in pieces for e in split.feed(TextDelta(piece))]
    out += split.end()
    assert "".join(e.text for e in out if isinstance(e, TextDelta)) == expected


def test_stream_error_never_echoes_the_key(http_server: ScriptedServer) -> None:
    """An in-band stream error quoting the key is scrubbed as well."""
    http_server.add(Reply(chunks=[f'data: {{"error": {{"message": "bad {KEY}"}}}}\n\n'.encode()]))
    transport = Transport("openai", http_server.url, KEY)

    async def run() -> None:
        async with transport:
            async for _ in transport.stream("x", {}):
                pass

    with pytest.raises(ProviderError) as caught:
        asyncio.run(run())
    assert KEY not in str(caught.value)
    assert KEY not in caught.value.body


def test_logging_filter_scrubs_records(caplog: pytest.LogCaptureFixture) -> None:
    """RedactingFilter removes the key from messages and their arguments."""
    logger = logging.getLogger("toolfold.test.keys")
    logger.addFilter(RedactingFilter([Secret(KEY)]))
    try:
        with caplog.at_level(logging.DEBUG, logger="toolfold.test.keys"):
            logger.debug("headers: %s", {"authorization": f"Bearer {KEY}"})
            logger.info(f"raw {KEY}")
    finally:
        logger.filters.clear()
    assert caplog.records
    assert KEY not in caplog.text
    assert "Bearer ***" in caplog.text


def test_debug_logs_carry_no_key(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """At DEBUG, the transport's records (requests, retries) never contain the key."""
    http_server.add(Reply(status=500, json={"error": {"message": f"echo {KEY}"}}), Reply(json={}))
    transport = Transport("openai", http_server.url, KEY, sleep_sync=lambda _: None)
    with caplog.at_level(logging.DEBUG, logger="toolfold.http"):
        transport.post_json_sync("x", {})
    transport.close()
    assert any("retrying POST" in r.getMessage() for r in caplog.records)
    assert any("HTTP 200" in r.getMessage() for r in caplog.records)
    assert KEY not in caplog.text


def test_httpx_debug_logs_carry_no_key(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """With an injected httpx client and httpx/httpcore logging at DEBUG, no record has the key."""
    http_server.add(Reply(json={}))
    with httpx.Client() as client:
        transport = Transport("openai", http_server.url, KEY, http_client=client)
        with caplog.at_level(logging.DEBUG):
            transport.post_json_sync("x", {})
    assert any(r.name.startswith(("httpx", "httpcore")) for r in caplog.records)
    assert KEY not in caplog.text


def test_redact_leaves_other_text() -> None:
    """redact only touches the secret's value."""
    assert redact(f"a {KEY} b", [Secret(KEY), None]) == "a *** b"
    assert redact("nothing here", [Secret(KEY)]) == "nothing here"


@pytest.mark.parametrize("order", ["short first", "long first"])
def test_redact_masks_a_secret_that_holds_another_whole(order: str) -> None:
    """A secret inside another (a key "secret", a password "hunter2-secret-01"): masking the
    short one first left the long one cut and unmatched ("hunter2-***-01"), whatever order
    the transports were made in (the log guard keeps every transport's secrets in a set)."""
    short, long = Secret("secret"), Secret("hunter2-secret-01")
    secrets = [short, long] if order == "short first" else [long, short]
    assert redact("url http://bob:hunter2-secret-01@h and secret", secrets) == (
        "url http://bob:***@h and ***"
    )


def _echo(request: Recorded) -> Reply:
    """Answer with the Authorization header the client sent, everywhere a server might echo it."""
    auth = request.headers.get("authorization", "")
    path = request.path
    if "inband" in path:
        error = {"error": {"message": f"upstream said {auth}", "type": "server_error"}}
        start = {"id": "x", "model": "m", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
        return Reply(chunks=sse(start, error))
    if "notjson" in path:
        return Reply(chunks=[f"data: not-json {auth}\n\n".encode()])
    if "html" in path:
        return Reply(body=f"<html>{auth}</html>".encode(), headers={"content-type": "text/html"})
    if "detail" in path:  # FastAPI's 422, its errors quoting the header
        detail = [{"loc": ["header", auth], "msg": f"bad {auth}", "type": "value_error"}]
        return Reply(status=422, json={"detail": detail})
    if "nomessage" in path:  # no message: the body's start is quoted, cut inside the key
        key = auth.removeprefix("Bearer ")
        start = '{"error": {"message": null, "note": "'
        pad = "p" * (500 - len(start) - len(key) // 2)
        return Reply(status=400, body=f'{start}{pad}{key}"}}}}'.encode())
    if "redirect" in path:  # a 301 to a URL holding the key as user, in a query and a path
        key = auth.removeprefix("Bearer ")
        where = f"https://{key}@elsewhere.example/{key}/v1?api_key={key}"
        if "unreadable" in path:  # as the host, which urllib refuses to read
            where = f"http://[{key}]/v1"
        if "long" in path:  # the message's 500-character cut falls inside the key
            start = "https://elsewhere.example/"
            where = f"{start}{'a' * (489 - len(start))}{key}{'b' * 600}"
        return Reply(status=301, headers={"location": where})
    message = {"error": {"message": f"Incorrect API key provided: {auth}", "code": "bad_key"}}
    return Reply(status=401, json=message, headers={"x-echo": auth})


def _leaks(error: BaseException) -> list[str]:
    texts = {
        "str": str(error),
        "repr": repr(error),
        "body": str(getattr(error, "body", "")),
        "provider_message": str(getattr(error, "provider_message", "")),
        "headers": str(getattr(error, "headers", "")),
        "vars": repr(vars(error)),
    }
    return [name for name, text in texts.items() if KEY in text]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("path", "streamed"),
    [
        ("status", False),
        ("status", True),
        ("inband", True),
        ("notjson", True),
        ("html", False),
        ("detail", False),
        ("nomessage", False),
        ("redirect", False),
        ("redirect", True),
        ("redirect-unreadable", False),
        ("redirect-long", False),
        ("redirect-long-raising", False),
        ("redirect-raising", True),
    ],
)
def test_model_errors_never_echo_the_key(
    http_server: ScriptedServer, mode: str, path: str, streamed: bool
) -> None:
    """Through toolfold.model, an echoed key is scrubbed from message, body, headers, everything;
    with a user's client that raises on the status too ("raising": an event hook calling
    raise_for_status), whose error carries the location raw."""
    http_server.handler = _echo
    clients: dict[str, Any] = {}
    if "raising" in path:

        async def raise_async(response: httpx.Response) -> None:
            response.raise_for_status()

        clients = {
            "http_client": httpx.Client(
                event_hooks={"response": [httpx.Response.raise_for_status]}
            ),
            "async_http_client": httpx.AsyncClient(event_hooks={"response": [raise_async]}),
        }
    model = toolfold.model(
        "openai:gpt-4o", api_key=KEY, base_url=f"{http_server.url}/{path}", retry=0, **clients
    )
    request = ModelRequest((Message.user("hi"),))

    async def run() -> None:
        try:
            if streamed:
                async for _ in model.stream(request):
                    pass
            else:
                await model.request(request)
        finally:
            await model.aclose()

    def call() -> None:
        if mode == "async":
            asyncio.run(run())
        elif streamed:
            list(model.stream_sync(request))
        else:
            model.request_sync(request)

    with pytest.raises(ProviderError) as caught:
        call()
    model.close()
    if clients:  # (the user's: a model leaves them open)
        clients["http_client"].close()
        asyncio.run(clients["async_http_client"].aclose())
    assert _leaks(caught.value) == []
    assert "***" in str(caught.value) + caught.value.body
    assert KEY[:9] not in repr(vars(caught.value)) + str(caught.value)  # nor a start of it
    assert http_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_transport_attributes_hold_no_revealed_key(http_server: ScriptedServer) -> None:
    """vars() of a model's transport shows only the masked Secret; the key is added at send time."""
    http_server.add(Reply(json={}))
    model = toolfold.model("openai:gpt-4o", api_key=KEY, base_url=http_server.url)
    assert KEY not in repr(vars(model._transport))  # type: ignore[attr-defined]
    transport = Transport("openai", http_server.url, KEY, headers={"x-a": "1"})
    assert KEY not in repr(vars(transport))
    transport.post_json_sync("x", {})
    transport.close()
    assert http_server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_user_authorization_header_wins_over_the_key(http_server: ScriptedServer) -> None:
    """An Authorization header given by the user replaces the one made from the key."""
    http_server.add(Reply(json={}))
    transport = Transport("openai", http_server.url, KEY, headers={"Authorization": "Token t"})
    transport.post_json_sync("x", {})
    transport.close()
    assert http_server.requests[0].headers["authorization"] == "Token t"


@pytest.mark.parametrize(
    ("spec", "header"),
    [
        ("openai-compatible:m", "Authorization"),
        ("openai:gpt-4o", "authorization"),
        ("ollama:qwen3", "Authorization"),
        ("anthropic:claude-sonnet-4-5", "X-Api-Key"),
        ("gemini:gemini-2.5-flash", "x-goog-api-key"),
    ],
)
def test_an_api_key_and_the_header_it_is_sent_in_are_refused_together(
    spec: str, header: str
) -> None:
    """api_key= and headers= holding the header the key is sent in: the header won and the
    key given was never sent; now a ModelConfigError naming both, and neither value."""
    with pytest.raises(ModelConfigError) as raised:
        toolfold.model(
            spec, base_url="http://127.0.0.1:9/v1", api_key=KEY, headers={header: "Bearer tok-2"}
        )
    message = str(raised.value)
    assert message.startswith(f"api_key= and headers={{{header!r}: ...}} both give")
    assert KEY not in message
    assert "tok-2" not in message


def test_a_key_from_the_environment_gives_way_to_the_header_unsent(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key read from OPENAI_API_KEY and an Authorization header: the header is sent, the key not."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    http_server.add(Reply(json={}))
    model = toolfold.model(
        "openai:gpt-4o", base_url=http_server.url, headers={"Authorization": "Bearer tok-2"}
    )
    model._transport.post_json_sync("x", {})  # type: ignore[attr-defined]
    model.close()
    (request,) = http_server.requests
    assert request.headers["authorization"] == "Bearer tok-2"
    assert KEY.encode() not in request.head


@pytest.mark.parametrize(
    ("spec", "variable"),
    [("openai:gpt-4o", "OPENAI_API_KEY"), ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY")],
)
def test_a_gateways_credential_header_stands_in_for_a_missing_key(
    spec: str, variable: str, http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """headers={"x-portkey-api-key": ...} with no key anywhere builds the model (the gateway
    holds the provider's key) and sends that header alone; without it, no key is an error."""
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ModelConfigError, match="no API key"):
        toolfold.model(spec, base_url=http_server.url, headers={"x-team": "research"})
    http_server.add(Reply(json={}))
    model = toolfold.model(
        spec, base_url=http_server.url, headers={"x-portkey-api-key": "pk-0123456789abcdef"}
    )
    model._transport.post_json_sync("x", {})  # type: ignore[attr-defined]
    model.close()
    (request,) = http_server.requests
    assert request.headers["x-portkey-api-key"] == "pk-0123456789abcdef"
    assert "authorization" not in request.headers
    assert "x-api-key" not in request.headers


@pytest.mark.parametrize(
    ("spec", "header"),
    [
        ("openai:gpt-4o", "x-session-id"),
        ("openai:gpt-4o", "Helicone-Auth"),
        ("anthropic:claude-sonnet-4-5", "Helicone-Auth"),
        ("openai:gpt-4o", "x-team-token"),
    ],
)
def test_a_credential_header_of_no_provider_key_does_not_stand_in_for_it(
    spec: str, header: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session id or an observability tool's own key (Helicone-Auth), even as a Secret, is
    no provider key: with none given, "no API key" as on main (the model was built and its
    requests went out with no credential, to a 401)."""
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    for value in ("Bearer sk-helicone-0123456789", Secret("Bearer sk-helicone-0123456789")):
        with pytest.raises(ModelConfigError, match="no API key"):
            toolfold.model(spec, base_url="http://127.0.0.1:9/v1", headers={header: value})


@pytest.mark.parametrize(
    "header", ["x-litellm-api-key", "api-key", "Authorization", "X-Api-Key", "x-goog-api-key"]
)
def test_a_key_header_stands_in_for_a_missing_key(
    header: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway's ...-api-key header, Azure's api-key and the providers' key headers build
    the model with no key anywhere."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = toolfold.model(
        "openai:gpt-4o", base_url="http://127.0.0.1:9/v1", headers={header: "k-0123456789"}
    )
    model.close()


def test_redact_logs_covers_httpcore_debug_lines(http_server: ScriptedServer) -> None:
    """redact_logs scrubs httpcore.http11's DEBUG lines (echoed headers), which a filter on the
    httpx logger alone misses."""
    http_server.handler = _echo
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    installed = redact_logs([KEY])
    try:
        with httpx.Client() as client:
            transport = Transport("openai", http_server.url, KEY, http_client=client, retry=0)
            with pytest.raises(ProviderError):
                transport.post_json_sync("x", {})
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for logger in [root, *logging.Logger.manager.loggerDict.values()]:
            if isinstance(logger, logging.Logger) and installed in logger.filters:
                logger.removeFilter(installed)
    text = stream.getvalue()
    assert "x-echo" in text  # httpcore did log the echoed header...
    assert KEY not in text  # ...scrubbed


@pytest.mark.parametrize("http", ["httpx", "httpx2"])
def test_a_key_echoed_in_a_response_header_stays_out_of_debug_logs(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture, http: str
) -> None:
    """httpcore's DEBUG line of the response headers is scrubbed of the key without any setup."""
    http_server.add(Reply(status=400, headers={"x-echo": KEY}, json={"error": {"message": "no"}}))
    transport = Transport("openai", http_server.url, KEY, retry=0, http=http)
    with caplog.at_level(logging.DEBUG), pytest.raises(ProviderError):
        transport.post_json_sync("x", {})
    transport.close()
    assert "x-echo" in caplog.text  # the headers were logged...
    assert KEY not in caplog.text  # ...without the key


def _logged(logger: logging.Logger, handler_filter: logging.Filter | None) -> str:
    """What a plain StreamHandler writes for one logged exception and one stack."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    if handler_filter is not None:
        handler.addFilter(handler_filter)
    logger.addHandler(handler)
    try:
        try:
            raise ValueError(f"refused with {KEY}")
        except ValueError:
            logger.exception("the call failed")
        logger.warning("here %s", "we are", stack_info=True)
    finally:
        logger.removeHandler(handler)
    return out.getvalue()


def test_redacting_filter_scrubs_tracebacks_and_stacks() -> None:
    """A key in an exception logged with logger.exception, or in stack_info, is scrubbed too."""
    logger = logging.getLogger("toolfold.test.tracebacks")
    logger.propagate = False
    try:
        text = _logged(logger, RedactingFilter([KEY]))
    finally:
        logger.propagate = True
    assert "Traceback (most recent call last)" in text
    assert "ValueError: refused with ***" in text
    assert "Stack (most recent call last)" in text
    assert KEY not in text


def test_redact_logs_scrubs_a_traceback_on_the_given_handlers() -> None:
    """redact_logs(handlers=...) scrubs the traceback of logger.exception (it printed the key)."""
    logger = logging.getLogger("toolfold.test.redact_logs_tracebacks")
    logger.propagate = False
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    found = redact_logs([KEY], handlers=[handler])
    logger.addHandler(handler)
    try:
        try:
            raise RuntimeError(f"key {KEY}")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
        for name in list(logging.Logger.manager.loggerDict):
            logging.getLogger(name).removeFilter(found)
    assert "RuntimeError: key ***" in out.getvalue()
    assert KEY not in out.getvalue()


def test_transport_log_guard_scrubs_tracebacks() -> None:
    """The filter a transport puts on toolfold.http scrubs an exception's traceback as well."""
    transport = Transport("openai", "http://127.0.0.1:9/v1", KEY)  # (held: its key is guarded)
    logger = logging.getLogger("toolfold.http")
    saved = logger.propagate, logger.level
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        text = _logged(logger, None)
    finally:
        logger.propagate, logger.level = saved
    del transport
    assert "ValueError: refused with ***" in text
    assert KEY not in text


def test_redacting_filter_scrubs_stack_info() -> None:
    """A key in a record's stack_info (a frame's source line) is scrubbed."""
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "here", None, None)
    record.stack_info = f'Stack (most recent call last):\n  call(key="{KEY}")'
    RedactingFilter([KEY]).filter(record)
    assert record.stack_info == 'Stack (most recent call last):\n  call(key="***")'


def test_a_traceback_without_a_key_keeps_its_exception() -> None:
    """A record whose traceback holds no key keeps exc_info, for handlers that read it."""
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, None)
    try:
        raise ValueError("nothing secret")
    except ValueError:
        record.exc_info = sys.exc_info()
    RedactingFilter([KEY]).filter(record)
    assert record.exc_info is not None
    assert record.exc_text is None


class _CountingFormatter(logging.Formatter):
    """Counts the tracebacks it formats."""

    calls = 0

    def formatException(self, ei: Any) -> str:
        """Count, then format as usual."""
        type(self).calls += 1
        return super().formatException(ei)


def _record_with(error: BaseException) -> logging.LogRecord:
    """An ERROR record carrying ``error`` as its exc_info."""
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, None)
    record.exc_info = (type(error), error, error.__traceback__)
    return record


def test_a_traceback_without_a_key_is_not_formatted_by_the_filter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The filter formats a traceback only when an exception's text holds a key (the handler formats it once)."""
    import toolfold.adapters._http._keys as keys

    _CountingFormatter.calls = 0
    monkeypatch.setattr(keys, "_TRACEBACKS", _CountingFormatter())
    try:
        raise ValueError("nothing secret")
    except ValueError as exc:
        clean = _record_with(exc)
    RedactingFilter([KEY]).filter(clean)
    assert _CountingFormatter.calls == 0
    assert clean.exc_info is not None


def _chained() -> BaseException:
    """A clean error raised from one whose message holds the key."""
    try:
        try:
            raise KeyError(f"lookup {KEY}")
        except KeyError as cause:
            raise RuntimeError("outer failure") from cause
    except RuntimeError as exc:
        return exc


def test_a_key_deep_in_the_exception_chain_is_still_scrubbed() -> None:
    """A key only in a chained exception's message still makes the filter scrub the traceback."""
    record = _record_with(_chained())
    RedactingFilter([KEY]).filter(record)
    assert record.exc_info is None
    assert record.exc_text is not None
    assert "RuntimeError: outer failure" in record.exc_text
    assert KEY not in record.exc_text


class _Note:
    """A note that is not a str: a traceback prints its str()."""

    def __str__(self) -> str:
        """The note's text, holding the key."""
        return f"note {KEY}"


class _OnceUnreadableNotes(list[str]):
    """Notes whose first iteration raises (the filter's look), later ones give the key."""

    tries = 0

    def __iter__(self) -> Any:
        """Fail the first time, as an odd notes object may."""
        self.tries += 1
        if self.tries == 1:
            raise RuntimeError("cannot iterate")
        return iter([f"note {KEY}"])


@pytest.mark.parametrize(
    ("notes", "shown"),
    [
        ((f"note {KEY}",), "note ***"),  # a tuple: each note printed
        ([_Note()], "note ***"),  # a non-str note: its str() printed
        ({KEY}, "{'***'}"),  # not a sequence: printed by its repr()
    ],
)
def test_a_key_in_notes_of_any_shape_is_scrubbed(notes: Any, shown: str) -> None:
    """A key in an exception's notes (a tuple, a non-str note, a set) is scrubbed from the traceback."""
    error = ValueError("plain")
    error.__notes__ = notes  # type: ignore[attr-defined]
    record = _record_with(error)
    RedactingFilter([KEY]).filter(record)
    assert record.exc_text is not None
    assert shown in record.exc_text
    assert KEY not in record.exc_text


def test_notes_that_cannot_be_read_make_the_filter_format_the_traceback() -> None:
    """Notes that raise when read make the filter format and scrub the traceback, to be sure."""
    error = ValueError("plain")
    error.__notes__ = _OnceUnreadableNotes()  # type: ignore[attr-defined]
    record = _record_with(error)
    RedactingFilter([KEY]).filter(record)
    assert record.exc_info is None
    assert record.exc_text is not None
    assert "note ***" in record.exc_text
    assert KEY not in record.exc_text
