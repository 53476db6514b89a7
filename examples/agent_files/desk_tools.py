"""What desk.toml names by import path, and a demo model that plays its agents."""

from __future__ import annotations

import asyncio

from toolfold import ModelRequest, RunState
from toolfold.testing import FunctionModel, Reply


def research(topic: str) -> str:
    """The pipeline's first step: notes on the topic."""
    return f"notes on {topic}"


async def fact_check(notes: str) -> str:
    """A source that never answers: the step's timeout ends it."""
    await asyncio.Event().wait()
    return notes


def too_long(state: RunState) -> bool:
    """A stop condition: the conversation has grown past 40 messages."""
    return len(state.conversation) > 40


def _demo(request: ModelRequest) -> Reply:
    """Plays each agent: billing hands a parcel question back, triage then writes it up."""
    last = request.messages[-1]
    tools = {t.name for t in request.tools}
    system = request.messages[0].text if request.messages[0].role == "system" else ""
    if system.startswith("Write"):
        return f"A paragraph from {last.text}."
    if last.role == "tool" and last.tool_results[0].tool_name == "pipeline":
        return last.tool_results[0].content
    if "transfer_to_triage" in tools:  # billing: this is no billing question
        return FunctionModel.call("transfer_to_triage")
    if any(m.role == "tool" for m in request.messages):  # triage, back from billing
        return FunctionModel.call("pipeline", {"input": "parcel delays"})
    return FunctionModel.call("transfer_to_billing")


demo_model = FunctionModel(_demo, name="demo:desk")
"""A model for every agent of the file: ``toolfold run ... --model desk_tools:demo_model``."""
