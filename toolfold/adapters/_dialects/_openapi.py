"""The OpenAPI 3.0 ``Schema`` form of Gemini's ``FunctionDeclaration.parameters`` [G4, G5].

Applied to each node the walker has compiled under the ``gemini-openapi``
profile: unions with null become ``nullable: true``, enums must hold strings,
type names are upper case, and ``propertyOrdering`` keeps the declared order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolfold.adapters._dialects._refs import show

Note = Callable[..., None]


def to_openapi(out: dict[str, Any], path: str, note: Note, label: str) -> dict[str, Any]:
    """Rewrite a compiled node into the OpenAPI 3.0 ``Schema`` form Gemini's ``parameters`` takes."""
    branches = out.get("anyOf")
    if isinstance(branches, list):
        rest = [b for b in branches if b not in ({"type": "NULL"}, {"type": "null"})]
        if len(rest) < len(branches):
            if len(rest) == 1 and isinstance(rest[0], dict):
                out = {**rest[0], **{k: v for k, v in out.items() if k != "anyOf"}}
            else:
                out = {**out, "anyOf": rest}
            out["nullable"] = True
            note(path, "anyOf", "rewritten", "a union with null is written as nullable: true")
    enum = out.get("enum")
    if isinstance(enum, list):
        if None in enum:
            enum = out["enum"] = [v for v in enum if v is not None]
            out["nullable"] = True
            note(path, "enum", "rewritten", "null in an enum is written as nullable: true")
        if any(not isinstance(v, str) for v in enum):
            del out["enum"]
            text = show("enum", enum)
            desc = out.get("description")
            out["description"] = f"{desc} ({text})" if desc else text
            note(path, "enum", "moved_to_description", f"{label} accepts string enums only", True)
    t = out.get("type")
    if isinstance(t, str):
        out["type"] = t.upper()
    elif t is None and out.get("enum"):  # only strings are left: the type is implied
        out["type"] = "STRING"
        note(path, "type", "added", "the OpenAPI Schema needs a type; the enum holds strings")
    props = out.get("properties")
    if isinstance(props, dict) and len(props) > 1:
        out["propertyOrdering"] = list(props)
        note(
            path,
            "propertyOrdering",
            "added",
            "Gemini orders keys by name unless told the declared order",
        )
    return out
