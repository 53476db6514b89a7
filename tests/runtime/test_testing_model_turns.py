"""TestModel across a run: output retries, shared models' usage, scripted outputs."""

from __future__ import annotations

import pytest

from toolfold import Agent, OutputValidationError, tool
from toolfold.testing import TestModel


def test_a_rejected_output_is_asked_again_without_calling_the_tools_again() -> None:
    """An output retry is no new turn: TestModel calls each tool once, then only answers."""
    calls: list[int] = []

    @tool
    def charge(amount: int) -> str:
        """Charge the card.

        Args:
            amount: The amount.
        """
        calls.append(amount)
        return "charged"

    model = TestModel(output={"code": 5})  # (refused: code is a string)
    agent = Agent(model, tools=[charge], output_type=dict[str, str], output_retries=2)
    with pytest.raises(OutputValidationError):
        agent.run("go")
    assert len(calls) == 1
    # one request calling the tool, then the answer and the two answers asked again
    assert len(model.requests) == 4
