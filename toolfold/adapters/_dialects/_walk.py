"""The one schema walker every dialect shares, driven by a `Profile`.

The walker reads the tool's schema and builds a new one; it never mutates its
input. Every change it makes is recorded as a `SchemaRewrite` whose path points
into the tool's own schema, so a user can find what moved and why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from toolfold.adapters._dialects._model import RewriteAction, SchemaRewrite
from toolfold.adapters._dialects._openapi import to_openapi
from toolfold.adapters._dialects._profiles import Profile
from toolfold.adapters._dialects._refs import (
    DESCRIBED_ANNOTATIONS,
    VALIDATION_KEYWORDS,
    branches_disjoint,
    cyclic_definitions,
    declared_names,
    def_name,
    make_nullable,
    merge_all_of,
)
from toolfold.adapters._dialects._refs import (
    show as _show,
)
from toolfold.toolkit._jsonschema import MISSING, accepts_null, escape, resolve_local
from toolfold.toolkit._jsontypes import json_type

_LOOKAROUND = re.compile(r"\(\?<?[=!]|\\[1-9]|\\k<")
_FAMILIES = {
    "string": {"minLength", "maxLength", "pattern", "format"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "array": {
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "minContains",
        "maxContains",
        "unevaluatedItems",
    },
    "object": {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
    },
}
_FAMILY_OF = {k: fam for fam, keys in _FAMILIES.items() for k in keys}
_PARENT_ONLY = frozenset({"title", "description", "default", "examples", "example"})
_DEFINITIONS = ("$defs", "definitions")
# Kept keywords whose value a profile may still refuse (`Walker._refused_value`).
_VALUE_CHECKED = frozenset({"format", "pattern", "minItems"})
_OBJECT_KEYWORDS = frozenset({"properties", "required", "additionalProperties"})
# Gemini's OpenAPI type names for the JSON types a repaired enum may hold.
_OPENAPI_TYPES = {
    "array": "ARRAY",
    "boolean": "BOOLEAN",
    "integer": "INTEGER",
    "number": "NUMBER",
    "object": "OBJECT",
    "string": "STRING",
}
# Keywords of a union branch that make taking its parent's properties inexact.
_OPENS_OBJECT = frozenset(
    {"properties", "additionalProperties", "patternProperties", "unevaluatedProperties"}
)
# How a `$ref` to nothing is noted (`_compile` refuses a compiled schema that has one).
UNRESOLVED = "cannot resolve"
# Handled by `Walker._object`, after the other keywords.
_LEFT_TO_OBJECT = frozenset({"required", "additionalProperties"})
# The path of a member of anyOf, oneOf or allOf: its parent (and what the parent's
# $ref or allOf reaches) may declare the names its ``required`` gives.
_MEMBER_PATH = re.compile(r"/(?:anyOf|oneOf|allOf)/\d+$")


def _value_types(values: list[Any]) -> list[dict[str, Any]]:
    """The OpenAPI ``Schema`` branches that accept ``values`` (JSON values, no null): one
    per JSON type, strings as their enum, arrays with items and objects with properties
    typed the same way from what they hold, so every value stays a valid one."""
    by_kind: dict[str, list[Any]] = {}
    for value in values:
        by_kind.setdefault(json_type(value), []).append(value)
    branches: list[dict[str, Any]] = []
    for kind in sorted(by_kind):
        found = by_kind[kind]
        branch: dict[str, Any] = {"type": _OPENAPI_TYPES.get(kind, kind.upper())}
        if kind == "string":
            branch["enum"] = list(dict.fromkeys(found))
        elif kind == "array":
            branch["items"] = _one_of_types([v for array in found for v in array])
        elif kind == "object":
            keys = dict.fromkeys(k for obj in found for k in obj)
            branch["properties"] = {
                k: _one_of_types([obj[k] for obj in found if k in obj]) for k in keys
            }
        branches.append(branch)
    return branches


def _one_of_types(values: list[Any]) -> dict[str, Any]:
    """One ``Schema`` accepting ``values`` (an array's items, an object's property):
    nullable when null is among them; any values (none held) go as STRING."""
    present = [v for v in values if v is not None]
    branches = _value_types(present) if present else [{"type": "STRING"}]
    out = branches[0] if len(branches) == 1 else {"anyOf": branches}
    return {**out, "nullable": True} if len(present) < len(values) else out


def _type_of(value: Any) -> str:
    kind = json_type(value)
    return "number" if kind == "integer" else kind


class Walker:
    """Compiles one schema under one profile and collects the rewrites."""

    def __init__(self, profile: Profile, source: Mapping[str, Any], root_def: str | None) -> None:
        self.profile = profile
        self.source = source
        self.root_def = root_def
        self.rewrites: list[SchemaRewrite] = []
        self.used_defs: list[str] = []
        # What the root moved to a description it cannot carry: the tool's (`_compile`).
        self.root_notes: list[str] = []
        self._seen: set[SchemaRewrite] = set()
        # Path of a $ref's siblings -> the property names its target declares, which
        # their `required` may name (`_required_undeclared`).
        self._inherited: dict[str, set[str]] = {}
        self._stack: list[str] = []
        self._cyclic: set[str] | None = None

    # --- bookkeeping ---------------------------------------------------------

    def note(
        self, path: str, keyword: str, action: RewriteAction, detail: str, lossy: bool = False
    ) -> None:
        rewrite = SchemaRewrite(path, keyword, action, detail, lossy)
        if rewrite not in self._seen:
            self._seen.add(rewrite)
            self.rewrites.append(rewrite)

    def _use_def(self, name: str) -> None:
        if name not in self.used_defs:
            self.used_defs.append(name)

    def walk_root(self, schema: Mapping[str, Any], path: str) -> Any:
        """Compile the root object; references back to it count as recursion."""
        self._stack.append("#")
        if self.root_def is not None:
            self._stack += [
                f"#/$defs/{escape(self.root_def)}",
                f"#/definitions/{escape(self.root_def)}",
            ]
        try:
            return self.node(schema, path, root=True)
        finally:
            self._stack.clear()

    # --- nodes ---------------------------------------------------------------

    def node(self, schema: Any, path: str, *, root: bool = False, typed: bool = True) -> Any:
        """The compiled form of ``schema`` found at ``path``."""
        profile = self.profile
        if schema is True or not isinstance(schema, dict) or not schema:
            return self._bare(schema, path, typed)
        schema = dict(schema)
        keep = profile.root_keep if root and profile.root_keep is not None else profile.keep
        union_key = self._normalize(schema, path, keep)
        if "$ref" in schema:
            return self._ref(schema, path, typed)
        if profile.openapi:
            self._type_branches(schema, path, union_key)
        if not root and ("$defs" in schema or "definitions" in schema):
            self._drop_nested_defs(schema, path)
        declared = schema.get("type")
        if isinstance(declared, list) and len(declared) > 1 and not profile.type_lists:
            return self._split_types(schema, path, typed)
        schema, types, is_object = self._types(schema, path, typed)
        closed = self._closed_tuple(schema, keep)
        out, notes = self._keywords(schema, path, root, keep, types, union_key)
        if closed is not None:
            self._tuple_end(*closed, path, keep, out, notes)
        if profile.need_types and typed and "array" in types and "items" not in out:
            label = profile.label
            self.note(
                path, "items", "refused", f"{label} needs arrays to declare typed items", True
            )
        if is_object:
            self._object(schema, path, out, root, keep)
        if notes and "description" in keep:
            desc = out.get("description")
            joined = "; ".join(notes)
            out["description"] = f"{desc} ({joined})" if desc else joined
        elif notes and root:
            self.root_notes += notes
        out = self._finish(out, path)
        if profile.openapi and typed:
            if "items" not in out and not profile.need_types:
                self._openapi_items(out, path, schema.get("prefixItems"))
            return self._openapi_typed(out, path, schema.get("enum"))
        return out

    def _bare(self, schema: Any, path: str, typed: bool) -> Any:
        """A schema that is not a non-empty object: ``true``/``{}`` (anything) or not a schema."""
        label = self.profile.label
        if schema is True or isinstance(schema, dict):
            if self.profile.openapi and typed and not self.profile.need_types:
                return self._openapi_typed({}, path, None)
            if self.profile.need_types and typed:
                self.note(
                    path,
                    "type",
                    "refused",
                    f"{label} cannot send a schema that accepts any value; give it a type",
                    lossy=True,
                )
            return {}
        if self.profile.need_types:
            self.note(path, "", "refused", f"{label} cannot send the schema {schema!r}", True)
        return schema

    def _keywords(
        self,
        schema: dict[str, Any],
        path: str,
        root: bool,
        keep: frozenset[str],
        types: set[str],
        union_key: str,
    ) -> tuple[dict[str, Any], list[str]]:
        """Every keyword but the object's closing ones, compiled; and the notes for the description."""
        out: dict[str, Any] = {}
        notes: list[str] = []
        for key, value in schema.items():
            if key in _LEFT_TO_OBJECT or (root and key in _DEFINITIONS):
                continue
            handler = _SUBSCHEMA_HANDLERS.get(key) if key in keep else None
            compiled = MISSING if handler is None else handler(self, value, path, union_key)
            if compiled is MISSING:
                self._keyword(key, value, path, keep, types, out, notes)
            else:
                out[key] = compiled
        return out, notes

    def _finish(self, out: dict[str, Any], path: str) -> dict[str, Any]:
        return to_openapi(out, path, self.note, self.profile.label) if self.profile.openapi else out

    def _openapi_items(self, out: dict[str, Any], path: str, prefix: Any) -> None:
        """Give an array without ``items`` the items Gemini's OpenAPI ``Schema`` requires.

        A tuple's ``prefixItems`` (dropped, moved to the description) decide
        them: one type is that type, several the ``anyOf`` of them, so the
        model can still send the values the tool takes. Only an array that says
        nothing of its items gets STRING items. Either is a lossy rewrite.
        """
        if out.get("type") != "ARRAY":
            return
        label = self.profile.label
        branches = self._prefix_branches(prefix, path)
        if len(branches) == 1:
            out["items"] = branches[0]
        elif branches:
            out["items"] = {"anyOf": branches}
        else:
            out["items"] = {"type": "STRING"}
            detail = f"{label} needs arrays to declare items; items of any type are sent as STRING"
            self.note(path, "items", "added", detail, True)
            return
        detail = (
            f"{label} needs arrays to declare items and has no prefixItems; "
            "items are sent as the tuple's item types (any of them at any position)"
        )
        self.note(path, "items", "added", detail, True)

    def _prefix_branches(self, prefix: Any, path: str) -> list[Any]:
        """A tuple's ``prefixItems`` compiled, each distinct one once."""
        branches: list[Any] = []
        if isinstance(prefix, list):
            for i, item in enumerate(prefix):
                compiled = self.node(item, f"{path}/prefixItems/{i}")
                if compiled not in branches:
                    branches.append(compiled)
        return branches

    def _closed_tuple(
        self, schema: dict[str, Any], keep: frozenset[str]
    ) -> tuple[list[Any], bool] | None:
        """The ``prefixItems`` of a tuple that ends, which the profile cannot send as one, and
        whether ``items: false`` ends it (else a ``maxItems`` no more than them: zod's
        ``z.tuple``, draft 7's list ``items`` without ``additionalItems``). They and
        ``items`` are then taken out of ``schema``, for `_tuple_end` to replace."""
        prefix = schema.get("prefixItems")
        if "prefixItems" in keep or not prefix or not isinstance(prefix, list):
            return None
        most = schema.get("maxItems")
        if not isinstance(most, int) or isinstance(most, bool):
            most = None
        elif most <= 0:
            return None  # (no item at all: nothing to type)
        end = most if most is not None and most <= len(prefix) else len(prefix)
        closed_by_items = schema.get("items") is False
        if not closed_by_items and end == len(prefix) and most != end:
            return None  # open: more items may follow
        del schema["prefixItems"]
        schema.pop("items", None)
        return prefix[:end], closed_by_items

    def _tuple_end(
        self,
        prefix: list[Any],
        closed_by_items: bool,
        path: str,
        keep: frozenset[str],
        out: dict[str, Any],
        notes: list[str],
    ) -> None:
        """A closed tuple whose dialect has no ``prefixItems``: its items are sent as the
        tuple's item types and its end as ``maxItems``, so the model can still send the
        values the tool takes (``items: false`` alone accepted only ``[]``). Exact when the
        items share one type and the end can be said."""
        label = self.profile.label
        branches = self._prefix_branches(prefix, path)
        out["items"] = branches[0] if len(branches) == 1 else {"anyOf": branches}
        exact = len(branches) == 1
        n = len(prefix)
        detail = f"{label} does not support prefixItems; the closed tuple's items are sent as " + (
            "their one item type" if exact else "its item types (any of them at any position)"
        )
        if "maxItems" in keep:
            out["maxItems"] = min(out.get("maxItems", n), n)
            detail += f", at most {n} of them"
        elif closed_by_items:
            notes.append(_show("items", False))
            detail += "; items: false is moved to the description"
            exact = False
        # (else the maxItems that ends it is moved to the description, a loss said there)
        if not exact:
            notes.append(_show("prefixItems", prefix))
            self.note(
                path,
                "prefixItems",
                "moved_to_description",
                f"{label} does not support prefixItems",
                True,
            )
        self.note(path, "items", "rewritten", detail, not exact)

    def _openapi_typed(self, out: dict[str, Any], path: str, enum: Any) -> dict[str, Any]:
        """``out`` with the type Gemini's OpenAPI ``Schema`` requires, and arrays with ``items``.

        Strict (``need_types``) refuses what has none; the non-strict form
        repairs it, each a lossy rewrite: no type is STRING (the model sends
        text), an enum of non-strings (moved to the description) the union of
        its values' types, an array without items STRING items.
        """
        label = self.profile.label
        kind = out.get("type")
        if kind is not None or "anyOf" in out:
            return out
        if self.profile.need_types:  # (a node with no type at all is refused by `_types`)
            self.note(path, "type", "refused", f"{label} needs a type on every schema", True)
            return out
        values = [v for v in enum if v is not None] if isinstance(enum, list) else []
        if values:
            branches = _value_types(values)
            if len(branches) == 1:
                out.update(branches[0])
            else:
                out["anyOf"] = branches
            sent = " or ".join(b["type"] for b in branches)
            detail = f"{label} needs a type on every schema; the enum's values are sent as {sent}"
        else:
            out["type"] = "STRING"
            detail = f"{label} needs a type on every schema; a value of any type is sent as STRING"
        self.note(path, "type", "added", detail, True)
        return out

    def _type_branches(self, schema: dict[str, Any], path: str, union_key: str) -> None:
        """Give each untyped ``anyOf`` branch of a typed node its parent's type (exact: the
        parent's type applies to the branch's value anyway), where the OpenAPI form would
        otherwise type it STRING or refuse it. An object's branch (``{"required": [..]}``,
        typed ``object`` or not) takes the parent's ``properties`` too, so it is an object
        with declared properties; a node with ``properties`` and no type is an object.
        """
        kind, branches = schema.get("type"), schema.get("anyOf")
        props = schema.get("properties")
        if kind is None and isinstance(props, dict):
            kind = "object"  # (properties make it one: the branches' required name them)
        if not isinstance(kind, str) or not isinstance(branches, list):
            return
        props = props if kind == "object" and isinstance(props, dict) else None
        typed: list[Any] = []
        for i, branch in enumerate(branches):
            if branch is True:
                branch = {}
            if not isinstance(branch, dict) or "$ref" in branch or branch.get("type", kind) != kind:
                typed.append(branch)
                continue
            new = {"type": kind, **branch}
            details = [] if "type" in branch else ["type"]
            if props is not None and not _OPENS_OBJECT & branch.keys():
                new["properties"] = props
                details.append("properties")
            if details:
                typed.append(new)
                detail = f"a branch of a {kind} is sent with its parent's {' and '.join(details)}"
                self.note(f"{path}/{union_key}/{i}", details[0], "added", detail)
            else:
                typed.append(branch)
        schema["anyOf"] = typed

    def _drop_nested_defs(self, schema: dict[str, Any], path: str) -> None:
        for key in _DEFINITIONS:
            if key in schema:
                del schema[key]
                self.note(
                    path,
                    key,
                    "dropped",
                    "definitions below the root are not sent; references into them are inlined",
                )

    def _types(
        self, schema: dict[str, Any], path: str, typed: bool
    ) -> tuple[dict[str, Any], set[str], bool]:
        """The node (typed where the profile needs it), its types, and whether it is an object."""
        declared = schema.get("type")
        types = (
            set(declared)
            if isinstance(declared, list)
            else set()
            if declared is None
            else {declared}
        )
        is_object = "object" in types or (not types and bool(_OBJECT_KEYWORDS & schema.keys()))
        label = self.profile.label
        if (
            self.profile.need_types
            and typed
            and not types
            and not {"enum", "anyOf"} & schema.keys()
        ):
            if is_object:
                schema = {"type": "object", **schema}
                types = {"object"}
                self.note(
                    path, "type", "added", f"{label} needs a type; the schema declares properties"
                )
            else:
                self.note(path, "type", "refused", f"{label} needs a type on every schema", True)
        return schema, types, is_object

    # --- keywords whose values are schemas (when the profile keeps them) ------

    def _properties(self, value: Any, path: str, _union_key: str) -> Any:
        if not isinstance(value, dict):
            return MISSING
        return {
            name: self.node(sub, f"{path}/properties/{escape(name)}") for name, sub in value.items()
        }

    def _items(self, value: Any, path: str, _union_key: str) -> Any:
        return MISSING if isinstance(value, list) else self.node(value, f"{path}/items")

    def _any_of(self, value: Any, path: str, union_key: str) -> Any:
        if not isinstance(value, list):
            return MISSING
        return [self.node(b, f"{path}/{union_key}/{i}") for i, b in enumerate(value)]

    def _one_of(self, value: Any, path: str, _union_key: str) -> Any:
        if not isinstance(value, list):
            return MISSING
        return [self.node(b, f"{path}/oneOf/{i}") for i, b in enumerate(value)]

    def _keyword(
        self,
        key: str,
        value: Any,
        path: str,
        keep: frozenset[str],
        types: set[str],
        out: dict[str, Any],
        notes: list[str],
    ) -> None:
        """A keyword that holds no schema: kept, or moved into the description, or dropped."""
        label = self.profile.label
        if key in keep:
            refusal = self._refused_value(key, value) if key in _VALUE_CHECKED else None
            if refusal is None:
                out[key] = value
                return
            detail, lossy = refusal
            notes.append(_show(key, value))
            self.note(path, key, "moved_to_description", detail, lossy)
        elif key in VALIDATION_KEYWORDS:
            notes.append(_show(key, value))
            self.note(path, key, "moved_to_description", f"{label} does not support {key}", True)
        elif key in DESCRIBED_ANNOTATIONS:
            notes.append(_show(key, value))
            self.note(
                path,
                key,
                "moved_to_description",
                f"{label} does not accept {key}; it is an annotation, kept for the model to read",
            )
        else:
            self.note(path, key, "dropped", f"{label} does not accept the annotation {key}")

    def _refused_value(self, key: str, value: Any) -> tuple[str, bool] | None:
        """Why a kept keyword's value cannot be sent (and whether that loses meaning), if it cannot."""
        profile = self.profile
        label = profile.label
        if key == "format" and profile.formats is not None and value not in profile.formats:
            return f"{label} does not accept format {value!r}; formats are annotations", False
        if key == "pattern" and profile.check_pattern and _LOOKAROUND.search(str(value)):
            return f"{label} does not support regex look-arounds or back-references", True
        if key == "minItems" and profile.min_items is not None and value not in profile.min_items:
            return f"{label} accepts minItems {sorted(profile.min_items)} only", True
        return None

    # --- objects ---------------------------------------------------------------

    def _object(
        self,
        schema: dict[str, Any],
        path: str,
        out: dict[str, Any],
        root: bool,
        keep: frozenset[str],
    ) -> None:
        if self.profile.close_objects or self.profile.openapi:
            self._required_undeclared(schema, path)
        if self.profile.close_objects:
            self._close(schema, path, root)
            out.setdefault("properties", {})
            out["additionalProperties"] = False
        elif self.profile.need_types and self._open_object_refused(schema, path, root):
            pass
        elif "additionalProperties" in schema:
            extra = schema["additionalProperties"]
            if "additionalProperties" in keep:
                out["additionalProperties"] = (
                    extra
                    if isinstance(extra, bool)
                    else self.node(extra, f"{path}/additionalProperties")
                )
            else:
                lossy = not (extra is True or extra == {})
                self.note(
                    path,
                    "additionalProperties",
                    "dropped",
                    f"{self.profile.label} does not accept additionalProperties"
                    + ("; extra keys are no longer refused" if lossy else ""),
                    lossy,
                )
        if self.profile.all_required:
            out["required"] = self._require_all(schema, path, out["properties"])
        elif "required" in schema:
            if "required" in keep:
                out["required"] = list(schema["required"])
            else:
                label = self.profile.label
                self.note(path, "required", "dropped", f"{label} does not accept required", True)

    def _required_undeclared(self, schema: dict[str, Any], path: str) -> None:
        """Refuse ``required`` names that ``properties`` does not declare: in an object the
        profile closes they could never be sent, so no call would be valid; Gemini's OpenAPI
        form answers them with a 400 ("required[0]: property is not defined")."""
        required = schema.get("required")
        if not isinstance(required, list) or _MEMBER_PATH.search(path):
            # (a branch's names may be its parent's, declared there or by what the
            # parent references: refused only where surely undeclared, as main sent them)
            return
        declared = declared_names(self.source, schema) | self._inherited.get(path, set())
        missing = [name for name in required if name not in declared]
        if missing:
            names = ", ".join(repr(name) for name in missing)
            label = self.profile.label
            why = (
                f"{label} closes every object, so no call could have it"
                if self.profile.close_objects
                else f"{label} refuses the tool (HTTP 400: property is not defined)"
            )
            detail = f"required names {names}, which properties does not declare: {why}; declare it"
            self.note(path, "required", "refused", detail, True)

    def _refuse_map(self, path: str) -> None:
        """Note a map (``additionalProperties`` with a schema) the profile cannot send."""
        self.note(
            path,
            "additionalProperties",
            "refused",
            f"{self.profile.label} cannot send a map (additionalProperties with a schema); "
            "declare its properties instead",
            lossy=True,
        )

    def _refuse_open(self, path: str) -> None:
        """Note an object without declared properties the profile cannot send."""
        self.note(
            path,
            "properties",
            "refused",
            f"{self.profile.label} cannot send an object without declared properties",
            True,
        )

    def _open_object_refused(self, schema: dict[str, Any], path: str, root: bool) -> bool:
        """Refuse a map or an object without properties below the root (Gemini's
        OpenAPI form drops additionalProperties); True when it was refused."""
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            self._refuse_map(path)
            return True
        if not root and not schema.get("properties"):
            self._refuse_open(path)
            return True
        return False

    def _bare_root(self) -> bool:
        """Whether the root was given as a bare ``{}`` (a tool without parameters), its
        ``"type": "object"`` stated by the compiler, not by the schema."""
        return self.root_def is None and not self.source.keys() - {"$defs", "definitions"}

    def _close(self, schema: dict[str, Any], path: str, root: bool) -> None:
        """Note what closing an object (``additionalProperties: false``) costs."""
        label = self.profile.label
        extra = schema.get("additionalProperties", MISSING)
        if extra is False:
            return
        if isinstance(extra, dict) and extra:
            self._refuse_map(path)
        elif extra is True or extra == {}:
            # closed, it would refuse the extra keys its own check accepts
            self.note(
                path,
                "additionalProperties",
                "refused",
                f"{label} cannot send an object open to any other key "
                f"(additionalProperties: {'true' if extra is True else '{}'}); "
                "declare its properties instead",
                True,
            )
        elif "properties" not in schema and not (root and self._bare_root()):
            # at the root too: {"type": "object"} (dict[str, Any]) takes any keys; a tool
            # without parameters is {} or has "properties": {} (as a function's has)
            self._refuse_open(path)
        else:
            self.note(
                path,
                "additionalProperties",
                "added",
                f"{label} needs additionalProperties: false on every object",
            )

    def _require_all(self, schema: dict[str, Any], path: str, props: dict[str, Any]) -> list[str]:
        """Every property required; optional ones made nullable unless they already are."""
        label = self.profile.label
        required = schema.get("required", ())
        for name in list(props):
            if name in required:
                continue
            sub = f"{path}/properties/{escape(name)}"
            if accepts_null(self.source, schema["properties"][name]):
                self.note(
                    sub,
                    "required",
                    "made_required",
                    f"optional and nullable: {label} needs every property required; "
                    "absent and null both arrive as null",
                )
            else:
                props[name] = make_nullable(props[name])
                self.note(
                    sub,
                    "required",
                    "made_nullable",
                    f"optional: {label} needs every property required, so it is sent "
                    "as nullable and a null is read back as absent",
                )
        return list(props)

    # --- rewrites that reshape a node before it is walked ----------------------

    def _normalize(self, schema: dict[str, Any], path: str, keep: frozenset[str]) -> str:
        """Apply the exact rewrites (nullable, const, allOf, oneOf, integer bounds).

        Returns:
            The keyword the node's ``anyOf`` came from (``oneOf`` when rewritten).
        """
        if "nullable" in schema and "nullable" not in keep:
            self._nullable(schema, path)
        if "const" in schema and "const" not in keep:
            self._const(schema, path)
        if "allOf" in schema and "allOf" not in keep:
            self._all_of(schema, path)
        union_key = "anyOf"
        if "oneOf" in schema and "oneOf" not in keep:
            union_key = self._one_of_as_any_of(schema, path)
        if self.profile.integer_exclusive and schema.get("type") == "integer":
            self._integer_bounds(schema, path, keep)
        if isinstance(schema.get("items"), list) and "prefixItems" not in schema:
            self._array_items(schema, path)
        return union_key

    def _array_items(self, schema: dict[str, Any], path: str) -> None:
        """Write draft 7's tuple (``items`` a list, ``additionalItems`` the rest) in
        draft 2020-12's words (``prefixItems``, ``items``): the same tuple, walked as one."""
        schema["prefixItems"] = schema.pop("items")
        rest = schema.pop("additionalItems", MISSING)
        if rest is not MISSING:
            schema["items"] = rest
        self.note(
            path,
            "items",
            "rewritten",
            "items as a list (draft 7's tuple) is written as prefixItems"
            + (", additionalItems as items" if rest is not MISSING else ""),
        )

    def _nullable(self, schema: dict[str, Any], path: str) -> None:
        if schema.pop("nullable") is True:
            declared = schema.get("type")
            if isinstance(declared, (str, list)):
                types = [declared] if isinstance(declared, str) else list(declared)
                schema["type"] = types if "null" in types else [*types, "null"]
            if "enum" in schema and None not in schema["enum"]:
                schema["enum"] = [*schema["enum"], None]
            if "anyOf" in schema:
                schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
        self.note(
            path, "nullable", "rewritten", "OpenAPI nullable written as a JSON Schema null type"
        )

    def _const(self, schema: dict[str, Any], path: str) -> None:
        const = schema.pop("const")
        if "enum" in schema:
            kind = _type_of(const)
            schema["enum"] = [v for v in schema["enum"] if v == const and _type_of(v) == kind]
        else:
            schema["enum"] = [const]
        self.note(path, "const", "rewritten", "const written as a one-value enum")

    def _all_of(self, schema: dict[str, Any], path: str) -> None:
        members = schema.pop("allOf")
        one = members[0] if len(members) == 1 else None
        merged = merge_all_of(self.source, schema, members)
        # A member that is a reference stays one, unless the node adds properties to it
        # (OpenAPI inheritance): merged, they make one object a closing dialect can send.
        pure_ref = isinstance(one, dict) and set(one) == {"$ref"} and "$ref" not in schema
        if isinstance(one, dict) and pure_ref and (merged is None or "properties" not in schema):
            schema["$ref"] = one["$ref"]
            self.note(path, "allOf", "rewritten", "a one-member allOf is its member")
            return
        if merged is None:
            self.note(
                path,
                "allOf",
                "dropped",
                f"{self.profile.label} does not support allOf and its members cannot be merged",
                lossy=True,
            )
            return
        schema.clear()
        schema.update(merged)
        self.note(path, "allOf", "rewritten", "allOf merged into one schema")

    def _one_of_as_any_of(self, schema: dict[str, Any], path: str) -> str:
        branches = schema.pop("oneOf")
        if "anyOf" in schema:
            label = self.profile.label
            self.note(path, "oneOf", "dropped", f"{label} cannot send oneOf next to anyOf", True)
            return "anyOf"
        schema["anyOf"] = branches
        disjoint = branches_disjoint(self.source, branches)
        detail = "oneOf written as anyOf; " + (
            "the branches cannot overlap, so nothing changes"
            if disjoint
            else "an instance matching several branches is no longer refused"
        )
        self.note(path, "oneOf", "rewritten", detail, lossy=not disjoint)
        return "oneOf"

    def _integer_bounds(self, schema: dict[str, Any], path: str, keep: frozenset[str]) -> None:
        for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            value = schema.get(key)
            if key in keep or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            del schema[key]
            if bound == "minimum":
                new = math.floor(value) + 1
                new = max(new, schema[bound]) if bound in schema else new
            else:
                new = math.ceil(value) - 1
                new = min(new, schema[bound]) if bound in schema else new
            schema[bound] = new
            self.note(path, key, "rewritten", f"{key} {value} of an integer is {bound} {new}")

    def _split_types(self, schema: dict[str, Any], path: str, typed: bool) -> dict[str, Any]:
        parent = {k: v for k, v in schema.items() if k in _PARENT_ONLY}
        branches = []
        for kind in schema["type"]:
            family = "number" if kind == "integer" else kind
            branch: dict[str, Any] = {"type": kind}
            for k, v in schema.items():
                if k in parent or k == "type" or _FAMILY_OF.get(k, family) != family:
                    continue
                if k == "enum":
                    v = [x for x in v if _type_of(x) == family]
                    if not v:
                        branch = {}
                        break
                branch[k] = v
            if branch:
                branches.append(branch)
        self.note(
            path,
            "type",
            "rewritten",
            f"{self.profile.label} takes one type per schema; the type list is written as anyOf",
        )
        out = self.node(parent, path, typed=False) if parent else {}
        out["anyOf"] = [self.node(b, path) for b in branches]
        return self._finish(out, path)

    # --- references ----------------------------------------------------------

    def _ref(self, schema: dict[str, Any], path: str, typed: bool) -> Any:
        profile = self.profile
        ref = schema.pop("$ref")
        target = resolve_local(self.source, ref) if isinstance(ref, str) else MISSING
        if target is MISSING:
            where = (
                "no definition or $anchor of the root schema resource is there (an $anchor "
                "under a nested $id is that resource's own: move the schema it names into "
                "the root's $defs)"
                if isinstance(ref, str) and ref.startswith("#")
                else "only references into the tool's own schema are supported"
            )
            self.note(path, "$ref", "refused", f"{UNRESOLVED} {ref!r}: {where}", True)
            return {"$ref": ref, **schema}
        name = def_name(ref)
        if profile.inline_refs or (name is None and ref != "#"):
            return self._inline(ref, target, schema, path, typed)
        out_ref = "#" if ref == "#" or name == self.root_def else f"#/$defs/{escape(str(name))}"
        if name is not None and name != self.root_def:
            self._use_def(name)
        if out_ref != ref:
            self.note(path, "$ref", "rewritten", f"{ref} is sent as {out_ref}")
        if not profile.allow_recursion and self._recursive(out_ref):
            self.note(
                path, "$ref", "refused", f"{profile.label} does not support recursive schemas", True
            )
        ref_node: dict[str, Any] = {"$ref": out_ref}
        sib = self._siblings(schema, target, path) if schema else {}
        if not sib:
            return ref_node
        if "anyOf" in sib:
            label = profile.label
            self.note(path, "$ref", "refused", f"{label} cannot send $ref next to anyOf", True)
            return {**sib, "anyOf": [ref_node, *sib["anyOf"]]}
        self.note(
            path,
            "$ref",
            "rewritten",
            "keywords next to $ref are not allowed; the reference is wrapped in anyOf",
        )
        return {"anyOf": [ref_node], **sib}

    def _inline(
        self, ref: str, target: Any, siblings: dict[str, Any], path: str, typed: bool
    ) -> Any:
        profile = self.profile
        if ref in self._stack:
            kind = target.get("type") if isinstance(target, dict) else None
            kind = kind if isinstance(kind, str) else "object"
            if profile.refuse_recursion:
                self.note(
                    path,
                    "$ref",
                    "refused",
                    f"{ref} is recursive and {profile.label} has no references to express it",
                    lossy=True,
                )
            else:
                self.note(
                    path,
                    "$ref",
                    "rewritten",
                    f"{ref} is recursive and {profile.label} cannot reference it; "
                    f"the recursion stops here with any {kind}",
                    lossy=True,
                )
            cut = {"type": kind, "description": "Same shape as the enclosing object."}
            return self._finish(cut, path)
        self._stack.append(ref)
        body = self.node(target, ref[1:], typed=typed)
        self._stack.pop()
        inline = profile.inline_refs
        reason = "does not follow references" if inline else "sends references to $defs only"
        self.note(path, "$ref", "inlined", f"{ref} inlined: {profile.label} {reason}")
        if not siblings:
            return body
        sib = self._siblings(siblings, target, path)
        body = dict(body) if isinstance(body, dict) else {}
        for key, value in sib.items():
            if key in body and body[key] != value and key not in ("description", "title"):
                self.note(
                    path, key, "dropped", f"{key} next to $ref conflicts with the target", True
                )
                continue
            body[key] = value
        return body

    def _siblings(self, siblings: dict[str, Any], target: Any, path: str) -> Any:
        """The keywords next to a ``$ref``, compiled; their ``required`` may name the
        properties the target declares (OpenAPI inheritance)."""
        outer = self._inherited.get(path)
        self._inherited[path] = declared_names(self.source, target)
        try:
            return self.node(siblings, path, typed=False)
        finally:
            if outer is None:
                del self._inherited[path]
            else:
                self._inherited[path] = outer

    def _recursive(self, out_ref: str) -> bool:
        if self._cyclic is None:
            self._cyclic = cyclic_definitions(self.source, self.root_def)
        name = "#" if out_ref == "#" else def_name(out_ref)
        return name in self._cyclic


# Keywords whose values hold schemas, walked when the profile keeps them; a
# handler answers MISSING for a form it does not walk (the keyword is then
# treated as a plain keyword).
_SUBSCHEMA_HANDLERS: dict[str, Callable[[Walker, Any, str, str], Any]] = {
    "description": lambda _walker, value, _path, _union_key: value,
    "properties": Walker._properties,
    "items": Walker._items,
    "anyOf": Walker._any_of,
    "oneOf": Walker._one_of,
}
