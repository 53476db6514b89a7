"""How fast toolfold's toolkit is: schema derivation and ``import toolfold``.

Prints figures, asserts nothing. Run: ``.venv/bin/python bench/bench_toolkit.py``.

1. Derivation: ``@tool`` on a function with 5 typed parameters (one a documented
   nested dataclass) and a Google docstring, a fresh function object each time
   (so nothing is cached per function; the dataclass's schema is cached per
   type, as it is in a real program that defines a class once and uses it in
   many tools), then the cold case: a fresh dataclass for every function too,
   so its fields, hints and docstring are all read again. Target <= 150 µs;
   measured on this kind of
   machine pydantic-ai takes ~3,000 µs, the OpenAI Agents SDK ~1,500,
   langchain-core ~3,300.
2. Cold ``import toolfold`` in fresh interpreters, median of 7, beside
   ``import httpx`` in the same run. Target <= 2x httpx.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import time
import warnings
from typing import Annotated, Any, Literal

from toolfold import Field, tool


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


def make_function() -> object:
    """A fresh function object each call (new code-object binding, new annotations)."""

    def search_products(
        query: str,
        filters: Filters,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        sort: Literal["relevance", "price", "rating"] = "relevance",
        in_stock: bool = True,
    ) -> list[str]:
        """Search the product catalogue.

        Looks products up by free text, then keeps those that pass the filters.

        Args:
            query: The text to look for.
            filters: Which products to keep.
            limit: How many results at most.
            sort: The order of the results.
            in_stock: Only products that can ship today.

        Returns:
            The names of the matching products.
        """
        return []

    return search_products


def _fresh_filters() -> type:
    """A new dataclass, equal to Filters but a distinct type (nothing cached for it)."""

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

    return Filters


def bench_cold_dataclass(rounds: int = 400) -> None:
    """Each function's dataclass is new too: the class rules run in full every time."""
    maker = _evaluated_maker()
    tool(maker())
    samples = []
    for _ in range(7):
        functions = []
        for _ in range(rounds):
            fn = maker()
            fn.__annotations__["filters"] = _fresh_filters()
            functions.append(fn)
        start = time.perf_counter()
        for fn in functions:
            tool(fn)
        samples.append((time.perf_counter() - start) / rounds * 1e6)
    print(
        f"  cold, a fresh dataclass per function too: {statistics.median(samples):.1f} µs"
        f" per function (median of 7 x {rounds}, min {min(samples):.1f})"
    )


def _evaluated_maker() -> Any:
    """make_function compiled without ``from __future__ import annotations``."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(make_function))
    namespace = dict(globals())
    exec(compile(source, __file__, "exec", dont_inherit=True), namespace)
    return namespace["make_function"]


def bench_derivation(rounds: int = 2000) -> None:
    makers = [
        ("string annotations (from __future__ import annotations)", make_function),
        ("evaluated annotations", _evaluated_maker()),
    ]
    print("schema derivation, 5 params + nested dataclass + Google docstring (target <= 150 µs;")
    print("  pydantic-ai ~3,000, OpenAI Agents SDK ~1,500, langchain-core ~3,300):")
    for label, maker in makers:
        tool(maker())  # warm up: imports docstring-parser, caches Filters
        samples = []
        for _ in range(7):
            functions = [maker() for _ in range(rounds)]
            start = time.perf_counter()
            for fn in functions:
                tool(fn)
            samples.append((time.perf_counter() - start) / rounds * 1e6)
        print(
            f"  {label}: {statistics.median(samples):.1f} µs per function"
            f" (median of 7 x {rounds}, min {min(samples):.1f})"
        )


def _import_ms(module: str, env: dict[str, str]) -> float:
    code = (
        "import time; t = time.perf_counter(); "
        f"import {module}; print((time.perf_counter() - t) * 1e3)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return float(out.stdout)


def bench_import(runs: int = 7) -> None:
    # Installed packages import from the bytecode pip compiled. Where
    # PYTHONDONTWRITEBYTECODE is set (as in some sandboxes) an editable checkout
    # would be compiled from source on every run while httpx is not, so the
    # checkout is allowed to write its bytecode once before measuring.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for module in ("toolfold", "httpx"):
        _import_ms(module, env)
    toolfold_ms, httpx_ms = [], []
    for _ in range(runs):  # interleaved, so both see the same machine load
        toolfold_ms.append(_import_ms("toolfold", env))
        httpx_ms.append(_import_ms("httpx", env))
    a, b = statistics.median(toolfold_ms), statistics.median(httpx_ms)
    print(f"cold import toolfold: {a:.1f} ms, import httpx: {b:.1f} ms (medians of {runs})")
    print(f"ratio toolfold / httpx: {a / b:.2f} (target <= 2; peers take 800-1,200 ms)")


if __name__ == "__main__":
    warnings.simplefilter("error")
    bench_derivation()
    bench_cold_dataclass()
    bench_import()
