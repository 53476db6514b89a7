"""Gemini and Responses error bodies map to the right exception; retries honour Gemini's retryDelay; keys never leak."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from scripted_http import Cut, Reply, ScriptedServer, sse

import toolfold
from toolfold import (
    AuthenticationError,
    BadRequestError,
    ModelConfigError,
    NotFoundError,
    RateLimitError,
    StreamError,
)
from toolfold.runtime import Message, ModelRequest, StreamState, ToolDefinition, fold_stream

GEMINI_KEY = "AIzaSyGeminiSecretKey000000000000000"
OPENAI_KEY = "sk-proj-ResponsesSecretKey0000000000"
REQUEST = ModelRequest([Message.user("hi")])


def _google_error(code: int, status: str, message: str, *details: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status, "details": list(details)}}


RETRY_7S = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}
PER_MINUTE = {
    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
    "violations": [
        {
            "quotaMetric": "generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
        }
    ],
}
PER_DAY = {
    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
    "violations": [
        {
            "quotaMetric": "generate_content_free_tier_requests",
            "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        }
    ],
}
OK_GEMINI = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "hello"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
}


def gemini(server: ScriptedServer, opened: list[Any], **options: Any) -> Any:
    """A Gemini model on the scripted server whose retry sleeps are recorded, not slept."""
    model = toolfold.model(
        "gemini:gemini-2.5-flash", base_url=server.url, api_key=GEMINI_KEY, **options
    )
    model.waits = []
    model._transport._sender.sleep_sync = model.waits.append
    model._transport._sender.random = lambda: 0.0
    opened.append(model)
    return model


def responses(server: ScriptedServer, opened: list[Any], **options: Any) -> Any:
    """A Responses model on the scripted server."""
    model = toolfold.model(
        "openai-responses:gpt-5-mini", base_url=f"{server.url}/v1", api_key=OPENAI_KEY, **options
    )
    opened.append(model)
    return model


def test_resource_exhausted_waits_the_retry_delay_then_succeeds(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A 429 RESOURCE_EXHAUSTED with RetryInfo 7s is retried after exactly 7 s."""
    http_server.add(
        Reply(
            status=429,
            json=_google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", PER_MINUTE, RETRY_7S),
        ),
        Reply(json=OK_GEMINI),
    )
    model = gemini(http_server, opened, retry=2)
    assert model.request_sync(REQUEST).text == "hello"
    assert model.waits == [7.0]
    assert len(http_server.requests) == 2


def test_resource_exhausted_without_retries_carries_the_delay(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """With retries off, the RateLimitError says how long Gemini asked to wait."""
    http_server.add(
        Reply(status=429, json=_google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", RETRY_7S))
    )
    with pytest.raises(RateLimitError, match="Quota exceeded") as raised:
        gemini(http_server, opened, retry=0).request_sync(REQUEST)
    assert raised.value.retry_after == 7.0
    assert raised.value.code == "RESOURCE_EXHAUSTED"


def test_a_per_day_quota_is_not_retried(http_server: ScriptedServer, opened: list[Any]) -> None:
    """A per-day quota does not clear in seconds: one attempt, then the error."""
    http_server.add(
        Reply(
            status=429,
            json=_google_error(429, "RESOURCE_EXHAUSTED", "Daily quota", PER_DAY, RETRY_7S),
        )
    )
    model = gemini(http_server, opened, retry=3)
    with pytest.raises(RateLimitError):
        model.request_sync(REQUEST)
    assert model.waits == []
    assert len(http_server.requests) == 1


@pytest.mark.parametrize(
    ("status", "word", "error"),
    [
        (400, "INVALID_ARGUMENT", BadRequestError),
        (403, "PERMISSION_DENIED", AuthenticationError),
        (404, "NOT_FOUND", NotFoundError),
    ],
)
@pytest.mark.parametrize("how", ["blocking", "stream-sse", "stream-json"])
def test_gemini_error_statuses_map_to_their_class(
    http_server: ScriptedServer,
    opened: list[Any],
    status: int,
    word: str,
    error: type[Exception],
    how: str,
) -> None:
    """Each documented status word maps to its class, for a request streamed either way too (plain JSON answer)."""
    http_server.add(Reply(status=status, json=[_google_error(status, word, f"it is {word}")]))
    model = gemini(
        http_server, opened, retry=0, stream_format="json" if how == "stream-json" else "sse"
    )
    call = (
        (lambda: model.request_sync(REQUEST))
        if how == "blocking"
        else (lambda: list(model.stream_sync(REQUEST)))
    )
    with pytest.raises(error, match=f"it is {word}") as raised:
        call()
    assert type(raised.value) is error
    assert raised.value.code == word
    (sent,) = http_server.requests
    assert (":streamGenerateContent" in sent.path) is (how != "blocking")
    assert ("alt=sse" in sent.path) is (how == "stream-sse")


@pytest.mark.parametrize("streamed", [False, True])
def test_a_gemini_400_body_nested_too_deep_is_a_bad_request(
    http_server: ScriptedServer, opened: list[Any], streamed: bool
) -> None:
    """The bad-key check reads a 400 body like every error reader: deep nesting is no RecursionError."""
    http_server.add(Reply(status=400, body=b"[" * 100_000 + b"]" * 100_000))
    model = gemini(http_server, opened, retry=0)
    with pytest.raises(toolfold.BadRequestError):
        list(model.stream_sync(REQUEST)) if streamed else model.request_sync(REQUEST)


@pytest.mark.parametrize("stream_format", ["sse", "json"])
def test_a_streamed_request_waits_the_retry_delay_then_streams(
    http_server: ScriptedServer, opened: list[Any], stream_format: str
) -> None:
    """A streamed request answered 429 RESOURCE_EXHAUSTED (RetryInfo 7s) is retried after 7 s and streams the answer."""
    http_server.add(
        Reply(
            status=429,
            json=_google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded", PER_MINUTE, RETRY_7S),
        ),
        Reply(
            headers={"content-type": "text/event-stream"},
            chunks=sse(OK_GEMINI)
            if stream_format == "sse"
            else [b"[", json.dumps(OK_GEMINI).encode(), b"]"],
        ),
    )
    model = gemini(http_server, opened, retry=2, stream_format=stream_format)
    state = StreamState()
    for event in model.stream_sync(REQUEST):
        state = fold_stream(state, event)
    assert [getattr(p, "text", None) for p in state.parts] == ["hello"]
    assert state.finish_reason == "stop"
    assert model.waits == [7.0]
    assert [":streamGenerateContent" in r.path for r in http_server.requests] == [True, True]


def test_an_error_chunk_inside_a_gemini_stream_is_a_stream_error(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """An error object after HTTP 200 raises StreamError with Gemini's message."""
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}
    http_server.add(
        Reply(
            headers={"content-type": "text/event-stream"},
            chunks=sse(first, _google_error(500, "INTERNAL", "backend died")),
        )
    )
    with pytest.raises(StreamError, match="backend died"):
        list(gemini(http_server, opened, retry=0).stream_sync(REQUEST))


@pytest.mark.parametrize("cut", [True, False], ids=["connection-cut", "body-ends-early"])
def test_a_gemini_stream_without_a_finish_reason_is_a_stream_error(
    http_server: ScriptedServer, opened: list[Any], cut: bool
) -> None:
    """A stream that stops before finishReason is a StreamError, never a half answer."""
    first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}
    http_server.add(
        Reply(
            headers={"content-type": "text/event-stream"},
            chunks=[*sse(first), *([Cut()] if cut else [])],
        )
    )
    with pytest.raises(StreamError):
        list(gemini(http_server, opened, retry=0).stream_sync(REQUEST))


def test_responses_model_not_found(http_server: ScriptedServer, opened: list[Any]) -> None:
    """A 404 model_not_found is a NotFoundError with the code."""
    body = {
        "error": {
            "message": "The model `gpt-9` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    http_server.add(Reply(status=404, json=body))
    with pytest.raises(NotFoundError, match="does not exist") as raised:
        responses(http_server, opened, retry=0).request_sync(REQUEST)
    assert raised.value.code == "model_not_found"


def _event(kind: str, **payload: Any) -> list[bytes]:
    return sse({"type": kind, **payload}, event=kind)


def test_responses_failed_event_is_a_stream_error(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """``response.failed`` raises StreamError with the error's message and code."""
    chunks = [
        *_event("response.created", response={"id": "resp_1", "model": "gpt-5-mini"}),
        *_event(
            "response.failed",
            response={
                "id": "resp_1",
                "status": "failed",
                "error": {"code": "server_error", "message": "The model crashed"},
            },
        ),
    ]
    http_server.add(Reply(headers={"content-type": "text/event-stream"}, chunks=chunks))
    with pytest.raises(StreamError, match="The model crashed") as raised:
        list(responses(http_server, opened, retry=0).stream_sync(REQUEST))
    assert raised.value.code == "server_error"


FAILED_USAGE = {
    "input_tokens": 500,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 50,
    "output_tokens_details": {"reasoning_tokens": 40},
    "total_tokens": 550,
}


@pytest.mark.parametrize("streamed", [True, False])
def test_a_failed_response_with_usage_counts_it_in_the_errors_state(
    http_server: ScriptedServer, opened: list[Any], streamed: bool
) -> None:
    """A failed response (``response.failed``, or a whole body with ``status: failed``) that
    reports its usage was billed: the error's state counts it as a dropped attempt."""
    failed = {
        "id": "resp_1",
        "object": "response",
        "status": "failed",
        "model": "gpt-5-mini",
        "output": [],
        "error": {"code": "server_error", "message": "The model crashed"},
        "usage": FAILED_USAGE,
    }
    if streamed:
        chunks = [
            *_event("response.created", response={"id": "resp_1", "model": "gpt-5-mini"}),
            *_event("response.failed", response=failed),
        ]
        http_server.add(Reply(headers={"content-type": "text/event-stream"}, chunks=chunks))
    else:
        http_server.add(Reply(json=failed))
    agent = toolfold.Agent(responses(http_server, opened, retry=0))
    expected = StreamError if streamed else toolfold.ProviderError
    run = (lambda: list(agent.stream("hi"))) if streamed else (lambda: agent.run("hi"))
    with pytest.raises(expected, match="The model crashed") as raised:
        run()
    billed = toolfold.Usage(500, 50, reasoning_tokens=40, requests=1)
    assert raised.value.usage == billed  # (public: `ProviderError.usage`)
    state = toolfold.state_of(raised.value)
    assert state is not None
    assert state.usage == billed
    assert [e.kind for e in state.log][-1] == "attempt_dropped"
    resumed = toolfold.RunState.from_json(state.to_json())  # a resume counts it once
    assert resumed.usage == state.usage


@pytest.mark.parametrize("usage", [{"input_tokens": "x"}, [], {"input_tokens": -1}])
@pytest.mark.parametrize("streamed", [True, False])
def test_a_failed_response_with_unreadable_usage_still_raises_its_failure(
    http_server: ScriptedServer, opened: list[Any], streamed: bool, usage: Any
) -> None:
    """Usage a failed response reports that toolfold cannot read is left out (nothing
    billed): the error is the provider's failure, its message and code, not a
    MalformedResponseError about the usage."""
    failed = {
        "id": "resp_1",
        "object": "response",
        "status": "failed",
        "model": "gpt-5-mini",
        "output": [],
        "error": {"code": "server_error", "message": "The model crashed"},
        "usage": usage,
    }
    if streamed:
        chunks = [
            *_event("response.created", response={"id": "resp_1", "model": "gpt-5-mini"}),
            *_event("response.failed", response=failed),
        ]
        http_server.add(Reply(headers={"content-type": "text/event-stream"}, chunks=chunks))
    else:
        http_server.add(Reply(json=failed))
    agent = toolfold.Agent(responses(http_server, opened, retry=0))
    expected = StreamError if streamed else toolfold.ProviderError
    run = (lambda: list(agent.stream("hi"))) if streamed else (lambda: agent.run("hi"))
    with pytest.raises(expected, match="The model crashed") as raised:
        run()
    assert type(raised.value) is expected
    assert raised.value.code == "server_error"
    assert raised.value.usage is None
    state = toolfold.state_of(raised.value)
    assert state is not None
    assert state.usage == toolfold.Usage()


def test_responses_error_event_is_a_stream_error(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A bare ``error`` event raises StreamError with its message."""
    http_server.add(
        Reply(
            headers={"content-type": "text/event-stream"},
            chunks=_event("error", code="rate_limit_exceeded", message="Slow down", param=None),
        )
    )
    with pytest.raises(StreamError, match="Slow down"):
        list(responses(http_server, opened, retry=0).stream_sync(REQUEST))


def test_a_responses_stream_cut_mid_call_never_yields_the_call(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Arguments started but no response.completed: StreamError, and no finished call."""
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "f",
        "arguments": "",
    }
    chunks = [
        *_event("response.output_item.added", output_index=0, item=item),
        *_event(
            "response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta='{"a"'
        ),
        Cut(),
    ]
    http_server.add(Reply(headers={"content-type": "text/event-stream"}, chunks=chunks))
    folded: list[StreamState] = [StreamState()]

    def fold() -> None:
        for event in responses(http_server, opened, retry=0).stream_sync(REQUEST):
            folded.append(fold_stream(folded[-1], event))

    with pytest.raises(StreamError):
        fold()
    assert folded[-1].calls
    assert all(not c.done for c in folded[-1].calls)


def test_requests_gemini_cannot_express_fail_before_any_request(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """parallel_tool_calls=False and an unknown named tool choice are ModelConfigErrors, nothing is sent."""
    model = gemini(http_server, opened)
    tool = ToolDefinition("f", "F", {"type": "object", "properties": {}})
    with pytest.raises(ModelConfigError, match="parallel_tool_calls"):
        model.request_sync(
            ModelRequest([Message.user("x")], [tool], settings={"parallel_tool_calls": False})
        )
    with pytest.raises(ModelConfigError, match="names no tool"):
        model.request_sync(ModelRequest([Message.user("x")], [tool], "g"))
    assert http_server.requests == []


@pytest.mark.parametrize("provider", ["gemini", "responses"])
def test_keys_never_appear_in_errors_reprs_urls_or_logs(
    provider: str, http_server: ScriptedServer, opened: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A server echoing the key: the error, its body and headers, the model repr and DEBUG logs hold no key."""
    key = GEMINI_KEY if provider == "gemini" else OPENAI_KEY
    echo = {"error": {"code": 400, "message": f"bad key {key}", "status": "INVALID_ARGUMENT"}}
    http_server.add(
        Reply(
            status=400,
            headers={"x-echo": key},
            body=json.dumps(echo).encode(),
        )
    )
    model = (
        gemini(http_server, opened, retry=0)
        if provider == "gemini"
        else responses(http_server, opened, retry=0)
    )
    caplog.set_level(logging.DEBUG)
    with pytest.raises(BadRequestError) as raised:
        model.request_sync(REQUEST)
    error = raised.value
    for text in (
        str(error),
        repr(error),
        error.body,
        error.provider_message or "",
        json.dumps(error.headers),
        repr(model),
        repr(vars(model)),
        caplog.text,
    ):
        assert key not in text
    sent = http_server.requests[0]
    assert key not in sent.path
    header = "x-goog-api-key" if provider == "gemini" else "authorization"
    assert key in sent.headers[header]
