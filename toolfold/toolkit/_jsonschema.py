"""JSON Schema plumbing every layer shares: pointers, local ``$ref``s, strict-mode nulls.

Pure functions over plain data (no jsonschema import): toolkit checks and
compiles schemas with them, the dialect compiler walks schemas with them, and
the test model samples values with them. They read a schema and never mutate it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard
from urllib.parse import unquote

__all__ = [
    "MISSING",
    "accepts_null",
    "anchors_and_refs",
    "deref",
    "drop_optional_nulls",
    "escape",
    "not_json",
    "ref_loops",
    "resolve_local",
    "short_int",
    "too_many_digits",
    "unescape",
]

MISSING: Any = object()
"""What `resolve_local` returns for a reference to nothing."""

_MAX_HOPS = 64  # $ref, allOf and union hops in a row, without descending into the value


def escape(token: str) -> str:
    """Escape one JSON-pointer token (RFC 6901): ``~`` -> ``~0``, ``/`` -> ``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    """Undo `escape`."""
    return token.replace("~1", "/").replace("~0", "~")


def too_many_digits(number: int) -> bool:
    """Whether ``json.dumps`` cannot write ``number``: more digits than Python turns
    into text (``sys.get_int_max_str_digits()``, 4300 unless changed)."""
    if number.bit_length() <= 14_000:  # under 4300 digits: the usual case, no text made
        return False
    try:
        str(number)
    except ValueError:
        return True
    return False


def short_int(number: int) -> str:
    """An int for a message: its digits, or its size when it has many (its repr may fail)."""
    if number.bit_length() <= 200:
        return repr(number)
    return f"an integer of about {int(number.bit_length() * 0.30103) + 1} digits"


def not_json(value: Any) -> list[str]:
    """Where ``value`` (a schema given as Python data) is not JSON, each place by its
    JSON pointer: NaN or an infinity, an object key that is not a string (which
    ``json.dumps`` would quietly turn into one), a value of a type JSON has not (a
    set, a date, any object), a container that holds itself. Lists and tuples
    are arrays, any mapping an object. Empty when it is JSON."""
    problems: list[str] = []
    inside: set[int] = set()  # the containers on the path walked, to stop at a cycle

    def walk(node: Any, pointer: str) -> None:
        where = pointer or "/"
        if isinstance(node, int) and not isinstance(node, bool) and too_many_digits(node):
            problems.append(f"{where}: {short_int(node)} is more than JSON text can carry")
            return
        if node is None or isinstance(node, (str, bool, int)):
            return
        if isinstance(node, float):
            if not math.isfinite(node):
                problems.append(f"{where}: {node!r} is not a JSON number (no NaN or infinity)")
            return
        if not isinstance(node, (Mapping, list, tuple)):
            kind = type(node).__qualname__
            problems.append(f"{where}: a {kind} is not JSON (use objects, arrays and scalars)")
            return
        if id(node) in inside:
            problems.append(f"{where}: the value contains itself")
            return
        inside.add(id(node))
        if isinstance(node, Mapping):
            for key, item in node.items():
                if isinstance(key, str):
                    walk(item, f"{pointer}/{escape(key)}")
                else:
                    kind = type(key).__qualname__
                    problems.append(f"{where}: a key of type {kind} ({key!r}) is not a string")
        else:
            for index, item in enumerate(node):
                walk(item, f"{pointer}/{index}")
        inside.discard(id(node))

    walk(value, "")
    return problems


def resolve_local(root: Any, ref: str) -> Any:
    """The node a local ``$ref`` (``#`` or ``#/...``) points to in ``root``, or MISSING.

    The fragment is percent-decoded first, as jsonschema does (a URI fragment);
    references to other documents and to ``$anchor``s are MISSING.
    """
    if not ref.startswith("#"):
        return MISSING
    body = unquote(ref[1:]) if "%" in ref else ref[1:]
    if not body:
        return root
    if not body.startswith("/"):
        return MISSING
    node = root
    for raw in body[1:].split("/"):
        token = unescape(raw)
        if _is_mapping(node) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return MISSING
    return node


# Keywords whose schemas apply to the very value the schema applies to: a loop of
# them and ``$ref``s never gets to a smaller value, so checking any value against
# it recurses forever (jsonschema and the fast check alike).
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
# Keywords whose schemas apply to a part of the value (an item, a property's
# value, a key): a loop through one of them ends with the value (a tree).
_INTO_ONE = (
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
)
_INTO_MANY = ("properties", "patternProperties")


# The drafts jsonschema knows by their ``$schema`` (less an empty ``#`` fragment).
_DRAFTS = {
    "http://json-schema.org/draft-03/schema": "draft-03",
    "http://json-schema.org/draft-04/schema": "draft-04",
    "http://json-schema.org/draft-06/schema": "draft-06",
    "http://json-schema.org/draft-07/schema": "draft-07",
    "https://json-schema.org/draft/2019-09/schema": "2019-09",
    "https://json-schema.org/draft/2020-12/schema": "2020-12",
}


def _draft(root: Any) -> str:
    """The draft a tool's ``root`` schema is checked under, as jsonschema picks it for
    a tool: its ``$schema``'s, else (none, or one jsonschema does not know) 2020-12."""
    named = root.get("$schema") if _is_mapping(root) else None
    if isinstance(named, str):
        return _DRAFTS.get(named.removesuffix("#"), "2020-12")
    return "2020-12"


def ref_loops(root: Any) -> list[str]:
    """Each loop of local ``$ref``s that never descends into the value, as a path.

    ``{"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}}``
    reached from the root gives ``"#/$defs/A -> #/$defs/B -> #/$defs/A"``;
    ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else`` and
    ``dependentSchemas`` hop in place too, and so do, under Draft 2020-12 (or no
    ``$schema``), ``$dynamicRef`` (to its anchor) and, under Draft 2019-09,
    ``$recursiveRef``. A reference under ``properties``,
    ``items`` and the like (a tree: ``{"items": {"$ref": "#"}}``) is no loop.
    Only what the root reaches is looked at; walked without recursion, so a
    deeply nested schema is no problem either.
    """
    base = root.get("$id") if _is_mapping(root) else None
    base = base.rstrip("#") if isinstance(base, str) and base else None
    # Each schema resource's anchors (a "#name" names one of the resource holding the
    # reference: the root's, or a nested $id's), by the resource's id.
    anchors: dict[int, dict[str, Any]] = {}
    # A $dynamicRef hops to its anchor in place as a $ref does (in one document
    # its dynamic scope finds that same anchor); so does Draft 2019-09's
    # $recursiveRef ("#": the root). Each only under the draft jsonschema checks
    # the schema under, which ignores the other's keyword (and both, before 2019-09).
    draft = _draft(root)
    refs: tuple[str, ...] = ("$ref",)
    if draft == "2020-12":
        refs += ("$dynamicRef",)
    elif draft == "2019-09":
        refs += ("$recursiveRef",)
    places: dict[int, str] = {}  # id of each schema reached -> its pointer (its $ref's)
    hops: dict[int, list[int]] = {}  # id -> the ids of the schemas applying in place
    todo: list[tuple[Any, str, Any]] = [(root, "#", root)]
    while todo:
        schema, where, resource = todo.pop()
        if not _is_mapping(schema) or id(schema) in places:
            continue
        places[id(schema)] = where
        own_id = schema.get("$id")
        if isinstance(own_id, str) and own_id and not own_id.startswith("#"):
            resource = schema
        in_place: list[tuple[Any, str]] = []
        for ref_key in refs:
            ref = schema.get(ref_key)
            if not isinstance(ref, str):
                continue
            if base is not None and ref.startswith(base):
                ref = ref[len(base) :] or "#"
            target = resolve_local(root, ref)
            if target is MISSING and ref.startswith("#"):
                if id(resource) not in anchors:
                    anchors[id(resource)] = _anchors(resource)
                target = anchors[id(resource)].get(ref[1:], MISSING)
            if target is not MISSING:
                in_place.append((target, ref))
        for key in _IN_PLACE_ONE:
            if key in schema:
                in_place.append((schema[key], f"{where}/{key}"))
        for key in _IN_PLACE_MANY:
            if isinstance(schema.get(key), list):
                in_place += [(s, f"{where}/{key}/{i}") for i, s in enumerate(schema[key])]
        dependent = schema.get("dependentSchemas")
        if _is_mapping(dependent):
            in_place += [(s, f"{where}/dependentSchemas/{escape(k)}") for k, s in dependent.items()]
        hops[id(schema)] = [id(s) for s, _ in in_place if _is_mapping(s)]
        into: list[tuple[Any, str]] = []
        for key in _INTO_ONE:
            if key in schema:
                into.append((schema[key], f"{where}/{key}"))
        for key in ("items", "prefixItems"):
            if isinstance(schema.get(key), list):
                into += [(s, f"{where}/{key}/{i}") for i, s in enumerate(schema[key])]
        for key in _INTO_MANY:
            if _is_mapping(schema.get(key)):
                into += [(s, f"{where}/{key}/{escape(k)}") for k, s in schema[key].items()]
        # (a reference's target is walked in the resource holding it, not always the
        # right one for a target in another resource: only its anchors would differ)
        todo += [(s, w, resource) for s, w in (*in_place, *into)]
    # A depth-first walk of the in-place hops, with an explicit stack: a hop back
    # to a schema on the path being walked closes a loop.
    loops: list[str] = []
    done: set[int] = set()
    for start in places:
        if start in done:
            continue
        path = [start]
        on_path = {start}
        stack = [iter(hops[start])]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                node = path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            if step in on_path:
                loop = [*path[path.index(step) :], step]
                loops.append(" -> ".join(places[node] for node in loop))
            elif step not in done:
                path.append(step)
                on_path.add(step)
                stack.append(iter(hops[step]))
    return loops


def _anchors(root: Any) -> dict[str, Any]:
    """Each ``$anchor`` (and ``$dynamicAnchor``) name of ``root`` -> the schema it names."""
    pointers = anchors_and_refs(root)[0]
    return {name: resolve_local(root, pointer) for name, pointer in pointers.items()}


# Keywords whose values are data, not schemas: an "$anchor" or "$ref" key in them means
# nothing. (A property may have one of these names: a properties map holds schemas.)
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})
# Keywords whose values map names (of properties, definitions, ...) to schemas.
_NAMED_SCHEMAS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)


def anchors_and_refs(root: Any) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The anchors and ``$ref``s of ``root``'s own schema resource, by JSON pointer.

    Schemas are walked, data is not: ``enum``, ``const``, ``default``,
    ``examples`` and ``example`` are skipped, unless they name a property (or a
    definition). A schema below the root with an ``$id`` of its own (not a bare
    ``"#name"``) is another resource: its anchors are not reached by a ``"#name"``
    of the root, and its references are relative to it, so neither is collected.

    Returns:
        Each ``$anchor`` and ``$dynamicAnchor`` name -> the pointer of the schema it
        names (``"#/$defs/Node"``, ``"#"`` the root; the first one in document order),
        and each ``$ref`` string with the pointer of the schema that holds it
        (``""`` the root).
    """
    anchors: dict[str, str] = {}
    refs: list[tuple[str, str]] = []
    todo: list[tuple[Any, str]] = [(root, "")]
    while todo:
        node, where = todo.pop()
        if isinstance(node, list):
            todo += reversed([(v, f"{where}/{i}") for i, v in enumerate(node)])
            continue
        if not _is_mapping(node):
            continue
        own_id = node.get("$id")
        if where and isinstance(own_id, str) and not own_id.startswith("#"):
            continue
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                anchors.setdefault(node[key], f"#{where}")
        if isinstance(node.get("$ref"), str):
            refs.append((where, node["$ref"]))
        children: list[tuple[Any, str]] = []
        for key, value in node.items():
            here = f"{where}/{escape(str(key))}"
            if key in _NAMED_SCHEMAS and _is_mapping(value):
                children += [(sub, f"{here}/{escape(str(k))}") for k, sub in value.items()]
            elif key not in _DATA_KEYWORDS:
                children.append((value, here))
        todo += reversed(children)
    return anchors, refs


def deref(root: Any, schema: Any, limit: int = 32) -> Any:
    """Follow a chain of pure ``{"$ref": ...}`` nodes to the schema they stand for.

    A node with keywords beside its ``$ref`` is returned as it is (its
    siblings mean something), and so is a reference to nothing; ``limit`` hops
    at most (more is a cycle).
    """
    while limit and _is_mapping(schema) and "$ref" in schema and len(schema) == 1:
        target = resolve_local(root, schema["$ref"]) if isinstance(schema["$ref"], str) else MISSING
        if target is MISSING:
            return schema
        schema = target
        limit -= 1
    return schema


def accepts_null(root: Any, schema: Any, _seen: frozenset[int] = frozenset()) -> bool:
    """Whether ``null`` is valid under ``schema`` (conservative: False when unsure)."""
    if schema is True or (_is_mapping(schema) and not schema):
        return True
    if not _is_mapping(schema) or id(schema) in _seen:
        return False
    seen = _seen | {id(schema)}
    ref = schema.get("$ref", MISSING)
    if ref is not MISSING:
        target = resolve_local(root, ref) if isinstance(ref, str) else MISSING
        if target is MISSING or not accepts_null(root, target, seen):
            return False
    t = schema.get("type", MISSING)
    if (
        t is not MISSING
        and "null" not in (t if isinstance(t, list) else [t])
        and schema.get("nullable") is not True
    ):
        return False
    if "enum" in schema and None not in schema["enum"]:
        return False
    if "const" in schema and schema["const"] is not None:
        return False
    for key in ("anyOf", "oneOf"):
        if key in schema and not any(accepts_null(root, b, seen) for b in schema[key]):
            return False
    if "allOf" in schema and not all(accepts_null(root, b, seen) for b in schema["allOf"]):
        return False
    return "not" not in schema


def drop_optional_nulls(value: Any, schema: Any, root: Any) -> Any:
    """``value`` without the nulls strict mode puts in place of left-out optional properties.

    Strict modes (OpenAI's ``strict: true``) make every property required and
    the optional ones nullable, so a model sends ``"limit": null`` to mean
    "use the default". Such a null is removed wherever the property is
    optional and its own schema does not accept null: at any depth, through
    local ``$ref``s, ``allOf`` members and the ``anyOf``/``oneOf`` branch the
    value was made for. Only what changes is copied: with nothing to drop,
    ``value`` itself comes back.

    Args:
        value: Decoded arguments (or any JSON value under ``schema``).
        schema: The schema ``value`` answers (a part of ``root``).
        root: The whole schema, for ``$ref``s.
    """
    return _drop(value, schema, root, 0)


def _drop(value: Any, schema: Any, root: Any, hops: int) -> Any:
    if hops > _MAX_HOPS or not isinstance(value, (dict, list)):
        return value
    if not _is_mapping(schema):
        return value
    if "$ref" in schema:
        schema = deref(root, schema)  # a chain of pure references
        if not _is_mapping(schema):
            return value
        ref = schema.get("$ref")  # still there: it has siblings, or points to nothing
        target = resolve_local(root, ref) if isinstance(ref, str) else MISSING
        if target is not MISSING:
            value = _drop(value, target, root, hops + 1)
    if "allOf" in schema:
        for member in schema["allOf"]:
            value = _drop(value, member, root, hops + 1)
    if "anyOf" in schema or "oneOf" in schema:
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list):
                branch = _branch_for(value, branches, root)
                if branch is not None:
                    value = _drop(value, branch, root, hops + 1)
    if isinstance(value, dict):
        return _drop_in_object(value, schema, root)
    items = schema.get("items")
    if _is_mapping(items):
        new_items = [_drop(item, items, root, 0) for item in value]
        changed = any(a is not b for a, b in zip(new_items, value, strict=True))
        return new_items if changed else value
    return value


def _is_mapping(schema: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(schema) is dict or isinstance(schema, Mapping)


def _drop_in_object(value: dict[str, Any], schema: Mapping[str, Any], root: Any) -> dict[str, Any]:
    props = schema.get("properties")
    if not _is_mapping(props):
        return value
    required = schema.get("required", ())
    out: dict[str, Any] | None = None
    for key, item in value.items():
        sub = props.get(key, MISSING)
        if sub is MISSING:
            continue
        if item is None:
            if key in required or accepts_null(root, sub):
                continue
            new: Any = MISSING  # strict mode's stand-in for "absent"
        elif isinstance(item, (dict, list)):
            new = _drop(item, sub, root, 0)
            if new is item:
                continue
        else:
            continue
        if out is None:
            out = dict(value)
        if new is MISSING:
            del out[key]
        else:
            out[key] = new
    return value if out is None else out


def _branch_for(value: Any, branches: list[Any], root: Any) -> Any:
    """The union branch ``value`` was made for, or None when that is unclear.

    An object goes to a branch whose properties hold all its keys and whose
    required keys it has, an array to an array branch: of those, the first that
    takes the value as it is (drops none of its nulls), else the first; failing
    that, to the one branch of its shape (objects: with properties, arrays: with
    items). So a null that one branch takes (``y: int | None``) stays, as the
    run keeps it when the arguments validate, though another branch would
    read it as "left out" (``y: int = 0``).
    """
    fits = []
    for branch in branches:
        target = deref(root, branch)
        if not _is_mapping(target):
            continue
        nested = target.get("anyOf", target.get("oneOf"))
        if isinstance(nested, list) and _branch_for(value, nested, root) is not None:
            fits.append(branch)
            continue
        t = target.get("type")
        types = set(t) if isinstance(t, list) else {t}
        if isinstance(value, dict) and ("object" in types or "properties" in target):
            props = target.get("properties", {})
            if set(value) <= set(props) and set(target.get("required", ())) <= set(value):
                fits.append(branch)
        elif isinstance(value, list) and "array" in types:
            fits.append(branch)
    if len(fits) > 1 and isinstance(value, dict) and None in value.values():
        return next((b for b in fits if not _drops_here(value, b, root)), fits[0])
    if fits:
        return fits[0]
    shape = "properties" if isinstance(value, dict) else "items"
    found = [b for b in branches if shape in _mapping(deref(root, b))]
    return found[0] if len(found) == 1 else None


def _drops_here(value: dict[str, Any], branch: Any, root: Any) -> bool:
    """Whether `_drop_in_object` would drop a null of ``value`` itself under ``branch``
    (not one deeper in it: each branch is judged in one step, never walked whole)."""
    target = _mapping(deref(root, branch))
    props = _mapping(target.get("properties"))
    required = target.get("required", ())
    return any(
        item is None and key in props and key not in required
        and not accepts_null(root, props[key])
        for key, item in value.items()
    )  # fmt: skip


def _mapping(schema: Any) -> Mapping[str, Any]:
    return schema if _is_mapping(schema) else {}
