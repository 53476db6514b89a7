"""A durable run's MCP tools as a local run's: their names from the recorded listing. No dev
server: the workflow code and the activities are called directly."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporal_runs import _decoded
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import toolfold
from toolfold import Agent
from toolfold.integrations.temporal._activities import (
    SourceCallInput,
    SourceHost,
    ToolCallInput,
    make_activities,
    model_activity_name,
    source_call_activity,
)
from toolfold.integrations.temporal._converter import data_converter
from toolfold.integrations.temporal._nested import listed, node
from toolfold.mcp import MCPServerStdio
from toolfold.runtime import ModelRequest
from toolfold.runtime.core._effects import CallModel, ToolInvocation
from toolfold.runtime.core._events import ToolReturned
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.testing import FunctionModel

DOTTED = str(Path(__file__).parents[1] / "ecosystem" / "dotted_server.py")


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


def test_a_tool_choice_naming_a_listed_tool_is_checked_in_workflow_code_as_locally() -> None:
    """An agent whose tool_choice names an MCP tool is made (it was refused, naming no tool),
    and its durable run takes it once the recorded listing has the tool; a tool_choice
    naming none of the listed tools is the UsageError a local run raises."""
    server = MCPServerStdio(sys.executable, ["unused.py"], name="jp", prefix="jp")
    forced = Agent(FunctionModel(lambda m, i: "x"), tools=[server], name="jp", tool_choice="jp_a")
    made = listed(node("jp", forced), (_named("a", "b"),))
    assert made.config is not None
    assert made.config.tool_choice == "jp_a"
    typo = Agent(FunctionModel(lambda m, i: "x"), tools=[server], name="jp", tool_choice="a")
    with pytest.raises(toolfold.UsageError) as raised:
        listed(node("jp", typo), (_named("a", "b"),))
    assert str(raised.value) == (
        "tool_choice 'a' is not a tool of agent 'jp': its own tools: none; the tools its tool "
        "sources (MCPServerStdio 'jp') listed, named as the model is sent them: jp_a, jp_b; "
        "did you mean 'jp_a'?"
    )


def test_the_call_activity_names_a_told_apart_tool_as_the_run_does() -> None:
    """The call activity makes the tool from its entry alone ('__'), but names it as the
    run does ('___bc79d84d'): in the message of a result over the size limit too."""
    server = MCPServerStdio(sys.executable, [DOTTED, "cjk"], name="jp")
    call = source_call_activity({"jp": SourceHost((server,), None, 5.0, 10)})
    entry = _named("天気")[0]
    invocation = ToolInvocation(ToolCallPart("c1", "___bc79d84d", "{}", {}), 0, 1, "r:1:0")
    given = SourceCallInput("jp", 0, entry, ToolCallInput(invocation, "r"))
    (payload,) = data_converter.payload_converter.to_payloads([given])
    env = ActivityEnvironment()
    env.payload_converter = data_converter.payload_converter
    returned = _decoded(asyncio.run(env.run(call, [RawValue(payload)])), ToolReturned)
    assert returned.is_error
    assert returned.content.startswith("the result of tool '___bc79d84d' is ")


def _anthropic() -> Any:
    """An Anthropic model at an address where nothing listens: its request fails to compile first."""
    return toolfold.model(
        "anthropic:claude-x", base_url="http://127.0.0.1:9", api_key="k" * 20, retry=0
    )


def test_a_refused_parameter_name_fails_the_model_activity_without_listing_the_server(
    tmp_path: Path,
) -> None:
    """The model activity fails at once on an MCP tool's parameter name Anthropic refuses
    (non-retryable SchemaCompileError): it does not start the server to list it again."""
    seen: list[ModelRequest] = []

    def capture(request: ModelRequest) -> str:
        seen.append(request)
        return "done"

    listed_once = MCPServerStdio(sys.executable, [DOTTED, "keys"], name="dotted")
    Agent(FunctionModel(capture), tools=[listed_once]).run("x")
    flag = tmp_path / "started"
    marking = MCPServerStdio(
        sys.executable, ["-c", f"open({str(flag)!r}, 'w').close()"], name="dotted"
    )
    agent = Agent(_anthropic(), tools=[marking], name="keys")
    made = make_activities("keys", agent, heartbeat=timedelta(seconds=30))
    (request,) = [
        a
        for a in made
        if getattr(a, "__temporal_activity_definition").name == model_activity_name("keys")
    ]
    with pytest.raises(ApplicationError) as raised:
        asyncio.run(ActivityEnvironment().run(request, CallModel(seen[0], 1, "r:1:model")))
    assert raised.value.type == "SchemaCompileError"
    assert raised.value.non_retryable
    assert "cannot compile tool 'files_read' for anthropic" in raised.value.message
    assert not flag.exists()
