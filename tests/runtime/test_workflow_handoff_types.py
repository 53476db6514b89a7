"""An agent step with handoffs gives whichever output type the agent that answers has."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from toolfold import Agent, Sequence, WorkflowDefinitionError
from toolfold.testing import ScriptedModel


@attrs.frozen
class Order:
    """An order."""

    quantity: int


def quantity(order: Order) -> int:
    """The order's quantity."""
    return order.quantity


def _desk(target_type: Any = Order) -> Agent:
    target = Agent(ScriptedModel(['{"quantity": 3}']), name="orders", output_type=target_type)
    return Agent(
        ScriptedModel([ScriptedModel.call("transfer_to_orders")]), name="desk", handoffs=[target]
    )


def test_a_typed_step_after_an_agent_that_hands_off_to_a_typed_agent_builds_and_runs() -> None:
    """``quantity(order: Order)`` after an agent handing off to an ``Order`` agent builds (it
    used to be refused: the step was said to give text) and gets the typed output."""
    assert Sequence(_desk(), quantity).run("x").output == 3


def test_a_step_whose_agents_all_give_text_is_still_checked() -> None:
    """When every agent of the handoff graph gives text, a step taking Order is still refused."""
    with pytest.raises(
        WorkflowDefinitionError,
        match="step 'quantity' takes Order, but the step before it, 'desk', gives str",
    ):
        Sequence(_desk(None), quantity)
