"""A tool whose parameters cannot be structured fails before the model is asked, or keeps the run."""

import asyncio
from typing import Any

import pytest

import toolfold
from toolfold import Agent, Tool, ToolDefinitionError, generate_text, register_schema_rule, tool
from toolfold.testing import ScriptedModel


class Money:
    """A class with a schema rule and no structure hook."""


register_schema_rule(Money, lambda tp, ctx: {"type": "string"})


@tool
def pay(m: Money) -> str:
    """Pay.

    Args:
        m: The amount.
    """
    return "paid"


@tool
def other(x: int) -> str:
    """Other.

    Args:
        x: A number.
    """
    return f"other {x}"


def test_an_agent_with_a_tool_no_hook_structures_is_refused_when_built() -> None:
    """`Agent(tools=[pay])` raises the definition error naming the parameter, before any model call."""
    model = ScriptedModel([[ScriptedModel.call("pay", {"m": "1 EUR"})], "done"])
    with pytest.raises(ToolDefinitionError) as raised:
        Agent(model, tools=[pay, other])
    assert "parameter 'm': cannot structure JSON into Money" in str(raised.value)
    assert model.requests == []


def test_a_run_with_a_tool_no_hook_structures_fails_before_the_model_is_asked() -> None:
    """`generate_text(tools=[pay])` raises the definition error without a paid request."""
    model = ScriptedModel([[ScriptedModel.call("pay", {"m": "1 EUR"})], "done"])
    with pytest.raises(ToolDefinitionError, match="cannot structure JSON into Money"):
        generate_text(model, "go", tools=[pay])
    assert model.requests == []


class _Unfit(Tool[..., Any]):
    """A tool whose own checker finds it unfit only when called."""

    def validate_arguments(self, raw: Any) -> dict[str, Any]:
        raise ToolDefinitionError(self.name, ["parameter 'm': cannot structure"])


def _unfit() -> Tool[..., Any]:
    return _Unfit("unfit", "Unfit.", {"type": "object", "properties": {}}, lambda args: "x")


def _run(agent: Agent, how: str) -> None:
    if how == "sync":
        agent.run("go")
    elif how == "async":
        asyncio.run(agent.arun("go"))
    elif how == "astream":
        asyncio.run(_drain(agent.stream("go")))
    else:
        for _ in agent.stream("go"):
            pass


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


@pytest.mark.parametrize("how", ["sync", "async", "stream"])
def test_a_definition_error_raised_by_a_call_carries_the_state(how: str) -> None:
    """A ToolDefinitionError a call raises mid-run carries the state of the round, with the
    model's paid answer in it: once the tool is fixed, resuming runs the calls without
    asking the model again."""
    calls = [ScriptedModel.call("other", {"x": 1}), ScriptedModel.call("unfit", {})]
    model = ScriptedModel([calls, "done"])
    with pytest.raises(ToolDefinitionError) as raised:
        _run(Agent(model, tools=[_unfit(), other]), how)
    state = toolfold.state_of(raised.value)
    assert state is not None
    assert state.phase == "running_tools"
    assert [c.call.name for c in state.calls] == ["other", "unfit"]
    assert len(model.requests) == 1
    fixed = Tool("unfit", "Unfit.", {"type": "object", "properties": {}}, lambda args: "fixed")
    response = Agent(model, tools=[fixed, other]).resume(state)
    assert response.text == "done"
    assert [r.content for r in response.steps[0].tool_results] == ["other 1", "fixed"]
    assert len(model.requests) == 2


def _recurse(depth: int = 0) -> Any:
    return _recurse(depth + 1)


class _Buggy(Tool[..., Any]):
    """A tool whose own checker has a bug: it raises a ValueError, or recurses without end
    (``recurses``), never a ToolArgumentError."""

    recurses = False

    def validate_arguments(self, raw: Any) -> dict[str, Any]:
        if self.recurses:
            return _recurse()  # type: ignore[no-any-return]
        raise ValueError("validator bug")


def _buggy(error: str) -> Tool[..., Any]:
    made = _Buggy("buggy", "Buggy.", {"type": "object", "properties": {}}, lambda args: "x")
    made.recurses = error == "RecursionError"
    return made


_CHECKER_BUGS = ["ValueError", "RecursionError"]


@pytest.mark.parametrize("how", ["sync", "async", "stream"])
@pytest.mark.parametrize("error", _CHECKER_BUGS)
def test_a_checker_that_raises_keeps_the_paid_answer_on_its_error(how: str, error: str) -> None:
    """A validate_arguments that raises a ValueError (or recurses) mid-run: that error carries
    the state of the round, with the model's paid answer in it, as an unfit tool's does."""
    model = ScriptedModel([[ScriptedModel.call("buggy", {})], "done"])
    with pytest.raises(ValueError if error == "ValueError" else RecursionError) as raised:
        _run(Agent(model, tools=[_buggy(error)]), how)
    state = toolfold.state_of(raised.value)
    assert state is not None
    assert state.phase == "running_tools"
    assert state.usage.requests == 1
    assert len(model.requests) == 1


@pytest.mark.parametrize("how", ["sync", "async", "stream"])
@pytest.mark.parametrize("error", _CHECKER_BUGS)
def test_a_sub_run_whose_checker_raises_stays_on_its_calls_error_result(
    how: str, error: str
) -> None:
    """The same in an agent used as a tool: the call's error result keeps the sub-run, and its
    paid answer counts in the caller's tree usage (3 answers made, 3 counted)."""
    inner = Agent(
        ScriptedModel([[ScriptedModel.call("buggy", {})]]), name="inner", tools=[_buggy(error)]
    )
    model = ScriptedModel([[ScriptedModel.call("inner", {"input": "go"})], "done"])
    lead = Agent(model, name="lead", tools=[inner.as_tool()])
    if how == "sync":
        response = lead.run("go")
    elif how == "async":
        response = asyncio.run(lead.arun("go"))
    else:
        stream = lead.stream("go")
        for _ in stream:
            pass
        response = stream.response
    (result,) = response.steps[0].tool_results
    name = "ValueError: validator bug" if error == "ValueError" else "RecursionError: maximum"
    assert result.content.startswith(f"Error: {name}")
    (sub,) = response.state.sub_runs.values()
    assert (sub.agent, sub.usage.requests) == ("inner", 1)
    assert response.state.tree_usage.requests == 3


def _run_as(agent: Agent, how: str, run_id: str) -> None:
    if how == "sync":
        agent.run("go", run_id=run_id)
    elif how == "async":
        asyncio.run(agent.arun("go", run_id=run_id))
    else:
        for _ in agent.stream("go", run_id=run_id):
            pass


class _Reraises(Tool[..., Any]):
    """A tool whose checker raises the one error instance it holds, each time."""

    error: Exception = ValueError("validator bug")

    def validate_arguments(self, raw: Any) -> dict[str, Any]:
        raise self.error


@pytest.mark.parametrize("how", ["sync", "async", "stream"])
@pytest.mark.parametrize("error", ["ValueError", "ToolDefinitionError"])
def test_an_error_instance_raised_again_carries_the_second_runs_state(how: str, error: str) -> None:
    """A checker raising one error instance in two runs: the second run's error carries the
    second run's state, not the first's it was given before."""
    reraises = _Reraises("bad", "Bad.", {"type": "object", "properties": {}}, lambda args: "x")
    made = ValueError("bug") if error == "ValueError" else ToolDefinitionError("bad", ["unfit"])
    reraises.error = made
    for run_id in ["first", "second"]:
        agent = Agent(ScriptedModel([[ScriptedModel.call("bad", {})]]), tools=[reraises])
        with pytest.raises(type(made)) as raised:
            _run_as(agent, how, run_id)
        assert raised.value is made
        state = toolfold.state_of(raised.value)
        assert state is not None
        assert (state.run_id, state.phase) == (run_id, "running_tools")


def test_a_checker_agents_failure_carries_the_checked_runs_state() -> None:
    """A validate_arguments that runs an agent whose own checker raises: the error the lead
    raises carries the lead's state (to resume with the lead), not the checker agent's."""
    bad = _Buggy("bad", "Bad.", {"type": "object", "properties": {}}, lambda args: "x")
    checker = Agent(ScriptedModel([[ScriptedModel.call("bad", {})]]), name="checker", tools=[bad])

    class _Checked(Tool[..., Any]):
        def validate_arguments(self, raw: Any) -> dict[str, Any]:
            checker.run("is this fine?", run_id="checker-run")
            return {}

    checked = _Checked("checked", "C.", {"type": "object", "properties": {}}, lambda args: "ran")
    model = ScriptedModel([[ScriptedModel.call("checked", {})]])
    lead = Agent(model, name="lead", tools=[checked])
    with pytest.raises(ValueError, match="validator bug") as raised:
        lead.run("go", run_id="lead-run")
    state = toolfold.state_of(raised.value)
    assert state is not None
    assert (state.run_id, state.agent, state.phase) == ("lead-run", "lead", "running_tools")
    assert state.usage.requests == 1


class _OrderError(Exception):
    """A user's error with a ``state`` attribute of its own: the order's, no run's."""

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


@pytest.mark.parametrize("how", ["sync", "async", "stream"])
def test_a_checker_error_keeps_a_state_attribute_of_its_own(how: str) -> None:
    """A validate_arguments error whose own ``state`` is no RunState keeps it (not replaced)."""
    raises = _Reraises("bad", "Bad.", {"type": "object", "properties": {}}, lambda args: "x")
    raises.error = _OrderError("order not editable", state="shipped")
    model = ScriptedModel([[ScriptedModel.call("bad", {})], "done"])
    with pytest.raises(_OrderError) as raised:
        _run(Agent(model, tools=[raises]), how)
    assert raised.value.state == "shipped"
    assert toolfold.state_of(raised.value) is None


_STOPS = [StopIteration, StopAsyncIteration]


@pytest.mark.parametrize("how", ["sync", "async", "stream", "astream"])
@pytest.mark.parametrize("kind", _STOPS, ids=lambda kind: kind.__name__)
def test_a_checker_that_raises_stop_iteration_keeps_the_paid_answer(
    how: str, kind: type[Exception]
) -> None:
    """A validate_arguments raising StopIteration or StopAsyncIteration (which arun's
    coroutine and a stream's generator would turn into a bare RuntimeError): the run raises
    a RuntimeError naming the tool's check, caused by it, with the state of the round."""
    stops = _Reraises("bad", "Bad.", {"type": "object", "properties": {}}, lambda args: "x")
    stops.error = kind("no more")
    model = ScriptedModel([[ScriptedModel.call("bad", {})], "done"])
    with pytest.raises(RuntimeError, match="validate_arguments of tool 'bad'") as raised:
        _run(Agent(model, tools=[stops]), how)
    expected = f"validate_arguments of tool 'bad' raised {kind.__name__}: no more"
    assert str(raised.value) == expected
    assert raised.value.__cause__ is stops.error
    state = toolfold.state_of(raised.value)
    assert state is not None
    assert (state.phase, state.usage.requests) == ("running_tools", 1)


async def _astream(agent: Agent) -> toolfold.Response[Any]:
    stream = agent.stream("go")
    async for _ in stream:
        pass
    return stream.response


@pytest.mark.parametrize("how", ["sync", "async", "stream", "astream"])
@pytest.mark.parametrize("kind", _STOPS, ids=lambda kind: kind.__name__)
def test_a_sub_run_whose_checker_raises_stop_iteration_stays_on_its_calls_error_result(
    how: str, kind: type[Exception]
) -> None:
    """The same in an agent used as a tool: the call's error result reads the StopIteration
    (or StopAsyncIteration) and keeps the sub-run, whose paid answer counts in the caller's
    tree usage."""
    stops = _Reraises("bad", "Bad.", {"type": "object", "properties": {}}, lambda args: "x")
    stops.error = kind("no more")
    inner = Agent(ScriptedModel([[ScriptedModel.call("bad", {})]]), name="inner", tools=[stops])
    model = ScriptedModel([[ScriptedModel.call("inner", {"input": "go"})], "done"])
    lead = Agent(model, name="lead", tools=[inner.as_tool()])
    if how == "sync":
        response = lead.run("go")
    elif how == "async":
        response = asyncio.run(lead.arun("go"))
    elif how == "astream":
        response = asyncio.run(_astream(lead))
    else:
        stream = lead.stream("go")
        for _ in stream:
            pass
        response = stream.response
    (result,) = response.steps[0].tool_results
    assert result.content == f"Error: {kind.__name__}: no more"
    (sub,) = response.state.sub_runs.values()
    assert (sub.agent, sub.usage.requests) == ("inner", 1)
    assert response.state.tree_usage.requests == 3
