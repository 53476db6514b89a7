"""Stop conditions: pure functions over state, as data in the config or as callables."""

from __future__ import annotations

import re
from typing import Any

import attrs
import pytest
from core_helpers import answer, call, responded, spec, start

from toolfold import Agent, ModelRequest, RunError, Sequence, Task
from toolfold.runtime import (
    Finish,
    MaxSteps,
    RunState,
    StopRequested,
    TokenBudget,
    ToolCalled,
    ToolResultPart,
    ToolReturned,
    Usage,
    max_steps,
    next_effect,
    reduce,
    stop_reason,
    stopping_result,
    token_budget,
    tool_called,
)
from toolfold.runtime._task import step_output, unanswered
from toolfold.testing import FunctionModel


def _after_tool_step(
    state: RunState, name: str, call_id: str, usage: Usage | None = None
) -> RunState:
    state = reduce(state, responded(call(call_id, name), usage=usage))
    return reduce(state, ToolReturned(call_id, "x"))


def test_builders_make_data_conditions() -> None:
    """max_steps, token_budget and tool_called build plain-data conditions."""
    assert max_steps(3) == MaxSteps(3)
    assert token_budget(100) == TokenBudget(100)
    assert tool_called("done") == ToolCalled("done")


@pytest.mark.parametrize("build", [max_steps, token_budget])
def test_builders_refuse_non_positive_limits(build) -> None:  # type: ignore[no-untyped-def]
    """A limit below 1 is a mistake, reported at once."""
    with pytest.raises(ValueError, match="at least 1"):
        build(0)


def test_conditions_are_pure_functions_over_state() -> None:
    """Each condition reads only the state it is given."""
    state = _after_tool_step(start(spec("t"), max_steps=50), "t", "c1", Usage(60, 50, requests=1))
    assert max_steps(1)(state)
    assert not max_steps(2)(state)
    assert token_budget(110)(state)
    assert not token_budget(111)(state)
    assert tool_called("t")(state)
    assert not tool_called("other")(state)


def test_stop_reason_returns_the_first_that_holds() -> None:
    """stop_reason names the first holding condition; callables report stop_condition."""
    state = _after_tool_step(start(spec("t")), "t", "c1")
    assert stop_reason(state, []) is None
    assert stop_reason(state, [tool_called("x"), tool_called("t")]) == "tool_called"
    assert stop_reason(state, [lambda s: s.step >= 1, max_steps(1)]) == "stop_condition"
    assert stop_reason(state, [lambda s: False]) is None


def test_tool_called_in_config_stops_after_that_step() -> None:
    """With stop_when=[tool_called('final')] the run finishes once that call's step commits."""
    state = start(spec("search"), spec("final"), stop_when=[tool_called("final")])
    state = _after_tool_step(state, "search", "c1")
    assert state.phase == "awaiting_model"
    state = _after_tool_step(state, "final", "c2")
    assert (state.phase, state.finish_reason) == ("finished", "tool_called")
    assert next_effect(state) == Finish("tool_called", None)


def test_token_budget_in_config_stops_at_a_step_boundary() -> None:
    """The budget is checked between steps, so every call still gets its result first."""
    state = start(spec("t"), stop_when=[token_budget(100)])
    state = _after_tool_step(state, "t", "c1", Usage(40, 10, requests=1))
    assert state.phase == "awaiting_model"
    state = reduce(state, responded(call("c2", "t"), usage=Usage(40, 10, requests=1)))
    assert state.phase == "running_tools"
    state = reduce(state, ToolReturned("c2", "x"))
    assert (state.phase, state.finish_reason) == ("finished", "token_budget")
    assert state.messages[-1].role == "tool"


def test_stop_conditions_come_before_max_steps() -> None:
    """When a config condition and max_steps hold together, the condition's reason wins."""
    state = start(spec("t"), max_steps=1, stop_when=[max_steps(1)])
    state = _after_tool_step(state, "t", "c1")
    assert state.finish_reason == "max_steps"
    state = start(spec("t"), max_steps=1, stop_when=[tool_called("t")])
    assert _after_tool_step(state, "t", "c1").finish_reason == "tool_called"


def test_callable_conditions_go_through_stop_requested() -> None:
    """A driver checks a callable and records its verdict as an event that replays."""
    state = _after_tool_step(start(spec("t")), "t", "c1")
    reason = stop_reason(state, [lambda s: s.usage.requests >= 1])
    assert reason == "stop_condition"
    state = reduce(state, StopRequested(reason))
    assert (state.phase, state.finish_reason, state.output) == ("finished", "stop_condition", None)


def test_final_answer_is_not_cut_by_conditions() -> None:
    """A final answer finishes with stop even if a condition would hold."""
    state = reduce(start(stop_when=[max_steps(1)]), answer("hi"))
    assert (state.finish_reason, state.output) == ("stop", "hi")


def _stopper(name: str, fails: bool = False, **kw: Any) -> Agent:
    """An agent whose model calls ``final`` once, then talks on (were it asked again)."""

    def final(answer: str) -> str:
        """Give the final answer.

        Args:
            answer: The answer.
        """
        if fails:
            raise ValueError("no answer")
        return f"final {answer}"

    def reply(request: ModelRequest) -> Any:
        if any(m.tool_results for m in request.messages):
            return "talked on after final"
        return FunctionModel.call("final", {"answer": "42"})

    return Agent(FunctionModel(reply), name=name, tools=[final], **kw)


def _echo(name: str) -> Agent:
    return Agent(FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name)


def test_stopping_result_is_the_call_that_stopped_the_run() -> None:
    """tool_called names the call whose result is the run's answer; other finishes have none."""
    state = start(spec("search"), spec("final"), stop_when=[tool_called("final")])
    state = reduce(state, responded(call("c1", "search"), call("c2", "final")))
    state = reduce(state, ToolReturned("c1", "found"))
    state = reduce(state, ToolReturned("c2", "the answer"))
    assert state.finish_reason == "tool_called"
    assert stopping_result(state) == ToolResultPart("c2", "final", "the answer")
    assert stopping_result(_after_tool_step(start(spec("t")), "t", "c1")) is None
    stopped = reduce(_after_tool_step(start(spec("t")), "t", "c1"), StopRequested("stop_condition"))
    assert stopping_result(stopped) is None


def test_a_step_stopped_by_tool_called_with_no_result_found_fails() -> None:
    """When the stopping call's result cannot be found (the condition is not the run's own any more), the step fails rather than passing ``null`` on."""
    state = start(spec("final"), stop_when=[tool_called("final")])
    state = reduce(state, responded(call("c1", "final")))
    state = reduce(state, ToolReturned("c1", "the answer"))
    assert unanswered(state) is None
    assert step_output(state) == '"the answer"'
    handed = attrs.evolve(state, config=attrs.evolve(state.config, stop_when=()))
    assert stopping_result(handed) is None
    assert unanswered(handed) == (
        "Error: the step's run was stopped by tool_called, but no result of that tool "
        "is found to pass on"
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_step_stopped_by_tool_called_passes_the_calls_result_on(stream: bool) -> None:
    """Like a stop at that tool: the next step gets the call's result, not ``null``."""
    flow = Sequence(_stopper("first", stop_when=[tool_called("final")]), _echo("next"), name="s")
    if stream:
        events = flow.stream("go")
        list(events)
        response = events.response
    else:
        response = flow.run("go")
    assert response.text == "next(final 42)"


def test_an_agent_tool_stopped_by_tool_called_answers_with_the_calls_result() -> None:
    """The calling model sees the call's result; an error result when that call failed."""
    seen: list[tuple[str, bool]] = []

    def lead_reply(request: ModelRequest) -> Any:
        results = [r for m in request.messages for r in m.tool_results]
        if results:
            seen.append((results[0].content, results[0].is_error))
            return "done"
        return FunctionModel.call("first", {"input": "x"})

    for fails in (False, True):
        first = _stopper("first", fails, stop_when=[tool_called("final")])
        Agent(FunctionModel(lead_reply), tools=[first.as_tool()]).run("go")
    assert seen[0] == ("final 42", False)
    assert seen[1][1]
    assert "no answer" in seen[1][0]


@pytest.mark.parametrize(
    ("condition", "fails", "says"),
    [
        (lambda s: any(c.call.name == "final" for c in s.calls), False, r"\(stop_condition\)"),
        (tool_called("final"), True, r"call to 'final' that stopped the step's run failed"),
    ],
    ids=["callable", "failed call"],
)
def test_a_step_stopped_without_an_answer_has_failed(
    condition: Any, fails: bool, says: str
) -> None:
    """A step stopped by a callable, or by tool_called whose call failed, has nothing to pass on: on_error applies."""
    first = _stopper("first", fails, stop_when=[condition])
    with pytest.raises(RunError, match=rf"step 'first' .*{says}"):
        Sequence(first, _echo("next")).run("go")
    skipped = Sequence(Task(first, on_error="skip"), _echo("next")).run("go")
    assert skipped.text == "next(go)"
    assert re.search(says, skipped.errors["first"])
