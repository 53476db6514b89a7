"""What a run holds while it waits: only what it still needs (many runs may be in flight)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Sequence
from typing import Any

import pytest

from toolfold import Agent, ModelRequest, RunState, agenerate_text
from toolfold.runtime._run import fresh, run_async
from toolfold.runtime.drive._trace import set_tracer
from toolfold.testing import FunctionModel


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


class _Ignored:
    def __init__(self, jobs: Sequence[Any] = ()) -> None:
        self.jobs = jobs

    def attach(self) -> None:
        pass

    def detach(self, token: object) -> None:
        pass

    def end(self, *args: Any) -> None:
        pass


class _FirstStates:
    """A tracer keeping a weak reference to the state each run starts from."""

    def __init__(self) -> None:
        self.first: list[weakref.ref[RunState]] = []

    def start_run(self, live: Any, state: RunState) -> _FirstStates:
        self.first.append(weakref.ref(state))
        return self

    def model_call(self, request: ModelRequest) -> _Ignored:
        return _Ignored()

    def tools(self, jobs: Sequence[Any]) -> _Ignored:
        return _Ignored(jobs)

    def handoff(self, live: Any) -> None:
        pass

    def end(self, state: RunState | None, error: BaseException | None) -> None:
        pass


def _model(alive: list[bool], tracer: _FirstStates) -> FunctionModel:
    async def reply(request: ModelRequest) -> Any:
        if len(request.messages) == 1:
            return FunctionModel.call("add", {"a": 1, "b": 2})
        await asyncio.sleep(0)
        gc.collect()
        alive.append(tracer.first[-1]() is not None)
        return "3"

    return FunctionModel(reply)


@pytest.mark.parametrize("how", ["Agent.arun", "agenerate_text", "run_async", "Agent._astep_run"])
def test_a_run_waiting_for_its_second_answer_no_longer_holds_its_first_state(how: str) -> None:
    """While the model answers the second request, nothing of the async drivers keeps the run's
    first state alive (the loop holds the newest): one state and two logs fewer per waiting run."""
    tracer = _FirstStates()
    alive: list[bool] = []
    model = _model(alive, tracer)
    agent = Agent(model, tools=[add])

    async def main() -> str:
        if how == "Agent.arun":
            return (await agent.arun("add 1 and 2")).text
        if how == "agenerate_text":
            return (await agenerate_text(model, "add 1 and 2", tools=[add])).text
        if how == "run_async":
            return (
                await run_async(*fresh(agent._run_options(None), "add", None, *[None] * 3))
            ).text
        ended = await agent._astep_run("add 1 and 2", None, "step-run")  # a workflow step's run
        return ended.state.last_text

    old = set_tracer(tracer)
    try:
        text = asyncio.run(main())
    finally:
        set_tracer(old)
    assert text == "3"
    assert alive == [False]


def test_runs_without_values_of_their_own_share_one_live_half() -> None:
    """Two plain runs of an agent share its live half (frozen); a run with deps or an
    observer gets its own, and each sees what it was given."""
    agent = Agent(FunctionModel(lambda request: "hi"), tools=[add])
    options = agent._run_options(None)
    plain = [fresh(options, "hi", None, None, None, None)[0] for _ in range(2)]
    assert plain[0] is plain[1]
    assert not plain[0].handoffs
    with pytest.raises(TypeError):
        plain[0].handoffs["x"] = None  # type: ignore[index]
    seen: list[Any] = []
    watched = fresh(options, "hi", None, "deps", seen.append, None)[0]
    assert watched is not plain[0]
    assert (watched.deps, watched.on_event) == ("deps", seen.append)
    assert agent.run("hi", on_event=seen.append).text == "hi"
    assert seen  # the observer saw the run's events
