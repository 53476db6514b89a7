"""The neutral request and response a model exchanges with the loop: plain data."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

import attrs

from toolfold._errors import UsageError
from toolfold.runtime.core._messages import (
    FrozenDict,
    Message,
    ToolCallPart,
    Usage,
    frozen_dict,
)
from toolfold.runtime.core._repr import short
from toolfold.runtime.core._same_json import frozen_schema

FinishReason = Literal[
    "stop", "length", "tool_calls", "content_filter", "error", "other", "max_iterations"
]
"""Why a model stopped, normalised (`ModelResponse.finish_reason`).

``stop``, ``length``, ``tool_calls``, ``content_filter``, ``error`` and ``other``
are providers' words mapped (the provider's own stays in
``raw_finish_reason``). ``max_iterations`` is no provider's: a workflow's
planner (model name ``toolfold:workflow``) answers with it when a `Loop` gave
its last output because its ``max_iterations`` ran out before ``until`` held.
It shows on that answer (the last `Step`'s ``response``, the log's last
``ModelResponded``), and the run finishes with it: an answer that says
``max_iterations`` finishes its run so, whichever model gave it (a
`ScriptedModel` entry may, to test a caller's handling)."""


FINISH_REASONS: tuple[str, ...] = get_args(FinishReason)
"""The values `FinishReason` allows, in order."""


def finish_reason_problem(value: object) -> str:
    """Why ``value`` is no `FinishReason` ("" if it is one)."""
    if isinstance(value, str) and value in FINISH_REASONS:
        return ""  # (a str subclass, a StrEnum, too: a saved state holds its text)
    allowed = ", ".join(repr(r) for r in FINISH_REASONS)
    return f"expected one of {allowed}, got {value!r}"


def _finish_reason(owner: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is str and value in FINISH_REASONS:
        return  # (the usual case: the exact type first)
    problem = finish_reason_problem(value)
    if problem:
        raise UsageError(f"{type(owner).__name__}.{attribute.name}: {problem}")


def _usage(owner: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not Usage and not isinstance(value, Usage):
        raise UsageError(
            f"{type(owner).__name__}.{attribute.name}: expected a Usage, got {type(value).__name__}"
        )


def _usage_and_finish_reason(owner: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """`ModelResponse`'s one validator (attrs runs it once every field is set): its
    usage, then its finish reason, exact types first."""
    if type(owner.usage) is Usage and type(value) is str and value in FINISH_REASONS:
        return
    _usage(owner, attrs.fields(type(owner)).usage, owner.usage)
    _finish_reason(owner, attribute, value)


_EMPTY_OBJECT = frozen_dict(type="object", properties=frozen_dict())


def type_problem(field: str, value: object, expected: str) -> str:
    """``field: expected <expected>, got <type> <value>`` (for a record's refusal)."""
    return f"{field}: expected {expected}, got {type(value).__name__} {short(value)}"


def _schema_record(owner: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """`ToolDefinition`'s and `OutputSpec`'s one validator (on ``strict``, set last):
    a text name and description, a mapping schema, a bool or None ``strict``, so
    that what `to_json` writes loads back equal. Exact types first: the adapters
    build one per request with structured output."""
    kind = type(owner)
    is_tool = isinstance(owner, ToolDefinition)
    schema_field = "parameters" if is_tool else "schema"
    schema = getattr(owner, schema_field)
    description = owner.description if is_tool else ""
    if (
        type(owner.name) is str
        and type(description) is str
        and type(schema) is FrozenDict
        and (value is None or type(value) is bool)
    ):
        return
    problems = []
    if not isinstance(owner.name, str):
        problems.append(type_problem("name", owner.name, "a str"))
    if not isinstance(description, str):
        problems.append(type_problem("description", description, "a str"))
    if not isinstance(schema, Mapping):
        problems.append(type_problem(schema_field, schema, "a JSON Schema object (a mapping)"))
    if value is not None and type(value) is not bool:
        problems.append(type_problem("strict", value, "True, False or None"))
    if problems:
        raise UsageError(f"{kind.__name__} {short(owner.name)}: " + "; ".join(problems))


@attrs.frozen
class ToolDefinition:
    """A tool as a provider sees it: plain data, no function.

    Attributes:
        name: The tool name.
        description: What the tool does.
        parameters: The JSON Schema of its arguments, kept as a read-only copy
            (a `FrozenDict`, nested arrays `FrozenList`): editing the mapping
            given afterwards changes nothing here. The copy is made once per
            mapping (while it holds the same JSON) and shared; a `FrozenDict`
            is kept as it is.
        strict: Ask for strict schema adherence (None: when the schema allows).

    Raises:
        UsageError: A field of another type (a name that is not text,
            parameters that are not a mapping, a ``strict`` that is not a
            bool or None), naming the tool and the field.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = attrs.field(default=_EMPTY_OBJECT, converter=frozen_schema)
    strict: bool | None = attrs.field(default=None, validator=_schema_record)


@attrs.frozen
class OutputSpec:
    """Structured output the final answer must follow.

    Attributes:
        name: A name for the schema (providers require one).
        schema: The JSON Schema of the answer, kept as a read-only copy (a
            `FrozenDict`).
        strict: Ask for strict adherence (None: when the schema allows).

    Raises:
        UsageError: A field of another type (a name that is not text, a
            schema that is not a mapping), naming it.
    """

    name: str
    schema: Mapping[str, Any] = attrs.field(converter=frozen_schema)
    strict: bool | None = attrs.field(default=None, validator=_schema_record)


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
            ``parallel_tool_calls``...). Unknown keys go to the provider as is;
            a neutral setting the provider's API has no field for (``seed`` on
            Anthropic, ``stop`` on OpenAI's Responses API) is refused with a
            `ModelConfigError` naming it before any request. A request
            built by a run holds a plain deep copy of the config's read-only
            settings (dicts and lists all the way down): a model may change
            or dump it, nested values included, without reaching the state.
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
        finish_reason: Why the model stopped, normalised: ``stop``,
            ``length``, ``tool_calls``, ``content_filter``, ``other``,
            ``error``, which no adapter returns (only a model of your own
            may), or ``max_iterations``, which only a workflow's planner
            answers with (a `Loop` ran out of iterations before its
            ``until`` held; the run finishes with it too). Anything else
            (None, another word) raises a `UsageError` naming the field and
            the values allowed: a saved state could not hold it.
        raw_finish_reason: The provider's own word for it.
        model_name: The model that answered, as the provider names it.
        response_id: The provider's response id, when it gives one.
    """

    message: Message
    usage: Usage = Usage(requests=1)
    finish_reason: FinishReason = attrs.field(default="stop", validator=_usage_and_finish_reason)
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


#: The finish reasons of an answer the provider cut: none of its tool calls runs.
CUT_FINISHES = frozenset({"length", "content_filter"})


def without_cut_calls(response: ModelResponse) -> ModelResponse:
    """``response`` without its tool calls when the provider cut it (``length``, ``content_filter``).

    An answer cut by ``max_tokens`` (or stopped by the content filter) ends
    inside what it was writing: a tool call's arguments may stop short yet
    still parse (a ``send_email`` without its ``body``), and parallel calls are
    a plan the model did not finish. None of them runs: the run finishes
    ``length`` (``content_filter``), as for a cut text. The driver applies this
    to every model's answer before recording it (and Temporal's model activity
    before returning it, and a provider model's own ``request``), whole or streamed (`finish_stream` drops a streamed
    answer's calls too, ended or not), so every model and mode reads alike (a
    response already in a saved log is never changed: it replays as it ran).
    """
    if response.finish_reason not in CUT_FINISHES or not response.message.tool_calls:
        return response
    kept = tuple(p for p in response.message.parts if type(p) is not ToolCallPart)
    return attrs.evolve(response, message=Message("assistant", kept))
