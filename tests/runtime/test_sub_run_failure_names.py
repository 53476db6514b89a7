"""on_tool_error="raise" above a failing agent used as a tool: the error names the agent that failed."""

from __future__ import annotations

import asyncio
import threading
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
        (True, "ask", " in the run of agent 'research', handed to agent 'writer'"),
        (True, None, " in the run of agent 'research', handed to agent 'writer'"),
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

    with pytest.raises(RuntimeError) as caught:
        Agent(_failing(), name="research", tools=[t]).run("go")
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.phase != "finished"
    assert failed_in("ask", None, state) == ""
    assert failed_in("ask", "agent 'research' (tool 'ask')", None) == ""
    assert failed_in("ask", "workflow 'flow' (tool 'ask')", state) == ""
    assert failed_in("ask", "agent 'research' (tool 'ask')", state) == " in agent 'research'"


def _shout(response: Any) -> str:
    raise ValueError("my output function broke")


def _looping(name: str, **options: Any) -> Agent:
    """An agent that calls ``t`` at every step, stopped by ``max_steps=2``."""
    return Agent(
        FunctionModel(lambda request: FunctionModel.call("t", {})),
        name=name,
        tools=[t],
        max_steps=2,
        **options,
    )


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
@pytest.mark.parametrize(
    ("case", "content"),
    [
        (
            "output-function",
            "Error: the output= function of tool 'ask' failed: ValueError: my output function "
            "broke",
        ),
        (
            "own-limit",
            "Error: agent 'research' (tool 'ask') stopped at its limit max_steps=2 after 2 "
            "model calls without answering",
        ),
        (
            "handed-limit",
            "Error: the run of agent 'research' (tool 'ask'), handed to agent 'writer', stopped "
            "at its limit max_steps=2 after 2 model calls without answering",
        ),
    ],
    ids=["output-function", "own-limit", "handed-limit"],
)
def test_a_call_whose_sub_run_finished_names_no_agent_in_the_error(
    how: str, case: str, content: str
) -> None:
    """The sub-run finished (its output= function then raised, or a limit stopped it, whose
    text names the agent): the error says "tool 'ask' failed: " and the result, once."""
    if case == "output-function":
        research = Agent(FunctionModel(lambda request: "fine answer"), name="research")
        sub_tool = research.as_tool(name="ask", output=_shout)
    elif case == "own-limit":
        sub_tool = _looping("research").as_tool(name="ask")
    else:
        research = Agent(
            FunctionModel(_transfer), name="research", handoffs=[_looping("writer")], max_steps=2
        )
        sub_tool = research.as_tool(name="ask")
    lead = Agent(
        FunctionModel(lambda request: FunctionModel.call("ask", {"input": "go"})),
        name="lead",
        tools=[sub_tool],
        on_tool_error="raise",
    )
    with pytest.raises(ToolExecutionError) as caught:
        _run(lead, how)
    assert str(caught.value) == f"tool 'ask' failed: {content}"


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
def test_a_sub_run_cut_off_by_its_timeout_names_no_agent(how: str) -> None:
    """as_tool(timeout=...) cut the sub-run off (it did not fail): the error is the call's
    timeout, "tool 'ask' failed: Error: tool 'ask' timed out ...", naming no agent."""
    release = threading.Event()

    @tool
    def wait_for_release() -> str:
        """Block until the test releases it."""
        release.wait(60)
        return "released"

    research = Agent(
        FunctionModel(lambda request: FunctionModel.call("wait_for_release", {})),
        name="research",
        tools=[wait_for_release],
    )
    lead = Agent(
        FunctionModel(lambda request: FunctionModel.call("ask", {"input": "go"})),
        name="lead",
        tools=[research.as_tool(name="ask", timeout=0.2)],
        on_tool_error="raise",
    )
    try:
        with pytest.raises(ToolExecutionError) as caught:
            _run(lead, how)
    finally:
        release.set()
    assert str(caught.value) == "tool 'ask' failed: Error: tool 'ask' timed out after 0.2 s."


def test_a_timeout_does_not_ask_whether_to_name_the_agent() -> None:
    """A timed-out call's error does not ask names_agent (on Temporal the
    toolfold-failure-names-agent patch): its text is the one recorded before that patch."""
    from toolfold.runtime.drive._failures import tool_failure

    with pytest.raises(RuntimeError) as caught:
        Agent(_failing(), name="research", tools=[t]).run("go")
    child = toolfold.state_of(caught.value)
    assert child is not None
    asked: list[bool] = []

    def names_agent() -> bool:
        asked.append(True)
        return True

    content = "Error: tool 'ask' timed out after 1 s."
    who = "agent 'research' (tool 'ask')"
    error = tool_failure(child, "ask", "timeout", content, child, who=who, names_agent=names_agent)
    assert str(error) == f"tool 'ask' failed: {content}"
    assert asked == []
