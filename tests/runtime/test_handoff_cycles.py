"""Handoff cycles: a target given by name closes the loop, at run time and in every view of it."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path
from typing import Any

import pytest

from toolfold import Agent, Handoff, RunError, Sequence, UsageError, tool
from toolfold.files import from_dict, loads
from toolfold.runtime import RunState, fork, replay
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call
search = str(Path(__file__).resolve().parents[1] / "files")  # files_helpers.py


def desk(triage_says: list[Any], billing_says: list[Any]) -> Agent:
    """triage hands to billing (the agent), billing back to triage (by name)."""
    billing = Agent(
        ScriptedModel(billing_says), name="billing", instructions="Bill.", handoffs=["triage"]
    )
    return Agent(
        ScriptedModel(triage_says), name="triage", instructions="Sort.", handoffs=[billing]
    )


def exact(state: RunState) -> None:
    """The state replays from its log and survives JSON exactly."""
    assert replay(state.log) == state
    assert RunState.from_json(state.to_json()) == state


def test_a_cycle_hands_the_run_back_and_forth() -> None:
    """triage -> billing -> triage -> answer: each turn runs with the agent named."""
    triage = desk(
        [call("transfer_to_billing"), "Sorted: it was a billing question."],
        [call("transfer_to_triage")],
    )
    response = triage.run("my invoice")
    assert response.text == "Sorted: it was a billing question."
    assert response.agent == "triage"
    handed = [e.agent for e in response.state.events if e.kind == "handed_off"]
    assert handed == ["billing", "triage"]
    exact(response.state)


def test_a_ping_pong_cycle_stops_at_max_steps_and_resumes() -> None:
    """A cycle stops at the run's max_steps (the first agent's); resuming with more goes on."""
    pong = Agent(FunctionModel(lambda r: call("transfer_to_ping")), name="pong", handoffs=["ping"])
    ping = Agent(
        FunctionModel(lambda r: call("transfer_to_pong")), name="ping", handoffs=[pong], max_steps=3
    )
    stopped = ping.run("go")
    assert stopped.finish_reason == "max_steps"
    assert stopped.state.step == 3
    assert stopped.agent == "pong"  # step 3's transfer ran: the stopped run went to pong
    exact(stopped.state)
    state = RunState.from_json(stopped.state.to_json())
    more = ping.resume(state, max_steps=5)
    assert more.finish_reason == "max_steps"
    assert more.state.step == 5
    handed = [e.agent for e in more.state.events if e.kind == "handed_off"]
    assert handed == ["pong", "ping", "pong", "ping", "pong"]
    assert more.state.config.max_steps == 5  # pong's own limit (10) never applied
    exact(more.state)
    again = ping.resume(fork(more.state, step=2), max_steps=3)
    assert again.state.step == 3


def test_a_run_suspended_after_the_edge_back_resumes_with_the_named_agent() -> None:
    """An approval asked by the agent reached by name resumes with it, from JSON."""

    @tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refund money.

        Args:
            amount: How much.
        """
        return f"refunded {amount}"

    billing = Agent(
        ScriptedModel([call("transfer_to_triage")]), name="billing", handoffs=["triage"]
    )
    triage = Agent(
        ScriptedModel([call("transfer_to_billing"), call("refund", {"amount": 3}), "Refunded 3."]),
        name="triage",
        tools=[refund],
        handoffs=[billing],
    )
    waiting = triage.run("refund please")
    assert waiting.agent == "triage"
    assert [c.name for c in waiting.pending_approvals] == ["refund"]
    state = RunState.from_json(waiting.state.to_json())
    done = triage.resume(state, approvals={c.id: True for c in state.pending_approvals})
    assert done.text == "Refunded 3."
    exact(done.state)


def test_a_name_no_agent_of_the_graph_has_is_an_error_before_the_run() -> None:
    """Starting with an agent whose handoff by name leads nowhere is a UsageError naming it."""
    billing = Agent(ScriptedModel(["hi"]), name="billing", handoffs=["triage"])
    with pytest.raises(UsageError, match=r"'billing' -> 'triage'"):
        billing.run("hello")


def test_two_agents_with_one_name_in_a_graph_are_refused() -> None:
    """Names find agents, so two different agents sharing one are an error."""
    first = Agent(ScriptedModel(["a"]), name="twin", instructions="one")
    second = Agent(ScriptedModel(["b"]), name="twin", instructions="two")
    hub = Agent(ScriptedModel(["c"]), name="hub", handoffs=[first, Handoff(second, name="other")])
    with pytest.raises(UsageError, match="two different agents are named 'twin'"):
        hub.run("x")


def test_a_workflow_is_not_a_handoff_target() -> None:
    """Handing a conversation to a workflow is a definition error pointing to as_tool."""
    flow = Sequence(Agent(ScriptedModel(["x"]), name="a"))
    with pytest.raises(UsageError, match=r"workflow\.as_tool\(\)"):
        Agent(ScriptedModel(["x"]), name="b", handoffs=[flow])  # type: ignore[list-item]


def test_the_diagram_draws_the_edge_back() -> None:
    """to_mermaid draws each agent once, and the handoff by name as an edge back."""
    triage = desk([], [])
    assert triage.to_mermaid() == (
        "flowchart LR\n"
        '    triage(["triage<br/>scripted:model"])\n'
        '    billing(["billing<br/>scripted:model"])\n'
        '    billing -.->|"handoff"| triage\n'
        '    triage -.->|"handoff"| billing\n'
    )
    lone = Agent(ScriptedModel([]), name="billing", handoffs=["triage"])
    assert 'triage(["triage<br/>(not found)"])' in lone.to_mermaid()


def test_a_cycle_round_trips_through_to_dict_and_pickle() -> None:
    """to_dict writes the cycle by names; from_dict and pickle build agents that run it."""
    document = {
        "entry": "triage",
        "agents": {
            "triage": {"model": "files_helpers:model", "handoffs": ["billing"]},
            "billing": {"model": "files_helpers:model", "handoffs": ["triage"]},
        },
    }
    loaded = from_dict(document, search=search)
    for name in ("triage", "billing"):
        agent = loaded.agent(name)
        assert set(agent.handoff_graph()) == {"triage", "billing"}
        assert agent.to_dict()["agents"][name]["handoffs"] == [
            "billing" if name == "triage" else "triage"
        ]
        assert from_dict(agent.to_dict(), search=search).agent().to_dict() == agent.to_dict()
        copy = pickle.loads(pickle.dumps(agent))
        assert set(copy.handoff_graph()) == {"triage", "billing"}


def test_a_file_may_declare_a_handoff_cycle() -> None:
    """In a file, handoffs name agents: a cycle loads, and any agent of it runs."""
    text = """
[agents.triage]
model = "files_helpers:model"
handoffs = ["billing"]

[agents.billing]
model = "files_helpers:model"
handoffs = ["triage", "refunds"]

[agents.refunds]
model = "files_helpers:model"
handoffs = ["triage"]
"""
    loaded = loads(text, search=search)
    triage, billing = loaded.agent("triage"), loaded.agent("billing")
    assert isinstance(triage.handoffs[0], Agent)  # targets built earlier are the agents
    assert set(billing.handoff_graph()) == {"triage", "billing", "refunds"}
    assert "triage" in loaded.agent("refunds").to_mermaid()


class CountingSource:
    """A tool source that counts its holders (open and close nest, as MCP servers do)."""

    def __init__(self) -> None:
        self.holders = 0
        self.opened = 0

    def open(self) -> None:
        self.holders += 1
        self.opened += 1

    def close(self) -> None:
        self.holders -= 1

    def tools(self) -> list[Any]:
        @tool
        def ledger() -> str:
            """Read the ledger."""
            return "balanced"

        return [ledger]


def ping_pong(source: CountingSource) -> Agent:
    """ping hands to pong (which has ``source``), pong back to ping (by name), up to 5 steps."""
    pong = Agent(
        FunctionModel(lambda r: call("transfer_to_ping")),
        name="pong",
        handoffs=["ping"],
        tools=[source],
    )
    return Agent(
        FunctionModel(lambda r: call("transfer_to_pong")), name="ping", handoffs=[pong], max_steps=5
    )


def test_a_cycle_streams_and_closes_the_sources_it_opened_on_its_way() -> None:
    """Streaming a cycle shows each handoff's steps; every source opened on the way is closed."""
    source = CountingSource()
    ping = ping_pong(source)
    stream = ping.stream("go")
    names = [e.call.name for e in stream if type(e).__name__ == "ToolCallEvent"]
    assert names == ["transfer_to_pong", "transfer_to_ping"] * 2 + ["transfer_to_pong"]
    assert stream.response.finish_reason == "max_steps"
    assert source.opened == 1  # once per run, however often the run reached pong
    assert source.holders == 0


def test_an_async_cycle_opens_a_handoffs_sources_once_and_closes_them() -> None:
    """Under arun, the sources a handoff opens serve the whole run and are closed when it ends."""
    source = CountingSource()
    ping = ping_pong(source)

    async def run() -> tuple[Any, int]:
        response = await ping.arun("go")
        return response, source.holders  # closed by the run, not by the loop's shutdown

    response, holders = asyncio.run(run())
    assert response.finish_reason == "max_steps"
    assert (source.opened, holders) == (1, 0)


def test_a_failed_async_run_closes_the_sources_a_handoff_opened() -> None:
    """A run that fails after a handoff opened sources still closes them, and raises the failure."""
    source = CountingSource()

    def broken(request: Any) -> Any:
        raise ConnectionError("the model is down")

    pong = Agent(FunctionModel(broken), name="pong", tools=[source])
    ping = Agent(FunctionModel(lambda r: call("transfer_to_pong")), name="ping", handoffs=[pong])

    async def run() -> tuple[RunError, int]:
        with pytest.raises(RunError, match="the model is down") as caught:
            await ping.arun("go")
        return caught.value, source.holders  # closed by the run, not by the loop's shutdown

    error, holders = asyncio.run(run())
    assert error.state.agent == "pong"
    assert (source.opened, holders) == (1, 0)


def test_a_handoff_to_a_name_no_agent_has_names_it_in_the_advice() -> None:
    """A handoff by a name no reachable agent has is refused naming that name in the
    advice too (it told of ``Agent(handoffs=[billing])`` whatever the names)."""
    triage = Agent(ScriptedModel([call("transfer_to_ghost")]), name="triage", handoffs=["ghost"])
    with pytest.raises(UsageError) as raised:
        triage.run("x")
    assert str(raised.value) == (
        "handoffs by name that name no agent reachable from agent 'triage': "
        "'triage' -> 'ghost'; somewhere on the way, hand off to the Agent named 'ghost' "
        "itself (the object in handoffs=[...], not its name), or start the run with the "
        "agent that does"
    )


def test_a_handoff_by_name_is_described_like_one_to_the_agent() -> None:
    """transfer_to_<name> of a handoff by name tells the model what the target does, as an object handoff's does."""
    seen: list[dict[str, str]] = []

    def billing_model(request: Any) -> Any:
        seen.append({t.name: t.description for t in request.tools})
        return "billed"

    billing = Agent(
        FunctionModel(billing_model), name="billing", instructions="Bill.", handoffs=["triage"]
    )
    triage = Agent(
        ScriptedModel([call("transfer_to_billing")]),
        name="triage",
        instructions="Sort the customer's question.",
        handoffs=[billing],
    )
    response = triage.run("my invoice")
    assert response.text == "billed"
    by_object = Handoff(triage).tool().description
    assert "Sort the customer's question." in by_object
    assert seen == [{"transfer_to_triage": by_object}]
    described = [
        t for t in response.state.config.tools if t.definition.name == "transfer_to_triage"
    ]
    assert described[0].definition.description == by_object
    exact(response.state)
    again = triage.resume(RunState.from_json(response.state.to_json()), message="and refunds?")
    assert again.text == "billed"  # the stored description is the one the resume makes


def _stops_at_transfer() -> Agent:
    """triage (max_steps=1) calls transfer_to_billing on its only step, unless asked anew."""

    def triage(request: Any) -> Any:
        if request.messages[-1].text == "new question":
            return "triage answers"
        return call("transfer_to_billing")

    billing = Agent(FunctionModel(lambda r: "billing answers"), name="billing")
    return Agent(FunctionModel(triage), name="triage", handoffs=[billing], max_steps=1)


def test_a_transfer_on_the_step_that_hits_max_steps_hands_over_before_the_stop() -> None:
    """The step at the limit ran its transfer: the run is handed to billing, then stops there."""
    stopped = _stops_at_transfer().run("go")
    assert stopped.finish_reason == "max_steps"
    assert stopped.agent == "billing"
    assert stopped.state.phase == "finished"
    assert [e.kind for e in stopped.state.events][-2:] == ["tool_returned", "handed_off"]
    assert stopped.state.messages[-1].tool_results[0].content == "Transferred to billing."
    exact(stopped.state)


@pytest.mark.parametrize("more", [{"message": "new question"}, {"max_steps": 3}])
def test_a_run_stopped_on_a_transfer_goes_on_with_the_target_however_resumed(
    more: dict[str, Any],
) -> None:
    """A new turn and more steps both continue with billing, the agent the transfer reached."""
    triage = _stops_at_transfer()
    state = RunState.from_json(triage.run("go").state.to_json())
    resumed = triage.resume(state, **more)
    assert (resumed.agent, resumed.text) == ("billing", "billing answers")
    assert [e.agent for e in resumed.state.events if e.kind == "handed_off"] == ["billing"]
    exact(resumed.state)


def test_a_streamed_run_stopped_on_a_transfer_hands_over_too() -> None:
    """Streaming the same run ends with billing, as run() does."""
    stream = _stops_at_transfer().stream("go")
    list(stream)
    assert stream.response.finish_reason == "max_steps"
    assert stream.response.agent == "billing"


def test_an_async_run_stopped_on_a_transfer_hands_over_too() -> None:
    """arun ends with billing, as run() does."""
    response = asyncio.run(_stops_at_transfer().arun("go"))
    assert (response.finish_reason, response.agent) == ("max_steps", "billing")


def test_a_run_a_tool_called_condition_stops_on_a_transfer_keeps_its_agent_and_answer() -> None:
    """A stop condition on the transfer tool stops the run as it is: no handoff, and the
    transfer's result is what it answers with (a handoff would drop the step's calls)."""
    from toolfold import tool_called

    billing = Agent(FunctionModel(lambda r: "billing answers"), name="billing")
    triage = Agent(
        FunctionModel(lambda r: call("transfer_to_billing")),
        name="triage",
        handoffs=[billing],
        stop_when=[tool_called("transfer_to_billing")],
    )
    stopped = triage.run("go")
    assert (stopped.finish_reason, stopped.agent) == ("tool_called", "triage")
    assert [e.kind for e in stopped.state.events if e.kind == "handed_off"] == []
    (record,) = stopped.state.calls  # what a caller of this run reads as its answer
    assert record.result is not None
    assert record.result.content == "Transferred to billing."
