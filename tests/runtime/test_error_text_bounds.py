"""Errors' messages keep a long inner text whole (as main's); a tool's exception group reads
with its errors, each member's text quoted up to a bound."""

from __future__ import annotations

import asyncio
import pickle
import sys
from typing import Any

import pytest

from toolfold import (
    Agent,
    Parallel,
    RunError,
    Sequence,
    ServerError,
    ToolExecutionError,
    tool,
)
from toolfold.adapters._codec import inband_stream_error
from toolfold.adapters._http._http_errors import ErrorInfo, status_error
from toolfold.runtime import ModelRequest
from toolfold.testing import FunctionModel, ScriptedModel
from toolfold.toolkit._results import GROUP_SHOWN, QUOTED, describe_exception, quoted

call = ScriptedModel.call
if sys.version_info >= (3, 11):
    _group: Any = ExceptionGroup  # noqa: F821 (a builtin from 3.11)
else:  # Python 3.10: the backport anyio brings
    from exceptiongroup import ExceptionGroup as _group
_GROUP_NAME = "ExceptionGroup"
LONG = "upstream said: " + "x" * 1_000_000


def _fetch() -> Any:
    @tool
    def fetch(url: str) -> str:
        """Fetch.

        Args:
            url: The URL.
        """
        raise ValueError(LONG)

    return fetch


def test_quoted_cuts_long_text_and_says_its_length() -> None:
    """Text past the bound (a group member's, a note's) is cut and ends saying its full
    length; short text is left as is."""
    assert quoted("short") == "short"
    cut = quoted("y" * 5000)
    assert cut == "y" * QUOTED + "… (5,000 characters)"


def test_a_task_group_failure_reads_with_the_tool_s_error() -> None:
    """A tool whose task group fails (asyncio.TaskGroup's ExceptionGroup): the model reads the
    inner ValueError."""

    @tool
    async def multi(city: str) -> str:
        """Weather and time.

        Args:
            city: The city.
        """
        raise _group("unhandled errors in a TaskGroup", [ValueError(f"unknown city {city!r}")])

    agent = Agent(ScriptedModel([call("multi", {"city": "Atlantis"}), "ok"]), tools=[multi])
    read = asyncio.run(agent.arun("hi")).state.messages[2].parts[0].content
    assert read == (
        f"Error: {_GROUP_NAME}: unhandled errors in a TaskGroup (1 sub-exception): "
        "ValueError: unknown city 'Atlantis'"
    )


def test_an_exception_group_names_nested_errors_and_bounds_their_number() -> None:
    """Nested groups' errors are named in order; past GROUP_SHOWN it says how many more."""
    nested = _group("outer", [ValueError("a"), _group("inner", [KeyError("b")])])
    assert describe_exception(nested) == (
        f"{_GROUP_NAME}: outer (2 sub-exceptions): ValueError: a; KeyError: 'b'"
    )
    many = _group("many", [ValueError(str(i)) for i in range(GROUP_SHOWN + 3)])
    assert describe_exception(many).endswith(f"ValueError: {GROUP_SHOWN - 1}; and 3 more")
    long = describe_exception(_group("g", [ValueError(LONG)]))
    assert len(long) < QUOTED + 100


def test_an_object_with_an_exceptions_attribute_like_the_backport_s_is_read_as_a_group() -> None:
    """A group that is no builtin (Python 3.10's exceptiongroup backport) is read by its
    ``exceptions`` and ``split``; a plain exception with an odd ``exceptions`` is not."""

    class Backported(Exception):
        def __init__(self, message: str, exceptions: list[BaseException]) -> None:
            super().__init__(message)
            self.exceptions = tuple(exceptions)

        def split(self, condition: Any) -> Any:
            return None, None

    class Odd(Exception):
        exceptions = "not a group"

    assert describe_exception(Backported("g", [ValueError("v")])) == "Backported: g: ValueError: v"
    assert describe_exception(Odd("o")) == "Odd: o"


def test_a_failed_sub_agent_s_long_error_is_stored_whole_in_the_caller() -> None:
    """An agent used as a tool whose run failed with a long error: its caller's stored result
    (and the text its model reads) is the whole text, as before messages were cut."""

    @tool(max_retries=0)
    def bad(x: str) -> str:
        """Bad.

        Args:
            x: x.
        """
        raise RuntimeError(LONG[:5000])

    inner = Agent(ScriptedModel([call("bad", {"x": "1"})]), tools=[bad], name="inner")
    outer = Agent(ScriptedModel([call("inner", {"input": "x"}), "done"]), tools=[inner.as_tool()])
    state = outer.run("go").state
    (result,) = [m.parts[0] for m in state.messages if m.role == "tool"]
    assert result.content.startswith("Error: ToolRetriesExceededError: tool 'bad' failed once")
    assert LONG[:5000] in result.content
    assert "characters)" not in result.content


def test_a_very_deeply_nested_group_is_described_without_recursion_error() -> None:
    """describe_exception never raises, even for a group nested 30,000 deep: it stops going in."""
    error: BaseException = ValueError("leaf")
    for _ in range(30_000):
        error = _group("g", [error])
    text = describe_exception(error)
    assert text.startswith(f"{_GROUP_NAME}: g (1 sub-exception): {_GROUP_NAME}: g")
    assert len(text) < 200


TEXT = "upstream said: " + "x" * 4985
"""A 5,000-character inner text."""
_STEP_STATE = "; the error's state is the workflow's, with the failure recorded"


def _long_step(text: str) -> str:
    raise RuntimeError(TEXT)


def test_long_tool_provider_and_step_errors_read_and_are_stored_whole() -> None:
    """A 5,000-character tool error, provider error and step error: every message and stored
    text is main's, whole (no cut, no private copy of the text)."""
    assert len(TEXT) == 5000

    @tool
    def fetch(url: str) -> str:
        """Fetch.

        Args:
            url: The URL.
        """
        raise ValueError(TEXT)

    script = [call("fetch", {"url": "u"}), "ok"]
    with pytest.raises(ToolExecutionError) as tool_error:
        Agent(ScriptedModel(script), tools=[fetch], on_tool_error="raise").run("go")
    assert str(tool_error.value) == f"tool 'fetch' failed: Error: ValueError: {TEXT}"
    assert tool_error.value.args == (str(tool_error.value),)
    read = Agent(ScriptedModel(script), tools=[fetch]).run("go").state.messages[2].parts[0]
    assert read.content == f"Error: ValueError: {TEXT}"

    error = status_error("openai", 500, TEXT, {}, ErrorInfo(TEXT), "https://x/v1/chat")
    assert str(error) == f"openai returned HTTP 500 for POST https://x/v1/chat: {TEXT}"
    streamed = inband_stream_error("openai", TEXT, TEXT)
    assert str(streamed) == f"openai reported an error inside the stream: {TEXT}"

    def model(request: ModelRequest) -> str:
        raise error

    with pytest.raises(ServerError) as provider_error:
        Agent(FunctionModel(model)).run("hi")
    assert str(provider_error.value) == str(error)
    assert vars(provider_error.value).keys() == {*vars(error), "state"}

    with pytest.raises(RunError) as step_error:
        Sequence(Sequence(_long_step, name="inner"), name="outer").run("x")
    inner = (
        f"step '_long_step' of Sequence 'inner' failed: Error: RuntimeError: {TEXT}{_STEP_STATE}"
    )
    assert str(step_error.value) == (
        f"step 'inner' of Sequence 'outer' failed: Error: RunError: {inner}"
    )
    state = step_error.value.state
    assert state is not None
    assert state.error is not None
    (step,) = state.calls
    assert step.result is not None
    assert step.result.content == f"Error: RunError: {inner}"
    assert state.error.message == (
        f"tool 'inner' failed once (max_retries=0); last error: Error: RunError: {inner}"
    )
    assert describe_exception(step_error.value) == f"RunError: {step_error.value}"
    back = pickle.loads(pickle.dumps(step_error.value))
    assert str(back) == str(step_error.value)
    assert "_toolfold_uncut" not in vars(back)


def test_a_held_step_failure_s_long_error_reads_whole_with_its_waiting_branch() -> None:
    """A 5,000-character step error held while a branch waits for an approval reads as on
    main: the whole error, then which branch waits and which steps run again."""

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish.

        Args:
            text: What to publish.
        """
        return "published"

    def answer(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return "Done."
        return call("publish", {"text": "t"})

    def also_down(text: str) -> str:
        raise ValueError("nope")

    publisher = Agent(FunctionModel(answer), name="publisher", tools=[publish])
    with pytest.raises(RunError) as caught:
        Parallel(publisher, _long_step, also_down, name="two").run("x")
    assert str(caught.value) == (
        f"step '_long_step' of Parallel 'two' failed: Error: RuntimeError: {TEXT} [not run, "
        "kept in the state: 'publisher' waits for an approval of 'publish' (call 'call_1_0'); "
        "resuming the state runs '_long_step', 'also_down' again, then waits as it did; "
        f"tool 'also_down' failed too: Error: ValueError: nope]{_STEP_STATE}"
    )
