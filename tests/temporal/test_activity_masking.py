"""The model's key a tool quotes is masked in the tool activity's result, which the
workflow's history records and the next model request carries."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio.common import RawValue
from temporalio.testing import ActivityEnvironment

import toolfold
from toolfold import Agent, tool
from toolfold.integrations.temporal import ToolfoldPayloadConverter
from toolfold.integrations.temporal._activities import (
    ToolCallInput,
    make_activities,
    tool_activity_name,
)
from toolfold.runtime.core._effects import ToolInvocation
from toolfold.runtime.core._events import ToolReturned
from toolfold.runtime.core._messages import ToolCallPart

KEY = "sk-temporal-key-0123456789abcdef"
HELPER_KEY = "sk-temporal-helper-0123456789abcdef"


@tool
def leak() -> str:
    """Returns a configuration line holding both models' keys."""
    return f"key={KEY} helper={HELPER_KEY}"


def _activity_result(activities: list[Any], name: str) -> ToolReturned:
    """What the activity ``name`` gives for a call of ``leak``: its event (decoded, when
    the activity encoded it itself)."""
    (run_tool,) = [a for a in activities if a.__temporal_activity_definition.name == name]
    invocation = ToolInvocation(ToolCallPart("c1", "leak", "{}", {}), 0, 1, "r:1:0")
    environment = ActivityEnvironment()
    environment.payload_converter = ToolfoldPayloadConverter()
    out = asyncio.run(environment.run(run_tool, ToolCallInput(invocation, "r")))
    if isinstance(out, RawValue):
        out = environment.payload_converter.from_payload(out.payload, ToolReturned)
    assert isinstance(out, ToolReturned)
    return out


def _model(key: str) -> Any:
    return toolfold.model(
        "openai-compatible:m", base_url="http://127.0.0.1:9/v1", api_key=key, retry=0
    )


def test_a_tool_activity_s_result_holds_no_key_of_its_node_s_model() -> None:
    """The top run's and a sub-run's tool activities mask their own node's model key in
    the result they record (it was recorded as the tool returned it, and sent on): the
    helper's model has a key of its own, which the top's mask would leave."""
    helper = Agent(_model(HELPER_KEY), tools=[leak], name="helper")
    agent = Agent(_model(KEY), tools=[leak, helper.as_tool(name="ask_helper")])
    activities = make_activities("masked", agent, heartbeat=timedelta(seconds=30))
    top = _activity_result(activities, tool_activity_name("masked", "leak")).content
    assert top.startswith("key=*** ")
    sub = _activity_result(activities, tool_activity_name("masked.ask_helper", "leak")).content
    assert sub.endswith(" helper=***")
