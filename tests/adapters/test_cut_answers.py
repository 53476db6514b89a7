"""Answers a provider ended abnormally (cut by the token limit, failed, refused), whole and streamed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from scripted_http import Reply, ScriptedServer, sse

import toolfold
from toolfold import Agent, RunState, Usage, generate_text
from toolfold.runtime import (
    AttemptDropped,
    Message,
    ModelRequest,
    StreamState,
    TextPart,
    finish_stream,
    fold_stream,
)

ran: list[dict[str, str]] = []


@toolfold.tool
def send_email(to: str, subject: str = "", body: str = "") -> str:
    """Send an email.

    Args:
        to: Recipient.
        subject: Subject.
        body: Body.
    """
    ran.append({"to": to, "subject": subject, "body": body})
    return "sent"


CUT_ARGUMENTS = {"to": "ceo@corp.com", "subject": "Resignation"}  # parses; its body is missing


def _anthropic_event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({**data, 'type': kind})}\n\n".encode()


def _anthropic_stream(*events: tuple[str, dict[str, Any]]) -> Reply:
    start = {
        "message": {
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    }
    chunks = [_anthropic_event("message_start", start)]
    chunks += [_anthropic_event(kind, data) for kind, data in events]
    chunks.append(_anthropic_event("message_stop", {}))
    return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)


def _anthropic_cut_whole() -> Reply:
    return Reply(
        json={
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "stop_reason": "max_tokens",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 50},
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "send_email", "input": CUT_ARGUMENTS}
            ],
        }
    )


def _anthropic_cut_stream() -> Reply:
    return _anthropic_stream(
        (
            "content_block_start",
            {
                "index": 0,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "send_email",
                    "input": {},
                },
            },
        ),
        (
            "content_block_delta",
            {
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(CUT_ARGUMENTS)},
            },
        ),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 50}}),
    )


def _chat_body(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "usage": {"prompt_tokens": 1, "completion_tokens": 50, "total_tokens": 51},
        "choices": [
            {"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}
        ],
    }


def _chat_chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


_CUT_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "send_email", "arguments": json.dumps(CUT_ARGUMENTS)},
}


def _chat_cut_whole() -> Reply:
    return Reply(json=_chat_body({"content": None, "tool_calls": [_CUT_CALL]}, "length"))


def _chat_cut_stream() -> Reply:
    chunks = sse(
        _chat_chunk({"role": "assistant", "tool_calls": [{"index": 0, **_CUT_CALL}]}),
        _chat_chunk({}, "length"),
        "[DONE]",
    )
    return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)


_RESPONSES_USAGE = {
    "input_tokens": 1,
    "output_tokens": 50,
    "total_tokens": 51,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens_details": {"reasoning_tokens": 0},
}


def _responses_cut_whole(reason: str | None = "max_output_tokens") -> Reply:
    return Reply(
        json={
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "status": "incomplete" if reason else "completed",
            "incomplete_details": {"reason": reason} if reason else None,
            "model": "gpt-5-mini",
            "error": None,
            "usage": _RESPONSES_USAGE,
            "output": [
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "send_email",
                    "arguments": json.dumps(CUT_ARGUMENTS),
                    "status": "incomplete",
                }
            ],
        }
    )


def _model(server: ScriptedServer, opened: list[Any], name: str) -> Any:
    suffix = "" if name.startswith("anthropic") else "/v1"
    made = toolfold.model(name, base_url=server.url + suffix, api_key="k" * 20)
    opened.append(made)
    return made


def _run(model: Any, streamed: bool, **options: Any) -> Any:
    if not streamed:
        return generate_text(model, "hi", **options)
    run = Agent(model=model, **options).stream("hi")
    for _ in run:
        pass
    return run.response


@pytest.mark.parametrize(
    ("name", "reply", "streamed", "raw"),
    [
        ("anthropic:c", _anthropic_cut_whole, False, "max_tokens"),
        ("anthropic:c", _anthropic_cut_stream, True, "max_tokens"),
        ("openai:gpt-4o-mini", _chat_cut_whole, False, "length"),
        ("openai:gpt-4o-mini", _chat_cut_stream, True, "length"),
        ("openai-responses:gpt-5-mini", _responses_cut_whole, False, "max_output_tokens"),
    ],
    ids=["anthropic", "anthropic-stream", "chat", "chat-stream", "responses"],
)
def test_a_call_cut_by_the_token_limit_never_runs(
    http_server: ScriptedServer,
    opened: list[Any],
    name: str,
    reply: Any,
    streamed: bool,
    raw: str,
) -> None:
    """A tool call in an answer cut at max_tokens does not run, even when its partial arguments parse: the run finishes length."""
    ran.clear()
    http_server.add(reply())
    model = _model(http_server, opened, name)
    response = _run(model, streamed, tools=[send_email], max_tokens=50)
    assert ran == []
    assert len(http_server.requests) == 1
    assert response.finish_reason == "length"
    assert response.steps[-1].response.raw_finish_reason == raw
    assert response.steps[-1].response.tool_calls == ()


@pytest.mark.parametrize("blocking", [True, False], ids=["request_sync", "request"])
@pytest.mark.parametrize(
    ("name", "whole", "stream"),
    [
        ("anthropic:c", _anthropic_cut_whole, _anthropic_cut_stream),
        ("openai:gpt-4o-mini", _chat_cut_whole, _chat_cut_stream),
    ],
    ids=["anthropic", "chat"],
)
def test_a_direct_request_of_a_cut_answer_keeps_no_calls_as_its_stream(
    http_server: ScriptedServer,
    opened: list[Any],
    name: str,
    whole: Any,
    stream: Any,
    blocking: bool,
) -> None:
    """A model's own request/request_sync of an answer cut at max_tokens gives no calls, as its folded stream does."""
    http_server.add(whole())
    http_server.add(stream())
    model = _model(http_server, opened, name)
    request = ModelRequest((Message("user", (TextPart("hi"),)),), settings={"max_tokens": 50})
    response = model.request_sync(request) if blocking else asyncio.run(model.request(request))
    state = StreamState()
    for event in model.stream_sync(request):
        state = fold_stream(state, event)
    folded = finish_stream(state, str)
    assert (response.finish_reason, response.tool_calls) == ("length", ())
    assert (folded.finish_reason, folded.tool_calls) == ("length", ())


def _chat_filtered_whole() -> Reply:
    return Reply(json=_chat_body({"content": None, "tool_calls": [_CUT_CALL]}, "content_filter"))


def _chat_filtered_stream() -> Reply:
    chunks = sse(
        _chat_chunk({"role": "assistant", "tool_calls": [{"index": 0, **_CUT_CALL}]}),
        _chat_chunk({}, "content_filter"),
        "[DONE]",
    )
    return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)


def _responses_filtered_whole() -> Reply:
    return _responses_cut_whole("content_filter")


def _responses_incomplete_item_whole() -> Reply:  # the response completed, its call item did not
    return _responses_cut_whole(None)


def _responses_incomplete_item_stream() -> Reply:  # the same answer, streamed
    response = _responses_cut_whole(None).json
    item = response["output"][0]
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    events = [
        ("response.created", {"response": started}),
        (
            "response.output_item.added",
            {"output_index": 0, "item": {**item, "arguments": "", "status": "in_progress"}},
        ),
        (
            "response.function_call_arguments.delta",
            {"item_id": "fc_1", "output_index": 0, "delta": item["arguments"]},
        ),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": response}),
    ]
    chunks = [
        f"event: {kind}\ndata: {json.dumps({**data, 'type': kind})}\n\n".encode()
        for kind, data in events
    ]
    return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)


@pytest.mark.parametrize(
    ("name", "reply", "streamed", "finish"),
    [
        ("openai:gpt-4o-mini", _chat_filtered_whole, False, "content_filter"),
        ("openai:gpt-4o-mini", _chat_filtered_stream, True, "content_filter"),
        ("openai-responses:gpt-5-mini", _responses_filtered_whole, False, "content_filter"),
        ("openai-responses:gpt-5-mini", _responses_incomplete_item_whole, False, "stop"),
        ("openai-responses:gpt-5-mini", _responses_incomplete_item_stream, True, "stop"),
    ],
    ids=[
        "chat",
        "chat-stream",
        "responses",
        "responses-incomplete-item",
        "responses-incomplete-item-stream",
    ],
)
def test_a_call_cut_by_the_content_filter_or_left_incomplete_never_runs(
    http_server: ScriptedServer,
    opened: list[Any],
    name: str,
    reply: Any,
    streamed: bool,
    finish: str,
) -> None:
    """A tool call of an answer the content filter stopped, or a Responses function_call item left incomplete, does not run."""
    ran.clear()
    http_server.add(reply())
    response = _run(_model(http_server, opened, name), streamed, tools=[send_email])
    assert ran == []
    assert len(http_server.requests) == 1
    assert response.finish_reason == finish
    assert response.steps[-1].response.tool_calls == ()


# --- answers the provider ended abnormally ----------------------------------------------


def _openrouter_error_whole() -> Reply:
    body = _chat_body({"content": "The capital of"}, "error")
    body["choices"][0]["error"] = {"code": 502, "message": "upstream died"}
    return Reply(json=body)


def _openrouter_error_stream() -> Reply:
    chunks = sse(
        _chat_chunk({"role": "assistant", "content": "The capital of"}),
        {
            **_chat_chunk({}, "error"),
            "choices": [
                {
                    "index": 0,
                    "delta": {},
                    "finish_reason": "error",
                    "error": {"code": 502, "message": "upstream died"},
                }
            ],
        },
        "[DONE]",
    )
    return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)


_MALFORMED = {
    "candidates": [
        {
            "content": {"role": "model"},
            "finishReason": "MALFORMED_FUNCTION_CALL",
            "finishMessage": "Malformed function call: print(default_api.send_email(to=))",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 3},
    "responseId": "r",
}


def _gemini_malformed_whole() -> Reply:
    return Reply(json=_MALFORMED)


def _gemini_malformed_stream() -> Reply:
    return Reply(headers={"content-type": "text/event-stream"}, chunks=sse(_MALFORMED))


def _anthropic_paused_whole() -> Reply:
    return Reply(
        json={
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": [{"type": "text", "text": "Let me search"}],
            "stop_reason": "pause_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 3},
        }
    )


def _anthropic_paused_stream() -> Reply:
    return _anthropic_stream(
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        (
            "content_block_delta",
            {"index": 0, "delta": {"type": "text_delta", "text": "Let me search"}},
        ),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "pause_turn"}, "usage": {"output_tokens": 3}}),
    )


@pytest.mark.parametrize(
    ("name", "reply", "streamed", "raw", "said"),
    [
        ("openrouter:x/y", _openrouter_error_whole, False, "error", "upstream died"),
        ("openrouter:x/y", _openrouter_error_stream, True, "error", "upstream died"),
        (
            "gemini:gemini-2.5-flash",
            _gemini_malformed_whole,
            False,
            "MALFORMED_FUNCTION_CALL",
            "Malformed function call",
        ),
        (
            "gemini:gemini-2.5-flash",
            _gemini_malformed_stream,
            True,
            "MALFORMED_FUNCTION_CALL",
            "Malformed function call",
        ),
        ("anthropic:c", _anthropic_paused_whole, False, "pause_turn", "server tool"),
        ("anthropic:c", _anthropic_paused_stream, True, "pause_turn", "server tool"),
    ],
    ids=[
        "openrouter",
        "openrouter-stream",
        "gemini",
        "gemini-stream",
        "anthropic-pause",
        "anthropic-pause-stream",
    ],
)
def test_an_abnormal_finish_raises_naming_the_provider_and_its_reason(
    http_server: ScriptedServer,
    opened: list[Any],
    name: str,
    reply: Any,
    streamed: bool,
    raw: str,
    said: str,
) -> None:
    """A failed or paused answer raises ProviderFinishError (provider, finish reason, message), whole and streamed, instead of finishing stop."""
    http_server.add(reply())
    model = _model(http_server, opened, name)
    with pytest.raises(toolfold.ProviderFinishError) as caught:
        _run(model, streamed, tools=[send_email])
    error = caught.value
    provider = name.split(":")[0]
    assert (error.provider, error.finish_reason, error.status_code) == (provider, raw, 200)
    assert f"{provider} ended its answer with finish reason {raw!r}" in str(error)
    assert said in str(error)


# --- refusals -----------------------------------------------------------------------------

REFUSAL = "I can't help with that."


def _chat_refusal_whole() -> Reply:
    return Reply(json=_chat_body({"content": None, "refusal": REFUSAL}, "stop"))


def _chat_refusal_stream() -> Reply:
    chunks = sse(
        _chat_chunk({"role": "assistant", "content": None, "refusal": REFUSAL}),
        _chat_chunk({}, "stop"),
        "[DONE]",
    )
    return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)


_RESPONSE_0 = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "status": "in_progress",
    "model": "gpt-5-mini",
    "output": [],
}
_REFUSING_ITEM = {
    "type": "message",
    "id": "msg_1",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "refusal", "refusal": REFUSAL}],
}
_REFUSED = {
    **_RESPONSE_0,
    "status": "completed",
    "output": [_REFUSING_ITEM],
    "usage": _RESPONSES_USAGE,
}


def _responses_refusal_whole() -> Reply:
    return Reply(json=_REFUSED)


def _responses_refusal_stream() -> Reply:
    at = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    added = {**_REFUSING_ITEM, "status": "in_progress", "content": []}
    events = [
        ("response.created", {"response": _RESPONSE_0}),
        ("response.output_item.added", {"output_index": 0, "item": added}),
        ("response.refusal.delta", {**at, "delta": REFUSAL}),
        ("response.refusal.done", {**at, "refusal": REFUSAL}),
        ("response.output_item.done", {"output_index": 0, "item": _REFUSING_ITEM}),
        ("response.completed", {"response": _REFUSED}),
    ]
    chunks = [
        f"event: {kind}\ndata: {json.dumps({**data, 'type': kind, 'sequence_number': n})}\n\n".encode()
        for n, (kind, data) in enumerate(events)
    ]
    return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)


@pytest.mark.parametrize(
    ("name", "reply", "streamed"),
    [
        ("openai:gpt-4o-mini", _chat_refusal_whole, False),
        ("openai:gpt-4o-mini", _chat_refusal_stream, True),
        ("openai-responses:gpt-5-mini", _responses_refusal_whole, False),
        ("openai-responses:gpt-5-mini", _responses_refusal_stream, True),
    ],
    ids=["chat", "chat-stream", "responses", "responses-stream"],
)
def test_a_refusal_finishes_content_filter_with_its_text(
    http_server: ScriptedServer, opened: list[Any], name: str, reply: Any, streamed: bool
) -> None:
    """A Chat message.refusal or a Responses refusal content finishes content_filter (as Anthropic's), its text kept as the answer."""
    http_server.add(reply())
    response = _run(_model(http_server, opened, name), streamed)
    assert (response.finish_reason, response.text) == ("content_filter", REFUSAL)
    assert response.steps[-1].response.finish_reason == "content_filter"


@pytest.mark.parametrize(
    ("name", "reply", "streamed", "billed"),
    [
        ("openrouter:x/y", _openrouter_error_whole, False, Usage(1, 50, requests=1)),
        ("gemini:gemini-2.5-flash", _gemini_malformed_whole, False, Usage(3, 0, requests=1)),
        ("gemini:gemini-2.5-flash", _gemini_malformed_stream, True, Usage(3, 0, requests=1)),
        ("anthropic:c", _anthropic_paused_whole, False, Usage(3, 3, requests=1)),
        ("anthropic:c", _anthropic_paused_stream, True, Usage(1, 3, requests=1)),
    ],
    ids=["openrouter", "gemini", "gemini-stream", "anthropic-pause", "anthropic-pause-stream"],
)
def test_an_abnormal_finish_keeps_the_billed_usage_in_the_errors_state(
    http_server: ScriptedServer,
    opened: list[Any],
    name: str,
    reply: Any,
    streamed: bool,
    billed: Usage,
) -> None:
    """The usage a provider reported for an answer that raised ProviderFinishError is counted
    in the error's state (an AttemptDropped, as a cut stream's), whole and streamed, with the
    event that ended it: before, the state said Usage() (a stream: only what came before)."""
    http_server.add(reply())
    model = _model(http_server, opened, name)
    with pytest.raises(toolfold.ProviderFinishError) as caught:
        _run(model, streamed, tools=[send_email])
    state = caught.value.state
    assert state is not None
    assert (caught.value.usage, state.usage) == (billed, billed)
    assert state.log[-1] == AttemptDropped(usage=billed)
    assert RunState.from_json(state.to_json()) == state


# --- answers toolfold cannot read -----------------------------------------------------

_UNREADABLE = {
    "openai:gpt-4o-mini": {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": 5}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
    },
    "anthropic:c": {
        "id": "m1",
        "type": "message",
        "role": "assistant",
        "model": "c",
        "content": 5,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 7, "output_tokens": 3},
    },
    "gemini:gemini-2.5-flash": {
        "candidates": 8,
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2},
    },
    "ollama:llama3.2": {
        "model": "llama3.2",
        "message": 5,
        "done": True,
        "prompt_eval_count": 4,
        "eval_count": 6,
    },
    "openai-responses:gpt-5-mini": {
        "id": "r1",
        "object": "response",
        "status": "completed",
        "output": 5,
        "usage": {"input_tokens": 9, "output_tokens": 1, "total_tokens": 10},
    },
}


@pytest.mark.parametrize(
    ("name", "billed"),
    [
        ("openai:gpt-4o-mini", Usage(100, 50, requests=1)),
        ("anthropic:c", Usage(7, 3, requests=1)),
        ("gemini:gemini-2.5-flash", Usage(5, 2, requests=1)),
        ("ollama:llama3.2", Usage(4, 6, requests=1)),
        ("openai-responses:gpt-5-mini", Usage(9, 1, requests=1)),
    ],
)
def test_a_malformed_answer_keeps_the_billed_usage_in_the_errors_state(
    http_server: ScriptedServer, opened: list[Any], name: str, billed: Usage
) -> None:
    """A 200 answer rejected as malformed counts the usage it reported (read apart from the
    bad field) in the error's state: before, the state said Usage(), though it was billed."""
    http_server.add(Reply(json=_UNREADABLE[name]))
    suffix = "" if name.startswith(("anthropic", "ollama")) else "/v1"
    model = toolfold.model(name, base_url=http_server.url + suffix, api_key="k" * 20)
    opened.append(model)
    with pytest.raises(toolfold.MalformedResponseError) as caught:
        generate_text(model, "hi")
    state = caught.value.state
    assert state is not None
    assert (caught.value.usage, state.usage) == (billed, billed)
    assert state.log[-1] == AttemptDropped(usage=billed)
    assert RunState.from_json(state.to_json()) == state


def test_a_malformed_usage_is_no_usage() -> None:
    """An answer whose usage is the bad field reports none: the error's usage is None."""
    body = {**_UNREADABLE["openai:gpt-4o-mini"], "usage": {"prompt_tokens": "many"}}
    model = toolfold.model("openai:gpt-4o-mini", api_key="k" * 20)
    with pytest.raises(toolfold.MalformedResponseError) as caught:
        model._whole(body)
    assert caught.value.usage is None


# --- answers with no choice at all ------------------------------------------------------


def _chat_no_choices(streamed: bool) -> Reply:
    usage = {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}
    body = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": []}
    if not streamed:
        return Reply(json={**body, "usage": usage})
    chunk = {**body, "object": "chat.completion.chunk", "usage": usage}
    return Reply(headers={"content-type": "text/event-stream"}, chunks=sse(chunk, "[DONE]"))


def _gemini_no_candidates(streamed: bool) -> Reply:
    body = {"candidates": [], "usageMetadata": {"promptTokenCount": 5}, "responseId": "r"}
    if not streamed:
        return Reply(json=body)
    return Reply(headers={"content-type": "text/event-stream"}, chunks=sse(body))


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("name", "reply", "said"),
    [
        ("openai:gpt-4o-mini", _chat_no_choices, "openai returned a response without choices"),
        (
            "gemini:gemini-2.5-flash",
            _gemini_no_candidates,
            "gemini returned a response without candidates",
        ),
    ],
    ids=["chat", "gemini"],
)
def test_an_answer_without_choices_is_one_error_whole_or_streamed(
    http_server: ScriptedServer, opened: list[Any], name: str, reply: Any, said: str, streamed: bool
) -> None:
    """No choice (Chat) or candidate (Gemini) at all raises the same ProviderError whole or
    streamed: before, a Chat stream finished "stop" with empty text, and a Gemini stream
    raised StreamError "stream ended before the response finished"."""
    http_server.add(reply(streamed))
    model = _model(http_server, opened, name)
    with pytest.raises(toolfold.ProviderError) as caught:
        _run(model, streamed)
    assert type(caught.value) is toolfold.ProviderError
    assert str(caught.value) == f"{said}: no answer to read"


def _gemini_cut_stream(finish: str) -> Reply:
    call = {"functionCall": {"name": "send_email", "args": CUT_ARGUMENTS}}
    chunk = {
        "candidates": [{"content": {"role": "model", "parts": [call]}, "finishReason": finish}],
        "responseId": "r",
    }
    return Reply(headers={"content-type": "text/event-stream"}, chunks=sse(chunk))


def _chat_filtered_stream() -> Reply:
    chunks = sse(
        _chat_chunk({"role": "assistant", "tool_calls": [{"index": 0, **_CUT_CALL}]}),
        _chat_chunk({}, "content_filter"),
        "[DONE]",
    )
    return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)


@pytest.mark.parametrize(
    ("name", "reply", "finish"),
    [
        ("openai:gpt-4o-mini", _chat_cut_stream, "length"),
        ("openai:gpt-4o-mini", _chat_filtered_stream, "content_filter"),
        ("gemini:gemini-2.5-flash", lambda: _gemini_cut_stream("MAX_TOKENS"), "length"),
        ("gemini:gemini-2.5-flash", lambda: _gemini_cut_stream("SAFETY"), "content_filter"),
    ],
    ids=["chat", "chat-filter", "gemini", "gemini-safety"],
)
def test_a_streamed_call_its_cutting_finish_closes_ends_dropped(
    http_server: ScriptedServer, opened: list[Any], name: str, reply: Any, finish: str
) -> None:
    """A UI reading the run's stream sees tool_call_end(dropped=True) for a call that the
    length / content_filter finish closing it drops (before: dropped=False, for a call that
    never runs)."""
    ran.clear()
    http_server.add(reply())
    run = Agent(model=_model(http_server, opened, name), tools=[send_email]).stream("hi")
    ends = [event.dropped for event in run if event.kind == "tool_call_end"]
    assert ends == [True]
    assert (run.response.finish_reason, ran) == (finish, [])
