"""on_tool_error="raise": the calls beside the failed one that ended are kept in the error's state."""

from __future__ import annotations

import asyncio

import pytest

import toolfold
from toolfold.runtime import replay
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


def _tools(effects: list[str]) -> list[toolfold.Tool]:
    @toolfold.tool
    def fails() -> str:
        """Fails."""
        effects.append("failed")
        raise ValueError("nope")

    @toolfold.tool
    def ship() -> str:
        """A sync side effect."""
        effects.append("shipped")
        return "shipped"

    @toolfold.tool
    async def charge() -> str:
        """An async side effect."""
        effects.append("charged")
        return "charged"

    return [fails, ship, charge]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_siblings_results_are_kept_and_resuming_runs_only_the_failed_call(mode: str) -> None:
    """The ToolExecutionError's state holds the ended siblings' results; a resume runs only `fails`."""
    effects: list[str] = []
    tools = _tools(effects)
    script = [[call("fails", {}), call("ship", {}), call("charge", {})], "fin"]
    agent = toolfold.Agent(ScriptedModel(script), tools=tools, on_tool_error="raise")
    run = agent.run if mode == "sync" else lambda prompt: asyncio.run(agent.arun(prompt))
    with pytest.raises(toolfold.ToolExecutionError, match="tool 'fails' failed") as caught:
        run("go")
    state = caught.value.state
    assert sorted(effects) == ["charged", "failed", "shipped"]
    results = {c.call.name: c.result.content for c in state.calls if c.result is not None}
    assert results == {"ship": "shipped", "charge": "charged"}
    assert replay(state.events) == state
    saved = toolfold.RunState.from_json(state.to_json())
    assert saved == state
    resumed = toolfold.Agent(ScriptedModel(["fin"]), tools=tools).resume(saved)
    assert resumed.text == "fin"
    assert sorted(effects) == ["charged", "failed", "failed", "shipped"]
