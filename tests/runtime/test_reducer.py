"""The reducer's phases, answers, steps and refusals, with no model at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from core_helpers import answer, call, responded, spec, start

from toolfold import InvalidEventError, InvalidTransitionError, RunError
from toolfold.runtime import (
    TRANSITIONS,
    AttemptDropped,
    CallModel,
    Finish,
    HandedOff,
    Message,
    OutputAccepted,
    OutputRejected,
    OutputSpec,
    RunConfig,
    RunFailed,
    RunStarted,
    RunState,
    RunTools,
    StopRequested,
    ToolResultPart,
    ToolReturned,
    ToolSpec,
    Usage,
    UserMessageAdded,
    ValidateOutput,
    initial_state,
    next_effect,
    reduce,
)
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._reducer import blank_state
from toolfold.runtime.core._steps import last_response


def test_initial_state_asks_for_the_model() -> None:
    """A started run awaits the model with the prompt as a user message and step 1 next."""
    state = start(prompt="hello")
    assert state.phase == "awaiting_model"
    assert state.messages == (Message.user("hello"),)
    assert isinstance(state.events[0], RunStarted)
    effect = next_effect(state)
    assert isinstance(effect, CallModel)
    assert effect.kind == "model_request"
    assert (effect.step, effect.key) == (1, "run:1:model")
    assert effect.request.messages == (Message.user("hello"),)


def test_initial_state_accepts_a_history() -> None:
    """Messages given as a history start the conversation as they are."""
    history = (Message.system("be brief"), Message.user("a"), Message.assistant("b"))
    state = initial_state(history, run_id="r")
    assert state.messages == history


def test_final_answer_finishes_with_its_text() -> None:
    """An answer without tool calls finishes the run with finish_reason stop."""
    state = reduce(start(), answer("forty-two"))
    assert state.phase == "finished"
    assert (state.finish_reason, state.output) == ("stop", "forty-two")
    assert next_effect(state) == Finish("stop", "forty-two")
    assert state.step == 1


def test_length_and_content_filter_are_kept() -> None:
    """A truncated answer finishes with finish_reason length, a filtered one content_filter."""
    assert reduce(start(), answer("par", finish_reason="length")).finish_reason == "length"
    filtered = reduce(start(), answer("", finish_reason="content_filter"))
    assert filtered.finish_reason == "content_filter"


def test_usage_is_summed_over_steps() -> None:
    """Usage adds up every model response, requests included."""
    state = start(spec("t"))
    state = reduce(state, responded(call("c1", "t"), usage=Usage(100, 10, 50, 3, 1)))
    state = reduce(state, ToolReturned("c1", "ok"))
    state = reduce(state, answer(usage=Usage(200, 20, 0, 0, 1)))
    assert state.usage == Usage(300, 30, 50, 3, 2)


def test_last_response_is_the_logs_last_model_response() -> None:
    """last_response: None before any answer, then the last ModelResponded's response, past later results."""
    state = start(spec("t"))
    assert last_response(state) is None
    first = responded(call("c1", "t"))
    state = reduce(state, first)
    state = reduce(state, ToolReturned("c1", "ok"))
    assert last_response(state) is first.response
    final = answer("done", finish_reason="length")
    assert last_response(reduce(state, final)) is final.response


def test_the_first_response_s_usage_starts_the_sum() -> None:
    """A fresh run's usage is its first response's; a loaded zero or a Usage subclass sums to a Usage."""

    class Tagged(Usage):
        pass

    first = Usage(7, 3, 0, 0, 1)
    assert reduce(start(), answer(usage=first)).usage == first
    loaded = attrs.evolve(start(), usage=Usage())  # a zero that is not the shared one
    assert reduce(loaded, answer(usage=first)).usage == first
    summed = reduce(start(), answer(usage=Tagged(7, 3, 0, 0, 1))).usage
    assert type(summed) is Usage
    assert summed == first


def test_instructions_go_first_but_are_not_stored() -> None:
    """Config instructions lead every request as a system message without joining the conversation."""
    state = start(instructions="be terse")
    effect = next_effect(state)
    assert isinstance(effect, CallModel)
    assert effect.request.messages[0] == Message.system("be terse")
    assert all(m.role != "system" for m in state.messages)


def test_every_request_of_a_config_leads_with_one_system_message() -> None:
    """Requests of every step and run with one config share its system message (a codec encodes it once)."""
    first = start(instructions="be terse")
    later = reduce(reduce(first, answer("hi")), UserMessageAdded(Message.user("again")))
    messages = [next_effect(s).request.messages[0] for s in (first, later, start(instructions="x"))]
    assert messages[0] is messages[1] is first.config.system_message
    assert messages[2] == Message.system("x")
    assert start().config.system_message is None


def test_request_carries_tools_choice_output_and_settings() -> None:
    """The request holds the tool definitions, tool_choice, output spec and settings from the config."""
    out = OutputSpec("answer", {"type": "object"})
    state = start(spec("a"), spec("b"), tool_choice="auto", output=out, settings={"seed": 1})
    effect = next_effect(state)
    assert isinstance(effect, CallModel)
    request = effect.request
    assert [t.name for t in request.tools] == ["a", "b"]
    assert (request.tool_choice, request.output, dict(request.settings)) == (
        "auto",
        out,
        {"seed": 1},
    )


@pytest.mark.parametrize("choice", ["required", "a"])
def test_forced_tool_choice_falls_back_to_auto(choice: str) -> None:
    """A forcing tool_choice applies to a turn's first step only, so the model can then answer."""
    state = start(spec("a"), tool_choice=choice)
    first = next_effect(state)
    assert isinstance(first, CallModel)
    assert first.request.tool_choice == choice
    state = reduce(reduce(state, responded(call("c1", "a"))), ToolReturned("c1", "x"))
    second = next_effect(state)
    assert isinstance(second, CallModel)
    assert second.request.tool_choice == "auto"


def test_forced_tool_choice_can_stay() -> None:
    """With reset_tool_choice=False the forcing choice is sent on every step."""
    state = start(spec("a"), tool_choice="required", reset_tool_choice=False)
    state = reduce(reduce(state, responded(call("c1", "a"))), ToolReturned("c1", "x"))
    effect = next_effect(state)
    assert isinstance(effect, CallModel)
    assert effect.request.tool_choice == "required"


def test_tool_step_round_trip() -> None:
    """A call runs, its result is committed as a tool message, and the model is asked again."""
    state = reduce(start(spec("add")), responded(call("c1", "add", {"a": 1})))
    effect = next_effect(state)
    assert isinstance(effect, RunTools)
    (invocation,) = effect.calls
    assert (invocation.key, invocation.effect_kind, invocation.step) == ("run:1:0", "tool:add", 1)
    state = reduce(state, ToolReturned("c1", "2"))
    assert state.phase == "awaiting_model"
    last = state.messages[-1]
    assert last.role == "tool"
    assert [(r.call_id, r.tool_name, r.content, r.is_error) for r in last.tool_results] == [
        ("c1", "add", "2", False)
    ]
    following = next_effect(state)
    assert isinstance(following, CallModel)
    assert following.request.messages[-1] == last
    assert following.key == "run:2:model"


def test_results_are_committed_in_call_order() -> None:
    """Results reported out of order land in the conversation in call order."""
    state = reduce(start(spec("t")), responded(call("a", "t"), call("b", "t"), call("c", "t")))
    for call_id in ("c", "a"):
        state = reduce(state, ToolReturned(call_id, call_id.upper()))
        assert state.phase == "running_tools"
        assert state.messages[-1].role == "assistant"
    remaining = next_effect(state)
    assert isinstance(remaining, RunTools)
    assert [i.call.id for i in remaining.calls] == ["b"]
    state = reduce(state, ToolReturned("b", "B"))
    assert [r.call_id for r in state.messages[-1].tool_results] == ["a", "b", "c"]


def test_unknown_tool_gets_an_error_result_at_once() -> None:
    """A call to an unknown tool gets an error listing the available tools, without running."""
    state = reduce(start(spec("add"), spec("mul")), responded(call("c1", "nope")))
    assert state.phase == "awaiting_model"
    (result,) = state.messages[-1].tool_results
    assert result.is_error
    assert "Unknown tool 'nope'" in result.content
    assert "add, mul" in result.content
    assert state.calls[0].outcome == "unknown_tool"


def test_unknown_tool_in_a_large_catalog_names_its_near_misses_first_and_caps_the_list() -> None:
    """In 250 tools, a call differing from one only by case gets that name first ("did you
    mean"), and the list stops at 20 names, saying how many more there are."""
    names = [f"catalog_tool_number_{i:03d}" for i in range(250)]
    state = reduce(start(*map(spec, names)), responded(call("c1", "Catalog_Tool_Number_007")))
    content = state.messages[-1].tool_results[0].content
    assert content.startswith(
        "Unknown tool 'Catalog_Tool_Number_007'. Did you mean 'catalog_tool_number_007'? "
        "Available tools: catalog_tool_number_007, catalog_tool_number_000, "
    )
    assert content.endswith("catalog_tool_number_019 (and 230 more).")
    assert len(content) < 700


def test_unknown_tool_near_a_few_tools_names_them_and_lists_all() -> None:
    """A typo of one of a few tools, or its name without the prefix it has (an MCP server's),
    is named ("did you mean"), the list kept whole, in order; a name near none of them gets
    the list alone."""
    state = reduce(start(spec("get_weather"), spec("count_words")), responded(call("c1", "wether")))
    assert state.messages[-1].tool_results[0].content == (
        "Unknown tool 'wether'. Did you mean 'get_weather'? "
        "Available tools: get_weather, count_words."
    )
    state = reduce(start(spec("add"), spec("mul")), responded(call("c1", "subtract")))
    assert state.messages[-1].tool_results[0].content == (
        "Unknown tool 'subtract'. Available tools: add, mul."
    )
    state = reduce(start(spec("add"), spec("docs_search")), responded(call("c1", "search")))
    assert state.messages[-1].tool_results[0].content == (
        "Unknown tool 'search'. Did you mean 'docs_search'? Available tools: add, docs_search."
    )


def test_unknown_tool_with_no_tools_says_so() -> None:
    """With no tools at all the error says none are available."""
    state = reduce(start(), responded(call("c1", "nope")))
    assert "No tools are available" in state.messages[-1].tool_results[0].content


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{bad json", "not valid JSON"),
        ('{"a": 1 "b": 2}', """delimiter at line 1, column 9 (char 8): {"a": 1 >>>"b": 2}"""),
        ("[1, 2]", "$: tool 't' takes a JSON object of arguments, got array [1, 2]"),
        ("null", "$: tool 't' takes a JSON object of arguments, got null"),
    ],
)
def test_argument_text_that_is_not_an_object_gets_an_error_result(text: str, expected: str) -> None:
    """Broken or non-object argument JSON becomes an error result the model can correct."""
    state = reduce(start(spec("t")), responded(call("c1", "t", text=text), call("c2", "t")))
    assert [c.call.id for c in state.calls if c.status == "to_run"] == ["c2"]
    state = reduce(state, ToolReturned("c2", "fine"))
    first, second = state.messages[-1].tool_results
    assert first.is_error
    assert expected in first.content
    assert "Call the tool again" in first.content
    assert not second.is_error
    assert state.calls[0].outcome == "invalid_arguments"


def test_error_flag_makes_an_error_outcome() -> None:
    """A ToolReturned with is_error and no outcome counts as outcome error."""
    state = reduce(start(spec("t")), responded(call("c1", "t")))
    state = reduce(state, ToolReturned("c1", "boom", is_error=True))
    assert state.calls[0].outcome == "error"
    assert state.messages[-1].tool_results[0].is_error


def test_max_steps_finishes_without_error() -> None:
    """Reaching max_steps finishes with finish_reason max_steps and no output."""
    state = start(spec("t"), max_steps=2)
    for step in (1, 2):
        state = reduce(state, responded(call(f"c{step}", "t")))
        state = reduce(state, ToolReturned(f"c{step}", "x"))
    assert state.phase == "finished"
    assert (state.finish_reason, state.output) == ("max_steps", None)
    assert next_effect(state) == Finish("max_steps", None)


def test_consecutive_failures_past_max_retries_fail_the_run() -> None:
    """A tool failing more than max_retries times in a row fails the run, naming the tool."""
    state = start(spec("flaky", max_retries=2), max_steps=20)
    for step in range(3):
        state = reduce(state, responded(call(f"c{step}", "flaky")))
        state = reduce(state, ToolReturned(f"c{step}", f"boom {step}", outcome="timeout"))
    assert state.phase == "failed"
    assert state.error is not None
    assert state.error.kind == "tool_retries_exceeded"
    assert state.error.tool_name == "flaky"
    assert "'flaky' failed 3 times in a row (max_retries=2)" in state.error.message
    assert "boom 2" in state.error.message
    assert state.messages[-1].role == "tool"  # the last results are kept
    effect = next_effect(state)
    assert isinstance(effect, Finish)
    assert (effect.reason, effect.error) == ("error", state.error)


def test_a_success_resets_the_failure_count() -> None:
    """Failures must be consecutive: a success in between resets the count."""
    state = start(spec("flaky", max_retries=1), max_steps=20)
    for step, outcome in enumerate(["error", "ok", "error", "ok", "error"]):
        state = reduce(state, responded(call(f"c{step}", "flaky")))
        state = reduce(state, ToolReturned(f"c{step}", "r", outcome=outcome))  # type: ignore[arg-type]
    assert state.phase == "awaiting_model"
    assert state.failures == {"flaky": 1}


def test_unknown_tool_failures_count_too() -> None:
    """Repeated calls to an unknown tool fail the run after the default retries."""
    state = start(spec("t"), max_steps=20)
    for step in range(4):
        state = reduce(state, responded(call(f"c{step}", "ghost")))
    assert state.phase == "failed"
    assert state.error is not None
    assert state.error.tool_name == "ghost"


def test_failed_run_refuses_every_event_and_names_its_cause() -> None:
    """After RunFailed, any event is refused with the cause in the message."""
    state = reduce(start(), RunFailed("model_error", "the provider is down"))
    assert state.phase == "failed"
    assert state.finish_reason == "error"
    with pytest.raises(InvalidEventError, match="the provider is down") as info:
        reduce(state, answer())
    assert info.value.phase == "failed"
    assert info.value.event == "model_responded"
    assert info.value.state is state


def test_event_not_allowed_in_phase_names_both() -> None:
    """An event outside the table raises InvalidTransitionError with the phase and the event."""
    state = start()
    with pytest.raises(InvalidTransitionError) as info:
        reduce(state, ToolReturned("c1", "x"))
    assert (info.value.phase, info.value.event) == ("awaiting_model", "tool_returned")
    assert "awaiting_model" in str(info.value)
    assert "tool_returned" in str(info.value)


def test_run_started_twice_is_refused() -> None:
    """A run starts once."""
    with pytest.raises(InvalidEventError, match="run_started"):
        reduce(start(), RunStarted("again", RunConfig()))


def test_duplicate_tool_names_are_refused() -> None:
    """A config with two tools of one name cannot start a run."""
    with pytest.raises(InvalidEventError, match="duplicate tool names: t"):
        start(spec("t"), spec("t"))


def test_a_config_is_checked_each_time_until_it_passes() -> None:
    """The same config with a duplicated name is refused on every start; a good one starts every time."""
    bad = RunConfig(tools=(spec("t"), spec("t")))
    for _ in range(2):
        with pytest.raises(InvalidEventError, match="duplicate tool names: t"):
            initial_state("hi", bad, run_id="r")
    good = RunConfig(tools=(spec("t"),))
    assert initial_state("hi", good, run_id="r") == initial_state("hi", good, run_id="r")


class _Definition:
    """A duck-typed tool definition, renamed in place by the tests below."""

    def __init__(self, name: str) -> None:
        self.name, self.description, self.parameters, self.strict = name, "", {}, None


def _starting(config: RunConfig) -> RunState:
    return initial_state("hi", config, run_id="r")


def _handing_off(config: RunConfig) -> RunState:
    return reduce(start(), HandedOff("billing", config))


@pytest.mark.parametrize(
    ("event", "refusal"),
    [
        (_starting, r"duplicate tool names: a$"),
        (_handing_off, r"duplicate tool names in the configuration of agent 'billing': a$"),
    ],
    ids=["run-start", "handoff"],
)
def test_tool_names_are_read_when_the_tools_are_set(
    event: Callable[[RunConfig], RunState], refusal: str
) -> None:
    """A run's start and a handoff check a config's tools by the names their definitions have
    now (one renamed since the config was made): a clash the rename made is refused, naming
    it (and the agent handed to); one a rename undid is taken."""
    first, second = _Definition("a"), _Definition("b")
    config = RunConfig(tools=(ToolSpec(first), ToolSpec(second)))
    second.name = "a"
    with pytest.raises(InvalidEventError, match=refusal):
        event(config)
    second.name = "c"
    clash = _Definition("c")
    config = RunConfig(tools=(ToolSpec(second), ToolSpec(clash)))
    clash.name = "d"
    assert event(config).phase == "awaiting_model"


@pytest.mark.parametrize("config", [None, {"tools": []}, "cfg"])
def test_an_event_whose_config_is_no_run_config_is_refused_and_the_state_kept(config: Any) -> None:
    """A run start's or a handoff's config that is not a `RunConfig` is a refused event
    naming what it got (it was an AttributeError, or, for a handoff, taken as it was)."""
    state = start()
    before = state.to_json()
    name = type(config).__name__
    with pytest.raises(
        InvalidEventError, match=rf"the config of agent 'billing' must be a RunConfig, got {name}"
    ) as caught:
        reduce(state, HandedOff("billing", config))
    assert caught.value.state is state
    assert state.to_json() == before
    with pytest.raises(InvalidEventError, match=rf"the config must be a RunConfig, got {name}"):
        reduce(blank_state(), RunStarted("r", config, (Message.user("hi"),)))


def test_duplicate_call_ids_are_refused() -> None:
    """A response repeating a call id would break one-result-per-call, so it is refused."""
    with pytest.raises(InvalidEventError, match="repeats a tool call id"):
        reduce(start(spec("t")), responded(call("c1", "t"), call("c1", "t")))


def test_second_result_for_a_call_is_refused() -> None:
    """A call gets exactly one result."""
    state = reduce(start(spec("t")), responded(call("c1", "t"), call("c2", "t")))
    state = reduce(state, ToolReturned("c1", "x"))
    with pytest.raises(InvalidEventError, match="already has a result"):
        reduce(state, ToolReturned("c1", "again"))


def test_result_for_an_unknown_call_is_refused() -> None:
    """A result must answer a call of the current step."""
    state = reduce(start(spec("t")), responded(call("c1", "t")))
    with pytest.raises(InvalidEventError, match="no tool call 'zz'"):
        reduce(state, ToolReturned("zz", "x"))


def test_run_failed_from_tools_phase() -> None:
    """The driver can fail a run while tools run (cancellation), keeping the cause."""
    state = reduce(start(spec("t")), responded(call("c1", "t")))
    state = reduce(state, RunFailed("cancelled", "the caller cancelled", "t"))
    assert state.error is not None
    assert (state.error.kind, state.error.tool_name) == ("cancelled", "t")


def test_output_validation_round() -> None:
    """An answer is validated; a rejection goes back to the model; an acceptance finishes."""
    out = OutputSpec("answer", {"type": "object"})
    state = reduce(start(output=out), answer("not json"))
    assert state.phase == "validating_output"
    assert next_effect(state) == ValidateOutput("not json", out)
    state = reduce(state, OutputRejected("expected an object @ $"))
    assert state.phase == "awaiting_model"
    assert state.messages[-1] == Message.user("expected an object @ $")
    state = reduce(state, answer('{"x": 1}'))
    state = reduce(state, OutputAccepted({"x": 1}))
    assert (state.phase, state.output, state.finish_reason) == ("finished", {"x": 1}, "stop")


@pytest.mark.parametrize("reason", ["stop", "length", "max_iterations"])
def test_an_accepted_answer_finishes_with_the_reason_only_a_loop_carries(reason: str) -> None:
    """An accepted answer finishes ``stop``, or ``max_iterations`` when its response says so (a
    workflow's loop out of iterations), a changed step limit logged after it or not; a
    provider's ``length`` does not carry over (the answer fit the output type)."""
    from toolfold.runtime import ModelResponded, ModelResponse, StepLimitChanged, replay
    from toolfold.runtime.core._messages import NO_USAGE
    from toolfold.runtime.core._rounds import reduce_all

    out = OutputSpec("answer", {"type": "object"})
    state = reduce(start(output=out), answer('{"x": 1}', finish_reason=reason))
    later = reduce(state, StepLimitChanged(20))
    expected = "max_iterations" if reason == "max_iterations" else "stop"
    for validating in (state, later):
        finished = reduce(validating, OutputAccepted({"x": 1}))
        assert (finished.phase, finished.output) == ("finished", {"x": 1})
        assert finished.finish_reason == expected
        assert replay(finished.log) == finished
    # `reduce_all`'s one pass over a plain answer (a response without usage, as a planner's)
    plain = ModelResponded(ModelResponse(Message.assistant('{"x": 1}'), NO_USAGE, reason))
    assert (
        reduce_all(start(output=out), [plain, OutputAccepted({"x": 1})]).finish_reason == expected
    )


def test_output_retries_exhausted_fail_the_run() -> None:
    """More rejections than output_retries fail the run with kind output_validation."""
    out = OutputSpec("answer", {"type": "object"})
    state = start(output=out, output_retries=1)
    for _ in range(2):
        state = reduce(reduce(state, answer("nope")), OutputRejected("bad"))
    assert state.phase == "failed"
    assert state.error is not None
    assert state.error.kind == "output_validation"
    assert "after 2 attempts (output_retries=1)" in state.error.message


def test_output_rejection_at_max_steps_finishes() -> None:
    """A rejected answer on the last allowed step finishes with max_steps."""
    out = OutputSpec("answer", {"type": "object"})
    state = reduce(reduce(start(output=out, max_steps=1), answer("nope")), OutputRejected("bad"))
    assert (state.phase, state.finish_reason) == ("finished", "max_steps")


def test_stop_requested_finishes() -> None:
    """A StopRequested between steps finishes with its reason."""
    state = reduce(start(), StopRequested("budget"))
    assert (state.phase, state.finish_reason) == ("finished", "budget")


def test_user_message_before_a_call_joins_the_conversation() -> None:
    """A message added while awaiting the model is sent with the next request."""
    state = reduce(start(), UserMessageAdded(Message.user("also this")))
    effect = next_effect(state)
    assert isinstance(effect, CallModel)
    assert effect.request.messages[-1] == Message.user("also this")


def test_new_turn_after_finish_counts_steps_per_turn() -> None:
    """A user message after a finish starts a turn: max_steps counts again, keys stay unique."""
    state = reduce(start(spec("t"), max_steps=1), answer("first"))
    state = reduce(state, UserMessageAdded(Message.user("again")))
    assert (state.phase, state.output, state.finish_reason) == ("awaiting_model", None, None)
    effect = next_effect(state)
    assert isinstance(effect, CallModel)
    assert effect.key == "run:2:model"
    state = reduce(reduce(state, responded(call("c9", "t"))), ToolReturned("c9", "x"))
    assert (state.phase, state.finish_reason, state.turn_steps) == ("finished", "max_steps", 1)


def test_next_effect_on_a_blank_state_raises() -> None:
    """Asking what to do before a run started is an error, not None."""
    with pytest.raises(RunError, match="has not started"):
        next_effect(blank_state())


def test_inputs_are_not_mutated() -> None:
    """Reducing leaves the input state (and its conversation view) unchanged."""
    state = reduce(start(spec("t")), responded(call("c1", "t")))
    before = state.to_json()
    messages = state.messages
    reduce(state, ToolReturned("c1", "x"))
    reduce(state, ToolReturned("c1", "y"))  # a fork from the same state
    assert state.to_json() == before
    assert state.messages == messages
    assert len(state.conversation) == 2


def test_every_phase_is_in_the_table() -> None:
    """The table covers every phase, and failed accepts nothing."""
    from toolfold.runtime.core._state import PHASES

    assert set(TRANSITIONS) == set(PHASES)
    assert TRANSITIONS["failed"] == {}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_steps": 0}, "RunConfig.max_steps must be an integer >= 1, got 0"),
        ({"output_retries": -1}, "RunConfig.output_retries must be an integer >= 0"),
        ({"max_steps": True}, "max_steps must be an integer"),
    ],
)
def test_config_refuses_impossible_limits(options: dict[str, object], message: str) -> None:
    """A limit that cannot work is refused when the config is built, naming the field."""
    with pytest.raises(ValueError, match=message):
        RunConfig(**options)  # type: ignore[arg-type]


def test_tool_spec_from_live_tools() -> None:
    """ToolSpec.from_tool keeps the definition and turns the live policy into data."""
    from toolfold import Tool
    from toolfold.runtime import ToolSpec

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    plain = ToolSpec.from_tool(Tool("plain", "d", schema, lambda args: 1, max_retries=5))
    assert (
        plain.name,
        plain.definition.description,
        plain.definition.parameters["properties"],
    ) == (
        "plain",
        "d",
        {"x": {"type": "integer"}},
    )
    assert (plain.has_function, plain.approval, plain.max_retries) == (True, "never", 5)
    always = ToolSpec.from_tool(Tool("a", function=lambda args: 1, requires_approval=True))
    assert always.approval == "always"
    predicate = ToolSpec.from_tool(
        Tool("p", function=lambda args: 1, requires_approval=lambda call, state: True)
    )
    assert predicate.approval == "predicate"
    assert not ToolSpec.from_tool(Tool("manual")).has_function


def test_config_looks_tools_up_by_name() -> None:
    """RunConfig.tool finds a spec by name; definitions keep the order."""
    config = RunConfig(tools=[spec("a"), spec("b")])
    assert config.tool("b") == spec("b")
    assert config.tool("zz") is None
    assert [d.name for d in config.definitions] == ["a", "b"]
    assert config.tool_names == ("a", "b")


def test_states_pickle() -> None:
    """A state survives pickle (for process pools), logs included."""
    import pickle

    state = reduce(start(spec("t")), responded(call("c1", "t")))
    copy = pickle.loads(pickle.dumps(state))
    assert copy == state
    assert reduce(copy, ToolReturned("c1", "x")) == reduce(state, ToolReturned("c1", "x"))


def test_history_with_unanswered_calls_is_refused() -> None:
    """A history leaving a tool call without a result cannot start a run (providers reject it)."""
    asked = Message.assistant("", [call("c1", "t"), call("c2", "t")])
    with pytest.raises(InvalidEventError, match=r"without results: 'c2' \(t\)"):
        initial_state(
            [Message.user("a"), asked, Message.tool(ToolResultPart("c1", "t", "x"))],
            run_id="r",
        )
    with pytest.raises(InvalidEventError, match=r"'c1' \(t\), 'c2' \(t\)"):
        initial_state([Message.user("a"), asked], run_id="r")


def test_history_with_results_split_over_messages_is_accepted() -> None:
    """Results may come one tool message per call, as OpenAI-style histories have them."""
    asked = Message.assistant("", [call("c1", "t"), call("c2", "t")])
    history = [
        Message.user("a"),
        asked,
        Message.tool(ToolResultPart("c2", "t", "y")),
        Message.tool(ToolResultPart("c1", "t", "x")),
        Message.assistant("done"),
    ]
    assert initial_state(history, run_id="r").messages == tuple(history)


def test_a_config_unpickled_without_its_system_message_slot_builds_it() -> None:
    """A RunConfig pickled by a version without the memoized system message still sends one."""
    from toolfold.runtime.core._config import RunConfig

    config = RunConfig(instructions="Be brief.")
    object.__delattr__(config, "_system")  # what unpickling an older pickle leaves
    message = config.system_message
    assert message is not None
    assert message.text == "Be brief."


def test_a_run_stopped_after_a_tool_step_takes_one_handoff_and_no_other() -> None:
    """A run finished at max_steps right after a step with calls accepts a handoff (it stays
    finished, calls cleared); a second one, or one after an answer, is refused with the reason."""
    state = reduce(start(spec("t"), max_steps=1), responded(call("c1", "t")))
    state = reduce(state, ToolReturned("c1", "x"))
    assert (state.phase, state.finish_reason) == ("finished", "max_steps")
    handed = reduce(state, HandedOff("billing", RunConfig(max_steps=1)))
    assert (handed.phase, handed.agent, handed.calls) == ("finished", "billing", ())
    with pytest.raises(InvalidEventError, match="no tool call in its last step, or has handed"):
        reduce(handed, HandedOff("billing", RunConfig(max_steps=1)))
    answered = reduce(start(), responded(text="done"))
    with pytest.raises(InvalidEventError, match=r"hands off only .* finished with 'stop'"):
        reduce(answered, HandedOff("billing", RunConfig()))


def test_attempt_dropped_adds_a_dropped_answer_to_the_run_s_usage() -> None:
    """An AttemptDropped with a dropped answer's usage, awaiting the model, adds it to usage
    and to the tree's, leaving the phase and step as they were."""
    state = reduce(start(), AttemptDropped(Usage(7, 3, requests=1)))
    assert (state.phase, state.step) == ("awaiting_model", 0)
    assert state.usage == state.tree_usage == Usage(7, 3, requests=1)
    state = reduce(state, answer(usage=Usage(10, 5, requests=1)))
    assert state.usage == Usage(17, 8, requests=2)


def test_attempt_dropped_counts_dropped_sub_runs_in_the_tree_only() -> None:
    """Dropped sub-runs' usage, with calls to run, counts in tree_usage, not in the run's own."""
    state = reduce(start(spec("t")), responded(call("c1", "t")))
    state = reduce(state, AttemptDropped(sub_run_usage=Usage(40, 4, requests=2)))
    assert state.phase == "running_tools"
    assert state.usage == Usage(10, 5, requests=1)
    assert state.tree_usage == Usage(50, 9, requests=3)


_raw_usage = builder(Usage)


@pytest.mark.parametrize(
    ("event", "where", "refusal"),
    [
        (AttemptDropped(Usage(1, requests=1)), "finished", "attempt_dropped"),
        (AttemptDropped(Usage(1, requests=1)), "validating_output", "attempt_dropped"),
        (AttemptDropped(Usage(1, requests=1)), "awaiting_approval", "attempt_dropped"),
        (AttemptDropped(Usage(1, requests=1)), "running_tools", "own usage is kept only"),
        (AttemptDropped(sub_run_usage=Usage(1)), "awaiting_model", "sub_run_usage is kept only"),
        (AttemptDropped(), "awaiting_model", "carries no usage"),
        (AttemptDropped(Usage(-1)), "awaiting_model", "its usage: input_tokens must be a finite"),
        # (made around `Usage`'s own check, which refuses both: an event from elsewhere)
        (AttemptDropped(_raw_usage(float("nan"))), "awaiting_model", "input_tokens .* got nan"),
        (AttemptDropped(_raw_usage(True)), "awaiting_model", "input_tokens .* got True"),
        (AttemptDropped(sub_run_usage="lots"), "running_tools", "expected a Usage, got str"),  # type: ignore[arg-type]
    ],
)
def test_attempt_dropped_is_refused_where_retry_state_never_puts_it(
    event: AttemptDropped, where: str, refusal: str
) -> None:
    """AttemptDropped outside a rebuilt run's place (or empty, negative, not a Usage) is
    refused with InvalidEventError naming the problem."""
    tools = (spec("t"), spec("ask", approval="always"))
    states = {
        "awaiting_model": start(*tools),
        "running_tools": reduce(start(*tools), responded(call("c1", "t"))),
        "awaiting_approval": reduce(start(*tools), responded(call("c1", "ask"))),
        "finished": reduce(start(*tools), answer()),
        "validating_output": reduce(
            start(*tools, output=OutputSpec("out", {"type": "object"})), answer("{}")
        ),
    }
    state = states[where]
    assert state.phase == where
    with pytest.raises(InvalidEventError, match=refusal) as info:
        reduce(state, event)
    assert info.value.state is state
