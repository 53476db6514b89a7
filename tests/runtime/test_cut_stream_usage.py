"""A model's stream that fails after its provider reported usage: the billed usage is
counted in the error's state, once, by a resume and by token_budget too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

import toolfold
from toolfold import Agent, RunState, StreamError, Usage, token_budget
from toolfold.runtime import ModelRequest, StreamEvent, TextDelta, UsageUpdate
from toolfold.runtime.core._stop import stop_answer
from toolfold.testing import FunctionModel

BILLED = Usage(input_tokens=5000, output_tokens=1, cached_tokens=4000, requests=1)
ANSWER = Usage(input_tokens=7, output_tokens=3, requests=1)


def _model(
    reported: bool = True, reply: Callable[[ModelRequest], Any] | None = None
) -> FunctionModel:
    """A model whose first stream reports ``BILLED`` (if ``reported``) and is cut; then
    ``reply`` answers (default: "done")."""
    streams = [0]

    def events(request: ModelRequest) -> Iterator[object]:
        streams[0] += 1
        if streams[0] == 1:
            if reported:
                yield UsageUpdate(BILLED)
            yield TextDelta("word ")
            raise StreamError("the stream ended before the message finished", provider="p")
        yield UsageUpdate(ANSWER)
        yield TextDelta("done")

    return FunctionModel(reply or (lambda request: "done"), stream_function=events)


def _drain(agent: Agent, how: str) -> None:
    """Read the agent's stream to its end, blocking or async."""
    if how == "sync":
        for _ in agent.stream("hi"):
            pass
        return

    async def main() -> None:
        async for _ in agent.stream("hi"):
            pass

    asyncio.run(main())


def _cut(agent: Agent, how: str) -> RunState:
    """The state of the error the first stream's cut raises."""
    with pytest.raises(StreamError) as caught:
        _drain(agent, how)
    state = toolfold.state_of(caught.value)
    assert isinstance(state, RunState)
    return state


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_cut_streams_reported_usage_is_in_the_errors_state_and_counted_once(how: str) -> None:
    """err.state.usage holds what the cut stream reported; the resume adds only its own request."""
    agent = Agent(_model())
    state = _cut(agent, how)
    assert state.usage == BILLED
    assert state.phase == "awaiting_model"
    saved = RunState.from_json(state.to_json())
    assert saved.usage == BILLED
    response = agent.resume(saved)
    assert response.text == "done"
    (step,) = response.steps
    assert response.usage == BILLED + step.usage


def test_a_stream_cut_before_any_usage_counts_nothing() -> None:
    """A stream that failed before reporting usage leaves the state's usage as it was."""
    state = _cut(Agent(_model(reported=False)), "sync")
    assert state.usage == Usage()


@toolfold.tool
def lookup() -> str:
    """Look something up."""
    return "found"


def test_token_budget_counts_a_cut_streams_usage() -> None:
    """The resumed run stops at a budget its one new request alone does not reach: the cut
    stream's billed tokens count."""
    answers = iter([FunctionModel.call("lookup", {}), "done"])
    model = _model(reply=lambda request: next(answers))
    agent = Agent(model, tools=[lookup], stop_when=[token_budget(1000)])
    state = _cut(agent, "sync")
    response = agent.resume(state)
    (step,) = response.steps
    assert step.usage.total_tokens < 1000
    assert response.state.finish_reason == "token_budget"
    assert response.usage == BILLED + step.usage
    used = BILLED.total_tokens + step.usage.total_tokens
    assert stop_answer(response.state, "agent 'a'") == (
        f"Error: agent 'a' stopped at its limit token_budget=1000 ({used} tokens used, "
        f"{BILLED.total_tokens} of them by an answer dropped to ask the model again) "
        "after 1 model call without answering"
    )


class _CutAsync(FunctionModel):
    """A model whose async stream reports ``BILLED``, sends a word, then waits until cancelled
    (``sent`` is set once the word is out); its blocking stream and later calls answer "done"."""

    def __init__(self) -> None:
        super().__init__(lambda request: "done")
        self.sent = asyncio.Event()
        self.streams = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.streams += 1
        if self.streams > 1:
            async for event in super().stream(request):
                yield event
            return
        yield UsageUpdate(BILLED)
        yield TextDelta("word ")
        self.sent.set()
        await asyncio.Future()  # (cancelled here)


def _interrupted_sync(agent: Agent, where: str) -> RunState:
    """The state of the Ctrl-C that cuts the agent's first stream after its usage came:
    raised by the model's stream, or landing in the caller's code at the word it holds."""
    events = iter(agent.stream("hi"))
    if where == "caller":
        next(e for e in events if isinstance(e, TextDelta))
        with pytest.raises(KeyboardInterrupt) as caught:
            events.throw(KeyboardInterrupt())  # type: ignore[attr-defined]
    else:
        with pytest.raises(KeyboardInterrupt) as caught:
            list(events)
    state = toolfold.state_of(caught.value)
    assert isinstance(state, RunState)
    return state


@pytest.mark.parametrize("where", ["model", "caller"])
def test_ctrl_c_while_a_stream_answers_keeps_its_reported_usage_once(where: str) -> None:
    """Ctrl-C after the stream reported usage: the interruption's state counts it, the resume
    adds only its own request."""

    def events(request: ModelRequest) -> Iterator[object]:
        yield UsageUpdate(BILLED)
        yield TextDelta("word ")
        if where == "model":
            raise KeyboardInterrupt
        yield TextDelta("more")

    agent = Agent(FunctionModel(lambda request: "done", stream_function=events))
    state = _interrupted_sync(agent, where)
    assert state.usage == BILLED
    assert [e.kind for e in state.log] == ["run_started", "attempt_dropped"]
    response = Agent(FunctionModel(lambda request: "done")).resume(state)
    (step,) = response.steps
    assert response.usage == BILLED + step.usage


def test_a_cancellation_while_a_stream_answers_keeps_its_reported_usage_once() -> None:
    """A task cancelled while its stream answers, after the usage came: the CancelledError's
    state counts it once, and a resume adds only its own request."""
    model = _CutAsync()
    agent = Agent(model)
    states: list[RunState | None] = []

    async def consume() -> None:
        try:
            async for _ in agent.stream("hi"):
                pass
        except asyncio.CancelledError as exc:
            states.append(toolfold.state_of(exc))
            raise

    async def main() -> None:
        task = asyncio.create_task(consume())
        await model.sent.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (state,) = states
    assert state is not None
    assert state.usage == BILLED
    response = agent.resume(state)
    (step,) = response.steps
    assert response.usage == BILLED + step.usage
    assert [e.kind for e in response.state.log].count("attempt_dropped") == 1


@pytest.mark.parametrize("thrown", [KeyboardInterrupt, asyncio.CancelledError])
def test_an_interruption_thrown_in_at_an_async_streams_event_keeps_its_reported_usage(
    thrown: type[BaseException],
) -> None:
    """Ctrl-C or a cancellation thrown (``athrow``) into an async stream at the word the caller
    holds, after the usage came: its state counts that usage once, as a blocking stream's."""

    def events(request: ModelRequest) -> Iterator[object]:
        yield UsageUpdate(BILLED)
        yield TextDelta("word ")
        yield TextDelta("more")

    agent = Agent(FunctionModel(lambda request: "done", stream_function=events))

    async def main() -> RunState | None:
        stream = agent.stream("hi").__aiter__()
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        with pytest.raises(thrown) as caught:
            await stream.athrow(thrown())
        return toolfold.state_of(caught.value)

    state = asyncio.run(main())
    assert state is not None
    assert state.usage == BILLED
    assert [e.kind for e in state.log] == ["run_started", "attempt_dropped"]
    response = Agent(FunctionModel(lambda request: "done")).resume(state)
    (step,) = response.steps
    assert response.usage == BILLED + step.usage
