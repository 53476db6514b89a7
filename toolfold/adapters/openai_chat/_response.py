"""Chat Completions response body -> neutral `ModelResponse` (pure functions).

Every field is read with the `toolfold.adapters._wire` getters: a value of the
wrong type is a `MalformedResponseError` naming its path, never a crash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from toolfold._errors import ProviderError, ProviderFinishError
from toolfold.adapters import _wire as wire
from toolfold.adapters._call_ids import hashed
from toolfold.adapters._codec import AUDIO
from toolfold.adapters._finishes import abnormal_finish
from toolfold.adapters._http._http_errors import status_error
from toolfold.adapters.openai_chat._errors import parse_error
from toolfold.adapters.openai_chat._providers import (
    REASONING_DETAILS,
    REASONING_FIELDS,
    REASONING_KEYS,
)
from toolfold.runtime.core._arguments import parse_arguments
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
    freeze,
    frozen_dict,
)
from toolfold.runtime.core._request import FinishReason, ModelResponse

# The parse checks every field's type (and freezes the decoded arguments), so
# its records are built without the classes' converters (see `builder`).
_call_part = builder(ToolCallPart)
_text_part = builder(TextPart)
_message = builder(Message)
_usage = builder(Usage)
_model_response = builder(ModelResponse)

# finish_reason values [O4 chat_completion_chunk.py]; "model_length" is
# Mistral's [mistral-openapi.json FinishReason]; "error" is OpenRouter's [C8].
FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "model_length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}


def finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    """Normalise a finish reason.

    Gemini's OpenAI endpoint ends a turn that called tools with ``"stop"``
    (gemini-openai-endpoint-stream-single-call cassette): calls win.
    """
    if has_calls and raw in (None, "stop"):
        return "tool_calls"
    if raw is None:
        return "stop"
    return FINISH_REASONS.get(raw, "other")


def refused(reason: FinishReason) -> FinishReason:
    """The finish reason of an answer that is a refusal (``message.refusal``, no content).

    The model declined: ``content_filter``, as an Anthropic refusal reads, not
    ``stop``, which says it answered (the refusal stays the answer's text).
    A cut refusal (``length``) keeps its reason.
    """
    return "content_filter" if reason == "stop" else reason


def synthetic_id(seed: str, position: int) -> str:
    """A deterministic call id for a provider that sent none (or ``""``)."""
    digest = hashlib.sha256(hashed(f"{seed}:{position}")).hexdigest()[:24]
    return f"call_{digest}"


def parse_usage(
    usage: Mapping[str, Any] | None, *, thinking_in_total: bool = False, at: str = "$.usage"
) -> Usage:
    """Neutral usage from the OpenAI fields and the family's extras.

    Cached prompt tokens: ``prompt_tokens_details.cached_tokens`` (OpenAI),
    ``prompt_cache_hit_tokens`` (DeepSeek [C6]) or ``num_cached_tokens``
    (Mistral, see its cassettes); prompt tokens written to the cache:
    ``prompt_tokens_details.cache_write_tokens`` [openai-openapi.yaml
    CompletionUsage]. ``prompt_tokens`` counts both.

    Args:
        usage: The ``usage`` object.
        thinking_in_total: The provider counts hidden thinking in
            ``total_tokens`` only (Gemini's OpenAI endpoint: 35 + 12 of 109 in
            the gemini-openai-endpoint cassette): the gap between the total and
            prompt plus completion is reported as reasoning output. Off for
            everyone else, whose gap (if any) means something else.
        at: The JSON path of ``usage``, for errors.

    Raises:
        WireError: A count is not a non-negative integer.
    """
    if not usage:
        return Usage(requests=1)
    if usage.keys() <= _PLAIN_USAGE and not thinking_in_total:
        # The common body: three counts. Anything unusual goes the long way.
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        total = usage.get("total_tokens")
        if (
            type(prompt) is int
            and type(completion) is int
            and type(total) is int
            and prompt >= 0
            and completion >= 0
            and total >= 0
        ):
            return _usage(prompt, completion, 0, 0, 1)
    prompt = wire.count(usage, "prompt_tokens", at)
    completion = wire.count(usage, "completion_tokens", at)
    total = wire.count(usage, "total_tokens", at)
    cached = reasoning = written = 0
    if not usage.keys() <= _PLAIN_USAGE:
        prompt_details = wire.mapping(usage, "prompt_tokens_details", at)
        completion_details = wire.mapping(usage, "completion_tokens_details", at)
        details_at = f"{at}.prompt_tokens_details"
        cached = wire.count(prompt_details, "cached_tokens", details_at)
        written = wire.count(prompt_details, "cache_write_tokens", details_at)
        cached = cached or wire.count(usage, "prompt_cache_hit_tokens", at)
        cached = cached or wire.count(usage, "num_cached_tokens", at)
        reasoning = wire.count(
            completion_details, "reasoning_tokens", f"{at}.completion_tokens_details"
        )
    if thinking_in_total and not reasoning and total > prompt + completion:
        reasoning = total - prompt - completion
        completion += reasoning
    return _usage(prompt, completion, cached, reasoning, 1, written)


_PLAIN_USAGE = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})


def arguments_text(parent: Mapping[str, Any], at: str) -> str:
    """The ``arguments`` of a call as JSON text; a few servers send an object instead."""
    arguments = parent.get("arguments")
    if arguments is None:
        return ""
    if type(arguments) is str:
        return wire.encodable(arguments)
    if isinstance(arguments, Mapping):
        return json.dumps(wire.value(parent, "arguments", at), ensure_ascii=False)
    raise wire.WireError(
        wire.path(at, "arguments"), f"expected a string, got {wire.kind(arguments)}"
    )


def parse_response(body: Any, provider: str, *, thinking_in_total: bool = False) -> ModelResponse:
    """Turn a ``chat.completion`` body into a `ModelResponse`.

    ``thinking_in_total`` is passed to `parse_usage`.

    Raises:
        MalformedResponseError: A field has the wrong type (named by its path).
        ProviderError: The body is an error object, or has no choice.
    """
    # One function, the whole read in its try: a body on every exchange, so no
    # layer of calls between the model and the fields.
    raw = body
    try:
        if type(body) is not dict:
            body = wire.root(body)
        if body.get("error") is not None:
            raise _inband_error(body, provider)
        # Each field is checked inline for the type a well-formed body has; any
        # other value goes through its `wire` getter, which reads it (absent, null,
        # a Mapping) or raises the error naming its path. One pass either way.
        choices = body.get("choices")
        if type(choices) is not list:
            choices = wire.array(body, "choices", "$")
        if not choices:
            raise no_choices(provider, wire.dumps_raw(body))
        choice = choices[0]
        if type(choice) is not dict:
            choice = wire.mapping(choices, 0, "$.choices")
        message = choice.get("message")
        if type(message) is not dict:
            # A choice without its message has no answer, not an empty one: OpenAI's
            # spec (CreateChatCompletionResponse) requires `message`, an object.
            if message is None:
                got = "null" if "message" in choice else "nothing (the field is absent)"
                raise wire.WireError(_MESSAGE, f"expected an object, got {got}")
            message = wire.mapping(choice, "message", "$.choices[0]")
        response_id = body.get("id")
        if type(response_id) is not str or not response_id.isascii():
            response_id = wire.text(body, "id", "$")
        response_id = response_id or None
        content = message.get("content")
        # Most answers carry no reasoning field: one set operation instead of a lookup each.
        parts: list[Part] = [] if _NO_REASONING(message.keys()) else _reasoning(message, provider)
        if type(content) is str:
            if content:
                parts.append(_text_part(content if content.isascii() else wire.encodable(content)))
        elif isinstance(content, list):
            parts.extend(_content(content, provider, f"{_MESSAGE}.content"))
        elif content is not None:
            raise wire.WireError(
                f"{_MESSAGE}.content", f"expected a string or an array, got {wire.kind(content)}"
            )
        refusal = message.get("refusal")
        if refusal is not None:
            refusal = wire.text(message, "refusal", _MESSAGE)
        if not content and refusal:
            parts.append(TextPart(refusal))
        audio = message.get("audio")
        if audio is not None:
            parts.extend(
                audio_parts(wire.mapping(message, "audio", _MESSAGE), bool(content), provider)
            )
        calls_at = _CALLS
        raw_calls = message.get("tool_calls")
        if raw_calls is None:  # a text answer: no array to check
            raw_calls = ()
        elif type(raw_calls) is not list:
            raw_calls = wire.array(message, "tool_calls", _MESSAGE)
        for raw in raw_calls:
            if type(raw) is not dict:
                raw_calls = [wire.mapping(raw_calls, i, calls_at) for i in range(len(raw_calls))]
                break
        function_call = message.get("function_call")
        if function_call is not None:
            function_call = wire.mapping(message, "function_call", _MESSAGE)
        if not raw_calls and function_call:
            raw_calls = [{"function": function_call}]  # legacy functions API
            calls_at = f"{_MESSAGE}.function_call"
        seed = response_id or ""
        if not seed and any(not raw.get("id") for raw in raw_calls):
            # Only a call without an id needs it: the stream's seed (`_stream._chunk`), so
            # a streamed answer and a whole one make the same ids.
            seed = f"{wire.text(body, 'model', '$')}:{body.get('created')}"
        # A tuple at once: the message's parts when the answer is only calls.
        calls: tuple[ToolCallPart, ...]
        if len(raw_calls) == 1:  # the usual tool step: no comprehension to set up
            calls = (_call(raw_calls[0], seed, 0, calls_at),)
        elif not raw_calls:  # a text answer: none either
            calls = ()
        else:
            calls = tuple(
                [_call(raw, seed, position, calls_at) for position, raw in enumerate(raw_calls)]
            )
        raw_finish = choice.get("finish_reason")
        if type(raw_finish) is not str or not raw_finish.isascii():
            raw_finish = wire.text(choice, "finish_reason", "$.choices[0]")
        if raw_finish == "error":  # (its usage billed: the run's state counts it)
            billed = parse_usage(
                wire.mapping(body, "usage", "$"), thinking_in_total=thinking_in_total
            )
            raise failed_answer(body, choice, provider, usage=billed)
        model = body.get("model")
        if type(model) is not str or not model.isascii():
            model = wire.text(body, "model", "$")
        usage = body.get("usage")
        if usage is not None and type(usage) is not dict:
            usage = wire.mapping(body, "usage", "$")
        counts = parse_usage(usage, thinking_in_total=thinking_in_total)  # three counts: fast
        if calls:
            # `finish_reason(raw_finish, True)`, inlined: calls win over "stop".
            reason = (
                "tool_calls"
                if raw_finish in (None, "stop")
                else FINISH_REASONS.get(raw_finish, "other")
            )
        else:
            reason = "stop" if raw_finish is None else FINISH_REASONS.get(raw_finish, "other")
            if refusal and not content:
                reason = refused(reason)
        return _model_response(
            _message("assistant", (*parts, *calls) if parts else calls),
            counts,
            reason,
            raw_finish,
            model,
            response_id,
        )
    except wire.READ_ERRORS as exc:
        raise wire.malformed(provider, exc, wire.dumps_raw(raw)) from None


def no_choices(provider: str, body: str) -> ProviderError:
    """The error of an answer with no choice at all (``choices: []``), whole or a stream
    that ended (``[DONE]``) without one: there is no answer to read, not even an empty
    one. ``body``: the body, or the stream's last chunk (key-free)."""
    return ProviderError(
        f"{provider} returned a response without choices: no answer to read",
        provider=provider,
        status_code=200,
        body=body[:5000],
    )


#: What ``finish_reason: "error"`` means when the answer says nothing more.
FAILED_ANSWER = "the answer failed before its end (OpenRouter: an upstream provider failed)"


def failed_answer(
    body: Mapping[str, Any],
    choice: Mapping[str, Any],
    provider: str,
    at: str = "$.choices[0]",
    usage: Usage | None = None,
) -> ProviderFinishError:
    """The error of an answer whose choice ended with ``finish_reason: "error"``
    (OpenRouter), with the choice's ``error.message`` when it has one: what it holds
    is no answer, whole or streamed. ``usage``: what the provider reported for it."""
    error = wire.mapping(choice, "error", at)
    said = wire.text(error, "message", f"{at}.error") if error else None
    return abnormal_finish(
        provider, "error", said, body=wire.dumps_raw(body), why=FAILED_ANSWER, usage=usage
    )


def _inband_error(body: Mapping[str, Any], provider: str) -> ProviderError:
    """The error of a body that is an error object (out of `parse_response`'s hot path)."""
    text = wire.dumps_raw(body)
    info = parse_error(200, text, {})
    status = http_status(info.code)
    if status is not None:
        # OpenRouter and vLLM put the HTTP status in the code: map it like one [C8, C11].
        return status_error(provider, status, text, {}, info, "")
    return ProviderError(
        f"{provider} returned an error with HTTP 200: {info.message}",
        provider=provider,
        status_code=200,
        body=text,
        provider_message=info.message,
        code=info.code,
    )


_NO_REASONING = REASONING_KEYS.isdisjoint
_MESSAGE = "$.choices[0].message"
_CALLS = f"{_MESSAGE}.tool_calls"


def http_status(code: str | None) -> int | None:
    """The HTTP status an error ``code`` carries (OpenRouter, vLLM), else None.

    Only three ASCII digits from 400 on count: ``"²"`` is a digit to `str.isdigit`
    but not to `int`.
    """
    if code is not None and len(code) == 3 and code.isascii() and code.isdigit():
        status = int(code)
        return status if status >= 400 else None
    return None


_AUDIO_TYPES = (
    (b"RIFF", "audio/wav"),
    (b"fLaC", "audio/flac"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"\xff\xfb", "audio/mpeg"),
    (b"\xff\xf3", "audio/mpeg"),
    (b"\xff\xf2", "audio/mpeg"),
    (b"\xff\xf1", "audio/aac"),
    (b"\xff\xf9", "audio/aac"),
)


def audio_type(data: bytes) -> str:
    """The media type of audio bytes, from their header (``pcm16`` has none:
    ``application/octet-stream``)."""
    return next(
        (t for magic, t in _AUDIO_TYPES if data.startswith(magic)), "application/octet-stream"
    )


def audio_parts(audio: Mapping[str, Any], has_text: bool, provider: str) -> list[Part]:
    """An audio answer (``message.audio``, asked for with ``modalities``) [openai-openapi.yaml
    ChatCompletionResponseMessage]: its ``transcript`` as a `TextPart` (unless the message has
    text of its own), its ``data`` (base64) as a `FilePart` (its type read from the bytes: ``pcm16`` has no
    header, ``application/octet-stream``), then an empty
    `ReasoningPart` keeping its ``id`` and ``expires_at`` to send it back by id."""
    at = f"{_MESSAGE}.audio"
    parts: list[Part] = []
    transcript = wire.text(audio, "transcript", at)
    if transcript and not has_text:
        parts.append(TextPart(transcript))
    data = wire.base64_bytes(audio, "data", at)
    if data is not None:
        parts.append(FilePart(data, media_type=audio_type(data)))
    audio_id = wire.text(audio, "id", at)
    if audio_id:
        kept = {"id": audio_id, "expires_at": wire.integer(audio, "expires_at", at)}
        parts.append(ReasoningPart("", None, provider, {AUDIO: kept}))
    return parts


def _reasoning(message: Mapping[str, Any], provider: str) -> list[Part]:
    # An optional extra: read when it is a string, else left alone (a server
    # that sends an object there still answers).
    details = reasoning_details(message)
    kept = {REASONING_DETAILS: details} if details else {}
    for field in REASONING_FIELDS:
        text = message.get(field)
        if text and type(text) is str:  # absent (None) for most answers: one test
            return [ReasoningPart(wire.encodable(text), None, provider, kept)]
    return [ReasoningPart("", None, provider, kept)] if kept else []


def reasoning_details(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OpenRouter's ``reasoning_details`` (reasoning blocks: ``reasoning.text``,
    ``reasoning.summary``, ``reasoning.encrypted``), as they came, or ``[]``.

    Kept whole to be sent back unchanged: an encrypted block is an upstream's
    signature (Gemini's thought signature, Anthropic's thinking signature).
    An optional extra, as the reasoning text: a value that is no array of
    objects is left alone (another server may use the name otherwise).
    """
    details = message.get(REASONING_DETAILS)
    if details and type(details) is list and all(type(block) is dict for block in details):
        return list(details)
    return []


def _content(content: list[Any], provider: str, at: str) -> list[Part]:
    return [
        ReasoningPart(text, provider=provider) if thinking else TextPart(text)
        for thinking, text in content_chunks(content, at)
    ]


def content_chunks(content: list[Any], at: str) -> list[tuple[bool, str]]:
    """``(is_thinking, text)`` for each non-empty chunk of typed content.

    Mistral's reasoning models answer with typed chunks, in whole responses and
    in stream deltas alike [mistral-openapi.json ContentChunk]. Chunks of other
    types (images...) are skipped.

    Raises:
        WireError: A chunk is not an object, or its text is not a string.
    """
    found: list[tuple[bool, str]] = []
    for index, _ in enumerate(content):
        chunk = wire.mapping(content, index, at)
        where = wire.path(at, index)
        kind = chunk.get("type")
        if kind == "text":
            text = wire.text(chunk, "text", where)
            if text:
                found.append((False, text))
        elif kind == "thinking":
            inner = wire.array(chunk, "thinking", where)
            inner_at = f"{where}.thinking"
            pieces = [
                wire.text(wire.mapping(inner, i, inner_at), "text", wire.path(inner_at, i)) or ""
                for i in range(len(inner))
            ]
            text = "".join(pieces)
            if text:
                found.append((True, text))
    return found


# Already frozen: the call keeps it as is instead of freezing a new empty dict.
_NO_EXTRA: Mapping[str, Any] = frozen_dict()


def call_extra(raw: Mapping[str, Any], at: str) -> Mapping[str, Any]:
    """The provider fields a call must send back (Gemini's ``extra_content``)."""
    if not raw.get("extra_content"):
        return _NO_EXTRA
    return {"extra_content": wire.value(raw, "extra_content", at)}


def _call(raw: Mapping[str, Any], seed: str, position: int, calls_at: str) -> ToolCallPart:
    # The paths are made only when a field is not what a well-formed call holds.
    function = raw.get("function")
    if type(function) is not dict:
        function = wire.mapping(raw, "function", f"{calls_at}[{position}]")
    text = function.get("arguments")
    if type(text) is not str or not text.isascii():
        text = arguments_text(function, f"{calls_at}[{position}].function")
    call_id = raw.get("id")
    if type(call_id) is not str or not call_id.isascii():
        call_id = wire.text(raw, "id", f"{calls_at}[{position}]")
    name = function.get("name")
    if type(name) is not str or not name.isascii():
        name = wire.text(function, "name", f"{calls_at}[{position}].function")
    arguments = parse_arguments(text)
    return _call_part(
        call_id or synthetic_id(seed, position),
        name or "",
        text or "{}",
        None if arguments is None else freeze(arguments),
        _NO_EXTRA
        if not raw.get("extra_content")
        else freeze(call_extra(raw, f"{calls_at}[{position}]")),
    )
