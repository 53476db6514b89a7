"""Generator functions are refused as tools: a tool returns its result once."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator

import pytest

from toolfold import Tool, ToolDefinitionError, tool


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
