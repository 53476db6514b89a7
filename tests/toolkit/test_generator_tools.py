"""Generator functions are refused as tools: a tool returns its result once."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import io
import itertools
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from toolfold import Agent, Tool, ToolDefinitionError, ToolResultPart, UsageError, tool
from toolfold.testing import ScriptedModel


def _result_of(tool_: Tool[Any, Any]) -> ToolResultPart:
    """The result an agent with ``tool_`` sends the model after it calls it once with n=2."""
    model = ScriptedModel([ScriptedModel.call(tool_.name, {"n": 2}, id="c1"), "ok"])
    response = Agent(model, tools=[tool_]).run("Count.")
    (result,) = response.messages[2].tool_results
    return result


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
    result = _result_of(counter)
    assert result.is_error
    assert "tool 'count' returned a generator" in result.content
    assert "return the values (e.g. a list)" in result.content
    assert "object" not in result.content


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
    result = _result_of(counter)
    assert "tool 'count' returned an async generator" in result.content


def test_a_generator_given_as_a_tool_result_to_resume_is_refused() -> None:
    """resume(tool_results=...) refuses a generator, naming the call, instead of storing its repr."""
    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    with pytest.raises(UsageError, match=r"tool_results\['r1'\] is a generator"):
        agent.resume(state, tool_results={"r1": (i for i in range(3))})


def test_a_coroutine_given_as_a_tool_result_to_resume_is_refused() -> None:
    """resume(tool_results=...) refuses a coroutine (a forgotten await), naming the call, and
    closes it (no "never awaited" warning), instead of sending its repr as a success."""

    async def fetch() -> str:
        return "found"

    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    pending = fetch()
    with pytest.raises(UsageError, match=r"tool_results\['r1'\] is a coroutine.*forgotten `await`"):
        agent.resume(state, tool_results={"r1": pending})
    assert pending.cr_frame is None  # closed: it never runs, and warns of nothing
    # Nothing was lost: the same state resumes with the awaited result.
    resumed = agent.resume(state, tool_results={"r1": asyncio.run(fetch())})
    assert resumed.messages[2].tool_results[0].content == "found"


@pytest.mark.parametrize("done", [False, True], ids=["pending", "done"])
def test_an_awaitable_given_as_a_tool_result_to_resume_is_refused(done: bool) -> None:
    """resume(tool_results=...) refuses any awaitable (a future), naming its type, and
    says what it is without claiming it was never awaited (a future done may have been)."""
    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    loop = asyncio.new_event_loop()
    try:
        future = loop.create_future()
        if done:
            future.set_result("found")
        with pytest.raises(UsageError) as caught:
            agent.resume(state, tool_results={"r1": future})
        assert str(caught.value) == (
            "tool_results['r1'] is an awaitable (Future), not what awaiting it gives "
            "(a forgotten `await`?): await it and give its result"
        )
    finally:
        loop.close()


class _Countdown:
    """An iterator of its own: ``__iter__`` and ``__next__``, nothing JSON knows."""

    def __init__(self) -> None:
        self.left = 2

    def __iter__(self) -> _Countdown:
        return self

    def __next__(self) -> int:
        self.left -= 1
        if self.left < 0:
            raise StopIteration
        return self.left


_ITERATORS = [
    (lambda: map(str, [1, 2]), "map"),
    (lambda: iter([1, 2]), "list_iterator"),
    (lambda: zip([1], [2], strict=True), "zip"),
    (lambda: filter(None, [1, 0]), "filter"),
    (lambda: itertools.count(), "count"),
    (lambda: itertools.islice([1, 2], 1), "islice"),
    (_Countdown, "_Countdown"),
]


def _returning(make: Any) -> Tool[..., Any]:
    def numbers(n: int) -> Any:
        """Count.

        Args:
            n: How many.
        """
        return make()

    return tool(numbers)


@pytest.mark.parametrize(("make", "name"), _ITERATORS)
def test_a_tool_returning_an_iterator_gives_the_model_an_error_naming_it(
    make: Any, name: str
) -> None:
    """A map, zip, iter(...), itertools or own iterator returned is a tool error, not its repr."""
    result = _result_of(_returning(make))
    assert result.is_error
    assert f"tool 'numbers' returned an iterator ({name})" in result.content
    assert "return the values (e.g. a list)" in result.content
    assert " object at 0x" not in result.content


def test_an_async_tool_returning_an_iterator_gives_the_model_an_error() -> None:
    """An async tool's returned map is a tool error naming the tool on the async path too."""

    @tool
    async def numbers(n: int) -> Any:
        """Count.

        Args:
            n: How many.
        """
        return map(str, range(n))

    model = ScriptedModel([ScriptedModel.call("numbers", {"n": 2}, id="c1"), "ok"])
    response = asyncio.run(Agent(model, tools=[numbers]).arun("Count."))
    result = response.messages[2].parts[0]
    assert result.is_error  # type: ignore[union-attr]
    assert "tool 'numbers' returned an iterator (map)" in result.content  # type: ignore[union-attr]


def test_an_iterator_given_as_a_tool_result_to_resume_is_refused() -> None:
    """resume(tool_results=...) refuses a map, naming the call, instead of storing its repr."""
    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    with pytest.raises(UsageError, match=r"tool_results\['r1'\] is an iterator \(map\)"):
        agent.resume(state, tool_results={"r1": map(str, [1])})


@dataclasses.dataclass
class _Page:
    """A dataclass that also iterates: still a result written as JSON."""

    items: list[int]

    def __iter__(self) -> Iterator[int]:
        return iter(self.items)

    def __next__(self) -> int:
        raise StopIteration


def test_a_dataclass_with_next_is_still_written_as_json() -> None:
    """A result toolfold serializes (a dataclass) stays a result even with ``__next__``."""
    result = _result_of(_returning(lambda: _Page([1, 2])))
    assert not result.is_error
    assert result.content == '{"items":[1,2]}'


class _Cursor:
    """An iterator class of the user's own that shows itself with its own ``__str__``."""

    def __iter__(self) -> _Cursor:
        return self

    def __next__(self) -> int:
        raise StopIteration

    def __str__(self) -> str:
        return "Cursor(rows=0)"


class _Shown(_Countdown):
    """An iterator class of the user's own with its own ``__repr__`` only."""

    def __repr__(self) -> str:
        return "Countdown(2)"


@pytest.mark.parametrize(("make", "text"), [(_Cursor, "Cursor(rows=0)"), (_Shown, "Countdown(2)")])
def test_an_own_iterator_class_with_its_own_text_reaches_the_model_as_that_text(
    make: Any, text: str
) -> None:
    """A user's iterator class with its own __str__ or __repr__ is sent as that text, no error."""
    result = _result_of(_returning(make))
    assert not result.is_error
    assert result.content == text


def test_a_stdlib_iterator_with_its_own_repr_is_still_refused() -> None:
    """itertools.count has its own repr but is Python's own iterator: still a tool error."""
    made = _returning(lambda: itertools.count(3))
    result = _result_of(made)
    assert "returned an iterator (count)" in result.content


def test_an_own_iterator_in_a_package_named_like_the_stdlib_reaches_the_model(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app's package named like a standard module (``sched``) is not Python's own:
    its iterator class with its own text is sent as that text."""
    import importlib.util

    source = tmp_path / "cursors.py"
    source.write_text(
        "class Cursor:\n"
        "    def __iter__(self): return self\n"
        "    def __next__(self): raise StopIteration\n"
        "    def __str__(self): return 'Cursor(rows=0)'\n"
    )
    spec = importlib.util.spec_from_file_location("sched.cursors", source)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "sched.cursors", module)
    spec.loader.exec_module(module)
    assert module.Cursor.__module__ == "sched.cursors"
    result = _result_of(_returning(module.Cursor))
    assert not result.is_error
    assert result.content == "Cursor(rows=0)"


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: io.StringIO("notes"), "StringIO"),
        (lambda: io.BytesIO(b"notes"), "BytesIO"),
        (lambda: open(__file__), "TextIOWrapper"),  # noqa: SIM115 (the tool's result)
    ],
)
def test_a_tool_returning_an_open_stream_is_told_to_read_it(make: Any, name: str) -> None:
    """A file, StringIO or BytesIO returned is a tool error saying to read it and return its text."""
    made = make()
    try:
        result = _result_of(_returning(lambda: made))
    finally:
        made.close()
    assert result.is_error
    expected = f"tool 'numbers' returned an open file/stream ({name}): read it and return its text"
    assert expected in result.content


def test_resume_refuses_an_open_stream_as_a_tool_result() -> None:
    """resume(tool_results=...) refuses a StringIO, naming the call and saying to read it."""
    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    with pytest.raises(
        UsageError, match=r"tool_results\['r1'\] is an open file/stream \(StringIO\)"
    ):
        agent.resume(state, tool_results={"r1": io.StringIO("text")})
