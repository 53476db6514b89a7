"""Arguments coming back: validated against the schema sent, then mapped to the tool's schema.

OpenAI-style strict modes make every property required, so an optional
parameter arrives as an explicit null. `restore_arguments` removes those nulls
again (only where the tool's own schema does not accept null), so Python
defaults apply as if the model had left the parameter out; it is toolkit's
`drop_optional_nulls` (what the run loop uses) against the tool's own schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfold._errors import SchemaCompileError
from toolfold.adapters._dialects._model import CompiledTool
from toolfold.adapters._dialects._refs import anchors_as_pointers
from toolfold.runtime.core._arguments import validate_arguments
from toolfold.toolkit._arguments import format_checker
from toolfold.toolkit._jsonschema import drop_optional_nulls


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
    root = compiled._cache.get("restore_root")
    if root is None:
        # references to $anchors read as pointers, as the schema sent was compiled
        root = compiled._cache["restore_root"] = anchors_as_pointers(dict(compiled.source_schema))[
            0
        ]
    restored = drop_optional_nulls(arguments, root, root)
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
        SchemaCompileError: The schema sent has a ``$ref`` to nothing (a
            ``json-schema`` tool is passed through as written), so no
            arguments can be checked against it.
    """
    validator = compiled._cache.get("validator")
    if validator is None:
        from jsonschema import Draft202012Validator  # deferred: import toolfold stays light

        schema = compiled.schema_sent
        if compiled.dialect == "gemini-openapi":
            schema = openapi_to_json_schema(schema)
        validator = compiled._cache["validator"] = Draft202012Validator(
            schema, format_checker=format_checker()
        )
    from referencing.exceptions import Unresolvable

    try:
        arguments = validate_arguments(compiled.name, validator, arguments)
    except Unresolvable as exc:
        anchor = getattr(exc, "anchor", None)  # (NoSuchAnchor; a pointer's ref has no '#')
        ref = f"#{anchor}" if anchor else f"#{exc.ref}" if exc.ref[:1] in ("", "/") else exc.ref
        problem = f"$ref {ref!r} of the schema sent points to nothing; no arguments can be checked"
        raise SchemaCompileError(compiled.name, compiled.dialect, [problem]) from exc
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
        if isinstance(out.get("type"), str) and out["type"] != "null":
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out
