"""A run's error reaches the exception that failed it: a tool's, a workflow step's, a timeout's."""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

import toolfold
from toolfold import Agent, Parallel, RunError, Sequence, Task, ToolExecutionError, tool
from toolfold import ToolRetriesExceededError as Exceeded
from toolfold._errors import add_note
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call
STATE_NOTE = "; the error's state is the workflow's, with the failure recorded"


class PaymentDeclined(Exception):
    """A user's exception a service maps to HTTP 402."""


def charge(text: str) -> str:
    raise PaymentDeclined("card declined")


def rate_limited(request: Any) -> str:
    raise toolfold.RateLimitError("slow down", provider="openai", status_code=429, retry_after=30)


def _first(text: str) -> Agent:
    return Agent(FunctionModel(lambda request: text), name="first")


@tool(max_retries=0)
def pay(amount: int) -> str:
    """Pay.

    Args:
        amount: Cents.
    """
    raise PaymentDeclined("card declined")


@tool(max_retries=0, timeout=0.01)
async def hang(x: int) -> str:
    """Wait for ever.

    Args:
        x: x.
    """
    await asyncio.Event().wait()
    return "never"


@pytest.mark.parametrize("watched", [False, True], ids=["plain", "on_event"])
def test_a_function_steps_exception_is_the_workflows_errors_cause(watched: bool) -> None:
    """A function step's own exception is the workflow's RunError's cause, not an internal error."""
    workflow = Sequence(_first("a"), charge, name="w")
    events: list[Any] = []
    with pytest.raises(RunError) as caught:
        workflow.run("x", on_event=events.append if watched else None)
    assert isinstance(caught.value.__cause__, PaymentDeclined)
    assert "step 'charge' of Sequence 'w' failed" in str(caught.value)


def test_an_agent_steps_provider_error_is_the_workflows_errors_cause() -> None:
    """An agent step's RateLimitError, with its status and retry_after, is the RunError's cause."""
    workflow = Sequence(_first("a"), Agent(FunctionModel(rate_limited), name="writer"), name="w")
    with pytest.raises(RunError) as caught:
        asyncio.run(workflow.arun("x"))
    cause = caught.value.__cause__
    assert isinstance(cause, toolfold.RateLimitError)
    assert (cause.status_code, cause.retry_after) == (429, 30)


def test_a_nested_workflows_step_exception_is_reached_along_causes() -> None:
    """A step failing in a nested workflow: the causes lead from the outer RunError to it."""
    workflow = Sequence(_first("a"), Sequence(charge, name="inner"), name="outer")
    with pytest.raises(RunError) as caught:
        workflow.run("x")
    inner = caught.value.__cause__
    assert isinstance(inner, RunError)
    assert isinstance(inner.__cause__, PaymentDeclined)


def test_a_workflows_error_with_its_cause_still_pickles() -> None:
    """The RunError raised from a step's exception pickles (the cause is left behind)."""
    with pytest.raises(RunError) as caught:
        Sequence(charge, name="w").run("x")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert type(copy) is RunError
    assert str(copy) == str(caught.value)
    assert copy.state is not None
    assert copy.state.phase == "failed"


def test_two_failed_parallel_branches_are_both_named() -> None:
    """Two failing Parallel branches: the error names the second one too, with its error."""

    def other(text: str) -> str:
        raise KeyError("other")

    with pytest.raises(RunError) as caught:
        Parallel(charge, other, name="p").run("x")
    assert str(caught.value) == (
        "step 'charge' of Parallel 'p' failed: Error: PaymentDeclined: card declined" + STATE_NOTE
    )
    assert caught.value.__notes__ == ["step 'other' failed too: Error: KeyError: 'other'"]
    assert isinstance(caught.value.__cause__, PaymentDeclined)


@pytest.mark.parametrize("watched", [False, True], ids=["plain", "on_event"])
def test_a_tool_that_used_up_its_retries_is_chained_to_its_exception(watched: bool) -> None:
    """ToolRetriesExceededError's cause is the exception of the tool's last failed call."""
    agent = Agent(ScriptedModel([call("pay", {"amount": 5}), "ok"]), tools=[pay])
    events: list[Any] = []
    with pytest.raises(Exceeded) as caught:
        agent.run("go", on_event=events.append if watched else None)
    assert isinstance(caught.value.__cause__, PaymentDeclined)


@pytest.mark.parametrize("mode", ["run", "arun", "stream"])
def test_a_tool_whose_arguments_never_read_as_json_is_chained_to_the_json_error(
    mode: str,
) -> None:
    """Arguments that are no JSON, to the last retry: the cause is the `ArgumentJSONError`.

    The core answers such calls itself, so no executor's outcome held an
    exception: the cause was None, where a schema error's was set.
    """
    script: list[Any] = [call("pay", '{"amount": ')] * 4
    agent = Agent(ScriptedModel([*script, "ok"]), tools=[pay.replace(max_retries=3)])

    def go() -> None:
        if mode == "run":
            agent.run("go")
        elif mode == "arun":
            asyncio.run(agent.arun("go"))
        else:
            for _ in agent.stream("go"):
                pass

    with pytest.raises(Exceeded) as caught:
        go()
    cause = caught.value.__cause__
    assert isinstance(cause, toolfold.ArgumentJSONError)
    assert cause.tool_name == "pay"
    assert "the arguments are not valid JSON" in str(cause)


def test_a_tool_that_used_up_its_retries_by_timeouts_is_chained_to_a_timeout() -> None:
    """A tool whose last failure was its timeout: ToolRetriesExceededError's cause is a TimeoutError."""
    agent = Agent(ScriptedModel([call("hang", {"x": 1}), "ok"]), tools=[hang])
    with pytest.raises(Exceeded) as caught:
        asyncio.run(agent.arun("go"))
    cause = caught.value.__cause__
    assert isinstance(cause, TimeoutError)
    assert "'hang' timed out" in str(cause)


def test_on_tool_error_raise_chains_a_timeout() -> None:
    """With on_tool_error="raise", a tool's timeout is chained as a TimeoutError."""
    agent = Agent(
        ScriptedModel([call("hang", {"x": 1}), "ok"]), tools=[hang], on_tool_error="raise"
    )
    with pytest.raises(ToolExecutionError) as caught:
        agent.run("go")
    assert isinstance(caught.value.__cause__, TimeoutError)


class E2(Exception):
    """The second tool's failure."""


@tool
def first_fails(x: int) -> str:
    """First.

    Args:
        x: x.
    """
    raise PaymentDeclined("first failed")


@tool
def second_fails(x: int) -> str:
    """Second.

    Args:
        x: x.
    """
    raise E2("second failed")


def test_on_tool_error_raise_notes_each_further_failed_call() -> None:
    """Two parallel calls fail under on_tool_error="raise": the first is the cause, the second a note."""
    script = ScriptedModel([[call("first_fails", {"x": 1}), call("second_fails", {"x": 2})], "ok"])
    agent = Agent(script, tools=[first_fails, second_fails], on_tool_error="raise")
    with pytest.raises(ToolExecutionError) as caught:
        agent.run("go")
    error = caught.value
    assert isinstance(error.__cause__, PaymentDeclined)
    assert error.__notes__ == ["tool 'second_fails' failed too: Error: E2: second failed"]
    assert pickle.loads(pickle.dumps(error)).__notes__ == error.__notes__


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish a text.

    Args:
        text: What to publish.
    """
    return "published"


def test_a_held_failures_other_failed_branch_is_named_once() -> None:
    """A failure held while a branch waits names its other failed branch once (in its brackets)."""

    def publishing(request: Any) -> Any:
        return ScriptedModel.call("publish", {"text": "t"})

    def other(text: str) -> str:
        raise KeyError("other")

    publisher = Agent(FunctionModel(publishing), name="publisher", tools=[publish])
    with pytest.raises(RunError) as caught:
        Parallel(publisher, charge, other, name="p").run("x")
    message = str(caught.value)
    assert message.count("'other' failed too") == 1, message
    assert getattr(caught.value, "__notes__", []) == []  # (its message names it)


def _other(text: str) -> str:
    raise KeyError("other")


def _texts(value: Any) -> Iterator[str]:
    """Every string in a JSON document, at any depth."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def test_a_nested_workflows_other_failed_branch_is_a_note_not_stored_text() -> None:
    """A nested Parallel's second failed branch: a note of its RunError, in no text the state stores."""
    workflow = Sequence(_first("a"), Parallel(charge, _other, name="p"), name="outer")
    with pytest.raises(RunError) as caught:
        workflow.run("x")
    inner = "step 'charge' of Parallel 'p' failed: Error: PaymentDeclined: card declined"
    assert (
        str(caught.value)
        == f"step 'p' of Sequence 'outer' failed: Error: RunError: {inner}{STATE_NOTE}"
    )
    state = caught.value.state
    assert state is not None
    assert state.error is not None
    assert state.error.message == (
        f"tool 'p' failed once (max_retries=0); last error: Error: RunError: {inner}{STATE_NOTE}"
    )
    stored = list(_texts(json.loads(state.to_json())))
    assert not [text for text in stored if "failed too" in text]
    assert state.calls[-1].result is not None
    assert state.calls[-1].result.content == f"Error: RunError: {inner}{STATE_NOTE}"
    nested = caught.value.__cause__
    assert isinstance(nested, RunError)
    assert nested.__notes__ == ["step '_other' failed too: Error: KeyError: 'other'"]


def test_an_other_failed_nested_workflow_is_noted_without_the_state_note() -> None:
    """The note naming a failed nested-workflow branch does not repeat the state note."""
    workflow = Parallel(Sequence(charge, name="s1"), Sequence(_other, name="s2"), name="p")
    with pytest.raises(RunError) as caught:
        workflow.run("x")
    assert str(caught.value).count(STATE_NOTE) == 1
    assert caught.value.__notes__ == [
        "step 's2' failed too: Error: RunError: step '_other' of Sequence 's2' failed: "
        "Error: KeyError: 'other'"
    ]


@pytest.mark.parametrize(
    "sibling",
    [Task(_other, on_error="skip"), Task(_other, on_error="retry", retries=2)],
    ids=["skip", "retries_left"],
)
def test_a_failed_branch_its_step_still_allows_is_not_named(sibling: Task) -> None:
    """A failed branch that does not fail the workflow (skipped, retries left) is not noted as failed."""
    with pytest.raises(RunError) as caught:
        Parallel(charge, sibling, name="p").run("x")
    assert getattr(caught.value, "__notes__", []) == []
    assert "failed too" not in str(caught.value)


def test_a_failures_text_does_not_hide_an_other_failed_branch() -> None:
    """A step's error whose text reads like a held failure's still gets its other failed branch noted."""

    def confusing(text: str) -> str:
        raise PaymentDeclined("tool '_other' failed too: it says")

    with pytest.raises(RunError) as caught:
        Parallel(confusing, _other, name="p").run("x")
    assert caught.value.__notes__ == ["step '_other' failed too: Error: KeyError: 'other'"]


def test_add_note_adds_to_an_errors_notes() -> None:
    """`add_note` appends to ``__notes__`` (made when missing), as `BaseException.add_note` does."""
    error = ValueError("x")
    add_note(error, "first")
    add_note(error, "second")
    assert error.__notes__ == ["first", "second"]
