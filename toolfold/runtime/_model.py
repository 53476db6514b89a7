"""The contract between the loop and the providers.

The runtime asks a `Model` for one response to a `ModelRequest`; adapters turn
that into HTTP and back. Streams arrive as neutral `StreamEvent` values and are
folded by the pure `fold_stream` reducer into the same `ModelResponse` that a
non-streaming call gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, Protocol, Union, runtime_checkable

import attrs

from toolfold._errors import ModelConfigError
from toolfold.runtime._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error", "other"]


@attrs.frozen
class ToolDefinition:
    """A tool as a provider sees it: plain data, no function.

    Attributes:
        name: The tool name.
        description: What the tool does.
        parameters: The JSON Schema of its arguments.
        strict: Ask for strict schema adherence (None: when the schema allows).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}}
    )
    strict: bool | None = None


@attrs.frozen
class OutputSpec:
    """Structured output the final answer must follow.

    Attributes:
        name: A name for the schema (providers require one).
        schema: The JSON Schema of the answer.
        strict: Ask for strict adherence (None: when the schema allows).
    """

    name: str
    schema: Mapping[str, Any]
    strict: bool | None = None


def _messages_tuple(messages: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(messages)


def _definitions_tuple(tools: Iterable[ToolDefinition]) -> tuple[ToolDefinition, ...]:
    return tuple(tools)


@attrs.frozen
class ModelRequest:
    """Everything one model call needs, provider-neutral.

    Attributes:
        messages: The conversation, system messages included.
        tools: The tools the model may call.
        tool_choice: None (provider default), ``"auto"``, ``"none"``,
            ``"required"``, or the name of the one tool the model must call.
        output: Structured output for the final answer, or None.
        settings: Sampling and provider settings (``temperature``,
            ``max_tokens``, ``top_p``, ``seed``, ``stop``,
            ``parallel_tool_calls``...). Unknown keys go to the provider as is.
    """

    messages: tuple[Message, ...] = attrs.field(converter=_messages_tuple)
    tools: tuple[ToolDefinition, ...] = attrs.field(default=(), converter=_definitions_tuple)
    tool_choice: str | None = None
    output: OutputSpec | None = None
    settings: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ModelResponse:
    """One model response, provider-neutral.

    Attributes:
        message: The assistant message (text, reasoning, tool calls).
        usage: Tokens used by this call (``requests`` is 1).
        finish_reason: Why the model stopped, normalised.
        raw_finish_reason: The provider's own word for it.
        model_name: The model that answered, as the provider names it.
        response_id: The provider's response id, when it gives one.
    """

    message: Message
    usage: Usage = Usage(requests=1)
    finish_reason: FinishReason = "stop"
    raw_finish_reason: str | None = None
    model_name: str | None = None
    response_id: str | None = None

    @property
    def text(self) -> str:
        """The text of the message."""
        return self.message.text

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls of the message."""
        return self.message.tool_calls


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


def fold_stream(state: StreamState, event: StreamEvent) -> StreamState:
    """Fold one stream event into the response under construction (pure)."""
    if isinstance(event, TextDelta):
        return attrs.evolve(state, parts=_append_text(state.parts, event.text))
    if isinstance(event, ReasoningDelta):
        return attrs.evolve(state, parts=_append_reasoning(state.parts, event))
    if isinstance(event, ToolCallStart):
        call = _OpenCall(event.index, event.id, event.name, provider_data=event.provider_data)
        return attrs.evolve(state, calls=(*state.calls, call))
    if isinstance(event, ToolCallDelta):
        return attrs.evolve(
            state,
            calls=_update_call(
                state.calls,
                event.index,
                lambda c: attrs.evolve(c, arguments=c.arguments + event.arguments),
            ),
        )
    if isinstance(event, ToolCallEnd):
        return attrs.evolve(
            state,
            calls=_update_call(state.calls, event.index, lambda c: attrs.evolve(c, done=True)),
        )
    if isinstance(event, UsageUpdate):
        return attrs.evolve(state, usage=event.usage)
    if isinstance(event, StreamFinish):
        return attrs.evolve(
            state, finish_reason=event.finish_reason, raw_finish_reason=event.raw_finish_reason
        )
    return attrs.evolve(
        state,
        model_name=event.model_name or state.model_name,
        response_id=event.response_id or state.response_id,
    )


def _append_text(parts: tuple[Part, ...], text: str) -> tuple[Part, ...]:
    if parts and isinstance(parts[-1], TextPart):
        return (*parts[:-1], TextPart(parts[-1].text + text))
    return (*parts, TextPart(text))


def _append_reasoning(parts: tuple[Part, ...], event: ReasoningDelta) -> tuple[Part, ...]:
    if parts and isinstance(parts[-1], ReasoningPart) and parts[-1].signature is None:
        last = parts[-1]
        merged = ReasoningPart(
            last.text + event.text, event.signature, event.provider or last.provider
        )
        return (*parts[:-1], merged)
    return (*parts, ReasoningPart(event.text, event.signature, event.provider))


def _update_call(
    calls: tuple[_OpenCall, ...], index: int, change: Callable[[_OpenCall], _OpenCall]
) -> tuple[_OpenCall, ...]:
    for position in range(len(calls) - 1, -1, -1):
        if calls[position].index == index:
            return (*calls[:position], change(calls[position]), *calls[position + 1 :])
    raise ValueError(f"stream event for tool call index {index} before its start")


def finish_stream(state: StreamState, make_id: Callable[[int], str]) -> ModelResponse:
    """Turn a folded stream into the response.

    Args:
        state: The folded stream.
        make_id: Makes an id for a call the provider sent without one (by position).

    Raises:
        ValueError: A tool call never ended: its arguments are not final.
    """
    from toolfold.runtime._arguments import parse_arguments

    open_calls = [c.name for c in state.calls if not c.done]
    if open_calls:
        raise ValueError(f"stream ended before tool calls completed: {', '.join(open_calls)}")
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


# --- the model protocol and the provider registry --------------------------


@runtime_checkable
class Model(Protocol):
    """What the loop needs of a model. Adapters and test models implement it."""

    @property
    def name(self) -> str:
        """``provider:model``, e.g. ``openai:gpt-4o-mini``."""
        ...

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One response, asynchronously."""
        ...

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """One response, blocking."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        ...

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        ...


ModelFactory = Callable[..., Model]
_PROVIDERS: dict[str, ModelFactory] = {}


def register_provider(prefix: str, factory: ModelFactory) -> None:
    """Make ``prefix:model-name`` strings resolve through ``factory``.

    Args:
        prefix: The provider prefix, e.g. ``"openai"``.
        factory: Called as ``factory(model_name, **options)``; returns a `Model`.
    """
    _PROVIDERS[prefix] = factory


def model(spec: str | Model, **options: Any) -> Model:
    """Build a model from a ``provider:model`` string, or pass a model through.

    Args:
        spec: ``"openai:gpt-4o-mini"``, ``"openai-compatible:my-model"`` (with
            ``base_url=``), ... or a `Model` object.
        **options: ``base_url``, ``api_key``, ``http_client``, timeouts,
            retries: whatever the provider accepts.

    Raises:
        ModelConfigError: The string has no known provider prefix.
    """
    if not isinstance(spec, str):
        if options:
            raise ModelConfigError("options can only be given with a model string")
        return spec
    prefix, sep, name = spec.partition(":")
    if not sep or not name:
        raise ModelConfigError(
            f"model string {spec!r} must look like 'provider:model', e.g. 'openai:gpt-4o-mini'"
        )
    if prefix not in _PROVIDERS:
        _load_builtin_adapters()
    factory = _PROVIDERS.get(prefix)
    if factory is None:
        known = ", ".join(sorted(_PROVIDERS)) or "none"
        raise ModelConfigError(f"unknown provider {prefix!r} in {spec!r}; known providers: {known}")
    return factory(name, **options)


def _load_builtin_adapters() -> None:
    # runtime must not import adapters at module level (import direction); the
    # facade wires this hook so a model string resolves on first use.
    if _ADAPTER_LOADER is not None:
        _ADAPTER_LOADER()


_ADAPTER_LOADER: Callable[[], None] | None = None


def set_adapter_loader(loader: Callable[[], None]) -> None:
    """Install the hook that imports the built-in adapters (used by the facade)."""
    global _ADAPTER_LOADER
    _ADAPTER_LOADER = loader
