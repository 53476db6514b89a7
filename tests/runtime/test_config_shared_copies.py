"""Read-only copies are made once and shared: a tool's schema by its configs, a loaded state's config by its first event."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from toolfold import Agent, RunState, Tool, generate_text, tool
from toolfold._errors import SerializationError, UsageError
from toolfold.adapters._dialects import _compile
from toolfold.adapters._dialects._compile import compile_tool
from toolfold.runtime import FrozenDict, ToolDefinition, max_steps
from toolfold.runtime.core import _same_json, _serialize
from toolfold.runtime.core._config import ToolSpec
from toolfold.testing import ScriptedModel


@tool
def weather(city: str, days: int = 1) -> str:
    """Weather.

    Args:
        city: The city.
        days: How many days.
    """
    return city


def test_configs_built_from_one_tool_share_its_frozen_schema() -> None:
    """Two generate_text calls that build their own configs send one and the same read-only schema object."""
    model = ScriptedModel(["a", "b"])
    for _ in range(2):  # (stop_when: a config of its own per call)
        generate_text(model, "x", tools=[weather], stop_when=[max_steps(3)])
    first, second = (request.tools[0].parameters for request in model.requests)
    assert type(first) is FrozenDict
    assert first is second
    assert ToolSpec.from_tool(weather).definition.parameters is first


def test_a_schema_changed_in_place_is_copied_again() -> None:
    """The frozen copy of a schema dict edited in place (a 1 become True too) is a copy of the new schema."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}},
    }
    before = _same_json.frozen_schema(schema)
    assert _same_json.frozen_schema(schema) is before
    schema["properties"]["n"]["minimum"] = True  # == 1, another JSON value
    changed = _same_json.frozen_schema(schema)
    assert changed is not before
    assert type(changed["properties"]["n"]["minimum"]) is bool
    assert type(before["properties"]["n"]["minimum"]) is int
    schema["properties"]["n"]["title"] = "N"
    assert _same_json.frozen_schema(schema)["properties"]["n"]["title"] == "N"


def test_a_tool_keeps_its_schema_when_the_callers_dict_changes() -> None:
    """A Tool's configs send the schema it was made with: the caller's dict edited afterwards reaches none."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}},
    }
    count = Tool("count", "Count.", schema, lambda args: args)
    before = ToolSpec.from_tool(count).definition.parameters
    schema["properties"]["n"]["minimum"] = True
    after = ToolSpec.from_tool(count).definition.parameters
    assert after is before
    assert type(after["properties"]["n"]["minimum"]) is int


def test_a_frozen_schema_is_kept_as_it_is() -> None:
    """A ToolDefinition given a FrozenDict keeps that very object (no second copy)."""
    frozen = ToolSpec.from_tool(weather).definition.parameters
    assert ToolDefinition("t", "", frozen).parameters is frozen


def test_compiling_a_new_config_of_the_same_tool_skips_the_json_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """compile_tool finds a fresh config's definition by identity: no JSON text is made again for it."""
    compile_tool(ToolSpec.from_tool(weather).definition, "openai-chat")
    texts: list[Any] = []
    real = _compile._json_text
    monkeypatch.setattr(_compile, "_json_text", lambda schema: texts.append(schema) or real(schema))
    again = compile_tool(ToolSpec.from_tool(weather).definition, "openai-chat")
    assert again.source_schema == weather.parameters
    assert texts == []


def _saved() -> str:
    agent = Agent(ScriptedModel(["hi"]), tools=[weather], settings={"extra_body": {"k": [1]}})
    return agent.run("x").state.to_json()


def test_a_loaded_state_reads_its_config_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """RunState.from_json freezes the tool schema of a config its run_started event repeats once, not twice."""
    text = _saved()
    frozen: list[Any] = []
    real = _serialize.freeze
    monkeypatch.setattr(_serialize, "freeze", lambda value: frozen.append(value) or real(value))
    state = RunState.from_json(text)
    # (the settings are frozen as read too: kept as they are, as a saved state holds them)
    assert frozen == [weather.parameters, {"extra_body": {"k": [1]}}]
    assert state.log[0].config is state.config
    assert type(state.config.tools[0].definition.parameters) is FrozenDict
    assert state.to_json() == text


def test_loading_a_state_remembers_none_of_its_schemas() -> None:
    """The schemas a loaded state holds are frozen as they are read, not kept in the per-dict memo."""
    text = _saved()
    _same_json._frozen_schemas.clear()
    RunState.from_json(text)
    assert _same_json._frozen_schemas == {}


def test_a_config_edited_apart_from_its_first_event_is_still_refused() -> None:
    """A saved state whose config no longer matches its run_started event's fails to load, naming the config."""
    data = json.loads(_saved())
    data["config"]["tools"][0]["definition"]["description"] = "Edited."
    with pytest.raises(SerializationError, match=r"\$\.config"):
        RunState.from_json(json.dumps(data))


def test_a_tool_look_alike_with_wrong_fields_is_still_refused() -> None:
    """ToolSpec.from_tool of an object whose description is no str is the ToolDefinition's UsageError."""
    fake = SimpleNamespace(
        name="fake",
        description=5,
        parameters={"type": "object", "properties": {}},
        strict=None,
        requires_approval=False,
        function=None,
        max_retries=3,
    )
    with pytest.raises(UsageError, match=r"fake.*description"):
        ToolSpec.from_tool(fake)  # type: ignore[arg-type]
