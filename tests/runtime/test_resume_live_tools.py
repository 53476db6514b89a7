"""A resume sends the model the live tools' definitions, and says which given tools it cannot offer."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from toolfold import (
    Agent,
    ExtraToolsWarning,
    Response,
    RunState,
    Tool,
    aresume,
    generate_text,
    resume,
    tool,
)
from toolfold.runtime import Handoff
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@tool
def lookup(n: int) -> str:
    """Look up an order by number.

    Args:
        n: The order number.
    """
    return f"order {n}"


@tool(name="lookup")
def lookup_v2(order_id: str) -> str:
    """Look up an order by its id (v2).

    Args:
        order_id: The order id, e.g. "A-17".
    """
    return f"order {order_id}"


@tool
def extra(n: int) -> str:
    """Another tool.

    Args:
        n: A number.
    """
    return "extra"


def _suspended(model: ScriptedModel, tools: list[Tool[..., Any]] | None = None) -> RunState:
    """A run of ``lookup`` that stopped at max_steps=1 after one call (a run to resume)."""
    first = generate_text(model, "go", tools=tools or [lookup], max_steps=1)
    assert first.finish_reason == "max_steps"
    return first.state


def _sent(model: ScriptedModel) -> list[tuple[str, str, list[str]]]:
    """The tools the model's last request carried: name, description, parameter names."""
    return [
        (t.name, t.description, list(t.parameters["properties"])) for t in model.requests[-1].tools
    ]


def _resume_agent(state: RunState, model: ScriptedModel, tools: list[Any]) -> Response:
    return Agent(model, tools=tools, max_steps=5).resume(state)


def _aresume_agent(state: RunState, model: ScriptedModel, tools: list[Any]) -> Response:
    return asyncio.run(Agent(model, tools=tools, max_steps=5).aresume(state))


def _resume_stream(state: RunState, model: ScriptedModel, tools: list[Any]) -> Response:
    stream = Agent(model, tools=tools, max_steps=5).resume_stream(state)
    for _ in stream:
        pass
    return stream.response


def _resume_functional(state: RunState, model: ScriptedModel, tools: list[Any]) -> Response:
    return resume(state, model=model, tools=tools, max_steps=5)


RESUMES: list[Callable[[RunState, ScriptedModel, list[Any]], Response]] = [
    _resume_functional,
    _resume_agent,
    _aresume_agent,
    _resume_stream,
]


@pytest.mark.parametrize("resume_with", RESUMES)
def test_a_resume_sends_the_live_tool_definition_the_calls_are_checked_against(
    resume_with: Callable[[RunState, ScriptedModel, list[Any]], Response],
) -> None:
    """A tool changed under the same name while the run waited: the model sees its new schema."""
    model = ScriptedModel([call("lookup", {"n": 1}), call("lookup", {"order_id": "A-17"}), "done"])
    state = _suspended(model)
    again = resume_with(state, model, [lookup_v2])
    assert _sent(model) == [("lookup", "Look up an order by its id (v2).", ["order_id"])]
    assert model.requests[-2].tools == model.requests[-1].tools  # every request of the resume
    results = [r.content for s in again.steps for r in s.tool_results]
    assert results[-1] == "order A-17"
    # The stored configuration is the run's own: its tools are those it started with.
    assert again.state.config.definitions == state.config.definitions
    assert RunState.from_json(again.state.to_json()) == again.state


def test_a_resume_with_the_same_tools_sends_the_stored_definitions() -> None:
    """Tools that did not change: the requests carry the run's stored definitions themselves."""
    model = ScriptedModel([call("lookup", {"n": 1}), call("lookup", {"n": 2}), "done"])
    state = _suspended(model)
    again = resume(state, model=model, tools=[lookup], max_steps=5)
    assert again.finish_reason == "stop"
    stored = state.config.definitions
    assert all(a is b for a, b in zip(model.requests[-1].tools, stored, strict=True))


def test_a_schema_change_only_in_a_number_type_is_sent() -> None:
    """A live schema equal to the stored one by == but not as JSON (1 against True) is sent."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 1}}}
    old = Tool("count", "Count.", schema, function=lambda args: "ok")
    new_schema = {"type": "object", "properties": {"n": {"type": "integer", "default": True}}}
    new = Tool("count", "Count.", new_schema, function=lambda args: "ok")
    model = ScriptedModel([call("count", {"n": 1}), call("count", {"n": 1}), "done"])
    state = generate_text(model, "go", tools=[old], max_steps=1).state
    resume(state, model=model, tools=[new], max_steps=5)
    default = model.requests[-1].tools[0].parameters["properties"]["n"]["default"]
    assert default is True


def test_a_tool_without_a_function_that_is_not_given_keeps_its_stored_definition() -> None:
    """The run's returned-calls tool is not given again: its stored definition is still sent."""
    ask = Tool(
        "ask_user",
        "Ask the user.",
        {"type": "object", "properties": {"question": {"type": "string"}}},
    )
    model = ScriptedModel([call("lookup", {"n": 1}), "done"])
    state = _suspended(model, [lookup, ask])
    resume(state, model=model, tools=[lookup_v2], max_steps=5)
    assert _sent(model) == [
        ("lookup", "Look up an order by its id (v2).", ["order_id"]),
        ("ask_user", "Ask the user.", ["question"]),
    ]


def test_tools_the_run_did_not_start_with_are_named_in_a_warning() -> None:
    """An extra tool given to a resume is not offered, and a warning says so and what to do."""
    model = ScriptedModel([call("lookup", {"n": 1}), "done"])
    state = _suspended(model)
    with pytest.warns(ExtraToolsWarning, match=r"'extra'.*fixed at its start.*history=") as seen:
        resume(state, model=model, tools=[lookup, extra], max_steps=5)
    assert len(seen) == 1
    assert [name for name, _, _ in _sent(model)] == ["lookup"]


def test_a_resume_with_the_run_s_own_tools_warns_nothing() -> None:
    """The usual resume (the same tools) raises no warning."""
    model = ScriptedModel([call("lookup", {"n": 1}), "done"])
    state = _suspended(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resume(state, model=model, tools=[lookup], max_steps=5).finish_reason == "stop"


def test_the_live_definitions_end_at_a_handoff() -> None:
    """After a handoff in the resumed run, the requests carry the next agent's own tools."""
    model = ScriptedModel([call("lookup", {"n": 1}), call("transfer_to_billing", {}), "billed"])
    billing = Agent(model, name="billing", tools=[extra], instructions="You bill.")
    desk = Agent(model, name="desk", tools=[lookup], handoffs=[Handoff(billing)], max_steps=1)
    first = desk.run("go")
    assert first.finish_reason == "max_steps"
    live_desk = Agent(
        model, name="desk", tools=[lookup_v2], handoffs=[Handoff(billing)], max_steps=5
    )
    done = live_desk.resume(first.state)
    assert done.text == "billed"
    after_resume = [t.name for t in model.requests[-2].tools]
    assert "lookup" in after_resume
    assert model.requests[-2].tools[after_resume.index("lookup")].description.endswith("(v2).")
    handed = [t.name for t in model.requests[-1].tools]
    assert "extra" in handed  # billing's tools, not the resume's
    assert "lookup" not in handed


async def _aresume_functional(state: RunState, model: ScriptedModel, tools: list[Any]) -> None:
    await aresume(state, model=model, tools=tools, max_steps=5)


@pytest.mark.parametrize(
    "run",
    [
        _resume_functional,
        _resume_agent,
        _resume_stream,
        _aresume_agent,
        lambda s, m, t: asyncio.run(_aresume_functional(s, m, t)),
    ],
    ids=["resume", "Agent.resume", "Agent.resume_stream", "Agent.aresume", "aresume"],
)
def test_the_extra_tools_warning_points_at_the_user_s_call(run: Any) -> None:
    """ExtraToolsWarning names the file of the user's resume call, not toolfold's, and
    speaks of one tool in the singular."""
    model = ScriptedModel([call("lookup", {"n": 1}), "done"])
    state = _suspended(model)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run(state, model, [lookup, extra])
    found = [w for w in seen if issubclass(w.category, ExtraToolsWarning)]
    assert [w.filename for w in found] == [__file__]
    assert "tool 'extra' is not offered" in str(found[0].message)
