"""A run's config is read-only and its own: no run, observer or caller's dict changes another's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from toolfold import Agent, RunError, RunState, Tool, generate_text, tool
from toolfold.runtime import (
    FrozenDict,
    ModelRequest,
    ModelResponse,
    OutputSpec,
    RunConfig,
    ToolDefinition,
)
from toolfold.testing import ScriptedModel


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def test_editing_a_state_settings_or_tool_schema_leaves_the_next_call_alone() -> None:
    """A finished run's config refuses edits, so a later generate_text call sends its own settings and schema."""
    first = generate_text(ScriptedModel(["one"]), "x", tools=[add], temperature=0.2)
    with pytest.raises(TypeError, match="read-only"):
        first.state.config.settings["temperature"] = 2.0  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        first.state.config.tools[0].definition.parameters["properties"]["a"]["x"] = 1
    assert "x" not in add.parameters["properties"]["a"]
    model = ScriptedModel(["two"])
    generate_text(model, "x", tools=[add], temperature=0.2)
    assert model.requests[-1].settings == {"temperature": 0.2}
    assert model.requests[-1].tools[0].parameters == add.parameters


def test_an_observer_cannot_change_the_settings_of_later_runs() -> None:
    """An on_event observer editing run_started's config fails its run; the agent's next run keeps its settings."""
    model = ScriptedModel(["hi", "again"])
    agent = Agent(model, settings={"temperature": 0.5})

    def observer(event: Any) -> None:
        if event.kind == "run_started":
            event.config.settings["temperature"] = 1.9

    with pytest.raises(RunError, match="read-only"):
        agent.run("x", on_event=observer)
    agent.run("y")
    assert model.requests[-1].settings == {"temperature": 0.5}


def test_an_output_schema_is_read_only() -> None:
    """state.config.output.schema refuses edits, so the agent's next run asks for the same schema."""

    @dataclass
    class Out:
        n: int

    model = ScriptedModel(['{"n": 1}', '{"n": 2}'])
    agent = Agent(model, output_type=Out)
    output = agent.run("x").state.config.output
    assert output is not None
    with pytest.raises(TypeError):
        output.schema["properties"]["n"]["description"] = "changed"
    agent.run("y")
    request_output = model.requests[-1].output
    assert request_output is not None
    assert "description" not in request_output.schema["properties"]["n"]


def test_editing_the_dicts_given_after_a_run_leaves_its_saved_state_alone() -> None:
    """A Tool's schema dict and an agent's settings dict edited after a run do not rewrite that run's state."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    }
    settings: dict[str, Any] = {"temperature": 0.5, "stop": ["a"], "extra_body": {"x": 1}}
    ask = Tool("ask_user", "Ask.", schema)
    agent = Agent(
        ScriptedModel([ScriptedModel.call("ask_user", {"q": "?"})]), tools=[ask], settings=settings
    )
    state = agent.run("x").state
    saved = state.to_json()
    schema["properties"]["q"]["type"] = "integer"
    schema["properties"]["evil"] = {"type": "string"}
    settings["stop"].append("b")
    settings["extra_body"]["x"] = 2
    assert state.to_json() == saved
    assert state.config.tools[0].definition.parameters["properties"] == {"q": {"type": "string"}}


def test_config_parts_keep_deep_read_only_copies() -> None:
    """RunConfig, ToolDefinition and OutputSpec copy the mappings given into FrozenDicts, nested lists too."""
    given: dict[str, Any] = {"type": "object", "properties": {"k": {"enum": ["a"]}}}
    definition = ToolDefinition("t", parameters=given)
    spec = OutputSpec("o", given)
    config = RunConfig(settings={"stop": ["a"], "extra": {"n": 1}})
    given["properties"]["k"]["enum"].append("b")
    assert definition.parameters["properties"]["k"]["enum"] == ["a"]
    assert spec.schema["properties"]["k"]["enum"] == ["a"]
    assert type(definition.parameters["properties"]) is FrozenDict
    assert type(config.settings["extra"]) is FrozenDict
    with pytest.raises(TypeError):
        config.settings["stop"].append("b")
    assert ToolDefinition("t").parameters == {"type": "object", "properties": {}}


# Written by toolfold before configs were frozen (generate_text with a Tool, settings
# with a list and a nested object): it must load, compare equal and write back the same.
SAVED = (
    '{"format":"toolfold.run_state/1","run_id":"saved-1","phase":"finished","config":'
    '{"model":"scripted:model","instructions":null,"tools":[{"definition":{"name":"as'
    'k","description":"Ask.","parameters":{"type":"object","properties":{"q":{"type":'
    '"string","enum":["a","b"]}},"required":["q"]},"strict":null},"has_function":true'
    ',"approval":"never","max_retries":3}],"tool_choice":null,"reset_tool_choice":tru'
    'e,"output":null,"output_retries":3,"settings":{"temperature":0.2,"stop":["a"],"e'
    'xtra_body":{"k":[1,{"n":2}]}},"max_steps":10,"auto_execute_tools":true,"stop_whe'
    'n":[]},"conversation":[{"role":"user","parts":[{"text":"x","kind":"text"}]},{"ro'
    'le":"assistant","parts":[{"text":"done","kind":"text"}]}],"step":1,"turn_start":'
    '0,"usage":{"input_tokens":1,"output_tokens":1,"cached_tokens":0,"reasoning_token'
    's":0,"requests":1,"cache_write_tokens":0},"calls":[],"failures":{},"output_retri'
    'es":0,"finish_reason":"stop","output":"done","error":null,"log":[{"run_id":"save'
    'd-1","config":{"model":"scripted:model","instructions":null,"tools":[{"definitio'
    'n":{"name":"ask","description":"Ask.","parameters":{"type":"object","properties"'
    ':{"q":{"type":"string","enum":["a","b"]}},"required":["q"]},"strict":null},"has_'
    'function":true,"approval":"never","max_retries":3}],"tool_choice":null,"reset_to'
    'ol_choice":true,"output":null,"output_retries":3,"settings":{"temperature":0.2,"'
    'stop":["a"],"extra_body":{"k":[1,{"n":2}]}},"max_steps":10,"auto_execute_tools":'
    'true,"stop_when":[]},"messages":[{"role":"user","parts":[{"text":"x","kind":"tex'
    't"}]}],"agent":null,"kind":"run_started"},{"response":{"message":{"role":"assist'
    'ant","parts":[{"text":"done","kind":"text"}]},"usage":{"input_tokens":1,"output_'
    'tokens":1,"cached_tokens":0,"reasoning_tokens":0,"requests":1,"cache_write_token'
    's":0},"finish_reason":"stop","raw_finish_reason":null,"model_name":"scripted:mod'
    'el","response_id":null},"dispositions":[],"kind":"model_responded"}],"agent":nul'
    "l}"
)


def test_a_state_saved_before_loads_equal_and_writes_back_the_same_text() -> None:
    """A state saved when settings and schemas were plain dicts loads frozen, equal, and re-serializes byte for byte."""
    state = RunState.from_json(SAVED)
    assert state.to_json() == SAVED
    assert type(state.config.settings) is FrozenDict
    assert type(state.config.tools[0].definition.parameters) is FrozenDict
    assert state.config.settings == {
        "temperature": 0.2,
        "stop": ["a"],
        "extra_body": {"k": [1, {"n": 2}]},
    }
    assert RunState.from_json(state.to_json()) == state


class _Recorder(ScriptedModel):
    """A custom model that edits and dumps the settings it is given."""

    def __init__(self) -> None:
        super().__init__(["done"] * 2)
        self.dumped: list[str] = []

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        settings: Any = request.settings
        settings["extra_body"]["trace"] = "abc"
        settings["extra_body"]["k"].append(2)
        self.dumped.append(yaml.safe_dump(settings))
        return super().request_sync(request)


def test_a_custom_model_gets_settings_it_can_change_and_dump() -> None:
    """request.settings holds plain dicts and lists all the way down: edits stay in the request, yaml.safe_dump works."""
    model = _Recorder()
    agent = Agent(model, settings={"extra_body": {"k": [1]}})
    for _ in range(2):
        state = agent.run("x").state
    assert model.dumped == ["extra_body:\n  k:\n  - 1\n  - 2\n  trace: abc\n"] * 2
    assert state.config.settings == {"extra_body": {"k": [1]}}
    assert agent.settings == {"extra_body": {"k": [1]}}
