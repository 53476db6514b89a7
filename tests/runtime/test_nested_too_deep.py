"""Agents as tools nested deeper than a blocking run's stack allows: a clear, non-retryable error."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import pytest

from toolfold import Agent, RunError
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
