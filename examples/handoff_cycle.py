"""A handoff cycle: triage hands to billing, billing hands back to triage.

Agents are frozen, so two agents cannot hold each other: billing names its
target instead (``handoffs=["triage"]``), and the name is found among the
agents the run's first agent reaches. A cycle is bounded by ``max_steps``;
a run stopped there is resumable with a larger limit.

    python examples/handoff_cycle.py
"""

from __future__ import annotations

from toolfold import Agent, RunState
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call

billing = Agent(
    ScriptedModel([call("transfer_to_triage")]),
    name="billing",
    instructions="Answer billing questions; send anything else back to triage.",
    handoffs=["triage"],  # by name: the edge back
)
triage = Agent(
    ScriptedModel([call("transfer_to_billing"), "Your parcel ships on Monday."]),
    name="triage",
    instructions="Send each customer to the right team, or answer yourself.",
    handoffs=[billing],
)

# Two agents that only ever hand over: the run stops at its max_steps (the
# first agent's, for the whole run: a handoff does not reset it).
pong = Agent(
    FunctionModel(lambda request: call("transfer_to_ping")), name="pong", handoffs=["ping"]
)
ping = Agent(
    FunctionModel(lambda request: call("transfer_to_pong")),
    name="ping",
    handoffs=[pong],
    max_steps=4,
)


def main() -> None:
    response = triage.run("Where is my parcel? Is it a billing thing?")
    handed = [e.agent for e in response.state.events if e.kind == "handed_off"]
    print("handed to:", " -> ".join(handed))
    print(f"{response.agent}: {response.text}")
    print(triage.to_mermaid())

    stopped = ping.run("go")
    print(
        "ping-pong:",
        stopped.finish_reason,
        "after",
        stopped.state.step,
        "steps, with",
        stopped.agent,
    )
    state = RunState.from_json(stopped.state.to_json())  # e.g. in another process
    more = ping.resume(state, max_steps=6)
    print("resumed:", more.finish_reason, "after", more.state.step, "steps, with", more.agent)
    assert response.agent == "triage"
    assert more.state.step == 6


if __name__ == "__main__":
    main()
