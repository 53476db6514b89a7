"""What the walker knows about JSON Schema beyond pointers and `$ref`s: keyword sets,
`allOf` merging, disjoint unions, cycles, nullable forms.

Pointers, local `$ref` resolution and null acceptance are toolkit's
(`toolfold.toolkit._jsonschema`), shared with every layer. All functions read
the tool's own schema and never mutate it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolfold.toolkit._jsonschema import anchors_and_refs, deref, resolve_local, unescape
from toolfold.toolkit._jsontypes import json_type

# Keywords that change which instances validate. Everything else (title,
# description, default, examples, format, vendor keys ...) is an annotation:
# removing it never makes the schema accept more.
VALIDATION_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "dependencies",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "prefixItems",
        "items",
        "additionalItems",
        "contains",
        "properties",
        "patternProperties",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "$ref",
        "$dynamicRef",
        "nullable",
    }
)

# Annotations worth keeping in front of the model when a dialect cannot carry them.
DESCRIBED_ANNOTATIONS = frozenset({"default", "examples", "example", "format"})


def show(key: str, value: Any) -> str:
    """``key: <value as JSON>``, as written into descriptions."""
    return f"{key}: {json.dumps(value, ensure_ascii=False, sort_keys=True)}"


def def_name(ref: str) -> str | None:
    """``"#/$defs/X"`` or ``"#/definitions/X"`` -> ``"X"``; other refs -> None."""
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix) and "/" not in ref[len(prefix) :]:
            return unescape(ref[len(prefix) :])
    return None


def _kinds(root: Any, branch: Any) -> set[str] | None:
    branch = deref(root, branch)
    if not isinstance(branch, dict):
        return None
    if "const" in branch:
        return {json_type(branch["const"])}
    if "enum" in branch:
        return {json_type(v) for v in branch["enum"]}
    t = branch.get("type")
    if t is None:
        return None
    kinds = set(t) if isinstance(t, list) else {t}
    # an integer is a number: the two kinds overlap
    if "number" in kinds or "integer" in kinds:
        kinds |= {"number", "integer"}
    return kinds


def _tag_values(root: Any, branch: Any, prop: str) -> set[str] | None:
    branch = deref(root, branch)
    if not isinstance(branch, dict) or prop not in branch.get("required", ()):
        return None
    tag = deref(root, branch.get("properties", {}).get(prop))
    if not isinstance(tag, dict):
        return None
    if "const" in tag:
        return {repr(tag["const"])}
    if "enum" in tag:
        return {repr(v) for v in tag["enum"]}
    return None


def branches_disjoint(root: Any, branches: list[Any]) -> bool:
    """Whether no instance can match two branches, so ``oneOf`` equals ``anyOf``.

    Two proofs are tried: the branches accept pairwise different JSON types, or
    they are objects told apart by a required tag property with disjoint values.
    """
    kinds = [_kinds(root, b) for b in branches]
    if all(k is not None for k in kinds) and _pairwise_disjoint(
        [k for k in kinds if k is not None]
    ):
        return True
    first = deref(root, branches[0]) if branches else None
    if not isinstance(first, dict):
        return False
    for prop in first.get("required", ()):
        values = [_tag_values(root, b, prop) for b in branches]
        if all(v is not None for v in values) and _pairwise_disjoint(
            [v for v in values if v is not None]
        ):
            return True
    return False


def _pairwise_disjoint(sets: list[set[str]]) -> bool:
    seen: set[str] = set()
    for s in sets:
        if seen & s:
            return False
        seen |= s
    return True


def merge_all_of(root: Any, parent: Mapping[str, Any], members: list[Any]) -> dict[str, Any] | None:
    """Fold ``allOf`` members into their parent, or None when that would change meaning.

    Members that are local ``$ref`` nodes are resolved first. A merge is refused
    when two parts give different values to the same keyword (properties are
    merged one by one), or when a part closes its object with
    ``additionalProperties: false`` while another part adds properties.
    """
    parts: list[Mapping[str, Any]] = [parent]
    for member in members:
        target = deref(root, member)
        if not isinstance(target, dict) or "$ref" in target:
            return None
        parts.append(target)
    merged: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if key not in merged:
                merged[key] = dict(value) if key == "properties" else value
            elif key == "properties":
                for name, sub in value.items():
                    if name in merged[key] and merged[key][name] != sub:
                        return None
                    merged[key][name] = sub
            elif key == "required":
                merged[key] = [*merged[key], *(r for r in value if r not in merged[key])]
            elif key in ("description", "title"):
                continue  # the outermost annotation wins
            elif merged[key] != value:
                return None
    names = set(merged.get("properties", {}))
    for part in parts:
        if part.get("additionalProperties") is False and not names <= set(
            part.get("properties", {})
        ):
            return None
    return merged


def declared_names(root: Any, schema: Any) -> set[str]:
    """The property names ``schema`` declares itself or through its ``$ref`` and ``allOf``
    members (what a ``required`` next to a reference may name: OpenAPI inheritance)."""
    names: set[str] = set()
    todo, seen = [schema], set()
    while todo:
        node = todo.pop()
        if not isinstance(node, Mapping) or id(node) in seen:
            continue
        seen.add(id(node))
        props = node.get("properties")
        if isinstance(props, Mapping):
            names |= set(props)
        ref = node.get("$ref")
        if isinstance(ref, str):
            todo.append(resolve_local(root, ref))
        members = node.get("allOf")
        if isinstance(members, list):
            todo += members
    return names


def anchors_as_pointers(
    source: dict[str, Any],
) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """``source`` with every ``$ref`` that names one of its schemas other than by a plain
    pointer written as that pointer, so definitions, cycles and nulls are found through
    it as through any local reference: a ``"#name"`` naming an ``$anchor`` or
    ``$dynamicAnchor``, and a reference through the root's ``$id``
    (``"https://example.com/t.json#/$defs/P"`` in a schema of that ``$id``).

    Returns:
        The rewritten copy (``source`` itself when there is nothing to rewrite),
        and for each reference rewritten: where it is, the reference, the pointer.
    """
    anchors, refs = anchors_and_refs(source)
    root_id = source.get("$id")
    base = root_id.rstrip("#") if isinstance(root_id, str) and root_id[:1] != "#" else ""
    found: list[tuple[str, str, str]] = []
    for where, ref in refs:
        local = ref[len(base) :] if base and ref.startswith(base) else ref
        if local[:1] not in ("", "#"):
            continue  # another document (a tool refuses it) or a longer name than the $id
        local = local or "#"
        pointer = anchors.get(local[1:]) if local[1:2] not in ("", "/") else local
        if pointer is not None and pointer != ref:
            found.append((where, ref, pointer))
    if not found:
        return source, []
    out: dict[str, Any] = json.loads(json.dumps(source))
    for where, _ref, pointer in found:
        at: Any = out
        for token in where.split("/")[1:]:
            at = at[int(token)] if isinstance(at, list) else at[unescape(token)]
        at["$ref"] = pointer
    return out, found


def cyclic_definitions(source: Mapping[str, Any], root_def: str | None) -> set[str]:
    """Names (``"#"`` for the root) of the definitions that can reach themselves."""
    defs: dict[str, Any] = {**source.get("definitions", {}), **source.get("$defs", {})}

    def targets(node: Any, out: set[str]) -> set[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str):
                    name = "#" if value == "#" else def_name(value)
                    if name is not None:
                        out.add("#" if name == root_def else name)
                elif key not in ("$defs", "definitions"):
                    targets(value, out)
        elif isinstance(node, list):
            for item in node:
                targets(item, out)
        return out

    graph = {name: targets(body, set()) for name, body in defs.items() if name != root_def}
    graph["#"] = targets(defs.get(root_def, source) if root_def else source, set())
    cyclic: set[str] = set()
    for start in graph:
        stack, seen = list(graph[start]), set()
        while stack:
            cur = stack.pop()
            if cur == start:
                cyclic.add(start)
                break
            if cur not in seen and cur in graph:
                seen.add(cur)
                stack.extend(graph[cur])
    return cyclic


def make_nullable(node: Any) -> Any:
    """``node`` widened to also accept null, in the forms strict decoders know."""
    if not isinstance(node, dict) or not node:
        return node
    if "$ref" in node and len(node) == 1:
        return {"anyOf": [dict(node), {"type": "null"}]}
    out = dict(node)
    if "anyOf" in out:
        out["anyOf"] = [*out["anyOf"], {"type": "null"}]
        return out
    t = out.get("type")
    if t is not None:
        types = [t] if isinstance(t, str) else list(t)
        if "null" not in types:
            out["type"] = [*types, "null"]
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    if t is None and "enum" not in out:
        return {"anyOf": [out, {"type": "null"}]}
    return out
