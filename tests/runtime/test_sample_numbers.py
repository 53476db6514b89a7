"""`sample_value` for numbers: the simplest value inside every combination of bounds."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Annotated, Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold import Agent, Field, UsageError, tool
from toolfold.testing import TestModel, sample_value
from toolfold.toolkit._arguments import _compile

#: Steps whose multiples are exact in binary, where jsonschema's float ``multipleOf``
#: agrees with toolfold's decimal one; 0.1 and 0.01 are checked by toolfold's only.
_BINARY_STEPS = (1, 2, 3, 0.5, 0.25, 1.5)
_STEPS = (*_BINARY_STEPS, 0.1, 0.01, 0.2)


def _valid(schema: dict[str, Any], value: Any) -> bool:
    """Whether toolfold's argument check (and jsonschema's, where they agree) accepts ``value``."""
    ok = _compile(schema).is_valid(value)
    if schema.get("multipleOf") in (None, *_BINARY_STEPS):
        ok = ok and jsonschema.Draft202012Validator(schema).is_valid(value)
    return bool(ok)


@st.composite
def _satisfiable(draw: st.DrawFn) -> dict[str, Any]:
    """A number or integer schema with a witness inside all its bounds, so a value exists."""
    integer = draw(st.booleans())
    step = draw(st.none() | st.sampled_from(_STEPS))
    schema: dict[str, Any] = {"type": "integer" if integer else "number"}
    k = draw(st.integers(-(10**6), 10**6))
    if integer:
        unit = Fraction(repr(step) if isinstance(step, float) else step or 1).numerator
        witness: int | float = k * unit
    elif step is not None:
        witness = float(k * Fraction(repr(step) if isinstance(step, float) else step))
    else:
        witness = draw(st.floats(-1e300, 1e300))
    if step is not None:
        schema["multipleOf"] = step
    w = float(witness)
    if draw(st.booleans()):
        schema["minimum"] = draw(st.floats(max_value=w, allow_infinity=False) | st.just(w))
    if draw(st.booleans()):
        schema["maximum"] = draw(st.floats(min_value=w, allow_infinity=False) | st.just(w))
    if draw(st.booleans()):
        below = st.floats(max_value=w, exclude_max=True, allow_infinity=False)
        schema["exclusiveMinimum"] = draw(below | st.just(math.nextafter(w, -math.inf)))
    if draw(st.booleans()):
        above = st.floats(min_value=w, exclude_min=True, allow_infinity=False)
        schema["exclusiveMaximum"] = draw(above | st.just(math.nextafter(w, math.inf)))
    assert _valid(schema, witness), (schema, witness)
    return schema


@settings(max_examples=400, deadline=None)
@given(_satisfiable())
def test_a_sampled_number_satisfies_every_combination_of_bounds(schema: dict[str, Any]) -> None:
    """Whatever bounds (inclusive, exclusive, multipleOf) leave a value, the sample is one of them."""
    value = sample_value(schema)
    assert _valid(schema, value), value
    assert isinstance(value, int) if schema["type"] == "integer" else isinstance(value, float)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5}, 0.4),
        ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.001}, 0.0009),
        ({"type": "number", "minimum": 0.2, "maximum": 0.3}, 0.3),
        ({"type": "number", "minimum": -0.3, "maximum": -0.2}, -0.2),
        ({"type": "number", "exclusiveMinimum": 0.5}, 1.0),
        ({"type": "number", "exclusiveMaximum": 0}, -1.0),
        ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 2}, 1),
        ({"type": "integer", "minimum": 0.5, "maximum": 1.5}, 1),
        ({"type": "integer", "multipleOf": 5, "exclusiveMinimum": 7}, 10),
        ({"type": "number", "multipleOf": 0.25, "minimum": 0.1, "maximum": 0.3}, 0.25),
        ({"type": "number", "multipleOf": 0.1, "minimum": 0.25, "maximum": 0.35}, 0.3),
        ({"type": "number", "minimum": 1, "exclusiveMinimum": True}, 2.0),
    ],
)
def test_the_sample_is_the_simplest_number_inside_the_bounds(
    schema: dict[str, Any], expected: float
) -> None:
    """1 when allowed, else the value with the fewest decimals nearest 1 (0 < x < 0.5 gives 0.4, not 0)."""
    assert sample_value(schema) == expected
    assert type(sample_value(schema)) is type(expected)


def test_testmodel_calls_a_tool_with_exclusive_float_bounds_validly() -> None:
    """TestModel's arguments for Field(gt=0, lt=0.5) pass the tool's check (0.0 did not)."""

    @tool
    def set_ratio(ratio: Annotated[float, Field(gt=0, lt=0.5)]) -> str:
        """Set a ratio.

        Args:
            ratio: Between 0 and 0.5, exclusive.
        """
        return f"ratio {ratio}"

    response = Agent(TestModel(), tools=[set_ratio]).run("anything")
    assert response.steps[0].tool_calls[0].arguments == {"ratio": 0.4}
    assert response.steps[0].tool_results[0].content == "ratio 0.4"


@pytest.mark.parametrize(
    "items",
    [
        {"type": "number", "maximum": 1},
        {"type": "integer", "minimum": -5, "maximum": -3},
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 0.5},
    ],
)
def test_distinct_numbers_of_an_array_stay_inside_the_item_bounds(items: dict[str, Any]) -> None:
    """uniqueItems numbers are distinct values within the bounds (1, 2, 3 went past maximum 1)."""
    schema = {"type": "array", "items": items, "minItems": 3, "uniqueItems": True}
    value = sample_value(schema)
    assert len(value) == 3
    jsonschema.Draft202012Validator(schema).validate(value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        {"type": "number", "minimum": 2, "maximum": 1},
        {"type": "integer", "multipleOf": 5, "minimum": 1, "maximum": 4},
    ],
)
def test_bounds_that_leave_no_value_are_a_usage_error_naming_them(schema: dict[str, Any]) -> None:
    """Bounds no value satisfies are a UsageError naming the bounds and the path, not a bad value."""
    with pytest.raises(
        UsageError, match=r"no (integer|number) satisfies the bounds \(.*\) @ \$\.x"
    ):
        sample_value({"type": "object", "properties": {"x": schema}, "required": ["x"]})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "minimum": 1e300},
        {"type": "integer", "minimum": 1.2345678901234567e19},
        {"type": "integer", "minimum": 9e22, "maximum": 1e23},
        {"type": "integer", "exclusiveMaximum": -1e300},
    ],
)
def test_an_integer_bound_written_as_a_large_float_gives_an_integer_that_fits(
    schema: dict[str, Any],
) -> None:
    """A float bound is compared with the integer exactly (1e300 is a bit above 10**300): a value, no error."""
    value = sample_value(schema)
    assert type(value) is int
    jsonschema.Draft202012Validator(schema).validate(value)


@pytest.mark.parametrize(
    ("items", "count"),
    [
        ({"anyOf": [{"type": "integer", "minimum": 5, "maximum": 6}, {"type": "null"}]}, 3),
        ({"type": "integer", "enum": [7, 8]}, 2),
        ({"enum": [1, 1.0, True, "a"]}, 3),
        ({"oneOf": [{"const": 3}, {"type": "integer", "minimum": 10}]}, 600),
        ({"type": "integer"}, 600),
        ({"type": "number", "minimum": 0, "maximum": 0.5}, 600),
    ],
)
def test_distinct_items_satisfy_the_item_enum_const_and_union(
    items: dict[str, Any], count: int
) -> None:
    """uniqueItems arrays take distinct values the item schema accepts (its enum, const, anyOf too)."""
    schema = {"type": "array", "items": items, "minItems": count, "uniqueItems": True}
    value = sample_value(schema)
    assert len(value) == count
    jsonschema.Draft202012Validator(schema).validate(value)


@pytest.mark.parametrize(
    "items",
    [
        {"type": "integer", "minimum": 1, "maximum": 2},
        {"type": "integer", "const": 7},
        {"type": "integer", "enum": [7, 8]},
        {"anyOf": [{"type": "integer", "minimum": 5, "maximum": 6}, {"type": "null"}]},
    ],
)
def test_distinct_items_the_item_schema_cannot_give_are_a_usage_error_naming_the_path(
    items: dict[str, Any],
) -> None:
    """More distinct items than the item schema allows is a UsageError at the array's path."""
    schema = {"type": "array", "items": items, "minItems": 4, "uniqueItems": True}
    with pytest.raises(UsageError, match=r"uniqueItems needs 4 distinct items.* @ \$\.xs"):
        sample_value({"type": "object", "properties": {"xs": schema}, "required": ["xs"]})


def test_testmodel_calls_a_tool_taking_a_set_of_an_int_enum_validly() -> None:
    """A set[IntEnum] parameter with min_length 2 gets both members, and the tool runs."""
    import enum

    class Level(enum.IntEnum):
        LOW = 10
        HIGH = 20

    @tool
    def pick(levels: Annotated[set[Level], Field(min_length=2)]) -> str:
        """Pick levels.

        Args:
            levels: Two levels or more.
        """
        return f"levels {sorted(int(level) for level in levels)}"

    response = Agent(TestModel(), tools=[pick]).run("go")
    assert response.steps[0].tool_calls[0].arguments == {"levels": [10, 20]}
    assert response.steps[0].tool_results[0].content == "levels [10, 20]"


@settings(max_examples=200, deadline=None)
@given(_satisfiable(), st.integers(2, 5))
def test_a_sampled_unique_array_of_numbers_satisfies_its_schema(
    items: dict[str, Any], count: int
) -> None:
    """Distinct numbers for any satisfiable item bounds: a valid array, or a UsageError saying why."""
    schema = {"type": "array", "items": items, "minItems": count, "uniqueItems": True}
    try:
        value = sample_value(schema)
    except UsageError as exc:
        problem = str(exc)
    else:
        assert len(value) == count
        assert _compile(schema).is_valid(value), (schema, value)
        return
    assert "uniqueItems needs" in problem


@pytest.mark.parametrize(
    ("items", "count"),
    [
        ({"allOf": [{"enum": [1, 2, 3]}, {"enum": [2, 3, 4]}]}, 2),
        ({"allOf": [{"type": "integer"}, {"minimum": 5}]}, 3),
        ({"minimum": 5}, 3),
        ({"maximum": -2, "exclusiveMinimum": -4}, 2),
        ({"type": "boolean"}, 2),
        ({"type": "string", "maxLength": 1}, 30),
        ({"type": "string", "maxLength": 5}, 3),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}, 3),
    ],
)
def test_a_sampled_unique_array_is_valid_for_allof_untyped_bounds_and_other_kinds(
    items: dict[str, Any], count: int
) -> None:
    """Distinct items for allOf, untyped bounds, booleans, short strings: each item fits (allOf gave [2, 2])."""
    schema = {"type": "array", "items": items, "minItems": count, "uniqueItems": True}
    value = sample_value(schema)
    assert len(value) == count
    jsonschema.Draft202012Validator(schema).validate(value)


@pytest.mark.parametrize(
    ("items", "count"),
    [
        ({"type": "boolean"}, 3),
        ({"type": "null"}, 2),
        ({"type": "object", "additionalProperties": False}, 2),
        ({"type": "string", "maxLength": 0}, 2),
        ({"allOf": [{"enum": [1, 2, 3]}, {"enum": [3, 4]}]}, 2),
    ],
)
def test_distinct_items_an_item_schema_cannot_give_are_refused_not_repeated(
    items: dict[str, Any], count: int
) -> None:
    """Too few distinct values for minItems is a UsageError naming the path, not repeated items."""
    schema = {"type": "array", "items": items, "minItems": count, "uniqueItems": True}
    with pytest.raises(UsageError, match=r"uniqueItems needs .* @ \$\.xs"):
        sample_value({"type": "object", "properties": {"xs": schema}, "required": ["xs"]})


def test_equal_prefix_items_of_a_unique_array_are_refused() -> None:
    """prefixItems whose samples are equal in a uniqueItems array is a UsageError naming the path."""
    schema = {"type": "array", "uniqueItems": True, "prefixItems": [{"const": 1}, {"const": 1}]}
    with pytest.raises(UsageError, match=r"uniqueItems needs distinct items.* @ \$\.xs"):
        sample_value({"type": "object", "properties": {"xs": schema}, "required": ["xs"]})
