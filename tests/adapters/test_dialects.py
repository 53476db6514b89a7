"""Compiling a tool's neutral JSON Schema into each provider's dialect: exact outputs, exact rewrites."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import toolfold
from toolfold import SchemaCompileError
from toolfold.adapters import CompiledTool, compile_tool
from toolfold.runtime import ToolDefinition
from toolfold.toolkit import Tool

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City"},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
    },
    "required": ["city"],
}

CONSTRAINED = {
    "type": "object",
    "properties": {
        "q": {"type": "string", "minLength": 1, "pattern": "^(?!x)"},
        "n": {"type": "integer", "exclusiveMinimum": 0, "maximum": 10},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 2},
        "link": {"type": "string", "format": "uri"},
    },
    "required": ["q", "n", "tags", "link"],
    "additionalProperties": False,
}

TREE = {
    "$ref": "#/$defs/Node",
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["value", "children"],
            "additionalProperties": False,
        }
    },
}


def tool(
    parameters: dict[str, Any], name: str = "get_weather", strict: bool | None = None
) -> ToolDefinition:
    return ToolDefinition(
        name=name, description="Weather now", parameters=parameters, strict=strict
    )


class Editable:
    """A tool-like whose schema stays the caller's dict (a `ToolDefinition` keeps a frozen copy)."""

    def __init__(self, parameters: dict[str, Any], name: str = "get_weather") -> None:
        self.name, self.description, self.parameters, self.strict = (
            name,
            "Weather now",
            parameters,
            None,
        )


def changes(compiled: CompiledTool) -> list[tuple[str, str, str, bool]]:
    assert all(r.detail for r in compiled.rewrites)
    return [(r.path, r.keyword, r.action, r.lossy) for r in compiled.rewrites]


# --- the same tool in every dialect ---------------------------------------

OPENAI_WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City"},
        "unit": {
            "type": ["string", "null"],
            "enum": ["c", "f", None],
            "description": 'default: "c"',
        },
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
OPENAI_WEATHER_CHANGES = [
    ("/properties/unit", "default", "moved_to_description", False),
    ("", "additionalProperties", "added", False),
    ("/properties/unit", "required", "made_nullable", False),
]


def test_openai_chat_strict_makes_optional_nullable_and_closes_objects() -> None:
    """OpenAI chat strict: every property required, the optional enum gains null, objects closed."""
    compiled = compile_tool(tool(WEATHER), "openai-chat")
    assert compiled.strict is True
    assert compiled.payload == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather now",
            "parameters": OPENAI_WEATHER,
            "strict": True,
        },
    }
    assert compiled.schema_sent == OPENAI_WEATHER
    assert changes(compiled) == OPENAI_WEATHER_CHANGES


def test_openai_responses_payload_is_flat_and_always_states_strict() -> None:
    """Responses tools are flat and carry strict explicitly, true or false."""
    strict = compile_tool(tool(WEATHER), "openai-responses")
    assert strict.payload == {
        "type": "function",
        "name": "get_weather",
        "description": "Weather now",
        "parameters": OPENAI_WEATHER,
        "strict": True,
    }
    loose = compile_tool(tool(WEATHER), "openai-responses", strict=False)
    assert loose.payload["strict"] is False
    assert loose.payload["parameters"] == WEATHER
    assert loose.rewrites == ()


def test_deepseek_strict_follows_openai_rules() -> None:
    """DeepSeek strict uses the OpenAI chat shape and the same required-and-nullable rules."""
    compiled = compile_tool(tool(WEATHER), "deepseek")
    assert compiled.strict is True
    assert compiled.payload["function"]["parameters"] == OPENAI_WEATHER
    assert changes(compiled) == OPENAI_WEATHER_CHANGES


def test_anthropic_strict_keeps_optional_properties_optional() -> None:
    """Anthropic strict closes objects but leaves optional properties out of required."""
    compiled = compile_tool(tool(WEATHER), "anthropic")
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City"},
            "unit": {"type": "string", "enum": ["c", "f"], "description": 'default: "c"'},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert compiled.payload == {
        "name": "get_weather",
        "description": "Weather now",
        "input_schema": schema,
        "strict": True,
    }
    assert changes(compiled) == [
        ("/properties/unit", "default", "moved_to_description", False),
        ("", "additionalProperties", "added", False),
    ]
    assert compiled.restores_nulls is False


def test_gemini_sends_parameters_json_schema_unchanged_when_supported() -> None:
    """Gemini gets a FunctionDeclaration with parametersJsonSchema; nothing to rewrite here."""
    compiled = compile_tool(tool(WEATHER), "gemini")
    assert compiled.payload == {
        "name": "get_weather",
        "description": "Weather now",
        "parametersJsonSchema": WEATHER,
    }
    assert compiled.rewrites == ()
    assert compiled.strict is True


def test_ollama_moves_default_into_the_description() -> None:
    """Ollama drops unknown keywords silently, so toolfold moves them into descriptions itself."""
    compiled = compile_tool(tool(WEATHER), "ollama")
    assert compiled.payload == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather now",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City"},
                    "unit": {"type": "string", "enum": ["c", "f"], "description": 'default: "c"'},
                },
                "required": ["city"],
            },
        },
    }
    assert changes(compiled) == [("/properties/unit", "default", "moved_to_description", False)]
    assert compiled.strict is False


def test_json_schema_dialect_passes_through() -> None:
    """The generic dialect sends the schema as it is."""
    compiled = compile_tool(tool(WEATHER), "json-schema")
    assert compiled.payload == {
        "name": "get_weather",
        "description": "Weather now",
        "parameters": WEATHER,
    }
    assert compiled.rewrites == ()


# --- constraints strict modes cannot carry --------------------------------


def test_strict_none_falls_back_to_the_loss_free_schema_and_says_why() -> None:
    """With strict=None a lossy strict schema is not used; the blockers are listed."""
    compiled = compile_tool(tool(CONSTRAINED), "openai-chat")
    assert compiled.strict is False
    assert compiled.schema_sent == CONSTRAINED
    assert "strict" not in compiled.payload["function"]
    assert [(r.path, r.keyword) for r in compiled.strict_blockers] == [
        ("/properties/q", "minLength"),
        ("/properties/q", "pattern"),
        ("/properties/tags", "uniqueItems"),
    ]


def test_strict_true_refuses_every_loss_at_once() -> None:
    """strict=True raises one error naming the tool, each path and each keyword."""
    with pytest.raises(SchemaCompileError) as info:
        compile_tool(tool(CONSTRAINED), "openai-chat", strict=True)
    err = info.value
    assert err.tool_name == "get_weather"
    assert err.dialect == "openai-chat"
    assert len(err.problems) == 3
    assert err.problems[0].startswith("/properties/q: minLength moved_to_description [lossy]")
    assert "look-arounds" in err.problems[1]
    assert "/properties/tags: uniqueItems" in str(err)


def test_strict_true_with_allow_loss_writes_constraints_into_descriptions() -> None:
    """allow_loss keeps strict mode and records each constraint moved into a description."""
    compiled = compile_tool(tool(CONSTRAINED), "openai-chat", strict=True, allow_loss=True)
    assert compiled.strict is True
    assert compiled.schema_sent == {
        "type": "object",
        "properties": {
            "q": {"type": "string", "description": 'minLength: 1; pattern: "^(?!x)"'},
            "n": {"type": "integer", "exclusiveMinimum": 0, "maximum": 10},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 2,
                "description": "uniqueItems: true",
            },
            "link": {"type": "string", "description": 'format: "uri"'},
        },
        "required": ["q", "n", "tags", "link"],
        "additionalProperties": False,
    }
    assert changes(compiled) == [
        ("/properties/q", "minLength", "moved_to_description", True),
        ("/properties/q", "pattern", "moved_to_description", True),
        ("/properties/tags", "uniqueItems", "moved_to_description", True),
        ("/properties/link", "format", "moved_to_description", False),
    ]
    assert [r.keyword for r in compiled.losses] == ["minLength", "pattern", "uniqueItems"]


def test_anthropic_strict_refuses_numeric_and_string_constraints() -> None:
    """Anthropic strict has no numeric/string bounds and only minItems 0 or 1."""
    compiled = compile_tool(tool(CONSTRAINED), "anthropic")
    assert compiled.strict is False
    assert compiled.payload["input_schema"] == CONSTRAINED
    assert [(r.path, r.keyword) for r in compiled.strict_blockers] == [
        ("/properties/q", "minLength"),
        ("/properties/q", "pattern"),
        ("/properties/n", "exclusiveMinimum"),
        ("/properties/n", "maximum"),
        ("/properties/tags", "uniqueItems"),
        ("/properties/tags", "minItems"),
    ]


def test_deepseek_strict_is_the_narrowest_subset() -> None:
    """DeepSeek strict refuses bounds OpenAI accepts (maximum, minItems)."""
    compiled = compile_tool(tool(CONSTRAINED), "deepseek")
    assert compiled.strict is False
    assert [(r.path, r.keyword) for r in compiled.strict_blockers] == [
        ("/properties/q", "minLength"),
        ("/properties/q", "pattern"),
        ("/properties/n", "exclusiveMinimum"),
        ("/properties/n", "maximum"),
        ("/properties/tags", "uniqueItems"),
        ("/properties/tags", "minItems"),
    ]


def test_gemini_rewrites_integer_exclusive_bounds_exactly_and_moves_formats() -> None:
    """Gemini: exclusiveMinimum on an integer becomes minimum + 1; format goes to the description."""
    compiled = compile_tool(tool(CONSTRAINED), "gemini")
    assert compiled.strict is True
    assert compiled.schema_sent == {
        "type": "object",
        "properties": {
            "q": {"type": "string", "minLength": 1, "pattern": "^(?!x)"},
            "n": {"type": "integer", "maximum": 10, "minimum": 1},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "uniqueItems": True,
                "minItems": 2,
            },
            "link": {"type": "string", "description": 'format: "uri"'},
        },
        "required": ["q", "n", "tags", "link"],
        "additionalProperties": False,
    }
    assert changes(compiled) == [
        ("/properties/n", "exclusiveMinimum", "rewritten", False),
        ("/properties/link", "format", "moved_to_description", False),
    ]


def test_gemini_number_exclusive_bound_is_a_loss() -> None:
    """A non-integer exclusive bound cannot be rewritten exactly, so it is lossy for Gemini."""
    schema = {"type": "object", "properties": {"x": {"type": "number", "exclusiveMaximum": 1.5}}}
    compiled = compile_tool(tool(schema), "gemini")
    assert compiled.strict is False
    assert compiled.schema_sent["properties"]["x"] == {
        "type": "number",
        "description": "exclusiveMaximum: 1.5",
    }
    assert changes(compiled) == [
        ("/properties/x", "exclusiveMaximum", "moved_to_description", True)
    ]
    with pytest.raises(SchemaCompileError, match="exclusiveMaximum"):
        compile_tool(tool(schema), "gemini", strict=True)


def test_gemini_strips_title_schema_and_examples() -> None:
    """Gemini: title and $schema are dropped, examples kept for the model in the description."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Args",
        "type": "object",
        "properties": {"a": {"type": "string", "title": "A", "examples": ["x"], "const": "x"}},
    }
    compiled = compile_tool(tool(schema), "gemini")
    assert compiled.schema_sent == {
        "type": "object",
        "properties": {"a": {"type": "string", "enum": ["x"], "description": 'examples: ["x"]'}},
    }
    assert changes(compiled) == [
        ("", "$schema", "dropped", False),
        ("", "title", "dropped", False),
        ("/properties/a", "const", "rewritten", False),
        ("/properties/a", "title", "dropped", False),
        ("/properties/a", "examples", "moved_to_description", False),
    ]


def test_gemini_openapi_writes_the_openapi_schema_form() -> None:
    """gemini-openapi: references inlined, null unions as nullable, upper-case types, key order kept."""
    compiled = compile_tool(tool(PYDANTIC_STYLE), "gemini-openapi")
    assert compiled.strict is True
    assert compiled.payload == {
        "name": "get_weather",
        "description": "Weather now",
        "parameters": {
            "type": "OBJECT",
            "properties": {
                "home": {
                    "type": "OBJECT",
                    "properties": {"street": {"type": "STRING"}},
                    "required": ["street"],
                    "description": "Where",
                },
                "color": {"type": "STRING", "enum": ["red", "green"]},
                "note": {"type": "STRING", "default": None, "nullable": True},
            },
            "required": ["home"],
            "propertyOrdering": ["home", "color", "note"],
        },
    }
    assert changes(compiled) == [
        ("/definitions/Address", "title", "dropped", False),
        ("/properties/home", "$ref", "inlined", False),
        ("/properties/color", "$ref", "inlined", False),
        ("/properties/note", "anyOf", "rewritten", False),
        ("", "propertyOrdering", "added", False),
        ("", "$defs", "dropped", False),
    ]


def test_gemini_openapi_refuses_what_the_openapi_form_cannot_say() -> None:
    """Number enums, closed objects and recursion are losses in the OpenAPI form."""
    schema = {
        "type": "object",
        "properties": {"level": {"type": "integer", "enum": [1, 2, None]}},
        "additionalProperties": False,
    }
    compiled = compile_tool(tool(schema), "gemini-openapi")
    assert compiled.strict is False
    assert compiled.schema_sent["properties"]["level"] == {
        "type": "INTEGER",
        "nullable": True,
        "description": "enum: [1, 2]",
    }
    assert [(r.path, r.keyword, r.action) for r in compiled.losses] == [
        ("/properties/level", "enum", "moved_to_description"),
        ("", "additionalProperties", "dropped"),
    ]
    with pytest.raises(SchemaCompileError, match="recursive"):
        compile_tool(tool(TREE), "gemini-openapi", strict=True)


# What Gemini's OpenAPI `Schema` cannot say: it requires a type on every node
# (the v1beta document marks Schema.type "Required"), items on arrays, and drops
# additionalProperties.
UNTYPED = {
    "type": "object",
    "properties": {
        "anything": {},
        "mixed": {"enum": [1, "x"]},
        "bag": {"type": "array"},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        "blob": {"type": "object"},
    },
    "required": ["anything"],
}


@pytest.mark.parametrize("allow_loss", [False, True])
def test_gemini_openapi_strict_refuses_untyped_values_arrays_and_maps(allow_loss: bool) -> None:
    """strict=True refuses (even with allow_loss) each node the OpenAPI form cannot type."""
    with pytest.raises(SchemaCompileError) as raised:
        compile_tool(tool(UNTYPED), "gemini-openapi", strict=True, allow_loss=allow_loss)
    text = str(raised.value)
    assert "tool 'get_weather' for gemini-openapi" in text
    assert "/properties/anything: type refused" in text
    assert (
        "/properties/mixed: type refused [lossy]: Gemini parameters (OpenAPI Schema) needs a type"
        in text
    )
    assert "/properties/bag: items refused" in text
    assert "/properties/meta: additionalProperties refused" in text
    assert "/properties/blob: properties refused" in text


def test_gemini_openapi_non_strict_gives_every_node_a_type() -> None:
    """The non-strict form types what has no type, each a lossy rewrite the caller can read."""
    compiled = compile_tool(tool(UNTYPED), "gemini-openapi")
    assert compiled.strict is False
    props = compiled.schema_sent["properties"]
    assert props["anything"] == {"type": "STRING"}
    assert props["mixed"] == {
        "description": 'enum: [1, "x"]',
        "anyOf": [{"type": "INTEGER"}, {"type": "STRING", "enum": ["x"]}],
    }
    assert props["bag"] == {"type": "ARRAY", "items": {"type": "STRING"}}
    assert props["meta"] == {"type": "OBJECT"}
    assert [(r.path, r.keyword, r.action) for r in compiled.losses] == [
        ("/properties/anything", "type", "added"),
        ("/properties/mixed", "enum", "moved_to_description"),
        ("/properties/mixed", "type", "added"),
        ("/properties/bag", "items", "added"),
        ("/properties/meta", "additionalProperties", "dropped"),
    ]
    assert {r.keyword for r in compiled.strict_blockers} >= {"type", "items", "properties"}


def test_gemini_openapi_non_strict_types_tuple_items_from_prefix_items() -> None:
    """A fixed-length tuple's items are its prefixItems' types, so the model can send what the tool takes."""

    def move(to: tuple[int, int], pair: tuple[int, str], loose: tuple[Any, int]) -> str:
        """Move.

        Args:
            to: Target cell.
            pair: A number and a name.
            loose: Anything and a number.
        """
        return str(to)

    compiled = compile_tool(toolfold.tool(move), "gemini-openapi", strict=False)
    props = compiled.schema_sent["properties"]
    assert props["to"]["items"] == {"type": "INTEGER"}
    assert (props["to"]["minItems"], props["to"]["maxItems"]) == (2, 2)
    assert props["pair"]["items"] == {"anyOf": [{"type": "INTEGER"}, {"type": "STRING"}]}
    assert props["loose"]["items"] == {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]}
    # (a derived tuple ends with its maxItems: one item type sent with it is the same tuple)
    rewritten = {r.path: r for r in compiled.rewrites if r.keyword == "items"}
    assert list(rewritten) == ["/properties/to", "/properties/pair", "/properties/loose"]
    assert [r.lossy for r in rewritten.values()] == [False, True, True]
    assert props["to"]["description"] == "Target cell."  # (no prefixItems: said by items)
    assert "its item types (any of them at any position)" in rewritten["/properties/pair"].detail


def test_gemini_openapi_sends_a_tool_without_parameters_as_recorded() -> None:
    """A tool with no parameters is an OBJECT with empty properties, as recorded Gemini traffic sends."""
    compiled = compile_tool(tool({"type": "object", "properties": {}}), "gemini-openapi")
    assert compiled.payload["parameters"] == {"type": "OBJECT", "properties": {}}
    assert compiled.strict is True


@pytest.mark.parametrize("strict", [None, False, True])
def test_gemini_openapi_refuses_recursion_in_every_mode(strict: bool | None) -> None:
    """The OpenAPI form has no references: a recursive schema is a SchemaCompileError, never a cut."""
    with pytest.raises(SchemaCompileError, match="recursive") as raised:
        compile_tool(tool(TREE), "gemini-openapi", strict=strict)
    assert raised.value.dialect == "gemini-openapi"
    sent = compile_tool(tool(TREE), "gemini", strict=strict).schema_sent  # JSON Schema form: fine
    assert sent["properties"]["children"]["items"] == {"$ref": "#"}


def test_ollama_moves_every_constraint_into_descriptions() -> None:
    """Ollama keeps only its Go-struct keywords; each constraint is written for the model."""
    compiled = compile_tool(tool(CONSTRAINED), "ollama")
    assert compiled.schema_sent == {
        "type": "object",
        "properties": {
            "q": {"type": "string", "description": 'minLength: 1; pattern: "^(?!x)"'},
            "n": {"type": "integer", "description": "exclusiveMinimum: 0; maximum: 10"},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "description": "uniqueItems: true; minItems: 2",
            },
            "link": {"type": "string", "description": 'format: "uri"'},
        },
        "required": ["q", "n", "tags", "link"],
    }
    assert ("", "additionalProperties", "dropped", True) in changes(compiled)


# --- references, recursion, unions ----------------------------------------


def test_openai_strict_sends_recursion_through_the_root_reference() -> None:
    """A root $ref is inlined at the root and references to it become '#'."""
    compiled = compile_tool(tool(TREE), "openai-chat")
    assert compiled.strict is True
    assert compiled.schema_sent == {
        "type": "object",
        "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#"}},
        },
        "required": ["value", "children"],
        "additionalProperties": False,
    }
    assert changes(compiled) == [
        ("", "$ref", "inlined", False),
        ("/$defs/Node/properties/children/items", "$ref", "rewritten", False),
    ]


def test_anthropic_strict_refuses_recursion() -> None:
    """Anthropic strict cannot send recursive schemas: strict=None falls back, strict=True raises."""
    compiled = compile_tool(tool(TREE), "anthropic")
    assert compiled.strict is False
    assert compiled.schema_sent["$defs"] == TREE["$defs"]
    assert compiled.schema_sent["properties"] == TREE["$defs"]["Node"]["properties"]
    with pytest.raises(SchemaCompileError, match="recursive"):
        compile_tool(tool(TREE), "anthropic", strict=True)


def test_ollama_inlines_references_and_cuts_recursion() -> None:
    """Ollama cannot follow $ref: definitions are inlined and a cycle stops with a plain object."""
    compiled = compile_tool(tool(TREE), "ollama")
    assert compiled.schema_sent == {
        "type": "object",
        "properties": {
            "value": {"type": "integer"},
            "children": {
                "type": "array",
                "items": {"type": "object", "description": "Same shape as the enclosing object."},
            },
        },
        "required": ["value", "children"],
    }
    assert changes(compiled) == [
        ("", "$ref", "inlined", False),
        ("/$defs/Node/properties/children/items", "$ref", "rewritten", True),
        ("/$defs/Node", "additionalProperties", "dropped", True),
        ("", "$defs", "dropped", False),
    ]


PYDANTIC_STYLE = {
    "type": "object",
    "properties": {
        "home": {"$ref": "#/definitions/Address", "description": "Where"},
        "color": {"$ref": "#/definitions/Color"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["home"],
    "definitions": {
        "Address": {
            "title": "Address",
            "type": "object",
            "properties": {"street": {"type": "string"}},
            "required": ["street"],
        },
        "Color": {"type": "string", "enum": ["red", "green"]},
        "Unused": {"type": "object"},
    },
}


def test_openai_strict_wraps_ref_siblings_and_nullable_refs_in_any_of() -> None:
    """$ref with a description is wrapped in anyOf; an optional $ref becomes anyOf [ref, null]."""
    compiled = compile_tool(tool(PYDANTIC_STYLE), "openai-chat")
    assert compiled.strict is True
    assert compiled.schema_sent == {
        "type": "object",
        "properties": {
            "home": {"anyOf": [{"$ref": "#/$defs/Address"}], "description": "Where"},
            "color": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}]},
            "note": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "default: null",
            },
        },
        "required": ["home", "color", "note"],
        "additionalProperties": False,
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"street": {"type": "string"}},
                "required": ["street"],
                "additionalProperties": False,
            },
            "Color": {"type": "string", "enum": ["red", "green"]},
        },
    }
    assert changes(compiled) == [
        ("/properties/home", "$ref", "rewritten", False),  # definitions -> $defs
        ("/properties/home", "$ref", "rewritten", False),  # siblings wrapped in anyOf
        ("/properties/color", "$ref", "rewritten", False),
        ("/properties/note", "default", "moved_to_description", False),
        ("", "additionalProperties", "added", False),
        ("/properties/color", "required", "made_nullable", False),
        ("/properties/note", "required", "made_required", False),
        ("/definitions/Address", "title", "dropped", False),
        ("/definitions/Address", "additionalProperties", "added", False),
    ]


def test_overlapping_one_of_is_a_loss_but_disjoint_one_of_is_not() -> None:
    """oneOf -> anyOf is exact only when no instance can match two branches."""
    disjoint = {
        "type": "object",
        "properties": {"v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
        "required": ["v"],
    }
    overlapping = {
        "type": "object",
        "properties": {"v": {"oneOf": [{"type": "integer"}, {"type": "number"}]}},
        "required": ["v"],
    }
    tagged = {
        "type": "object",
        "properties": {
            "v": {
                "oneOf": [
                    {"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
                    {"type": "object", "properties": {"k": {"const": "b"}}, "required": ["k"]},
                ]
            }
        },
        "required": ["v"],
    }
    assert compile_tool(tool(disjoint), "openai-chat").strict is True
    assert compile_tool(tool(tagged), "openai-chat").strict is True
    loose = compile_tool(tool(overlapping), "openai-chat")
    assert loose.strict is False
    assert [(r.path, r.keyword, r.action) for r in loose.strict_blockers] == [
        ("/properties/v", "oneOf", "rewritten")
    ]


def test_all_of_is_merged_when_it_can_be_and_refused_when_not() -> None:
    """allOf members fold into one object; conflicting members are a loss."""
    mergeable = {
        "type": "object",
        "properties": {
            "p": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                ]
            }
        },
        "required": ["p"],
        "additionalProperties": False,
    }
    compiled = compile_tool(tool(mergeable), "openai-chat")
    assert compiled.schema_sent["properties"]["p"] == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    conflicting = copy.deepcopy(mergeable)
    conflicting["properties"]["p"]["allOf"][1] = {"type": "string"}
    loose = compile_tool(tool(conflicting), "openai-chat")
    assert loose.strict is False
    assert ("/properties/p", "allOf", "dropped", True) in [
        (r.path, r.keyword, r.action, r.lossy) for r in loose.strict_blockers
    ]


def test_maps_and_untyped_values_are_refused_in_strict_mode() -> None:
    """A dict[str, int] or an Any parameter cannot be expressed by OpenAI strict mode."""
    schema = {
        "type": "object",
        "properties": {
            "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
            "anything": {},
            "bag": {"type": "array"},
        },
        "required": ["counts", "anything", "bag"],
    }
    with pytest.raises(SchemaCompileError) as info:
        compile_tool(tool(schema), "openai-chat", strict=True, allow_loss=True)
    assert [p.split(":")[0] for p in info.value.problems] == [
        "/properties/counts",
        "/properties/anything",
        "/properties/bag",
    ]
    assert compile_tool(tool(schema), "openai-chat").strict is False


def test_anthropic_splits_type_lists_into_any_of() -> None:
    """Anthropic strict gets one type per schema; enum values follow their type."""
    schema = {
        "type": "object",
        "properties": {"x": {"type": ["string", "integer"], "enum": ["a", 1], "description": "X"}},
        "required": ["x"],
    }
    compiled = compile_tool(tool(schema), "anthropic")
    assert compiled.strict is True
    assert compiled.schema_sent["properties"]["x"] == {
        "description": "X",
        "anyOf": [{"type": "string", "enum": ["a"]}, {"type": "integer", "enum": [1]}],
    }


def test_openapi_nullable_and_const_are_rewritten_exactly() -> None:
    """OpenAPI `nullable` becomes a null type and `const` a one-value enum."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "nullable": True}, "b": {"const": 3}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    compiled = compile_tool(tool(schema), "openai-chat")
    assert compiled.strict is True
    assert compiled.schema_sent["properties"] == {
        "a": {"type": ["string", "null"]},
        "b": {"enum": [3]},
    }


# --- limits ----------------------------------------------------------------


def test_openai_limits_are_checked_before_sending() -> None:
    """Over 1000 enum values or 10 nested objects: strict refuses, strict=None falls back."""
    big_enum = {
        "type": "object",
        "properties": {"c": {"type": "integer", "enum": list(range(1001))}},
        "required": ["c"],
        "additionalProperties": False,
    }
    with pytest.raises(SchemaCompileError, match="at most 1000 enum values"):
        compile_tool(tool(big_enum), "openai-chat", strict=True)
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(11):
        deep = {
            "type": "object",
            "properties": {"x": deep},
            "required": ["x"],
            "additionalProperties": False,
        }
    compiled = compile_tool(tool(deep), "openai-chat")
    assert compiled.strict is False
    assert "11" in compiled.strict_blockers[0].detail
    long_strings = {
        "type": "object",
        "properties": {"c": {"type": "string", "enum": ["v" * 60 + str(i) for i in range(300)]}},
        "required": ["c"],
        "additionalProperties": False,
    }
    with pytest.raises(SchemaCompileError, match="more than 250 values"):
        compile_tool(tool(long_strings), "openai-chat", strict=True)


# --- what every dialect refuses --------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "name"),
    [
        ("openai-chat", "has space"),
        ("openai-responses", "x" * 65),
        ("anthropic", "dots.not.allowed"),
        ("gemini", "1starts_with_digit"),
        ("gemini", "g" * 65),  # Gemini's spec: "a maximum length of 64"
        ("gemini-openapi", "g" * 65),
    ],
)
def test_tool_names_the_provider_would_refuse_are_refused(dialect: str, name: str) -> None:
    """A name outside the provider's pattern is an error before any request."""
    with pytest.raises(SchemaCompileError, match="tool name must be") as caught:
        compile_tool(tool(WEATHER, name=name), dialect)  # type: ignore[arg-type]
    assert f"cannot compile tool {name!r}" in str(caught.value)


@pytest.mark.parametrize("strict", [None, False, True])
def test_parameter_names_anthropic_would_refuse_are_refused(strict: bool | None) -> None:
    """Anthropic's property-key rule (a 400) is checked before any request, naming each parameter."""
    keys = {"città": {"type": "string"}, "都市": {"type": "string"}, "ok.key-2": {"type": "string"}}
    schema = {"type": "object", "properties": {**keys, "k" * 65: {"type": "string"}}}
    with pytest.raises(SchemaCompileError) as caught:
        compile_tool(tool(schema, name="meteo"), "anthropic", strict=strict)  # type: ignore[arg-type]
    said = str(caught.value)
    assert "cannot compile tool 'meteo' for anthropic" in said
    assert "parameter 'città'" in said
    assert "parameter '都市'" in said
    assert f"parameter '{'k' * 65}'" in said
    assert "ok.key-2" not in said
    assert "a-z A-Z 0-9 _ . -" in said
    allowed = {
        "type": "object",
        "properties": {"ok.key-2": {"type": "string"}, "k" * 64: {"type": "string"}},
    }
    compile_tool(tool(allowed), "anthropic", strict=strict)  # type: ignore[arg-type]
    for other in ("openai-chat", "gemini"):  # no such rule there: sent as they are
        sent = compile_tool(tool(schema), other).schema_sent  # type: ignore[arg-type]
        assert "città" in sent["properties"]


@pytest.mark.parametrize("dialect", ["gemini", "gemini-openapi"])
def test_a_gemini_tool_name_of_64_characters_is_sent(dialect: str) -> None:
    """64 characters is Gemini's limit (its spec's FunctionDeclaration.name), so such a name compiles."""
    name = "_" + "g.:-" * 15 + "abc"
    assert len(name) == 64
    assert compile_tool(tool(WEATHER, name=name), dialect).payload["name"] == name  # type: ignore[arg-type]


def test_root_must_be_an_object_and_dialect_must_exist() -> None:
    """A non-object root, an unknown dialect and strict for a dialect without it are errors."""
    with pytest.raises(SchemaCompileError, match="must be an object schema"):
        compile_tool(tool({"type": "string"}), "openai-chat")
    with pytest.raises(SchemaCompileError, match="unknown dialect"):
        compile_tool(tool(WEATHER), "cohere")  # type: ignore[arg-type]
    with pytest.raises(SchemaCompileError, match="ollama has no strict mode"):
        compile_tool(tool(WEATHER), "ollama", strict=True)
    with pytest.raises(SchemaCompileError, match="not JSON"):
        compile_tool(tool({"type": "object", "properties": {"a": {"default": object()}}}), "gemini")


def test_empty_parameters_compile_to_a_closed_empty_object() -> None:
    """A tool without parameters is an empty object in every dialect."""
    compiled = compile_tool(tool({}), "openai-chat")
    assert compiled.schema_sent == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
        "required": [],
    }
    assert compiled.strict is True


# --- inputs, defaults, memoization -----------------------------------------


def test_tool_objects_and_their_strict_flag_are_honoured() -> None:
    """A toolkit Tool compiles like a ToolDefinition, and its own strict flag is the default."""
    strict_tool = Tool("get_weather", "Weather now", parameters=CONSTRAINED, strict=True)
    with pytest.raises(SchemaCompileError):
        compile_tool(strict_tool, "openai-chat")
    assert compile_tool(strict_tool, "openai-chat", strict=None).strict is False
    loose_tool = Tool("get_weather", "Weather now", parameters=WEATHER, strict=False)
    assert compile_tool(loose_tool, "openai-chat").strict is False


def test_compilation_is_memoized_and_sees_mutation() -> None:
    """The same tool compiles once; a tool-like's schema mutated in place is compiled again."""
    params = copy.deepcopy(WEATHER)
    definition = Editable(params)
    first = compile_tool(definition, "openai-chat")
    assert compile_tool(definition, "openai-chat") is first
    assert compile_tool(tool(copy.deepcopy(WEATHER)), "openai-chat") is first
    params["properties"]["city"]["minLength"] = 2
    again = compile_tool(definition, "openai-chat")
    assert again is not first
    assert again.strict is False


def test_a_tool_made_per_request_is_not_kept_by_the_memo() -> None:
    """A tool made per request (a closure over it) compiles once per dialect while it
    lives, and its schema is freed with it: the memo keeps no tool it compiled."""
    import gc
    import weakref

    def made(user: str) -> Tool[..., Any]:
        @toolfold.tool
        def lookup(city: str) -> str:
            """Look a city up for the request's user.

            Args:
                city: The city's name.
            """
            return f"{user}: {city}"

        return lookup

    first = made("ann")
    compiled = compile_tool(first, "anthropic")
    assert compile_tool(first, "anthropic") is compiled
    assert compile_tool(first, "openai-chat") is not compiled
    schemas = [weakref.ref(first.parameters)]
    for user in range(300):
        request_tool = made(str(user))
        assert compile_tool(request_tool, "anthropic") is compiled  # (the same content)
        schemas.append(weakref.ref(request_tool.parameters))
    del first, request_tool
    gc.collect()
    assert [ref for ref in schemas if ref() is not None] == []


def test_the_memo_stays_bounded_for_one_schema_under_many_descriptions() -> None:
    """One tool's schema compiled under a description per request (``replace`` keeps the
    schema object, which lives on: it is the module's tool's) is not kept for every
    description: past the memo's bound, the first one's compilation is gone."""
    from toolfold.adapters._dialects import _compile

    @toolfold.tool
    def search(query: str) -> str:
        """Search.

        Args:
            query: What to look for.
        """
        return query

    def for_tenant(tenant: int) -> Any:
        return compile_tool(
            search.replace(description=f"Search tenant {tenant}'s files"), "anthropic"
        )

    first = for_tenant(0)
    assert for_tenant(0) is first
    for tenant in range(1, _compile._MAX_ENTRIES + 100):
        for_tenant(tenant)
    assert for_tenant(0) is not first


def test_a_value_changed_in_place_to_an_equal_value_of_another_type_is_compiled_again() -> None:
    """1, 1.0 and True are equal in Python but not in JSON: each in-place change compiles anew."""
    params: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 1}, "m": {"enum": [0, 1]}},
    }
    definition = Editable(params, name="count")
    for dialect in ("json-schema", "openai-chat", "anthropic", "gemini"):
        for value in (1, 1.0, True, 1):
            params["properties"]["n"]["maximum"] = value
            params["properties"]["m"]["enum"][1] = value
            sent = compile_tool(definition, dialect).schema_sent["properties"]  # type: ignore[arg-type]
            assert type(sent["n"]["maximum"]) is type(value), dialect
            assert [type(v) for v in sent["m"]["enum"][:2]] == [int, type(value)], dialect


def test_read_only_mappings_are_accepted() -> None:
    """Parameters given as any Mapping (e.g. a MappingProxyType) compile like a dict."""
    from types import MappingProxyType

    params = MappingProxyType({**WEATHER, "properties": MappingProxyType(WEATHER["properties"])})
    compiled = compile_tool(tool(params), "openai-chat")  # type: ignore[arg-type]
    assert compiled.schema_sent == OPENAI_WEATHER
    assert compile_tool(tool(params), "openai-chat") is compiled  # type: ignore[arg-type]


def test_compilation_never_mutates_the_tool_schema() -> None:
    """The tool's parameters are left exactly as they were."""
    for schema in (WEATHER, CONSTRAINED, TREE, PYDANTIC_STYLE):
        before = copy.deepcopy(schema)
        for dialect in ("openai-chat", "anthropic", "gemini", "ollama", "deepseek"):
            compile_tool(tool(schema), dialect, strict=None, allow_loss=False)  # type: ignore[arg-type]
        assert schema == before


def test_the_facade_exports_the_compiler_lazily() -> None:
    """compile_tool and friends are reachable from the top-level package."""
    assert toolfold.compile_tool is compile_tool
    assert toolfold.CompiledTool is CompiledTool
    assert issubclass(toolfold.SchemaCompileError, toolfold.ToolfoldError)


OPEN_ROOTS = [
    {"type": "object"},
    {"type": "object", "additionalProperties": True},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {}},
]


@pytest.mark.parametrize("dialect", ["openai-chat", "openai-responses", "anthropic", "deepseek"])
@pytest.mark.parametrize("schema", OPEN_ROOTS)
def test_an_open_root_is_not_closed_as_if_it_cost_nothing(
    dialect: Any, schema: dict[str, Any]
) -> None:
    """A root open to any key (dict[str, Any], additionalProperties: true) closed would take
    only its declared keys: strict=True refuses it, strict=None sends it loose, unchanged."""
    with pytest.raises(SchemaCompileError, match=r"\(root\): (properties|additionalProperties)"):
        compile_tool(tool(schema), dialect, strict=True)
    loose = compile_tool(tool(schema), dialect, strict=None)
    assert loose.strict is False
    assert loose.schema_sent == schema
    assert {r.path for r in loose.strict_blockers} == {""}


@pytest.mark.parametrize("extra", [True, {}])
def test_an_open_object_refused_is_quoted_as_the_schema_has_it(extra: Any) -> None:
    """The refusal of an object open to any other key quotes the schema's own
    additionalProperties (true or {}), not true for both."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    with pytest.raises(SchemaCompileError) as caught:
        compile_tool(tool({**schema, "additionalProperties": extra}), "openai-chat", strict=True)
    shown = "true" if extra is True else "{}"
    assert caught.value.problems == (
        "(root): additionalProperties refused [lossy]: OpenAI strict mode cannot send an "
        f"object open to any other key (additionalProperties: {shown}); declare its "
        "properties instead",
    )


@pytest.mark.parametrize("dialect", ["openai-chat", "openai-responses", "anthropic", "deepseek"])
@pytest.mark.parametrize("schema", [{}, {"type": "object", "properties": {}}])
def test_a_tool_without_parameters_stays_strict(dialect: Any, schema: dict[str, Any]) -> None:
    """A tool without parameters ({} or empty properties) compiles strict, closed, no loss."""
    compiled = compile_tool(tool(schema), dialect, strict=True)
    assert compiled.strict is True
    assert compiled.schema_sent["additionalProperties"] is False
    assert compiled.schema_sent["properties"] == {}


# --- what a dialect cannot say is still sent so that a valid call fits -------

EITHER = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
    "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
}
BOUNDED_UNION = {
    "type": "object",
    "properties": {"n": {"type": "integer", "anyOf": [{"minimum": 5}, {"maximum": 1}]}},
    "required": ["n"],
}


@pytest.mark.parametrize("strict", [None, False, True])
def test_gemini_openapi_gives_an_untyped_branch_its_parents_type(strict: bool | None) -> None:
    """``anyOf`` branches with no type of their own under a typed node take that type (and an
    object's properties), exactly: they were sent as STRING, and no valid call fitted."""
    either = compile_tool(tool(EITHER), "gemini-openapi", strict=strict)
    branch = {"type": "OBJECT", "properties": {"a": {"type": "STRING"}, "b": {"type": "STRING"}}}
    assert either.schema_sent["anyOf"] == [
        {**branch, "required": ["a"], "propertyOrdering": ["a", "b"]},
        {**branch, "required": ["b"], "propertyOrdering": ["a", "b"]},
    ]
    assert ("/anyOf/0", "type", "added", False) in changes(either)
    assert toolfold.check_arguments(either, {"a": "x"}) == {"a": "x"}
    bounded = compile_tool(tool(BOUNDED_UNION), "gemini-openapi", strict=strict)
    assert bounded.schema_sent["properties"]["n"] == {
        "type": "INTEGER",
        "anyOf": [{"type": "INTEGER", "minimum": 5}, {"type": "INTEGER", "maximum": 1}],
    }
    assert not bounded.losses
    assert toolfold.check_arguments(bounded, {"n": 7}) == {"n": 7}
    with pytest.raises(toolfold.ArgumentValidationError):
        toolfold.check_arguments(bounded, {"n": 3})


@pytest.mark.parametrize("strict", [None, False, True])
@pytest.mark.parametrize(
    "either",
    [
        {"type": "object", "properties": {"o": {k: v for k, v in EITHER.items() if k != "type"}}},
        {
            **EITHER,
            "anyOf": [{"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}],
        },
    ],
    ids=["untyped-parent", "object-branches"],
)
def test_gemini_openapi_gives_object_branches_their_parents_properties(
    either: dict[str, Any], strict: bool | None
) -> None:
    """A node with properties and no type is an object, and a branch typed ``object`` is
    one of its parent's: both branches get the parent's properties, so their ``required``
    names declared ones (refused in every mode in round 1; main sent them unsatisfiable)."""
    compiled = compile_tool(tool(either), "gemini-openapi", strict=strict)
    node = compiled.schema_sent["properties"]["o"] if "o" in either["properties"] else None
    union = (node or compiled.schema_sent)["anyOf"]
    assert [b["properties"] for b in union] == [
        {"a": {"type": "STRING"}, "b": {"type": "STRING"}}
    ] * 2
    args = {"o": {"b": "x"}} if node is not None else {"b": "x"}
    assert toolfold.check_arguments(compiled, args) == args
    with pytest.raises(toolfold.ArgumentValidationError):  # neither a nor b
        toolfold.check_arguments(compiled, {"o": {}} if node is not None else {})


@pytest.mark.parametrize("dialect", ["openai-chat", "anthropic", "deepseek"])
def test_required_naming_an_undeclared_property_keeps_a_closing_dialect_out_of_strict(
    dialect: str,
) -> None:
    """A closed object could never carry a required key ``properties`` does not declare: strict
    mode is refused, naming the key (OpenAI dropped it from required, unsaid; Anthropic sent an
    unsatisfiable schema), and strict=None sends the tool's own schema."""
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city", "country"],
    }
    with pytest.raises(SchemaCompileError, match="required names 'country'"):
        compile_tool(tool(schema), dialect, strict=True)  # type: ignore[arg-type]
    compiled = compile_tool(tool(schema), dialect, strict=None)  # type: ignore[arg-type]
    assert compiled.strict is False
    assert compiled.schema_sent["required"] == ["city", "country"]
    assert [(r.keyword, r.action) for r in compiled.strict_blockers] == [("required", "refused")]
    args = {"city": "Paris", "country": "FR"}
    assert toolfold.check_arguments(compiled, args) == args


@pytest.mark.parametrize("strict", [None, False, True])
def test_gemini_openapi_refuses_a_required_name_properties_does_not_declare(
    strict: bool | None,
) -> None:
    """Gemini answers such a tool with a 400 ("required[0]: property is not defined"), so it
    is refused in every mode, naming the key and where (it was sent as written)."""
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "where": {
                "type": "object",
                "properties": {"x": {"type": "integer"}},
                "required": ["y"],
            },
        },
        "required": ["city", "country"],
    }
    with pytest.raises(SchemaCompileError) as raised:
        compile_tool(tool(schema), "gemini-openapi", strict=strict)
    assert [p.split(":")[0] for p in raised.value.problems] == ["/properties/where", "(root)"]
    assert "required names 'country'" in raised.value.problems[1]
    assert "property is not defined" in raised.value.problems[1]


BASE = {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}
REF_WITH_REQUIRED = {
    "type": "object",
    "properties": {"o": {"$ref": "#/$defs/Base", "required": ["id"]}},
    "required": ["o"],
    "$defs": BASE,
}
INHERITS = {
    "type": "object",
    "properties": {
        "o": {
            "type": "object",
            "allOf": [{"$ref": "#/$defs/Base"}],
            "properties": {"n": {"type": "integer"}},
            "required": ["id", "n"],
        }
    },
    "required": ["o"],
    "$defs": BASE,
}


@pytest.mark.parametrize(
    ("schema", "dialect", "strict"),
    [
        (REF_WITH_REQUIRED, "gemini-openapi", None),
        (REF_WITH_REQUIRED, "gemini-openapi", False),
        (INHERITS, "gemini-openapi", None),
        (INHERITS, "gemini-openapi", False),
        (INHERITS, "gemini-openapi", True),
        (INHERITS, "openai-chat", True),
        (INHERITS, "anthropic", True),
        (INHERITS, "deepseek", True),
    ],
)
def test_required_may_name_a_property_its_reference_declares(
    schema: dict[str, Any], dialect: str, strict: bool | None
) -> None:
    """``required`` next to a ``$ref`` (or a one-reference ``allOf``: OpenAPI inheritance)
    names the target's properties: no "declare it" refusal (main sent these), and the
    inheriting object is sent merged, both properties required."""
    compiled = compile_tool(tool(schema), dialect, strict=strict)  # type: ignore[arg-type]
    sent = compiled.schema_sent["properties"]["o"]
    assert "id" in sent["properties"]
    assert "id" in sent["required"]
    args = {"o": {"id": "x", "n": 1}} if schema is INHERITS else {"o": {"id": "x"}}
    assert toolfold.check_arguments(compiled, args) == args
    if schema is INHERITS:
        assert set(sent["properties"]) == set(sent["required"]) == {"id", "n"}
        with pytest.raises(toolfold.ArgumentValidationError):
            toolfold.check_arguments(compiled, {"o": {"n": 1}})


AB = {"Base": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}}
A_OR_B = [{"required": ["a"]}, {"required": ["b"]}]
KIND = {"kind": {"type": "string", "enum": ["url", "path"]}, "url": {"type": "string"}}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"o": {"$ref": "#/$defs/Base", "anyOf": A_OR_B}}},
        {"type": "object", "properties": {"o": {"$ref": "#/$defs/Base", "oneOf": A_OR_B}}},
        {
            "type": "object",
            "properties": {"o": {"allOf": [{"$ref": "#/$defs/Base"}], "anyOf": A_OR_B}},
        },
        {
            "type": "object",
            "properties": {"o": {"$ref": "#/$defs/X"}},
            "$defs": {"X": {"allOf": [{"$ref": "#/$defs/Base"}], "anyOf": A_OR_B}},
        },
        {
            "type": "object",
            "properties": KIND,
            "oneOf": [{"properties": {"kind": {"const": "url"}}, "required": ["url"]}],
        },
    ],
)
@pytest.mark.parametrize("strict", [None, False])
def test_gemini_openapi_sends_a_branch_requiring_names_its_parent_may_declare(
    schema: dict[str, Any], strict: bool | None
) -> None:
    """A ``required`` in an anyOf/oneOf branch may name what the parent, its ``$ref`` or
    its ``allOf`` declares: refused only where surely undeclared (main sent these)."""
    schema = {**schema, "$defs": {**AB, **schema.get("$defs", {})}}
    compiled = compile_tool(tool(schema), "gemini-openapi", strict=strict)
    assert not [r for r in compiled.rewrites if r.action == "refused" and r.keyword == "required"]


ANCHORED = {
    "type": "object",
    "properties": {"a": {"$ref": "#pt"}},
    "required": ["a"],
    "$defs": {"P": {"$anchor": "pt", "type": "integer", "minimum": 3}},
}


@pytest.mark.parametrize("strict", [None, False])
def test_a_reference_to_an_anchor_is_followed_in_every_dialect(strict: bool) -> None:
    """``{"$ref": "#pt"}`` names an ``$anchor``: it is sent as its definition's pointer (or
    inlined), never as a reference left pointing nowhere with its $defs dropped."""
    for dialect in ("openai-chat", "anthropic", "gemini", "gemini-openapi", "ollama"):
        compiled = compile_tool(tool(ANCHORED), dialect, strict=strict)  # type: ignore[arg-type]
        if not compiled.strict and dialect in ("openai-chat", "anthropic"):
            assert compiled.schema_sent == ANCHORED  # passed through as written
            assert compiled.rewrites == ()
        else:
            assert ("/properties/a", "$ref", "rewritten", False) in changes(compiled), dialect
            assert compiled.rewrites[0].detail == "#pt names the $anchor at #/$defs/P"
        assert toolfold.check_arguments(compiled, {"a": 5}) == {"a": 5}
        with pytest.raises(toolfold.ArgumentValidationError, match="integer"):
            toolfold.check_arguments(compiled, {"a": "zzz"})
    inlined = compile_tool(tool(ANCHORED), "ollama").schema_sent["properties"]["a"]
    assert inlined == {"type": "integer", "description": "minimum: 3"}
    strict_openai = compile_tool(tool(ANCHORED), "openai-chat", strict=True)
    assert strict_openai.schema_sent["properties"]["a"] == {"$ref": "#/$defs/P"}


@pytest.mark.parametrize("dialect", ["gemini", "gemini-openapi", "ollama"])
def test_an_anchor_of_a_nested_resource_is_refused_saying_where_it_is(dialect: str) -> None:
    """A "#q" inside a nested ``$id`` resource names that resource's anchor, which the
    compiler does not follow: the refusal says so and what to do (it said no $anchor was
    there, or that the reference was not local)."""
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/Other"}},
        "$defs": {
            "Other": {
                "$id": "https://example.com/o",
                "type": "object",
                "properties": {"x": {"$ref": "#q"}},
                "$defs": {"Q": {"$anchor": "q", "type": "string"}},
            }
        },
    }
    with pytest.raises(SchemaCompileError) as raised:
        compile_tool(tool(schema), dialect)  # type: ignore[arg-type]
    (problem,) = raised.value.problems
    assert "cannot resolve '#q'" in problem
    assert "under a nested $id" in problem
    assert "the root's $defs" in problem


TOOL_REFERENCES = {
    "dynamic-anchor": {
        "type": "object",
        "properties": {"a": {"$ref": "#node"}},
        "$defs": {"Node": {"$dynamicAnchor": "node", "type": "integer"}},
    },
    "root-id": {
        "$id": "https://example.com/t.json",
        "type": "object",
        "properties": {"a": {"$ref": "https://example.com/t.json#/$defs/P"}},
        "$defs": {"P": {"type": "integer"}},
    },
    "property-named-default": {
        "type": "object",
        "properties": {
            "a": {"$ref": "#pt"},
            "default": {"$ref": "#pt"},
            "x": {"$anchor": "pt", "type": "integer"},
        },
    },
}


@pytest.mark.parametrize("strict", [None, False])
@pytest.mark.parametrize("dialect", ["gemini", "gemini-openapi", "ollama"])
@pytest.mark.parametrize("name", list(TOOL_REFERENCES))
def test_every_reference_a_tool_accepts_is_followed(name: str, dialect: str, strict: bool) -> None:
    """A ``$ref`` to a ``$dynamicAnchor``, through the root's ``$id``, or to an anchor in a
    property named like a data keyword: Tool() accepts them, so they are followed (round 1
    refused them in every mode; main sent Gemini and Ollama a dangling reference)."""
    schema = TOOL_REFERENCES[name]
    Tool(name="t", description="d", parameters=schema, function=lambda args: args)
    compiled = compile_tool(tool(schema), dialect, strict=strict)  # type: ignore[arg-type]
    assert compiled.schema_sent["properties"]["a"] in (
        {"$ref": "#/$defs/Node"},
        {"$ref": "#/$defs/P"},
        {"type": "integer"},
        {"type": "INTEGER"},
    )
    assert toolfold.check_arguments(compiled, {"a": 5}) == {"a": 5}
    with pytest.raises(toolfold.ArgumentValidationError, match="integer"):
        toolfold.check_arguments(compiled, {"a": "x"})
    if "default" in schema["properties"]:  # (a property's name, not the data keyword)
        sent = compiled.schema_sent["properties"]
        assert sent["default"] == sent["a"]


@pytest.mark.parametrize("dialect", ["openai-chat", "gemini-openapi"])
def test_an_anchor_of_another_resource_is_not_the_one_referenced(dialect: str) -> None:
    """``#pt`` names the root's own anchor, not one of the same name below another ``$id``
    (round 1 took that one: a string sent, reported lossless, where the tool takes an
    integer)."""
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#pt"}},
        "required": ["a"],
        "$defs": {
            "P": {"$anchor": "pt", "type": "integer"},
            "Other": {
                "$id": "https://e.com/o",
                "$defs": {"Q": {"$anchor": "pt", "type": "string"}},
            },
        },
    }
    compiled = compile_tool(tool(schema), dialect, strict=True)  # type: ignore[arg-type]
    assert compiled.rewrites[0].detail == "#pt names the $anchor at #/$defs/P"
    assert toolfold.check_arguments(compiled, {"a": 1}) == {"a": 1}
    with pytest.raises(toolfold.ArgumentValidationError):
        toolfold.check_arguments(compiled, {"a": "x"})


@pytest.mark.parametrize(
    ("dialect", "strict"),
    [
        ("openai-chat", True),  # (non-strict, the tool's own schema is passed through)
        ("anthropic", True),
        ("gemini", None),
        ("gemini", False),
        ("gemini-openapi", None),
        ("ollama", False),
    ],
)
def test_a_reference_to_nothing_is_refused_in_every_mode(dialect: str, strict: bool) -> None:
    """A ``$ref`` that resolves nowhere is a SchemaCompileError naming it, not a dangling
    reference sent (it was, non-strict, for Gemini and Ollama) nor said to be non-local."""
    schema = {"type": "object", "properties": {"a": {"$ref": "#nope"}}}
    with pytest.raises(SchemaCompileError, match="cannot resolve '#nope'") as raised:
        compile_tool(tool(schema), dialect, strict=strict)  # type: ignore[arg-type]
    assert "only local" not in str(raised.value)


CLOSED_TUPLE = {
    "type": "object",
    "properties": {
        "t": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
            "minItems": 2,
        }
    },
    "required": ["t"],
}
DRAFT7_TUPLE = {
    "type": "object",
    "properties": {
        "t": {
            "type": "array",
            "items": [{"type": "integer"}, {"type": "string"}],
            "additionalItems": False,
        }
    },
    "required": ["t"],
}


@pytest.mark.parametrize("schema", [CLOSED_TUPLE, DRAFT7_TUPLE], ids=["2020-12", "draft-7"])
def test_a_closed_tuple_is_sent_as_its_item_types_where_prefix_items_are_not(
    schema: dict[str, Any],
) -> None:
    """``items: false`` ends a tuple; where prefixItems goes to the description it is not sent
    alone (it accepted only ``[]``): the items are the tuple's item types, at most as many."""
    for dialect in ("gemini", "gemini-openapi", "ollama"):
        compiled = compile_tool(tool(schema), dialect, strict=False)  # type: ignore[arg-type]
        sent = compiled.schema_sent["properties"]["t"]
        assert "prefixItems" not in sent, dialect
        assert sent["items"] is not False, dialect
        assert toolfold.check_arguments(compiled, {"t": [1, "a"]}) == {"t": [1, "a"]}
        rewrite = next(r for r in compiled.losses if r.keyword == "items")
        assert "closed tuple" in rewrite.detail
    gemini = compile_tool(tool(schema), "gemini", strict=False).schema_sent["properties"]["t"]
    assert gemini["items"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert gemini["maxItems"] == 2
    ollama = compile_tool(tool(schema), "ollama").schema_sent["properties"]["t"]
    assert "items: false" in ollama["description"]
    openapi = compile_tool(tool(schema), "gemini-openapi", strict=False)
    assert openapi.schema_sent["properties"]["t"]["items"] == {
        "anyOf": [{"type": "INTEGER"}, {"type": "STRING"}]
    }


ZOD_TUPLE = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "coords": {
            "type": "array",
            "items": [{"type": "number"}, {"type": "number"}],
            "minItems": 2,
            "maxItems": 2,
        }
    },
    "required": ["coords"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("dialect", "strict"),
    [
        ("openai-chat", None),
        ("openai-responses", True),
        ("gemini", True),
        ("gemini-openapi", False),
        ("ollama", None),
    ],
)
def test_a_tuple_ended_by_max_items_is_a_closed_tuple(dialect: str, strict: bool | None) -> None:
    """zod's ``z.tuple`` (draft 7 list ``items``, ``maxItems`` its length, no
    ``additionalItems``) ends like ``items: false``: sent as its item type with ``maxItems``,
    exact, so OpenAI and Gemini stay strict (round 1 fell back or raised, and sent Gemini
    and Ollama no items at all)."""
    compiled = compile_tool(tool(ZOD_TUPLE), dialect, strict=strict)  # type: ignore[arg-type]
    sent = compiled.schema_sent["properties"]["coords"]
    assert sent["items"] in ({"type": "number"}, {"type": "NUMBER"})
    assert "prefixItems" not in sent
    if dialect != "ollama":
        assert compiled.strict is (dialect != "gemini-openapi")
        assert sent["maxItems"] == 2
        assert not [r for r in compiled.losses if r.path == "/properties/coords"]
    assert toolfold.check_arguments(compiled, {"coords": [1, 2.5]}) == {"coords": [1, 2.5]}
    with pytest.raises(toolfold.ArgumentValidationError):
        toolfold.check_arguments(compiled, {"coords": [1, "x"]})


def test_draft7_array_items_are_walked_as_prefix_items() -> None:
    """A draft 7 tuple (``items`` a list) is compiled, never sent raw with lower-case types."""
    compiled = compile_tool(tool(DRAFT7_TUPLE), "gemini-openapi", strict=False)
    assert ("/properties/t", "items", "rewritten", False) in changes(compiled)
    assert compiled.schema_sent["properties"]["t"]["type"] == "ARRAY"


def test_ollama_sends_what_the_root_cannot_carry_in_the_tool_description() -> None:
    """Ollama's root takes no description: what is moved to the description there goes into
    the function's description (it was reported moved, and sent nowhere)."""
    compiled = compile_tool(tool({**EITHER, "minProperties": 1}), "ollama")
    description = compiled.payload["function"]["description"]
    assert description == (
        'Weather now (anyOf: [{"required": ["a"]}, {"required": ["b"]}]; minProperties: 1)'
    )
    assert "description" not in compiled.schema_sent
    assert ("", "anyOf", "moved_to_description", True) in changes(compiled)


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        ({"const": {"a": 1}}, {"type": "OBJECT", "properties": {"a": {"type": "INTEGER"}}}),
        (
            {"enum": [[1, 2], "x"]},
            {
                "anyOf": [
                    {"type": "ARRAY", "items": {"type": "INTEGER"}},
                    {"type": "STRING", "enum": ["x"]},
                ]
            },
        ),
    ],
)
def test_gemini_openapi_types_an_enum_of_arrays_and_objects_by_its_values(
    value: dict[str, Any], sent: dict[str, Any]
) -> None:
    """An enum or const of arrays or objects is sent as its values' types, not as STRING,
    which refused every value the tool takes."""
    schema = {"type": "object", "properties": {"c": value}, "required": ["c"]}
    compiled = compile_tool(tool(schema), "gemini-openapi", strict=False)
    prop = compiled.schema_sent["properties"]["c"]
    assert {k: v for k, v in prop.items() if k != "description"} == sent
    for good in value.get("enum", [value.get("const")]):
        assert toolfold.check_arguments(compiled, {"c": good}) == {"c": good}
