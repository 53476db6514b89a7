"""A workflow's own functions (until, merge, a router) and a stop_when callable are named."""

from __future__ import annotations

import asyncio
import functools
import re
from typing import Any

import pytest

from toolfold import Agent, Loop, Parallel, Route, RunError, RunState, Sequence, Task, tool
from toolfold.testing import ScriptedModel


def text(x: str) -> str:
    """Its input."""
    return x


def other(x: str) -> str:
    """Its input, marked."""
    return x + "!"


def broken_until(value: str) -> bool:
    """An until that raises."""
    raise ValueError("until broke")


def broken_merge(outputs: dict[str, str]) -> str:
    """A merge that raises."""
    raise ValueError("merge broke")


def broken_router(x: str) -> str:
    """A router that raises."""
    raise KeyError("r")


@pytest.mark.parametrize(
    ("workflow", "message"),
    [
        (
            Loop(text, until=broken_until),
            "the until function (test_workflow_user_functions:broken_until) of Loop 'loop' "
            "raised ValueError: until broke",
        ),
        (
            Parallel(text, other, merge=broken_merge),
            "the merge function (test_workflow_user_functions:broken_merge) of Parallel "
            "'parallel' raised ValueError: merge broke",
        ),
        (
            Route(broken_router, {"a": text}),
            "the router function (test_workflow_user_functions:broken_router) of Route 'route' "
            "raised KeyError: 'r'",
        ),
    ],
)
def test_a_workflow_function_that_raises_is_named(workflow: object, message: str) -> None:
    """The RunError says which function of which workflow raised (it used to say only
    "workflow 'loop': ValueError: ...")."""
    with pytest.raises(RunError, match=re.escape(message)) as info:
        workflow.run("x")  # type: ignore[attr-defined]
    assert info.value.state is not None


def stop_after_one_call(state: RunState) -> bool:
    """A stop_when callable: stop after the first model call."""
    return state.step >= 1


@tool
def submit(answer: str) -> str:
    """Submit an answer.

    Args:
        answer: The answer.
    """
    return f"submitted {answer}"


def _stopped_agent() -> Agent:
    return Agent(
        ScriptedModel([ScriptedModel.call("submit", {"answer": "1"})]),
        name="sub",
        tools=[submit],
        stop_when=[stop_after_one_call],
    )


STOPPED_BY = (
    "was stopped by a stop_when condition (test_workflow_user_functions:stop_after_one_call)"
)


def test_a_step_stopped_by_a_stop_when_function_names_it() -> None:
    """A step agent a stop_when callable stopped fails naming the callable (it used to say
    "(stop_condition)"), run blocking, async and streamed."""
    for run in (
        lambda: Sequence(_stopped_agent(), name="s").run("x"),
        lambda: asyncio.run(Sequence(_stopped_agent(), name="s").arun("x")),
        lambda: list(Sequence(_stopped_agent(), name="s").stream("x")),
    ):
        with pytest.raises(RunError, match=re.escape(f"the step's run {STOPPED_BY} after 1")):
            run()


def test_an_agent_tool_stopped_by_a_stop_when_function_names_it() -> None:
    """The calling model reads which stop_when callable stopped the agent used as a tool."""
    lead = Agent(
        ScriptedModel([ScriptedModel.call("sub", {"input": "q"}), "fin"]),
        tools=[_stopped_agent().as_tool()],
    )
    result = lead.run("go").messages[-2].tool_results[0]
    assert result.is_error
    assert result.content == f"Error: agent 'sub' {STOPPED_BY} after 1 model call without answering"


class _AfterOneCall:
    """A callable object as a stop_when condition."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, state: RunState) -> bool:
        self.calls += 1
        return state.step >= 1


def _after(state: RunState, calls: int) -> bool:
    """Holds once ``calls`` model calls were made."""
    return state.step >= calls


def _stop_text(condition: Any) -> str:
    """The error a step agent stopped by ``condition`` (its only stop_when) skips with."""
    agent = Agent(
        ScriptedModel([ScriptedModel.call("submit", {"answer": "1"})]),
        name="sub",
        tools=[submit],
        stop_when=[condition],
    )
    return Sequence(Task(agent, on_error="skip"), name="s").run("x").errors["sub"]


def test_a_callable_object_or_partial_stop_when_is_named_without_an_address() -> None:
    """A callable object is named by its class and a functools.partial by its function,
    not by a repr() with a memory address."""
    assert "(test_workflow_user_functions._AfterOneCall instance)" in _stop_text(_AfterOneCall())
    assert "(test_workflow_user_functions:_after)" in _stop_text(functools.partial(_after, calls=1))


def test_several_stop_when_callables_are_not_called_again_to_name_one() -> None:
    """With several callables the error names them all, and each ran once, at the one check (they
    used to run again on the finished state, repeating their side effects)."""
    never, stopper = _AfterOneCall(), _AfterOneCall()
    agent = Agent(
        ScriptedModel([ScriptedModel.call("submit", {"answer": "1"})]),
        name="sub",
        tools=[submit],
        stop_when=[lambda state: never(state) and False, stopper],
    )
    error = Sequence(Task(agent, on_error="skip"), name="s").run("x").errors["sub"]
    assert "(one of test_workflow_user_functions.test_several" in error
    assert "_AfterOneCall instance)" in error
    assert (never.calls, stopper.calls) == (1, 1)
