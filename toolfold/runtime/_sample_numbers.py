"""Numbers that satisfy a JSON Schema's bounds (for `sample_value`).

The bounds and ``multipleOf`` are read as the decimals they are written as
(``0.1`` is one tenth), the way toolfold's argument check reads ``multipleOf``
(`is_multiple`). The candidates are multiples of a step: 1 for an integer (or
the smallest whole multiple of ``multipleOf``), ``multipleOf`` for a number,
else 1, 0.1, 0.01 ... for a number, the first step that has a multiple inside
the bounds. Of those, the one nearest 1 comes first: 1 itself when the bounds
allow it, else the allowed value nearest to it, then the next ones up, then
down (distinct items of an array: 1, 2, 3) (``0 < x < 0.5`` gives 0.4,
``0 < x < 0.001`` gives 0.0009). Each candidate is checked against the raw
bounds as a validator compares them (the float itself), so rounding never
lets a value past a bound.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from typing import Any

from toolfold.toolkit._fastcheck import is_multiple

#: The finest decimal step tried for a number without ``multipleOf`` (1e-17);
#: past it, the floats next to the bounds are tried.
_FINEST = 17

#: How many multiples of one step are checked before giving up on it: enough
#: for the distinct items of an array, a bound for an unbounded range.
_TRIES = 256


class NoNumber(Exception):
    """No number satisfies the bounds; the message says which."""


def numbers(
    schema: Mapping[str, Any], *, integer: bool, tries: int = _TRIES
) -> Iterator[int | float]:
    """Distinct values of ``schema``'s type within its bounds, the simplest first.

    ``tries`` is how many multiples of each step are checked on each side of
    the first one (at least the count of values wanted, e.g. ``minItems``).

    Raises:
        NoNumber: No value was found (the bounds leave none, such as
            ``exclusiveMinimum: 0, exclusiveMaximum: 1`` for an integer).
    """
    low, low_open, high, high_open = _bounds(schema, exact=integer)
    multiple = _decimal(schema.get("multipleOf"))
    if multiple is not None and multiple <= 0:
        multiple = None
    if integer:
        steps: Iterator[Fraction] = iter([Fraction(multiple.numerator if multiple else 1)])
    elif multiple is not None:
        steps = iter([multiple])
    else:
        steps = (Fraction(1, 10**digits) for digits in range(_FINEST + 1))
    fits = _fits(schema, integer=integer)
    seen: set[int | float] = set()
    for step in steps:
        for k in _multiples(step, low, low_open, high, high_open, max(tries, _TRIES)):
            exact = k * step
            try:
                value: int | float = int(exact) if integer else float(exact)
            except OverflowError:  # past the largest float: none further out fits either
                break
            if value not in seen and fits(value):
                seen.add(value)
                yield value
    if not integer and multiple is None:
        # No decimal fitted, rounded to a float: bounds closer than 1e-17 (or
        # below it), or so large that the float next to a bound is more than 1
        # away. The floats at and next to each bound, and the one between them.
        for value in _next_to(low, high):
            if value not in seen and fits(value):
                seen.add(value)
                yield value
    if not seen:
        raise NoNumber(_no_number(schema, integer=integer))


def _next_to(low: Fraction | None, high: Fraction | None) -> list[float]:
    """Each bound, the float just inside it, and the float halfway between them."""
    try:
        below = None if low is None else float(low)
        above = None if high is None else float(high)
    except OverflowError:  # a bound past the largest float
        return []
    found = []
    if below is not None:  # the bound itself when it is inclusive, else the float above it
        found += [below, math.nextafter(below, math.inf)]
    if above is not None:
        found += [above, math.nextafter(above, -math.inf)]
    if below is not None and above is not None:
        found.append(below / 2 + above / 2)
    return found


def _multiples(
    step: Fraction,
    low: Fraction | None,
    low_open: bool,
    high: Fraction | None,
    high_open: bool,
    tries: int,
) -> Iterator[int]:
    """The ``k`` whose ``k * step`` lies within the bounds, the one nearest 1 first."""
    k_low = (
        None if low is None else (math.floor(low / step) + 1 if low_open else math.ceil(low / step))
    )
    k_high = (
        None
        if high is None
        else (math.ceil(high / step) - 1 if high_open else math.floor(high / step))
    )
    if k_low is not None and k_high is not None and k_low > k_high:
        return
    target = math.ceil(1 / step)
    if k_low is not None:
        target = max(target, k_low)
    if k_high is not None:
        target = min(target, k_high)
    # Up from the target (1, 2, 3 ... for distinct items), then down from it.
    up = itertools.count(target) if k_high is None else range(target, k_high + 1)
    down = itertools.count(target - 1, -1) if k_low is None else range(target - 1, k_low - 1, -1)
    yield from itertools.islice(up, tries)
    yield from itertools.islice(down, tries)


def _bounds(
    schema: Mapping[str, Any], *, exact: bool = False
) -> tuple[Fraction | None, bool, Fraction | None, bool]:
    """The lower and upper bound, each with whether it is exclusive (the tighter of two).

    ``exact``: a float bound is read as the binary value it holds, as an
    integer is compared with it (``1e300`` is a little above 10**300), not as
    the decimal it is written as.
    """
    read = _exact if exact else _decimal
    low, low_open = read(schema.get("minimum")), False
    high, high_open = read(schema.get("maximum")), False
    # Draft 4 spells an exclusive bound as a flag on minimum / maximum.
    if schema.get("exclusiveMinimum") is True:
        low_open = low is not None
    if schema.get("exclusiveMaximum") is True:
        high_open = high is not None
    above = read(schema.get("exclusiveMinimum"))
    if above is not None and (low is None or above >= low):
        low, low_open = above, True
    below = read(schema.get("exclusiveMaximum"))
    if below is not None and (high is None or below <= high):
        high, high_open = below, True
    return low, low_open, high, high_open


def _decimal(value: Any) -> Fraction | None:
    """A JSON number as the decimal it is written as; None for no number (a flag, NaN, text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        return Fraction(repr(value)) if math.isfinite(value) else None
    return Fraction(value)


def _exact(value: Any) -> Fraction | None:
    """A JSON number as the exact value it holds; None for no number (a flag, NaN, text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return Fraction(value)


def _fits(schema: Mapping[str, Any], *, integer: bool) -> Callable[[int | float], bool]:
    """Whether a value passes the bounds as a validator compares them (the value as it is)."""
    draft4_low = schema.get("exclusiveMinimum") is True
    draft4_high = schema.get("exclusiveMaximum") is True
    compare = [
        ("minimum", operator.gt if draft4_low else operator.ge),
        ("maximum", operator.lt if draft4_high else operator.le),
        ("exclusiveMinimum", operator.gt),
        ("exclusiveMaximum", operator.lt),
    ]
    bounds = [(test, schema[key]) for key, test in compare if _decimal(schema.get(key)) is not None]
    step = schema.get("multipleOf")
    positive = _decimal(step)
    multiple = step if positive is not None and positive > 0 else None

    def fits(value: int | float) -> bool:
        if not integer and not math.isfinite(value):
            return False
        if not all(test(value, bound) for test, bound in bounds):
            return False
        return multiple is None or is_multiple(value, multiple)

    return fits


def _no_number(schema: Mapping[str, Any], *, integer: bool) -> str:
    keywords = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf")
    given = ", ".join(f"{key} {schema[key]!r}" for key in keywords if key in schema)
    kind = "integer" if integer else "number"
    return f"no {kind} satisfies the bounds ({given})"
