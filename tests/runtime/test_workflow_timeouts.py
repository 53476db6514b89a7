"""Per-step timeouts: an attempt past its deadline fails and goes through the step's on_error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolfold import Agent, RunError, RunState, Sequence, Task, WorkflowDefinitionError
from toolfold.runtime import fork, replay
from toolfold.testing import FunctionModel


def echo(name: str) -> Agent:
    """An agent that answers ``name(<its prompt>)``."""
    return Agent(FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name)


class Stuck:
    """An async step whose first ``stuck`` attempts never end (until cancelled)."""

    def __init__(self, stuck: int) -> None:
        self.stuck = stuck
        self.attempts = 0
        self.cancelled = 0

    async def __call__(self, text: str) -> str:
        self.attempts += 1
        if self.attempts <= self.stuck:
            try:
                await asyncio.Event().wait()  # never set: only the timeout ends it
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return f"fetched({text})"


def exact(state: RunState) -> None:
    """The state replays from its log and survives JSON exactly."""
    assert replay(state.log) == state
    assert RunState.from_json(state.to_json()) == state


def test_a_step_past_its_timeout_is_skipped_with_the_error_recorded() -> None:
    """on_error="skip": the stuck step is stopped, its error names the timeout, the next step runs."""
    fetch = Stuck(stuck=1)
    fetch.__name__ = "fetch"  # type: ignore[attr-defined]
    flow = Sequence(echo("a"), Task(fetch, name="fetch", timeout=0.05, on_error="skip"), echo("b"))
    response = flow.run("x")
    assert response.output == "b(a(x))"
    assert response.errors["fetch"] == "Error: tool 'fetch' timed out after 0.05 s."
    assert fetch.cancelled == 1
    exact(response.state)


def test_a_timed_out_step_is_retried() -> None:
    """on_error="retry": the attempt that timed out is on the record and the next one succeeds."""
    fetch = Stuck(stuck=1)
    flow = Sequence(Task(fetch, name="fetch", timeout=0.05, on_error="retry", retries=2))
    response = flow.run("x")
    assert response.output == "fetched(x)"
    results = [r for m in response.messages for r in m.tool_results]
    assert [(r.call_id, r.is_error) for r in results] == [("fetch", True), ("fetch#2", False)]
    exact(response.state)


def test_a_timed_out_step_fails_the_workflow_with_a_resumable_state() -> None:
    """on_error="fail": RunError names the step and the timeout; a fork before it runs it again."""
    fetch = Stuck(stuck=1)
    flow = Sequence(echo("a"), Task(fetch, name="fetch", timeout=0.05))
    with pytest.raises(
        RunError, match=r"step 'fetch' of Sequence 'sequence' failed: .*timed out"
    ) as info:
        flow.run("x")
    state = info.value.state
    assert state is not None
    assert state.phase == "failed"
    exact(state)
    before = fork(RunState.from_json(state.to_json()), step=state.step - 1)
    again = flow.resume(before)
    assert again.output == "fetched(a(x))"
    assert fetch.attempts == 2
    assert again.outputs["a"] == "a(x)"


def test_an_agent_step_past_its_timeout_is_cancelled() -> None:
    """An agent step whose model never answers is cancelled at the step's timeout."""
    started: list[str] = []

    async def never(request: Any) -> str:
        started.append(request.messages[-1].text)
        await asyncio.Event().wait()
        return "unreachable"

    slow = Agent(FunctionModel(never), name="slow")
    response = Sequence(Task(slow, timeout=0.05, on_error="skip"), echo("b")).run("x")
    assert started == ["x"]
    assert "timed out after 0.05 s" in response.errors["slow"]
    assert response.output == "b(x)"
    assert response.usage.requests == 1


@pytest.mark.parametrize("bad", [0, -1, "soon", True, float("nan"), float("inf")])
def test_a_bad_timeout_is_a_definition_error(bad: Any) -> None:
    """A timeout that is not a positive number of seconds is refused when the workflow is built."""
    with pytest.raises(WorkflowDefinitionError, match="step 'a': timeout must be a number"):
        Sequence(Task(echo("a"), timeout=bad))
