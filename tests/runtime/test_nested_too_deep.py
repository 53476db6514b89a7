"""Agents as tools nested deeper than a blocking run's stack allows: a clear, non-retryable error."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import pytest

from toolfold import Agent, RunError, Tool
from toolfold.runtime import RunState
from toolfold.runtime.core._reducer import blank_state
from toolfold.runtime.drive._failures import blocking_sub_run, model_failure
from toolfold.testing import FunctionModel


def _chain(depth: int) -> Agent:
    """Agent a<depth> calls a<depth-1> as a tool, and so on down to a0, which answers."""
    current = Agent(FunctionModel(lambda request: "leaf", keep_requests=False), name="a0")
    for level in range(1, depth + 1):
        name = current.name

        def reply(request: Any, name: str | None = name) -> Any:
            last = request.messages[-1]
            if last.role == "tool":
                return "up:" + last.tool_results[0].content[:20]
            return FunctionModel.call(name, {"input": "go"})

        current = Agent(
            FunctionModel(reply, keep_requests=False),
            name=f"a{level}",
            tools=[current.as_tool()],
        )
    return current


def _first_error(state: RunState) -> str | None:
    for message in state.messages:
        if message.role == "tool" and message.tool_results[0].is_error:
            return message.tool_results[0].content
    for child in state.sub_runs.values():
        found = _first_error(child)
        if found is not None:
            return found
    return None


def test_a_blocking_run_nested_too_deep_says_so_and_names_arun() -> None:
    """The deepest sub-run's error names the depth problem and arun, and asks for no retry."""
    response = _chain(120).run("go")
    error = _first_error(response.state)
    assert error is not None
    assert "recursion limit" in error
    assert "nested too deep for a blocking run" in error
    assert "arun" in error
    assert "resume it to retry" not in error


def test_the_same_chain_runs_to_the_end_with_arun() -> None:
    """arun, which the error suggests, runs the chain the blocking run could not."""
    response = asyncio.run(_chain(120).arun("go"))
    assert _first_error(response.state) is None
    assert response.usage.requests == 2 * 120 + 1


def test_a_recursion_error_in_a_deeply_nested_model_call_is_no_retryable_model_failure() -> None:
    """In blocking sub-runs nested deep, `model_failure` of a RecursionError says the run is too
    deep, not "resume it to retry"."""
    state = blank_state()
    with contextlib.ExitStack() as levels:
        for _ in range(sys.getrecursionlimit() // 25):
            levels.enter_context(blocking_sub_run())
        error = model_failure(RecursionError("maximum recursion depth exceeded"), state, 3)
    assert error.state is state
    assert "the model call of step 3 hit Python's recursion limit" in str(error)
    assert "nested too deep for a blocking run" in str(error)
    assert "resume it to retry" not in str(error)
    plain = model_failure(ValueError("no"), state, 3)
    assert "resume it to retry" in str(plain)


@pytest.mark.parametrize("how", ["run", "arun"])
def test_a_recursion_error_of_a_model_not_nested_stays_a_retryable_model_failure(how: str) -> None:
    """A model raising RecursionError in a run not nested deep fails as any model call does."""

    def recursing(request: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    agent = Agent(FunctionModel(recursing), name="solo")
    with pytest.raises(RunError) as caught:
        agent.run("hi") if how == "run" else asyncio.run(agent.arun("hi"))
    message = str(caught.value)
    assert message.startswith("the model call of step 1 failed: RecursionError")
    assert "resume it to retry" in message
    assert "too deep" not in message
    assert caught.value.state is not None


class _Deep(Tool[..., Any]):
    """A tool whose argument check runs out of stack, as a round deep in nested sub-runs can."""

    def validate_arguments(self, raw: Any) -> dict[str, Any]:
        raise RecursionError("maximum recursion depth exceeded")


def _deep() -> Tool[..., Any]:
    return _Deep("deep", "Deep.", {"type": "object", "properties": {}}, lambda args: "x")


def test_a_blocking_sub_run_whose_round_runs_out_of_stack_keeps_its_paid_model_call() -> None:
    """Nested 40 blocking levels deep, a sub-agent answers (a billed call), then its round of
    calls hits the recursion limit: the call's error keeps that sub-run, so the caller's
    tree usage counts the answer, and its state is where the round began."""
    inner = Agent(
        FunctionModel(lambda request: FunctionModel.call("deep", {}), keep_requests=False),
        name="inner",
        tools=[_deep()],
    )

    def lead_reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return FunctionModel.call("inner", {"input": "go"})

    lead = Agent(FunctionModel(lead_reply), name="lead", tools=[inner.as_tool()])
    with contextlib.ExitStack() as levels:
        for _ in range(sys.getrecursionlimit() // 25):
            levels.enter_context(blocking_sub_run())
        response = lead.run("go")
    error = _first_error(response.state)
    assert error is not None
    assert "the blocking sub-run of agent 'inner' hit Python's recursion limit" in error
    (sub,) = response.state.sub_runs.values()
    assert (sub.phase, sub.usage.requests) == ("running_tools", 1)
    assert [c.call.name for c in sub.calls] == ["deep"]
    assert response.state.tree_usage.requests == 3  # the lead's two answers and inner's one
    assert RunState.from_json(response.state.to_json()) == response.state


def test_a_chain_too_deep_for_a_blocking_run_counts_every_answer_a_model_gave() -> None:
    """Whatever frame the stack runs out at (a range of recursion limits moves it through a
    level: in a model call, in a round's argument check...), every answer a model gave,
    billed, counts in the top run's tree usage."""
    answers = [0]

    def leaf(request: Any) -> Any:
        answers[0] += 1
        return "leaf"

    current = Agent(FunctionModel(leaf, keep_requests=False), name="a0")
    for level in range(1, 121):
        name = current.name

        def reply(request: Any, name: str | None = name) -> Any:
            last = request.messages[-1]
            made = "up" if last.role == "tool" else FunctionModel.call(name, {"input": "go"})
            answers[0] += 1  # (an answer made: one whose making ran out of stack is none)
            return made

        current = Agent(
            FunctionModel(reply, keep_requests=False), name=f"a{level}", tools=[current.as_tool()]
        )
    limit = sys.getrecursionlimit()
    counted = []
    try:
        for extra in range(12):  # (a level takes about a dozen frames)
            sys.setrecursionlimit(limit + extra)
            answers[0] = 0
            state = current.run("go").state
            counted.append((answers[0], state.tree_usage.requests))
    finally:
        sys.setrecursionlimit(limit)
    assert all(made == requests for made, requests in counted), counted
