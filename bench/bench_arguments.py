"""How fast toolfold checks a model's tool arguments and formats results.

Prints figures, asserts nothing. Run: ``.venv/bin/python bench/bench_arguments.py``.

Per call, after the first (which builds the checker: compiles the validator and
looks up the cattrs hooks, also printed):

1. ``validate_arguments`` on the JSON text of a small call (2 scalars), of a
   medium one (5 parameters: a nested dataclass, a list of attrs objects, an
   enum, a datetime, an optional), and of the medium one with 3 errors (the
   sad path builds messages with paths);
2. the same steps taken apart: json decoding, the compiled yes/no schema check
   (beside jsonschema's ``is_valid``, which it replaces on the happy path),
   structuring;
3. ``format_result`` of a string, of a dict, and of a dataclass with nested
   values.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import attrs

from toolfold import ToolArgumentError, tool


class Sort(enum.Enum):
    PRICE = "price"
    RATING = "rating"


@dataclasses.dataclass
class Filters:
    """Which products to keep.

    Attributes:
        min_price: The lowest price, in euros.
        max_price: The highest price, in euros.
        tags: Tags a product must all have.
    """

    min_price: float = 0.0
    max_price: float | None = None
    tags: list[str] = dataclasses.field(default_factory=list)


@attrs.frozen
class Line:
    sku: str
    qty: int = 1


@tool
def weather(city: str, days: int = 1) -> str:
    """Forecast.

    Args:
        city: The city.
        days: How many days.
    """
    return city


@tool
def search(
    query: str, filters: Filters, lines: list[Line], sort: Sort, since: dt.datetime | None = None
) -> list[str]:
    """Search the catalogue.

    Args:
        query: Words to find.
        filters: Which products to keep.
        lines: Basket lines.
        sort: Order of results.
        since: Only products added after this.
    """
    return []


SMALL = json.dumps({"city": "Paris", "days": 3})
MEDIUM = json.dumps(
    {
        "query": "red shoes",
        "filters": {"min_price": 10, "max_price": 99.5, "tags": ["sale", "new"]},
        "lines": [{"sku": "A1", "qty": 2}, {"sku": "B2"}],
        "sort": "price",
        "since": "2024-05-01T12:00:00Z",
    }
)
BAD = json.dumps(
    {
        "query": "red shoes",
        "filters": {"min_price": "ten", "tags": ["sale"]},
        "lines": [{"sku": "A1", "qty": 2}, {"qty": 1}],
        "sort": "cheapest",
    }
)


def per_call_us(fn: Callable[[], object], n: int = 20_000, repeat: int = 5) -> float:
    """Median microseconds per call over ``repeat`` runs of ``n`` calls."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(runs)


def first_call_us(make: Callable[[], Any], raw: str) -> float:
    """Microseconds for the first validate_arguments of a fresh tool (builds the checker)."""
    times = []
    for _ in range(5):
        fresh = make()
        start = time.perf_counter()
        fresh.validate_arguments(raw)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def sad(raw: str) -> None:
    try:
        search.validate_arguments(raw)
    except ToolArgumentError:
        pass
    else:  # pragma: no cover
        raise AssertionError("expected errors")


def main() -> None:
    search.validate_arguments(MEDIUM)  # build the checkers before timing
    weather.validate_arguments(SMALL)
    checker = search._checker[0]
    decoded = json.loads(MEDIUM)
    report = Filters(1.0, 2.0, ["a", "b"])

    print("validate_arguments (checker built):")
    print(
        f"  small  (2 scalars)         {per_call_us(lambda: weather.validate_arguments(SMALL)):7.1f} us"
    )
    print(
        f"  medium (5 params, nested)  {per_call_us(lambda: search.validate_arguments(MEDIUM)):7.1f} us"
    )
    print(f"  medium, 3 errors           {per_call_us(lambda: sad(BAD), n=2_000):7.1f} us")
    print("  medium taken apart:")
    print(f"    json.loads               {per_call_us(lambda: json.loads(MEDIUM)):7.1f} us")
    compiled = per_call_us(lambda: checker.is_valid(decoded))
    walked = per_call_us(lambda: checker._validator.is_valid(decoded), n=2_000)
    print(f"    schema check, compiled   {compiled:7.1f} us")
    print(f"    schema check, jsonschema {walked:7.1f} us  (what the compiled check replaces)")
    print(
        f"    structuring              {per_call_us(lambda: checker._structure(decoded)):7.1f} us"
    )
    print("first call (builds the checker):")
    print(
        f"  small                      {first_call_us(lambda: weather.replace(name='w2'), SMALL):7.1f} us"
    )
    print(
        f"  medium                     {first_call_us(lambda: search.replace(name='s2'), MEDIUM):7.1f} us"
    )
    print("format_result:")
    print(
        f"  str                        {per_call_us(lambda: search.format_result('done')):7.2f} us"
    )
    print(
        f"  dict                       {per_call_us(lambda: search.format_result({'a': [1, 2], 'b': 'x'})):7.1f} us"
    )
    print(
        f"  dataclass                  {per_call_us(lambda: search.format_result(report)):7.1f} us"
    )


if __name__ == "__main__":
    main()
