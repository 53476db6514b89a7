"""Resuming a failed workflow keeps every billed model call counted, each once (`AttemptDropped`).

The events are found by ``kind``, so that each test fails on a toolfold without the event
at the usage it undercounts rather than at an import.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest

from toolfold import Agent, RunError, RunState, Sequence, token_budget, tool
from toolfold.runtime import (
    Message,
    ModelResponse,
    Usage,
    replay,
)
from toolfold.testing import FunctionModel, ScriptedModel

KEY = "usage-key"


def _answer(text: str, tokens: int) -> ModelResponse:
    """A scripted answer whose usage is ``tokens`` in, ``tokens // 10`` out, one request."""
    return ModelResponse(Message.assistant(text), Usage(tokens, tokens // 10, requests=1))


def _lookup(tokens: int) -> ModelResponse:
    """A scripted call to ``lookup`` whose usage is ``tokens`` in, ``tokens // 10`` out."""
    call = ScriptedModel.call("lookup", {"q": "x"})
    return ModelResponse(
        Message("assistant", (call,)), Usage(tokens, tokens // 10, requests=1), "tool_calls"
    )


@tool
def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: What to look up.
    """
    return "found " + q


def _served(model: ScriptedModel, script: list[ModelResponse]) -> Usage:
    """The usage of the responses ``model`` served so far (the first ones of ``script``)."""
    total = Usage()
    for response in script[: len(model.requests)]:
        total = total + response.usage
    return total


def _failed(call: Any, phase: str = "failed") -> RunState:
    """The state (in ``phase``) of the RunError ``call()`` raises, after a signed JSON round
    trip."""
    with pytest.raises(RunError) as caught:
        call()
    state = caught.value.state
    assert state is not None
    assert state.phase == phase
    loaded = RunState.from_json(state.to_json(key=KEY), key=KEY)
    assert loaded == state
    return loaded


def _round_trips(state: RunState) -> None:
    """``state`` replays from its log and survives a signed JSON round trip exactly."""
    assert replay(state.events) == state
    assert RunState.from_json(state.to_json(key=KEY), key=KEY) == state
    assert RunState.from_json(state.to_json(key=KEY), key=KEY).tree_usage == state.tree_usage


def _wrap(agent: Agent, nested: bool) -> Sequence:
    inner = Sequence(agent, name="inner")
    return Sequence(inner if nested else agent, name="top")


@pytest.mark.parametrize("nested", [False, True], ids=["step", "nested-step"])
def test_a_rejected_answer_stays_counted_through_two_resumes(nested: bool) -> None:
    """An agent step whose answer did not fit its output type, resumed twice (failing again
    once), counts every answer the model gave, once: in the tree's usage and the agent's own."""
    script = [_answer('"nope"', 100), _answer('"no"', 200), _answer('"a"', 400)]
    model = ScriptedModel(list(script))
    agent = Agent(model, name="ag", output_type=Literal["a", "b"], output_retries=0)
    workflow = _wrap(agent, nested)

    state = _failed(lambda: workflow.run("x"))
    assert state.tree_usage == _served(model, script) == Usage(100, 10, requests=1)

    again = _failed(lambda: workflow.resume(state))
    assert len(model.requests) == 2
    assert again.tree_usage == _served(model, script) == Usage(300, 30, requests=2)
    _round_trips(again)

    response = workflow.resume(again)
    assert response.output == "a"
    assert len(model.requests) == 3
    assert response.usage == _served(model, script) == Usage(700, 70, requests=3)
    assert response.state.tree_usage == response.usage
    run = response.state
    if nested:
        (run,) = run.sub_runs.values()
    (child,) = run.sub_runs.values()
    assert child.usage == Usage(700, 70, requests=3)  # the agent's own calls, all of them
    dropped = [e for e in child.events if e.kind == "attempt_dropped"]
    assert [e.usage for e in dropped] == [Usage(100, 10, requests=1), Usage(200, 20, requests=1)]
    _round_trips(response.state)


@pytest.mark.parametrize("nested", [False, True], ids=["step", "nested-step"])
def test_a_step_that_starts_over_keeps_its_failed_attempts_counted(nested: bool) -> None:
    """An agent step that reached its max_steps starts over on resume; after failing again and
    a second resume, response.usage counts all six model calls the model served, once."""
    script = [_lookup(100), _lookup(200), _lookup(400), _lookup(800)]
    script += [_lookup(1600), _answer("done", 3200)]
    model = ScriptedModel(list(script))
    agent = Agent(model, name="ag", tools=[lookup], max_steps=2)
    workflow = _wrap(agent, nested)

    state = _failed(lambda: workflow.run("x"))
    assert len(model.requests) == 2
    assert state.tree_usage == _served(model, script) == Usage(300, 30, requests=2)

    again = _failed(lambda: workflow.resume(state))
    assert len(model.requests) == 4
    assert again.tree_usage == _served(model, script) == Usage(1500, 150, requests=4)
    _round_trips(again)

    response = workflow.resume(again)
    assert response.output == "done"
    assert len(model.requests) == 6
    assert response.usage == _served(model, script) == Usage(6300, 630, requests=6)
    run = response.state
    if nested:
        (run,) = run.sub_runs.values()
    dropped = [e for e in run.events if e.kind == "attempt_dropped"]
    assert [e.sub_run_usage for e in dropped] == [
        Usage(300, 30, requests=2),
        Usage(1200, 120, requests=2),
    ]
    assert all(e.usage == Usage() for e in dropped)
    _round_trips(response.state)


def test_a_resume_that_drops_nothing_billed_adds_no_event() -> None:
    """A step failed by a function (no model call dropped) resumes with a log free of
    AttemptDropped, as before."""
    down = [True]

    def flaky(text: str) -> str:
        if down[0]:
            raise ValueError("down")
        return "ok"

    model = ScriptedModel([_answer("a", 100)])
    workflow = Sequence(Agent(model, name="ag"), flaky, name="top")
    state = _failed(lambda: workflow.run("x"))
    down[0] = False
    response = workflow.resume(state)
    assert response.output == "ok"
    assert not any(e.kind == "attempt_dropped" for e in response.state.events)
    assert response.usage == Usage(100, 10, requests=1)


@tool(requires_approval=True)
def guarded(q: str) -> str:
    """Look something up, once the user approves.

    Args:
        q: What to look up.
    """
    return "guarded " + q


def _call(name: str, tokens: int, argument: str = "q") -> ModelResponse:
    """A scripted call to tool ``name`` (``argument="x"``) using ``tokens`` in, one out, one
    request."""
    call = ScriptedModel.call(name, {argument: "x"})
    return ModelResponse(Message("assistant", (call,)), Usage(tokens, 1, requests=1), "tool_calls")


def _done(tokens: int) -> ModelResponse:
    """A scripted final answer whose usage is ``tokens`` in, one out, one request."""
    return ModelResponse(Message.assistant("done"), Usage(tokens, 1, requests=1))


def test_a_step_approved_then_at_max_steps_starts_over_and_asks_again() -> None:
    """An agent step that waited for an approval, then reached max_steps, starts over on
    resume (its approval asked for again, its two model calls made again) and counts every
    billed call once, over three resumes."""
    script = [_call("guarded", 1), _call("lookup", 10), _call("guarded", 100)]
    script += [_call("lookup", 1000), _done(10000)]
    model = ScriptedModel(list(script))
    agent = Agent(model, name="ag", tools=[guarded, lookup], max_steps=2)
    workflow = Sequence(agent, name="top")

    waiting = workflow.run("x")
    (asked,) = waiting.pending_approvals
    state = _failed(lambda: workflow.resume(waiting.state, approvals={asked.id: True}))
    assert len(model.requests) == 2
    assert state.tree_usage == _served(model, script) == Usage(11, 2, requests=2)

    again = workflow.resume(state)  # the step starts over: its approval is asked for again
    assert len(model.requests) == 3
    (asked_again,) = again.pending_approvals
    assert asked_again.name == "guarded"
    assert again.state.tree_usage == _served(model, script) == Usage(111, 3, requests=3)
    _round_trips(again.state)

    failed_again = _failed(lambda: workflow.resume(again.state, approvals={asked_again.id: True}))
    assert len(model.requests) == 4  # two model calls in this attempt, as max_steps=2 allows
    assert failed_again.tree_usage == _served(model, script) == Usage(1111, 4, requests=4)
    _round_trips(failed_again)

    response = workflow.resume(failed_again)
    assert response.output == "done"
    assert len(model.requests) == 5
    assert response.usage == _served(model, script) == Usage(11111, 5, requests=5)
    assert response.state.tree_usage == response.usage
    _round_trips(response.state)


def test_a_step_resumed_after_a_raise_then_at_max_steps_counts_each_call_once() -> None:
    """An agent step failed by a tool with on_tool_error="raise" (resumed: it goes on), then
    at max_steps (resumed: it starts over, with two fresh model calls each time), counts every
    billed model call once over four resumes."""
    down = [True]

    @tool
    def flaky(q: str) -> str:
        """Look something up, failing the first time.

        Args:
            q: What to look up.
        """
        if down[0]:
            down[0] = False
            raise ValueError("down")
        return "ok " + q

    script = [_call("flaky", 10**i) for i in range(6)] + [_done(10**6)]
    model = ScriptedModel(list(script))
    agent = Agent(model, name="ag", tools=[flaky], max_steps=2, on_tool_error="raise")
    workflow = Sequence(agent, name="top")

    state = _failed(lambda: workflow.run("x"))
    assert state.tree_usage == _served(model, script) == Usage(1, 1, requests=1)
    for requests in (2, 4, 6):  # the raise goes on (one call); max_steps starts over (two)
        state = _failed(lambda: workflow.resume(state))  # noqa: B023
        assert len(model.requests) == requests
        assert state.tree_usage == _served(model, script)
        _round_trips(state)
    assert state.tree_usage == Usage(111111, 6, requests=6)

    response = workflow.resume(state)
    assert response.output == "done"
    assert response.usage == _served(model, script) == Usage(1111111, 7, requests=7)
    assert response.state.tree_usage == response.usage


@pytest.mark.parametrize("in_workflow", [False, True], ids=["agent", "workflow-step"])
def test_an_agent_tool_failing_under_on_tool_error_raise_stays_counted(in_workflow: bool) -> None:
    """An agent used as a tool that reaches its max_steps under on_tool_error="raise" leaves the
    error's state counting its model calls, once, through two resumes that fail again and one
    that finishes."""
    inner_script = [_call("lookup", 10**k) for k in range(6)] + [_done(2 * 10**6)]
    outer_script = [_call("inner", 10**6, "input"), _done(10**7)]
    inner_model, outer_model = ScriptedModel(list(inner_script)), ScriptedModel(outer_script)
    inner = Agent(inner_model, name="inner", tools=[lookup], max_steps=2)
    outer = Agent(outer_model, name="outer", tools=[inner.as_tool()], on_tool_error="raise")
    runner: Any = Sequence(outer, name="top") if in_workflow else outer

    def served() -> Usage:
        return _served(inner_model, inner_script) + _served(outer_model, outer_script)

    phase = "failed" if in_workflow else "running_tools"  # (the agent's: before the round)
    state = _failed(lambda: runner.run("x"), phase)
    assert state.tree_usage == served() == Usage(1000011, 3, requests=3)
    _round_trips(state)
    for usage in (Usage(1001111, 5, requests=5), Usage(1111111, 7, requests=7)):
        state = _failed(lambda: runner.resume(state), phase)  # noqa: B023
        assert state.tree_usage == served() == usage
        _round_trips(state)

    response = runner.resume(state)
    assert response.output == "done"
    assert response.usage == served() == Usage(13111111, 9, requests=9)
    assert response.state.tree_usage == response.usage


def _rejected_then_a(usage: Usage) -> FunctionModel:
    """A model whose first answer does not fit Literal["a"], the next one does, each ``usage``."""
    answers = iter(['"no"', '"a"'])
    return FunctionModel(lambda request: ModelResponse(Message.assistant(next(answers)), usage))


def test_a_rejected_answer_with_float_counts_resumes_and_stays_counted() -> None:
    """A custom model reporting float counts (as ModelResponded takes them): the workflow
    resumes after a rejected answer and counts both answers."""
    model = _rejected_then_a(Usage(12.0, 3, requests=1))  # type: ignore[arg-type]
    agent = Agent(model, name="ag", output_type=Literal["a"], output_retries=0)
    workflow = Sequence(agent, name="top")
    with pytest.raises(RunError) as failed:
        workflow.run("x")
    state = failed.value.state  # as it is in memory (a JSON round trip keeps the floats too)
    assert state is not None
    response = workflow.resume(state)
    assert response.output == "a"
    assert response.usage == Usage(24.0, 6, requests=2)  # type: ignore[arg-type]
    _round_trips(response.state)


@pytest.mark.parametrize("bad", [-5, -0.5])
def test_a_rejected_answer_with_a_bad_count_still_resumes(bad: float) -> None:
    """A model reporting a negative count (as ModelResponded takes it; `Usage` refuses NaN and
    infinities): the workflow still resumes after its rejected answer, that count left out of
    the dropped usage (0) and the others kept."""
    model = _rejected_then_a(Usage(bad, 3, requests=1))  # type: ignore[arg-type]
    agent = Agent(model, name="ag", output_type=Literal["a"], output_retries=0)
    workflow = Sequence(agent, name="top")
    with pytest.raises(RunError) as failed:
        workflow.run("x")
    state = failed.value.state
    assert state is not None
    response = workflow.resume(state)
    assert response.output == "a"
    dropped = [e for e in response.state.sub_runs["ag"].events if e.kind == "attempt_dropped"]
    assert [(e.usage.input_tokens, e.usage.output_tokens, e.usage.requests) for e in dropped] == [
        (0, 3, 1)
    ]


def test_a_token_budget_counts_a_dropped_answer_and_says_so() -> None:
    """token_budget counts the rejected answer a resume dropped (it was billed), so the resumed
    step stops at its budget after one new model call, and the error says where the tokens went."""
    script = [_answer('"no"', 100), _lookup(100), _answer('"a"', 100)]
    model = ScriptedModel(list(script))
    agent = Agent(
        model,
        name="ag",
        tools=[lookup],
        output_type=Literal["a"],
        output_retries=0,
        stop_when=[token_budget(150)],
    )
    workflow = Sequence(agent, name="top")
    state = _failed(lambda: workflow.run("x"))
    again = _failed(lambda: workflow.resume(state))
    assert len(model.requests) == 2
    assert again.error is not None
    assert (
        "stopped at its limit token_budget=150 (220 tokens used, 110 of them by an answer "
        "dropped to ask the model again) after 1 model call without answering"
        in again.error.message
    )
    assert again.tree_usage == _served(model, script) == Usage(200, 20, requests=2)
