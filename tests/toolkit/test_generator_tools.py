"""Generator functions are refused as tools: a tool returns its result once."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from toolfold import Agent, Tool, ToolDefinitionError, UsageError, tool
from toolfold.testing import ScriptedModel


def test_a_generator_function_is_refused_at_decoration() -> None:
    """@tool on a generator function raises ToolDefinitionError naming it and saying to return."""
    with pytest.raises(ToolDefinitionError, match="list_files") as caught:

        @tool
        def list_files(folder: str) -> Iterator[str]:
            """List the files of a folder.

            Args:
                folder: The folder.
            """
            yield "a.txt"

    assert "is a generator function" in str(caught.value)
    assert "return the values (e.g. a list)" in str(caught.value)


def test_an_async_generator_function_is_refused_at_decoration() -> None:
    """@tool on an async generator function raises ToolDefinitionError naming it."""
    with pytest.raises(ToolDefinitionError, match="stream_rows") as caught:

        @tool
        async def stream_rows(table: str) -> AsyncIterator[str]:
            """Stream rows.

            Args:
                table: The table.
            """
            yield "row 1"

    assert "async generator function" in str(caught.value)


def _numbers(start: int, stop: int) -> Iterator[int]:
    """Count.

    Args:
        start: The first.
        stop: The end.
    """
    yield from range(start, stop)


def test_a_partial_of_a_generator_function_is_refused() -> None:
    """A partial of a generator function is refused as the function is."""
    with pytest.raises(ToolDefinitionError, match="generator function"):
        tool(functools.partial(_numbers, stop=3), name="numbers")


def test_an_explicit_tool_of_a_generator_function_is_refused() -> None:
    """Tool(..., function=a generator function) is refused as @tool refuses it."""
    with pytest.raises(ToolDefinitionError, match="function is a generator function"):
        Tool("numbers", "Count.", None, _numbers)


def test_a_function_returning_a_list_is_still_a_tool() -> None:
    """A function that returns its values as a list stays a tool."""

    @tool
    def list_files(folder: str) -> list[str]:
        """List the files of a folder.

        Args:
            folder: The folder.
        """
        return ["a.txt", "b.txt"]

    assert list_files("/") == ["a.txt", "b.txt"]


class _PassesOn:
    """A callable whose ordinary ``__call__`` returns a generator it made."""

    def __call__(self, n: int) -> Iterator[int]:
        """Count.

        Args:
            n: How many.
        """
        return (i for i in range(n))


def test_a_tool_returning_a_generator_gives_the_model_an_error_naming_it() -> None:
    """A generator returned at run time is a tool error naming the tool, not its repr."""
    counter = tool(_PassesOn(), name="count")
    model = ScriptedModel([ScriptedModel.call("count", {"n": 2}, id="c1"), "ok"])
    response = Agent(model, tools=[counter]).run("Count.")
    result = response.messages[2].parts[0]
    assert result.is_error  # type: ignore[union-attr]
    assert "tool 'count' returned a generator" in result.content  # type: ignore[union-attr]
    assert "return the values (e.g. a list)" in result.content  # type: ignore[union-attr]
    assert "object" not in result.content  # type: ignore[union-attr]


def test_an_async_tool_passing_on_an_async_generator_gives_an_error() -> None:
    """An async generator passed on by a wrapper is a tool error saying so."""

    async def numbers(n: int) -> AsyncIterator[int]:
        """Count.

        Args:
            n: How many.
        """
        yield n

    @functools.wraps(numbers)
    def passes_on(*args: Any, **kwargs: Any) -> AsyncIterator[int]:
        return numbers(*args, **kwargs)

    counter = tool(passes_on, name="count")
    model = ScriptedModel([ScriptedModel.call("count", {"n": 2}, id="c1"), "ok"])
    result = Agent(model, tools=[counter]).run("Count.").messages[2].parts[0]
    assert "tool 'count' returned an async generator" in result.content  # type: ignore[union-attr]


def test_a_generator_given_as_a_tool_result_to_resume_is_refused() -> None:
    """resume(tool_results=...) refuses a generator, naming the call, instead of storing its repr."""
    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    with pytest.raises(UsageError, match=r"tool_results\['r1'\] is a generator"):
        agent.resume(state, tool_results={"r1": (i for i in range(3))})
