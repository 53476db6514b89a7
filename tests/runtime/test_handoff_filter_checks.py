"""A handoff's input filter cannot hand the target a conversation no provider takes."""

from __future__ import annotations

import pytest

from toolfold import Agent, Handoff, Message, RunError, tool
from toolfold.runtime import ModelRequest
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


@tool
def lookup(order: str) -> str:
    """Look up an order.

    Args:
        order: The order id.
    """
    return "shipped"


def _triage(sent: list[ModelRequest], input_filter: object) -> Agent:
    def refunds_reply(request: ModelRequest) -> str:
        sent.append(request)
        return "refunded"

    refunds = Agent(FunctionModel(refunds_reply), name="refunds")
    return Agent(
        ScriptedModel([call("lookup", {"order": "A17"}), call("transfer_to_refunds")]),
        name="triage",
        tools=[lookup],
        handoffs=[Handoff(refunds, input_filter=input_filter)],  # type: ignore[arg-type]
    )


def test_a_filter_leaving_results_that_answer_no_call_is_refused_naming_it() -> None:
    """Results whose calls the filter dropped are refused before the target's model is called."""
    sent: list[ModelRequest] = []

    def no_calls(messages: tuple[Message, ...]) -> list[Message]:
        return [m for m in messages if not (m.role == "assistant" and m.tool_calls)]

    with pytest.raises(RunError) as caught:
        _triage(sent, no_calls).run("refund A17")
    assert str(caught.value).startswith(
        "the input_filter of the handoff to 'refunds' returned a conversation no provider "
        "takes: message 1 (tool): the result for 'call_1_0' answers no open call"
    )
    assert "toolfold.drop_tool_calls" in str(caught.value)
    assert sent == []
    assert caught.value.state is not None
    assert caught.value.state.agent == "triage"


def test_a_filter_leaving_calls_without_results_is_refused_naming_it() -> None:
    """Calls whose results the filter dropped fail as a RunError naming the filter and target."""
    sent: list[ModelRequest] = []

    def no_results(messages: tuple[Message, ...]) -> list[Message]:
        return [m for m in messages if m.role != "tool"]

    with pytest.raises(RunError) as caught:
        _triage(sent, no_results).run("refund A17")
    assert str(caught.value).startswith(
        "the input_filter of the handoff to 'refunds' returned a conversation no provider "
        "takes: it has tool calls without results: 'call_1_0' (lookup)"
    )
    assert sent == []
    assert caught.value.state is not None
    assert caught.value.state.phase == "awaiting_model"


def test_a_filter_keeping_calls_with_their_results_hands_off() -> None:
    """A filter that keeps each call with its result (or drops both) still hands the run over."""
    sent: list[ModelRequest] = []

    def no_user(messages: tuple[Message, ...]) -> list[Message]:
        return [messages[0], *(m for m in messages[1:] if m.role != "user")]

    response = _triage(sent, no_user).run("refund A17")
    assert (response.agent, response.text) == ("refunds", "refunded")
    assert len(sent) == 1
