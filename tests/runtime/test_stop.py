"""Stop conditions: pure functions over state, as data in the config or as callables."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from core_helpers import answer, call, responded, spec, start

from toolfold import (
    Agent,
    InvalidEventError,
    ModelRequest,
    Response,
    RunError,
    Sequence,
    Task,
    tool,
)
from toolfold.runtime import (
    Finish,
    MaxSteps,
    Message,
    ModelResponse,
    RunState,
    StepLimitChanged,
    StopRequested,
    TokenBudget,
    ToolCalled,
    ToolResultPart,
    ToolReturned,
    Usage,
    max_steps,
    next_effect,
    reduce,
    replay,
    stop_reason,
    stopping_result,
    token_budget,
    tool_called,
)
from toolfold.runtime._task import step_result
from toolfold.runtime._view import to_html
from toolfold.runtime.core._stop import stop_event
from toolfold.testing import FunctionModel, ScriptedModel


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


def _stopper(name: str, fails: bool = False, approve: bool = False, **kw: Any) -> Agent:
    """An agent whose model calls ``final`` once, then talks on (were it asked again).

    With ``approve``, ``final`` requires approval: the run waits for it.
    """

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

    return Agent(
        FunctionModel(reply), name=name, tools=[tool(final, requires_approval=approve)], **kw
    )


def _echo(name: str) -> Agent:
    return Agent(FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name)


def _lead(tool_name: str, seen: list[ToolResultPart], answer: str = "done") -> FunctionModel:
    """A calling model: it calls ``tool_name`` once, keeps the results it reads in ``seen``, then answers."""

    def reply(request: ModelRequest) -> Any:
        results = [r for m in request.messages for r in m.tool_results]
        if results:
            seen.extend(results)
            return answer
        return FunctionModel.call(tool_name, {"input": "x"})

    return FunctionModel(reply)


def _read(seen: list[ToolResultPart]) -> list[tuple[str, bool]]:
    return [(r.content, r.is_error) for r in seen]


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
    """When the stopping call's result cannot be found (a stop recorded without its condition), the step fails rather than passing ``null`` on."""
    state = start(spec("final"), stop_when=[tool_called("final")])
    state = reduce(state, responded(call("c1", "final")))
    state = reduce(state, ToolReturned("c1", "the answer"))
    assert step_result(state) == ('"the answer"', False)
    unnamed = reduce(
        _after_tool_step(start(spec("final")), "final", "c1"), StopRequested("tool_called")
    )
    assert stopping_result(unnamed) is None
    assert step_result(unnamed) == (
        "Error: the step's run was stopped by tool_called, but no result of that tool is found",
        True,
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
    seen: list[ToolResultPart] = []
    for fails in (False, True):
        first = _stopper("first", fails, stop_when=[tool_called("final")])
        Agent(_lead("first", seen), tools=[first.as_tool()]).run("go")
    (ok, failed) = _read(seen)
    assert ok == ("final 42", False)
    assert failed[1]
    assert "no answer" in failed[0]


@pytest.mark.parametrize(
    ("condition", "fails", "says"),
    [
        (lambda s: any(c.call.name == "final" for c in s.calls), False, r"\(test_stop.<lambda>\)"),
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


def test_a_stop_recorded_by_the_driver_names_its_condition() -> None:
    """A plain-data condition the state does not store rides in its StopRequested: the stop says which call answers, and replays."""
    state = _after_tool_step(start(spec("search"), spec("final")), "final", "c1")
    assert stop_event(state, [tool_called("search")]) is None
    stop = stop_event(state, [tool_called("search"), tool_called("final")])
    assert stop == StopRequested("tool_called", ToolCalled("final"))
    assert stop_event(state, [lambda s: True, max_steps(1)]) == StopRequested("stop_condition")
    assert stop is not None
    stopped = reduce(state, stop)
    assert stopping_result(stopped) == ToolResultPart("c1", "final", "x")
    assert replay(stopped.log) == stopped
    assert stopping_result(RunState.from_json(stopped.to_json())) == stopping_result(stopped)
    assert "tool_called(&#x27;final&#x27;)" in to_html(stopped)  # the run's page names it
    # a later change of the step limit keeps the stop, and its answer
    assert stopping_result(reduce(stopped, StepLimitChanged(5))) == stopping_result(stopped)


@pytest.mark.parametrize(
    ("stop", "says"),
    [
        (StopRequested("tool_called", ToolCalled("search")), "tool_called('search') does not hold"),
        (StopRequested("max_steps", ToolCalled("final")), "not that of its condition"),
        (StopRequested("tool_called", "final"), "must be max_steps, token_budget or tool_called"),  # type: ignore[arg-type]
    ],
    ids=["does not hold", "other reason", "not a condition"],
)
def test_a_stop_whose_condition_does_not_fit_is_refused(stop: StopRequested, says: str) -> None:
    """The reducer checks a recorded condition: it must be data, hold, and give the reason."""
    state = _after_tool_step(start(spec("search"), spec("final")), "final", "c1")
    with pytest.raises(InvalidEventError, match=re.escape(says)):
        reduce(state, stop)


def _approved(response: Response) -> dict[str, bool]:
    return {c.id: True for c in response.pending_approvals}


def test_tool_called_given_to_resume_only_gives_the_calls_result() -> None:
    """A resume whose agent adds tool_called (not stored in the run) still finds the stopping call's result."""
    first = _stopper("first", approve=True)
    waiting = first.run("go")
    assert waiting.finish_reason == "approval_required"
    stopping = first.evolve(stop_when=[tool_called("final")])
    done = stopping.resume(waiting.state, approvals=_approved(waiting))
    assert done.finish_reason == "tool_called"
    assert done.state.config.stop_when == ()  # for this resume only: not stored
    result = stopping_result(done.state)
    assert result is not None
    assert (result.tool_name, result.content) == ("final", "final 42")


def test_a_step_stopped_by_tool_called_given_to_resume_passes_the_result_on() -> None:
    """A workflow resumed with a step agent that adds tool_called passes that call's result to the next step."""
    first = _stopper("first", approve=True)
    waiting = Sequence(first, _echo("next"), name="s").run("go")
    assert waiting.finish_reason == "approval_required"
    stopping = first.evolve(stop_when=[tool_called("final")])
    done = Sequence(stopping, _echo("next"), name="s").resume(
        waiting.state, approvals=_approved(waiting)
    )
    assert done.text == "next(final 42)"


def test_an_agent_tool_stopped_by_tool_called_given_to_resume_answers_with_the_result() -> None:
    """An agent tool resumed with a sub-agent that adds tool_called answers with that call's result."""
    seen: list[ToolResultPart] = []
    first = _stopper("first", approve=True)
    waiting = Agent(_lead("first", seen), tools=[first.as_tool()]).run("go")
    assert waiting.finish_reason == "approval_required"
    stopping = first.evolve(stop_when=[tool_called("final")])
    lead = Agent(_lead("first", seen), tools=[stopping.as_tool()])
    done = lead.resume(waiting.state, approvals=_approved(waiting))
    assert done.text == "done"
    assert _read(seen) == [("final 42", False)]


def _chatty(name: str, **kw: Any) -> Agent:
    """An agent that calls ``ping`` on every step (each with 10 tokens), so only a limit stops it."""

    def ping() -> str:
        """Ping."""
        return "pong"

    def reply(request: ModelRequest) -> Any:
        message = Message("assistant", (FunctionModel.call("ping", {}),))
        return ModelResponse(message, Usage(5, 5, requests=1), "tool_calls")

    return Agent(FunctionModel(reply), name=name, tools=[ping], **kw)


@pytest.mark.parametrize(
    ("options", "reason", "says"),
    [
        ({"max_steps": 2}, "max_steps", "stopped at its limit max_steps=2 after 2 model calls"),
        (
            {"stop_when": [max_steps(3)]},
            "max_steps",
            "stopped at its limit max_steps=3 after 3 model calls",
        ),
        (
            {"stop_when": [token_budget(25)]},
            "token_budget",
            "stopped at its limit token_budget=25 (30 tokens used) after 3 model calls",
        ),
        (
            {"stop_when": [lambda s: s.step >= 2]},
            "stop_condition",
            "was stopped by a stop_when condition (test_stop.<lambda>) after 2 model calls",
        ),
    ],
    ids=["max_steps", "max_steps condition", "token_budget", "callable"],
)
@pytest.mark.parametrize("mode", ["run", "arun", "stream"])
def test_an_agent_tool_stopped_without_answering_is_an_error_result(
    options: dict[str, Any], reason: str, says: str, mode: str
) -> None:
    """The calling model reads an error naming the sub-agent and the limit (not its last text as an answer); the sub-run still nests."""
    seen: list[ToolResultPart] = []
    lead = Agent(_lead("pinger", seen, "coped"), tools=[_chatty("pinger", **options).as_tool()])
    if mode == "run":
        response = lead.run("go")
    elif mode == "arun":
        response = asyncio.run(lead.arun("go"))
    else:
        events = lead.stream("go")
        list(events)
        response = events.response
    assert response.text == "coped"
    (result,) = seen
    assert result.is_error
    assert result.content == f"Error: agent 'pinger' {says} without answering"
    child = response.state.sub_runs[result.call_id]
    assert (child.phase, child.finish_reason) == ("finished", reason)


def test_an_agent_tool_names_the_agent_behind_a_renamed_tool() -> None:
    """With as_tool(name=...), the error names both the agent and the tool the model called."""
    seen: list[ToolResultPart] = []
    sub = _chatty("pinger", max_steps=1).as_tool(name="ask")
    Agent(_lead("ask", seen), tools=[sub]).run("go")
    assert _read(seen) == [
        (
            "Error: agent 'pinger' (tool 'ask') stopped at its limit max_steps=1 after 1 model "
            "call without answering",
            True,
        )
    ]


def test_as_tool_output_still_decides_for_a_stopped_sub_run() -> None:
    """output= reads the Response of a sub-run stopped at a limit too: it may say why itself."""
    seen: list[ToolResultPart] = []
    sub = _chatty("pinger", max_steps=1).as_tool(output=lambda r: f"gave up: {r.finish_reason}")
    Agent(_lead("pinger", seen), tools=[sub]).run("go")
    assert _read(seen) == [("gave up: max_steps", False)]


def test_a_stop_condition_that_raises_says_resuming_calls_it_again() -> None:
    """A raising stop_when callable's error says resuming calls it again first (so it does),
    and how to go on without it (an agent's own: `agent.evolve(stop_when=...)`)."""

    def broken(state: RunState) -> bool:
        raise KeyError("budget")

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedModel([ScriptedModel.call("ping", {}), "done"])
    agent = Agent(model, tools=[ping], stop_when=[broken])
    with pytest.raises(RunError) as caught:
        agent.run("go")
    assert str(caught.value) == (
        "the stop_when condition raised KeyError: 'budget'; the error's state is the run "
        "before its next model call, and resuming it calls this condition again first: fix "
        "the function, or resume without it (an agent's own: resume with "
        "agent.evolve(stop_when=...))"
    )
    state = caught.value.state
    assert state is not None
    assert [r.content for r in state.messages[-1].tool_results] == ["pong"]  # the tool ran
    with pytest.raises(RunError) as again:
        agent.resume(state)
    assert str(again.value) == str(caught.value)
    assert agent.evolve(stop_when=()).resume(state).text == "done"
