"""A tool call of an answer the provider cut never runs, whichever model gave it and however it is run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import toolfold
from toolfold import Agent, Response, RunState
from toolfold.runtime import (
    Message,
    ModelResponded,
    ModelResponse,
    TextPart,
    ToolCallPart,
    Usage,
)
from toolfold.testing import ScriptedModel

ran: list[str] = []


@toolfold.tool
def send_email(to: str, body: str = "") -> str:
    """Send an email.

    Args:
        to: Recipient.
        body: Body.
    """
    ran.append(to)
    return "sent"


def _cut(finish: Any) -> ModelResponse:
    call = ToolCallPart("c1", "send_email", '{"to": "ceo"}', {"to": "ceo"})
    return ModelResponse(Message("assistant", (TextPart("x"), call)), Usage(1, 1), finish)


def _ran_as(mode: str, agent: Agent) -> Response:
    if mode == "run":
        return agent.run("go")
    if mode == "arun":
        return asyncio.run(agent.arun("go"))
    stream = agent.stream("go")
    if mode == "stream":
        for _ in stream:
            pass
    else:

        async def read() -> None:
            async for _ in stream:
                pass

        asyncio.run(read())
    return stream.response


@pytest.mark.parametrize("finish", ["length", "content_filter"])
@pytest.mark.parametrize("mode", ["run", "arun", "stream", "astream"])
def test_a_custom_models_cut_call_never_runs_in_any_mode(mode: str, finish: str) -> None:
    """A ScriptedModel answer cut (length, content_filter) with a call: the call runs in no mode, the run finishes with the cut."""
    ran.clear()
    agent = Agent(ScriptedModel([_cut(finish), "done"]), tools=[send_email])
    response = _ran_as(mode, agent)
    assert ran == []
    assert response.finish_reason == finish
    assert response.steps[-1].response.tool_calls == ()
    assert response.text == "x"


_SAVED = Path(__file__).parent / "saved"


def test_a_state_saved_before_the_drop_loads_and_resumes_as_it_ran() -> None:
    """States saved by toolfold before calls of a cut answer were dropped (1c027008) load unchanged: the logged call stays and resumes."""
    for name in ("cut_call_paused.json", "cut_call_ran.json"):
        text = (_SAVED / name).read_text()
        state = RunState.from_json(text)
        assert state.to_json() == text
        first = next(e for e in state.events if isinstance(e, ModelResponded)).response
        assert (first.finish_reason, [c.id for c in first.tool_calls]) == ("length", ["c1"])
        assert [c.id for m in state.conversation for c in m.tool_calls] == ["c1"]
    paused = RunState.from_json((_SAVED / "cut_call_paused.json").read_text())
    assert paused.phase == "awaiting_tool_results"
    agent = Agent(ScriptedModel(["done"]), tools=[send_email], auto_execute_tools=False)
    resumed = agent.resume(paused, tool_results={"c1": "sent"})
    assert (resumed.finish_reason, resumed.text) == ("stop", "done")
    assert resumed.steps[0].response.finish_reason == "length"
    assert [c.id for c in resumed.steps[0].response.tool_calls] == ["c1"]
