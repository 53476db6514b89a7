"""Edge inputs of tool definitions and argument checks: huge numbers, deep values, set or list, partials."""

from __future__ import annotations

import dataclasses
import functools
from typing import Annotated

import pytest

from toolfold import ArgumentValidationError, Field, Tool, ToolDefinitionError, tool


def _g(x: int) -> str:
    """G.

    Args:
        x: A number.
    """
    return str(x)


def test_a_timeout_too_large_for_a_float_is_a_definition_error() -> None:
    """``timeout=10**400`` is a ToolDefinitionError saying it is too large, not a bare OverflowError."""
    with pytest.raises(ToolDefinitionError) as raised:
        tool(timeout=10**400)(_g)
    assert raised.value.problems == (
        "timeout must be a positive number of seconds or None, not an int of about 401 digits"
        " (too large for a float)",
    )


def _huge(v: Annotated[int, Field(ge=10**400)]) -> str:
    """Huge.

    Args:
        v: A huge number.
    """
    return "ok"


def test_a_bound_too_large_for_a_float_is_kept_exactly() -> None:
    """``Field(ge=10**400)`` makes a tool (an int bound is exact, not a float) that checks it."""
    made = tool(_huge)
    assert made.parameters["properties"]["v"]["minimum"] == 10**400
    assert made.validate_arguments({"v": 10**401}) == {"v": 10**401}
    with pytest.raises(ArgumentValidationError, match="5 is less than the minimum"):
        made.validate_arguments({"v": 5})


def _endless(v: Annotated[int, Field(ge=10**5000)]) -> str:
    """Endless.

    Args:
        v: A number.
    """
    return "ok"


def test_an_integer_json_text_cannot_carry_is_a_definition_error() -> None:
    """A bound or a schema number of more digits than ``json.dumps`` writes is a
    ToolDefinitionError saying so, not a bare ValueError (nor a schema no request can send)."""
    with pytest.raises(ToolDefinitionError) as raised:
        tool(_endless)
    assert raised.value.problems == (
        "parameter 'v': Field ge=an integer of about 5001 digits is more than JSON text can carry",
    )
    schema = {"type": "object", "properties": {"v": {"type": "integer", "minimum": 10**5000}}}
    with pytest.raises(ToolDefinitionError) as raised:
        Tool("t", "d", schema)
    assert raised.value.problems == (
        "parameters is not JSON at /properties/v/minimum: an integer of about 5001 digits"
        " is more than JSON text can carry",
    )


@dataclasses.dataclass
class Chain:
    v: int
    nxt: Chain | None = None


@tool
def walk(n: Chain) -> str:
    """Walk.

    Args:
        n: A chain.
    """
    return "ok"


def test_arguments_too_deep_to_check_are_an_argument_error() -> None:
    """``validate_arguments`` of a value nested deeper than checking recurses raises the
    argument error a run gives for deep arguments, not a bare RecursionError."""
    deep: dict[str, object] = {"v": 0}
    for _ in range(400):
        deep = {"v": 1, "nxt": deep}
    with pytest.raises(ArgumentValidationError) as raised:
        walk.validate_arguments({"n": deep})
    assert raised.value.errors == ("$: the arguments are nested more than 64 levels deep",)


@tool
def gather(v: set[int] | list[int]) -> str:
    """Gather.

    Args:
        v: Numbers.
    """
    return "ok"


def test_a_set_or_list_keeps_repeated_items_as_the_list() -> None:
    """``[1, 1]`` validates only as ``list[int]`` (a set's schema has uniqueItems): it is
    structured as that list, not deduplicated into a set; distinct items still make a set."""
    assert gather.validate_arguments({"v": [1, 1]}) == {"v": [1, 1]}
    assert gather.validate_arguments({"v": [1, 1.0]}) == {"v": [1, 1]}
    assert gather.validate_arguments({"v": [1, 2]}) == {"v": {1, 2}}


@tool
def base(a: int, b: int = 2) -> int:
    """Base.

    Args:
        a: The first.
        b: The second.
    """
    return a * 10 + b


def test_a_partial_of_a_tool_is_the_partial_of_its_function() -> None:
    """``tool(name=...)(functools.partial(base_tool, b=1))`` makes the tool of the partial of
    the tool's function, instead of a false "binds arguments base does not take"."""
    made = tool(name="based")(functools.partial(base, b=1))
    assert list(made.parameters["properties"]) == ["a", "b"]
    assert made.invoke(made.validate_arguments({"a": 3})) == 31
