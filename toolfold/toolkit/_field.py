"""`Field`: the marker that puts a description and constraints on a type.

``Annotated[int, Field(ge=0, description="How many")]`` gives
``{"type": "integer", "minimum": 0, "description": "How many"}``. A plain string
inside ``Annotated`` is a description too: ``Annotated[str, "The city"]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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


_NAMES = (
    "description",
    "ge",
    "gt",
    "le",
    "lt",
    "multiple_of",
    "min_length",
    "max_length",
    "pattern",
    "min_items",
    "max_items",
    "examples",
    "extra",
)


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
        min_length: Minimum length (strings; on arrays, the same as min_items).
        max_length: Maximum length (strings; on arrays, the same as max_items).
        pattern: A regular expression the value must match (strings).
        min_items: Minimum number of items (arrays, sets, tuples).
        max_items: Maximum number of items (arrays, sets, tuples).
        examples: Example values, shown to the model.
        extra: More JSON Schema keywords, merged as they are.
    """

    # A plain class, not attrs: attrs would generate its methods at import time,
    # several milliseconds of `import toolfold` for a class most programs build twice.
    __slots__ = _NAMES

    def __init__(
        self,
        description: str | None = None,
        *,
        ge: float | None = None,
        gt: float | None = None,
        le: float | None = None,
        lt: float | None = None,
        multiple_of: float | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        pattern: str | None = None,
        min_items: int | None = None,
        max_items: int | None = None,
        examples: Iterable[Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.description = description
        self.ge = ge
        self.gt = gt
        self.le = le
        self.lt = lt
        self.multiple_of = multiple_of
        self.min_length = min_length
        self.max_length = max_length
        self.pattern = pattern
        self.min_items = min_items
        self.max_items = max_items
        self.examples = None if examples is None else tuple(examples)
        self.extra = None if extra is None else dict(extra)

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in _NAMES[:-1])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Field):
            return NotImplemented
        return self._key() == other._key() and self.extra == other.extra

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        set_ = ", ".join(
            f"{n}={getattr(self, n)!r}" for n in _NAMES if getattr(self, n) is not None
        )
        return f"Field({set_})"


def _schema_types(schema: Mapping[str, Any]) -> frozenset[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset((kind,))
    if isinstance(kind, list):
        return frozenset(kind)
    return frozenset()


def apply_field(
    schema: dict[str, Any], field: Field, problems: list[str], type_name: str = "this type"
) -> dict[str, Any]:
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
        if kinds is _STRING and key != "pattern" and _schema_types(schema) & _ARRAY:
            # min_length / max_length on a list, as pydantic and annotated-types spell it
            schema["minItems" if key == "min_length" else "maxItems"] = value
            continue
        if _schema_types(schema) & kinds:
            schema[keyword] = value
            continue
        branches = [b for b in schema.get("anyOf", ()) if _schema_types(b) & kinds]
        if not branches:
            problems.append(
                f"constraint {key}={value!r} applies to {_KIND[kinds]} only, not to {type_name}"
            )
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
