"""Classes with named fields as JSON objects: dataclasses, attrs, TypedDict, NamedTuple.

Each becomes ``{"type": "object", "properties": ..., "required": [...],
"additionalProperties": false}``; the class docstring gives the object's
description and, through its ``Attributes:`` section, each field's (attrs and
dataclass field ``metadata={"description": ...}`` work too).
"""

from __future__ import annotations

import builtins
import math
import sys
import types
import typing
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolfold.toolkit._field import (
    PydanticChecked,
    field_info_default,
    field_info_default_problem,
    is_field_info,
    is_hashable,
)
from toolfold.toolkit._field import is_typeddict as _is_typeddict

if TYPE_CHECKING:
    from toolfold.toolkit._schema import SchemaContext

MISSING: Any = object()


# One field of a class: name, annotation, required, default (MISSING), description.
# A plain tuple: a NamedTuple class costs a millisecond of import time.
FieldInfo = tuple[str, Any, bool, Any, "str | None"]


def class_fields(cls: type, localns: dict[str, Any] | None = None) -> list[FieldInfo] | None:
    """The fields of a dataclass, attrs class, TypedDict or NamedTuple; else None.

    ``localns`` resolves string annotations naming classes local to a function.
    A class defined in a function keeps the fields found with its function's
    names: the converter, which asks without them, then structures it as the
    schema describes it (``class LBox(Box[list["Inner"]])`` over a local Inner).
    """
    if localns is None:
        known = _LOCAL_FIELDS.get(cls)
        if known is not None:
            return list(known)
    found = _class_fields(cls, localns)
    if found is not None:
        from toolfold.toolkit._field import hashable_type

        # at.IsNotNan[float]'s annotated_types Not has no hash, which converters need
        found = [(n, hashable_type(t), r, d, desc) for n, t, r, d, desc in found]
    if localns is not None and found is not None and "<locals>" in cls.__qualname__:
        _LOCAL_FIELDS[cls] = list(found)
    return found


# A function's local class -> its fields as resolved with the function's names.
_LOCAL_FIELDS: weakref.WeakKeyDictionary[type, list[FieldInfo]] = weakref.WeakKeyDictionary()


def _class_fields(cls: type, localns: dict[str, Any] | None) -> list[FieldInfo] | None:
    if "__dataclass_fields__" in cls.__dict__ or hasattr(cls, "__dataclass_fields__"):
        return _dataclass_fields(cls, localns)
    if hasattr(cls, "__attrs_attrs__"):
        return _attrs_fields(cls, localns)
    if _is_typeddict(cls):
        hints = _hints(cls, localns)
        required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        fields: list[FieldInfo] = [
            (n, t, _typeddict_required(n, t, required), MISSING, None) for n, t in hints.items()
        ]
        return _bind_inherited(cls, fields, localns)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        hints = _hints(cls, localns)
        defaults = getattr(cls, "_field_defaults", {})
        return [
            (n, hints.get(n, MISSING), n not in defaults, defaults.get(n, MISSING), None)
            for n in cls._fields
        ]
    return None


def _string_hints(cls: type, localns: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The class's hints through the per-module cache of evaluated annotation strings.

    ``typing.get_type_hints`` compiles every string annotation again, most of
    the cost of describing a new class under ``from __future__ import
    annotations``. An annotation naming a function's local classes is
    evaluated with ``localns`` too (uncached: Python 3.10's typing refuses a
    local ``InitVar[Inner]``, which is no type to it). None when an annotation
    needs more (typing then resolves it, or explains why it cannot).
    """
    import inspect
    import sys

    from toolfold.toolkit._signature import evaluate_annotation, has_forward_ref

    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        if base is object:
            continue
        # the class's own dict is the cheap read; inspect covers lazy annotations (3.14)
        annotations = base.__dict__.get("__annotations__")  # noqa: RUF063
        if annotations is None and "__annotate__" in base.__dict__:
            annotations = inspect.get_annotations(base)
        if not annotations:
            continue
        if not isinstance(annotations, dict):
            return None
        module = sys.modules.get(base.__module__)
        if module is None:
            return None
        # a class defined in the function reads its names first (a local class
        # shadows a module one of the same name), as typing.get_type_hints does
        first = localns if localns and "<locals>" in base.__qualname__ else None
        for name, value in annotations.items():
            if type(value) is str:
                text = value
                value = _evaluate_local(text, module.__dict__, first) if first else None
                if value is None:
                    value = evaluate_annotation(text, module.__dict__)
                if value is None and localns and first is None:
                    value = _evaluate_local(text, module.__dict__, localns)
                if value is None:
                    return None
            elif value is None:
                value = type(None)
            elif isinstance(value, typing.ForwardRef) or has_forward_ref(value):
                return None  # TypedDict keeps its bases' strings as ForwardRefs
            hints[name] = value
    return hints


def _evaluate_local(text: str, globalns: dict[str, Any], localns: dict[str, Any]) -> Any:
    """A string annotation evaluated with a function's local names, or None if it cannot be."""
    from toolfold.toolkit._signature import has_forward_ref

    try:
        value = eval(compile(text, "<annotation>", "eval"), globalns, localns)
    except Exception:
        return None  # typing says why
    if value is None:
        return type(None)
    return None if type(value) is str or has_forward_ref(value) else value


def substitute_type_vars(
    cls: type, args: tuple[Any, ...], fields: list[FieldInfo]
) -> list[FieldInfo]:
    """The fields of ``cls[args]``: each of the class's type variables replaced by its argument."""
    params = getattr(cls, "__parameters__", ())
    if not params or len(params) != len(args):
        return fields
    mapping = dict(zip(params, args, strict=True))
    return [(n, _substitute(t, mapping), r, d, desc) for n, t, r, d, desc in fields]


def _bind_inherited(
    cls: type, fields: list[FieldInfo], localns: dict[str, Any] | None = None
) -> list[FieldInfo]:
    """``fields`` with the type variables of generic bases replaced by what the class
    statements gave them: ``class IntBox(Box[int])`` makes ``Box``'s ``item: T`` an
    int, through any number of generic classes in between (``class
    ListBox(Box[list[U]], Generic[U])`` makes it ``list[U]``, in terms of the
    class's own variables, which `substitute_type_vars` binds for ``ListBox[int]``).
    Quoted names there (``class Tree(Box[list["Tree"]])``) are looked up in the
    module of the class statement (and ``localns``).
    """
    if not inherits_type_vars(cls):
        return fields
    bound = _bound_type_vars(cls, localns)
    owners = _declaring_classes(cls)
    out = []
    for name, tp, required, default, description in fields:
        mapping = bound.get(owners.get(name, cls))
        if mapping and tp is not MISSING:
            tp = _substitute(tp, mapping)
        out.append((name, tp, required, default, description))
    return out


def _bound_type_vars(
    cls: type, localns: dict[str, Any] | None = None
) -> dict[type, dict[Any, Any]]:
    """For each generic class ``cls`` derives from: its type variables -> what they
    stand for in ``cls`` (in terms of ``cls``'s own type variables, if it has some).

    The MRO lists a class before its bases, so a base's variables are bound in
    terms of its subclass's, which are already known.
    """
    import sys

    bound: dict[type, dict[Any, Any]] = {cls: {}}
    for klass in _lineage(cls):
        mapping = bound.get(klass, {})
        module = sys.modules.get(klass.__module__)
        names = module.__dict__ if module is not None else {}
        for base in klass.__dict__.get("__orig_bases__", ()):
            origin = typing.get_origin(base)
            params = getattr(origin, "__parameters__", ())
            args = typing.get_args(base)
            # Generic[T] and Protocol[T] have no parameters of their own: not a base to bind
            if isinstance(origin, type) and origin not in bound and len(params) == len(args):
                bound[origin] = {
                    p: _substitute(_resolve_names(a, names, localns), mapping)
                    for p, a in zip(params, args, strict=True)
                }
    return bound


def _resolve_names(tp: Any, globalns: dict[str, Any], localns: dict[str, Any] | None) -> Any:
    """``tp`` with the quoted names in it (``list["Tree"]``) evaluated; one that cannot
    be stays as it is, for the schema and the converter to say so."""
    from toolfold.toolkit._signature import evaluate_annotation, has_forward_ref

    if isinstance(tp, typing.ForwardRef):
        tp = tp.__forward_arg__
    if type(tp) is str:
        found = evaluate_annotation(tp, globalns)
        if found is None and localns:
            found = _evaluate_local(tp, globalns, localns)
        return tp if found is None else found
    if not has_forward_ref(tp):
        return tp
    origin = typing.get_origin(tp)
    args = tuple(_resolve_names(a, globalns, localns) for a in typing.get_args(tp))
    if origin is typing.Annotated:
        parts = (args[0], *tp.__metadata__)
        return typing.Annotated[parts]
    if origin is typing.Union or isinstance(tp, types.UnionType):
        return typing.Union[args]  # noqa: UP007 (made from a tuple of arguments)
    try:
        return origin[args]
    except TypeError:
        return tp


def inherits_type_vars(cls: type) -> bool:
    """Whether ``cls`` derives from a generic class (``class IntBox(Box[int])``),
    whose fields' type variables its own class statement binds."""
    return any(
        getattr(base, "__parameters__", ()) and base is not typing.Generic
        for base in _lineage(cls)[1:]
    )


def binds_one_generic_base(cls: type) -> bool:
    """Whether the type variables ``cls``'s fields use all belong to one generic base,
    whose bases are not generic, bound in a class statement to types holding no type
    variable (``class IntBox(Box[int])``, or a subclass of it): the common case, which
    cattrs reads right by itself."""
    bound = _bound_type_vars(cls)
    bases = [klass for klass in bound if klass is not cls]
    if len(bases) != 1 or inherits_type_vars(bases[0]):
        return False
    generic = [b for b in getattr(cls, "__orig_bases__", ()) if typing.get_origin(b) is bases[0]]
    from toolfold.toolkit._signature import has_forward_ref

    return len(generic) == 1 and not any(
        type(a) is str
        or isinstance(a, typing.ForwardRef)
        or has_forward_ref(a)
        or getattr(a, "__parameters__", ())
        or isinstance(a, typing.TypeVar)
        for a in typing.get_args(generic[0])
    )


def _declaring_classes(cls: type) -> dict[str, type]:
    """Field name -> the most derived class in the MRO whose own annotations declare it."""
    import inspect

    if _is_typeddict(cls):
        return _typeddict_declaring_classes(cls)
    owners: dict[str, type] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        try:
            names = inspect.get_annotations(klass)
        except Exception:  # an annotation that cannot even be read: typing says why later
            continue
        owners.update(dict.fromkeys(names, klass))
    return owners


def _typeddict_declaring_classes(cls: type) -> dict[str, type]:
    """`_declaring_classes` of a TypedDict, whose ``__annotations__`` hold its bases'
    keys too (TypedDict merges them): a key is a class's own when no TypedDict base
    of it holds that very annotation."""
    import inspect

    owners: dict[str, type] = {}
    for klass in reversed(_lineage(cls)):
        bases = [typing.get_origin(b) or b for b in _typeddict_bases(klass)]
        inherited = [inspect.get_annotations(b) for b in bases]
        for name, value in inspect.get_annotations(klass).items():
            if not any(name in got and got[name] is value for got in inherited):
                owners[name] = klass
    return owners


def _substitute(tp: Any, mapping: dict[Any, Any]) -> Any:
    if tp in mapping if is_hashable(tp) else False:
        return mapping[tp]
    params = getattr(tp, "__parameters__", None)
    if params and typing.get_origin(tp) is not None:
        try:
            return tp[tuple(_substitute(p, mapping) for p in params)]
        except TypeError:
            return tp
    return tp


def _hints(cls: type, localns: dict[str, Any] | None = None) -> dict[str, Any]:
    fast = _string_hints(cls, localns)
    if fast is not None:
        return fast
    from toolfold.toolkit._signature import quoted_args_resolved

    module = sys.modules.get(cls.__module__)
    globalns: dict[str, Any] = {} if module is None else module.__dict__
    return quoted_args_resolved(_typing_hints(cls, localns), globalns, localns)


def _typing_hints(cls: type, localns: dict[str, Any] | None) -> dict[str, Any]:
    try:
        try:
            if localns is not None and "<locals>" in cls.__qualname__:
                return typing.get_type_hints(cls, localns=localns, include_extras=True)
            return typing.get_type_hints(cls, include_extras=True)
        except NameError:
            if localns is None:
                raise
            # a local class under `from __future__ import annotations`: its
            # annotations name other classes of the function that defines the tool
            return typing.get_type_hints(cls, localns=localns, include_extras=True)
    except Exception as exc:  # NameError for a forward reference, and the like
        python_refuses = unhashable_not_problem(exc)
        if python_refuses:
            raise UnresolvedHints(
                f"cannot resolve the annotations of {cls.__qualname__}: {python_refuses}",
                advice="",
            ) from exc
        raise UnresolvedHints(
            f"cannot resolve the annotations of {cls.__qualname__} ({exc})"
        ) from exc


class UnresolvedHints(Exception):
    """A class's annotations name something that cannot be found.

    Attributes:
        advice: What to do, for the caller to add; empty when the message says it.
    """

    def __init__(
        self,
        message: str,
        advice: str = "; import the names they use at module level, or define them"
        " before the tool in the same function",
    ) -> None:
        super().__init__(message)
        self.advice = advice


def unhashable_not_problem(exc: BaseException) -> str:
    """What to write instead when Python's own typing refused an annotation because
    annotated_types' ``Not`` (``at.IsNotNan[float]``) cannot be hashed, as a ``Union``
    (``Optional[at.IsNotNan[float]]``, ``at.IsNotNan[float] | None``) needs on
    Python 3.10 and 3.11 (3.13 does without); empty for any other error."""
    if not (isinstance(exc, TypeError) and "unhashable type: 'Not'" in str(exc)):
        return ""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return (
        f"Python {version}'s typing cannot put annotated_types' Not (at.IsNotNan,"
        " at.IsNotInfinite, at.IsNotFinite) in a Union or Optional (unhashable type:"
        " 'Not'); write Optional[Annotated[float, at.Predicate(is_not_nan)]] with a"
        " named function (def is_not_nan(x): return not math.isnan(x)), or"
        " Optional[at.IsFinite[float]] to refuse infinities too"
    )


# TypedDict item qualifiers, by name: typing's or typing_extensions' (which is not
# imported here: it costs more than the rest of the toolkit).
_QUALIFIERS = frozenset({"Required", "NotRequired", "ReadOnly"})


def unqualified(annotation: Any) -> tuple[Any, bool | None]:
    """A TypedDict field's type without its Required/NotRequired/ReadOnly, and whether
    they make the key required (None: they do not say).

    PEP 655 lets the qualifiers sit on either side of ``Annotated``; the metadata is
    kept: ``Annotated[NotRequired[str], Field(...)]`` is ``(Annotated[str, Field(...)],
    False)``. A type without qualifiers is returned as it is.
    """
    tp, required, found = annotation, None, False
    layers: list[tuple[Any, ...]] = []  # the Annotated metadata met, outermost first
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            layers.append(tp.__metadata__)
            tp = tp.__origin__
            continue
        qualifier = getattr(origin, "_name", None)
        if qualifier not in _QUALIFIERS:
            break
        found = True
        if required is None and qualifier != "ReadOnly":
            required = qualifier == "Required"
        tp = typing.get_args(tp)[0]
    if not found:
        return annotation, None
    if not layers:
        return tp, required
    # the metadata in the order Annotated's own nesting gives it, innermost first
    params = (tp, *(item for layer in reversed(layers) for item in layer))
    return typing.Annotated[params], required


def _typeddict_required(name: str, annotation: Any, required_keys: Any) -> bool:
    # With string annotations TypedDict cannot see Required/NotRequired when the
    # class is made, so __required_keys__ is wrong there: the resolved hint says.
    required = unqualified(annotation)[1]
    return name in required_keys if required is None else required


def _dataclass_fields(cls: type, localns: dict[str, Any] | None) -> list[FieldInfo]:
    """The ``__init__`` arguments of a dataclass: its fields with ``init=True`` and
    its ``InitVar``s (typed by the type they wrap), in ``__init__``'s order.

    An ``InitVar`` is an argument of ``__init__`` (handed to ``__post_init__``),
    not a stored field, so ``dataclasses.fields`` leaves it out; a ``ClassVar``
    is neither and stays out.
    """
    import dataclasses

    # __dataclass_fields__ holds the InitVars and ClassVars too, in __init__'s order
    every = getattr(cls, "__dataclass_fields__", {})
    try:
        hints = _hints(cls, localns)
    except UnresolvedHints:
        # A local class whose string annotations a tool's derivation resolved in place
        # (below): its fields' types say what its annotations cannot.
        hints = {name: f.type for name, f in every.items()}
        if any(type(t) is str for t in hints.values()):
            raise
    stored = {f.name for f in dataclasses.fields(cls)}
    # pydantic checks a pydantic dataclass's fields when it is built: a pydantic.Field
    # given as a default is its field's metadata and default there (see `_pydantic_checked`)
    checked = "__pydantic_fields__" in cls.__dict__
    out = []
    for f in every.values():
        if localns is not None and type(f.type) is str and f.name in hints:
            # Resolved in place, as attrs.resolve_types does: cattrs (and the
            # converter's hook for a class with InitVars) read field types and
            # cannot see the function's local names.
            f.type = hints[f.name]
        annotation = hints.get(f.name, f.type)
        if f.name not in stored:
            if not isinstance(annotation, dataclasses.InitVar):
                continue  # a ClassVar
            annotation = annotation.type
        if not f.init:
            continue
        has_factory = f.default_factory is not dataclasses.MISSING
        default = MISSING if f.default is dataclasses.MISSING else f.default
        if checked:
            annotation, default, factory = _pydantic_checked(annotation, default)
            has_factory = has_factory or factory
        required = default is MISSING and not has_factory
        description = f.metadata.get("description")
        out.append((f.name, annotation, required, default, description))
    return _bind_inherited(cls, out, localns)


def _pydantic_checked(annotation: Any, default: Any) -> tuple[Any, Any, bool]:
    """A pydantic dataclass field's (annotation, default, has a default factory).

    A ``pydantic.Field`` default gives the default (or factory) it holds and
    joins the ``Annotated`` metadata; each item of that metadata is marked
    `PydanticChecked`: its schema is read (a pattern, bounds, a description),
    and what the schema cannot say is pydantic's to check, not an error.
    """
    import typing

    factory = False
    extra: tuple[Any, ...] = ()
    if is_field_info(default):
        extra = (default,)
        default, factory = field_info_default(default)
    metadata: tuple[Any, ...] = ()
    if typing.get_origin(annotation) is typing.Annotated:
        metadata = annotation.__metadata__
        annotation = annotation.__origin__
    if not metadata and not extra:
        return annotation, default, factory
    params = (annotation, *(PydanticChecked(m) for m in (*metadata, *extra)))
    return typing.Annotated[params], default, factory


def _attrs_fields(cls: type, localns: dict[str, Any] | None) -> list[FieldInfo]:
    import attrs

    hints = _hints(cls, localns)
    if localns is not None and any(type(a.type) is str for a in attrs.fields(cls)):
        # for cattrs, which cannot see local names; in place, so a module class must
        # keep its module's (and builtins') meaning of a name a local shadows
        if "<locals>" not in cls.__qualname__:
            module = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
            localns = {
                k: v for k, v in localns.items() if k not in module and k not in vars(builtins)
            }
        attrs.resolve_types(cls, localns=localns)
    out = []
    for a in attrs.fields(cls):
        if not a.init:
            continue
        default = a.default
        required = default is attrs.NOTHING
        if required or isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = MISSING
        annotation = hints.get(a.name, a.type if a.type is not None else MISSING)
        description = a.metadata.get("description")
        out.append((a.name, annotation, required, default, description))
    return _bind_inherited(cls, out, localns)


def _class_doc(cls: type) -> str | None:
    doc = cls.__doc__
    if not doc:
        return None
    # dataclasses and namedtuples write "Name(a, b)" as the docstring of an undocumented class
    if doc.startswith(cls.__name__ + "(") and doc.rstrip().endswith(")") and "\n" not in doc:
        return None
    if cls.__dict__.get("__doc__") is None:  # inherited, e.g. from dict or tuple
        return None
    return doc


def inherited_descriptions(cls: type, style: str = "auto") -> dict[str, str]:
    """Field name -> its description in the docstring of a base of ``cls``: the nearest
    base (in the MRO, or a TypedDict's bases) whose ``Attributes:`` (or ``Args:``)
    describes it, so that a subclass need not repeat its bases' descriptions.
    ``cls``'s own docstring, read by the caller, wins over all of them. A field a
    class re-declares (``size: int`` over a base's ``size: float``) is a new field:
    only that class and the classes deriving from it describe it, never the bases
    it overrides."""
    from toolfold.toolkit._docstrings import Described, parse_docstring

    lineage = _lineage(cls)
    owners = _declaring_classes(cls)
    position = {klass: i for i, klass in enumerate(lineage)}
    found = Described()  # (a field written otherwise than Python reads it found too)
    for i, base in enumerate(lineage[1:], 1):
        if base.__module__ in _UNDOCUMENTED_MODULES:
            continue
        doc = parse_docstring(_class_doc(base), style)
        for described in (doc.attributes, doc.params):
            for name, text in described.items():
                owner = owners.get(name)
                if owner is not None and position.get(owner, i) < i:
                    continue  # re-declared by a class nearer cls than this base
                if name not in found:
                    found.add(name, text)
    return found


# Bases whose docstrings describe no field of a user's class (dict, Generic, ...).
_UNDOCUMENTED_MODULES = frozenset({"builtins", "typing", "typing_extensions", "abc"})


def _lineage(cls: type) -> list[type]:
    """``cls`` and the classes it derives from, nearest first: its MRO, or for a
    TypedDict, whose MRO leaves its TypedDict bases out, those bases as its class
    statement (``__orig_bases__``) named them, in the order of their annotations'
    precedence (the last base named first, as TypedDict merges them)."""
    if not _is_typeddict(cls):
        return [k for k in cls.__mro__ if k is not object]
    out: list[type] = []

    def visit(klass: type) -> None:
        if klass in out:
            return
        out.append(klass)
        for base in reversed(_typeddict_bases(klass)):
            visit(typing.get_origin(base) or base)

    visit(cls)
    return out


def _typeddict_bases(cls: type) -> list[Any]:
    """The TypedDict bases of TypedDict ``cls`` as its class statement wrote them
    (``Box[int]``, ``Base``), from ``__orig_bases__``: a TypedDict's ``__bases__`` are
    ``dict`` (and ``Generic``). Python before 3.12 records no base of a
    ``typing.TypedDict`` written unparametrised (``class B(A)``); typing_extensions'
    TypedDict does, on every version."""
    return [
        base
        for base in cls.__dict__.get("__orig_bases__", ())
        if isinstance(typing.get_origin(base) or base, type)
        and _is_typeddict(typing.get_origin(base) or base)
    ]


def build_object(ctx: SchemaContext, cls: type, fields: list[FieldInfo]) -> dict[str, Any]:
    """The object schema of ``cls``; problems go to ``ctx``."""
    from toolfold.toolkit._docstrings import parse_docstring
    from toolfold.toolkit._flags import with_flag_note
    from toolfold.toolkit._schema import has_own_description

    doc = parse_docstring(_class_doc(cls))
    inherited = inherited_descriptions(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, annotation, is_required, default, meta_description in fields:
        if annotation is MISSING:
            ctx.problem(f"field {name!r} of {cls.__qualname__} has no type annotation", "." + name)
            continue
        schema = ctx.schema_for(annotation, "." + name)
        description = (
            meta_description
            or doc.attributes.get(name)
            or doc.params.get(name)
            or inherited.get(name)
        )
        if description and not has_own_description(annotation):
            schema["description"] = with_flag_note(description, annotation)
        if is_required:
            required.append(name)
        elif is_field_info(default):  # (a pydantic dataclass's is read in `_dataclass_fields`)
            problem = field_info_default_problem(default)
            ctx.problem(f"field {name!r} of {cls.__qualname__}: {problem}", "." + name)
        elif default is not MISSING:
            try:
                schema["default"] = default_json(default, schema)
            except ValueError:
                ctx.problem(
                    f"field {name!r} of {cls.__qualname__} has default {default!r},"
                    " which is not JSON-representable; use a JSON value or a default factory",
                    "." + name,
                )
        properties[name] = schema
    schema = {"type": "object"}
    if doc.description:
        schema["description"] = doc.description
    schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def default_json(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` as the JSON default of ``schema``: `to_json`'s form, except that a
    named tuple given where the schema wants an array (``tuple[int, int]``) is one.

    Raises:
        ValueError: The value has no JSON form.
    """
    if schema.get("type") == "array" and isinstance(value, tuple) and hasattr(value, "_asdict"):
        return [to_json(item) for item in value]
    return to_json(value)


def to_json(value: Any) -> Any:
    """A default value as JSON data, or ValueError if it has no JSON form.

    Enums give their value; named tuples objects (as their schema is); other
    tuples and sets give lists; datetimes, dates and
    times their ISO form; UUID, Decimal and paths their text.
    """
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(value)
        return value
    import enum

    if isinstance(value, enum.Enum):
        return to_json(value.value)
    # Subclasses of the JSON scalars (numpy.float64 is a float) as their plain values.
    if isinstance(value, float):
        return to_json(float(value))
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a NamedTuple: an object
        return {k: to_json(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [to_json(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise ValueError(value)
        return {k: to_json(v) for k, v in value.items()}
    from toolfold.toolkit._pydantic import is_model, unstructure_model

    if is_model(kind):  # a pydantic model: its JSON dump
        return unstructure_model(value)
    name = f"{kind.__module__}.{kind.__qualname__}"
    if name in ("datetime.datetime", "datetime.date", "datetime.time"):
        return value.isoformat()
    if name in ("uuid.UUID", "decimal.Decimal") or kind.__module__.startswith("pathlib"):
        return str(value)
    raise ValueError(value)
