"""`Field`: the marker that puts a description and constraints on a type.

``Annotated[int, Field(ge=0, description="How many")]`` gives
``{"type": "integer", "minimum": 0, "description": "How many"}``. A plain string
inside ``Annotated`` is a description too: ``Annotated[str, "The city"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

# keyword -> (JSON Schema keyword, the schema "type"s it applies to)
_NUMBER = frozenset({"integer", "number"})
_STRING = frozenset({"string"})
_ARRAY = frozenset({"array"})
CONSTRAINTS: dict[str, tuple[str, frozenset[str]]] = {
    "ge": ("minimum", _NUMBER),
    "gt": ("exclusiveMinimum", _NUMBER),
    "le": ("maximum", _NUMBER),
    "lt": ("exclusiveMaximum", _NUMBER),
    "multiple_of": ("multipleOf", _NUMBER),
    "min_length": ("minLength", _STRING),
    "max_length": ("maxLength", _STRING),
    "pattern": ("pattern", _STRING),
    "min_items": ("minItems", _ARRAY),
    "max_items": ("maxItems", _ARRAY),
}
_KIND = {_NUMBER: "numbers", _STRING: "strings", _ARRAY: "arrays"}


@attrs.frozen
class Field:
    """Description and constraints for a type, used inside ``Annotated``.

    Example::

        def search(
            query: Annotated[str, Field(min_length=1, description="Text to find")],
            limit: Annotated[int, Field(ge=1, le=50)] = 10,
        ) -> list[str]: ...

    Args:
        description: The property's description (wins over the docstring's).
        ge: Minimum, inclusive (numbers).
        gt: Minimum, exclusive (numbers).
        le: Maximum, inclusive (numbers).
        lt: Maximum, exclusive (numbers).
        multiple_of: The value must be a multiple of this (numbers).
        min_length: Minimum length (strings).
        max_length: Maximum length (strings).
        pattern: A regular expression the value must match (strings).
        min_items: Minimum number of items (arrays, sets, tuples).
        max_items: Maximum number of items (arrays, sets, tuples).
        examples: Example values, shown to the model.
        extra: More JSON Schema keywords, merged as they are.
    """

    description: str | None = None
    ge: float | None = attrs.field(default=None, kw_only=True)
    gt: float | None = attrs.field(default=None, kw_only=True)
    le: float | None = attrs.field(default=None, kw_only=True)
    lt: float | None = attrs.field(default=None, kw_only=True)
    multiple_of: float | None = attrs.field(default=None, kw_only=True)
    min_length: int | None = attrs.field(default=None, kw_only=True)
    max_length: int | None = attrs.field(default=None, kw_only=True)
    pattern: str | None = attrs.field(default=None, kw_only=True)
    min_items: int | None = attrs.field(default=None, kw_only=True)
    max_items: int | None = attrs.field(default=None, kw_only=True)
    examples: tuple[Any, ...] | None = attrs.field(
        default=None, kw_only=True, converter=attrs.converters.optional(tuple)
    )
    extra: Mapping[str, Any] | None = attrs.field(default=None, kw_only=True, hash=False)


def _schema_types(schema: Mapping[str, Any]) -> frozenset[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset((kind,))
    if isinstance(kind, list):
        return frozenset(kind)
    return frozenset()


def apply_field(schema: dict[str, Any], field: Field, problems: list[str]) -> dict[str, Any]:
    """Put a Field's constraints on ``schema`` (in place) and return it.

    Constraints go on the schema itself or, for a union, on each branch they fit
    (``Optional[int]`` with ``ge=0`` constrains the integer branch). A constraint
    that fits nowhere is a problem, appended to ``problems``.
    """
    for key, (keyword, kinds) in CONSTRAINTS.items():
        value = getattr(field, key)
        if value is None:
            continue
        if keyword == "pattern":
            _check_pattern(value, problems)
        if _schema_types(schema) & kinds:
            schema[keyword] = value
            continue
        branches = [b for b in schema.get("anyOf", ()) if _schema_types(b) & kinds]
        if not branches:
            problems.append(f"constraint {key}={value!r} applies to {_KIND[kinds]} only")
        for branch in branches:
            branch[keyword] = value
    if field.examples is not None:
        schema["examples"] = list(field.examples)
    if field.extra:
        schema.update(field.extra)
    if field.description is not None:
        schema["description"] = field.description
    return schema


def _check_pattern(pattern: str, problems: list[str]) -> None:
    import re

    try:
        re.compile(pattern)
    except re.error as exc:
        problems.append(f"pattern {pattern!r} is not a valid regular expression ({exc})")
