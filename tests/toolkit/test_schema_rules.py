"""Every type rule gives exactly the expected JSON Schema."""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import decimal
import enum
import pathlib
import typing
import uuid
from collections.abc import Mapping, MutableSequence, Sequence
from typing import Annotated, Any, Literal, NamedTuple, NewType, Optional, Union

import attrs
import pytest
import typing_extensions

from toolfold import (
    ArgumentValidationError,
    Field,
    SchemaContext,
    ToolDefinitionError,
    register_schema_rule,
    tool,
)
from toolfold import schema_for_type as schema
from toolfold.toolkit import _schema


class Color(enum.Enum):
    """A paint colour."""

    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Size(str, enum.Enum):  # a StrEnum that also runs on Python 3.10
    S = "s"
    M = "m"


@dataclasses.dataclass
class Point:
    """A point on the map.

    Attributes:
        x: Metres east.
        y: Metres north.
    """

    x: float
    y: float = 0.0


@attrs.define
class Box:
    """A box."""

    label: str = attrs.field(metadata={"description": "What is written on it."})
    count: int = 1
    extras: list[int] = attrs.field(factory=list)


class Pair(NamedTuple):
    """Two names.

    Attributes:
        first: The first name.
    """

    first: str
    second: str = "b"


class Movie(typing_extensions.TypedDict):
    """A film."""

    title: str
    year: typing_extensions.NotRequired[int]


class Partial(typing_extensions.TypedDict, total=False):
    name: typing_extensions.Required[str]
    rating: float


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Ping:
    pong: Pong | None = None


@dataclasses.dataclass
class Pong:
    ping: Ping


@dataclasses.dataclass
class Broken:
    value: Missing  # type: ignore[name-defined]  # noqa: F821


UserId = NewType("UserId", int)

OBJECT_POINT = {
    "type": "object",
    "description": "A point on the map.",
    "properties": {
        "x": {"type": "number", "description": "Metres east."},
        "y": {"type": "number", "description": "Metres north.", "default": 0.0},
    },
    "required": ["x"],
    "additionalProperties": False,
}

_T = typing.TypeVar("_T")


@dataclasses.dataclass
class GenericBox(typing.Generic[_T]):
    item: _T
    items: list[_T]


CASES: list[tuple[Any, dict[str, Any]]] = [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (None, {"type": "null"}),
    (type(None), {"type": "null"}),
    (Any, {}),
    (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
    (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
    (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),  # noqa: UP007
    (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
    (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
    (Literal[True], {"type": "boolean", "enum": [True]}),
    (Literal[1, "a", None], {"enum": [1, "a", None]}),
    (Literal[Color.RED], {"type": "string", "enum": ["red"]}),
    (Color, {"type": "string", "enum": ["red", "blue"], "description": "A paint colour."}),
    (Level, {"type": "integer", "enum": [1, 2]}),
    (Size, {"type": "string", "enum": ["s", "m"]}),
    (list[int], {"type": "array", "items": {"type": "integer"}}),
    (list, {"type": "array"}),
    (list[Any], {"type": "array"}),
    (typing.List[str], {"type": "array", "items": {"type": "string"}}),  # noqa: UP006
    (Sequence[str], {"type": "array", "items": {"type": "string"}}),
    (MutableSequence[int], {"type": "array", "items": {"type": "integer"}}),
    (
        tuple[int, str],
        {
            "type": "array",
            "minItems": 2,
            "maxItems": 2,
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
        },
    ),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (tuple[()], {"type": "array", "minItems": 0, "maxItems": 0}),
    (typing.Tuple[()], {"type": "array", "minItems": 0, "maxItems": 0}),  # noqa: UP006
    (tuple, {"type": "array"}),
    (typing.Tuple, {"type": "array"}),  # noqa: UP006
    (Sequence, {"type": "array"}),
    (MutableSequence, {"type": "array"}),
    (Mapping, {"type": "object"}),
    (collections.abc.MutableMapping, {"type": "object"}),
    (collections.abc.Set, {"type": "array", "uniqueItems": True}),
    (collections.abc.MutableSet, {"type": "array", "uniqueItems": True}),
    (
        GenericBox[int],
        {
            "type": "object",
            "properties": {
                "item": {"type": "integer"},
                "items": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["item", "items"],
            "additionalProperties": False,
        },
    ),
    (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    (frozenset[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
    (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
    (Mapping[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
    (dict, {"type": "object"}),
    (dict[str, Any], {"type": "object"}),
    (
        dict[Literal["a", "b"], int],
        {
            "type": "object",
            "propertyNames": {"type": "string", "enum": ["a", "b"]},
            "additionalProperties": {"type": "integer"},
        },
    ),
    (datetime.datetime, {"type": "string", "format": "date-time"}),
    (datetime.date, {"type": "string", "format": "date"}),
    (datetime.time, {"type": "string", "format": "time"}),
    (uuid.UUID, {"type": "string", "format": "uuid"}),
    (decimal.Decimal, {"type": "string", "format": "decimal"}),
    (pathlib.Path, {"type": "string", "format": "path"}),
    (UserId, {"type": "integer"}),
    (Point, OBJECT_POINT),
    (list[Point], {"type": "array", "items": OBJECT_POINT}),
    (
        Box,
        {
            "type": "object",
            "description": "A box.",
            "properties": {
                "label": {"type": "string", "description": "What is written on it."},
                "count": {"type": "integer", "default": 1},
                "extras": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["label"],
            "additionalProperties": False,
        },
    ),
    (
        Pair,
        {
            "type": "object",
            "description": "Two names.",
            "properties": {
                "first": {"type": "string", "description": "The first name."},
                "second": {"type": "string", "default": "b"},
            },
            "required": ["first"],
            "additionalProperties": False,
        },
    ),
    (
        Movie,
        {
            "type": "object",
            "description": "A film.",
            "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
            "required": ["title"],
            "additionalProperties": False,
        },
    ),
    (
        Partial,
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "rating": {"type": "number"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    ),
    (
        Node,
        {
            "$ref": "#/$defs/Node",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "integer"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                    "required": ["value"],
                    "additionalProperties": False,
                }
            },
        },
    ),
    (Annotated[str, "The city"], {"type": "string", "description": "The city"}),
    (
        Annotated[int, Field(ge=0, lt=10, multiple_of=2, description="Even digit")],
        {
            "type": "integer",
            "minimum": 0,
            "exclusiveMaximum": 10,
            "multipleOf": 2,
            "description": "Even digit",
        },
    ),
    (
        Annotated[float, Field(gt=0, le=1)],
        {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    ),
    (
        Annotated[str, Field(min_length=1, max_length=5, pattern="^[a-z]+$")],
        {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
    ),
    (
        Annotated[list[int], Field(min_items=1, max_items=3)],
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
    ),
    (
        Annotated[int | None, Field(ge=1)],
        {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
    ),
    (
        Annotated[str, Field(examples=["Paris"], extra={"x-unit": "city"})],
        {"type": "string", "examples": ["Paris"], "x-unit": "city"},
    ),
    (
        Annotated[set[str], Field(min_length=2, max_length=4)],
        {
            "type": "array",
            "items": {"type": "string"},
            "uniqueItems": True,
            "minItems": 2,
            "maxItems": 4,
        },
    ),
    (
        list[Annotated[int, Field(ge=0)]],
        {"type": "array", "items": {"type": "integer", "minimum": 0}},
    ),
    (
        Annotated[list[int] | None, Field(min_length=1, max_length=3)],
        {
            "anyOf": [
                {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
                {"type": "null"},
            ]
        },
    ),
    (
        Annotated[str | list[str], Field(min_length=1)],
        {
            "anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "items": {"type": "string"}},
            ]
        },
    ),
]


@pytest.mark.parametrize(("tp", "expected"), CASES, ids=[repr(c[0]) for c in CASES])
def test_type_rule(tp: Any, expected: dict[str, Any]) -> None:
    """Each supported type gives its exact schema, the same on a second (cached) call."""
    assert schema(tp) == expected
    assert schema(tp) == expected


def test_schemas_are_fresh_copies() -> None:
    """Mutating a returned schema does not leak into later derivations (the cache is private)."""
    first = schema(Point)
    first["properties"]["x"]["type"] = "string"
    assert schema(Point) == OBJECT_POINT


def test_mutual_recursion_uses_defs() -> None:
    """Two types that refer to each other: the outer one lands in $defs, the inner inline."""
    result = schema(Ping)
    assert result == {
        "$ref": "#/$defs/Ping",
        "$defs": {
            "Ping": {
                "type": "object",
                "properties": {
                    "pong": {
                        "anyOf": [
                            {
                                "type": "object",
                                "properties": {"ping": {"$ref": "#/$defs/Ping"}},
                                "required": ["ping"],
                                "additionalProperties": False,
                            },
                            {"type": "null"},
                        ],
                        "default": None,
                    }
                },
                "additionalProperties": False,
            }
        },
    }


def test_unresolvable_annotation_is_a_definition_error() -> None:
    """A class whose annotation names something missing is reported, not crashed on."""
    with pytest.raises(ToolDefinitionError) as info:
        schema(Broken)
    assert info.value.problems == (
        "cannot resolve the annotations of Broken (name 'Missing' is not defined);"
        " import the names they use at module level, or define them before the tool"
        " in the same function",
    )


def test_type_without_rule_is_a_definition_error() -> None:
    """A type no rule covers is reported with its path inside the type."""
    with pytest.raises(ToolDefinitionError) as info:
        schema(dict[str, list[bytes]])
    assert info.value.problems == (
        "at {}[]: type bytes has no JSON Schema rule; use a supported type or register"
        " a rule with toolfold.register_schema_rule()",
    )


def test_misplaced_constraint_is_a_definition_error() -> None:
    """A constraint on a type it cannot apply to names the constraint and the type."""
    with pytest.raises(ToolDefinitionError) as info:
        schema(Annotated[str, Field(ge=1)])
    assert info.value.problems == ("constraint ge=1 applies to numbers only, not to str",)


def test_annotated_types_markers_are_understood() -> None:
    """Markers from annotated-types (Ge, MaxLen, ...) read like Field constraints."""

    class Ge:
        def __init__(self, ge: int) -> None:
            self.ge = ge

    class MaxLen:
        def __init__(self, max_length: int) -> None:
            self.max_length = max_length

    Ge.__module__ = MaxLen.__module__ = "annotated_types"
    assert schema(Annotated[int, Ge(3)]) == {"type": "integer", "minimum": 3}
    assert schema(Annotated[list[int], MaxLen(2)]) == {
        "type": "array",
        "items": {"type": "integer"},
        "maxItems": 2,
    }


def test_invalid_pattern_is_a_definition_error() -> None:
    """A pattern that is not a regular expression is caught at definition time."""
    with pytest.raises(ToolDefinitionError) as info:
        schema(Annotated[str, Field(pattern="[a-")])
    assert info.value.problems == (
        "pattern '[a-' is not a valid regular expression"
        " (unterminated character set at position 0)",
    )


def test_non_str_dict_keys_are_a_definition_error() -> None:
    """JSON object keys are strings, so dict[int, X] is refused with the reason."""
    with pytest.raises(ToolDefinitionError) as info:
        schema(dict[int, str])
    assert info.value.problems == ("dict keys must be str (JSON object keys are strings), not int",)


def test_register_rule_for_a_class_and_a_predicate() -> None:
    """User rules describe their own types, cover subclasses, and override built-ins."""

    class Money:
        pass

    class Euros(Money):
        pass

    def money(tp: Any, ctx: SchemaContext) -> dict[str, Any]:
        return {"type": "string", "pattern": r"^\d+\.\d\d$"}

    def is_bytes(tp: Any) -> bool:
        return tp is bytes

    try:
        register_schema_rule(Money, money)

        @register_schema_rule(is_bytes)
        def _bytes(tp: Any, ctx: SchemaContext) -> dict[str, Any]:
            return {"type": "string", "contentEncoding": "base64"}

        @register_schema_rule(datetime.date)
        def _date(tp: Any, ctx: SchemaContext) -> dict[str, Any]:
            return {"type": "string", "pattern": "^[0-9-]+$"}

        assert schema(list[Euros]) == {
            "type": "array",
            "items": {"type": "string", "pattern": r"^\d+\.\d\d$"},
        }
        assert schema(bytes) == {"type": "string", "contentEncoding": "base64"}
        assert schema(datetime.date) == {"type": "string", "pattern": "^[0-9-]+$"}

        @register_schema_rule(int)
        def _int(tp: Any, ctx: SchemaContext) -> dict[str, Any]:
            return {"type": "integer", "format": "int64"}

        assert schema(int) == {"type": "integer", "format": "int64"}
        assert schema(bool) == {"type": "boolean"}
    finally:
        _schema._class_rules.clear()
        _schema._predicate_rules.clear()
        _schema._cache.clear()
    assert schema(datetime.date) == {"type": "string", "format": "date"}


def test_rule_can_derive_inner_types_through_the_context() -> None:
    """A rule for a generic container reuses ctx.schema_for for its items."""

    class Bag(typing.Generic[typing.TypeVar("T")]):
        pass

    def is_bag(tp: Any) -> bool:
        return typing.get_origin(tp) is Bag

    def bag(tp: Any, ctx: SchemaContext) -> dict[str, Any]:
        return {"type": "array", "items": ctx.schema_for(typing.get_args(tp)[0], "[]")}

    try:
        register_schema_rule(is_bag, bag)
        assert schema(Bag[Point]) == {"type": "array", "items": OBJECT_POINT}
        with pytest.raises(ToolDefinitionError) as info:
            schema(Bag[bytes])
        assert info.value.problems[0].startswith("at []: type bytes has no JSON Schema rule")
    finally:
        _schema._predicate_rules.clear()
        _schema._cache.clear()


def test_field_values_no_schema_allows_are_definition_errors_naming_tool_and_parameter() -> None:
    """Field values the meta-schema refuses, NaN, bounds that admit nothing, a non-string
    pattern and examples with no JSON form are refused when the tool is made, not in a run."""

    def scale(
        step: Annotated[int, Field(multiple_of=0)],
        low: Annotated[int, Field(ge="0")],  # type: ignore[arg-type]
        zero: Annotated[int, Field(extra={"minimum": "zero"})],
        code: Annotated[str, Field(min_length="3")],  # type: ignore[arg-type]
        odd: Annotated[float, Field(ge=float("nan"))],
        size: Annotated[str, Field(min_length=-1, max_length=2.5)],  # type: ignore[arg-type]
        empty: Annotated[int, Field(ge=5, le=1)],
        none: Annotated[float, Field(gt=1, lt=1)],
        short: Annotated[list[int], Field(min_items=3, max_items=2)],
        mixed: Annotated[int, Field(ge=5, extra={"maximum": 1})],
        form: Annotated[str, Field(pattern=5)],  # type: ignore[arg-type]
        blob: Annotated[str, Field(examples=[object])],
    ) -> None:
        """Scale."""

    with pytest.raises(ToolDefinitionError) as info:
        tool(scale)
    assert "scale" in str(info.value)
    assert info.value.problems == (
        "parameter 'step': Field multiple_of=0 is not a valid multipleOf:"
        " 0 is less than or equal to the minimum of 0",
        "parameter 'low': Field ge='0' is not a valid minimum: '0' is not of type 'number'",
        "parameter 'zero': Field extra['minimum']='zero' is not a valid minimum:"
        " 'zero' is not of type 'number'",
        "parameter 'code': Field min_length='3' is not a valid minLength:"
        " '3' is not of type 'integer'",
        "parameter 'odd': Field ge=nan is not a finite number",
        "parameter 'size': Field max_length=2.5 is not a valid maxLength:"
        " 2.5 is not of type 'integer'",
        "parameter 'size': Field min_length=-1 is not a valid minLength:"
        " -1 is less than the minimum of 0",
        "parameter 'empty': Field(ge=5, le=1) admits no value",
        "parameter 'none': Field(gt=1, lt=1) admits no value",
        "parameter 'short': Field(min_items=3, max_items=2) admits no value",
        "parameter 'mixed': Field(ge=5, extra={'maximum': 1}) admits no value",
        "parameter 'form': Field pattern=5 is not a valid pattern: 5 is not of type 'string'",
        "parameter 'blob': Field example <class 'object'> is not JSON-representable; use JSON"
        " values (str, int, float, bool, None, list, dict), enums, dates, UUIDs or decimals",
    )


class Perm(enum.IntFlag):
    """Permissions."""

    READ = 1
    WRITE = 2


def test_bounds_that_admit_nothing_together_are_definition_errors_naming_their_items() -> None:
    """Bounds fine one by one but admitting no value together (annotated_types markers,
    several Fields, a mix, a type's own range, no integer or multiple between them) are
    refused when the tool is made, naming the parameter, the items that clash (a Field
    setting several once) and, in a union, the branch that admits nothing."""
    import annotated_types as at

    def clash(
        interval: Annotated[int, at.Interval(ge=5, le=1)],
        pair: Annotated[int, at.Ge(5), at.Le(1)],
        open_: Annotated[float, at.Gt(5), at.Lt(5)],
        length: Annotated[str, at.Len(5, 1)],
        lengths: Annotated[str, at.MinLen(5), at.MaxLen(1)],
        mixed: Annotated[int, Field(ge=5), at.Le(1)],
        fields: Annotated[int, Field(ge=5), Field(le=1)],
        whole: Annotated[int, Field(gt=4, lt=5)],
        tens: Annotated[int, Field(ge=1, le=9), at.MultipleOf(10)],
        items: Annotated[list[int] | None, Field(min_length=3), at.MaxLen(2)],
        either: Annotated[int | str, at.Ge(5), at.Le(1)],
        perm: Annotated[Perm, Field(ge=4)],
        fine: Annotated[float, Field(gt=4, lt=5), at.MultipleOf(0.25)],
        point: Annotated[int, at.Ge(3), at.Le(3)],
    ) -> None:
        """Clash."""

    with pytest.raises(ToolDefinitionError) as info:
        tool(clash)
    assert "clash" in str(info.value)
    assert info.value.problems == (
        "parameter 'interval': annotated_types.Interval(gt=None, ge=5, lt=None, le=1)"
        " admits no value",
        "parameter 'pair': annotated_types.Ge(ge=5) and annotated_types.Le(le=1) admit no value",
        "parameter 'open_': annotated_types.Gt(gt=5) and annotated_types.Lt(lt=5) admit no value",
        "parameter 'length': annotated_types.Len(min_length=5, max_length=1) admits no value",
        "parameter 'lengths': annotated_types.MinLen(min_length=5) and"
        " annotated_types.MaxLen(max_length=1) admit no value",
        "parameter 'mixed': Field(ge=5) and annotated_types.Le(le=1) admit no value",
        "parameter 'fields': Field(ge=5) and Field(le=1) admit no value",
        "parameter 'whole': Field(gt=4, lt=5) admits no integer",
        "parameter 'tens': Field(ge=1, le=9) and"
        " annotated_types.MultipleOf(multiple_of=10) admit no integer",
        "parameter 'items': Field(min_length=3) and annotated_types.MaxLen(max_length=2)"
        " admit no array (the list[int] of list[int] | None)",
        "parameter 'either': annotated_types.Ge(ge=5) and annotated_types.Le(le=1)"
        " admit no integer (the int of int | str)",
        "parameter 'perm': Field(ge=4) and Perm's own maximum=3 admit no value",
    )


class _QualifiedBounds(typing_extensions.TypedDict):
    """Clashing bounds on a union under a TypedDict key's qualifier, inside Annotated."""

    a: Annotated[typing_extensions.NotRequired[int | None], Field(ge=5, le=1)]
    c: Annotated[typing_extensions.ReadOnly[int | str], Field(min_length=5, max_length=1)]


def test_bounds_under_a_typeddict_qualifier_name_the_branch_not_the_qualifier() -> None:
    """A union under NotRequired/ReadOnly inside Annotated is named as without them."""

    def keyed(x: _QualifiedBounds) -> None:
        """Keyed."""

    with pytest.raises(ToolDefinitionError) as info:
        tool(keyed)
    assert info.value.problems == (
        "parameter 'x' at x.a: Field(ge=5, le=1) admits no integer (the int of int | None)",
        "parameter 'x' at x.c: Field(min_length=5, max_length=1) admits no string"
        " (the str of int | str)",
    )


def test_field_examples_become_json_as_defaults_do() -> None:
    """An Enum member or a date among the examples is shown by its JSON form, so every
    dialect can send the schema."""
    import json

    from toolfold import compile_tool

    @tool
    def book(
        color: Annotated[Color, Field(examples=[Color.RED])],
        day: Annotated[datetime.date, Field(examples=[datetime.date(2024, 1, 1)])],
    ) -> str:
        """Book."""
        return f"{color} {day}"

    properties = book.parameters["properties"]
    assert properties["color"]["examples"] == ["red"]
    assert properties["day"]["examples"] == ["2024-01-01"]
    for dialect in ("openai-chat", "anthropic", "json-schema"):
        json.dumps(compile_tool(book, dialect).payload)


def test_field_is_a_value() -> None:
    """Field compares, hashes and prints by its settings (types using it can be cached)."""
    assert Field(ge=1, description="n") == Field("n", ge=1)
    assert hash(Field(ge=1)) == hash(Field(ge=1))
    assert Field(ge=1) != Field(ge=2)
    assert repr(Field("n", ge=1, examples=[1])) == "Field(description='n', ge=1, examples=(1,))"
    assert schema(Annotated[int, Field(examples=[[1]])]) == {"type": "integer", "examples": [[1]]}


def test_equal_literals_keep_their_own_order() -> None:
    """Literal["a", "b"] == Literal["b", "a"] in typing, but each keeps its order in the schema."""
    assert schema(Literal["a", "b"])["enum"] == ["a", "b"]
    assert schema(Literal["b", "a"])["enum"] == ["b", "a"]
    assert schema(list[Literal["b", "a"]])["items"]["enum"] == ["b", "a"]


def test_generic_dataclass_structures_with_its_arguments() -> None:
    """A parametrised generic dataclass parameter validates and structures by its arguments."""
    from toolfold import tool

    @tool
    def put(box: GenericBox[int]) -> None:
        """Put.

        Args:
            box: The box.
        """

    assert put.validate_arguments({"box": {"item": 1, "items": [2]}}) == {"box": GenericBox(1, [2])}
    with pytest.raises(ArgumentValidationError):
        put.validate_arguments({"box": {"item": "x", "items": []}})


def test_schema_for_type_error_names_the_type() -> None:
    """schema_for_type errors say there is no schema for the type, not 'cannot make a tool'."""
    with pytest.raises(ToolDefinitionError) as info:
        schema(dict[int, str])
    assert str(info.value).startswith("no JSON Schema for dict[int, str]: 1 problem")


def test_field_values_of_float_and_int_subclasses_are_their_plain_values() -> None:
    """A bound, example or extra value of a float subclass (numpy.float64 is one) is sent as
    the plain number, not refused."""

    class Measured(float):
        pass

    class Counted(int):
        pass

    @tool
    def fit(
        x: Annotated[
            float,
            Field(ge=Measured(0.25), examples=[Measured(1.5)], extra={"maximum": Measured(9.5)}),
        ],
        n: Annotated[int, Field(le=Counted(7))],
    ) -> float:
        """Fit.

        Args:
            x: X.
            n: N.
        """
        return x

    properties = fit.parameters["properties"]
    assert properties["x"]["minimum"] == 0.25
    assert type(properties["x"]["minimum"]) is float
    assert properties["x"]["examples"] == [1.5]
    assert properties["x"]["maximum"] == 9.5
    assert properties["n"]["maximum"] == 7
    assert type(properties["n"]["maximum"]) is int
