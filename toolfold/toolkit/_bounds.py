"""Bounds that no value fits, found on a parameter's merged schema.

A type's ``Annotated`` metadata may bound it in several places: one `Field`,
several, annotated_types markers (``Ge``, ``Interval``, ``Len``...), or a mix,
on top of what the type's own schema says (a `Flag`'s range). Each may be
fine alone while together they admit nothing (``Field(ge=5), at.Le(1)``): a
tool no call can pass. `SourcedBounds` records which item put each bound
keyword on the schema, and `empty_bounds` names the ones that clash.

No value fits an ``enum`` of numbers none of which is within the bounds (a
`Flag`'s sums, ``Literal[1, 2]``). Between a lower and an upper bound no value fits when the lower exceeds the
upper, or equals it with either exclusive; for an ``integer`` schema when no
whole number lies between them (``gt=4, lt=5``), and with ``multipleOf`` when
no multiple of it does (decimal-exact, as the argument check counts multiples).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from fractions import Fraction

__all__ = ["SourcedBounds", "empty_bounds"]

_LOWS = {"minimum": False, "exclusiveMinimum": True}  # keyword -> exclusive?
_HIGHS = {"maximum": False, "exclusiveMaximum": True}
_COUNTS = (("minLength", "maxLength"), ("minItems", "maxItems"))
_KEYWORDS = frozenset({*_LOWS, *_HIGHS, "multipleOf", *(k for pair in _COUNTS for k in pair)})

# The Field arguments that become each keyword (min_length on an array is minItems).
_FIELD_NAMES = {
    "minimum": ("ge",),
    "exclusiveMinimum": ("gt",),
    "maximum": ("le",),
    "exclusiveMaximum": ("lt",),
    "multipleOf": ("multiple_of",),
    "minLength": ("min_length",),
    "maxLength": ("max_length",),
    "minItems": ("min_items", "min_length"),
    "maxItems": ("max_items", "max_length"),
}


def _nodes(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The schema and the branches of its union, where constraints are put."""
    yield schema
    for branch in schema.get("anyOf", ()):
        if isinstance(branch, Mapping):
            yield branch


class SourcedBounds:
    """Which ``Annotated`` item put each bound keyword on a schema.

    Args:
        schema: The schema of the annotated type, before its metadata is applied.
        type_name: How the messages name the type, for the bounds it had already.
        branch_names: How they name each branch of the schema's union (``anyOf``),
            in order: the branch's type (``int``); empty when not known.
    """

    __slots__ = ("_branches", "_sources", "_type_name")

    def __init__(
        self, schema: Mapping[str, Any], type_name: str, branch_names: Sequence[str] = ()
    ) -> None:
        self._type_name = type_name
        # (node id, keyword) -> (the value, the item that put it there; None: the type)
        self._sources: dict[tuple[int, str], tuple[Any, Any]] = {}
        branches = [b for b in schema.get("anyOf", ()) if isinstance(b, Mapping)]
        known = len(branch_names) == len(branches)
        self._branches = {
            id(node): f"the {branch_names[i]} of {type_name}"
            if known
            else f"a branch of {type_name}"
            for i, node in enumerate(branches)
        }
        self.note(schema, None)

    def note(self, schema: Mapping[str, Any], item: Any) -> None:
        """Record the bound keywords ``item`` (a Field, an annotated_types marker) just set."""
        for node in _nodes(schema):
            for keyword in _KEYWORDS.intersection(node):
                key = (id(node), keyword)
                value = node[keyword]
                known = self._sources.get(key)
                if known is None or known[0] is not value:
                    self._sources[key] = (value, item)

    def sources(self, node: Mapping[str, Any], keywords: Iterable[str]) -> list[str]:
        """How a message names the items that put ``keywords`` on ``node`` (the schema or
        one of its branches), each once: ``Field(ge=5)``, ``Field(gt=4, lt=5)`` for one
        Field setting two, ``annotated_types.Le(le=1)``, ``Perm's own maximum=3``."""
        from toolfold.toolkit._field import Field, field_info_repr, is_field_info

        names: list[str | Field] = []  # a Field stands for its arguments, gathered below
        arguments: dict[int, list[str]] = {}
        extras: dict[int, dict[str, Any]] = {}
        for keyword in keywords:
            value, item = self._sources.get((id(node), keyword), (node[keyword], None))
            if item is None:
                names.append(f"{self._type_name}'s own {keyword}={value!r}")
            elif isinstance(item, Field):
                if id(item) not in arguments:
                    names.append(item)
                    arguments[id(item)], extras[id(item)] = [], {}
                given = _field_argument(item, keyword)
                if given is None:
                    extras[id(item)][keyword] = value
                elif given not in arguments[id(item)]:
                    arguments[id(item)].append(given)
            elif type(item).__module__ == "annotated_types":
                names.append(f"annotated_types.{item!r}")
            else:  # (a pydantic.Field, StringConstraints...)
                names.append(field_info_repr(item) if is_field_info(item) else repr(item))
        out: list[str] = []
        for name in names:
            if not isinstance(name, str):
                extra = extras[id(name)]
                shown = arguments[id(name)] + ([f"extra={extra!r}"] if extra else [])
                name = f"Field({', '.join(shown)})"
            if name not in out:
                out.append(name)
        return out

    def branch(self, node: Mapping[str, Any]) -> str | None:
        """How a message names ``node`` if it is a branch of the union: ``the int of int |
        str``; None for the schema itself."""
        return self._branches.get(id(node))


def _field_argument(field: Any, keyword: str) -> str | None:
    """The argument of ``field`` that set ``keyword`` (``ge=5``); None: its ``extra``."""
    for name in _FIELD_NAMES[keyword]:
        given = getattr(field, name)
        if given is not None:
            return f"{name}={given!r}"
    return None


# What a branch of each JSON type admits none of when its bounds clash.
_KINDS = {"integer": "integer", "number": "number", "string": "string", "array": "array"}


def empty_bounds(schema: Mapping[str, Any], sources: SourcedBounds) -> list[str]:
    """Problems naming the bounds of ``schema`` (or of a branch of its union) that no
    value fits, by the items that set them; empty when every bound leaves room. A
    branch's problem names the branch: its union admits the other branches' values."""
    problems: list[str] = []
    for node in _nodes(schema):
        branch = sources.branch(node)
        for clash, what in _clashes(node):
            names = sources.sources(node, clash)
            if branch is not None:
                kind = node.get("type")
                what = _KINDS.get(kind, what) if isinstance(kind, str) else what
                what = f"{what} ({branch})"
            if len(names) == 1:
                problems.append(f"{names[0]} admits no {what}")
            else:
                listed = ", ".join(names[:-1]) + f" and {names[-1]}"
                problems.append(f"{listed} admit no {what}")
    return problems


def _clashes(node: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], str]]:
    """The keyword groups of ``node`` that admit nothing, and what they admit none of
    (``"value"``; ``"integer"`` when only the schema's type leaves nothing between them)."""
    for low, high in _COUNTS:
        lo, hi = node.get(low), node.get(high)
        if _is_number(lo) and _is_number(hi) and lo > hi:
            yield (low, high), "value"
    whole = node.get("type") == "integer"
    listed = _enum_clash(node)
    if listed:
        yield listed, "value"
    for low, low_excl in _LOWS.items():
        lo = node.get(low)
        if not _is_number(lo):
            continue
        for high, high_excl in _HIGHS.items():
            hi = node.get(high)
            if not _is_number(hi):
                continue
            # (Python compares ints and floats exactly, and floor/ceil of a float are exact)
            if lo > hi or (lo == hi and (low_excl or high_excl)):
                yield (low, high), "value"
            elif whole and _no_whole_number(lo, low_excl, hi, high_excl):
                yield (low, high), "integer"
            elif _is_number(node.get("multipleOf")) and _no_multiple(
                lo, low_excl, hi, high_excl, node["multipleOf"], whole
            ):
                yield (low, high, "multipleOf"), "integer" if whole else "value"


def _enum_clash(node: Mapping[str, Any]) -> tuple[str, ...]:
    """``enum`` and the bounds of ``node`` when none of its numbers is within them (a
    gapped `Flag`'s sums with ``ge=7``, ``Literal[1, 2]`` with ``ge=5``); else empty."""
    values = node.get("enum")
    if not isinstance(values, list) or not values or not all(map(_is_number, values)):
        return ()
    bounds = [k for k in (*_LOWS, *_HIGHS, "multipleOf") if _is_number(node.get(k))]
    if not bounds:
        return ()

    def fits(value: float) -> bool:
        for keyword in bounds:
            bound = node[keyword]
            if keyword == "multipleOf":
                if bound > 0 and (_exact(value) / _exact(bound)).denominator != 1:
                    return False
            elif keyword in _LOWS:
                if value < bound or (_LOWS[keyword] and value == bound):
                    return False
            elif value > bound or (_HIGHS[keyword] and value == bound):
                return False
        return True

    return () if any(map(fits, values)) else ("enum", *bounds)


def _is_number(value: Any) -> TypeGuard[float]:
    if isinstance(value, bool):
        return False
    # (an int is finite however large: math.isfinite(10**400) would overflow)
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _no_whole_number(lo: float, lo_excl: bool, hi: float, hi_excl: bool) -> bool:
    first = math.floor(lo) + 1 if lo_excl else math.ceil(lo)
    last = math.ceil(hi) - 1 if hi_excl else math.floor(hi)
    return first > last


def _no_multiple(
    lo: float, lo_excl: bool, hi: float, hi_excl: bool, step: float, whole: bool
) -> bool:
    """Whether no multiple of ``step`` (a whole one, with ``whole``) lies between the
    bounds, counted decimal-exactly as the argument check counts them (0.3 is a
    multiple of 0.1)."""
    from fractions import Fraction

    if step <= 0:
        return False  # the meta-schema check reports it
    spacing = _exact(step)
    if whole:  # the whole multiples of p/q are the multiples of p
        spacing = Fraction(spacing.numerator)
    low, high = _exact(lo), _exact(hi)
    first = math.floor(low / spacing) + 1 if lo_excl else math.ceil(low / spacing)
    last = math.ceil(high / spacing) - 1 if hi_excl else math.floor(high / spacing)
    return first > last


def _exact(number: float) -> Fraction:
    """``number`` as the decimal it is written as (0.1 is 1/10), an int as itself
    (``repr`` of an int of more than 4300 digits raises)."""
    from fractions import Fraction

    return Fraction(number) if isinstance(number, int) else Fraction(repr(number))
