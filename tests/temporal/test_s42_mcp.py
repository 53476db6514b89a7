"""A durable run's MCP tools as a local run's: their names from the recorded listing, and the
advice of a parameter name the provider refuses. No dev server: the workflow code and the
model activity are called directly."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import toolfold
from toolfold import Agent, Tool, tool
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
    returned = asyncio.run(env.run(call, [RawValue(payload)]))
    assert returned.is_error
    assert returned.content.startswith("the result of tool '___bc79d84d' is ")


def _anthropic() -> Any:
    """An Anthropic model at an address where nothing listens: its request fails to compile first."""
    return toolfold.model(
        "anthropic:claude-x", base_url="http://127.0.0.1:9", api_key="k" * 20, retry=0
    )


def _durable_failure(tools: list[Any]) -> str:
    """The message of the failure of the durable model activity of an Anthropic agent with
    ``tools``, for the request a local run makes first."""
    seen: list[ModelRequest] = []

    def capture(request: ModelRequest) -> str:
        seen.append(request)
        return "done"

    Agent(FunctionModel(capture), tools=tools).run("x")
    agent = Agent(_anthropic(), tools=tools, name="keys")
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
    return raised.value.message


def test_a_refused_parameter_name_of_an_mcp_tool_says_to_leave_it_out_on_the_durable_path() -> None:
    """The durable model activity words the refusal of an MCP tool's 'rule_name[]' as a local
    run does (include=[...] on its server), not "rename the parameter"."""
    server = MCPServerStdio(sys.executable, [DOTTED, "keys"], name="dotted")
    said = _durable_failure([server])
    assert "cannot compile tool 'files_read' for anthropic: 1 problem" in said
    assert (
        "(an MCP server's, which cannot be renamed: leave the tool out with include=[...] on "
        "MCP server 'dotted', without 'files.read')" in said
    )
    assert "rename the parameter" not in said


def test_a_refused_parameter_name_of_a_function_or_schema_tool_is_advised_per_kind_durably() -> (
    None
):
    """A function's parameter still says to rename it; an explicit schema's property says to
    rename it there or leave the tool out, on the durable path as locally."""

    @tool
    def meteo(città: str) -> str:
        """The weather."""
        return città

    assert _durable_failure([meteo]).endswith("(rename the parameter)")
    schema = {"type": "object", "properties": {"Account Number": {"type": "string"}}}
    account = Tool("account", "An account.", schema, lambda arguments: "ok")
    assert _durable_failure([account]).endswith(
        "(rename the property in the tool's parameters schema, or leave the tool out of tools=[...])"
    )
