"""Neutral stream events and the pure `fold_stream` reducer that folds them into a response."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

import attrs

from toolfold._errors import StreamError
from toolfold.runtime.core._build import builder, replacer
from toolfold.runtime.core._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from toolfold.runtime.core._request import FinishReason, ModelResponse

# --- stream events ---------------------------------------------------------


@attrs.frozen
class TextDelta:
    """A piece of answer text."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@attrs.frozen
class ReasoningDelta:
    """A piece of reasoning text, or its signature when it arrives."""

    text: str = ""
    signature: str | None = None
    provider: str | None = None
    provider_data: Mapping[str, Any] = attrs.field(factory=dict)
    kind: Literal["reasoning_delta"] = "reasoning_delta"


@attrs.frozen
class ToolCallStart:
    """A tool call begins at ``index`` (the provider's key for its fragments)."""

    index: int
    id: str | None
    name: str
    provider_data: Mapping[str, Any] = attrs.field(factory=dict)
    kind: Literal["tool_call_start"] = "tool_call_start"


@attrs.frozen
class ToolCallDelta:
    """A fragment of the arguments of the call at ``index``."""

    index: int
    arguments: str
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@attrs.frozen
class ToolCallEnd:
    """The call at ``index`` is complete: only now are its arguments final."""

    index: int
    kind: Literal["tool_call_end"] = "tool_call_end"


@attrs.frozen
class UsageUpdate:
    """Token counts for the response (replaces earlier counts)."""

    usage: Usage
    kind: Literal["usage"] = "usage"


@attrs.frozen
class StreamFinish:
    """The response ended."""

    finish_reason: FinishReason
    raw_finish_reason: str | None = None
    kind: Literal["finish"] = "finish"


@attrs.frozen
class ResponseInfo:
    """Metadata about the response (model name, response id)."""

    model_name: str | None = None
    response_id: str | None = None
    kind: Literal["info"] = "info"


StreamEvent = Union[  # noqa: UP007
    TextDelta,
    ReasoningDelta,
    ToolCallStart,
    ToolCallDelta,
    ToolCallEnd,
    UsageUpdate,
    StreamFinish,
    ResponseInfo,
]


@attrs.frozen
class _OpenCall:
    index: int
    id: str | None
    name: str
    arguments: str = ""
    done: bool = False
    provider_data: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class StreamState:
    """A response under construction from stream events (see `fold_stream`).

    Attributes:
        parts: Completed parts, in order (text and reasoning merged as they grow).
        calls: Tool calls by stream index, in the order they started.
        usage: The latest usage reported.
        finish_reason: Set once the stream finished.
        raw_finish_reason: The provider's own finish reason.
        model_name: The model that answered.
        response_id: The provider's response id.
    """

    parts: tuple[Part, ...] = ()
    calls: tuple[_OpenCall, ...] = ()
    usage: Usage = Usage(requests=1)
    finish_reason: FinishReason | None = None
    raw_finish_reason: str | None = None
    model_name: str | None = None
    response_id: str | None = None


# Stream events arrive by the hundred per response: each fold copies the state
# without `attrs.evolve`'s keyword handling and the classes' checks (see `replacer`).
_with_parts = replacer(StreamState, "parts")
_with_calls = replacer(StreamState, "calls")
_with_usage = replacer(StreamState, "usage")
_with_finish = replacer(StreamState, "finish_reason", "raw_finish_reason")
_with_info = replacer(StreamState, "model_name", "response_id")
_with_arguments = replacer(_OpenCall, "arguments")
_with_done = replacer(_OpenCall, "done")
_text = builder(TextPart)


def fold_stream(state: StreamState, event: StreamEvent) -> StreamState:
    """Fold one stream event into the response under construction (pure).

    Raises:
        StreamError: An event for a tool call that never started (a decoder
            that broke the stream's rules).
    """
    if isinstance(event, TextDelta):
        return _with_parts(state, _append_text(state.parts, event.text))
    if isinstance(event, ReasoningDelta):
        return _with_parts(state, _append_reasoning(state.parts, event))
    if isinstance(event, ToolCallStart):
        call = _OpenCall(event.index, event.id, event.name, provider_data=event.provider_data)
        return _with_calls(state, (*state.calls, call))
    if isinstance(event, ToolCallDelta):
        text = event.arguments
        return _with_calls(
            state,
            _update_call(
                state.calls, event.index, lambda c: _with_arguments(c, c.arguments + text)
            ),
        )
    if isinstance(event, ToolCallEnd):
        return _with_calls(
            state, _update_call(state.calls, event.index, lambda c: _with_done(c, True))
        )
    if isinstance(event, UsageUpdate):
        return _with_usage(state, event.usage)
    if isinstance(event, StreamFinish):
        return _with_finish(state, event.finish_reason, event.raw_finish_reason)
    return _with_info(
        state, event.model_name or state.model_name, event.response_id or state.response_id
    )


def _append_text(parts: tuple[Part, ...], text: str) -> tuple[Part, ...]:
    if parts:
        last = parts[-1]
        if isinstance(last, TextPart):
            return (*parts[:-1], _text(last.text + text))
    return (*parts, _text(text))


def _append_reasoning(parts: tuple[Part, ...], event: ReasoningDelta) -> tuple[Part, ...]:
    if parts and isinstance(parts[-1], ReasoningPart) and parts[-1].signature is None:
        last = parts[-1]
        merged = ReasoningPart(
            last.text + event.text,
            event.signature,
            event.provider or last.provider,
            {**last.provider_data, **event.provider_data}
            if event.provider_data
            else last.provider_data,
        )
        return (*parts[:-1], merged)
    return (
        *parts,
        ReasoningPart(event.text, event.signature, event.provider, event.provider_data),
    )


def _update_call(
    calls: tuple[_OpenCall, ...], index: int, change: Callable[[_OpenCall], _OpenCall]
) -> tuple[_OpenCall, ...]:
    for position in range(len(calls) - 1, -1, -1):
        if calls[position].index == index:
            return (*calls[:position], change(calls[position]), *calls[position + 1 :])
    raise StreamError(f"the model's stream sent an event for tool call {index} before its start")


def finish_stream(state: StreamState, make_id: Callable[[int], str]) -> ModelResponse:
    """Turn a folded stream into the response.

    Args:
        state: The folded stream.
        make_id: Makes an id for a call the provider sent without one (by position).

    Raises:
        StreamError: A tool call never ended: its arguments are not final.
    """
    from toolfold.runtime.core._arguments import parse_arguments

    open_calls = [c.name for c in state.calls if not c.done]
    if open_calls:
        raise StreamError(
            f"the model's stream ended before tool calls completed: {', '.join(open_calls)}"
        )
    calls = tuple(
        ToolCallPart(
            c.id or make_id(position),
            c.name,
            c.arguments or "{}",
            parse_arguments(c.arguments),
            c.provider_data,
        )
        for position, c in enumerate(state.calls)
    )
    finish = state.finish_reason or "stop"
    return ModelResponse(
        Message("assistant", (*state.parts, *calls)),
        state.usage,
        finish,
        state.raw_finish_reason,
        state.model_name,
        state.response_id,
    )
