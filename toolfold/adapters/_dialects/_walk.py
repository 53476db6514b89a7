"""The one schema walker every dialect shares, driven by a `Profile`.

The walker reads the tool's schema and builds a new one; it never mutates its
input. Every change it makes is recorded as a `SchemaRewrite` whose path points
into the tool's own schema, so a user can find what moved and why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from toolfold.adapters._dialects._model import RewriteAction, SchemaRewrite
from toolfold.adapters._dialects._openapi import to_openapi
from toolfold.adapters._dialects._profiles import Profile
from toolfold.adapters._dialects._refs import (
    DESCRIBED_ANNOTATIONS,
    MISSING,
    VALIDATION_KEYWORDS,
    accepts_null,
    branches_disjoint,
    cyclic_definitions,
    def_name,
    escape,
    make_nullable,
    merge_all_of,
    resolve,
)
from toolfold.adapters._dialects._refs import (
    show as _show,
)
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


def _type_of(value: Any) -> str:
    kind = json_type(value)
    return "number" if kind == "integer" else kind


class Walker:
    """Compiles one schema under one profile and collects the rewrites."""

    def __init__(self, profile: Profile, source: Mapping[str, Any], root_def: str | None) -> None:
        self.p = profile
        self.source = source
        self.root_def = root_def
        self.rewrites: list[SchemaRewrite] = []
        self.used_defs: list[str] = []
        self._seen: set[SchemaRewrite] = set()
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

    def node(self, s: Any, path: str, *, root: bool = False, typed: bool = True) -> Any:
        """The compiled form of schema ``s`` found at ``path``."""
        p = self.p
        if s is True or (isinstance(s, dict) and not s):
            if p.need_types and typed:
                self.note(
                    path,
                    "type",
                    "refused",
                    f"{p.label} cannot send a schema that accepts any value; give it a type",
                    lossy=True,
                )
            return {}
        if not isinstance(s, dict):
            if p.need_types:
                self.note(path, "", "refused", f"{p.label} cannot send the schema {s!r}", True)
            return s
        s = dict(s)
        keep = p.root_keep if root and p.root_keep is not None else p.keep
        union_key = self._normalize(s, path, keep)
        if "$ref" in s:
            return self._ref(s, path, typed)
        if not root:
            for key in ("$defs", "definitions"):
                if key in s:
                    del s[key]
                    self.note(
                        path,
                        key,
                        "dropped",
                        "definitions below the root are not sent; references into them are inlined",
                    )
        t = s.get("type")
        if isinstance(t, list) and len(t) > 1 and not p.type_lists:
            return self._split_types(s, path, typed)
        types = set(t) if isinstance(t, list) else ({t} if t is not None else set())
        is_object = "object" in types or (
            not types and bool({"properties", "required", "additionalProperties"} & s.keys())
        )
        if p.need_types and typed and not types and not {"enum", "anyOf"} & s.keys():
            if is_object:
                s = {"type": "object", **s}
                types = {"object"}
                self.note(
                    path, "type", "added", f"{p.label} needs a type; the schema declares properties"
                )
            else:
                self.note(path, "type", "refused", f"{p.label} needs a type on every schema", True)

        out: dict[str, Any] = {}
        notes: list[str] = []
        for key, value in s.items():
            if key in ("required", "additionalProperties") or (
                root and key in ("$defs", "definitions")
            ):
                continue
            if key == "description" and key in keep:
                out[key] = value
            elif key == "properties" and key in keep and isinstance(value, dict):
                out[key] = {
                    name: self.node(sub, f"{path}/properties/{escape(name)}")
                    for name, sub in value.items()
                }
            elif key == "items" and key in keep and not isinstance(value, list):
                out[key] = self.node(value, f"{path}/items")
            elif key in ("anyOf", "oneOf") and key in keep and isinstance(value, list):
                origin = union_key if key == "anyOf" else key
                out[key] = [self.node(b, f"{path}/{origin}/{i}") for i, b in enumerate(value)]
            else:
                self._keyword(key, value, path, keep, types, out, notes)
        if p.need_types and typed and "array" in types and "items" not in s:
            self.note(
                path, "items", "refused", f"{p.label} needs arrays to declare typed items", True
            )
        if is_object:
            self._object(s, path, out, root, keep)
        if notes and "description" in keep:
            desc = out.get("description")
            joined = "; ".join(notes)
            out["description"] = f"{desc} ({joined})" if desc else joined
        return to_openapi(out, path, self.note, p.label) if p.openapi else out

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
        p = self.p
        if key in keep:
            if key == "format" and p.formats is not None and value not in p.formats:
                notes.append(_show(key, value))
                self.note(
                    path,
                    key,
                    "moved_to_description",
                    f"{p.label} does not accept format {value!r}; formats are annotations",
                )
            elif key == "pattern" and p.check_pattern and _LOOKAROUND.search(str(value)):
                notes.append(_show(key, value))
                self.note(
                    path,
                    key,
                    "moved_to_description",
                    f"{p.label} does not support regex look-arounds or back-references",
                    lossy=True,
                )
            elif key == "minItems" and p.min_items is not None and value not in p.min_items:
                notes.append(_show(key, value))
                self.note(
                    path,
                    key,
                    "moved_to_description",
                    f"{p.label} accepts minItems {sorted(p.min_items)} only",
                    lossy=True,
                )
            else:
                out[key] = value
        elif key in VALIDATION_KEYWORDS:
            notes.append(_show(key, value))
            self.note(path, key, "moved_to_description", f"{p.label} does not support {key}", True)
        elif key in DESCRIBED_ANNOTATIONS:
            notes.append(_show(key, value))
            self.note(
                path,
                key,
                "moved_to_description",
                f"{p.label} does not accept {key}; it is an annotation, kept for the model to read",
            )
        else:
            self.note(path, key, "dropped", f"{p.label} does not accept the annotation {key}")

    def _object(
        self, s: dict[str, Any], path: str, out: dict[str, Any], root: bool, keep: frozenset[str]
    ) -> None:
        p = self.p
        ap = s.get("additionalProperties", MISSING)
        if p.close_objects:
            if ap is False:
                pass
            elif isinstance(ap, dict) and ap:
                self.note(
                    path,
                    "additionalProperties",
                    "refused",
                    f"{p.label} cannot send a map (additionalProperties with a schema); "
                    "declare its properties instead",
                    lossy=True,
                )
            elif "properties" not in s and not root:
                self.note(
                    path,
                    "properties",
                    "refused",
                    f"{p.label} cannot send an object without declared properties",
                    True,
                )
            else:
                self.note(
                    path,
                    "additionalProperties",
                    "added",
                    f"{p.label} needs additionalProperties: false on every object",
                )
            out.setdefault("properties", {})
            out["additionalProperties"] = False
        elif ap is not MISSING:
            if "additionalProperties" in keep:
                out["additionalProperties"] = (
                    ap if isinstance(ap, bool) else self.node(ap, f"{path}/additionalProperties")
                )
            else:
                lossy = not (ap is True or ap == {})
                self.note(
                    path,
                    "additionalProperties",
                    "dropped",
                    f"{p.label} does not accept additionalProperties"
                    + ("; extra keys are no longer refused" if lossy else ""),
                    lossy,
                )
        required = list(s.get("required", ()))
        if p.all_required:
            props = out["properties"]
            for name in list(props):
                if name in required:
                    continue
                sub = f"{path}/properties/{escape(name)}"
                if accepts_null(self.source, s["properties"][name]):
                    self.note(
                        sub,
                        "required",
                        "made_required",
                        f"optional and nullable: {p.label} needs every property required; "
                        "absent and null both arrive as null",
                    )
                else:
                    props[name] = make_nullable(props[name])
                    self.note(
                        sub,
                        "required",
                        "made_nullable",
                        f"optional: {p.label} needs every property required, so it is sent "
                        "as nullable and a null is read back as absent",
                    )
            out["required"] = list(props)
        elif "required" in s:
            if "required" in keep:
                out["required"] = required
            else:
                self.note(path, "required", "dropped", f"{p.label} does not accept required", True)

    # --- rewrites that reshape a node before it is walked ----------------------

    def _normalize(self, s: dict[str, Any], path: str, keep: frozenset[str]) -> str:
        """Apply the exact rewrites (nullable, const, allOf, oneOf, integer bounds)."""
        p = self.p
        union_key = "anyOf"
        if "nullable" in s and "nullable" not in keep:
            if s.pop("nullable") is True:
                t = s.get("type")
                if isinstance(t, (str, list)):
                    types = [t] if isinstance(t, str) else list(t)
                    s["type"] = types if "null" in types else [*types, "null"]
                if "enum" in s and None not in s["enum"]:
                    s["enum"] = [*s["enum"], None]
                if "anyOf" in s:
                    s["anyOf"] = [*s["anyOf"], {"type": "null"}]
            self.note(
                path, "nullable", "rewritten", "OpenAPI nullable written as a JSON Schema null type"
            )
        if "const" in s and "const" not in keep:
            const = s.pop("const")
            if "enum" in s:
                s["enum"] = [v for v in s["enum"] if v == const and _type_of(v) == _type_of(const)]
            else:
                s["enum"] = [const]
            self.note(path, "const", "rewritten", "const written as a one-value enum")
        if "allOf" in s and "allOf" not in keep:
            members = s.pop("allOf")
            one = members[0] if len(members) == 1 else None
            if isinstance(one, dict) and set(one) == {"$ref"} and "$ref" not in s:
                s["$ref"] = one["$ref"]
                self.note(path, "allOf", "rewritten", "a one-member allOf is its member")
            else:
                merged = merge_all_of(self.source, s, members)
                if merged is None:
                    self.note(
                        path,
                        "allOf",
                        "dropped",
                        f"{p.label} does not support allOf and its members cannot be merged",
                        lossy=True,
                    )
                else:
                    s.clear()
                    s.update(merged)
                    self.note(path, "allOf", "rewritten", "allOf merged into one schema")
        if "oneOf" in s and "oneOf" not in keep:
            branches = s.pop("oneOf")
            if "anyOf" in s:
                self.note(
                    path, "oneOf", "dropped", f"{p.label} cannot send oneOf next to anyOf", True
                )
            else:
                s["anyOf"] = branches
                union_key = "oneOf"
                disjoint = branches_disjoint(self.source, branches)
                detail = "oneOf written as anyOf; " + (
                    "the branches cannot overlap, so nothing changes"
                    if disjoint
                    else "an instance matching several branches is no longer refused"
                )
                self.note(path, "oneOf", "rewritten", detail, lossy=not disjoint)
        if p.integer_exclusive and s.get("type") == "integer":
            for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
                value = s.get(key)
                if key in keep or isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                del s[key]
                if bound == "minimum":
                    new = math.floor(value) + 1
                    new = max(new, s[bound]) if bound in s else new
                else:
                    new = math.ceil(value) - 1
                    new = min(new, s[bound]) if bound in s else new
                s[bound] = new
                self.note(path, key, "rewritten", f"{key} {value} of an integer is {bound} {new}")
        return union_key

    def _split_types(self, s: dict[str, Any], path: str, typed: bool) -> dict[str, Any]:
        parent = {k: v for k, v in s.items() if k in _PARENT_ONLY}
        branches = []
        for t in s["type"]:
            family = "number" if t == "integer" else t
            branch: dict[str, Any] = {"type": t}
            for k, v in s.items():
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
            f"{self.p.label} takes one type per schema; the type list is written as anyOf",
        )
        out = self.node(parent, path, typed=False) if parent else {}
        out["anyOf"] = [self.node(b, path) for b in branches]
        return to_openapi(out, path, self.note, self.p.label) if self.p.openapi else out

    # --- references ----------------------------------------------------------

    def _ref(self, s: dict[str, Any], path: str, typed: bool) -> Any:
        p = self.p
        ref = s.pop("$ref")
        target = resolve(self.source, ref) if isinstance(ref, str) else MISSING
        if target is MISSING:
            self.note(
                path,
                "$ref",
                "refused",
                f"cannot resolve {ref!r}: only local references are supported",
                True,
            )
            return {"$ref": ref, **s}
        name = def_name(ref)
        if p.inline_refs or (name is None and ref != "#"):
            return self._inline(ref, target, s, path, typed)
        out_ref = "#" if ref == "#" or name == self.root_def else f"#/$defs/{escape(str(name))}"
        if name is not None and name != self.root_def:
            self._use_def(name)
        if out_ref != ref:
            self.note(path, "$ref", "rewritten", f"{ref} is sent as {out_ref}")
        if not p.allow_recursion and self._recursive(out_ref):
            self.note(
                path, "$ref", "refused", f"{p.label} does not support recursive schemas", True
            )
        ref_node: dict[str, Any] = {"$ref": out_ref}
        sib = self.node(s, path, typed=False) if s else {}
        if not sib:
            return ref_node
        if "anyOf" in sib:
            self.note(path, "$ref", "refused", f"{p.label} cannot send $ref next to anyOf", True)
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
        p = self.p
        if ref in self._stack:
            kind = target.get("type") if isinstance(target, dict) else None
            kind = kind if isinstance(kind, str) else "object"
            if p.refuse_recursion:
                self.note(
                    path,
                    "$ref",
                    "refused",
                    f"{ref} is recursive and {p.label} has no references to express it",
                    lossy=True,
                )
            else:
                self.note(
                    path,
                    "$ref",
                    "rewritten",
                    f"{ref} is recursive and {p.label} cannot reference it; "
                    f"the recursion stops here with any {kind}",
                    lossy=True,
                )
            cut = {"type": kind, "description": "Same shape as the enclosing object."}
            return to_openapi(cut, path, self.note, p.label) if p.openapi else cut
        self._stack.append(ref)
        body = self.node(target, ref[1:], typed=typed)
        self._stack.pop()
        reason = "does not follow references" if p.inline_refs else "sends references to $defs only"
        self.note(path, "$ref", "inlined", f"{ref} inlined: {p.label} {reason}")
        if not siblings:
            return body
        sib = self.node(siblings, path, typed=False)
        body = dict(body) if isinstance(body, dict) else {}
        for key, value in sib.items():
            if key in body and body[key] != value and key not in ("description", "title"):
                self.note(
                    path, key, "dropped", f"{key} next to $ref conflicts with the target", True
                )
                continue
            body[key] = value
        return body

    def _recursive(self, out_ref: str) -> bool:
        if self._cyclic is None:
            self._cyclic = cyclic_definitions(self.source, self.root_def)
        name = "#" if out_ref == "#" else def_name(out_ref)
        return name in self._cyclic
