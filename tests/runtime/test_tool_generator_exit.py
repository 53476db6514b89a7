"""A tool raising GeneratorExit ends the run as SystemExit does: the exception carries the state."""

from __future__ import annotations

import asyncio

import pytest

import toolfold
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@toolfold.tool
def leaves() -> str:
    """Raises GeneratorExit."""
    raise GeneratorExit


@toolfold.tool
async def aleaves() -> str:
    """Raises GeneratorExit, async."""
    raise GeneratorExit


@toolfold.tool
def fine() -> str:
    """Returns."""
    return "fine"


@pytest.mark.parametrize("calls", [["leaves"], ["leaves", "fine"], ["aleaves", "fine"]])
def test_a_blocking_run_hands_the_tools_generator_exit_its_state(calls: list[str]) -> None:
    """run(): the GeneratorExit a tool raised carries the run's state, resumable."""
    agent = toolfold.Agent(
        ScriptedModel([[call(name, {}) for name in calls], "done"]), tools=[leaves, aleaves, fine]
    )
    with pytest.raises(GeneratorExit) as caught:
        agent.run("go")
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.phase == "running_tools"


@pytest.mark.parametrize(
    "calls", [["leaves"], ["aleaves"], ["leaves", "fine"], ["aleaves", "fine"]]
)
def test_an_async_run_hands_the_tools_generator_exit_its_state(calls: list[str]) -> None:
    """arun(): the GeneratorExit a tool raised carries the run's state."""
    agent = toolfold.Agent(
        ScriptedModel([[call(name, {}) for name in calls], "done"]), tools=[leaves, aleaves, fine]
    )
    with pytest.raises(GeneratorExit) as caught:
        asyncio.run(agent.arun("go"))
    assert toolfold.state_of(caught.value) is not None
