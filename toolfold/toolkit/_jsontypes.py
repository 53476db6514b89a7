"""The JSON Schema type name of a decoded JSON value, in one place for every layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def json_type(value: Any) -> str:
    """``"null"``, ``"boolean"``, ``"integer"``, ``"number"``, ``"string"``, ``"object"`` or ``"array"``.

    ``bool`` is checked before ``int`` (it is one in Python); any mapping is an
    object and any other container an array.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, Mapping) else "array"
