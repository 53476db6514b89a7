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
- A value is written as JSON by pydantic's own dump by alias, without computed
  fields (``exclude_computed_fields``; before pydantic 2.12, only the top model's
  are taken out) and the ``Field(exclude=True)`` ones, which its schema does not
  hold. So that the model validates its JSON back, each field of a model (and of
  each model or pydantic dataclass its fields' types hold, at any depth) must be
  written under the key it is read by: the written key (``serialization_alias``,
  else ``alias``, else the name) differing from the read one (``validation_alias``
  if a str, else ``alias``, else the name; the name under ``validate_by_alias=False``)
  is a definition error naming the field, as is a ``validation_alias`` that is an
  ``AliasChoices`` or ``AliasPath`` (no one key) and a required ``exclude=True``
  field (its JSON lacks it). Each class is checked once. A workflow's placeholders
  name a model output's fields by the same keys (`model_fields`), whether a
  function or an agent made it; a function step's models are checked when built.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
import typing
import weakref
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
    """The fields of model ``tp`` by the key its JSON has (`field_key`), with their types:
    the keys of its JSON dump (`unstructure_model`) and of an answer the LLM gives for
    it. Computed fields and ``Field(exclude=True)`` fields are none (the value's JSON does
    not hold them); None when a field has no one key (a definition error of the model)."""
    found: dict[str, Any] = {}
    validate_by_alias = _validates_by_alias(tp)
    for name, field in _pydantic_fields(tp).items():
        if _excluded(field):
            continue
        try:
            found[field_key(name, field, validate_by_alias)] = field.annotation
        except _NoKey:
            return None
    return found


class _NoKey(Exception):
    """A field has no one key its value is written and read under (a message naming it)."""


def field_key(name: str, field: Any, validate_by_alias: bool = True) -> str:
    """The one key of a model's field in its JSON: the key pydantic writes it under by
    alias (its ``serialization_alias``, else its ``alias``, else its name), which must be
    the key it reads it by (its ``validation_alias`` if a str, else its ``alias``, else its
    name; its name when the model's config has ``validate_by_alias=False``).

    Raises:
        _NoKey: The ``validation_alias`` is an ``AliasChoices`` or ``AliasPath``, or the
            written key is not the read one.
    """
    alias = field.validation_alias
    if alias is not None and not isinstance(alias, str):
        raise _NoKey(
            f"pydantic validation_alias of kind {type(alias).__name__} is not supported"
            " (give it one key: a str validation_alias or alias)"
        )
    written = field.serialization_alias or field.alias or name
    read = (alias or field.alias or name) if validate_by_alias else name
    if written != read:
        why = "" if validate_by_alias else " (validate_by_alias=False)"
        raise _NoKey(
            f"written to JSON as {written!r} but read as {read!r}{why}, so the model"
            " would not validate its own JSON (give it one key: an alias, or the same"
            " validation_alias and serialization_alias)"
        )
    return written


def _validates_by_alias(tp: Any) -> bool:
    """Whether a model or pydantic dataclass reads its fields by alias (its config's
    ``validate_by_alias``, pydantic >= 2.11; True by default)."""
    config = getattr(tp, "model_config", None)
    if not isinstance(config, dict):
        config = getattr(tp, "__pydantic_config__", None)
    return not isinstance(config, dict) or config.get("validate_by_alias", True) is not False


def _pydantic_fields(tp: Any) -> dict[str, Any]:
    """The ``FieldInfo`` of a model's or pydantic dataclass's fields by name ({} for others)."""
    fields = getattr(tp, "__pydantic_fields__", None)
    return fields if isinstance(fields, dict) else {}


def _excluded(field: Any) -> bool:
    """Whether pydantic leaves the field out of the model's JSON (``Field(exclude=True)``)."""
    return field.exclude is True


_UNSUPPORTED: weakref.WeakKeyDictionary[type, list[str]] = weakref.WeakKeyDictionary()


def _unsupported(cls: Any) -> list[str]:
    """Why the model ``cls`` (or a model or pydantic dataclass its fields' types hold, at
    any depth; or those a type holds) cannot be written as JSON it validates back. Each
    class is looked at once (cached by class)."""
    found: list[str] = []
    for tp in _reachable(cls):
        said = _UNSUPPORTED.get(tp)
        if said is None:
            said = _UNSUPPORTED[tp] = list(_class_problems(tp))
        found.extend(said)
    return found


def type_problems(tp: Any) -> list[str]:
    """Why the models a type holds (``tp`` itself, or in a list, a union, a dataclass...)
    cannot be written as JSON they validate back (`_unsupported`; none when pydantic is
    not imported)."""
    if "pydantic" not in sys.modules:
        return []
    return _unsupported(tp)


def _class_problems(tp: type) -> Iterator[str]:
    """The fields of one model or pydantic dataclass with no one key, or excluded and required."""
    name = tp.__qualname__
    validate_by_alias = _validates_by_alias(tp)
    for field_name, field in _pydantic_fields(tp).items():
        try:
            field_key(field_name, field, validate_by_alias)
        except _NoKey as exc:
            yield f"field {field_name!r} of {name}: {exc}"
        if _excluded(field) and field.is_required():
            yield (
                f"field {field_name!r} of {name} is Field(exclude=True) and required:"
                " pydantic leaves it out of the model's JSON, which then does not"
                " validate back (give it a default)"
            )


def _reachable(cls: Any) -> list[type]:
    """``cls`` and the models and dataclasses its fields' types hold, at any depth (each once)."""
    found: list[type] = []
    seen: set[int] = set()
    todo: list[Any] = [cls]
    while todo:
        tp = todo.pop()
        if id(tp) in seen:
            continue
        seen.add(id(tp))
        if is_model(tp) or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            found.append(tp)
            todo.extend(_field_types(tp))
        else:
            todo.extend(typing.get_args(tp))
    return sorted(found, key=lambda tp: tp.__qualname__)


def unstructure_model(value: Any, mode: str = "json") -> Any:
    """A model as JSON data by the keys of its schema, which it validates again
    (``mode="python"``: its values as Python objects, by the same keys).

    pydantic's own dump by alias (a model whose written and read keys differ is a
    definition error, `field_key`), without computed fields (the schema is closed to
    them) and the ``Field(exclude=True)`` ones pydantic leaves out. A pydantic before
    2.12 (no ``exclude_computed_fields``) keeps a nested model's computed fields; the
    top model's are taken out.
    """
    try:
        return value.model_dump(mode=mode, by_alias=True, exclude_computed_fields=True)
    except TypeError as exc:
        if "exclude_computed_fields" not in str(exc):
            raise
    data = value.model_dump(mode=mode, by_alias=True)
    computed = getattr(type(value), "model_computed_fields", None) or {}
    if isinstance(data, dict):
        for name, info in computed.items():
            data.pop(getattr(info, "alias", None) or name, None)
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
    for tp in _reachable(cls):
        name = tp.__name__
        if name in found and found[name] is not tp:
            clashes.add(name)
        found[name] = tp
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
