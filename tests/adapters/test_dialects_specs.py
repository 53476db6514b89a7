"""Compiled tool payloads validate against the providers' own OpenAPI documents."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft4Validator, Draft202012Validator
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4, DRAFT202012
from test_dialects import CONSTRAINED, PYDANTIC_STYLE, TREE, WEATHER

from toolfold import SchemaCompileError
from toolfold.adapters import compile_tool
from toolfold.runtime import ToolDefinition

SPECS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "specs"

SCHEMAS: dict[str, dict[str, Any]] = {
    "weather": WEATHER,
    "constrained": CONSTRAINED,
    "tree": TREE,
    "pydantic": PYDANTIC_STYLE,
    "empty": {},
    "nested": {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "qty": {"type": "integer", "minimum": 1},
                    },
                    "required": ["sku"],
                },
            }
        },
    },
    # What a dialect cannot say as written: untyped union branches under a typed node, a
    # closed tuple, a const object, a reference to an $anchor.
    "unsaid": {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "string"},
            "n": {"type": "integer", "anyOf": [{"minimum": 5}, {"maximum": 1}]},
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "integer"}],
                "items": False,
            },
            "c": {"const": {"k": 1}},
            "p": {"$ref": "#pt"},
        },
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
        "$defs": {"P": {"$anchor": "pt", "type": "integer"}},
    },
}
MODES: tuple[bool | None, ...] = (None, False)


def _compiled(dialect: str) -> Iterator[tuple[str, Any]]:
    for label, schema in SCHEMAS.items():
        definition = ToolDefinition(
            name=f"tool_{label}", description=f"The {label} tool", parameters=schema
        )
        try:
            for strict in MODES:
                compiled = compile_tool(definition, dialect, strict=strict)  # type: ignore[arg-type]
                yield f"{label}/strict={strict}", compiled
            lossy = compile_tool(definition, dialect, strict=None, allow_loss=True)  # type: ignore[arg-type]
            yield f"{label}/allow_loss", lossy
        except SchemaCompileError as exc:
            # The OpenAPI form cannot say recursion: refused, never sent.
            if dialect != "gemini-openapi" or "recursive" not in str(exc):
                raise


@functools.cache
def _document(name: str) -> dict[str, Any]:
    path = SPECS / name
    with path.open(encoding="utf-8") as fh:
        if name.endswith(".yaml"):
            return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # type: ignore[no-any-return]
        return json.load(fh)  # type: ignore[no-any-return]


@functools.cache
def _validator(name: str, component: str) -> Validator:
    """A validator for one component schema of an OpenAPI document, $refs resolved in place."""
    document = _document(name)
    openapi_30 = str(document.get("openapi", "")).startswith("3.0")
    spec = DRAFT4 if openapi_30 else DRAFT202012
    registry: Registry[Any] = Registry().with_resource(
        f"urn:{name}", Resource.from_contents(document, default_specification=spec)
    )
    cls = Draft4Validator if openapi_30 else Draft202012Validator
    return cls({"$ref": f"urn:{name}#/components/schemas/{component}"}, registry=registry)  # type: ignore[no-any-return]


def _properties(name: str, component: str) -> set[str]:
    return set(_document(name)["components"]["schemas"][component]["properties"])


def _errors(validator: Validator, instance: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(instance)]


def test_openai_chat_payloads_match_chat_completion_tool() -> None:
    """Every openai-chat payload is a ChatCompletionTool and its function a FunctionObject."""
    tool_v = _validator("openai-openapi.yaml", "ChatCompletionTool")
    function_v = _validator("openai-openapi.yaml", "FunctionObject")
    allowed = _properties("openai-openapi.yaml", "FunctionObject")
    for label, compiled in _compiled("openai-chat"):
        assert _errors(tool_v, compiled.payload) == [], label
        assert _errors(function_v, compiled.payload["function"]) == [], label
        assert set(compiled.payload["function"]) <= allowed, label


def test_deepseek_payloads_match_chat_completion_tool() -> None:
    """DeepSeek speaks the OpenAI chat tool shape."""
    tool_v = _validator("openai-openapi.yaml", "ChatCompletionTool")
    for label, compiled in _compiled("deepseek"):
        assert _errors(tool_v, compiled.payload) == [], label


def test_openai_responses_payloads_match_function_tool() -> None:
    """Every openai-responses payload is a Responses FunctionTool with strict stated."""
    validator = _validator("openai-openapi.yaml", "FunctionTool")
    allowed = _properties("openai-openapi.yaml", "FunctionTool")
    for label, compiled in _compiled("openai-responses"):
        assert _errors(validator, compiled.payload) == [], label
        assert set(compiled.payload) <= allowed, label
        assert isinstance(compiled.payload["strict"], bool)


def test_anthropic_payloads_match_tool() -> None:
    """Non-strict payloads are a `Tool`; strict ones (with `strict`) are a `BetaTool` in this snapshot."""
    tool_v = _validator("anthropic-openapi.json", "Tool")
    beta_v = _validator("anthropic-openapi.json", "BetaTool")
    strict_seen = False
    for label, compiled in _compiled("anthropic"):
        assert _errors(beta_v, compiled.payload) == [], label
        if compiled.strict:
            strict_seen = True
            assert compiled.payload["strict"] is True
        else:
            assert _errors(tool_v, compiled.payload) == [], label
    assert strict_seen


def test_gemini_payloads_match_function_declaration() -> None:
    """Every gemini payload is a FunctionDeclaration (OpenAPI 3.0, checked as draft 4)."""
    validator = _validator("gemini-generativelanguage-v1beta-openapi.json", "FunctionDeclaration")
    allowed = _properties("gemini-generativelanguage-v1beta-openapi.json", "FunctionDeclaration")
    for label, compiled in _compiled("gemini"):
        assert _errors(validator, compiled.payload) == [], label
        assert set(compiled.payload) <= allowed, label
        assert "parameters" not in compiled.payload  # mutually exclusive with parametersJsonSchema


@functools.cache
def _gemini_relaxed(component: str) -> Validator:
    """A Gemini component validator whose int64 fields take integers too.

    The discovery export types int64 as strings (proto3 JSON's canonical form);
    proto3 JSON parsers accept numbers as well, and the official SDK sends numbers.
    """
    document = copy.deepcopy(_document("gemini-generativelanguage-v1beta-openapi.json"))
    for prop in document["components"]["schemas"]["Schema"]["properties"].values():
        if prop.get("format") == "int64":
            prop["type"] = ["string", "integer"]
    registry: Registry[Any] = Registry().with_resource(
        "urn:gemini", Resource.from_contents(document, default_specification=DRAFT4)
    )
    return Draft4Validator(
        {"$ref": f"urn:gemini#/components/schemas/{component}"}, registry=registry
    )  # type: ignore[no-any-return]


def test_gemini_openapi_payloads_match_function_declaration_and_schema() -> None:
    """gemini-openapi payloads are FunctionDeclarations whose `parameters` is a Gemini `Schema`."""
    declaration = _gemini_relaxed("FunctionDeclaration")
    schema_v = _gemini_relaxed("Schema")
    allowed = _properties("gemini-generativelanguage-v1beta-openapi.json", "Schema")
    for label, compiled in _compiled("gemini-openapi"):
        assert _errors(declaration, compiled.payload) == [], label
        assert _errors(schema_v, compiled.payload["parameters"]) == [], label
        assert "parametersJsonSchema" not in compiled.payload
        stack = [compiled.payload["parameters"]]
        while stack:
            node = stack.pop()
            assert set(node) <= allowed, (label, node)
            stack += list(node.get("properties", {}).values()) + node.get("anyOf", [])
            stack += [node["items"]] if "items" in node else []


UNIONS = {
    "type_list": {"type": ["string", "integer"]},
    "scalars": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    "optional_union": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
    "objects": {
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}},
            {"type": "object", "properties": {"b": {"type": "integer"}}},
        ]
    },
    "enum_of_numbers": {"enum": [1, 2.5]},
}


@pytest.mark.parametrize("label", list(UNIONS))
def test_gemini_openapi_gives_every_node_a_type_but_a_union(label: str) -> None:
    """A union goes as ``anyOf`` of typed branches with no ``type`` of its own (as Google's SDK
    sends it: no one type fits every branch); every other node has one (schema-dialects.md)."""
    schema = {"type": "object", "properties": {"v": UNIONS[label]}}
    payload = compile_tool(ToolDefinition("f", "F", schema), "gemini-openapi").payload
    stack, unions = [payload["parameters"]], 0
    while stack:
        node = stack.pop()
        if "anyOf" in node:
            unions += 1
            assert "type" not in node, node
            assert all("type" in branch for branch in node["anyOf"]), node
        else:
            assert "type" in node, node
        stack += list(node.get("properties", {}).values()) + node.get("anyOf", [])
        stack += [node["items"]] if "items" in node else []
    assert unions == 1


def test_the_spec_validators_reject_a_broken_payload() -> None:
    """The spec checks can fail: a payload missing required fields is reported."""
    tool_v = _validator("openai-openapi.yaml", "ChatCompletionTool")
    assert _errors(tool_v, {"type": "function", "function": {"description": "no name"}})
    anthropic_v = _validator("anthropic-openapi.json", "Tool")
    assert _errors(anthropic_v, {"name": "x", "input_schema": {"type": "object"}, "strict": True})
    gemini_v = _validator("gemini-generativelanguage-v1beta-openapi.json", "FunctionDeclaration")
    assert _errors(gemini_v, {"name": "x"})
    assert _errors(_gemini_relaxed("Schema"), {"type": "object"})  # lower-case type names


@pytest.mark.parametrize(
    "dialect", ["openai-chat", "openai-responses", "anthropic", "gemini", "ollama", "deepseek"]
)
def test_every_schema_sent_is_a_valid_json_schema(dialect: str) -> None:
    """What is sent is itself a well-formed draft 2020-12 schema."""
    for label, compiled in _compiled(dialect):
        Draft202012Validator.check_schema(compiled.schema_sent)
        assert compiled.schema_sent["type"] == "object", label
