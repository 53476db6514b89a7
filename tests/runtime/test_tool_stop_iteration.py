"""A sync tool raising StopIteration reads the same to the model in every kind of run."""

from __future__ import annotations

import asyncio

import pytest

from toolfold import Agent, Response, ToolExecutionError, tool
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


def _tool(timeout: float | None) -> object:
    @tool(timeout=timeout)
    def next_page() -> str:
        """Fetch the next page."""
        raise StopIteration("no more pages")

    return next_page


def _run(agent: Agent, mode: str) -> Response:
    if mode == "run":
        return agent.run("go")
    if mode == "arun":
        return asyncio.run(agent.arun("go"))
    stream = agent.stream("go")
    for _ in stream:
        pass
    return stream.response


@pytest.mark.parametrize("timeout", [None, 5.0])
@pytest.mark.parametrize("mode", ["run", "arun", "stream"])
def test_a_sync_tool_s_stop_iteration_reads_as_itself(mode: str, timeout: float | None) -> None:
    """The model reads 'Error: StopIteration: ...', not a RuntimeError wrapping it, on a loop too."""
    agent = Agent(ScriptedModel([call("next_page", {}), "done"]), tools=[_tool(timeout)])
    response = _run(agent, mode)
    result = response.steps[0].tool_results[0]
    assert result.content == "Error: StopIteration: no more pages"
    assert result.is_error


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_raised_stop_iteration_is_the_tool_execution_error_s_cause(mode: str) -> None:
    """With on_tool_error='raise', the error is chained to the tool's own StopIteration."""
    agent = Agent(
        ScriptedModel([call("next_page", {}), "done"]), tools=[_tool(None)], on_tool_error="raise"
    )
    with pytest.raises(ToolExecutionError, match="Error: StopIteration: no more pages") as info:
        _run(agent, mode)
    assert type(info.value.__cause__) is StopIteration
