"""A tool's exception whose ``str()`` fails is an error result, never a crash of the run."""

from __future__ import annotations

import asyncio

import pytest

from toolfold import Agent, Tool, ToolExecutionError, generate_text, resume, tool
from toolfold.testing import ScriptedModel
from toolfold.toolkit._results import describe_exception

call = ScriptedModel.call


class BadStr(Exception):
    """An exception whose ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("str fails")


class NotText(Exception):
    """An exception whose ``__str__`` gives no string."""

    def __str__(self) -> str:
        return 5  # type: ignore[return-value]


def _tools(ran: list[int]) -> list[Tool[..., str]]:
    @tool
    def charge(amount: int) -> str:
        """Charge.

        Args:
            amount: Euros.
        """
        ran.append(amount)
        return f"charged {amount}"

    @tool
    def lookup() -> str:
        """Look up."""
        raise BadStr()

    return [charge, lookup]


def _model() -> ScriptedModel:
    return ScriptedModel([[call("charge", {"amount": 5}), call("lookup", {})], "done"])


def test_describe_exception_never_raises() -> None:
    """An exception whose str() raises, gives no text, is described by its class."""
    from toolfold.toolkit._results import exception_text

    assert describe_exception(BadStr()) == "BadStr: <unprintable BadStr>"
    assert describe_exception(NotText()) == "NotText: <unprintable NotText>"
    assert exception_text(ValueError("plain")) == "plain"


def test_a_blocking_run_reads_the_failure_as_an_error_result() -> None:
    """The call beside the failing one runs once and the model reads the unprintable error."""
    ran: list[int] = []
    response = generate_text(_model(), "go", tools=_tools(ran))
    assert response.text == "done"
    results = {r.tool_name: r for r in response.steps[0].tool_results}
    assert results["lookup"].is_error
    assert results["lookup"].content == "Error: BadStr: <unprintable BadStr>"
    assert ran == [5]


def test_an_async_run_reads_the_failure_as_an_error_result() -> None:
    """Under arun the run ends normally, the other call run once."""
    ran: list[int] = []
    response = asyncio.run(Agent(_model(), tools=_tools(ran)).arun("go"))
    assert response.text == "done"
    assert ran == [5]


def test_on_tool_error_raise_keeps_the_state() -> None:
    """on_tool_error="raise" raises ToolExecutionError with the state, naming the tool."""
    ran: list[int] = []
    with pytest.raises(ToolExecutionError, match=r"'lookup'.*<unprintable BadStr>") as caught:
        generate_text(_model(), "go", tools=_tools(ran), on_tool_error="raise")
    assert caught.value.state is not None
    assert ran == [5]


def test_resume_with_an_unprintable_exception_as_a_result() -> None:
    """An exception given as a caller's tool result is an error result even when str() fails."""
    ask = Tool(
        "ask_user",
        "Ask.",
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )
    first = generate_text(ScriptedModel([[call("ask_user", {"q": "?"})]]), "go", tools=[ask])
    done = resume(
        first.state,
        model=ScriptedModel(["final"]),
        tools=[ask],
        tool_results={first.tool_calls[0].id: BadStr()},
    )
    result = done.steps[-2].tool_results[0]
    assert result.is_error
    assert result.content == "Error: BadStr: <unprintable BadStr>"


def test_a_stop_condition_raising_an_unprintable_error_fails_with_the_state() -> None:
    """A stop_when that raises such an exception fails the run with a RunError naming it."""
    from toolfold import RunError

    def stop(state: object) -> bool:
        raise BadStr()

    ran: list[int] = []
    with pytest.raises(RunError, match="BadStr: <unprintable BadStr>") as caught:
        generate_text(_model(), "go", tools=_tools(ran), stop_when=[stop])
    assert caught.value.state is not None
