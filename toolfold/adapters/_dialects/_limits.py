"""OpenAI's size limits on strict schemas [O2, O9, O10].

A schema over a limit is a 400 at request time, so a strict compilation checks
them on the schema it is about to send and refuses (``strict=True``) or falls
back to non-strict (``strict=None``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from toolfold.adapters._dialects._model import SchemaRewrite
from toolfold.adapters._dialects._refs import def_name

MAX_PROPERTIES = 5_000
MAX_DEPTH = 10
MAX_CHARS = 120_000
MAX_ENUM_VALUES = 1_000
LARGE_ENUM = 250
MAX_LARGE_ENUM_CHARS = 15_000

_CHILD_MAPS = ("properties", "$defs")
_CHILD_LISTS = ("anyOf",)
_CHILD_NODES = ("items",)


def check_limits(schema: Mapping[str, Any], label: str) -> list[SchemaRewrite]:
    """One `SchemaRewrite` (action ``refused``) per limit the schema exceeds."""
    totals = {"properties": 0, "chars": 0, "enum": 0}
    problems: list[SchemaRewrite] = []
    for node, path in _nodes(schema):
        _count(node, path, totals, problems, label)
    for key, limit, what in _TOTALS:
        if totals[key] > limit:
            detail = f"{label} allows at most {limit} {what} (this schema: {totals[key]})"
            problems.append(SchemaRewrite("", key, "refused", detail, True))
    depth = _depth(schema, schema.get("$defs", {}), {}, set())
    if depth > MAX_DEPTH:
        detail = (
            f"{label} allows at most {MAX_DEPTH} levels of nested objects (this schema: {depth})"
        )
        problems.append(SchemaRewrite("", "properties", "refused", detail, True))
    return problems


_TOTALS = (
    ("properties", MAX_PROPERTIES, "object properties in total"),
    ("chars", MAX_CHARS, "characters of property names, definition names and enum values"),
    ("enum", MAX_ENUM_VALUES, "enum values in total"),
)


def _nodes(schema: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """Every schema object below and including ``schema``, with its path (depth first)."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node, path
        for key in _CHILD_MAPS:
            child = node.get(key)
            if isinstance(child, dict):
                stack.extend((v, f"{path}/{key}/{k}") for k, v in child.items())
        for key in _CHILD_LISTS:
            child = node.get(key)
            if isinstance(child, list):
                stack.extend((v, f"{path}/{key}/{i}") for i, v in enumerate(child))
        for key in _CHILD_NODES:
            if isinstance(node.get(key), dict):
                stack.append((node[key], f"{path}/{key}"))


def _count(
    node: dict[str, Any],
    path: str,
    totals: dict[str, int],
    problems: list[SchemaRewrite],
    label: str,
) -> None:
    """Add one node's properties, names and enum values to the totals; refuse a large enum."""
    props = node.get("properties")
    if isinstance(props, dict):
        totals["properties"] += len(props)
        totals["chars"] += sum(len(k) for k in props)
    defs = node.get("$defs")
    if isinstance(defs, dict):
        totals["chars"] += sum(len(k) for k in defs)
    enum = node.get("enum")
    if isinstance(enum, list):
        totals["enum"] += len(enum)
        chars = sum(len(v) for v in enum if isinstance(v, str))
        totals["chars"] += chars
        if len(enum) > LARGE_ENUM and chars > MAX_LARGE_ENUM_CHARS:
            detail = (
                f"{label} allows at most {MAX_LARGE_ENUM_CHARS} characters in an "
                f"enum of more than {LARGE_ENUM} values (this one: {chars})"
            )
            problems.append(SchemaRewrite(path, "enum", "refused", detail, True))


def _depth(node: Any, defs: Mapping[str, Any], memo: dict[str, int], active: set[str]) -> int:
    """Levels of nested objects below and including ``node``; cycles count once."""
    if not isinstance(node, dict):
        return 0
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = def_name(ref)
        if name is None or name in active or name not in defs:
            return 0
        if name not in memo:
            active.add(name)
            memo[name] = _depth(defs[name], defs, memo, active)
            active.discard(name)
        return memo[name]
    children: list[Any] = list((node.get("properties") or {}).values())
    children += list(node.get("anyOf") or ())
    if isinstance(node.get("items"), dict):
        children.append(node["items"])
    below = max((_depth(c, defs, memo, active) for c in children), default=0)
    t = node.get("type")
    is_object = t == "object" or (isinstance(t, list) and "object" in t)
    return below + (1 if is_object else 0)
