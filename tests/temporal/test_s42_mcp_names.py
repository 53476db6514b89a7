"""A durable run makes an MCP server's tools from its recorded listing with a local run's names."""

from __future__ import annotations

import sys
from typing import Any

from toolfold import Agent
from toolfold.integrations.temporal._nested import listed, node
from toolfold.mcp import MCPServerStdio
from toolfold.testing import FunctionModel


def _named(*names: str) -> tuple[dict[str, Any], ...]:
    """A listing of tools named ``names``, without parameters."""
    schema = {"type": "object", "properties": {}}
    return tuple({"name": name, "description": name, "inputSchema": schema} for name in names)


def test_colliding_cjk_names_are_told_apart_in_workflow_code_as_in_a_local_run() -> None:
    """'天気' and '時間' ('__' each when made alone) get the hashed names a local run gives
    them, each routed to its own listed entry; a listing without collisions keeps its names."""
    server = MCPServerStdio(sys.executable, ["unused.py"], name="jp")
    agent = Agent(FunctionModel(lambda messages, info: "done"), tools=[server], name="jp")
    entries = _named("天気", "時間", "天気予報")
    made = listed(node("jp", agent), (entries,))
    local = [tool.name for tool in server.tools_from(entries)]
    assert list(made.tools) == local == ["___bc79d84d", "___bf6267da", "____"]
    assert {name: made.sourced[name].spec["name"] for name in local} == {
        "___bc79d84d": "天気",
        "___bf6267da": "時間",
        "____": "天気予報",
    }
    assert made.config is not None
    assert [spec.name for spec in made.config.tools] == local
    alone = listed(node("jp", agent), (_named("天気", "天気予報"),))
    assert list(alone.tools) == ["__", "____"]
