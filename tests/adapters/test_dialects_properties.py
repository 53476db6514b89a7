"""Properties of the dialect compiler over generated schemas and generated arguments.

Arguments are drawn by `instances`, a small generator for the schema family used
here (hypothesis-jsonschema 0.23.1 fails on current hypothesis internals).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from toolfold import SchemaCompileError
from toolfold.adapters import check_arguments, compile_tool, restore_arguments
from toolfold.adapters._dialects._restore import openapi_to_json_schema
from toolfold.runtime import ToolDefinition

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

NAMES = st.text(alphabet="abcdxyz_", min_size=1, max_size=5)

# --- the supported-type family: what OpenAI strict mode can carry without loss ----

LEAVES = st.one_of(
    st.just({"type": "string"}),
    st.just({"type": "boolean"}),
    st.just({"type": "number"}),
    st.just({"type": "string", "format": "date"}),
    st.builds(
        lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
        st.integers(-5, 5),
        st.integers(0, 10),
    ),
    st.builds(
        lambda values: {"type": "string", "enum": values},
        st.lists(st.text(alphabet="abc", max_size=3), min_size=1, max_size=4, unique=True),
    ),
)


@st.composite
def objects(draw: st.DrawFn, children: st.SearchStrategy[Any]) -> dict[str, Any]:
    props = draw(st.dictionaries(NAMES, children, max_size=4))
    required = [name for name in props if draw(st.booleans())]
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    schema["additionalProperties"] = False
    if draw(st.booleans()):
        schema["description"] = "an object"
    return schema


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(lambda items: {"type": "array", "items": items, "maxItems": 3}, children),
        objects(children),
        st.builds(lambda c: {"anyOf": [c, {"type": "null"}]}, children),
    )


SUPPORTED = objects(st.recursive(LEAVES, _extend, max_leaves=6))


def instances(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid under ``schema`` (the keywords the families below use, no $ref)."""
    assert "$ref" not in schema, schema
    if "anyOf" in schema:
        return st.one_of([instances(b) for b in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    t = schema.get("type")
    if isinstance(t, list):
        return st.one_of([instances({**schema, "type": one}) for one in t])
    if t == "null":
        return st.none()
    if t == "boolean":
        return st.booleans()
    if t == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if t == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if t == "string":
        if schema.get("format") == "date":
            return st.dates().map(lambda d: d.isoformat())
        return st.text(max_size=5)
    if t == "array":
        return st.lists(instances(schema["items"]), max_size=schema.get("maxItems", 3))
    assert t == "object", schema
    props = schema.get("properties", {})
    required = schema.get("required", [])
    return st.fixed_dictionaries(
        {k: instances(v) for k, v in props.items() if k in required},
        optional={k: instances(v) for k, v in props.items() if k not in required},
    )


def _with_nulls(value: Any, schema: Mapping[str, Any], *, only_nullable: bool) -> Any:
    """Add explicit nulls for absent optional properties (all of them, or the nullable ones)."""
    if "anyOf" in schema and value is not None:
        branch = next(b for b in schema["anyOf"] if b != {"type": "null"})
        return _with_nulls(value, branch, only_nullable=only_nullable)
    if isinstance(value, dict) and "properties" in schema:
        out = {}
        for name, sub in schema["properties"].items():
            if name in value:
                out[name] = _with_nulls(value[name], sub, only_nullable=only_nullable)
            elif not only_nullable or "anyOf" in sub:
                out[name] = None
        return out
    if isinstance(value, list) and "items" in schema:
        return [_with_nulls(v, schema["items"], only_nullable=only_nullable) for v in value]
    return value


@SETTINGS
@given(schema=SUPPORTED, data=st.data())
def test_valid_arguments_survive_openai_strict_and_come_back_unchanged(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    """Original-valid arguments + explicit nulls are strict-valid, and restore maps them back."""
    compiled = compile_tool(ToolDefinition(name="t", parameters=schema), "openai-chat", strict=True)
    instance = data.draw(instances(schema))
    sent = _with_nulls(instance, schema, only_nullable=False)
    Draft202012Validator(compiled.schema_sent).validate(sent)
    # a null for an optional property whose own schema accepts null stays a null
    assert restore_arguments(compiled, sent) == _with_nulls(instance, schema, only_nullable=True)


@SETTINGS
@given(schema=SUPPORTED, data=st.data())
def test_whatever_strict_mode_lets_through_fits_the_tool_schema_once_restored(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    """A loss-free strict schema accepts nothing the tool's own schema rejects (after restore)."""
    compiled = compile_tool(ToolDefinition(name="t", parameters=schema), "openai-chat", strict=True)
    assert compiled.losses == ()
    generated = data.draw(instances(compiled.schema_sent))
    Draft202012Validator(schema).validate(restore_arguments(compiled, generated))


@SETTINGS
@given(schema=SUPPORTED, data=st.data())
def test_anthropic_and_gemini_accept_every_valid_argument(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    """Dialects that keep optional properties optional accept the tool's valid arguments as they are."""
    instance = data.draw(instances(schema))
    for dialect in ("anthropic", "gemini", "gemini-openapi"):
        compiled = compile_tool(ToolDefinition(name="t", parameters=schema), dialect)  # type: ignore[arg-type]
        assert check_arguments(compiled, instance) is instance


# --- a wider family: constraints and constructs some dialects cannot carry ---------

WIDE_LEAVES = st.one_of(
    LEAVES,
    st.just({"type": "string", "minLength": 2, "maxLength": 5}),
    st.just({"type": "string", "pattern": "^(?=a)"}),
    st.just({"type": "string", "format": "uri"}),
    st.just({"type": "integer", "exclusiveMinimum": 0, "multipleOf": 2}),
    st.just({"type": "number", "exclusiveMaximum": 1.5}),
    st.just({"const": "fixed", "title": "Fixed"}),
    st.just({"type": "string", "default": "x", "examples": ["y"]}),
    st.just({"type": ["string", "null"]}),
    st.just({"type": "object", "additionalProperties": {"type": "integer"}}),
    st.just({}),
    st.just({"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "minItems": 2}),
)


def _wide_extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        _extend(children),
        st.builds(lambda a, b: {"oneOf": [a, b]}, children, children),
        st.builds(lambda a, b: {"allOf": [a, b]}, children, children),
        st.builds(lambda a: {"not": a}, children),
        st.builds(lambda a: {"type": "array", "prefixItems": [a], "items": False}, children),
    )


WIDE = objects(st.recursive(WIDE_LEAVES, _wide_extend, max_leaves=6))

OPENAI_KEYS = {
    "type", "description", "enum", "anyOf", "$ref", "properties", "required",
    "additionalProperties", "items", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
}  # fmt: skip
OPENAI_FORMATS = {
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
}
GEMINI_KEYS = {
    "type", "format", "description", "default", "enum", "items", "minItems", "maxItems",
    "properties", "required", "minProperties", "maxProperties", "minimum", "maximum",
    "minLength", "maxLength", "pattern", "additionalProperties", "anyOf", "oneOf",
    "uniqueItems", "$ref",
}  # fmt: skip
GEMINI_SCHEMA_KEYS = {
    "type", "format", "title", "description", "nullable", "enum", "items", "maxItems",
    "minItems", "properties", "required", "minProperties", "maxProperties", "minimum",
    "maximum", "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
    "default",
}  # fmt: skip
OLLAMA_KEYS = {"anyOf", "type", "items", "description", "enum", "properties", "required"}
ANTHROPIC_KEYS = {
    "type", "description", "title", "enum", "anyOf", "$ref", "properties", "required",
    "additionalProperties", "items", "format", "minItems",
}  # fmt: skip


def _nodes(schema: Any, root: bool = True) -> list[Mapping[str, Any]]:
    if not isinstance(schema, Mapping):
        return []
    found = [schema]
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            for sub in value.values():
                found += _nodes(sub, False)
        elif key in ("items", "additionalProperties"):
            found += _nodes(value, False)
        elif key in ("anyOf", "oneOf"):
            for sub in value:
                found += _nodes(sub, False)
    return found


def _check_openai_strict(schema: Mapping[str, Any]) -> None:
    for node in _nodes(schema):
        assert set(node) - {"$defs"} <= OPENAI_KEYS, node
        if "$ref" in node:
            assert set(node) == {"$ref"}, node
        t = node.get("type")
        types = set(t) if isinstance(t, list) else {t}
        if "object" in types:
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
        if "array" in types:
            assert isinstance(node["items"], Mapping)
            assert node["items"]
        if "format" in node:
            assert node["format"] in OPENAI_FORMATS
        assert t is not None or {"anyOf", "enum", "$ref"} & set(node), node


@SETTINGS
@given(schema=WIDE)
def test_every_dialect_sends_only_what_it_accepts(schema: dict[str, Any]) -> None:
    """Whatever the input, each compiled schema uses only its dialect's keywords and shapes."""
    definition = ToolDefinition(name="t", parameters=schema)
    strict = compile_tool(definition, "openai-chat", strict=None)
    if strict.strict:
        _check_openai_strict(strict.schema_sent)
    refused = [r for r in strict.strict_blockers if r.action == "refused"]
    if refused:  # constructs strict mode cannot express at all
        with pytest.raises(SchemaCompileError):
            compile_tool(definition, "openai-chat", strict=True, allow_loss=True)
    else:
        described = compile_tool(definition, "openai-chat", strict=True, allow_loss=True)
        _check_openai_strict(described.schema_sent)
    for node in _nodes(compile_tool(definition, "gemini").schema_sent):
        assert set(node) - {"$defs"} <= GEMINI_KEYS, node
    ollama = compile_tool(definition, "ollama").schema_sent
    assert set(ollama) <= {"type", "items", "required", "properties"}
    for node in _nodes(ollama)[1:]:
        assert set(node) <= OLLAMA_KEYS, node
    openapi = compile_tool(definition, "gemini-openapi").schema_sent
    for node in _nodes(openapi):
        assert set(node) <= GEMINI_SCHEMA_KEYS, node
        assert node.get("type", "OBJECT").isupper(), node
        assert all(isinstance(v, str) for v in node.get("enum", ())), node
    Draft202012Validator.check_schema(openapi_to_json_schema(openapi))
    anthropic = compile_tool(definition, "anthropic")
    if anthropic.strict:
        for node in _nodes(anthropic.schema_sent):
            assert set(node) - {"$defs"} <= ANTHROPIC_KEYS, node
            assert not isinstance(node.get("type"), list), node
            assert node.get("minItems", 0) in (0, 1)
    for compiled in (strict, anthropic):
        Draft202012Validator.check_schema(compiled.schema_sent)
        assert all(r.detail for r in compiled.rewrites)
