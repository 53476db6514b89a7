"""Whether a JSON value is still the one a copy was made from, types included.

Memos keyed by an object's identity (a tool's schema dict, compiled or frozen
once and reused) check with `same_json` that the object was not changed in
place since: the caller keeps the dict and may edit it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfold.runtime.core._messages import FrozenDict, FrozenList, freeze

# Where a JSON value holds numbers and booleans: the path to each, with its type.
TypedLeaves = tuple[tuple[tuple[Any, ...], type], ...]

_NUMBERS = (bool, int, float)
_MAPPINGS = (dict, FrozenDict)
_LISTS = (list, FrozenList)


def typed_leaves(value: Any) -> TypedLeaves:
    """Where a JSON value (plain or frozen) holds numbers and booleans, with their types."""
    found: list[tuple[tuple[Any, ...], type]] = []
    todo: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while todo:
        path, node = todo.pop()
        kind = type(node)
        if kind in _MAPPINGS:
            todo.extend(((*path, key), item) for key, item in node.items())
        elif kind in _LISTS:
            todo.extend(((*path, index), item) for index, item in enumerate(node))
        elif kind in _NUMBERS:
            found.append((path, kind))
    return tuple(found)


def same_json(value: Any, copy: Any, typed: TypedLeaves) -> bool:
    """Whether ``value`` is still the JSON ``copy`` was made from, types included.

    ``typed`` is the copy's `typed_leaves`. Python's ``==`` takes ``1``,
    ``1.0`` and ``True`` for one value, which JSON (and a schema's meaning)
    does not: once ``==`` holds (at C speed), only where the copy holds a
    number or a boolean can the types differ, and those are checked.
    """
    if value != copy:
        return False
    for path, kind in typed:
        node = value
        for step in path:
            node = node[step]
        if type(node) is not kind:
            return False
    return True


_MAX_SCHEMAS = 4096
# id(schema) -> (the schema, its frozen copy's typed leaves, the frozen copy)
_frozen_schemas: dict[int, tuple[Any, TypedLeaves, FrozenDict]] = {}


def frozen_schema(schema: Any) -> Any:
    """A JSON Schema mapping as a deep read-only copy, made once per schema.

    A `Tool` keeps its ``parameters`` frozen already (returned as they are);
    a schema given as a plain dict elsewhere, whose every config (once per
    ``generate_text``, per run with listed tools, per workflow step) needs
    its frozen copy, has the copy remembered by the dict's identity and
    reused while the dict still holds the same JSON (an edit in place, a
    ``1`` become ``True`` included, makes a new copy). Sharing one copy also
    lets `compile_tool`'s identity memo find it. A `FrozenDict` is returned
    as it is; anything but a mapping too (the caller refuses it).
    """
    kind = type(schema)
    if kind is FrozenDict or (kind is not dict and not isinstance(schema, Mapping)):
        return schema
    key = id(schema)
    hit = _frozen_schemas.get(key)
    if hit is not None and hit[0] is schema and same_json(schema, hit[2], hit[1]):
        return hit[2]
    frozen: FrozenDict = freeze(schema)
    if len(_frozen_schemas) >= _MAX_SCHEMAS:
        _frozen_schemas.clear()
    # (the entry holds the schema, so its id names no other object while it lives)
    _frozen_schemas[key] = (schema, typed_leaves(frozen), frozen)
    return frozen
