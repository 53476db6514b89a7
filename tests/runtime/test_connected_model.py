"""Every model a model string gives is a `ConnectedModel`, as `toolfold.model(str)` is typed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

import toolfold
from toolfold import ArgumentJSONError, ArgumentValidationError, ConnectedModel
from toolfold.runtime import ModelRequest, Prepared
from toolfold.runtime import _model as model_module
from toolfold.runtime.core._messages import Message, ToolCallPart
from toolfold.runtime.core._request import ToolDefinition
from toolfold.testing import FunctionModel, Reply, ScriptedModel, TestModel, override_models

model_module._load_builtin_adapters()
PREFIXES = sorted(model_module._PROVIDERS)

TOOL = ToolDefinition(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
REQUEST = ModelRequest((Message.user("Weather in Paris?"),), tools=(TOOL,))


def _reply(request: ModelRequest) -> Reply:
    return "hi"


TEST_MODELS: dict[str, Callable[[], toolfold.Model]] = {
    "TestModel": lambda: TestModel(text="hi"),
    "ScriptedModel": lambda: ScriptedModel(["hi"]),
    "FunctionModel": lambda: FunctionModel(_reply),
}


def _spec(prefix: str) -> str:
    """A model string of ``prefix`` (``local:`` takes only a model it knows, overridden too)."""
    return "local:smollm2" if prefix == "local" else f"{prefix}:m"


def _used(model: ConnectedModel) -> Prepared:
    """``model`` used as a typed program uses a `ConnectedModel`: prepare, check, close."""
    assert isinstance(model, ConnectedModel)
    prepared = model.prepare(REQUEST)
    assert isinstance(prepared, Prepared)
    assert isinstance(model.prepare(REQUEST, stream=True), Prepared)
    call = ToolCallPart("c1", "get_weather", '{"city": "Paris"}')
    assert dict(model.check_arguments(REQUEST, call)) == {"city": "Paris"}
    model.close()
    asyncio.run(model.aclose())
    return prepared


@pytest.mark.parametrize("prefix", PREFIXES)
def test_each_provider_gives_a_connected_model(prefix: str) -> None:
    """Each provider's model string (``local:`` included) gives a model with prepare/check/close."""
    model = toolfold.model(_spec(prefix), api_key="k", base_url="http://127.0.0.1:9/v1")
    prepared = _used(model)
    assert prepared.body  # a provider's model says what it would send


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("kind", sorted(TEST_MODELS))
def test_override_models_gives_a_connected_model(prefix: str, kind: str) -> None:
    """Under override_models, each testing model a string resolves to closes and prepares."""
    with override_models(TEST_MODELS[kind]()):
        model = toolfold.model(_spec(prefix))
    prepared = _used(model)
    assert prepared.body == {}
    assert f"{kind} " in prepared.report.notes[0]
    assert "test model" in prepared.report.notes[0]


def test_registered_provider_of_a_test_model_is_connected() -> None:
    """A provider registered with a testing model's factory gives a closable model."""
    model_module.register_provider("connectedprov", lambda name, **options: TestModel())
    try:
        _used(toolfold.model("connectedprov:v1"))
    finally:
        model_module._PROVIDERS.pop("connectedprov", None)


def test_test_model_checks_arguments_against_the_tool_schema() -> None:
    """A testing model's check_arguments refuses bad JSON, a schema break and an unknown tool."""
    model = TestModel()
    with pytest.raises(ArgumentJSONError):
        model.check_arguments(REQUEST, ToolCallPart("c1", "get_weather", "{not json"))
    with pytest.raises(ArgumentValidationError, match=r"\$\.city"):
        model.check_arguments(REQUEST, ToolCallPart("c1", "get_weather", '{"city": 3}'))
    with pytest.raises(ArgumentValidationError, match="no tool 'nope'"):
        model.check_arguments(REQUEST, ToolCallPart("c1", "nope", "{}"))


def _errors(model: Any, request: ModelRequest, text: str) -> tuple[str, ...]:
    call = ToolCallPart("c1", request.tools[0].name, text)
    with pytest.raises(ArgumentValidationError) as caught:
        model.check_arguments(request, call)
    return tuple(caught.value.errors)


@pytest.mark.parametrize("text", ["[1]", "3", "null"])
def test_testing_models_refuse_arguments_that_are_not_an_object(text: str) -> None:
    """Under a schema of {}, a testing model refuses a non-object as a provider's model does."""
    request = ModelRequest((Message.user("x"),), tools=(ToolDefinition("t", "d", {}),))
    provider = toolfold.model("openai:gpt-4o", api_key="k" * 20)
    expected = _errors(provider, request, text)
    assert len(expected) == 1
    assert expected[0].startswith("$: tool 't' takes a JSON object of arguments, got ")
    for make in TEST_MODELS.values():
        assert _errors(make(), request, text) == expected


def test_testing_models_word_schema_errors_as_a_provider_model_does() -> None:
    """Paths of names like first-name, and the errors' order, are a provider model's."""
    schema = {
        "type": "object",
        "properties": {
            "first-name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    request = ModelRequest((Message.user("x"),), tools=(ToolDefinition("t", "d", schema),))
    text = json.dumps({"first-name": 3, "tags": list(range(12))})
    provider = toolfold.model("anthropic:claude-sonnet-4-5", api_key="k" * 20)
    expected = _errors(provider, request, text)
    assert expected[0] == """$["first-name"]: 3 is not of type 'string'"""
    assert len(expected) == 13
    assert _errors(TestModel(), request, text) == expected


def test_local_prepare_starts_no_server_and_applies_its_policy() -> None:
    """LocalModel.prepare gives the body sent (tool choice "required") without a server."""
    model = toolfold.model("local:smollm2")
    prepared = model.prepare(REQUEST)
    assert prepared.body["tool_choice"] == "required"
    assert prepared.body["temperature"] == 0.0
    assert "server=None" in repr(model)
