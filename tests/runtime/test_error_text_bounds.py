"""Errors' messages quote inner text up to a bound; a tool's exception group reads with its errors."""

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
    ToolRetriesExceededError,
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
    """Text past the bound is cut and ends saying its full length; short text is left as is."""
    assert quoted("short") == "short"
    cut = quoted("y" * 5000)
    assert cut == "y" * QUOTED + "… (5,000 characters)"


def test_a_tool_s_long_exception_is_cut_in_the_error_but_not_for_the_model() -> None:
    """ToolExecutionError's message quotes a tool's 1 MB exception text cut; the model's error
    result and the chained exception keep the whole."""
    script = [call("fetch", {"url": "u"}), "ok"]
    raising = Agent(ScriptedModel(script), tools=[_fetch()], on_tool_error="raise")
    with pytest.raises(ToolExecutionError) as caught:
        raising.run("go")
    assert len(str(caught.value)) < QUOTED + 200
    assert str(caught.value).endswith("characters)")
    assert str(caught.value.__cause__) == LONG
    agent = Agent(ScriptedModel(script), tools=[_fetch()])
    read = agent.run("go").state.messages[2].parts[0].content
    assert read == f"Error: ValueError: {LONG}"


def test_a_tool_out_of_retries_with_a_long_exception_has_a_bounded_message() -> None:
    """ToolRetriesExceededError's message cuts the tool's last error; the state keeps it."""

    @tool(max_retries=0)
    def fetch(url: str) -> str:
        """Fetch.

        Args:
            url: The URL.
        """
        raise ValueError(LONG)

    agent = Agent(ScriptedModel([call("fetch", {"url": "u"}), "ok"]), tools=[fetch])
    with pytest.raises(ToolRetriesExceededError) as caught:
        agent.run("go")
    assert len(str(caught.value)) < QUOTED + 300
    assert caught.value.state is not None
    assert caught.value.state.messages[2].parts[0].content == f"Error: ValueError: {LONG}"


def test_a_model_s_long_exception_is_cut_in_the_run_error() -> None:
    """A model's exception of 1 MB makes a RunError of a few KB, chained to the whole."""

    def model(request: ModelRequest) -> str:
        raise RuntimeError(LONG)

    with pytest.raises(RunError) as caught:
        Agent(FunctionModel(model)).run("hi")
    assert len(str(caught.value)) < QUOTED + 300
    assert str(caught.value.__cause__) == LONG


def test_a_provider_s_long_message_is_cut_in_the_message_but_kept_in_its_fields() -> None:
    """A provider's 5 MB error message: str() a few KB, body and provider_message whole."""
    said = "z" * 5_000_000
    error = status_error("openai", 500, said, {}, ErrorInfo(said), "https://x/v1/chat")
    assert isinstance(error, ServerError)
    assert len(str(error)) < QUOTED + 200
    assert "(5,000,000 characters)" in str(error)
    assert error.provider_message == said
    assert error.body == said
    back = pickle.loads(pickle.dumps(error))
    assert back.provider_message == said
    assert str(back) == str(error)
    streamed = inband_stream_error("openai", said, said)
    assert len(str(streamed)) < QUOTED + 200
    assert streamed.provider_message == said


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


def _long_step(text: str) -> str:
    raise RuntimeError(LONG[:5000])


def test_a_workflow_step_s_long_error_is_cut_in_its_message_but_stored_whole() -> None:
    """A workflow step raising a long error: the RunError's message is bounded, while a nested
    workflow's step result in the outer state keeps the whole text."""
    with pytest.raises(RunError) as caught:
        Sequence(Sequence(_long_step, name="inner"), name="outer").run("x")
    error = caught.value
    assert len(str(error)) < QUOTED + 400
    assert " characters); the error's state is the workflow's" in str(error)
    assert error.state is not None
    (step,) = error.state.calls
    assert step.result is not None
    assert LONG[:5000] in step.result.content


def test_a_held_step_failure_s_long_error_is_cut_but_its_waiting_branch_still_named() -> None:
    """A long step error held while a branch waits for an approval: the message is bounded and
    still says which branch waits and which steps run again."""

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
    said = str(caught.value)
    assert len(said) < 2 * QUOTED + 400
    assert "waits for an approval of 'publish'" in said
    assert "tool 'also_down' failed too" in said


def test_a_very_deeply_nested_group_is_described_without_recursion_error() -> None:
    """describe_exception never raises, even for a group nested 30,000 deep: it stops going in."""
    error: BaseException = ValueError("leaf")
    for _ in range(30_000):
        error = _group("g", [error])
    text = describe_exception(error)
    assert text.startswith(f"{_GROUP_NAME}: g (1 sub-exception): {_GROUP_NAME}: g")
    assert len(text) < 200
