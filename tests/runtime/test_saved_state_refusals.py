"""What a run may hold is what its saved state can hold: refusals named, exact round trips."""

from __future__ import annotations

import enum
import importlib
import json
import math
from typing import Any

import attrs
import pytest
from core_helpers import answer, call, responded, spec, start
from temporalio.api.common.v1 import Payload

from toolfold import Agent, InvalidEventError, RunState, SerializationError, Tool, UsageError
from toolfold.integrations.temporal import data_converter
from toolfold.runtime import (
    MaxSteps,
    Message,
    ModelResponded,
    ModelResponse,
    RunConfig,
    RunFailed,
    StopRequested,
    StreamFinish,
    TextPart,
    TokenBudget,
    ToolCallPart,
    ToolResultPart,
    ToolResultsProvided,
    ToolReturned,
    Usage,
    UsageUpdate,
    approval_key,
    converter,
    events_from_json,
    events_to_json,
    fork,
    initial_state,
    reduce,
    replay,
)
from toolfold.runtime.core import _serialize
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._request import FINISH_REASONS
from toolfold.testing import FunctionModel, ScriptedModel

_ALLOWED = "'stop', 'length', 'tool_calls', 'content_filter', 'error', 'other', 'max_iterations'"

# Made around the public constructors' checks: what an event from elsewhere may carry.
_raw_usage = builder(Usage)
_raw_response = builder(ModelResponse)


# --- 1. a custom model's finish reason and counts --------------------------------


@pytest.mark.parametrize(
    ("value", "shown"),
    [(math.nan, "float nan"), (math.inf, "float inf"), ("12", "str '12'"), (True, "bool True")],
)
def test_usage_refuses_a_count_a_saved_state_cannot_hold(value: Any, shown: str) -> None:
    """Usage refuses NaN, infinities, text and bools with a UsageError naming the field."""
    with pytest.raises(
        UsageError, match=f"Usage.output_tokens: expected an int or a finite float, got {shown}"
    ):
        Usage(output_tokens=value)


_COUNTS = [
    "input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "requests",
    "cache_write_tokens",
]  # fmt: skip


@pytest.mark.parametrize("others", [1, 1.0], ids=["ints", "floats-beside"])
@pytest.mark.parametrize("sign", [1, -1], ids=["positive", "negative"])
@pytest.mark.parametrize("field", _COUNTS)
def test_usage_refuses_an_int_of_more_than_4300_digits(field: str, sign: int, others: Any) -> None:
    """Usage refuses a count of more than 4300 digits (JSON text cannot hold it) with a
    UsageError naming the field, whether its other counts are all ints or not (with six
    plain ints it was taken, and the run's state then could not be saved)."""
    counts = {**dict.fromkeys(_COUNTS, others), field: sign * 10**5000}
    with pytest.raises(UsageError) as info:
        Usage(**counts)
    assert str(info.value) == (
        f"Usage.{field}: expected an int or a finite float, "
        "got int <an int of more than 4300 digits>"
    )


@pytest.mark.parametrize("value", [10**4300 - 1, -(10**4300) + 1, 2**62, 2**62 - 1, -1])
def test_usage_takes_any_int_of_at_most_4300_digits(value: int) -> None:
    """Usage keeps an int of 4300 digits, a negative one and one past 2**62, as given."""
    usage = Usage(**dict.fromkeys(_COUNTS, value))
    assert [getattr(usage, name) for name in _COUNTS] == [value] * 6


@pytest.mark.parametrize("reason", [None, "banana"])
def test_model_response_refuses_an_unknown_finish_reason(reason: Any) -> None:
    """ModelResponse refuses a finish_reason outside FinishReason, naming the field and the values."""
    with pytest.raises(UsageError) as info:
        ModelResponse(Message.assistant("hi"), finish_reason=reason)
    assert str(info.value) == (
        f"ModelResponse.finish_reason: expected one of {_ALLOWED}, got {reason!r}"
    )


def test_stream_events_refuse_what_a_response_cannot_hold() -> None:
    """StreamFinish refuses an unknown finish reason and UsageUpdate anything but a Usage."""
    with pytest.raises(
        UsageError, match=f"StreamFinish.finish_reason: expected one of {_ALLOWED}, got 'banana'"
    ):
        StreamFinish("banana")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"UsageUpdate\.usage: expected a Usage, got dict"):
        UsageUpdate({"input_tokens": 1})  # type: ignore[arg-type]


class _Reason(str, enum.Enum):
    STOP = "stop"
    USER = "user_stop"


def test_a_str_enum_finish_reason_is_taken_by_constructor_and_reducer_alike() -> None:
    """ModelResponse(finish_reason=<StrEnum "stop">) is made, reduced and round-trips."""
    response = ModelResponse(Message.assistant("hi"), finish_reason=_Reason.STOP)  # type: ignore[arg-type]
    state = reduce(start(), ModelResponded(response))
    assert state.phase == "finished"
    assert RunState.from_json(state.to_json()) == state


def test_str_enum_texts_in_stop_and_failure_events_are_taken() -> None:
    """StopRequested(<StrEnum>) and RunFailed(<StrEnum>, ...) reduce and round-trip, as before."""
    stopped = reduce(start(), StopRequested(_Reason.USER))
    failed = reduce(start(), RunFailed(_Reason.USER, _Reason.STOP, _Reason.USER))
    assert stopped.finish_reason == "user_stop"
    assert RunState.from_json(stopped.to_json()) == stopped
    assert RunState.from_json(failed.to_json()) == failed


def test_model_response_checks_usage_before_finish_reason() -> None:
    """Both wrong: the UsageError names ModelResponse.usage (the first field), as before."""
    with pytest.raises(UsageError, match=r"ModelResponse\.usage: expected a Usage, got int"):
        ModelResponse(Message.assistant("hi"), 5, "banana")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "table",
    [
        "anthropic._provider.STOP_REASONS",
        "gemini._providers.FINISH_REASONS",
        "ollama._provider.DONE_REASONS",
        "openai_responses._providers.INCOMPLETE_REASONS",
        "openai_chat._response.FINISH_REASONS",
    ],
)
def test_codec_finish_reason_tables_hold_only_finish_reasons(table: str) -> None:
    """Codecs build responses unchecked from these tables: every value is a FinishReason."""
    module, name = table.rsplit(".", 1)
    values = set(getattr(importlib.import_module(f"toolfold.adapters.{module}"), name).values())
    assert values
    assert values <= set(FINISH_REASONS)


def test_a_custom_models_bad_finish_reason_reaches_the_caller_named() -> None:
    """A FunctionModel answering finish_reason="banana" fails the call clearly, not the load later."""
    model = FunctionModel(
        lambda request: ModelResponse(Message.assistant("hi"), finish_reason="banana")  # type: ignore[arg-type]
    )
    with pytest.raises(UsageError, match=r"ModelResponse\.finish_reason: expected one of"):
        Agent(model).run("x")


@pytest.mark.parametrize(
    ("response", "refusal"),
    [
        (
            _raw_response(Message.assistant("x"), Usage(requests=1), "banana", None, None, None),
            f"the response's finish_reason: expected one of {_ALLOWED}, got 'banana'",
        ),
        (
            _raw_response(Message.assistant("x"), _raw_usage(math.nan), "stop", None, None, None),
            "the response's usage: Usage.input_tokens: expected an int or a finite float, got float nan",
        ),
        (
            _raw_response(Message.assistant("x"), "lots", "stop", None, None, None),
            "the response's usage: expected a Usage, got str",
        ),
        (None, "expected a ModelResponse, got NoneType"),
    ],
)
def test_reduce_refuses_a_response_its_saved_state_could_not_hold(
    response: Any, refusal: str
) -> None:
    """ModelResponded with a response made around its checks (or none) is an InvalidEventError."""
    state = start()
    with pytest.raises(InvalidEventError, match=refusal) as info:
        reduce(state, ModelResponded(response))
    assert info.value.state is state


# --- 2. float counts round-trip exactly; fractions in integer fields are refused --


def test_float_counts_round_trip_exactly() -> None:
    """A custom model's float token counts load back as the same floats, not truncated."""
    usage = Usage(input_tokens=1.5, output_tokens=2.75, requests=1)  # type: ignore[arg-type]
    response = Agent(FunctionModel(lambda r: ModelResponse(Message.assistant("hi"), usage))).run(
        "x"
    )
    loaded = RunState.from_json(response.state.to_json())
    assert (loaded.usage.input_tokens, loaded.usage.output_tokens) == (1.5, 2.75)
    assert loaded == response.state


def test_a_float_token_budget_round_trips_exactly() -> None:
    """A TokenBudget of 1500.5 tokens loads back as 1500.5 (a bound is compared, never indexed)."""
    state = initial_state("x", RunConfig(stop_when=(TokenBudget(1500.5),)), run_id="r")  # type: ignore[arg-type]
    loaded = RunState.from_json(state.to_json())
    assert loaded.config.stop_when[0].tokens == 1500.5  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: MaxSteps(math.inf), "MaxSteps.steps"),  # type: ignore[arg-type]
        (lambda: TokenBudget(math.inf), "TokenBudget.tokens"),  # type: ignore[arg-type]
        (lambda: TokenBudget(math.nan), "TokenBudget.tokens"),  # type: ignore[arg-type]
        (lambda: TokenBudget(-math.inf), "TokenBudget.tokens"),  # type: ignore[arg-type]
    ],
)
def test_stop_conditions_refuse_a_bound_a_saved_state_cannot_hold(make: Any, field: str) -> None:
    """TokenBudget(math.inf) is a UsageError naming the field and saying to leave it out."""
    with pytest.raises(UsageError, match=f"{field}: expected a finite number") as info:
        make()
    assert "leave" in str(info.value)
    assert "out of stop_when" in str(info.value)


def test_a_fraction_in_an_integer_field_is_refused_with_its_path() -> None:
    """max_steps 1.5 (edited consistently) is a SerializationError naming both paths, not 1."""
    data = json.loads(Agent(ScriptedModel(["hello"])).run("hi").state.to_json())
    data["config"]["max_steps"] = data["log"][0]["config"]["max_steps"] = 1.5
    with pytest.raises(SerializationError) as info:
        RunState.from_json(json.dumps(data))
    text = str(info.value)
    assert "expected an integer, got 1.5 @ $.config.max_steps" in text
    assert "expected an integer, got 1.5 @ $.log[0].config.max_steps" in text


def test_an_integral_float_in_an_integer_field_still_loads() -> None:
    """max_steps written as 4.0 by another JSON writer loads as the int 4."""
    data = json.loads(Agent(ScriptedModel(["hello"])).run("hi").state.to_json())
    data["config"]["max_steps"] = data["log"][0]["config"]["max_steps"] = 4.0
    loaded = RunState.from_json(json.dumps(data))
    assert type(loaded.config.max_steps) is int
    assert loaded.config.max_steps == 4


class _Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class _Order:
    priority: _Priority
    quantity: int


def test_users_int_types_load_as_before_through_the_public_converter() -> None:
    """A user's IntEnum field stays an IntEnum and their int field still takes 2.5 (as 2)."""
    order = converter.structure({"priority": 2, "quantity": 2.5}, _Order)
    assert order.priority is _Priority.HIGH
    assert order.quantity == 2
    assert converter.structure(1, _Priority) is _Priority.LOW


def test_users_int_types_load_as_before_through_the_temporal_converter() -> None:
    """ToolfoldPlugin's payload converter gives a user's IntEnum back, not a plain int."""
    payloads = data_converter.payload_converter
    (payload,) = payloads.to_payloads([_Order(_Priority.HIGH, 3)])
    (order,) = payloads.from_payloads([payload], [_Order])
    assert order.priority is _Priority.HIGH
    recorded = Payload(metadata={"encoding": b"json/plain"}, data=b'{"priority":1,"quantity":2.5}')
    assert payloads.from_payloads([recorded], [_Order]) == [_Order(_Priority.LOW, 2)]


def test_a_fraction_in_the_failures_table_is_refused_with_its_path() -> None:
    """A failure count of 1.5 in a saved state is refused naming $.failures, not read as 1."""
    data = json.loads(Agent(ScriptedModel(["hello"])).run("hi").state.to_json())
    data["failures"] = {"add": 1.5}
    with pytest.raises(SerializationError, match=r"expected an integer, got 1.5 @ \$.failures"):
        RunState.from_json(json.dumps(data))


# --- 3. no bare KeyError or AttributeError -----------------------------------------


def _waiting_for_results() -> RunState:
    ask = Tool("ask", "Ask.", {"type": "object", "properties": {}, "required": []})
    return Agent(ScriptedModel([ScriptedModel.call("ask", {})]), tools=[ask]).run("go").state


def test_a_stored_log_with_empty_results_is_refused_by_name() -> None:
    """A log ending in tool_results_provided with no results: SerializationError / InvalidEventError."""
    state = _waiting_for_results()
    assert state.phase == "awaiting_tool_results"
    data = json.loads(state.to_json())
    data["log"].append({"kind": "tool_results_provided", "results": []})
    with pytest.raises(SerializationError, match="expected one or more ToolResultParts, got none"):
        RunState.from_json(json.dumps(data))
    with pytest.raises(InvalidEventError, match="expected one or more ToolResultParts, got none"):
        replay(events_from_json(json.dumps(data["log"])))


def test_tool_results_provided_with_no_parts_is_refused_by_position() -> None:
    """Results that are no ToolResultPart are refused naming the position, not an AttributeError."""
    state = _waiting_for_results()
    with pytest.raises(InvalidEventError, match="result 0: expected a ToolResultPart, got dict"):
        reduce(state, ToolResultsProvided([{"call_id": "c1"}]))  # type: ignore[list-item]


@pytest.mark.parametrize("event", ["x", None, 5])
def test_reduce_refuses_what_is_no_event(event: Any) -> None:
    """reduce(state, "x") raises InvalidEventError naming the type, not an AttributeError."""
    state = start()
    with pytest.raises(InvalidEventError, match=f"expected an event, got {type(event).__name__}"):
        reduce(state, event)


def test_from_json_turns_any_replay_failure_into_a_serialization_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever the replay of a loaded log raises, RunState.from_json raises SerializationError."""
    text = Agent(ScriptedModel(["hello"])).run("hi").state.to_json()

    def broken(events: Any) -> RunState:
        raise KeyError("calls")

    monkeypatch.setattr(_serialize, "replay", broken)
    with pytest.raises(SerializationError, match=r"does not replay: KeyError: 'calls' @ \$.log"):
        RunState.from_json(text)


# --- 4. events whose state could not load -----------------------------------------


@pytest.mark.parametrize(
    ("make", "refusal"),
    [
        (
            lambda: responded(call("c1", "t"), dispositions=("explode",)),  # type: ignore[arg-type]
            "unknown disposition 'explode' \\(expected one of: 'execute', 'approve', 'return'\\)",
        ),
        (lambda: responded(call("c1", "t"), dispositions=("",)), "unknown disposition ''"),  # type: ignore[arg-type]
        (lambda: responded(call("c1", "t"), dispositions=(None,)), "unknown disposition None"),  # type: ignore[arg-type]
        (lambda: responded(call("c1", "t"), dispositions=(5,)), "unknown disposition 5"),  # type: ignore[arg-type]
        (lambda: StopRequested(5), "the reason must be text \\(str\\), got 5"),  # type: ignore[arg-type]
        (lambda: RunFailed(5, None), "error_kind must be text \\(str\\), got 5"),  # type: ignore[arg-type]
        (lambda: RunFailed("x", None), "message must be text \\(str\\), got None"),  # type: ignore[arg-type]
        (lambda: RunFailed("x", "m", 5), "tool_name must be text \\(str\\) or None, got 5"),  # type: ignore[arg-type]
    ],
)
def test_reduce_refuses_events_whose_state_could_not_load(make: Any, refusal: str) -> None:
    """Unknown dispositions and non-text reasons are InvalidEventErrors naming the field."""
    state = start(spec("t"))
    with pytest.raises(InvalidEventError, match=refusal):
        reduce(state, make())


def test_an_unknown_disposition_never_stands_for_approve() -> None:
    """A disposition of "EXECUTE" for an approval=always tool is refused, not read as "approve"."""
    state = start(spec("rm", approval="always"))
    with pytest.raises(InvalidEventError, match="unknown disposition 'EXECUTE'"):
        reduce(state, responded(call("c1", "rm"), dispositions=("EXECUTE",)))  # type: ignore[arg-type]


def test_an_unknown_disposition_is_refused_on_an_answer_without_calls() -> None:
    """responded(text, dispositions=("explode",)) is refused, as its state could not load."""
    with pytest.raises(InvalidEventError, match="unknown disposition 'explode'"):
        reduce(start(), responded(text="hi", dispositions=("explode",)))  # type: ignore[arg-type]


def test_known_dispositions_on_an_answer_without_calls_are_still_taken() -> None:
    """A stored log with ["execute"] and no calls loaded before and still does."""
    state = reduce(start(), responded(text="hi", dispositions=("execute",)))
    assert state.phase == "finished"
    assert RunState.from_json(state.to_json()) == state


@pytest.mark.parametrize("duration", ["slow", True, [1.0]])
def test_tool_returned_refuses_a_duration_that_is_no_seconds(duration: Any) -> None:
    """ToolReturned's duration must be seconds or None: "slow" is refused naming the call."""
    state = reduce(start(spec("t")), responded(call("c1", "t")))
    with pytest.raises(InvalidEventError, match="call 'c1': duration must be seconds"):
        reduce(state, ToolReturned("c1", "ok", duration=duration))


@pytest.mark.parametrize("duration", [None, 0.25, 2, math.nan, -1.0])
def test_tool_returned_keeps_durations_that_round_trip(duration: Any) -> None:
    """Durations a saved state holds (None, floats, ints, NaN, negatives) are still taken."""
    state = reduce(start(spec("t")), responded(call("c1", "t")))
    after = reduce(state, ToolReturned("c1", "ok", duration=duration))
    assert RunState.from_json(after.to_json()) == after


# --- 5. fork, initial_state and approval_key name their arguments -------------------


@pytest.fixture(scope="module")
def two_steps() -> RunState:
    """A finished run of three steps (two tool calls, then an answer)."""
    ok = Tool("ok", "Ok.", {"type": "object", "properties": {}}, function=lambda arguments: "ok")
    script = [ScriptedModel.call("ok", {}), ScriptedModel.call("ok", {}), "done"]
    return Agent(ScriptedModel(script), tools=[ok]).run("go").state


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"step": 1.5}, "fork\\(\\): step= must be an int, got float 1.5"),
        ({"step": True}, "fork\\(\\): step= must be an int, got bool True"),
        ({"events": "2"}, "fork\\(\\): events= must be an int, got str '2'"),
        ({"step": 1, "run_id": 5}, "fork\\(\\): run_id= must be a str, got int 5"),
    ],
)
def test_fork_refuses_arguments_of_the_wrong_type(
    two_steps: RunState, options: dict[str, Any], message: str
) -> None:
    """fork(step=1.5) and the like raise a UsageError naming the argument, not the whole run."""
    with pytest.raises(UsageError, match=message):
        fork(two_steps, **options)


class _Index:
    """An index-like int that is no int subclass (as numpy.int64 is)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


@pytest.mark.parametrize("options", [{"events": _Index(1)}, {"step": _Index(1)}])
def test_fork_takes_an_index_like_int(two_steps: RunState, options: dict[str, Any]) -> None:
    """fork(step=numpy.int64(1)) forks as fork(step=1) does (operator.index, no bool)."""
    plain = {name: value.value for name, value in options.items()}
    assert fork(two_steps, **options) == fork(two_steps, **plain)


def test_initial_state_refuses_a_run_id_that_is_no_text() -> None:
    """initial_state(run_id=5) raises a UsageError (the id would not round-trip)."""
    with pytest.raises(UsageError, match="initial_state\\(\\): run_id must be a str, got int 5"):
        initial_state("x", RunConfig(), run_id=5)  # type: ignore[arg-type]


def test_approval_key_refuses_a_call_id_that_is_no_text() -> None:
    """approval_key(state, None) raises a UsageError naming call_id, not a TypeError."""
    state = reduce(start(spec("rm", approval="always")), responded(call("c1", "rm")))
    with pytest.raises(UsageError, match="approval_key\\(\\): call_id must be a call's id"):
        approval_key(state, None)  # type: ignore[arg-type]


# --- 6. JSON that is no state or log ---------------------------------------------


def test_deeply_nested_json_is_a_serialization_error() -> None:
    """RunState.from_json of JSON nested beyond recursion raises SerializationError, not RecursionError."""
    with pytest.raises(SerializationError, match="nested too deeply"):
        RunState.from_json("[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize(("text", "got"), [("{}", "dict"), ('{"a": 1}', "dict"), ('"abc"', "str")])
def test_events_from_json_needs_an_array(text: str, got: str) -> None:
    """events_from_json of an object or a string is refused: the top level must be a list."""
    with pytest.raises(
        SerializationError, match=f"expected a JSON array of events, got {got} @ \\$"
    ):
        events_from_json(text)


# --- 7. NaN --------------------------------------------------------------------------


def test_an_event_log_with_nan_replays_equal_after_a_round_trip() -> None:
    """A log written with a bare NaN reads it back as math.nan, so its replay equals the state."""
    state = reduce(start(spec("t")), responded(call("c1", "t", {"x": math.nan})))
    state = reduce(state, ToolReturned("c1", "ok"))
    assert replay(events_from_json(events_to_json(state.events))) == state


def test_a_result_part_is_still_taken() -> None:
    """A well-formed ToolResultsProvided still answers its call (the refusals are that narrow)."""
    state = _waiting_for_results()
    call_id = state.calls[0].call.id
    after = reduce(state, ToolResultsProvided([ToolResultPart(call_id, "ask", "yes")]))
    assert after.phase == "awaiting_model"
    assert reduce(after, answer()).phase == "finished"


# --- 8. histories no provider takes, refused where a local run starts ----------------

_CALL = ToolCallPart("c1", "add", "{}", {})
_RESULT = ToolResultPart("c9", "add", "x")
_LATE = Message.tool(ToolResultPart("c1", "add", "1"))  # c1's result, after another message


@pytest.mark.parametrize(
    ("history", "problem"),
    [
        (
            [Message.user("q"), Message.tool(_RESULT), Message.user("go")],
            "message 1 \\(tool\\): the result for 'c9' answers no open call",
        ),
        (
            [Message.user("q"), Message("assistant", [_RESULT]), Message.user("go")],
            "message 1 \\(assistant\\): a tool result \\(for 'c9'\\) belongs in a tool message",
        ),
        (
            [Message.user("q"), Message("user", [_RESULT])],
            "message 1 \\(user\\): a tool result \\(for 'c9'\\) belongs in a tool message",
        ),
        (
            [Message.user("q"), Message("tool", [TextPart("x")]), Message.user("go")],
            "message 1 \\(tool\\): a tool message needs tool results \\(it answers no call\\)",
        ),
        (
            [Message.user("q"), Message.assistant("", [_CALL]), Message.user("hm"), _LATE],
            "message 3 \\(tool\\): the result for 'c1' answers no open call",
        ),
        (
            [Message.user("q"), Message.assistant("", [_CALL]), Message.system("s"), _LATE],
            "message 3 \\(tool\\): the result for 'c1' answers no open call",
        ),
        (
            [Message("user", [_CALL])],
            "message 0 \\(user\\): a tool call \\('c1'\\) belongs in an assistant message",
        ),
    ],
)
def test_a_local_run_refuses_a_history_no_provider_takes(
    history: list[Message], problem: str
) -> None:
    """Agent.run with an orphan or late result, a misplaced call or result, or a text-only tool
    message is refused before any model call, naming the message."""
    model = ScriptedModel(["ok"])
    with pytest.raises(InvalidEventError, match=f"the history: {problem}"):
        Agent(model).run(history)
    assert model.remaining == 1


def test_a_history_a_run_wrote_still_starts() -> None:
    """A run's own messages (calls answered, one tool message a result or a step) start a new run."""
    ok = Tool("ok", "Ok.", {"type": "object", "properties": {}}, function=lambda arguments: "ok")
    first = Agent(ScriptedModel([ScriptedModel.call("ok", {}), "done"]), tools=[ok]).run("go")
    call_ = ToolCallPart("a", "ok", "{}", {})
    split = [
        Message.user("q"),
        Message.assistant("", [call_, ToolCallPart("b", "ok", "{}", {})]),
        Message.tool(ToolResultPart("b", "ok", "1")),
        Message.tool(ToolResultPart("a", "ok", "2")),
    ]
    for history in (first.messages, split):
        assert (
            Agent(ScriptedModel(["again"]), tools=[ok]).run("more", history=history).text == "again"
        )


def test_initial_state_keeps_taking_such_histories() -> None:
    """initial_state (what stored logs and durable workflows replay through) is unchanged."""
    state = initial_state([Message.user("q"), Message.tool(_RESULT)], RunConfig(), run_id="r")
    assert state.phase == "awaiting_model"
    assert RunState.from_json(state.to_json()) == state
