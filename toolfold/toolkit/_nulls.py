"""Reading ``null`` as "left out" for optional properties that do not admit it.

Strict modes (OpenAI's ``strict: true``) make every property required and the
optional ones nullable, so a model may send ``"limit": null`` to mean "use the
default". `drop_optional_nulls` removes such nulls, at any depth (through local
``$ref``s, and through an ``anyOf``/``oneOf`` when only one branch is an object
or an array), copying only what it changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["drop_optional_nulls"]

_MISSING = object()


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    for _ in range(32):  # a chain of plain $refs; more than this is a cycle
        if not isinstance(schema, Mapping) or "$ref" not in schema:
            return schema
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                return schema
            target = target[part]
        schema = target
    return schema


def _admits_null(schema: Any, root: Mapping[str, Any]) -> bool:
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return schema is not False
    if "const" in schema:
        return schema["const"] is None
    if "enum" in schema:
        return None in schema["enum"]
    if "type" in schema:
        t = schema["type"]
        return t == "null" or (isinstance(t, list) and "null" in t)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return any(_admits_null(s, root) for s in schema[key])
    if "allOf" in schema:
        return all(_admits_null(s, root) for s in schema["allOf"])
    return "$ref" not in schema


def drop_optional_nulls(schema: Any, root: Mapping[str, Any], value: Any) -> Any:
    """``value`` without the nulls of optional, non-nullable properties (copied only if changed)."""
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, dict):
        branch = _only_branch(schema, root, "properties")
        if branch is not None:
            return drop_optional_nulls(branch, root, value)
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            return value
        required = schema.get("required", ())
        out: dict[str, Any] | None = None
        for key, item in value.items():
            sub = props.get(key, _MISSING)
            if sub is _MISSING:
                continue
            if item is None and key not in required and not _admits_null(sub, root):
                new: Any = _MISSING
            else:
                new = drop_optional_nulls(sub, root, item)
                if new is item:
                    continue
            if out is None:
                out = dict(value)
            if new is _MISSING:
                del out[key]
            else:
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        branch = _only_branch(schema, root, "items")
        if branch is not None:
            return drop_optional_nulls(branch, root, value)
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return value
        new_items = [drop_optional_nulls(items, root, v) for v in value]
        changed = any(a is not b for a, b in zip(new_items, value, strict=True))
        return new_items if changed else value
    return value


def _only_branch(schema: Mapping[str, Any], root: Mapping[str, Any], key: str) -> Any:
    """The one branch of an anyOf/oneOf that has ``key`` (``properties``/``items``), if exactly one."""
    for combinator in ("anyOf", "oneOf"):
        branches = schema.get(combinator)
        if isinstance(branches, list):
            found = [
                b
                for b in (_resolve(s, root) for s in branches)
                if isinstance(b, Mapping) and key in b
            ]
            return found[0] if len(found) == 1 else None
    return None
