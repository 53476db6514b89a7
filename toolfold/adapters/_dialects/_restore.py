"""Arguments coming back: validated against the schema sent, then mapped to the tool's schema.

OpenAI-style strict modes make every property required, so an optional
parameter arrives as an explicit null. `restore_arguments` removes those nulls
again (only where the tool's own schema does not accept null), so Python
defaults apply as if the model had left the parameter out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfold._errors import ArgumentValidationError
from toolfold.adapters._dialects._model import CompiledTool
from toolfold.adapters._dialects._refs import MISSING, accepts_null, deref, resolve

_MAX_DEPTH = 64


def restore_arguments(compiled: CompiledTool, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """Turn the nulls strict mode forced on optional parameters back into absent keys.

    Args:
        compiled: The compilation the arguments answer.
        arguments: Decoded arguments from the model.

    Returns:
        The same mapping when nothing needs restoring, else a new dict where
        every null sent for an optional, non-nullable property is removed (at
        any depth: nested objects, array items, union branches).
    """
    if not compiled.restores_nulls:
        return arguments
    root = compiled.source_schema
    restored = _restore(arguments, root, root, 0)
    return restored if isinstance(restored, Mapping) else arguments


def check_arguments(compiled: CompiledTool, arguments: Any) -> Mapping[str, Any]:
    """Validate arguments against the schema that was sent, then restore them.

    Args:
        compiled: The compilation the arguments answer.
        arguments: Decoded arguments from the model.

    Returns:
        The arguments as the tool's own schema expects them (see
        `restore_arguments`).

    Raises:
        ArgumentValidationError: The arguments break the schema sent; each
            error reads ``<$.path>: <problem>``.
    """
    validator = compiled._cache.get("validator")
    if validator is None:
        from jsonschema import Draft202012Validator  # deferred: import toolfold stays light

        schema = compiled.schema_sent
        if compiled.dialect == "gemini-openapi":
            schema = openapi_to_json_schema(schema)
        validator = compiled._cache["validator"] = Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: _json_path(e.absolute_path))
    if errors:
        raise ArgumentValidationError(
            compiled.name, [f"{_json_path(e.absolute_path)}: {e.message}" for e in errors]
        )
    if not isinstance(arguments, Mapping):  # pragma: no cover - the object schema refused it
        raise ArgumentValidationError(compiled.name, [f"$: expected an object, got {arguments!r}"])
    return restore_arguments(compiled, arguments)


def openapi_to_json_schema(schema: Any) -> Any:
    """The JSON Schema meaning of an OpenAPI 3.0 ``Schema`` (Gemini's ``parameters`` form)."""
    if isinstance(schema, list):
        return [openapi_to_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = value.lower()
        elif key == "properties":
            out[key] = {name: openapi_to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = openapi_to_json_schema(value)
        elif key in (
            "minItems",
            "maxItems",
            "minLength",
            "maxLength",
            "minProperties",
            "maxProperties",
        ):
            out[key] = int(value)  # int64 fields may travel as strings
        elif key not in ("nullable", "propertyOrdering", "example"):
            out[key] = value
    if schema.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out


def _json_path(parts: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _restore(value: Any, schema: Any, root: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH or not isinstance(value, (dict, list)):
        return value
    schema = deref(root, schema)
    if not isinstance(schema, Mapping):
        return value
    if "$ref" in schema:
        target = resolve(root, schema["$ref"])
        if target is not MISSING:
            value = _restore(value, target, root, depth + 1)
    for member in schema.get("allOf", ()):
        value = _restore(value, member, root, depth + 1)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branch = _pick(value, schema[key], root)
            if branch is not None:
                value = _restore(value, branch, root, depth + 1)
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            required = schema.get("required", ())
            out: dict[str, Any] = {}
            for key, item in value.items():
                sub = props.get(key, MISSING)
                if sub is MISSING:
                    out[key] = item
                elif item is None and key not in required and not accepts_null(root, sub):
                    continue  # strict mode's stand-in for "absent"
                else:
                    out[key] = _restore(item, sub, root, depth + 1)
            return out
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, (Mapping, bool)) and not isinstance(items, bool):
            return [_restore(item, items, root, depth + 1) for item in value]
    return value


def _pick(value: Any, branches: list[Any], root: Any) -> Any:
    """The union branch the value was generated for (objects: by their keys)."""
    for branch in branches:
        target = deref(root, branch)
        if not isinstance(target, Mapping):
            continue
        nested = target.get("anyOf", target.get("oneOf"))
        if isinstance(nested, list) and _pick(value, nested, root) is not None:
            return branch
        t = target.get("type")
        types = set(t) if isinstance(t, list) else {t}
        if isinstance(value, dict) and ("object" in types or "properties" in target):
            props = target.get("properties", {})
            if set(value) <= set(props) and set(target.get("required", ())) <= set(value):
                return branch
        elif isinstance(value, list) and "array" in types:
            return branch
    return None
