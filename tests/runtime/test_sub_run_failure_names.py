"""on_tool_error="raise" above a failing agent used as a tool: the error names the agent that failed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import toolfold
from toolfold import Agent, ToolExecutionError, tool
from toolfold.testing import FunctionModel

_SPEND = toolfold.Usage(10, 5, requests=1)


@tool
def t() -> str:
    """T."""
    return "t"


def _failing() -> FunctionModel:
    """Calls ``t`` once, then its provider fails."""

    def reply(request: Any) -> Any:
        if any(m.role == "tool" for m in request.messages):
            raise RuntimeError("provider down")
        part = toolfold.ToolCallPart("w", "t", "{}")
        return toolfold.ModelResponse(toolfold.Message.assistant("", [part]), _SPEND)

    return FunctionModel(reply)


def _transfer(request: Any) -> Any:
    part = toolfold.ToolCallPart("h", "transfer_to_writer", "{}")
    return toolfold.ModelResponse(toolfold.Message.assistant("", [part]), _SPEND)


def _lead(sub: Agent, name: str | None) -> Agent:
    def reply(request: Any) -> Any:
        tool_name = name or sub.name
        part = toolfold.ToolCallPart("c1", tool_name, '{"input": "go"}')
        return toolfold.ModelResponse(toolfold.Message.assistant("", [part]), _SPEND)

    return Agent(
        FunctionModel(reply), name="lead", tools=[sub.as_tool(name=name)], on_tool_error="raise"
    )


def _run(agent: Agent, how: str) -> Any:
    if how == "run":
        return agent.run("go")
    if how == "arun":
        return asyncio.run(agent.arun("go"))
    stream = agent.stream("go")
    for _ in stream:
        pass
    return stream.response


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
@pytest.mark.parametrize(
    ("handed", "name", "where"),
    [
        (False, None, ""),
        (False, "ask", " in agent 'research'"),
        (True, "ask", " in agent 'writer' (handed the run by agent 'research')"),
        (True, None, " in agent 'writer' (handed the run by agent 'research')"),
    ],
    ids=["named-as-its-tool", "renamed", "handed", "handed-named-as-its-tool"],
)
def test_the_error_of_a_failed_sub_run_names_the_agent_that_failed(
    how: str, handed: bool, name: str | None, where: str
) -> None:
    """The sub-agent's provider fails: the ToolExecutionError names the tool, and the agent
    whose model failed where the tool's name does not (renamed, or handed to another)."""
    if handed:
        writer = Agent(_failing(), name="writer", tools=[t])
        sub = Agent(FunctionModel(_transfer), name="research", handoffs=[writer])
    else:
        sub = Agent(_failing(), name="research", tools=[t])
    with pytest.raises(ToolExecutionError) as caught:
        _run(_lead(sub, name), how)
    tool_name = name or "research"
    assert str(caught.value).startswith(
        f"tool {tool_name!r} failed{where}: Error: RunError: the model call of step "
    )
    state = caught.value.state
    assert state is not None
    assert state.tree_usage.requests == 2  # the failed sub-run's answer counted
    failed = toolfold.state_of(caught.value.__cause__)  # the sub-run where it failed
    assert failed is not None
    assert (failed.agent, failed.phase) == ("writer" if handed else "research", "awaiting_model")


def test_a_call_that_ran_no_sub_run_or_a_workflow_names_no_agent() -> None:
    """A plain tool, a sub-agent not started, and a workflow add nothing to the message."""
    from toolfold.runtime.drive._failures import failed_in

    state = Agent(FunctionModel(lambda request: "x"), name="research").run("go").state
    assert failed_in("ask", None, state) == ""
    assert failed_in("ask", "agent 'research' (tool 'ask')", None) == ""
    assert failed_in("ask", "workflow 'flow' (tool 'ask')", state) == ""
    assert failed_in("ask", "agent 'research' (tool 'ask')", state) == " in agent 'research'"
