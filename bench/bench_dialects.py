"""Cost of compiling a tool's schema into a provider dialect, cold and memoized.

`compile_tool` runs for every tool on every request, so the warm path matters
most: the identity hit (same parameters object, checked unchanged by equality
with a private snapshot) and the content hit (an equal dict rebuilt by the
caller, found by its JSON text). Cold is a full compilation.

Also: `check_arguments` (validate against the schema sent + restore nulls) per
call, with its validator already built.

Run: ``.venv/bin/python bench/bench_dialects.py``.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

from toolfold.adapters._dialects import check_arguments, clear_cache, compile_tool
from toolfold.runtime import ToolDefinition

SMALL = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City"},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
    },
    "required": ["city"],
}


def _medium() -> dict[str, Any]:
    props: dict[str, Any] = {
        f"field_{i}": {"type": "string", "description": f"Field {i}"} for i in range(8)
    }
    props["address"] = {"$ref": "#/$defs/Address", "description": "Where"}
    props["lines"] = {"type": "array", "items": {"$ref": "#/$defs/Line"}}
    props["note"] = {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    return {
        "type": "object",
        "properties": props,
        "required": ["field_0", "address"],
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["street"],
            },
            "Line": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                "required": ["sku"],
            },
        },
    }


def _large() -> dict[str, Any]:
    inner = {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer", "minimum": 0} for i in range(10)},
    }
    return {
        "type": "object",
        "properties": {f"group_{i}": copy.deepcopy(inner) for i in range(10)},
        "required": ["group_0"],
    }


TOOLS = {
    "small (2 props)": SMALL,
    "medium (11 props, $defs)": _medium(),
    "large (110 props)": _large(),
}
DIALECTS = ("openai-chat", "anthropic", "gemini", "ollama")


def _us(fn: Callable[[], object], n: int, repeat: int = 5) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter_ns() - start) / n / 1000)
    return statistics.median(runs)


def _measure(schema: dict[str, Any], dialect: Any) -> tuple[float, float, float]:
    definition = ToolDefinition(name="bench_tool", description="A tool", parameters=schema)

    def cold() -> object:
        clear_cache()
        return compile_tool(definition, dialect)

    def warm_identity() -> object:
        return compile_tool(definition, dialect)

    c = _us(cold, 200)
    compile_tool(definition, dialect)
    w = _us(warm_identity, 20_000)
    # equal but new parameters dicts: each is an identity miss and a content hit
    runs = []
    for _ in range(5):
        fresh = [
            ToolDefinition(
                name="bench_tool", description="A tool", parameters=copy.deepcopy(schema)
            )
            for _ in range(1_000)
        ]
        start = time.perf_counter_ns()
        for item in fresh:
            compile_tool(item, dialect)
        runs.append((time.perf_counter_ns() - start) / len(fresh) / 1000)
    return c, w, statistics.median(runs)


def main() -> None:
    print(f"{'tool':26} {'dialect':12} {'cold':>9} {'warm id':>9} {'warm new dict':>14}")
    for label, schema in TOOLS.items():
        for dialect in DIALECTS:
            c, w, e = _measure(schema, dialect)
            print(f"{label:26} {dialect:12} {c:7.1f}us {w:7.2f}us {e:12.1f}us")
    clear_cache()
    compiled = compile_tool(ToolDefinition(name="w", parameters=SMALL), "openai-chat")
    args = {"city": "Paris", "unit": None}
    check_arguments(compiled, args)
    per_call = _us(lambda: check_arguments(compiled, args), 20_000)
    print(f"check_arguments (small, strict, one null restored): {per_call:.2f}us")


if __name__ == "__main__":
    main()
