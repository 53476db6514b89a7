"""Async functions where toolfold calls a plain one are refused where they are given."""

from __future__ import annotations

import asyncio
import functools
import re
import warnings
from typing import Any

import pytest

from toolfold import (
    Agent,
    Handoff,
    Message,
    Response,
    Sequence,
    UsageError,
    agenerate_text,
    aresume,
    generate_text,
    resume,
    tool,
)
from toolfold.runtime import RunState
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


async def _extract(response: Response) -> str:
    return response.text


async def _stop(state: RunState) -> bool:
    return False


async def _filter(messages: tuple[Message, ...]) -> list[Message]:
    return list(messages)


class _AsyncCall:
    async def __call__(self, state: RunState) -> bool:
        return False


@tool(requires_approval=True)
def delete(name: str) -> str:
    """Delete a thing.

    Args:
        name: What to delete.
    """
    return "deleted"


def test_an_async_output_function_of_as_tool_is_refused_naming_it() -> None:
    """as_tool(output=async def) is a UsageError saying it must be a plain function."""
    worker = Agent(ScriptedModel(["raw"]), name="worker")
    with pytest.raises(UsageError) as caught:
        worker.as_tool(output=_extract)
    assert re.match(
        r"as_tool\(output=\.\.\.\) takes a plain function of the sub-run's Response, got the "
        r"async function '[\w.]*:_extract'",
        str(caught.value),
    )


@pytest.mark.parametrize(
    "condition", [_stop, functools.partial(_stop), _AsyncCall()], ids=["def", "partial", "object"]
)
def test_an_async_stop_condition_is_refused_when_the_agent_is_made(condition: Any) -> None:
    """stop_when=[async def] is refused at Agent(...), not run (its coroutine stopped the run)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no coroutine left never awaited
        with pytest.raises(
            UsageError, match=r"stop_when takes plain functions.*make it a plain def"
        ):
            Agent(ScriptedModel(["x"]), stop_when=[condition])


def test_an_async_stop_condition_given_to_resume_is_refused() -> None:
    """resume(stop_when=[async def]) is refused too, before anything runs."""
    first = Agent(ScriptedModel([call("delete", {"name": "x"})]), tools=[delete]).run("go")
    with pytest.raises(UsageError, match=r"async function '[\w.]*:_stop'"):
        resume(first.state, model=ScriptedModel(["done"]), tools=[delete], stop_when=[_stop])


def test_an_async_input_filter_is_refused_naming_the_handoff() -> None:
    """Handoff(input_filter=async def) is refused when the agent is made, naming the target."""
    refunds = Agent(ScriptedModel(["Refunded."]), name="refunds")
    with pytest.raises(UsageError) as caught:
        Agent(ScriptedModel(["x"]), handoffs=[Handoff(refunds, input_filter=_filter)])  # type: ignore[arg-type]
    assert re.match(
        r"the input_filter of the handoff to 'refunds' is a plain function of the "
        r"conversation, got the async function '[\w.]*:_filter'",
        str(caught.value),
    )


async def _keyed(value: Any, api_key: str = "") -> bool:
    return False


def test_a_refused_partial_is_named_by_its_function_not_its_arguments() -> None:
    """A refused partial(async def, api_key=...) is named by its function: the key is not in the error."""
    keyed = functools.partial(_keyed, api_key="sk-SECRET123")
    refunds = Agent(ScriptedModel(["Refunded."]), name="refunds")
    worker = Agent(ScriptedModel(["done"]), name="worker")
    attempts = [
        lambda: Agent(ScriptedModel(["x"]), stop_when=[keyed]),
        lambda: Agent(ScriptedModel(["x"]), handoffs=[Handoff(refunds, input_filter=keyed)]),  # type: ignore[arg-type]
        lambda: worker.as_tool(output=keyed),
    ]
    for attempt in attempts:
        with pytest.raises(UsageError) as caught:
            attempt()
        assert "sk-SECRET123" not in str(caught.value)
        assert re.search(r"async function '[\w.]*:_keyed'", str(caught.value))


async def _observe(item: Any) -> None:
    return None


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


def _entry_points(model: ScriptedModel, observer: dict[str, Any]) -> list[Any]:
    """Every way to start or go on with a run that takes observers, given ``observer``."""
    agent = Agent(model, tools=[delete])
    flow = Sequence(Agent(model, name="step", tools=[delete]), name="flow")
    waiting = Agent(ScriptedModel([call("delete", {"name": "x"})]), tools=[delete]).run("go")
    flow_waiting = Sequence(
        Agent(ScriptedModel([call("delete", {"name": "x"})]), name="step", tools=[delete]),
        name="flow",
    ).run("go")
    approve = {waiting.pending_approvals[0].id: True}
    approve_flow = {flow_waiting.pending_approvals[0].id: True}
    return [
        lambda: agent.run("go", **observer),
        lambda: asyncio.run(agent.arun("go", **observer)),
        lambda: list(agent.stream("go", **observer)),
        lambda: asyncio.run(_drain(agent.stream("go", **observer))),
        lambda: generate_text(model, "go", tools=[delete], **observer),
        lambda: asyncio.run(agenerate_text(model, "go", **observer)),
        lambda: agent.resume(waiting.state, approvals=approve, **observer),
        lambda: asyncio.run(agent.aresume(waiting.state, approvals=approve, **observer)),
        lambda: list(agent.resume_stream(waiting.state, approvals=approve, **observer)),
        lambda: resume(waiting.state, model=model, tools=[delete], approvals=approve, **observer),
        lambda: asyncio.run(
            aresume(waiting.state, model=model, tools=[delete], approvals=approve, **observer)
        ),
        lambda: flow.run("go", **observer),
        lambda: asyncio.run(flow.arun("go", **observer)),
        lambda: list(flow.stream("go", **observer)),
        lambda: flow.resume(flow_waiting.state, approvals=approve_flow, **observer),
        lambda: asyncio.run(flow.aresume(flow_waiting.state, approvals=approve_flow, **observer)),
    ]


@pytest.mark.parametrize("option", ["on_event", "on_step"])
@pytest.mark.parametrize(
    "observer",
    [_observe, functools.partial(_observe), _AsyncCall()],
    ids=["def", "partial", "object"],
)
def test_an_async_observer_is_refused_by_every_entry_point(option: str, observer: Any) -> None:
    """on_event/on_step=async def is refused before any model call, not dropped unawaited."""
    model = ScriptedModel([])
    attempts = _entry_points(model, {option: observer})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no coroutine left never awaited
        for attempt in attempts:
            with pytest.raises(
                UsageError, match=rf"^{option} takes plain functions.*make it a plain def$"
            ):
                attempt()
    assert model.requests == []
