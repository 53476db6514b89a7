"""A durable run's handle refuses answers that are no answers on the client, sending nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from toolfold import Agent, UsageError
from toolfold.integrations.temporal import AgentHandle, TemporalAgent
from toolfold.runtime import ApprovalGranted, ToolResultPart, ToolResultsProvided
from toolfold.testing import FunctionModel

asker = TemporalAgent(Agent(FunctionModel(lambda request: "done"), name="s35asker"))

EXAMPLE = "(provide([ToolResultPart('call_1', 'ask_user', 'Paris')]))"


class _NoServer:
    """A workflow handle that records what would be sent: none of these calls may get that far."""

    id = "s35-no-server"

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def execute_update(self, update: Any, arg: Any) -> Any:
        self.sent.append(arg)
        raise AssertionError("the handle sent an update it should have refused")


@pytest.mark.parametrize(
    ("send", "expected"),
    [
        (
            lambda h: h.provide("Paris"),
            f"provide(): results must be a list of ToolResultPart, got str 'Paris' {EXAMPLE}",
        ),
        (
            lambda h: h.provide(ToolResultPart("c1", "ask_user", "Paris")),
            "provide(): results must be a list of ToolResultPart, got ToolResultPart",
        ),
        (
            lambda h: h.provide([ToolResultPart("c1", "ask_user", "Paris"), "Rome"]),
            f"provide(): results[1] must be a ToolResultPart, got str 'Rome' {EXAMPLE}",
        ),
        (
            lambda h: h.provide([]),
            "provide() got no result: give one per waiting call, "
            "provide([ToolResultPart('call_1', 'ask_user', 'Paris')])",
        ),
        (lambda h: h.answer(), "answer() got nothing to send: give the answers"),
        (
            lambda h: h.answer(ToolResultsProvided(())),
            "answer() got nothing to send: give the answers",
        ),
        (
            lambda h: h.answer(ApprovalGranted("c1"), "c2"),
            "answer(): events[1] must be an event (ApprovalGranted, ApprovalDenied, "
            "ToolResultsProvided), got str 'c2' (approve() takes call ids, provide() results)",
        ),
    ],
)
def test_provide_and_answer_refuse_what_is_no_answer_before_sending(
    send: Callable[[AgentHandle], Awaitable[Any]], expected: str
) -> None:
    """provide('Paris'), provide([]), answer() and answer('x') are UsageErrors naming the
    argument, as approve() with nothing is; they were a bare AttributeError, an empty
    update the run accepted, or the workflow's 'Failed decoding arguments'."""
    workflow = _NoServer()
    handle = AgentHandle(asker, workflow)  # type: ignore[arg-type]
    with pytest.raises(UsageError) as raised:
        asyncio.run(send(handle))
    assert str(raised.value).startswith(expected)
    assert workflow.sent == []


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((3,), {}, "TemporalAgent(): agent must be an Agent or a workflow spec"),
        (("openai:gpt-4o-mini",), {}, "got str 'openai:gpt-4o-mini'"),
        ((Agent(FunctionModel(lambda r: "x")),), {"name": 5}, "name= must be a str, got int 5"),
    ],
)
def test_temporal_agent_refuses_what_is_no_agent(
    args: tuple[Any, ...], kwargs: dict[str, Any], expected: str
) -> None:
    """TemporalAgent(3) is a UsageError naming the argument; it was a bare AttributeError."""
    with pytest.raises(UsageError) as raised:
        TemporalAgent(*args, **kwargs)
    assert expected in str(raised.value)
