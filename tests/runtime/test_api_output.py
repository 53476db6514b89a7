"""output_type: the final answer is validated, structured, and retried within the budget."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import json
from typing import Annotated, Any, Literal, TypedDict

import annotated_types as at
import attrs
import pytest
from typing_extensions import NotRequired
from typing_extensions import TypedDict as TypedDictX

from toolfold import (
    Agent,
    Message,
    ModelResponse,
    OutputValidationError,
    RunError,
    RunState,
    Sequence,
    ToolDefinitionError,
    UsageError,
    generate_text,
    register_schema_rule,
    tool,
)
from toolfold.testing import FunctionModel, ScriptedModel, TestModel
from toolfold.toolkit import _schema


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


@dataclasses.dataclass
class Weather:
    """A forecast.

    Attributes:
        city: The city.
        celsius: The temperature.
        mood: How it feels.
    """

    city: str
    celsius: float
    mood: Mood


@attrs.frozen
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


def is_even(value: int) -> bool:
    """Whether a number is even."""
    return value % 2 == 0


@dataclasses.dataclass
class Pairs:
    count: Annotated[int, at.Predicate(is_even)]


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Weather, {"city": "Oslo", "celsius": 3.5, "mood": "sad"}, Weather("Oslo", 3.5, Mood.SAD)),
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Movie, {"title": "Heat", "year": 1995}, {"title": "Heat", "year": 1995}),
        (int, {"result": 42}, 42),
        (list[str], {"result": ["a", "b"]}, ["a", "b"]),
    ],
    ids=["dataclass", "attrs", "typeddict", "int", "list"],
)
def test_answer_is_structured(output_type: Any, answer: Any, expected: Any) -> None:
    """The final JSON is validated and structured into the output type."""
    model = ScriptedModel([json.dumps(answer)])
    response = generate_text(model, "go", output_type=output_type)
    assert response.output == expected
    assert response.finish_reason == "stop"
    spec = model.requests[0].output
    assert spec is not None
    assert spec.schema["type"] == "object"


def test_fenced_json_is_accepted() -> None:
    """A JSON answer wrapped in a markdown fence is read."""
    model = ScriptedModel(['```json\n{"x": 1, "y": 2}\n```'])
    assert generate_text(model, "go", output_type=Point).output == Point(1, 2)


def test_invalid_answer_goes_back_to_the_model() -> None:
    """An answer that does not fit is explained to the model, which tries again."""
    model = ScriptedModel(['{"x": "one"}', "not json", '{"x": 1, "y": 2}'])
    response = generate_text(model, "go", output_type=Point)
    assert response.output == Point(1, 2)
    feedback = model.requests[1].messages[-1]
    assert feedback.role == "user"
    assert "$.x" in feedback.text
    assert "required" in feedback.text


def test_a_broken_predicate_goes_back_at_its_path() -> None:
    """A Predicate an answer breaks is told at the field's path, as a tool argument's is,
    not as the converter's summary; in a dataclass and in a ``dict[str, X]`` alike."""
    model = ScriptedModel(['{"count": 3}', '{"count": 4}'])
    assert generate_text(model, "go", output_type=Pairs).output == Pairs(4)
    feedback = model.requests[1].messages[-1].text
    assert "- $.count: 3 does not satisfy the predicate is_even" in feedback
    assert "While structuring" not in feedback
    evens = dict[str, Annotated[int, at.Predicate(is_even)]]
    model = ScriptedModel(['{"a": 2, "b": 5}', '{"a": 2}'])
    assert generate_text(model, "go", output_type=evens).output == {"a": 2}
    assert "- $.b: 5 does not satisfy the predicate is_even" in model.requests[1].messages[-1].text


def test_a_mapping_answer_is_structured() -> None:
    """``dict[str, X]`` is structured like any output type: its values are Xs, not JSON text."""
    model = ScriptedModel(['{"start": "2024-05-01"}'])
    response = generate_text(model, "go", output_type=dict[str, dt.date])
    assert response.output == {"start": dt.date(2024, 5, 1)}


class Money:
    """A sum, with a schema rule and no structure hook."""


class Till(TypedDict):
    """An object output type with a field of a type without hooks."""

    cash: Money


@pytest.mark.parametrize(
    "output_type", [dict[str, Money], list[Money], frozenset[Money], tuple[Money, ...], Till]
)
def test_an_output_type_the_converter_cannot_structure_is_a_definition_error(
    output_type: Any,
) -> None:
    """A type with a schema rule but no structure hook fails before the model is asked,
    naming the type, instead of every answer going back to the model."""
    register_schema_rule(Money, lambda tp, ctx: {"type": "string"})
    try:
        model = ScriptedModel(['{"a": "1.00 EUR"}'])
        with pytest.raises(ToolDefinitionError, match=r"cannot structure JSON into .*Money"):
            generate_text(model, "go", output_type=output_type)
        assert model.requests == []
    finally:
        del _schema._class_rules[Money]
        _schema._cache.clear()


def test_output_retries_exhausted_raises_with_state() -> None:
    """Past output_retries the run fails with OutputValidationError carrying the state."""
    model = ScriptedModel(["nope"] * 3)
    with pytest.raises(OutputValidationError) as info:
        generate_text(model, "go", output_type=Point, output_retries=1)
    assert info.value.state.phase == "failed"
    assert model.remaining == 1


@pytest.mark.parametrize(
    ("finish", "raw", "text", "why"),
    [
        ("content_filter", "refusal", "I can't help with that.", "the model refused"),
        ("length", "max_tokens", '{"x": 1, "y', "the token limit cut it"),
        (
            "length",
            "model_context_window_exceeded",
            '{"x": 1, "y',
            "the model's context window filled up (shorten the conversation",
        ),
        ("content_filter", "SAFETY", '{"x": 1, "y', "the provider's content filter stopped it"),
    ],
)
def test_a_refused_or_cut_answer_is_not_asked_for_again(
    finish: str, raw: str, text: str, why: str
) -> None:
    """An answer that does not fit and that the provider ended with a refusal or at the token
    limit fails the run at once, naming the finish reason and the answer, not re-asked as bad JSON."""
    response = ModelResponse(Message.assistant(text), finish_reason=finish, raw_finish_reason=raw)
    model = FunctionModel(lambda request: response)
    with pytest.raises(OutputValidationError) as info:
        generate_text(model, "go", output_type=Point, output_retries=3)
    message = str(info.value)
    assert len(model.requests) == 1
    assert f"finish reason {finish!r} ({raw!r}), {why}" in message
    assert repr(text) in message
    assert "not asked for again" in message
    state = info.value.state
    assert state.phase == "failed"
    assert RunState.from_json(state.to_json()) == state


@pytest.mark.parametrize(
    ("finish", "raw"),
    [("content_filter", "content_filter"), ("content_filter", "PROHIBITED_CONTENT")],
)
def test_an_empty_filtered_answer_says_the_filter_stopped_it_and_the_answer_is_empty(
    finish: str, raw: str
) -> None:
    """A Chat ``content_filter`` finish, or a prompt Gemini blocked (an empty answer), is the
    provider's filter, not "the model refused", and its problem is the empty answer, not
    "'x' is a required property" (what the message said before)."""
    response = ModelResponse(Message.assistant(""), finish_reason=finish, raw_finish_reason=raw)
    with pytest.raises(OutputValidationError) as info:
        generate_text(FunctionModel(lambda request: response), "go", output_type=Point)
    message = str(info.value)
    assert "the provider's content filter stopped it" in message
    assert "refused" not in message
    assert message.endswith("the answer: ''; the problem: the answer is empty")


def test_a_workflow_step_failed_by_a_cut_answer_resumes_by_asking_its_model_again() -> None:
    """Resuming a workflow whose agent step a cut answer failed (not asked for again) asks the
    step's model again from before that answer: it re-validated the same answer and failed the
    same way, so such a state could never go on."""
    answers: list[Any] = [
        ModelResponse(Message.assistant("the answer is"), finish_reason="length"),
        "42",
    ]

    def answer(request: Any) -> Any:
        return answers.pop(0)

    flow = Sequence(Agent(FunctionModel(answer), name="c", output_type=int))
    with pytest.raises(RunError, match="finish reason 'length'") as failed:
        flow.run("go")
    state = RunState.from_json(failed.value.state.to_json())
    assert flow.resume(state).output == 42
    assert answers == []


def test_a_refusal_that_fits_the_output_type_is_accepted() -> None:
    """A content_filter answer that fits the output type is the output (finish stop), as before."""
    response = ModelResponse(Message.assistant('{"x": 1, "y": 2}'), finish_reason="content_filter")
    result = generate_text(FunctionModel(lambda request: response), "go", output_type=Point)
    assert (result.output, result.finish_reason) == (Point(1, 2), "stop")


@pytest.mark.parametrize("reason", ["length", "content_filter", "other"])
@pytest.mark.parametrize("output_type", [None, str])
def test_a_str_answer_finishes_its_run_as_plain_text_does(reason: str, output_type: Any) -> None:
    """With ``output_type=str`` (every answer fits), a cut, refused or ``other`` answer finishes
    the run with that reason, as without an output type (before: ``stop``), in every driver."""
    response = ModelResponse(Message.assistant("Once upon a"), finish_reason=reason)
    kw = {} if output_type is None else {"output_type": output_type}
    agent = Agent(FunctionModel(lambda request: response), **kw)
    ran = agent.run("go")
    assert (ran.output, ran.finish_reason) == ("Once upon a", reason)
    assert asyncio.run(agent.arun("go")).finish_reason == reason
    stream = agent.stream("go")
    for _ in stream:
        pass
    assert stream.response.finish_reason == reason


@pytest.mark.parametrize("reason", ["length", "other"])
def test_an_answer_that_fits_another_type_still_finishes_stop(reason: str) -> None:
    """An answer of a type that is not plain str finishes ``stop`` whatever the provider said,
    as documented (a ``Literal`` or constrained str output too: not every answer fits it)."""
    response = ModelResponse(Message.assistant('"a"'), finish_reason=reason)
    for output_type in (Literal["a", "b"], Annotated[str, at.MinLen(1)]):
        result = Agent(FunctionModel(lambda request: response), output_type=output_type).run("go")
        assert (result.output, result.finish_reason) == ("a", "stop")


def test_test_model_with_tools_and_output_type() -> None:
    """TestModel calls the tools, then produces an answer that fits the output type."""

    @tool
    def forecast(city: str) -> str:
        """Forecast for a city.

        Args:
            city: The city.
        """
        return f"cold in {city}"

    response = Agent(TestModel(), tools=[forecast], output_type=Weather).run("go")
    assert isinstance(response.output, Weather)
    assert response.steps[0].tool_results[0].content.startswith("cold in")


def _deep(levels: int) -> str:
    """``{"x": [[[...]]]}`` with ``levels`` nested lists (2 KB at 1,000)."""
    return '{"x": ' + "[" * levels + "]" * levels + "}"


@pytest.mark.parametrize("levels", [1000, 100_000, 70])
@pytest.mark.parametrize("way", ["run", "stream", "arun"])
def test_an_answer_nested_too_deep_goes_back_to_the_model(levels: int, way: str) -> None:
    """A structured answer nested deeper than tool arguments may be (64 levels) is an output
    rejection the model reads and answers again, in run, stream and arun alike: it was a
    bare RecursionError that ended the run and lost its state."""
    model = ScriptedModel([_deep(levels), '{"x": [[1]]}'])
    agent = Agent(model, output_type=dict)
    if way == "run":
        output = agent.run("go").output
    elif way == "stream":
        output = list(agent.stream("go"))[-1].response.output
    else:
        output = asyncio.run(agent.arun("go")).output
    assert output == {"x": [[1]]}
    assert "$: the answer is nested more than 64 levels deep" in model.requests[1].messages[-1].text


def test_a_too_deep_answer_past_the_retries_fails_with_the_state() -> None:
    """Past output_retries the too-deep answer is an OutputValidationError holding the state."""
    model = ScriptedModel([_deep(1000)] * 2)
    with pytest.raises(OutputValidationError, match="nested more than 64 levels") as info:
        Agent(model, output_type=dict, output_retries=1).run("go")
    assert info.value.state.phase == "failed"


def test_an_answer_within_the_depth_limit_and_a_deep_str_answer_are_taken() -> None:
    """64 levels is an answer like any other; a str output takes deep brackets as its text."""
    model = ScriptedModel([_deep(63)])
    assert Agent(model, output_type=dict).run("go").output == json.loads(_deep(63))
    text = "[" * 2000 + "]" * 2000
    assert Agent(ScriptedModel([text]), output_type=str).run("go").output == text


def test_a_deep_output_a_saved_state_holds_is_still_restored() -> None:
    """The depth limit is for new answers: an output of 70 levels a state saved before the
    limit holds is restored as it was."""
    from toolfold.runtime.drive._output import output_schema

    plain = json.loads(_deep(70))
    assert output_schema(dict).restore(plain) == plain


def _counted() -> tuple[type, list[int]]:
    built: list[int] = []

    @attrs.define
    class Ticket:
        id: int

        def __attrs_post_init__(self) -> None:
            built.append(self.id)

    return Ticket, built


def test_an_accepted_output_is_built_once() -> None:
    """run, arun and stream build the output type once for the answer they accept."""
    ticket, built = _counted()
    agent = Agent(ScriptedModel(['{"id": 7}'] * 3), output_type=ticket)
    outputs = [agent.run("q").output, asyncio.run(agent.arun("q")).output]
    stream = agent.stream("q")
    for _ in stream:
        pass
    outputs.append(stream.response.output)
    assert built == [7, 7, 7]
    assert [o.id for o in outputs] == [7, 7, 7]


def test_a_validator_that_refuses_a_second_build_does_not_fail_the_run() -> None:
    """A validator that refuses a value it accepted once: the run that accepted it keeps
    its output (run, arun and stream)."""
    seen: set[int] = set()

    def unique(_: Any, __: Any, value: int) -> None:
        if value in seen:
            raise ValueError(f"id {value} already used")
        seen.add(value)

    @attrs.define
    class Unique:
        id: int = attrs.field(validator=unique)

    agent = Agent(ScriptedModel(['{"id": 7}', '{"id": 8}', '{"id": 9}']), output_type=Unique)
    stream = agent.stream("q")
    for _ in stream:
        pass
    outputs = [agent.run("q").output, asyncio.run(agent.arun("q")).output]
    assert [o.id for o in [*outputs, stream.response.output]] == [8, 9, 7]


def _stored(validator: Any = None) -> type:
    @attrs.define
    class Stored:
        id: int = attrs.field(validator=validator)

    return Stored


def test_a_stored_output_the_type_refuses_now_raises_with_the_state() -> None:
    """Resuming a finished state whose output the type's new validator refuses: an
    OutputValidationError naming the type and the problem, with the state."""
    text = Agent(ScriptedModel(['{"id": 3}']), output_type=_stored()).run("q").state.to_json()

    def at_least_5(_: Any, __: Any, value: int) -> None:
        if value < 5:
            raise ValueError("id must be >= 5")

    state = RunState.from_json(text)
    # the type with a validator added since the state was saved
    with pytest.raises(OutputValidationError) as caught:
        Agent(ScriptedModel([]), output_type=_stored(at_least_5)).resume(state)
    message = str(caught.value)
    assert "output type _stored.<locals>.Stored now" in message
    assert "id must be >= 5" in message
    assert caught.value.state == state
    assert caught.value.state.output == {"id": 3}


@pytest.mark.parametrize("value", [5, "str", Point(1, 2), [Point], ...])
def test_an_output_type_that_is_a_value_is_a_usage_error(value: Any) -> None:
    """A value given as output_type (no type) is a UsageError saying it must be a type."""
    with pytest.raises(UsageError, match=r"^output_type must be a type .*, got "):
        Agent(ScriptedModel([]), output_type=value)


def test_an_output_type_given_by_name_says_so_without_a_steps_history() -> None:
    """output_type=ForwardRef('int') is refused as a name, with no words about workflow
    steps (whose input type once ignored a name)."""
    import typing

    with pytest.raises(UsageError) as caught:
        Agent(ScriptedModel([]), output_type=typing.ForwardRef("int"))
    assert str(caught.value) == (
        "output_type must be a type, got its name 'int': give the type itself, not its name"
    )


@dataclasses.dataclass
class HasResult:
    result: int


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (HasResult | None, '{"result": 5}', HasResult(5)),
        (HasResult | None, '{"result": {"result": 5}}', HasResult(5)),
        (dict[str, int] | None, '{"result": 3}', {"result": 3}),
        (dict[str, int] | None, '{"result": {"result": 3}}', {"result": 3}),
        (int | None, '{"result": 4}', 4),
    ],
)
def test_a_bare_answer_whose_one_key_is_result_is_taken(
    output_type: Any, answer: str, expected: Any
) -> None:
    """An answer {"result": ...} that fails as the wrapper is read as the bare value."""
    response = Agent(ScriptedModel([answer]), output_type=output_type, output_retries=0).run("q")
    assert response.output == expected


def test_a_problem_shows_the_number_as_the_model_wrote_it() -> None:
    """A wrapped answer's problem quotes the model's own text (1e999, not Infinity)."""
    with pytest.raises(OutputValidationError) as caught:
        Agent(ScriptedModel(["1e999"]), output_type=float, output_retries=0).run("q")
    assert "1e999" in str(caught.value)
    assert "Infinity" not in str(caught.value)


@dataclasses.dataclass
class EvenPositive:
    n: Annotated[int, at.Predicate(is_even)]
    m: Annotated[int, at.Gt(0)]


def test_a_broken_predicate_goes_back_with_the_schema_problems() -> None:
    """An answer breaking the schema in one field and a Predicate in another gets both
    problems back at once: one more request, not two."""
    model = ScriptedModel(['{"n": 3, "m": 0}', '{"n": 4, "m": 1}'])
    assert generate_text(model, "go", output_type=EvenPositive).output == EvenPositive(4, 1)
    feedback = model.requests[1].messages[-1].text
    assert "- $.m: 0 is less than or equal to the minimum of 0\n" in feedback
    assert "- $.n: 3 does not satisfy the predicate is_even\n" in feedback


def is_upper(value: str) -> bool:
    return value.isupper()


class EvenPositiveDict(TypedDictX):
    n: Annotated[int, at.Predicate(is_even)]
    m: Annotated[int, at.Gt(0)]
    note: NotRequired[Annotated[str, at.Predicate(is_upper)]]


def test_a_typeddict_with_a_not_required_key_gets_its_predicate_problems_too() -> None:
    """A TypedDict output type with a NotRequired key lists a broken Predicate with the
    schema problems, the NotRequired key's own too (its type is checked unqualified)."""
    model = ScriptedModel(['{"n": 3, "m": 0, "note": "low"}', '{"n": 4, "m": 1, "note": "UP"}'])
    output = generate_text(model, "go", output_type=EvenPositiveDict).output
    assert output == {"n": 4, "m": 1, "note": "UP"}
    feedback = model.requests[1].messages[-1].text
    assert "- $.m: 0 is less than or equal to the minimum of 0\n" in feedback
    assert "- $.n: 3 does not satisfy the predicate is_even\n" in feedback
    assert "- $.note: 'low' does not satisfy the predicate is_upper\n" in feedback


def test_a_wrapped_output_the_provider_cannot_take_is_named_by_its_type() -> None:
    """The SchemaCompileError of an output type sent wrapped names the user's type
    (dict[str, int] | None), not the wrapper's name 'final_result'."""
    from toolfold import SchemaCompileError
    from toolfold.adapters.anthropic._request import output_schema

    def anthropic_like(request: Any) -> ModelResponse:
        output_schema(request.output)  # what the adapter does before the request
        raise AssertionError("the map was sent")

    with pytest.raises(SchemaCompileError) as caught:
        Agent(FunctionModel(anthropic_like), output_type=dict[str, int] | None).run("q")
    first = str(caught.value).splitlines()[0]
    assert first == (
        "cannot send the output type 'dict[str, int] | None' as anthropic structured output:"
        " 1 problem"
    )
    assert caught.value.state is not None  # type: ignore[attr-defined]


def test_an_output_sent_unwrapped_the_provider_cannot_take_is_named_by_its_type() -> None:
    """The SchemaCompileError of an object output type that is no class (dict[str, Any],
    dict[str, int]: sent as is, not wrapped) names the type, not 'final_result'."""
    from toolfold import SchemaCompileError
    from toolfold.adapters.anthropic._request import output_schema

    def anthropic_like(request: Any) -> ModelResponse:
        output_schema(request.output)
        raise AssertionError("the object was sent")

    for tp, name in ((dict[str, Any], "dict[str, Any]"), (dict[str, int], "dict[str, int]")):
        with pytest.raises(SchemaCompileError) as caught:
            Agent(FunctionModel(anthropic_like), output_type=tp).run("q")
        assert str(caught.value).splitlines()[0] == (
            f"cannot send the output type '{name}' as anthropic structured output: 1 problem"
        )


def test_an_inner_agents_output_error_keeps_its_own_type_name() -> None:
    """A model function that runs another agent lets that agent's output SchemaCompileError
    through named by the inner agent's type, not relabelled with the outer run's."""
    from toolfold import SchemaCompileError
    from toolfold.adapters.anthropic._request import output_schema

    def anthropic_like(request: Any) -> ModelResponse:
        output_schema(request.output)
        raise AssertionError("the map was sent")

    def runs_an_agent(request: Any) -> ModelResponse:
        Agent(FunctionModel(anthropic_like), output_type=dict[str, int]).run("inner")
        raise AssertionError("the inner agent answered")

    with pytest.raises(SchemaCompileError) as caught:
        Agent(FunctionModel(runs_an_agent), output_type=int | None).run("q")
    assert str(caught.value).splitlines()[0] == (
        "cannot send the output type 'dict[str, int]' as anthropic structured output: 1 problem"
    )


def test_a_resumed_runs_output_the_provider_cannot_take_is_named_by_its_type() -> None:
    """A run resumed from its saved state (its output spec a copy loaded from JSON) names
    the output type in the SchemaCompileError too."""
    from toolfold import SchemaCompileError
    from toolfold.adapters.anthropic._request import output_schema

    def anthropic_like(request: Any) -> ModelResponse:
        output_schema(request.output)
        raise AssertionError("the object was sent")

    agent = Agent(FunctionModel(anthropic_like), output_type=dict[str, Any])
    with pytest.raises(SchemaCompileError) as first:
        agent.run("q")
    saved = RunState.from_json(first.value.state.to_json())  # type: ignore[attr-defined]
    with pytest.raises(SchemaCompileError) as caught:
        agent.resume(saved)
    assert str(caught.value).splitlines()[0] == (
        "cannot send the output type 'dict[str, Any]' as anthropic structured output: 1 problem"
    )
