"""pydantic v2 models as tool parameters and output types, without depending on pydantic.

pydantic is recognised only when a type is given: a class is a model when
pydantic is imported already (``sys.modules``) and the class derives from its
``BaseModel``; ``import toolfold`` never imports pydantic.

- The schema is the model's own (``model_json_schema()``, validation mode, by
  alias), brought to toolfold's conventions: no ``title``\\ s, nested models
  inlined (``$defs`` only for the models that refer back to themselves, in the
  root's ``$defs`` as for dataclasses), ``additionalProperties: false`` on a
  model's object unless the model allows extra keys, a tagged union's ``oneOf``
  an ``anyOf`` (without OpenAPI's ``discriminator``), and the class docstring
  read as for a dataclass (its summary; an ``Attributes:`` section describes
  the fields that ``Field(description=...)`` does not), a dataclass's inside it
  too; a ``Decimal`` without bounds is toolfold's ``string`` of ``format: decimal``.
- A value is made by ``Model.model_validate_json`` of the JSON (after the schema
  check), so the model's validators run; a ``ValidationError`` is listed problem by
  problem at the path its ``loc`` names (`ModelRefused`).
- A value is written as JSON by the keys of its schema, which the model validates
  again: each field under the key validation uses (its ``validation_alias`` if a
  str, else its ``alias``, else its name; not a ``serialization_alias``), at any
  depth, without computed fields or ``Field(exclude=True)`` fields. A workflow's
  placeholders name a model output's fields by the same keys (`model_fields`),
  whether a function or an agent made it. A field whose ``validation_alias`` is an
  ``AliasChoices`` or ``AliasPath`` (no one key), or that is ``exclude=True`` and
  required (its JSON would not validate back), is a definition error naming it.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import typing
from collections.abc import Iterator
from typing import Any, TypeGuard

if typing.TYPE_CHECKING:
    from toolfold.toolkit._schema import SchemaContext

_REF = "#/$defs/"

# Keywords whose value is one schema, a list of schemas, or a mapping of names to schemas.
_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties", "dependentSchemas")


def is_model(tp: Any) -> TypeGuard[type]:
    """Whether ``tp`` is a pydantic v2 model class (False when pydantic is not imported)."""
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(tp, type):
        return False
    base = getattr(pydantic, "BaseModel", None)
    try:
        return base is not None and tp is not base and issubclass(tp, base)
    except TypeError:
        return False


def is_validation_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a pydantic ``ValidationError`` (pydantic_core's class)."""
    core = sys.modules.get("pydantic_core")
    error = getattr(core, "ValidationError", None) if core is not None else None
    return error is not None and isinstance(exc, error)


class ModelRefused(ValueError):
    """A pydantic model refused a value: its errors, with the value they are about.

    Attributes:
        model: The model class.
        errors: The ``ValidationError``'s ``errors()``.
        value: The value the model was given (its JSON data).
    """

    def __init__(self, model: Any, errors: list[Any], value: Any) -> None:
        name = getattr(model, "__qualname__", None) or repr(model)
        super().__init__(f"{name} refused the value: {len(errors)} problem(s)")
        self.model = model
        self.errors = errors
        self.value = value

    def problems(self, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
        """Each error at ``path`` + the JSON path its ``loc`` names.

        A ``loc`` also names the union member a value was tried as (``dog`` of a
        tagged union, ``Cat`` of another): no key of the value, so left out of the path.
        """
        from toolfold.toolkit._problems import short_repr

        found: list[tuple[tuple[Any, ...], str]] = []
        for error in self.errors:
            loc = tuple(error.get("loc", ()))
            message = str(error.get("msg", "invalid value"))
            if error.get("type") == "missing" and loc:
                where = (*path, *_json_path(self.value, loc[:-1]))
                found.append((where, f"{loc[-1]!r} is a required property"))
                continue
            if "input" in error and error.get("type") not in _SAID:
                message += f" (got {short_repr(error['input'])})"
            found.append(((*path, *_json_path(self.value, loc)), message))
        return found


# Errors whose message says what was wrong with the value already (a validator's own).
_SAID = frozenset({"value_error", "assertion_error"})


UNKNOWN: Any = object()
"""The value of a `ModelRefused` made without it: its locs are the paths as they are."""


def _json_path(value: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The keys and indexes of ``loc`` that walk ``value`` (the others name union members)."""
    if value is UNKNOWN:
        return loc
    path: list[Any] = []
    for item in loc:
        is_key = isinstance(value, dict) and item in value
        is_index = isinstance(value, list) and type(item) is int and 0 <= item < len(value)
        if is_key or is_index:
            value = value[item]
            path.append(item)
    return tuple(path)


def structure_model(value: Any, tp: Any) -> Any:
    """The model ``tp`` made from validated JSON data (its validators run).

    Validated as the JSON it is (``model_validate_json``): a strict model takes a
    date from JSON text, which it refuses from a Python str.

    Raises:
        ModelRefused: The model's validation failed (its ``ValidationError`` is the cause).
    """
    if isinstance(value, tp):
        return value
    try:
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):  # not JSON data (a value built in Python): as it is
            return tp.model_validate(value)
        return tp.model_validate_json(text)
    except ValueError as exc:  # (pydantic's ValidationError is a ValueError)
        if not is_validation_error(exc):
            raise
        raise ModelRefused(tp, exc.errors(include_url=False), value) from exc  # type: ignore[attr-defined]


def model_fields(tp: type) -> dict[str, Any] | None:
    """The fields of model ``tp`` by the key its schema and validation use (`field_key`),
    with their types: the keys of its JSON dump (`unstructure_model`) and of an answer
    the LLM gives for it. Computed fields and ``Field(exclude=True)`` fields are none
    (the value's JSON does not hold them); None when a field has no one key."""
    found: dict[str, Any] = {}
    for name, field in _pydantic_fields(tp).items():
        if _excluded(field):
            continue
        try:
            found[field_key(name, field)] = field.annotation
        except _NoKey:
            return None
    return found


class _NoKey(Exception):
    """A field has no one key its value is written under (a message naming it)."""


def field_key(name: str, field: Any) -> str:
    """The key of a model's field in its JSON: the one its schema and validation use
    (its ``validation_alias`` if a str, else its ``alias``, else its name).

    Raises:
        _NoKey: The ``validation_alias`` is an ``AliasChoices`` or ``AliasPath``.
    """
    alias = field.validation_alias
    if alias is None or isinstance(alias, str):
        return alias or field.alias or name
    raise _NoKey(
        f"pydantic validation_alias of kind {type(alias).__name__} is not supported"
        " (give it one key: a str validation_alias or alias)"
    )


def _pydantic_fields(tp: Any) -> dict[str, Any]:
    """The ``FieldInfo`` of a model's or pydantic dataclass's fields by name ({} for others)."""
    fields = getattr(tp, "__pydantic_fields__", None)
    return fields if isinstance(fields, dict) else {}


def _excluded(field: Any) -> bool:
    """Whether pydantic leaves the field out of the model's JSON (``Field(exclude=True)``)."""
    return field.exclude is True


def _unsupported(cls: type) -> list[str]:
    """Why the model ``cls`` (or one it holds) cannot be written as JSON it validates back."""
    found: list[str] = []
    for name, tp in sorted(_model_classes(cls).items()):
        for field_name, field in _pydantic_fields(tp).items():
            try:
                field_key(field_name, field)
            except _NoKey as exc:
                found.append(f"field {field_name!r} of {name}: {exc}")
            if _excluded(field) and field.is_required():
                found.append(
                    f"field {field_name!r} of {name} is Field(exclude=True) and required:"
                    " pydantic leaves it out of the model's JSON, which then does not"
                    " validate back (give it a default)"
                )
    return found


def unstructure_model(value: Any) -> Any:
    """A model as JSON data by the keys of its schema, which it validates again.

    pydantic's dump by field name, each field renamed to `field_key` (at any depth:
    a model in a field, a list, a dict), without computed fields (the schema is closed
    to them) and the ``Field(exclude=True)`` ones pydantic leaves out.
    """
    return _rekey(value, value.model_dump(mode="json", by_alias=False))


def _rekey(value: Any, data: Any) -> Any:
    """``data`` (pydantic's by-name JSON of ``value``) with each model's fields by `field_key`."""
    if getattr(type(value), "__pydantic_root_model__", False):
        return _rekey(value.root, data)
    fields = _pydantic_fields(type(value))
    if fields and isinstance(data, dict):
        # (a field with exclude_if= may be left out of this value's dump)
        kept = {
            n: f
            for n, f in fields.items()
            if not _excluded(f) and (n in data or getattr(f, "exclude_if", None) is None)
        }
        if not all(n in data for n in kept):  # a serializer of its own: as it wrote it
            return data
        out: dict[str, Any] = {}
        for name, field in kept.items():
            try:
                key = field_key(name, field)
            except _NoKey:
                key = field.alias or name
            out[key] = _rekey(getattr(value, name), data[name])
        extra = getattr(value, "__pydantic_extra__", None) or {}
        out.update((k, data[k]) for k in extra if k in data)
        return out
    if isinstance(value, (list, tuple)) and isinstance(data, list) and len(value) == len(data):
        return [_rekey(v, d) for v, d in zip(value, data, strict=True)]
    if isinstance(value, dict) and isinstance(data, dict) and len(value) == len(data):
        return {k: _rekey(v, d) for (k, d), v in zip(data.items(), value.values(), strict=True)}
    return data


def model_schema(ctx: SchemaContext, cls: type) -> dict[str, Any]:
    """The schema of model ``cls`` in toolfold's conventions (see the module's docstring).

    A model the schema cannot be made of (a field of a type pydantic cannot
    describe) is a problem of ``ctx``.
    """
    try:
        raw: dict[str, Any] = cls.model_json_schema(schema_generator=_generator())  # type: ignore[attr-defined]
    except Exception as exc:  # pydantic's PydanticInvalidForJsonSchema, a forward reference...
        from toolfold.toolkit._results import describe_exception

        said = describe_exception(exc).splitlines()[0]  # (not pydantic's link to its docs)
        return ctx.problem(f"pydantic cannot make the JSON Schema of {cls.__qualname__}: {said}")
    for message in _unsupported(cls):
        ctx.problem(message)
    defs: dict[str, Any] = raw.pop("$defs", {})
    classes = _model_classes(cls)
    recursive = _recursive(defs)
    names: dict[str, str] = {}
    new: list[str] = []
    for name in sorted(recursive):
        names[name], is_new = ctx.add_def(classes.get(name, (cls, name)), name)
        if is_new:
            new.append(name)
    normal = _Normaliser(defs, recursive, names, classes)
    for name in new:
        ctx.defs[names[name]] = normal.schema(defs[name], name)
    made: dict[str, Any] = normal.schema(raw, None, root=None if raw.get("$ref") else cls)
    return made


_GENERATOR: list[type] = []

# A Decimal's constraints: with none, it is written as toolfold writes a Decimal.
_DECIMAL_BOUNDS = ("multiple_of", "le", "ge", "lt", "gt", "max_digits", "decimal_places")


def _generator() -> type:
    """pydantic's schema generator, but a Decimal without bounds is toolfold's
    ``{"type": "string", "format": "decimal"}`` (not ``anyOf`` a number or a string),
    as in a dataclass. Made on first use (pydantic is imported then)."""
    if not _GENERATOR:
        from pydantic.json_schema import GenerateJsonSchema

        class _Generator(GenerateJsonSchema):
            def decimal_schema(self, schema: Any) -> Any:
                if any(schema.get(key) is not None for key in _DECIMAL_BOUNDS):
                    return super().decimal_schema(schema)
                return {"type": "string", "format": "decimal"}

        _GENERATOR.append(_Generator)
    return _GENERATOR[0]


class _Normaliser:
    """Rewrites pydantic's schema nodes: inlines refs, drops titles, closes objects."""

    def __init__(
        self,
        defs: dict[str, Any],
        recursive: set[str],
        names: dict[str, str],
        classes: dict[str, type],
    ) -> None:
        self._defs = defs
        self._recursive = recursive
        self._names = names
        self._classes = classes

    def schema(self, node: Any, def_name: str | None = None, root: type | None = None) -> Any:
        if not isinstance(node, dict):
            return node
        node = dict(node)
        ref = node.pop("$ref", None)
        if isinstance(ref, str) and ref.startswith(_REF):
            name = ref[len(_REF) :]
            if name in self._recursive:
                node = {"$ref": _REF + self._names[name], **node}
            elif name in self._defs:
                inlined = self.schema(self._defs[name], name)
                inlined.update(node)  # a field's description, default beside the ref
                node = inlined
        node.pop("title", None)
        # a tagged union: OpenAPI's keyword (its mapping names $defs inlined here) goes;
        # each member's tag is a const, so anyOf says what oneOf did, as toolfold's own
        # unions do (which strict dialects take, and oneOf they do not)
        tagged = isinstance(node.pop("discriminator", None), dict)
        if tagged and "oneOf" in node and "anyOf" not in node:
            node["anyOf"] = node.pop("oneOf")
        for key in _ONE:
            if isinstance(node.get(key), dict):
                node[key] = self.schema(node[key])
        for key in _LIST:
            if isinstance(node.get(key), list):
                node[key] = [self.schema(item) for item in node[key]]
        for key in _MAP:
            if isinstance(node.get(key), dict):
                node[key] = {k: self.schema(v) for k, v in node[key].items()}
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        cls = root if root is not None else self._classes.get(def_name or "")
        if cls is not None and "properties" in node:
            _describe(node, cls)
        return node


def _describe(node: dict[str, Any], cls: type) -> None:
    """Read ``cls``'s docstring as toolfold reads a dataclass's: its description, and
    the fields its ``Attributes:`` section describes (``Field(description=...)`` wins)."""
    from toolfold.toolkit._classes import _class_doc
    from toolfold.toolkit._docstrings import parse_docstring

    raw_doc = _class_doc(cls)
    doc = parse_docstring(raw_doc)
    said = node.get("description")
    if said is None or (raw_doc is not None and said == inspect.cleandoc(raw_doc)):
        # pydantic's: the whole docstring, sections and all (one set otherwise, by
        # json_schema_extra, stays)
        node.pop("description", None)
        if doc.description:
            node["description"] = doc.description
    for name, prop in node.get("properties", {}).items():
        text = doc.attributes.get(name) or doc.params.get(name)
        if text and isinstance(prop, dict) and "description" not in prop:
            prop["description"] = text
    # "type" and "description" first, as in toolfold's own object schemas
    ordered: dict[str, Any] = {k: node.pop(k) for k in ("type", "description") if k in node}
    rest = dict(node)
    node.clear()
    node.update(ordered)
    node.update(rest)


def _model_classes(cls: type) -> dict[str, type]:
    """The models and dataclasses ``cls`` holds (and itself), by the name pydantic gives
    their ``$defs`` (whose docstrings are read as toolfold reads them)."""
    found: dict[str, type] = {}
    clashes: set[str] = set()
    seen: set[int] = set()
    todo: list[Any] = [cls]
    while todo:
        tp = todo.pop()
        if id(tp) in seen:
            continue
        seen.add(id(tp))
        if is_model(tp) or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            name = tp.__name__
            if name in found and found[name] is not tp:
                clashes.add(name)
            found[name] = tp
            todo.extend(_field_types(tp))
        else:
            todo.extend(typing.get_args(tp))
    for name in clashes:  # pydantic names these by module: not guessed
        del found[name]
    return found


def _field_types(cls: type) -> list[Any]:
    """The types of the fields of a model or dataclass (none known when they do not resolve)."""
    if is_model(cls):
        return [f.annotation for f in getattr(cls, "model_fields", {}).values()]
    try:
        return list(typing.get_type_hints(cls, include_extras=True).values())
    except Exception:  # an unresolved forward reference: its docstring is pydantic's
        return []


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            yield ref[len(_REF) :]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _recursive(defs: dict[str, Any]) -> set[str]:
    """The definitions on a cycle of references (kept as ``$ref``; the others are inlined)."""
    edges = {name: set(_refs(schema)) & set(defs) for name, schema in defs.items()}
    cyclic: set[str] = set()
    for start in defs:
        todo, seen = list(edges[start]), set()
        while todo:
            name = todo.pop()
            if name == start:
                cyclic.add(start)
                break
            if name not in seen:
                seen.add(name)
                todo.extend(edges.get(name, ()))
    return cyclic
