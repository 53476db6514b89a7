"""The shipped test models: scripts, functions, the tool-calling TestModel and their streams."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import decimal
import enum
import gc
import json
import re
import uuid
import weakref
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold import (
    Agent,
    Field,
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    Tool,
    ToolfoldError,
    ToolResultPart,
    UsageError,
    tool,
)
from toolfold.runtime import (
    ImagePart,
    MediaOutput,
    OutputSpec,
    ReasoningPart,
    StreamState,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
    finish_stream,
    fold_stream,
)
from toolfold.testing import FunctionModel, ScriptedModel, TestModel, sample_value
from toolfold.toolkit._arguments import compile_validator

REQ = ModelRequest((Message.user("hi"),))


def _fold(events: Any) -> ModelResponse:
    state = StreamState()
    for event in events:
        state = fold_stream(state, event)
    return finish_stream(state, lambda i: f"gen{i}")


def test_script_entries_become_responses() -> None:
    """Text, calls, lists, messages and functions each become one response, in order."""
    model = ScriptedModel(
        [
            "plain",
            ScriptedModel.call("a", {"x": 1}),
            ["thinking", ScriptedModel.call("a", {"x": 1}), ScriptedModel.call("b")],
            Message.assistant("as message"),
            lambda request: f"saw {len(request.messages)}",
        ]
    )
    first = model.request_sync(REQ)
    assert (first.text, first.finish_reason) == ("plain", "stop")
    second = model.request_sync(REQ)
    assert second.finish_reason == "tool_calls"
    assert second.tool_calls[0].arguments == {"x": 1}
    third = model.request_sync(REQ)
    assert third.text == "thinking"
    assert [c.name for c in third.tool_calls] == ["a", "b"]
    assert model.request_sync(REQ).text == "as message"
    assert model.request_sync(REQ).text == "saw 1"
    assert model.remaining == 0
    assert len(model.requests) == 5


def test_call_ids_are_unique_per_conversation_position() -> None:
    """Calls without ids get ids from the step and position, distinct across steps."""
    model = ScriptedModel([[ScriptedModel.call("a"), ScriptedModel.call("a")]] * 2)
    one = model.request_sync(REQ)
    later = ModelRequest((Message.user("hi"), one.message, Message.tool()))
    two = model.request_sync(later)
    ids = [c.id for c in (*one.tool_calls, *two.tool_calls)]
    assert len(set(ids)) == 4


def test_raw_argument_text_is_kept() -> None:
    """A call scripted with raw text keeps the text; invalid JSON decodes to None."""
    call = ScriptedModel.call("a", '{"x": ')
    assert call.arguments_text == '{"x": '
    assert call.arguments is None


def test_exhausted_script_raises_clear_error() -> None:
    """A request past the script's end names the problem."""
    model = ScriptedModel(["only"])
    model.request_sync(REQ)
    with pytest.raises(ToolfoldError, match="no entry left for request 2"):
        model.request_sync(REQ)


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        (None, "got NoneType None"),
        (5, "got int 5"),
        ({"text": "x"}, "got dict {'text': 'x'}"),
        (b"hi", "got bytes b'hi'"),
        (["ok", 3], "item 1 of the list: got int 3"),
        (Message.user("x"), "got a Message with role 'user'"),
        (ModelResponse(Message.user("x")), "got a ModelResponse's message with role 'user'"),
        (Message.tool(ToolResultPart("c", "add", "x")), "got a Message with role 'tool'"),
        (["text", ToolResultPart("c", "add", "x")], "got a ToolResultPart (for tool 'add')"),
    ],
)
def test_a_script_entry_that_is_no_reply_is_refused_when_the_script_is_made(
    entry: Any, named: str
) -> None:
    """A bad script entry raises at construction, naming its index, what it is and the kinds."""
    with pytest.raises(ToolfoldError) as raised:
        ScriptedModel(["fine", entry])
    message = str(raised.value)
    assert message.startswith("ScriptedModel script entry 1 is no reply: ")
    assert named in message
    assert "give text (a str), a tool call" in message


def test_a_function_reply_that_is_no_reply_names_the_function() -> None:
    """A FunctionModel function (sync or async) or a script function returning None says so."""

    async def nothing(request: ModelRequest) -> None:
        return None

    for model in (FunctionModel(lambda request: None), FunctionModel(nothing)):  # type: ignore[arg-type, return-value]
        with pytest.raises(
            ToolfoldError,
            match="FunctionModel's function returned a value that is no reply: got NoneType None",
        ):
            model.request_sync(REQ)
        with pytest.raises(ToolfoldError, match="FunctionModel's function returned"):
            asyncio.run(model.request(REQ))
    scripted = ScriptedModel(["fine", lambda request: {"text": "x"}])
    scripted.request_sync(REQ)
    with pytest.raises(
        ToolfoldError,
        match=r"script entry 1 \(a function\) returned a value "
        "that is no reply: got dict",
    ):
        scripted.request_sync(REQ)


def test_a_run_on_a_function_returning_none_raises_the_usage_error() -> None:
    """An agent whose FunctionModel returns None fails with the reply's error, not a TypeError."""
    agent = Agent(FunctionModel(lambda request: None))  # type: ignore[arg-type, return-value]
    with pytest.raises(UsageError, match="returned a value that is no reply") as raised:
        agent.run("x")
    assert "not iterable" not in str(raised.value)


def test_full_response_entry_kept_with_its_usage() -> None:
    """A ModelResponse entry keeps its finish reason and usage."""
    from toolfold import Usage

    given_response = ModelResponse(Message.assistant("cut"), Usage(5, 7, requests=1), "length")
    got = ScriptedModel([given_response]).request_sync(REQ)
    assert got.finish_reason == "length"
    assert got.usage == Usage(5, 7, requests=1)


def test_usage_is_estimated() -> None:
    """Test models report nonzero usage so usage summing can be checked."""
    got = ScriptedModel(["three word answer"]).request_sync(REQ)
    assert got.usage.output_tokens == 3
    assert got.usage.input_tokens == 1
    assert got.usage.requests == 1


def test_streams_fold_back_to_the_same_response() -> None:
    """The sync and async streams of a test model fold into the non-streamed response."""
    script = [["some longer text here", ScriptedModel.call("tool", {"q": "a long query"})]]
    expected = ScriptedModel(script).request_sync(REQ)
    events = list(ScriptedModel(script).stream_sync(REQ))
    assert sum(isinstance(e, TextDelta) for e in events) > 1
    assert sum(isinstance(e, ToolCallDelta) for e in events) > 1
    assert _fold(events) == expected

    async def collect() -> list[Any]:
        return [e async for e in ScriptedModel(script).stream(REQ)]

    assert _fold(asyncio.run(collect())) == expected


def test_function_model_sync_and_async_functions() -> None:
    """FunctionModel accepts sync and async functions, for both request methods."""

    async def afn(request: ModelRequest) -> str:
        return "async " + request.messages[-1].text

    for model in (FunctionModel(lambda r: "sync " + r.messages[-1].text), FunctionModel(afn)):
        word = "async" if model.function is afn else "sync"
        assert model.request_sync(REQ).text == f"{word} hi"
        assert asyncio.run(model.request(REQ)).text == f"{word} hi"


def test_a_stream_joins_texts_in_a_row_and_keeps_calls_in_place_as_documented() -> None:
    """Texts in a row (which a stream cannot keep apart) fold into one text, joined in order;
    a call keeps its place, the text after it another part; no texts in a row fold back exactly."""
    call = ScriptedModel.call("add", {"a": 1, "b": 2}, id="c1")
    split = ["Let me", " check.", call, "after the call"]
    plain = ScriptedModel([split]).request_sync(REQ)
    assert [p.kind for p in plain.message.parts] == ["text", "text", "tool_call", "text"]
    streamed = _fold(ScriptedModel([split]).stream_sync(REQ))
    assert streamed.message.parts == (
        TextPart("Let me check."),
        plain.message.parts[2],
        TextPart("after the call"),
    )
    interleaved = ["Let me check.", call, "after the call"]
    assert _fold(ScriptedModel([interleaved]).stream_sync(REQ)) == ScriptedModel(
        [interleaved]
    ).request_sync(REQ)
    assert _fold(ScriptedModel([["two", "texts"]]).stream_sync(REQ)).text == "twotexts"
    whole = ["Let me check.", call]
    assert _fold(ScriptedModel([whole]).stream_sync(REQ)) == ScriptedModel([whole]).request_sync(
        REQ
    )


def test_a_stream_keeps_reasoning_parts_apart_as_the_whole_response() -> None:
    """Two unsigned reasoning parts in a row stream as two parts, with their provider_data,
    as the response itself has them (they merged into one)."""
    parts = [
        ReasoningPart("One.", provider="p", provider_data={"id": "rs_1"}),
        ReasoningPart("Two.", provider="p", provider_data={"id": "rs_2"}),
        "answer",
    ]
    whole = ScriptedModel([parts]).request_sync(REQ)
    assert _fold(ScriptedModel([parts]).stream_sync(REQ)) == whole
    assert [p.provider_data["id"] for p in whole.message.parts[:2]] == ["rs_1", "rs_2"]


def test_a_stream_keeps_an_image_between_its_text_and_signature_as_the_whole_response() -> None:
    """An image part streams as one MediaOutput: text, image, signed reasoning fold back as they were."""
    parts = ["Here:", ImagePart(b"\x89PNG"), ReasoningPart("", "sig", "gemini"), "done"]
    whole = ScriptedModel([parts]).request_sync(REQ)
    events = list(ScriptedModel([parts]).stream_sync(REQ))
    assert [e.part for e in events if isinstance(e, MediaOutput)] == [ImagePart(b"\x89PNG")]
    assert _fold(events) == whole


def test_function_model_custom_stream() -> None:
    """A stream_function's events are yielded exactly."""
    events = [TextDelta("a"), TextDelta("b")]
    model = FunctionModel(lambda r: "ignored", stream_function=lambda r: events)
    assert list(model.stream_sync(REQ)) == events


@pytest.mark.parametrize("keep", [True, False])
def test_a_test_model_keeps_its_requests_unless_told_not_to(keep: bool) -> None:
    """``keep_requests=False``: the model holds no request, by any of its four methods."""
    stream_events = [TextDelta("s")]
    models = [
        ScriptedModel(["a", "b", "c", "d"], keep_requests=keep),
        FunctionModel(lambda r: "a", keep_requests=keep),
        FunctionModel(lambda r: "a", stream_function=lambda r: stream_events, keep_requests=keep),
        TestModel(keep_requests=keep),
    ]

    async def streamed(model: Any) -> None:
        async for _ in model.stream(REQ):
            pass

    for model in models:
        model.request_sync(REQ)
        asyncio.run(model.request(REQ))
        list(model.stream_sync(REQ))
        asyncio.run(streamed(model))
        assert model.requests == ([REQ] * 4 if keep else [])
    agent = Agent(FunctionModel(lambda r: "done", keep_requests=keep))
    assert agent.run("hi").text == "done"
    assert len(agent.model.requests) == (1 if keep else 0)


def test_without_its_requests_a_test_model_holds_a_bounded_number_of_conversations() -> None:
    """``keep_requests=False``: of many runs, the model holds the conversations of the last 8 at most."""

    def fetch(q: str) -> str:
        """Fetch.

        Args:
            q: The query.
        """
        return "x" * 1000

    def reply(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return FunctionModel.call("fetch", {"q": "a"})

    agent = Agent(FunctionModel(reply, keep_requests=False), tools=[tool(fetch)])
    results = []
    for _ in range(20):
        response = agent.run("q")
        assert response.state.messages[-2].role == "tool"
        results.append(weakref.ref(response.state.messages[-2]))
        del response
    gc.collect()
    held = [i for i, result in enumerate(results) if result() is not None]
    assert len(held) <= 8
    assert 0 not in held


TOOLS = (
    ToolDefinition(
        "weather",
        "",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 2},
                "unit": {"enum": ["c", "f"]},
                "days": {"type": "integer", "minimum": 3, "maximum": 7},
            },
            "required": ["city", "unit"],
        },
    ),
    ToolDefinition("noop"),
)


def test_test_model_calls_each_tool_then_summarises() -> None:
    """TestModel calls every tool with schema-valid arguments, then sums up the results."""
    model = TestModel()
    first = model.request_sync(ModelRequest((Message.user("go"),), TOOLS))
    assert [c.name for c in first.tool_calls] == ["weather", "noop"]
    for call, definition in zip(first.tool_calls, TOOLS, strict=True):
        jsonschema.validate(call.arguments, definition.parameters)
    results = Message.tool(
        ToolResultPart(first.tool_calls[0].id, "weather", "sunny"),
        ToolResultPart(first.tool_calls[1].id, "noop", "done"),
    )
    second = model.request_sync(ModelRequest((Message.user("go"), first.message, results), TOOLS))
    assert not second.tool_calls
    assert "weather: sunny" in second.text
    assert "noop: done" in second.text


def test_test_model_respects_tool_choice_and_selection() -> None:
    """tool_choice none / a name and call_tools narrow which tools are called."""
    msgs = (Message.user("go"),)
    assert not TestModel().request_sync(ModelRequest(msgs, TOOLS, "none")).tool_calls
    named = TestModel().request_sync(ModelRequest(msgs, TOOLS, "noop"))
    assert [c.name for c in named.tool_calls] == ["noop"]
    chosen = TestModel(call_tools=["weather"]).request_sync(ModelRequest(msgs, TOOLS))
    assert [c.name for c in chosen.tool_calls] == ["weather"]


def test_test_model_structured_output() -> None:
    """With an output spec, TestModel answers JSON that fits the schema (or the given value)."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"],
    }
    request = ModelRequest((Message.user("go"),), output=OutputSpec("person", schema))
    answer = json.loads(TestModel().request_sync(request).text)
    jsonschema.validate(answer, schema)
    given_value = {"name": "Ada", "age": 36}
    assert json.loads(TestModel(output=given_value).request_sync(request).text) == given_value


def test_test_model_calls_a_tool_taking_a_decimal() -> None:
    """sample_value fills a Decimal parameter (format "decimal"), and TestModel calls the tool."""
    got: list[decimal.Decimal] = []

    @tool
    def pay(amount: decimal.Decimal) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        got.append(amount)
        return "paid"

    assert sample_value(pay.parameters) == {"amount": "0.5"}
    Agent(TestModel(), tools=[pay]).run("pay")
    assert got == [decimal.Decimal("0.5")]


@dataclasses.dataclass
class _Priced:
    name: str
    price: decimal.Decimal


@pytest.mark.parametrize(
    ("output_type", "expected"),
    [
        (decimal.Decimal, decimal.Decimal("0.5")),
        (_Priced, _Priced("aaaaa", decimal.Decimal("0.5"))),
    ],
    ids=["decimal", "dataclass"],
)
def test_test_model_answers_an_output_type_holding_a_decimal(
    output_type: Any, expected: Any
) -> None:
    """TestModel answers a Decimal output type, and a dataclass with a Decimal field."""
    assert Agent(TestModel(), output_type=output_type).run("go").output == expected


def test_sample_value_handles_refs_unions_and_recursion() -> None:
    """Recursive $defs, anyOf with null and allOf produce a valid finite value."""
    schema = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.5},
                    "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                },
                "required": ["value", "next"],
            }
        },
        "type": "object",
        "properties": {
            "root": {"$ref": "#/$defs/Node"},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 2,
                "uniqueItems": True,
            },
            "when": {"type": "string", "format": "date-time"},
            "both": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}
                ]
            },
            "code": {"type": "string", "pattern": "^[0-9]+$"},
        },
        "required": ["root", "tags", "when", "both", "code"],
    }
    jsonschema.validate(sample_value(schema), schema)


@pytest.mark.parametrize(
    ("pattern", "lengths"),
    [
        (r"^\d{5}$", {}),
        (r"^[A-Z]{2}$", {}),
        (r"^[a-z]+@[a-z]+\.com$", {}),
        (r"^(red|green)$", {}),
        (r"^[A-Z]{3}-\d{4}$", {}),
        (r"^\+?[1-9]\d{1,14}$", {}),
        (r"^[^\s,]+$", {"minLength": 6}),
        (r"^(ab)\1?x*$", {"minLength": 5, "maxLength": 6}),
        (r"\w+\s\W", {}),
        (r"^(?:[a-f0-9]{2}:){2}[a-f0-9]{2}$", {}),
    ],
)
def test_sample_value_matches_patterns(pattern: str, lengths: dict[str, int]) -> None:
    """A string with a pattern gets a value the pattern matches (and of the lengths asked)."""
    schema = {"type": "string", "pattern": pattern, **lengths}
    jsonschema.validate(sample_value(schema), schema)


def test_test_model_calls_an_explicit_schema_tool_with_its_pattern_matched() -> None:
    """An explicit-schema tool whose parameter has a pattern gets a matching argument."""
    from toolfold import Tool

    schema = {
        "type": "object",
        "properties": {"zip_code": {"type": "string", "pattern": r"^\d{5}$"}},
        "required": ["zip_code"],
    }
    zip_tool = Tool("lookup_zip", "Look up a ZIP code.", schema, lambda args: "Beverly Hills")
    response = Agent(TestModel(), tools=[zip_tool]).run("x")
    assert response.steps[0].tool_calls[0].arguments == {"zip_code": "00000"}
    assert not response.steps[0].tool_results[0].is_error


def test_a_pattern_no_sample_is_found_for_names_the_tool_and_parameter() -> None:
    """A pattern the sampler cannot satisfy is a UsageError naming the tool, the parameter
    and the pattern, not a wrong argument."""
    from toolfold import Tool, UsageError

    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[a-z]{2}$", "minLength": 3}},
        "required": ["code"],
    }
    bad = Tool("check", "Check.", schema, lambda args: "ok")
    with pytest.raises(UsageError) as caught:
        Agent(TestModel(), tools=[bad]).run("x")
    message = str(caught.value)
    assert "tool 'check'" in message
    assert "@ $.code" in message
    assert "'^[a-z]{2}$'" in message


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string", "format": "email", "maxLength": 10}, "a@b.co"),
        ({"type": "string", "format": "email", "maxLength": 3}, "a@b"),
        ({"type": "string", "format": "ipv4", "minLength": 12}, "198.51.100.1"),
        ({"type": "string", "format": "hostname", "maxLength": 2}, "a"),
    ],
)
def test_a_format_sample_fits_the_length_bounds(schema: dict[str, Any], expected: str) -> None:
    """A format's sample is one that fits minLength/maxLength, not the longest one."""
    assert sample_value(schema) == expected


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        ({"type": "string", "minLength": 3, "maxLength": 2}, "(minLength 3, maxLength 2)"),
        ({"type": "array", "minItems": 2, "maxItems": 1}, "(minItems 2, maxItems 1)"),
        ({"type": "object", "minProperties": 2, "maxProperties": 1}, "(minProperties 2"),
        ({"type": "string", "format": "date-time", "maxLength": 19}, "'format' keyword"),
        (
            {
                "oneOf": [
                    {"type": "object", "properties": {"a": {"type": "integer"}}},
                    {"type": "object", "properties": {"b": {"type": "string"}}},
                ]
            },
            "'oneOf' keyword",
        ),
        ({"type": "object", "dependentRequired": {"a": ["b"]}, "required": ["a"]}, "dependent"),
    ],
)
def test_a_schema_no_sample_fits_is_a_usage_error_naming_the_keyword(
    schema: dict[str, Any], named: str
) -> None:
    """Impossible bounds, or a sample the schema still refuses, raise naming the keyword."""
    with pytest.raises(UsageError, match="no sample value could be made") as raised:
        sample_value(schema)
    assert named in str(raised.value)


def test_an_overlapping_one_of_takes_a_branch_whose_value_no_other_accepts() -> None:
    """A oneOf whose first branch's value two branches accept gives a later branch's value."""
    schema = {"oneOf": [{"type": "integer"}, {"type": "integer", "minimum": 1}, {"type": "string"}]}
    assert sample_value(schema) == "aaaaa"


def test_a_default_its_schema_refuses_is_not_used() -> None:
    """A parameter whose default fails its own schema gets a generated value instead."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer", "default": "notint"}},
        "required": ["a"],
    }
    assert sample_value(schema) == {"a": 1}


def test_test_model_names_the_tool_parameter_and_keyword_no_argument_fits() -> None:
    """A parameter whose format no sample within maxLength has is a UsageError, not a bad call."""
    from toolfold import Tool

    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email", "maxLength": 10},
            "when": {"type": "string", "format": "date-time", "maxLength": 19},
        },
        "required": ["email", "when"],
    }
    signup = Tool("signup", "Sign up.", schema, function=lambda args: "ok")
    with pytest.raises(UsageError) as raised:
        Agent(TestModel(), tools=[signup]).run("x")
    message = str(raised.value)
    assert "tool 'signup'" in message
    assert "@ $.when" in message
    assert "'format' keyword" in message


def test_test_model_calls_a_tool_with_a_short_email_valid_under_its_max_length() -> None:
    """TestModel's email argument under maxLength 10 passes the tool's own check."""
    from toolfold import Tool

    schema = {
        "type": "object",
        "properties": {"email": {"type": "string", "format": "email", "maxLength": 10}},
        "required": ["email"],
    }
    signup = Tool("signup", "Sign up.", schema, function=lambda args: "ok " + args["email"])
    response = Agent(TestModel(), tools=[signup]).run("x")
    assert response.steps[0].tool_results[0].content == "ok a@b.co"


_checked_leaf = st.sampled_from(
    [
        {"type": "string", "format": "email", "maxLength": 4},
        {"type": "string", "format": "date-time", "maxLength": 19},
        {"type": "string", "format": "uuid", "pattern": "^f"},
        {"type": "string", "minLength": 3, "maxLength": 2},
        {"type": "array", "minItems": 2, "maxItems": 1},
        {"type": "integer", "minimum": 1},
        {"type": "number"},
        {"type": "object", "propertyNames": {"pattern": "^z"}, "required": ["a"]},
        {"type": "string", "format": "ipv4", "minLength": 12},
    ]
)


@settings(max_examples=80, deadline=None)
@given(
    st.recursive(
        _checked_leaf,
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3).map(lambda alts: {"oneOf": alts}),
            st.lists(inner, min_size=1, max_size=3).map(lambda alts: {"anyOf": alts}),
            st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2).map(
                lambda props: {"type": "object", "properties": props, "required": sorted(props)}
            ),
        ),
        max_leaves=6,
    )
)
def test_a_sample_passes_the_argument_check_or_is_refused(schema: dict[str, Any]) -> None:
    """Whatever the schema, sample_value gives a value the argument check accepts, or a UsageError."""
    from toolfold.toolkit._arguments import compile_validator

    try:
        value = sample_value(schema)
    except UsageError as exc:
        refused: str | None = str(exc)
    else:
        refused = None
        assert compile_validator(schema).is_valid(value), value
    assert refused is None or "no sample value could be made" in refused


_leaf = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "minLength": 3, "maxLength": 4},
        {"type": "integer", "minimum": -5, "maximum": -2},
        {"type": "number", "exclusiveMaximum": 0},
        {"type": "boolean"},
        {"type": "null"},
        {"enum": ["x", "y"]},
        {"const": 3},
        {"type": ["string", "null"]},
    ]
)
_schemas = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.builds(lambda s: {"type": "array", "items": s, "minItems": 1}, inner),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3).map(
            lambda props: {"type": "object", "properties": props, "required": sorted(props)}
        ),
        st.lists(inner, min_size=1, max_size=3).map(lambda alts: {"anyOf": alts}),
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(_schemas)
def test_sample_value_fits_generated_schemas(schema: dict[str, Any]) -> None:
    """Whatever the schema (of the keywords supported), the sample validates against it."""
    jsonschema.validate(sample_value(schema), schema)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Item:
    """An item.

    Attributes:
        name: Its name.
        tags: Labels.
        child: A nested item.
    """

    name: Annotated[str, Field(min_length=3, max_length=8)]
    tags: list[str]
    child: Item | None = None


@tool
def rich(
    item: Item,
    color: Color,
    when: dt.datetime,
    ident: uuid.UUID,
    mode: Literal["fast", "slow"],
    count: Annotated[int, Field(ge=10, le=20, multiple_of=5)],
    ratio: Annotated[float, Field(gt=0, lt=1)] = 0.5,
    extra: dict[str, int] | None = None,
) -> str:
    """A tool with every kind of parameter.

    Args:
        item: The item.
        color: A color.
        when: A time.
        ident: An id.
        mode: The mode.
        count: How many.
        ratio: A ratio.
        extra: Extra numbers.
    """
    return "ok"


def test_generated_arguments_pass_the_toolkits_checks() -> None:
    """TestModel's arguments for a rich decorated tool pass validate_arguments."""
    definition = ToolDefinition(rich.name, rich.description, rich.parameters)
    request = ModelRequest((Message.user("go"),), (definition,))
    (made,) = TestModel().request_sync(request).tool_calls
    checked = rich.validate_arguments(made.arguments_text)
    assert isinstance(checked["item"], Item)
    assert checked["color"] is Color.RED
    assert 10 <= checked["count"] <= 20


# --- override_models ---------------------------------------------------------------


def test_override_models_resolves_provider_strings_to_the_test_model() -> None:
    """Inside the block a provider string gives the test model, options ignored; after, not."""
    import toolfold
    from toolfold.testing import override_models

    test_model = TestModel(text="Hi!")
    with override_models(test_model) as resolved:
        assert toolfold.model("openai:gpt-4o-mini", api_key="sk-unused") is test_model
        assert toolfold.generate_text("groq:llama-3.3-70b-versatile", "hello").text == "Hi!"
    assert resolved == ["openai:gpt-4o-mini", "groq:llama-3.3-70b-versatile"]
    assert toolfold.model("openai:gpt-4o-mini", api_key="sk-real") is not test_model


def test_override_models_keeps_bad_strings_and_model_objects() -> None:
    """A typo still raises ModelConfigError, and a model object passes through untouched."""
    import toolfold
    from toolfold.testing import override_models

    scripted = ScriptedModel(["x"])
    with override_models(TestModel()) as resolved:
        with pytest.raises(toolfold.ModelConfigError, match="unknown provider 'opnai'"):
            toolfold.model("opnai:gpt-4o-mini")
        assert toolfold.model(scripted) is scripted
    assert resolved == []


def test_override_models_factory_nesting_and_scope() -> None:
    """A factory gets the string; inner blocks win; other threads see no override; tasks do."""
    import asyncio
    import threading

    import toolfold
    from toolfold.testing import override_models

    outer, inner = TestModel(name="test:outer"), TestModel(name="test:inner")
    seen: list[str] = []
    with override_models(lambda name: outer if name.startswith("openai") else inner):
        assert toolfold.model("openai:a") is outer
        assert toolfold.model("mistral:b") is inner
        with override_models(inner):
            assert toolfold.model("openai:a") is inner
        assert toolfold.model("openai:a") is outer

        def other_thread() -> None:
            seen.append(type(toolfold.model("openai:a", api_key="sk-x")).__name__)

        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()

        async def in_a_task() -> str:
            return toolfold.model("openai:a").name

        assert asyncio.run(in_a_task()) == "test:outer"
    assert seen == ["OpenAIChatModel"]


def test_a_reply_call_made_without_arguments_runs_with_its_text_decoded() -> None:
    """A FunctionModel reply's ToolCallPart(id, name, text) runs the tool with the text's object."""
    from toolfold import ModelResponse, ToolCallPart, generate_text, tool
    from toolfold.runtime import Message
    from toolfold.testing import FunctionModel

    @tool
    def add(a: int, b: int) -> int:
        """Adds.

        Args:
            a: One.
            b: Two.
        """
        return a + b

    def reply(request: Any) -> Any:
        if any(m.role == "tool" for m in request.messages):
            return "done"
        part = ToolCallPart("c1", "add", '{"a": 2, "b": 3}')
        return ModelResponse(Message("assistant", (part,)))

    model = FunctionModel(reply)
    generate_text(model, "go", tools=[add])
    results = [r.content for m in model.requests[1].messages for r in m.tool_results]
    assert results == ["5"]


@pytest.mark.parametrize(
    ("pattern", "min_length", "expected"),
    [
        # a repeat of nothing: no rounds to run (10 million: re's own check of the sample
        # runs the empty group's repeats, 0.7 s here; 100 million took 4-7 s of it)
        ("(){10000000}", 0, ""),
        ("^(|a){10000000}$", 0, ""),
        ("^(x?){10000000}$", 0, ""),
        ("^a{100000000}$", 0, None),  # past the sampler's length cap
        ("^a$", 50_000, None),  # cannot grow: refused at once, no round per character
        ("^a$", 1_000_000, None),
        ("(" * 400 + "a" + ")" * 400, 0, None),  # deeper than the builder recurses
        ("^a+$", 3000, "a" * 3000),  # long minLength reached in a few rounds
    ],
)
def test_pattern_sample_is_bounded_on_hostile_patterns(
    pattern: str, min_length: int, expected: str | None
) -> None:
    """Repeats of nothing, huge counts, lengths no repeat reaches and deep nesting give an
    answer (or None) without a round per repeat, a huge string or a RecursionError."""
    from toolfold.runtime._pattern import pattern_sample

    found = pattern_sample(pattern, min_length)
    if expected is None or len(pattern) > 100:
        assert found is None or (len(found) >= min_length and re.search(pattern, found))
        if expected is None and len(pattern) <= 100:
            assert found is None
    else:
        assert found == expected


def test_a_format_sample_the_pattern_refuses_gives_way_to_the_pattern() -> None:
    """format and pattern together: the sample matches the pattern (the schema needs both)."""
    schema = {"type": "string", "format": "email", "pattern": r"@corp\.example$"}
    value = sample_value(schema)
    assert re.search(r"@corp\.example$", value)
    plain = {"type": "string", "format": "email", "pattern": r"@"}
    assert sample_value(plain) == sample_value({"type": "string", "format": "email"})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "enum": ["abcd", "ab"], "maxLength": 3},  # the enum value that fits
        {"type": "integer", "enum": [1, 20], "minimum": 10},
        {"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "integer"}}},
        {
            "type": "object",
            "required": ["a", "b"],
            "properties": {"a": {"type": "integer"}},
            "additionalProperties": {"type": "string"},
        },
        {"type": "string", "format": "ipv4"},
        {"type": "string", "format": "ipv6"},
        {"type": "string", "format": "hostname"},
        {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}},
        {"type": "array", "items": {"type": "integer"}, "contains": {"const": 7}, "minItems": 2},
    ],
)
def test_sample_values_meet_enums_lengths_required_names_formats_and_contains(
    schema: dict[str, Any],
) -> None:
    """A value the schema takes, format included, where the first enum value, a required
    name without a property schema, an IP format or ``contains`` used to give one it refused."""
    value = sample_value(schema)
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    assert checker.is_valid(value), value


ZOD_STYLE_REF = {
    "type": "object",
    "properties": {
        "origin": {"type": "string", "minLength": 3},
        "destination": {"anyOf": [{"$ref": "#/properties/origin"}, {"type": "null"}]},
    },
    "required": ["origin", "destination"],
}
LINKED_LIST = {
    "type": "object",
    "properties": {
        "value": {"type": "integer"},
        "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]},
    },
    "required": ["value", "next"],
}


@pytest.mark.parametrize(
    "schema",
    [
        ZOD_STYLE_REF,
        LINKED_LIST,
        {"enum": ["aa", 3], "$ref": "#/$defs/n", "$defs": {"n": {"type": "integer"}}},
        {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "minimum": 5},
                "b": {"anyOf": [{"$ref": "#/properties/a"}, {"type": "string"}]},
            },
            "required": ["a", "b"],
        },
    ],
    ids=["zod-properties-ref", "recursive-hash-ref", "enum-with-ref", "ref-to-a-bounded-property"],
)
def test_root_relative_refs_inside_unions_and_enums_are_resolved_in_the_root(
    schema: dict[str, Any],
) -> None:
    """A `#`/`#/properties/x` $ref inside anyOf (or beside an enum) resolves in the root schema."""
    value = sample_value(schema)
    assert compile_validator(schema).is_valid(value)


def test_test_model_calls_a_tool_whose_union_refers_to_another_property() -> None:
    """TestModel calls a zod-style tool (anyOf with `#/properties/...`) with arguments its check accepts."""
    seen: list[Any] = []
    book = Tool("book", "Book.", ZOD_STYLE_REF, lambda args: seen.append(args) or "booked")
    Agent(TestModel(), tools=[book]).run("go")
    assert len(seen) == 1
    assert compile_validator(ZOD_STYLE_REF).is_valid(seen[0])


def test_a_ref_the_root_does_not_hold_is_a_usage_error_naming_it() -> None:
    """A $ref to nothing in a union is a UsageError naming the reference, not a jsonschema crash."""
    schema = {"anyOf": [{"$ref": "#/properties/missing"}, {"type": "integer"}]}
    with pytest.raises(UsageError, match=r"no sample value could be made.*missing"):
        sample_value(schema)


def test_a_schema_recursing_without_end_is_a_usage_error() -> None:
    """A required property of the schema's own type (no finite value) is a UsageError, not a RecursionError."""
    schema = {"type": "object", "properties": {"n": {"$ref": "#"}}, "required": ["n"]}
    with pytest.raises(UsageError, match="recurse"):
        sample_value(schema)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {
                "anyOf": [
                    {"type": "string", "format": "date-time", "maxLength": 10},
                    {"type": "integer"},
                ]
            },
            1,
        ),
        (
            {
                "type": "object",
                "properties": {"d": {"type": "string", "format": "date", "default": "today"}},
                "required": ["d"],
            },
            {"d": "2024-01-01"},
        ),
        (
            {
                "type": "object",
                "properties": {"x": {"type": "number", "multipleOf": 0.1, "default": 0.3}},
                "required": ["x"],
            },
            {"x": 0.3},
        ),
    ],
    ids=["union-branch-format", "default-format", "default-decimal-multiple"],
)
def test_union_branches_and_defaults_are_checked_as_the_argument_check_reads_them(
    schema: dict[str, Any], expected: Any
) -> None:
    """Branches and defaults are judged with formats and the decimal multipleOf, as the final check."""
    assert sample_value(schema) == expected


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string", "format": "email", "minLength": 20}, "useraaaa@example.com"),
        ({"type": "string", "format": "hostname", "minLength": 15}, "aaa.example.com"),
        ({"type": "string", "format": "hostname", "minLength": 12}, "a.example.com"),
        ({"type": "string", "format": "uri", "minLength": 25}, "https://aaaaa.example.com"),
        (
            {"type": "string", "format": "date-time", "minLength": 24},
            "2024-01-01T00:00:00.000Z",
        ),
        ({"type": "string", "format": "time", "minLength": 9}, "00:00:00.0"),
    ],
)
def test_a_format_sample_is_lengthened_to_a_min_length_within_its_format(
    schema: dict[str, Any], expected: str
) -> None:
    """A minLength above every format sample pads a realistic one (local part, subdomain, fraction)."""
    value = sample_value(schema)
    assert value == expected
    assert compile_validator(schema).is_valid(value)


def test_a_long_hostname_sample_keeps_its_labels_short() -> None:
    """A hostname padded far (minLength 200) keeps every label at 63 characters or fewer."""
    value = sample_value({"type": "string", "format": "hostname", "minLength": 200})
    assert len(value) == 200
    assert value.endswith(".example.com")
    assert all(1 <= len(label) <= 63 for label in value.split("."))


def test_a_checked_format_no_length_reaches_is_refused_naming_the_format() -> None:
    """An ipv4 with minLength 16 (no address is that long) is a UsageError naming the format keyword."""
    with pytest.raises(UsageError, match=r"fails the schema's 'format' keyword .*is not a 'ipv4'"):
        sample_value({"type": "string", "format": "ipv4", "minLength": 16})


def test_a_false_schema_has_no_sample() -> None:
    """`sample_value(False)` (and a required property whose schema is false) is a UsageError."""
    with pytest.raises(UsageError, match="`false`, it accepts no value"):
        sample_value(False)
    schema = {"type": "object", "properties": {"x": False}, "required": ["x"]}
    with pytest.raises(UsageError, match=r"`false`.* @ \$\.x"):
        sample_value(schema)


def test_a_test_model_output_that_cannot_be_made_points_to_the_output_argument() -> None:
    """An output schema no sample fits says to pass TestModel(output=...), not a parameter default."""
    schema = {"type": "string", "format": "date-time", "maxLength": 19}
    request = ModelRequest((Message.user("go"),), output=OutputSpec("when", schema))
    with pytest.raises(UsageError) as raised:
        TestModel().request_sync(request)
    message = str(raised.value)
    assert "TestModel cannot make the run's output" in message
    assert "TestModel(output=...)" in message
    assert "parameter" not in message


def test_a_default_inside_a_part_with_its_own_id_is_used_when_the_whole_schema_takes_it() -> None:
    """A default in a part with an `$id` of its own, whose refs resolve in that scope, is judged by
    the whole schema's check rather than refused as a $ref the part alone cannot follow."""
    part = {
        "$id": "https://example.com/p.json",
        "$defs": {"z": {"type": "integer", "minimum": 3}},
        "anyOf": [{"$ref": "#/$defs/z"}, {"type": "string"}],
        "default": 5,
    }
    schema = {"type": "object", "properties": {"p": part}, "required": ["p"]}
    assert sample_value(schema) == {"p": 5}
