"""One place decides approvals: the core's view and a driver's view agree."""

from __future__ import annotations

from typing import Any

import pytest

from toolfold import Tool, ToolCallPart
from toolfold.runtime import RunConfig, ToolSpec, initial_state
from toolfold.runtime.core._approval import dispositions, policy_says

SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _tool(requires_approval: Any, has_function: bool = True) -> Tool[..., Any]:
    function = (lambda arguments: "ok") if has_function else None
    return Tool("t", "", SCHEMA, function, requires_approval=requires_approval)


@pytest.mark.parametrize("auto_execute_tools", [True, False])
@pytest.mark.parametrize("has_function", [True, False])
@pytest.mark.parametrize("requires_approval", [True, False])
def test_core_and_driver_agree_on_static_policies(
    auto_execute_tools: bool, has_function: bool, requires_approval: bool
) -> None:
    """For a bool policy the stored spec alone gives what the live tool gives."""
    live = _tool(requires_approval, has_function)
    spec = ToolSpec.from_tool(live)
    config = RunConfig(tools=[spec], auto_execute_tools=auto_execute_tools)
    state = initial_state("go", config, run_id="r")
    calls = [ToolCallPart("c1", "t", "{}", {}), ToolCallPart("c2", "other", "{}", {})]

    def asked(call: ToolCallPart) -> bool:
        return policy_says(live if call.name == "t" else None, call, state, unknown=True)

    assert dispositions(config, calls, None) == dispositions(config, calls, asked)


def test_only_a_live_policy_decides_a_predicate() -> None:
    """Without the live tool a predicate's call has no disposition; with it, the predicate says."""
    live = _tool(lambda call, state: call.arguments["amount"] > 100)
    spec = ToolSpec.from_tool(live)
    config = RunConfig(tools=[spec])
    state = initial_state("go", config, run_id="r")
    calls = [ToolCallPart(f"c{n}", "t", "{}", {"amount": n}) for n in (5, 500)]

    def asked(call: ToolCallPart) -> bool:
        return policy_says(live, call, state, unknown=True)

    assert dispositions(config, calls, None) == [None, None]
    assert dispositions(config, calls, asked) == ["execute", "approve"]


def test_an_unknown_or_failing_policy() -> None:
    """No live tool answers as told; a predicate that raises requires approval."""
    state = initial_state("go", RunConfig(), run_id="r")
    call = ToolCallPart("c", "t", "{}", {})
    assert policy_says(None, call, state, unknown=True) is True
    assert policy_says(None, call, state, unknown=False) is False
    assert policy_says(_tool(lambda call, state: 1 / 0), call, state, unknown=False) is True
