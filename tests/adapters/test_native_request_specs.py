"""Request bodies over a matrix of neutral requests validate against the providers' published specs.

Gemini bodies against ``GenerateContentRequest`` (Google's OpenAPI export),
with every object closed to the properties the spec lists, so an unknown or
misspelled field fails; Responses bodies against ``CreateResponse`` (OpenAI's
official document).
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import pytest
import yaml
from cassettes import SPECS
from jsonschema import Draft4Validator, Draft202012Validator
from openai_spec import _nullable
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4, DRAFT202012

from toolfold.adapters.gemini import GeminiModel
from toolfold.adapters.openai_responses import OpenAIResponsesModel
from toolfold.runtime import (
    FilePart,
    ImagePart,
    Message,
    ModelRequest,
    OutputSpec,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

WEATHER = ToolDefinition(
    "get_weather",
    "Weather now",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "when": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
        },
        "required": ["city"],
    },
)
STRICT = ToolDefinition(
    "add",
    "Add",
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    True,
)
BARE = ToolDefinition("ping", "", {"type": "object", "properties": {}})
CALLS = Message(
    "assistant",
    [
        ReasoningPart("thinking", "gAAAAB", "openai-responses", {"item_id": "rs_1"}),
        ReasoningPart("thought", "c2ln", "gemini"),
        ReasoningPart("pondered", "sig-a", "anthropic"),
        TextPart("Let me look."),
        ToolCallPart(
            "call_1",
            "get_weather",
            '{"city":"Paris"}',
            {"city": "Paris"},
            {"thought_signature": "c2lnbmF0dXJl", "item_id": "fc_1"},
        ),
        ToolCallPart("toolu_2", "get_weather", '{"city":"Tokyo"}', {"city": "Tokyo"}),
    ],
)
RESULTS = Message.tool(
    ToolResultPart("call_1", "get_weather", "sunny"),
    ToolResultPart("toolu_2", "get_weather", "no such city", is_error=True),
)
MEDIA = Message.user(
    "Look:",
    ImagePart(data=b"\x89PNG", media_type="image/png"),
    ImagePart(url="https://example.com/a.jpg", media_type="image/jpeg"),
    FilePart(data=b"%PDF", media_type="application/pdf", filename="a.pdf"),
    FilePart(url="https://example.com/b.pdf", media_type="application/pdf"),
)
SETTINGS = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 256, "stop": ["END"], "seed": 7}

CASES: dict[str, ModelRequest] = {
    "text": ModelRequest([Message.user("hi")]),
    "system": ModelRequest([Message.system("Be brief."), Message.user("hi")]),
    "tools-default": ModelRequest([Message.user("weather?")], [WEATHER, BARE]),
    "tools-auto": ModelRequest([Message.user("weather?")], [WEATHER], "auto"),
    "tools-none": ModelRequest([Message.user("weather?")], [WEATHER], "none"),
    "tools-required": ModelRequest([Message.user("weather?")], [WEATHER, BARE], "required"),
    "tools-named": ModelRequest([Message.user("weather?")], [WEATHER, BARE], "get_weather"),
    "tools-strict": ModelRequest([Message.user("1+1")], [STRICT], "auto"),
    "history": ModelRequest(
        [Message.system("s"), Message.user("weather?"), CALLS, RESULTS, Message.user("and?")],
        [WEATHER],
    ),
    "media": ModelRequest([MEDIA]),
    "settings": ModelRequest([Message.user("hi")], settings=SETTINGS),
    "parallel": ModelRequest(
        [Message.user("hi")], [WEATHER], settings={"parallel_tool_calls": True}
    ),
    "output": ModelRequest(
        [Message.user("hi")],
        output=OutputSpec(
            "answer",
            {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        ),
    ),
}
# OpenAI's Responses API has no stop or seed (toolfold refuses them, see
# test_the_refused_responses_settings_are_the_ones_create_response_lacks).
# A reasoning item and the message item that followed it (its id and phase kept):
# an output message item with output_text content and a MessagePhase.
RESPONSES_CASES = {
    **CASES,
    "reasoning-message": ModelRequest(
        [
            Message.user("2+2?"),
            Message(
                "assistant",
                [
                    ReasoningPart(
                        "adds",
                        "gAAAAB",
                        "openai-responses",
                        {"item_id": "rs_1", "message_id": "m", "message_phase": "final_answer"},
                    ),
                    TextPart("4"),
                ],
            ),
            Message.user("Sure?"),
        ]
    ),
    "settings": ModelRequest(
        [Message.user("hi")], settings={"temperature": 0.2, "top_p": 0.9, "max_tokens": 256}
    ),
}
GEMINI_MODELS = ("gemini-2.5-flash", "gemini-2.0-flash", "gemini-3-flash-preview")
RESPONSES_MODELS = ("gpt-4o", "gpt-5-mini")


def _any_of(node: Any) -> Any:
    if isinstance(node, dict):
        return {("anyOf" if k == "oneOf" else k): _any_of(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_any_of(v) for v in node]
    return node


@functools.cache
def openai_document() -> Any:
    """OpenAI's OpenAPI document, as published."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((SPECS / "openai-openapi.yaml").read_text(encoding="utf-8"), Loader=loader)


@functools.cache
def responses_validator() -> Draft202012Validator:
    """``CreateResponse`` with ``oneOf`` read as ``anyOf``.

    The document writes unions as ``oneOf`` whose members overlap (a user
    message with a content list is both an ``EasyInputMessage`` and an input
    ``Item``); OpenAPI generators treat them as tagged unions, JSON Schema
    would refuse every such message.
    """
    resource = Resource(contents=_any_of(_nullable(openai_document())), specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:openai", resource)
    return Draft202012Validator(
        {"$ref": "urn:openai#/components/schemas/CreateResponse"}, registry=registry
    )


def problems(name: str, body: Any) -> list[str]:
    """Every error of ``body`` against CreateResponse."""
    assert name == "CreateResponse"
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:300]}"
        for e in responses_validator().iter_errors(body)
    ]


@functools.cache
def gemini_validator() -> Draft4Validator:
    """``GenerateContentRequest`` with every object closed to its listed properties."""
    document = copy.deepcopy(
        json.loads((SPECS / "gemini-generativelanguage-v1beta-openapi.json").read_text())
    )
    for schema in document["components"]["schemas"].values():
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        for prop in schema.get("properties", {}).values():
            if prop.get("format") == "int64":  # proto3 JSON takes numbers too
                prop["type"] = ["string", "integer"]
    registry: Registry[Any] = Registry().with_resource(
        "urn:gemini", Resource.from_contents(document, default_specification=DRAFT4)
    )
    return Draft4Validator(
        {"$ref": "urn:gemini#/components/schemas/GenerateContentRequest"}, registry=registry
    )


def gemini_problems(body: Any) -> list[str]:
    """Every error of ``body`` against the closed GenerateContentRequest."""
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:300]}"
        for e in gemini_validator().iter_errors(body)
    ]


@pytest.mark.parametrize("model_name", GEMINI_MODELS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_gemini_bodies_validate_against_generate_content_request(
    case: str, model_name: str
) -> None:
    """Every Gemini body of the matrix is a valid GenerateContentRequest."""
    body = GeminiModel(model_name, api_key="k" * 20).body(CASES[case], stream=True)
    assert "model" not in body
    # The spec marks `model` required; the REST API takes it from the URL path
    # (no recording sends it): it is added here as the path names it.
    assert gemini_problems({"model": f"models/{model_name}", **body}) == []


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("model_name", RESPONSES_MODELS)
@pytest.mark.parametrize("case", sorted(RESPONSES_CASES))
def test_responses_bodies_validate_against_create_response(
    case: str, model_name: str, stream: bool
) -> None:
    """Every Responses body of the matrix is a valid CreateResponse."""
    body = OpenAIResponsesModel(model_name, api_key="k" * 20).body(
        RESPONSES_CASES[case], stream=stream
    )
    assert problems("CreateResponse", body) == []


def _create_response_fields() -> set[str]:
    schemas = openai_document()["components"]["schemas"]

    def fields(schema: Any) -> set[str]:
        if "$ref" in schema:
            return fields(schemas[schema["$ref"].rsplit("/", 1)[1]])
        found = set(schema.get("properties", {}))
        for part in schema.get("allOf", ()):
            found |= fields(part)
        return found

    return fields(schemas["CreateResponse"])


def test_the_refused_responses_settings_are_the_ones_create_response_lacks() -> None:
    """Every setting refused for OpenAI is absent from CreateResponse; the renamed ones exist."""
    from toolfold.adapters.openai_responses._providers import RENAMES, UNSUPPORTED_SETTINGS

    known = _create_response_fields()
    assert {"temperature", "top_p", "parallel_tool_calls", "input"} <= known
    assert UNSUPPORTED_SETTINGS.isdisjoint(known)
    assert set(RENAMES.values()) <= known
    assert not set(RENAMES) & known


def test_the_validators_can_fail() -> None:
    """A misspelled Gemini field and a malformed Responses item are reported."""
    good = GeminiModel("gemini-2.5-flash", api_key="k" * 20).body(CASES["history"])
    bad = copy.deepcopy(good)
    bad["contents"][0]["parts"][0]["txt"] = "x"
    assert gemini_problems({"model": "models/m", **bad})
    wrong_mode = copy.deepcopy(good)
    wrong_mode["toolConfig"] = {"functionCallingConfig": {"mode": "REQUIRED"}}
    assert gemini_problems({"model": "models/m", **wrong_mode})
    responses = OpenAIResponsesModel("gpt-4o", api_key="k" * 20).body(CASES["history"])
    for broken in ({"type": "function_call", "call_id": "c", "name": "n"}, {"role": "robot"}):
        assert problems("CreateResponse", {**responses, "input": [*responses["input"], broken]})
