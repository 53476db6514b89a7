"""The output type after a handoff: the agent that answers decides how its answer is read."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import pytest

from toolfold import Agent, RunEndEvent, tool
from toolfold.runtime import RunState, replay
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


@attrs.frozen
class Order:
    """An order the refunds agent reads out of the conversation."""

    item: str
    amount: int


@attrs.frozen
class Route:
    """What the triage agent would answer itself."""

    team: str


ORDER = json.dumps({"item": "lamp", "amount": 30})


def _refunds(*, approval: bool = False) -> Agent:
    @tool(requires_approval=approval)
    def check(item: str) -> str:
        """Check an order.

        Args:
            item: The item.
        """
        return f"{item} was bought"

    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool" and last.tool_results[0].tool_name == "check":
            return ORDER
        return call("check", {"item": "lamp"})

    return Agent(FunctionModel(reply), name="refunds", tools=[check], output_type=Order)


def _triage(refunds: Agent, output_type: Any = None) -> Agent:
    return Agent(
        ScriptedModel([call("transfer_to_refunds")]),
        name="triage",
        handoffs=[refunds],
        output_type=output_type,
    )


@pytest.mark.parametrize("triage_output", [None, Route], ids=["triage-plain", "triage-typed"])
def test_the_targets_output_type_reads_the_final_answer(triage_output: Any) -> None:
    """run, arun and both streams return the handoff target's structured output, of its type."""
    refunds = _refunds()
    triage = _triage(refunds, triage_output)
    response = triage.run("my lamp")
    assert response.agent == "refunds"
    assert response.output == Order("lamp", 30)
    assert response.state.config.output == refunds._options.config.output
    assert asyncio.run(_triage(_refunds(), triage_output).arun("my lamp")).output == Order(
        "lamp", 30
    )
    stream = _triage(_refunds(), triage_output).stream("my lamp")
    assert list(stream)[-1].response.output == Order("lamp", 30)

    async def streamed() -> Any:
        events = [e async for e in _triage(_refunds(), triage_output).stream("my lamp")]
        end = events[-1]
        assert isinstance(end, RunEndEvent)
        return end.response.output

    assert asyncio.run(streamed()) == Order("lamp", 30)


def test_a_target_without_output_type_answers_text_after_a_typed_agent() -> None:
    """A typed agent that hands to an untyped one gets the untyped one's plain text back."""
    helper = Agent(ScriptedModel(["just text"]), name="helper")
    triage = Agent(
        ScriptedModel([call("transfer_to_helper")]),
        name="triage",
        handoffs=[helper],
        output_type=Route,
    )
    response = triage.run("hi")
    assert (response.agent, response.text, response.output) == ("helper", "just text", "just text")


def test_resume_and_replay_keep_the_targets_output_type() -> None:
    """A run suspended in the target resumes (from JSON, via the first agent) into the target's output type."""
    triage = _triage(_refunds(approval=True))
    suspended = triage.run("my lamp")
    assert suspended.finish_reason == "approval_required"
    loaded = RunState.from_json(suspended.state.to_json())
    approvals = {c.id: True for c in loaded.pending_approvals}
    done = triage.resume(loaded, approvals=approvals)
    assert done.output == Order("lamp", 30)
    assert asyncio.run(triage.aresume(loaded, approvals=approvals)).output == Order("lamp", 30)
    streamed = list(triage.resume_stream(loaded, approvals=approvals))[-1]
    assert streamed.response.output == Order("lamp", 30)
    assert replay(done.state.log) == done.state
    assert done.state.output == {"item": "lamp", "amount": 30}
