"""on_event sees the AttemptDropped a failing run records (a cut stream's usage, the sub-runs
of a call that raised under on_tool_error="raise"), and an observer raising there keeps the
run's own error in the chain."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import toolfold
from toolfold import Agent, RunError, StreamError, ToolExecutionError, Usage
from toolfold.runtime import AttemptDropped, Event, ModelRequest, TextDelta, UsageUpdate
from toolfold.testing import FunctionModel, ScriptedModel

BILLED = Usage(input_tokens=5000, output_tokens=1, requests=1)


def _cut_model() -> FunctionModel:
    """A model whose stream reports ``BILLED``, sends a word, and is cut."""

    def events(request: ModelRequest) -> Iterator[object]:
        yield UsageUpdate(BILLED)
        yield TextDelta("word ")
        raise StreamError("the stream ended before the message finished", provider="p")

    return FunctionModel(lambda request: "done", stream_function=events)


def test_on_event_sees_a_cut_streams_dropped_answer() -> None:
    """The AttemptDropped holding a cut stream's usage is shown to on_event, once."""
    seen: list[Event] = []
    with pytest.raises(StreamError) as caught:
        list(Agent(_cut_model()).stream("hi", on_event=seen.append))
    assert [e.kind for e in seen] == ["run_started", "attempt_dropped"]
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert list(state.log) == seen


def test_an_on_event_raising_at_a_cut_streams_dropped_answer_keeps_the_streams_error() -> None:
    """An observer raising at that event stops the run with its RunError, chained to the
    observer's exception, whose context is the stream's error; the state counts the usage."""

    def observe(event: Event) -> None:
        if event.kind == "attempt_dropped":
            raise ValueError("observer down")

    with pytest.raises(RunError, match="on_event observer raised ValueError") as caught:
        list(Agent(_cut_model()).stream("hi", on_event=observe))
    cause = caught.value.__cause__
    assert isinstance(cause, ValueError)
    assert isinstance(cause.__context__, StreamError)
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.usage == BILLED


def test_a_custom_streams_error_says_its_state_counts_the_reported_usage() -> None:
    """A RunError wrapping a custom model's stream error says its state counts the usage the
    stream reported (it is not the run before the call alone)."""

    def events(request: ModelRequest) -> Iterator[object]:
        yield UsageUpdate(BILLED)
        yield TextDelta("word ")
        raise ConnectionResetError("peer reset")

    agent = Agent(FunctionModel(lambda request: "done", stream_function=events))
    with pytest.raises(RunError) as caught:
        list(agent.stream("hi"))
    assert (
        "the error's state is the run before that call, counting the usage its stream "
        "reported before it failed, resume it to retry" in str(caught.value)
    )
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.usage == BILLED


def _raising_round() -> Agent:
    """An agent whose one call runs a sub-agent that stops at max_steps without answering:
    under on_tool_error="raise" the call fails, its sub-run's usage an AttemptDropped."""

    @toolfold.tool
    def lookup() -> str:
        """Look something up."""
        return "found"

    inner = Agent(
        ScriptedModel([FunctionModel.call("lookup", {})]),
        name="inner",
        tools=[lookup],
        max_steps=1,
    )
    return Agent(
        ScriptedModel([FunctionModel.call("inner", {"input": "x"})]),
        name="outer",
        tools=[inner.as_tool()],
        on_tool_error="raise",
    )


def test_on_event_sees_the_dropped_sub_runs_of_a_raised_tool_error() -> None:
    """The AttemptDropped counting a failed call's sub-run is shown to on_event as the
    ToolExecutionError is raised."""
    seen: list[Event] = []
    with pytest.raises(ToolExecutionError) as caught:
        _raising_round().run("go", on_event=seen.append)
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert seen[-1] == state.log[-1]
    assert isinstance(seen[-1], AttemptDropped)
    assert seen[-1].sub_run_usage.requests == 1  # the sub-agent's one model call


def test_an_on_event_raising_at_a_raised_tool_errors_dropped_sub_runs_keeps_that_error() -> None:
    """An observer raising there: its RunError, the observer's exception its cause, the
    ToolExecutionError that exception's context."""

    def observe(event: Event) -> None:
        if event.kind == "attempt_dropped":
            raise ValueError("observer down")

    with pytest.raises(RunError, match="on_event observer raised ValueError") as caught:
        _raising_round().run("go", on_event=observe)
    cause = caught.value.__cause__
    assert isinstance(cause, ValueError)
    assert isinstance(cause.__context__, ToolExecutionError)


def _wrapped_cut_model() -> FunctionModel:
    """A model whose stream reports ``BILLED``, sends a word, and fails with an error the
    run wraps in a RunError (a custom model's)."""

    def events(request: ModelRequest) -> Iterator[object]:
        yield UsageUpdate(BILLED)
        yield TextDelta("word ")
        raise ConnectionResetError("peer reset")

    return FunctionModel(lambda request: "done", stream_function=events)


def _interrupting(event: Event) -> None:
    """An observer that Ctrl-C interrupts at the dropped answer."""
    if event.kind == "attempt_dropped":
        raise KeyboardInterrupt


@pytest.mark.parametrize("model", [_cut_model, _wrapped_cut_model])
def test_ctrl_c_in_on_event_at_a_cut_streams_dropped_answer_keeps_the_state(
    model: Callable[[], FunctionModel],
) -> None:
    """Ctrl-C landing in on_event at that event: the KeyboardInterrupt carries (as its own
    ``.state``) the state counting the cut stream's usage, the run's error its context."""
    with pytest.raises(KeyboardInterrupt) as caught:
        list(Agent(model()).stream("hi", on_event=_interrupting))
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert getattr(caught.value, "state", None) is state
    assert state.usage == BILLED
    assert [e.kind for e in state.log] == ["run_started", "attempt_dropped"]
    assert isinstance(caught.value.__context__, (StreamError, RunError))


def test_an_on_event_raising_at_a_wrapped_stream_errors_dropped_answer_keeps_the_run_error() -> (
    None
):
    """An observer raising at the dropped answer of a stream error the run wraps: the
    observer's exception has that RunError (the error the run raised) as its context."""

    def observe(event: Event) -> None:
        if event.kind == "attempt_dropped":
            raise ValueError("observer down")

    with pytest.raises(RunError, match="on_event observer raised ValueError") as caught:
        list(Agent(_wrapped_cut_model()).stream("hi", on_event=observe))
    cause = caught.value.__cause__
    assert isinstance(cause, ValueError)
    context = cause.__context__
    assert isinstance(context, RunError)
    assert isinstance(context.__cause__, ConnectionResetError)


def test_ctrl_c_in_on_event_at_a_raised_tool_errors_dropped_sub_runs_keeps_the_state() -> None:
    """Ctrl-C landing in on_event at the AttemptDropped of on_tool_error="raise": the
    KeyboardInterrupt carries (as its own ``.state``) that error's state, the
    ToolExecutionError its context."""
    with pytest.raises(KeyboardInterrupt) as caught:
        _raising_round().run("go", on_event=_interrupting)
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert getattr(caught.value, "state", None) is state
    assert isinstance(state.log[-1], AttemptDropped)
    assert state.usage.requests == 1  # the outer run's one model call
    context = caught.value.__context__
    assert isinstance(context, ToolExecutionError)
    assert context.state is state
