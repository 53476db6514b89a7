"""The async API begun outside an asyncio event loop (under trio, say): one clear `UsageError`.

No test dependency on trio: a coroutine stepped by hand (``send(None)``), with
no event loop running, is where trio would run it.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest

from toolfold import Agent, Parallel, Sequence, UsageError, tool
from toolfold.testing import FunctionModel, TestModel

call = FunctionModel.call


def _stepped_by_hand(awaitable: Awaitable[Any]) -> UsageError:
    """The `UsageError` ``awaitable`` raises at its first step, taken with no event loop."""
    with pytest.raises(UsageError) as caught:
        awaitable.__await__().send(None)
    return caught.value


@tool(requires_approval=True)
def act() -> str:
    """Acts once approved."""
    return "done"


def _agent() -> Agent[Any, Any]:
    def reply(request: Any) -> Any:
        done = [r for m in request.messages for r in m.tool_results]
        return "ok" if done else [call("act", {}, id="a1")]

    return Agent(FunctionModel(reply), tools=[act])


def _named(name: str) -> Agent[Any, Any]:
    return Agent(TestModel(), name=name)


def test_arun_outside_asyncio_is_a_usage_error_naming_trio_and_the_blocking_way() -> None:
    """arun without an asyncio loop fails at once, naming asyncio, trio and anyio.to_thread."""
    error = _stepped_by_hand(Agent(TestModel()).arun("hi"))
    text = str(error)
    assert "asyncio event loop" in text
    assert "trio" in text
    assert "anyio.to_thread.run_sync" in text


def test_stream_aresume_and_a_workflows_arun_outside_asyncio_are_the_same_usage_error() -> None:
    """An async stream, aresume and a workflow's arun raise the same UsageError, running nothing."""
    agent = _agent()
    waiting = agent.run("go")  # (blocking: waits for the approval)
    stream = agent.stream("go")
    errors = [
        _stepped_by_hand(stream.__aiter__().__anext__()),
        _stepped_by_hand(agent.aresume(waiting.state, approvals={"a1": True})),
        _stepped_by_hand(Sequence(_named("a"), Parallel(_named("b"), _named("c"))).arun("x")),
    ]
    assert {str(error) for error in errors} == {str(_stepped_by_hand(agent.arun("go")))}
