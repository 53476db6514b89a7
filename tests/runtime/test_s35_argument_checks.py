"""Public constructors and loaders refuse wrong arguments with a UsageError naming them."""

from __future__ import annotations

from typing import Any

import pytest

from toolfold import RunState, UsageError
from toolfold.runtime import (
    MaxSteps,
    RunConfig,
    TokenBudget,
    ToolCalled,
    initial_state,
    max_steps,
    token_budget,
    tool_called,
)


@pytest.mark.parametrize("name", [None, 5, b"add", ""])
def test_tool_called_refuses_anything_but_a_tool_name(name: Any) -> None:
    """tool_called(None / 5 / b'add' / '') is a UsageError naming the argument, not a condition that loads back changed."""
    with pytest.raises(UsageError, match=r"tool_called\(name\): expected a tool name"):
        tool_called(name)


@pytest.mark.parametrize("name", [None, 5])
def test_a_hand_built_tool_called_refuses_a_name_that_is_not_text(name: Any) -> None:
    """ToolCalled(None) is refused: its saved state would load back as ToolCalled('None')."""
    with pytest.raises(UsageError, match=r"ToolCalled\.name: expected a tool name \(str\)"):
        ToolCalled(name)


@pytest.mark.parametrize("value", ["3", True, None, 0, 0.5])
def test_max_steps_and_token_budget_refuse_non_numbers_and_small_bounds(value: Any) -> None:
    """max_steps('3') / token_budget(True) and bounds below 1 are a UsageError naming the argument."""
    with pytest.raises(UsageError, match=r"max_steps\(steps\): expected a number at least 1"):
        max_steps(value)
    with pytest.raises(UsageError, match=r"token_budget\(tokens\): expected a number at least 1"):
        token_budget(value)


@pytest.mark.parametrize("value", ["3", True, None])
def test_hand_built_bounds_refuse_non_numbers(value: Any) -> None:
    """MaxSteps('3') and TokenBudget(True) are refused when built, not at the first step boundary."""
    with pytest.raises(UsageError, match=r"MaxSteps\.steps: expected a number"):
        MaxSteps(value)
    with pytest.raises(UsageError, match=r"TokenBudget\.tokens: expected a number"):
        TokenBudget(value)


def test_valid_stop_conditions_round_trip_unchanged() -> None:
    """max_steps, token_budget and tool_called with valid arguments save and load equal."""
    conditions = [max_steps(3), token_budget(50, tree=True), tool_called("add")]
    state = initial_state("x", RunConfig(stop_when=conditions), run_id="r")
    assert RunState.from_json(state.to_json()) == state
