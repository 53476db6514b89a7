"""Arguments coming back: validated against the schema sent, strict-mode nulls turned back into absence."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from jsonschema import Draft202012Validator

from toolfold import ArgumentValidationError, Field, SchemaCompileError, tool
from toolfold.adapters import check_arguments, compile_tool, restore_arguments
from toolfold.runtime import ToolDefinition

ORDER = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "qty": {"type": "integer", "default": 1},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "ship": {"$ref": "#/$defs/Ship"},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
    },
    "required": ["sku"],
    "additionalProperties": False,
    "$defs": {
        "Ship": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "express": {"type": "boolean"}},
            "required": ["city"],
            "additionalProperties": False,
        },
        "Line": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "gift": {"type": "boolean"}},
            "required": ["code"],
            "additionalProperties": False,
        },
    },
}


def compiled_order(dialect: str = "openai-chat") -> Any:
    return compile_tool(ToolDefinition(name="order", parameters=ORDER), dialect)  # type: ignore[arg-type]


def test_nulls_for_optional_parameters_become_absent_at_every_depth() -> None:
    """Nulls the strict schema forced are removed in the root, nested objects and array items."""
    compiled = compiled_order()
    assert compiled.strict is True
    sent = {
        "sku": "A1",
        "qty": None,
        "note": None,
        "ship": {"city": "Oslo", "express": None},
        "lines": [{"code": "x", "gift": None}, {"code": "y", "gift": True}],
    }
    assert restore_arguments(compiled, sent) == {
        "sku": "A1",
        "note": None,  # the tool's schema accepts null here: it stays
        "ship": {"city": "Oslo"},
        "lines": [{"code": "x"}, {"code": "y", "gift": True}],
    }


def test_an_optional_object_sent_as_null_is_removed() -> None:
    """An optional $ref parameter answered with null is left out, so its default applies."""
    compiled = compiled_order()
    restored = restore_arguments(
        compiled, {"sku": "A", "qty": 2, "note": "n", "ship": None, "lines": None}
    )
    assert restored == {"sku": "A", "qty": 2, "note": "n"}


def test_restore_is_the_identity_when_nothing_was_made_nullable() -> None:
    """Dialects that keep optional properties optional hand arguments back untouched."""
    for dialect in ("anthropic", "gemini", "ollama", "json-schema"):
        compiled = compiled_order(dialect)
        arguments = {"sku": "A", "qty": None}
        assert restore_arguments(compiled, arguments) is arguments


def test_check_arguments_validates_against_the_schema_sent() -> None:
    """Arguments are checked against the exact schema sent, with JSON paths, then restored."""
    compiled = compiled_order()
    good = {"sku": "A", "qty": None, "note": None, "ship": None, "lines": None}
    assert check_arguments(compiled, good) == {"sku": "A", "note": None}
    with pytest.raises(ArgumentValidationError) as info:
        check_arguments(compiled, {"sku": 5, "qty": "many", "note": None, "ship": None})
    assert info.value.errors == (
        "$: 'lines' is a required property",
        "$.qty: 'many' is not of type 'integer', 'null'",
        "$.sku: 5 is not of type 'string'",
    )


def test_check_arguments_refuses_what_strict_mode_would_never_send() -> None:
    """The strict schema requires every key, so a missing optional key is an error, not a default."""
    compiled = compiled_order()
    with pytest.raises(ArgumentValidationError, match="'qty' is a required property"):
        check_arguments(compiled, {"sku": "A", "note": None, "ship": None, "lines": None})
    loose = compile_tool(
        ToolDefinition(name="order", parameters=ORDER), "openai-chat", strict=False
    )
    assert check_arguments(loose, {"sku": "A"}) == {"sku": "A"}


def test_restore_picks_the_union_branch_the_arguments_were_made_for() -> None:
    """In an anyOf of objects, nulls are removed using the branch whose keys match."""
    schema = {
        "type": "object",
        "properties": {
            "shape": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"r": {"type": "number"}, "label": {"type": "string"}},
                        "required": ["r"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"side": {"type": "number"}, "fill": {"type": "string"}},
                        "required": ["side"],
                        "additionalProperties": False,
                    },
                ]
            }
        },
        "required": ["shape"],
        "additionalProperties": False,
    }
    compiled = compile_tool(ToolDefinition(name="draw", parameters=schema), "openai-chat")
    assert compiled.strict is True
    arguments = {"shape": {"side": 2, "fill": None}}
    assert check_arguments(compiled, arguments) == {"shape": {"side": 2}}


def test_compiled_validator_is_built_once() -> None:
    """The jsonschema validator for a compiled tool is cached on it."""
    compiled = compiled_order()
    check_arguments(compiled, {"sku": "A", "qty": 1, "note": None, "ship": None, "lines": []})
    validator = compiled._cache["validator"]
    check_arguments(compiled, {"sku": "B", "qty": 1, "note": None, "ship": None, "lines": []})
    assert compiled._cache["validator"] is validator


def test_a_decorated_tool_gets_its_python_defaults_back_after_strict_mode() -> None:
    """End to end: @tool schema -> OpenAI strict -> model nulls -> restored -> the tool's own checks."""

    @tool
    def forecast(city: str, unit: Literal["c", "f"] = "c", days: int | None = None) -> str:
        """Forecast the weather.

        Args:
            city: The city.
            unit: Temperature unit.
            days: How many days.
        """
        return f"{city} {unit} {days}"

    compiled = compile_tool(forecast, "openai-chat")
    assert compiled.strict is True
    assert compiled.schema_sent["required"] == ["city", "unit", "days"]
    restored = check_arguments(compiled, {"city": "Oslo", "unit": None, "days": None})
    assert restored == {"city": "Oslo", "days": None}
    assert forecast.validate_arguments(restored) == {"city": "Oslo", "days": None}


def test_gemini_openapi_arguments_are_checked_against_the_openapi_schema_meaning() -> None:
    """The OpenAPI form sent to Gemini is read back as JSON Schema: nullable means null is valid."""
    compiled = compiled_order("gemini-openapi")
    assert compiled.schema_sent["properties"]["note"]["nullable"] is True
    assert check_arguments(compiled, {"sku": "A", "note": None}) == {"sku": "A", "note": None}
    with pytest.raises(ArgumentValidationError, match=r"\$.ship.city"):
        check_arguments(compiled, {"sku": "A", "ship": {"city": 3}})


@pytest.mark.parametrize("ref", ["#nope", "#/$defs/Nope"])
def test_check_arguments_names_a_reference_to_nothing_in_the_schema_sent(ref: str) -> None:
    """A schema passed through as written (``json-schema``) with a ``$ref`` to nothing cannot
    check arguments: a SchemaCompileError names the tool and the reference, not jsonschema's
    bare referencing error."""
    definition = ToolDefinition(
        name="dangling", parameters={"type": "object", "properties": {"a": {"$ref": ref}}}
    )
    compiled = compile_tool(definition, "json-schema")
    with pytest.raises(SchemaCompileError, match="points to nothing") as raised:
        check_arguments(compiled, {"a": 1})
    assert raised.value.tool_name == "dangling"
    assert f"$ref {ref!r}" in str(raised.value)


def test_nulls_are_restored_through_a_reference_to_an_anchor() -> None:
    """An optional property behind ``{"$ref": "#ship"}`` (an ``$anchor``) gets its forced
    null removed as behind ``#/$defs/Ship``: the tool's own schema refuses that null."""
    ship = {**ORDER["$defs"]["Ship"], "$anchor": "ship"}  # type: ignore[index]
    schema = {
        "type": "object",
        "properties": {"ship": {"$ref": "#ship"}},
        "required": ["ship"],
        "$defs": {"Ship": ship},
    }
    compiled = compile_tool(ToolDefinition(name="order", parameters=schema), "openai-chat")
    assert compiled.strict is True
    arguments = {"ship": {"city": "Oslo", "express": None}}
    assert check_arguments(compiled, arguments) == {"ship": {"city": "Oslo"}}


@dataclasses.dataclass
class Cat:
    kind: Literal["cat"]
    lives: int = 9


@dataclasses.dataclass
class Dog:
    kind: Literal["dog"]
    good: bool = True


def pets(pet: Cat | Dog, m: dict[str, Dog] | None = None, odd: dict[str, int] | None = None) -> str:
    """Pets.

    Args:
        pet: A pet.
        m: Dogs by name.
        odd: Numbers by key.
    """
    return "x"


def pet_only(pet: Cat | Dog, more: list[Cat | Dog] | None = None) -> str:
    """Pets.

    Args:
        pet: A pet.
        more: More pets.
    """
    return "x"


@pytest.mark.parametrize(
    ("function", "strict", "arguments"),
    [
        (pets, False, {"pet": {"kind": "dog", "good": "yes"}}),
        (pets, False, {"pet": {"kind": "cow"}}),
        (pets, False, {"pet": {"kind": "dog", "extra": 1}}),
        (pets, False, {"pet": {"kind": "dog"}, "m": {"my dog": {"kind": "dog", "good": 1}}}),
        (pets, False, {"pet": {"kind": "dog"}, "odd": {"a.b": "x", "": "y", 'x"y': "w"}}),
        (pets, False, "[1]"),
    ],
)
def test_check_arguments_words_errors_as_the_tools_own_check(
    function: Any, strict: bool, arguments: Any
) -> None:
    """A union's problem is its branch's field, a key that is no name reads $["a.b"],
    a non-object names the tool: the lines the run loop gives the model."""
    made = tool(function)
    compiled = compile_tool(made, "openai-chat", strict=strict)
    with pytest.raises(ArgumentValidationError) as own:
        made.validate_arguments(arguments)
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    with pytest.raises(ArgumentValidationError) as sent:
        check_arguments(compiled, arguments)
    assert sent.value.errors == own.value.errors


def test_check_arguments_names_the_union_branchs_field_under_the_strict_schema() -> None:
    """Against a strict schema (every key required, optional ones nullable) a union's
    problem is still its branch's field, not "not valid under any of the given schemas"."""
    compiled = compile_tool(tool(pet_only), "openai-chat", strict=True)
    arguments = {"pet": {"kind": "dog", "good": "yes"}, "more": [{"kind": "cat", "lives": "9"}]}
    with pytest.raises(ArgumentValidationError) as sent:
        check_arguments(compiled, arguments)
    assert sent.value.errors == (
        "$.more[0].lives: '9' is not of type 'integer', 'null'",
        "$.pet.good: 'yes' is not of type 'boolean', 'null'",
    )


def saves(
    p: Path,
    when: dt.date | None = None,
    step: Annotated[float, Field(multiple_of=0.1)] = 0.5,
    count: int = 0,
) -> str:
    """Saves.

    Args:
        p: Where.
        when: When.
        step: A step.
        count: How many.
    """
    return "x"


@pytest.mark.parametrize(
    ("strict", "arguments"),
    [
        (False, {"p": "a\x00"}),  # (strict mode sends no "path" format: it is in the description)
        (False, {"p": "a", "when": "2024-13-01"}),
        (True, {"p": "a", "when": "2024-13-01"}),
        (False, {"p": "a", "step": 10**400}),
        (True, {"p": "a", "step": 10**400, "count": 10**400}),
    ],
)
def test_check_arguments_judges_formats_and_huge_numbers_as_the_tools_own_check(
    strict: bool, arguments: Any
) -> None:
    """A path's NUL and a bad date are refused as the run loop refuses them (formats are
    checked), and an integer too large for a float step is said at its path, not as
    "the arguments could not be checked" (an int's is no problem)."""
    made = tool(saves)
    compiled = compile_tool(made, "openai-chat", strict=strict)
    with pytest.raises(ArgumentValidationError) as own:
        made.validate_arguments(arguments)
    if strict:  # (the keys strict mode asks for, their defaults)
        arguments = {"when": None, "step": 0.5, "count": 0, **arguments}
    with pytest.raises(ArgumentValidationError) as sent:
        check_arguments(compiled, arguments)
    assert sent.value.errors == own.value.errors


def test_numbers_too_large_for_a_float_in_frozen_arguments_are_said_at_their_paths() -> None:
    """A call's arguments are frozen (`ToolCallPart.arguments`): judging each number alone
    copies them plain first. ``copy.deepcopy`` gave the frozen mapping back, and zeroing
    the others raised a bare TypeError out of the argument check (read-through, s46)."""
    from toolfold.runtime.core import _arguments
    from toolfold.toolkit._frozen import freeze

    def steps(s: list[Annotated[float, Field(multiple_of=0.1)]]) -> str:
        """Steps.

        Args:
            s: Steps.
        """
        return "x"

    validator = Draft202012Validator(compile_tool(tool(steps), "openai-chat").schema_sent)
    with pytest.raises(ArgumentValidationError) as raised:
        _arguments.validate_arguments("steps", validator, freeze({"s": [10**400, 10**400]}))
    assert [line.split(":")[0] for line in raised.value.errors] == ["$.s[0]", "$.s[1]"]


def test_many_numbers_too_large_for_a_float_step_are_said_as_a_whole() -> None:
    """Each number too large for a float is judged alone by validating the arguments again
    (1,000 of them took 5.5 s): past 16 the failure is said as a whole, once."""
    from toolfold.runtime.core import _arguments

    def steps(s: list[Annotated[float, Field(multiple_of=0.1)]]) -> str:
        """Steps.

        Args:
            s: Steps.
        """
        return "x"

    compiled = compile_tool(tool(steps), "openai-chat", strict=False)
    checked: list[object] = []

    class Counted:
        """The validator, counting its yes/no checks."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def is_valid(self, instance: object) -> bool:
            checked.append(instance)
            return bool(self.inner.is_valid(instance))

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    validator = Counted(Draft202012Validator(compiled.schema_sent))
    for count, judged in ((16, 17), (17, 1)):
        checked.clear()
        with pytest.raises(ArgumentValidationError) as raised:
            _arguments.validate_arguments("steps", validator, {"s": [10**400] * count})
        assert len(checked) == judged  # (the whole once, then each alone, or not)
        said = raised.value.errors
        if count == 16:
            assert [line.split(":")[0] for line in said] == [f"$.s[{i}]" for i in range(16)]
            assert all("the number is too large for float" in line for line in said)
        else:
            assert len(said) == 1
            assert said[0].startswith("$: the arguments could not be checked (OverflowError")
