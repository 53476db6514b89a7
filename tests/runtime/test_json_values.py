"""Tool-call arguments and outputs hold only what a saved state's JSON gives back equal."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from toolfold import Agent, InvalidEventError, RunState, UsageError, tool
from toolfold.runtime import (
    Message,
    ModelResponded,
    ModelResponse,
    OutputAccepted,
    OutputSpec,
    ReasoningPart,
    RunConfig,
    ToolCallPart,
    ToolDefinition,
    ToolSpec,
    initial_state,
    reduce,
)
from toolfold.runtime.core._arguments import MAX_DEPTH, argument_problem
from toolfold.runtime.core._messages import MAX_INT_DIGITS, freeze
from toolfold.testing import ScriptedModel


def _nested(levels: int) -> dict[str, Any]:
    """A dict ``levels`` levels deep (``{"a": {"a": ... {}}}``), as its text nests."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def _responded(call: ToolCallPart) -> RunState:
    config = RunConfig(tools=[ToolSpec(ToolDefinition("f"))])
    state = initial_state("hi", config, run_id="r1")
    return reduce(state, ModelResponded(ModelResponse(Message.assistant("", [call]))))


def _validating() -> RunState:
    config = RunConfig(output=OutputSpec("out", schema={"type": "object"}))
    state = initial_state("hi", config, run_id="r1")
    return reduce(state, ModelResponded(ModelResponse(Message.assistant("{}"))))


@tool
def f(a: dict[str, Any]) -> str:
    """Take an object.

    Args:
        a: Anything.
    """
    return "ok"


def test_a_scripted_call_nested_too_deep_is_refused_where_it_is_made() -> None:
    """A dict nested 400 deep is refused by ScriptedModel.call, naming the depth, not saved to fail."""
    with pytest.raises(
        UsageError, match=r"call\('f', \.\.\.\): arguments\['a'\]\['a'\].*nested more than 64"
    ):
        ScriptedModel.call("f", {"a": _nested(400)})


@pytest.mark.parametrize("levels", [MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2])
def test_arguments_given_as_a_dict_nest_as_deep_as_their_text_may(levels: int) -> None:
    """The depth a call's argument text may nest is the depth its decoded dict may nest."""
    value = _nested(levels)
    text_problem = argument_problem(json.dumps(value))
    try:
        ToolCallPart("c1", "f", "{}", value)
        dict_problem = ""
    except UsageError as error:
        dict_problem = str(error)
    assert (text_problem is None) == (not dict_problem)
    dict_ok = not dict_problem
    assert dict_ok or "nested more than 64 levels deep" in dict_problem
    assert dict_ok == (levels <= MAX_DEPTH + 1)  # the object itself is the first level


@pytest.mark.parametrize(
    ("arguments", "where", "what"),
    [
        ({"a": {(1, 2): 1}}, "['a']", "the key tuple (1, 2) is no JSON object key"),
        ({"a": [1, object()]}, "['a'][1]", "object <object object"),
        ({"a": {1, 2}}, "['a']", "set {1, 2} is no JSON value"),
        ({"a": b"x"}, "['a']", "bytes b'x' is no JSON value"),
        ({"a": [10**4300]}, "['a'][0]", "an int of more than 4,300 digits"),
        ({"a": {1: "x", "1": "y"}}, "['a']", "the keys 1 and '1' are both written '1'"),
    ],
    ids=["tuple key", "object", "set", "bytes", "huge int", "key clash"],
)
def test_arguments_no_saved_state_holds_are_refused_naming_where(
    arguments: dict[str, Any], where: str, what: str
) -> None:
    """A call's arguments that JSON cannot carry (or would change) raise a UsageError at their path."""
    with pytest.raises(UsageError) as refused:
        ToolCallPart("c1", "f", "{}", arguments)
    assert f"ToolCallPart.arguments{where}: {what}" in str(refused.value)


def test_arguments_with_number_keys_hold_the_text_json_writes_and_round_trip() -> None:
    """Int, float, bool and None keys are the text JSON writes, so the saved state loads equal."""
    call = ToolCallPart("c1", "f", "{}", {"a": {1: "x", 2.5: [{None: True, True: 0}]}})
    assert call.arguments == {"a": {"1": "x", "2.5": [{"null": True, "true": 0}]}}
    state = _responded(call)
    assert RunState.from_json(state.to_json()) == state


def test_the_largest_int_python_reads_back_is_kept() -> None:
    """An int of 4,300 digits (the default limit of int text) is held and comes back equal."""
    assert sys.int_info.default_max_str_digits == MAX_INT_DIGITS == 4300
    big = 10**4300 - 1
    state = _responded(ToolCallPart("c1", "f", "{}", {"n": big, "m": -big}))
    loaded = RunState.from_json(state.to_json())
    assert loaded == state
    assert loaded.calls[0].call.arguments == {"n": big, "m": -big}


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ({1, 2}, "OutputAccepted.value: set {1, 2} is no JSON value"),
        ({"a": object()}, "OutputAccepted.value['a']: object <object"),
        (10**5000, "OutputAccepted.value: an int of more than 4,300 digits"),
        (_nested(MAX_DEPTH + 2), "nested more than 64 levels deep"),
    ],
    ids=["set", "object", "huge int", "too deep"],
)
def test_an_output_no_saved_state_holds_is_refused(value: Any, what: str) -> None:
    """OutputAccepted refuses a value JSON cannot carry, naming where, instead of a bare to_json error."""
    with pytest.raises(UsageError) as refused:
        OutputAccepted(value)
    assert what in str(refused.value)


def test_an_output_with_int_keys_holds_their_text_and_round_trips() -> None:
    """OutputAccepted({1: 'x'}) holds {"1": "x"}, so the finished state loads back equal."""
    state = reduce(_validating(), OutputAccepted({1: "x", "b": [(1, 2)]}))
    assert state.output == {"1": "x", "b": [[1, 2]]}
    assert RunState.from_json(state.to_json()) == state


def test_the_reducer_refuses_arguments_and_outputs_made_around_their_checks() -> None:
    """A part or event built past its converter still cannot put non-JSON data in the state."""
    call = ToolCallPart("c1", "f", "{}", {})
    config = RunConfig(tools=[ToolSpec(ToolDefinition("f"))])
    response = ModelResponse(Message.assistant("", [call]))
    object.__setattr__(call, "arguments", {"a": {(1, 2): 1}})
    with pytest.raises(InvalidEventError, match=r"arguments\['a'\]: the key tuple \(1, 2\)"):
        reduce(initial_state("hi", config, run_id="r1"), ModelResponded(response))
    accepted = OutputAccepted("x")
    object.__setattr__(accepted, "value", {"a": {1, 2}})
    with pytest.raises(InvalidEventError, match=r"the output\['a'\]: set \{1, 2\} is no JSON"):
        reduce(_validating(), accepted)


def test_a_saved_state_with_arguments_nested_deeper_still_loads() -> None:
    """Arguments nested 100 deep, which older versions took and saved, load back as they were."""
    deep = freeze({"a": _nested(100)})  # (frozen already: kept as it is, as an older part was)
    state = _responded(ToolCallPart("c1", "f", "{}", deep))
    text = state.to_json()
    assert RunState.from_json(text) == state


def test_a_run_with_flat_arguments_saves_and_loads() -> None:
    """The usual flat arguments of text, numbers, booleans and None go through unchanged."""
    arguments = {"a": {"s": "x", "i": -3, "f": 1.5, "b": False, "n": None}}
    result = Agent(ScriptedModel([ScriptedModel.call("f", arguments), "done"]), tools=[f]).run("go")
    call = result.state.messages[1].tool_calls[0]
    assert call.arguments == arguments
    assert RunState.from_json(result.state.to_json()) == result.state


def test_provider_data_no_saved_state_holds_is_refused_naming_where() -> None:
    """A call's or a reasoning part's provider data that JSON cannot carry raises at its path."""
    with pytest.raises(UsageError, match=r"provider_data\['x'\]\[0\]: set \{1\} is no JSON value"):
        ToolCallPart("c1", "f", "{}", {}, {"x": [{1}]})
    with pytest.raises(UsageError, match=r"provider_data: the key tuple \(1, 2\) is no JSON"):
        ReasoningPart("t", provider_data={(1, 2): "x"})
    part = ReasoningPart("t", provider_data={"n": {7: "x"}})
    assert part.provider_data == {"n": {"7": "x"}}


def test_an_int_key_too_long_for_json_text_is_refused_naming_it() -> None:
    """A key of over 4,300 digits is a UsageError saying so (its repr raised a bare ValueError)."""
    with pytest.raises(UsageError, match=r"arguments\['a'\]: an int key of over 4,300 digits"):
        ToolCallPart("c", "f", "{}", {"a": {10**4300: 1}})
    with pytest.raises(UsageError, match=r"^ToolCallPart.arguments: an int key of over 4,300"):
        ToolCallPart("c", "f", "{}", {-(10**4300): 1})


def _deep_output(text: str) -> dict[str, Any]:
    """A workflow step whose output nests deeper than a model's arguments may."""
    return _nested(MAX_DEPTH + 10)


def test_a_workflows_output_may_nest_deeper_than_a_models_and_round_trips() -> None:
    """A workflow's own output nested past MAX_DEPTH runs, saves and loads equal (as it did)."""
    from toolfold import Sequence

    state = Sequence(_deep_output, name="wf").run("go").state
    assert state.output == _nested(MAX_DEPTH + 10)
    assert RunState.from_json(state.to_json()) == state


def test_a_workflows_output_is_still_checked_and_bounded() -> None:
    """planned_output refuses a set and a nesting past OUTPUT_MAX_DEPTH, naming where."""
    from toolfold.runtime.core._events import planned_output
    from toolfold.runtime.core._messages import OUTPUT_MAX_DEPTH

    with pytest.raises(UsageError, match=r"^OutputAccepted.value\['a'\]: set"):
        planned_output({"a": {1, 2}})
    with pytest.raises(UsageError, match=f"nested more than {OUTPUT_MAX_DEPTH} levels deep"):
        planned_output(_nested(OUTPUT_MAX_DEPTH + 2))
    assert planned_output(_nested(OUTPUT_MAX_DEPTH)) == _nested(OUTPUT_MAX_DEPTH)


def test_a_frozendict_a_caller_builds_is_checked_as_a_dict_is() -> None:
    """FrozenDict({...}) given as arguments, an output or a setting is checked, not taken as JSON."""
    from toolfold.runtime import FrozenDict

    with pytest.raises(UsageError, match=r"^ToolCallPart.arguments\['a'\]: set"):
        ToolCallPart("c", "f", "{}", FrozenDict({"a": {1, 2}}))
    assert ToolCallPart("c", "f", "{}", FrozenDict({1: "x"})).arguments == {"1": "x"}
    with pytest.raises(UsageError, match=r"^OutputAccepted.value\['a'\]: object"):
        OutputAccepted(FrozenDict({"a": object()}))
    with pytest.raises(UsageError, match=r"^RunConfig.settings\['x'\]\['y'\]"):
        RunConfig(settings=FrozenDict({"x": {"y": {1}}}))


def test_toolfolds_own_frozen_values_are_still_taken_as_they_are() -> None:
    """Decoded arguments and a loaded output are kept as the very objects (no second walk)."""
    from toolfold.runtime.core._messages import decoded_arguments

    decoded = decoded_arguments('{"a": {"b": [1]}}')
    assert ToolCallPart("c", "f", "{}", decoded).arguments is decoded
    output = OutputAccepted({"a": [1]}).value
    assert OutputAccepted(output).value is output
