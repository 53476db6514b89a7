"""A composed run's tree: usage sums every level, streamed events carry their path down the tree."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolfold import Agent, RunEndEvent, StepStartEvent, SubRunEvent, TextDelta
from toolfold.runtime import RunState, Usage
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


def _level(name: str, below: str | None) -> FunctionModel:
    """Asks the agent below (if any), then answers with what it said."""

    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if below is None:
            return f"{name} here"
        if last.role == "tool" and last.tool_results[0].tool_name == below:
            return f"{name} < " + last.tool_results[0].content
        return call(below, {"input": last.text})

    return FunctionModel(reply)


def _four_levels() -> Agent:
    """top -> l1 -> l2 -> l3: agents as tools, three depths below the top."""
    l3 = Agent(_level("l3", None), name="l3")
    l2 = Agent(_level("l2", "l3"), name="l2", tools=[l3.as_tool()])
    l1 = Agent(_level("l1", "l2"), name="l1", tools=[l2.as_tool()])
    return Agent(_level("top", "l1"), name="top", tools=[l1.as_tool()])


TEXT = "top < l1 < l2 < l3 here"


def _levels(state: RunState) -> list[RunState]:
    """The run and its sub-runs, top first, depth first."""
    found = [state]
    for child in state.sub_runs.values():
        found.extend(_levels(child))
    return found


def _summed(states: list[RunState]) -> Usage:
    total = Usage()
    for state in states:
        total = total + state.usage
    return total


def _run(agent: Agent, how: str, prompt: str = "go") -> tuple[Any, list[Any]]:
    """The response and the streamed events (none for run/arun)."""
    if how == "run":
        return agent.run(prompt), []
    if how == "arun":
        return asyncio.run(agent.arun(prompt)), []
    if how == "stream":
        events = list(agent.stream(prompt))
    else:

        async def collect() -> list[Any]:
            return [e async for e in agent.stream(prompt)]

        events = asyncio.run(collect())
    end = events[-1]
    assert isinstance(end, RunEndEvent)
    return end.response, events


HOWS = ["run", "arun", "stream", "astream"]


@pytest.mark.parametrize("how", HOWS)
def test_usage_sums_every_level_three_deep(how: str) -> None:
    """response.usage is the sum of the top run's and its three levels of sub-runs' usage."""
    response, _ = _run(_four_levels(), how)
    assert response.text == TEXT
    levels = _levels(response.state)
    assert [s.agent for s in levels] == ["top", "l1", "l2", "l3"]
    assert [s.usage.requests for s in levels] == [2, 2, 2, 1]
    assert response.usage == _summed(levels)
    assert response.usage.requests == 7
    assert response.usage.input_tokens > response.state.usage.input_tokens
    assert len(response.steps) == 2  # the top's own steps


@pytest.mark.parametrize("how", ["stream", "astream"])
def test_streamed_events_carry_their_path_at_each_depth(how: str) -> None:
    """Each level's events arrive tagged with (tool, call id) per level down to it, wrapped once."""
    response, events = _run(_four_levels(), how)
    top = response.state
    (l1_id,) = top.sub_runs
    l1 = top.sub_runs[l1_id]
    (l2_id,) = l1.sub_runs
    (l3_id,) = l1.sub_runs[l2_id].sub_runs
    nested = [e for e in events if isinstance(e, SubRunEvent)]
    assert not any(isinstance(e.event, SubRunEvent) for e in nested)
    paths = {e.path for e in nested}
    assert paths == {
        ("l1", l1_id),
        ("l1", l1_id, "l2", l2_id),
        ("l1", l1_id, "l2", l2_id, "l3", l3_id),
    }
    for path in paths:  # every level's steps start and stream under its own path
        assert any(e.path == path and isinstance(e.event, StepStartEvent) for e in nested)
    deepest = "".join(
        e.event.text for e in nested if len(e.path) == 6 and isinstance(e.event, TextDelta)
    )
    assert deepest == "l3 here"
    own = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert own == TEXT


def test_a_sub_agent_called_twice_under_one_call_id_counts_both_runs() -> None:
    """A model that reuses a call id across steps: both sub-runs count in the usage and stay reachable."""
    helper = Agent(ScriptedModel(["one", "two"]), name="helper")
    lead = Agent(
        ScriptedModel(
            [
                call("helper", {"input": "a"}, id="same"),
                call("helper", {"input": "b"}, id="same"),
                "done",
            ]
        ),
        tools=[helper.as_tool()],
    )
    response = lead.run("go")
    assert response.text == "done"
    assert response.usage.requests == 3 + 2
    assert [r.content for s in response.steps for r in s.tool_results] == ["one", "two"]
    first, second, last = response.steps  # each step reaches its own call's sub-run
    assert first.sub_runs["same"].last_text == "one"
    assert second.sub_runs["same"].last_text == "two"
    assert first.sub_runs["same"].run_id != second.sub_runs["same"].run_id
    assert dict(last.sub_runs) == {}


@pytest.mark.parametrize("how", HOWS)
def test_usage_and_paths_across_a_handoff_to_an_agent_with_a_sub_agent(how: str) -> None:
    """triage hands to desk, which asks a helper: usage sums all three agents; only the helper's events are nested."""
    helper = Agent(ScriptedModel(["helped"]), name="helper")
    desk = Agent(_level("desk", "helper"), name="desk", tools=[helper.as_tool()])
    triage = Agent(ScriptedModel([call("transfer_to_desk")]), name="triage", handoffs=[desk])
    response, events = _run(triage, how)
    assert (response.agent, response.text) == ("desk", "desk < helped")
    assert response.state.usage.requests == 3  # triage once, desk twice: one run
    assert response.usage.requests == 4  # and the helper's sub-run
    assert response.usage == _summed(_levels(response.state))
    if events:
        (helper_id,) = response.state.sub_runs
        nested = {e.path for e in events if isinstance(e, SubRunEvent)}
        assert nested == {("helper", helper_id)}
        starts = [e.step for e in events if isinstance(e, StepStartEvent)]
        assert starts == [1, 2, 3]  # the steps of both agents, in one run


def test_a_suspended_steps_sub_run_is_its_latest_state() -> None:
    """While a sub-run waits, the step holds its state as it waits; after the resume, the finished one."""
    from toolfold import tool

    @tool(requires_approval=True)
    def wipe() -> str:
        """Wipe."""
        return "wiped"

    below = Agent(ScriptedModel([call("wipe"), "wiped it"]), name="below", tools=[wipe])
    lead = Agent(ScriptedModel([call("below", {"input": "x"}), "ok"]), tools=[below.as_tool()])
    waiting = lead.run("go")
    (step,) = waiting.steps
    (child,) = step.sub_runs.values()
    assert child.phase == "awaiting_approval"
    done = lead.resume(waiting.state, approvals={waiting.pending_approvals[0].id: True})
    (child,) = done.steps[0].sub_runs.values()
    assert (child.phase, child.last_text) == ("finished", "wiped it")
