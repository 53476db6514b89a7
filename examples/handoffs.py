"""Handoffs: a triage agent hands the conversation to billing, which hands it to refunds.

Each ``transfer_to_<name>`` tool moves the run to another agent: its
instructions and tools take over, on the same conversation (an
``input_filter`` may trim it). ``response.agent`` names who answered last.

    python examples/handoffs.py
"""

from __future__ import annotations

from toolfold import Agent, Handoff, Message, tool
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@tool
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order id.
    """
    return f"order {order} refunded"


def without_tool_traffic(messages: tuple[Message, ...]) -> list[Message]:
    """What refunds sees: only the user's messages (no tool calls, no results)."""
    return [m for m in messages if m.role == "user"]


refunds = Agent(
    ScriptedModel([call("refund", {"order": "A17"}), "Order A17 is refunded."]),
    name="refunds",
    instructions="Refund orders.",
    tools=[refund],
)
billing = Agent(
    ScriptedModel([call("transfer_to_refunds")]),
    name="billing",
    instructions="Answer billing questions; hand refunds over.",
    handoffs=[Handoff(refunds, input_filter=without_tool_traffic)],
)
triage = Agent(
    ScriptedModel([call("transfer_to_billing")]),
    name="triage",
    instructions="Send each customer to the right team.",
    handoffs=[billing],
)


def main() -> None:
    response = triage.run("I was charged twice for order A17, refund one please")
    print(f"{response.agent}: {response.text}")
    assert response.agent == "refunds"


if __name__ == "__main__":
    main()
