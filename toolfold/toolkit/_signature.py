"""A function's signature and docstring → its tool schema, every problem at once.

This runs at decoration time, usually at import, for every tool of a program,
so it reads the code object directly rather than building an
``inspect.Signature`` (the slow part of most peers), caches type schemas, and
never meta-validates what it derives (a derived schema is valid by
construction).
"""

from __future__ import annotations

import functools
import inspect
import operator
import sys
import types
import typing
import unicodedata
from collections.abc import Callable
from typing import Any

from toolfold.toolkit._classes import (
    MISSING,
    UnresolvedHints,
    class_fields,
    default_json,
    inherited_descriptions,
    unhashable_not_problem,
)
from toolfold.toolkit._context import RunContext
from toolfold.toolkit._docstrings import STYLES, ParsedDocstring, parse_docstring
from toolfold.toolkit._field import field_info_default_problem, hashable_type, is_field_info
from toolfold.toolkit._flags import with_flag_note
from toolfold.toolkit._pydantic import is_model
from toolfold.toolkit._results import describe_exception
from toolfold.toolkit._schema import SchemaContext, has_own_description, type_repr

_CO_VARARGS = inspect.CO_VARARGS
_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS
_POSITIONAL, _KEYWORD, _VAR_POSITIONAL, _VAR_KEYWORD, _POSITIONAL_ONLY = range(5)


class FunctionSchema:
    """What a function looks like as a tool.

    Attributes:
        parameters: The JSON Schema of the arguments (an object schema).
        description: The docstring's summary and long description.
        param_types: Parameter name -> annotation, for structuring arguments
            (the run-context parameter is not in it).
        context_param: The parameter that receives the RunContext, if any.
        positional_only: Positional-only parameters, in order (the context
            parameter too, when it is one).
        positional_defaults: The defaults of the positional-only parameters
            that have one, by name: a call that leaves one out but gives a
            later one passes it in its place.
        problems: What makes the function unusable as a tool (empty if fine).
        unresolved: Whether some annotation could not be resolved.
        warnings: What looks wrong but does not stop the tool.
        undocumented: Warnings about parameters without a description.
        model: The pydantic model a tool made of the model itself (``tool(Model)``)
            makes, which checks the arguments as a whole (None for any other).
    """

    __slots__ = (
        "context_param",
        "description",
        "model",
        "param_types",
        "parameters",
        "positional_defaults",
        "positional_only",
        "problems",
        "undocumented",
        "unresolved",
        "warnings",
    )

    def __init__(self) -> None:
        self.parameters: dict[str, Any] = {}
        self.description = ""
        self.param_types: dict[str, Any] = {}
        self.context_param: str | None = None
        self.positional_only: tuple[str, ...] = ()
        self.positional_defaults: dict[str, Any] = {}
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.undocumented: list[str] = []
        self.unresolved = False
        self.model: type | None = None


def _parameters(fn: Callable[..., Any]) -> list[tuple[str, int, Any]]:
    """(name, kind, default or MISSING) for each parameter, in order."""
    if type(fn) is types.FunctionType and not hasattr(fn, "__wrapped__"):
        code = fn.__code__
        nargs, nkw = code.co_argcount, code.co_kwonlyargcount
        names = code.co_varnames
        defaults = fn.__defaults__ or ()
        kwdefaults = fn.__kwdefaults__ or {}
        first_default = nargs - len(defaults)
        out: list[tuple[str, int, Any]] = []
        for i in range(nargs):
            kind = _POSITIONAL_ONLY if i < code.co_posonlyargcount else _POSITIONAL
            default = defaults[i - first_default] if i >= first_default else MISSING
            out.append((names[i], kind, default))
        index = nargs + nkw
        if code.co_flags & _CO_VARARGS:
            out.append((names[index], _VAR_POSITIONAL, MISSING))
            index += 1
        for name in names[nargs : nargs + nkw]:
            out.append((name, _KEYWORD, kwdefaults.get(name, MISSING)))
        if code.co_flags & _CO_VARKEYWORDS:
            out.append((names[index], _VAR_KEYWORD, MISSING))
        return out
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: _POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD: _POSITIONAL,
        inspect.Parameter.VAR_POSITIONAL: _VAR_POSITIONAL,
        inspect.Parameter.KEYWORD_ONLY: _KEYWORD,
        inspect.Parameter.VAR_KEYWORD: _VAR_KEYWORD,
    }
    # A partial's own signature (what is left to fill), even with update_wrapper's __wrapped__.
    follow = not isinstance(fn, functools.partial)
    return [
        (p.name, kinds[p.kind], MISSING if p.default is p.empty else p.default)
        for p in inspect.signature(fn, follow_wrapped=follow).parameters.values()
    ]


# String annotations (``from __future__ import annotations``) cost a compile() each
# in typing.get_type_hints, most of a derivation's time. Their evaluation is cached
# per module, and a cached value is reused only while every global name the
# expression reads is still bound to the same object (a notebook cell that
# redefines a class must not see the old one).
_strings: dict[tuple[str, int], tuple[dict[str, Any], tuple[tuple[str, Any], ...], Any]] = {}
_UNBOUND: Any = object()
_UNRESOLVED: Any = object()


def type_hints(fn: Callable[..., Any], localns: dict[str, Any] | None = None) -> dict[str, Any]:
    """``typing.get_type_hints(fn, include_extras=True)``, faster for string annotations."""
    annotations = getattr(fn, "__annotations__", None)
    if localns is not None or (
        type(fn) is not types.FunctionType
        or hasattr(fn, "__wrapped__")  # typing finds the wrapped function's module
        or not annotations
        or not any(type(v) is str for v in annotations.values())
    ):
        hints = typing.get_type_hints(fn, localns=localns, include_extras=True)
        globalns = getattr(inspect.unwrap(fn), "__globals__", None)
        return quoted_args_resolved(hints, globalns or {}, localns)
    globalns = fn.__globals__
    hints = {}
    for name, value in annotations.items():
        if type(value) is str:
            value = _eval_string(value, globalns)
        if value is None:
            value = type(None)
        elif type(value) is str or _has_forward_ref(value):
            hints = typing.get_type_hints(fn, include_extras=True)
            return quoted_args_resolved(hints, globalns)
        hints[name] = value
    return hints


def _hint_target(fn: Any) -> Any:
    """Where the annotations of a callable live (partials, classes and callable objects too)."""
    if isinstance(fn, functools.partial):
        return _hint_target(fn.func)
    if isinstance(fn, type):
        declared = _declared_signature(fn)
        if declared is not None:
            return declared
        init = fn.__init__  # type: ignore[misc]
        return init if isinstance(init, types.FunctionType) else fn
    if isinstance(fn, (types.FunctionType, types.MethodType)):
        return fn
    return type(fn).__call__ if callable(fn) else fn


def _declared_signature(cls: type) -> types.FunctionType | None:
    """A function annotated as ``cls.__signature__`` says, when the class declares one.

    Its parameters are read from that signature (`inspect.signature` prefers it
    to ``__init__``, which may take ``**data`` alone): so are their hints, or a
    parameter the signature annotates reads as unannotated. None without one.
    """
    declared = getattr(cls, "__signature__", None)
    if not isinstance(declared, inspect.Signature):
        return None
    annotations = {
        p.name: p.annotation for p in declared.parameters.values() if p.annotation is not p.empty
    }
    if declared.return_annotation is not declared.empty:
        annotations["return"] = declared.return_annotation
    module = sys.modules.get(cls.__module__)

    def signed() -> None: ...

    function = types.FunctionType(
        signed.__code__, vars(module) if module is not None else {}, cls.__name__
    )
    function.__annotations__ = annotations
    function.__qualname__ = cls.__qualname__
    return function


def _documentation(fn: Any, style: str) -> ParsedDocstring:
    """The docstring that describes ``fn`` as a tool, parsed.

    A partial is described by its function's docstring. A callable object by
    its class's docstring, or its ``__call__``'s when the class has none; its
    parameters by ``__call__``'s docstring, or the class's when ``__call__``
    has none.
    """
    if isinstance(fn, functools.partial):
        return _documentation(fn.func, style)
    if isinstance(fn, (types.FunctionType, types.MethodType, type)) or not callable(fn):
        return parse_docstring(getattr(fn, "__doc__", None), style)
    own = parse_docstring(getattr(fn, "__doc__", None), style)
    call = parse_docstring(getattr(type(fn).__call__, "__doc__", None), style)
    return ParsedDocstring(
        own.description or call.description,
        call.params or own.params,
        own.attributes,
    )


def _lookup(name: str, globalns: dict[str, Any]) -> Any:
    if name in globalns:
        return globalns[name]
    builtins = globalns.get("__builtins__", __builtins__)
    space = builtins if isinstance(builtins, dict) else vars(builtins)
    return space.get(name, _UNBOUND)


def _eval_string(text: str, globalns: dict[str, Any]) -> Any:
    if text.isidentifier():
        found = _lookup(text, globalns)
        if found is not _UNBOUND:
            return found
    key = (text, id(globalns))
    entry = _strings.get(key)
    if (
        entry is not None
        and entry[0] is globalns
        and all(_lookup(n, globalns) is v for n, v in entry[1])
    ):
        return entry[2]
    try:
        code = compile(text, "<annotation>", "eval")
        value = eval(code, globalns)
    except Exception:
        return text  # let typing.get_type_hints raise its own error
    if len(_strings) > 4096:
        _strings.clear()
    _strings[key] = (globalns, tuple((n, _lookup(n, globalns)) for n in code.co_names), value)
    return value


def evaluate_annotation(text: str, globalns: dict[str, Any]) -> Any:
    """A string annotation evaluated in ``globalns`` (cached), or None if it needs more."""
    value = _eval_string(text, globalns)
    if value is None:
        return type(None)
    if type(value) is str or _has_forward_ref(value):
        return None
    return value


def has_forward_ref(tp: Any) -> bool:
    """Whether a type's arguments still hold a string or a ForwardRef."""
    return _has_forward_ref(tp)


def quoted_args_resolved(
    hints: dict[str, Any], globalns: dict[str, Any], localns: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``typing.get_type_hints`` output with the quoted names inside builtin generics
    (``list["Tree"]``) evaluated, as Python 3.11's typing does: 3.10's leaves them strings.

    A name that does not evaluate stays a string (the schema then says which).
    """
    if sys.version_info >= (3, 11):  # (if/else: a type checker skips the other version's branch)
        return hints
    else:
        return {name: _resolve_quoted(tp, globalns, localns) for name, tp in hints.items()}


def _resolve_quoted(tp: Any, globalns: dict[str, Any], localns: dict[str, Any] | None) -> Any:
    if type(tp) is str:
        try:
            return eval(compile(tp, "<annotation>", "eval"), globalns, localns)
        except Exception:
            return tp
    args = getattr(tp, "__args__", None)
    origin = typing.get_origin(tp)
    if not args or origin is None or origin is typing.Literal or not _has_forward_ref(tp):
        return tp
    if origin is typing.Annotated:
        inner = _resolve_quoted(tp.__origin__, globalns, localns)
        parts = (inner, *tp.__metadata__)
        return typing.Annotated[parts]
    new = tuple(_resolve_quoted(a, globalns, localns) for a in args)
    if isinstance(tp, types.GenericAlias):
        return types.GenericAlias(origin, new)
    if isinstance(tp, types.UnionType):
        return functools.reduce(operator.or_, new)
    copy_with = getattr(tp, "copy_with", None)
    return tp if copy_with is None else copy_with(new)


def _has_forward_ref(tp: Any) -> bool:
    args = getattr(tp, "__args__", None)
    if not args or typing.get_origin(tp) in (None, typing.Literal):
        return False
    return any(
        type(a) is str or isinstance(a, typing.ForwardRef) or _has_forward_ref(a) for a in args
    )


def _is_context(annotation: Any) -> bool:
    """RunContext, RunContext[Deps], their Optional forms, or Annotated ones."""
    if annotation is RunContext:
        return True
    origin = typing.get_origin(annotation)
    if origin is RunContext:
        return True
    if origin is typing.Annotated:
        return _is_context(annotation.__origin__)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(args) == 1 and _is_context(args[0])
    return False


def derive(
    fn: Callable[..., Any],
    *,
    docstring_style: str = "auto",
    require_parameter_descriptions: bool = False,
    skip_receiver: bool = False,
    localns: dict[str, Any] | None = None,
) -> FunctionSchema:
    """Derive the tool schema of ``fn``, collecting problems instead of raising.

    ``localns`` resolves string annotations that name local classes (a tool
    defined inside a function, under ``from __future__ import annotations``).
    """
    out = FunctionSchema()
    if is_model(fn):  # tool(Model): the model's fields are the parameters
        _model_tool(fn, out)
        return out
    if docstring_style not in STYLES:
        out.problems.append(
            f"docstring_style {docstring_style!r} is not one of {', '.join(STYLES)}"
        )
        docstring_style = "auto"
    hints = _hints(fn, localns, out)
    doc = _documentation(fn, docstring_style)
    out.description = doc.description
    try:
        params = _parameters(fn)
    except (ValueError, TypeError) as exc:  # a builtin without a signature, like dict
        out.problems.append(_unreadable_problem(fn, exc))
        params = []
    if skip_receiver and params:
        params = params[1:]
    ctx = SchemaContext(localns)
    fields = _constructor_fields(fn, localns)
    partial_keywords = _partial_keywords(fn)
    # a class tool's fields its bases' docstrings describe (its own docstring wins)
    inherited = (
        inherited_descriptions(fn, docstring_style) if fields and isinstance(fn, type) else {}
    )
    properties: dict[str, Any] = {}
    required: list[str] = []
    positional_only: list[str] = []
    for name, kind, default in params:
        annotation = _annotation(name, kind, hints, out.problems)
        if annotation is _UNRESOLVED:
            continue
        if kind == _POSITIONAL_ONLY:
            positional_only.append(name)
            if default is not MISSING:
                out.positional_defaults[name] = default
        if _is_context(annotation):
            if out.context_param is not None:  # only one would be passed: every call would fail
                out.problems.append(
                    f"parameters {out.context_param!r} and {name!r} both take the RunContext;"
                    " a tool receives one RunContext: keep one of them"
                )
                continue
            out.context_param = name
            continue
        is_required = default is MISSING
        described = doc.params.get(name)
        field = fields.get(name)
        if field is not None:  # a field of a class tool: a factory is no default, yet optional
            field_required, field_default, own, field_type = field
            if _is_placeholder(default):  # the generated __init__'s `<factory>` / NOTHING
                is_required, default = field_required, field_default
            if _is_unbound(annotation):  # InitVar[int]; a generic base's `item: T`
                annotation = field_type
            described = own or doc.attributes.get(name) or described or inherited.get(name)
        bound = name in partial_keywords
        schema = _parameter_schema(name, annotation, default, described, ctx, out, bound)
        if require_parameter_descriptions and "description" not in schema:
            out.problems.append(
                f"parameter {name!r} has no description; document it in the docstring"
                " or use Annotated[..., Field(description=...)]"
            )
        if is_required:
            required.append(name)
        properties[name] = schema
        out.param_types[name] = annotation
    out.unresolved = out.unresolved or ctx.unresolved
    names = {name for name, _, _ in params}
    _check_documented(fn, doc.params, names, properties, out, require_parameter_descriptions)
    out.parameters = _object_schema(properties, required, ctx.defs)
    out.positional_only = tuple(positional_only)
    return out


def _model_tool(model: type, out: FunctionSchema) -> None:
    """The tool of a pydantic model class: its fields (by alias) as the parameters, its
    schema's description as the tool's; the model checks the arguments as a whole.

    The arguments pass the schema as JSON data, which the model validates (its
    validators run once, when the arguments are checked: see `ArgumentChecker`).
    """
    ctx = SchemaContext()
    schema = ctx.schema_for(model)
    for path, message in ctx.problems:
        out.problems.append(f"model {model.__qualname__}{path}: {message}")
    if "$ref" in schema:  # a model that holds itself: its definition is the object
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = {**ctx.defs[name], **{k: v for k, v in schema.items() if k != "$ref"}}
    if schema.get("type") != "object" or "properties" not in schema:  # a RootModel[list]...
        kind = schema.get("type") or "not an object"
        out.problems.append(
            f"model {model.__qualname__} is not an object of fields (its schema is {kind}): "
            "tool(Model) takes its fields as the parameters (use the model as a parameter's type)"
        )
        return
    out.description = schema.pop("description", "")
    properties: dict[str, Any] = schema.get("properties", {})
    parameters = _object_schema(properties, list(schema.get("required", ())), ctx.defs)
    if "additionalProperties" in schema:  # a model that allows extra keys says so
        parameters["additionalProperties"] = schema["additionalProperties"]
    out.parameters = parameters
    out.param_types = dict.fromkeys(properties, Any)
    out.model = model


def _constructor_fields(
    fn: Callable[..., Any], localns: dict[str, Any] | None
) -> dict[str, tuple[bool, Any, str | None, Any]]:
    """For a dataclass or attrs class (a class tool): ``__init__`` parameter name ->
    (required?, default or MISSING, description of the field's metadata, type); else empty.

    Read as a nested class's fields are (`class_fields`): a default factory
    makes a field optional without a default, which ``__init__``'s signature
    shows as a placeholder (``<factory>``, ``NOTHING``).
    """
    if not isinstance(fn, type) or not (
        hasattr(fn, "__dataclass_fields__") or hasattr(fn, "__attrs_attrs__")
    ):
        return {}
    try:
        found = class_fields(fn, localns) or []
    except UnresolvedHints:
        return {}  # the parameters' own hints report it
    aliases: dict[str, str] = {}
    if hasattr(fn, "__attrs_attrs__"):  # attrs' __init__ takes `_x` as `x`
        import attrs

        aliases = {a.name: a.alias or a.name for a in attrs.fields(fn)}
    return {
        aliases.get(name, name): (required, default, description, tp)
        for name, tp, required, default, description in found
    }


def _is_unbound(annotation: Any) -> bool:
    """Whether a generated ``__init__``'s annotation is not the type its argument has:
    an ``InitVar[int]`` (an int), or a type variable of a generic base the class binds
    (``class IntBox(Box[int])``'s ``item: T``); the class's fields say the type.
    """
    import dataclasses

    return isinstance(annotation, (dataclasses.InitVar, typing.TypeVar)) or bool(
        getattr(annotation, "__parameters__", ())
    )


def _is_placeholder(default: Any) -> bool:
    """``default`` is what a generated ``__init__`` shows for a field with a default
    factory (dataclasses' ``<factory>``, attrs' ``NOTHING``): the field says the rest.

    A class's own ``__init__`` shows its own defaults, which are what runs.
    """
    if type(default).__name__ == "_HAS_DEFAULT_FACTORY_CLASS":
        return True
    import attrs

    return default is attrs.NOTHING


def _hints(fn: Callable[..., Any], localns: dict[str, Any] | None, out: FunctionSchema) -> Any:
    """The type hints of ``fn``'s parameters; _UNRESOLVED for each when they cannot be read."""
    target = _hint_target(fn)
    try:
        return type_hints(target, localns)
    except Exception as exc:  # NameError for a forward reference, and the like
        parameters = _parameter_hints(target, localns)
        if parameters is not None:
            return parameters
        python_refuses = unhashable_not_problem(exc)
        own_class = _own_class_named(exc, target)
        failing = None if isinstance(exc, NameError) else _failing_annotation(target, localns)
        out.problems.append(
            f"cannot resolve the type annotations: {python_refuses}"
            if python_refuses
            else f"cannot resolve the type annotations (name {own_class!r} is not defined yet: "
            "it is the class being defined, whose body makes the tool); annotate the "
            "parameter with a type defined before the class"
            if own_class is not None
            else f"cannot resolve the type annotations ({exc}); import the names they use"
            if isinstance(exc, NameError)
            else failing
            if failing is not None
            else f"cannot resolve the type annotations ({describe_exception(exc)})"
        )
        out.unresolved = True
        return dict.fromkeys(getattr(fn, "__annotations__", None) or (), _UNRESOLVED)


def _failing_annotation(target: Any, localns: dict[str, Any] | None) -> str | None:
    """The problem of the first parameter whose (string) annotation raises when it is
    evaluated, an error in the annotation's own expression (a typo in a `Field`'s
    keywords: ``Field(gte=1)``), not a name missing; None when none fails alone."""
    annotations = _own_annotations(target)
    if annotations is None:
        return None
    for name, annotation in annotations.items():
        try:
            type_hints(_with_annotations(target, {name: annotation}), localns)
        except NameError:
            continue
        except Exception as exc:
            who = "the return annotation" if name == "return" else f"parameter {name!r}"
            text = annotation if isinstance(annotation, str) else type_repr(annotation)
            return f"{who}: its annotation {text!r} cannot be evaluated: {describe_exception(exc)}"
    return None


def _own_annotations(target: Any) -> dict[str, Any] | None:
    """The annotations of plain function ``target`` as written; None for another callable,
    or when they fail to read (Python 3.14 evaluates them on access)."""
    if type(target) is not types.FunctionType:
        return None
    try:
        return dict(target.__annotations__)
    except Exception:
        return None


def _with_annotations(target: types.FunctionType, annotations: dict[str, Any]) -> Any:
    """A copy of function ``target`` with these ``annotations`` instead of its own."""
    copy = types.FunctionType(
        target.__code__,
        target.__globals__,
        target.__name__,
        target.__defaults__,
        target.__closure__,
    )
    copy.__annotations__ = annotations
    copy.__kwdefaults__ = target.__kwdefaults__
    return copy


def _parameter_hints(target: Any, localns: dict[str, Any] | None) -> dict[str, Any] | None:
    """The hints of ``target``'s parameters alone, when only its return annotation fails.

    A tool's return annotation makes no schema, and a method's may name its own
    class (``def clone(self) -> Shop`` under ``from __future__ import
    annotations``), which is not defined yet while the class body makes the tool.
    None when the parameters' annotations fail too (or there is no return one).
    """
    annotations = _own_annotations(target)
    if annotations is None:
        return None
    if "return" not in annotations:
        return None
    del annotations["return"]
    try:
        return type_hints(_with_annotations(target, annotations), localns)
    except Exception:
        return None


def _own_class_named(exc: Exception, target: Any) -> str | None:
    """The name ``exc`` did not find, when it is a class whose body defines ``target``."""
    name = getattr(exc, "name", None) if isinstance(exc, NameError) else None
    qualname = getattr(target, "__qualname__", "")
    if not isinstance(name, str) or not isinstance(qualname, str):
        return None
    return name if name in qualname.split(".")[:-1] else None


def _annotation(name: str, kind: int, hints: dict[str, Any], problems: list[str]) -> Any:
    """A parameter's annotation, or _UNRESOLVED (with the problem noted) when it has none to use."""
    if kind == _VAR_POSITIONAL:
        problems.append(
            f"parameter '*{name}': *args cannot be filled from a JSON object;"
            " declare named parameters instead (or one list parameter)"
        )
        return _UNRESOLVED
    if kind == _VAR_KEYWORD:
        problems.append(
            f"parameter '**{name}': **kwargs cannot be described by a schema;"
            " declare named parameters instead (or one dict[str, ...] parameter)"
        )
        return _UNRESOLVED
    annotation = hints.get(name, MISSING)
    if annotation is MISSING:
        problems.append(
            f"parameter {name!r} has no type annotation; annotate it (e.g. {name}: str)"
        )
        return _UNRESOLVED
    # at.IsNotNan[float]'s annotated_types Not has no hash, which converters need
    return hashable_type(annotation)


def _parameter_schema(
    name: str,
    annotation: Any,
    default: Any,
    described: str | None,
    ctx: SchemaContext,
    out: FunctionSchema,
    bound: bool = False,
) -> dict[str, Any]:
    """One parameter's schema: its type's, with the docstring's description and the default
    (``bound``: one a ``functools.partial`` binds, which messages do not show)."""
    before = len(ctx.problems)
    schema: dict[str, Any] = ctx.schema_for(annotation, name)
    for path, message in ctx.problems[before:]:
        where = f" at {path}" if path != name else ""
        out.problems.append(f"parameter {name!r}{where}: {message}")
    if described and not has_own_description(annotation):
        schema["description"] = with_flag_note(described, annotation)
    if default is not MISSING:
        if is_field_info(default):
            out.problems.append(f"parameter {name!r}: {field_info_default_problem(default)}")
            return schema
        try:
            schema["default"] = default_json(default, schema)
        except ValueError:
            if bound:
                out.problems.append(_bound_default_problem(name, default))
                return schema
            out.problems.append(
                f"parameter {name!r}: default {default!r} is not JSON-representable;"
                " use a JSON value (str, int, float, bool, None, list, dict), or None"
                " and compute the value inside the function"
            )
    return schema


def _object_schema(
    properties: dict[str, Any], required: list[str], defs: dict[str, Any]
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    if defs:
        schema["$defs"] = defs
    return schema


def callable_name(fn: Any) -> str:
    """How a message names a tool's callable: its qualified name; a ``functools.partial``
    by its function's (``functools.partial(fetch, ...)``), never by the values it binds,
    which may be secrets; a callable object by its class, never its repr."""
    if isinstance(fn, functools.partial):
        return f"functools.partial({callable_name(fn.func)}, ...)"
    qualname = getattr(fn, "__qualname__", None)
    if isinstance(qualname, str):
        return qualname
    return f"{type(fn).__qualname__} object"


def _unreadable_problem(fn: Any, exc: Exception) -> str:
    """Why the parameters of ``fn`` cannot be read. Of a ``functools.partial`` whose
    function has readable parameters: it binds arguments the function does not take,
    named by what is wrong, never by the values (``exc``'s text has the partial's repr,
    with them)."""
    if not isinstance(fn, functools.partial):
        return (
            f"cannot read the parameters of {callable_name(fn)} ({exc});"
            " wrap it in a function with annotated parameters"
        )
    try:
        params = _parameters(fn.func)
    except (ValueError, TypeError) as inner:
        return _unreadable_problem(fn.func, inner)
    name = callable_name(fn.func)
    misfits = _partial_misfits(fn, params)
    detail = f" ({'; '.join(misfits)})" if misfits else ""
    return (
        f"the functools.partial binds arguments {name} does not take{detail};"
        f" bind only parameters of {name}, each once"
    )


def _partial_misfits(
    partial: functools.partial[Any], params: list[tuple[str, int, Any]]
) -> list[str]:
    """What a partial binds that its function's parameters do not take, by name or count."""
    kinds = {name: kind for name, kind, _ in params}
    found: list[str] = []
    if _VAR_KEYWORD not in kinds.values():
        unknown = [k for k in partial.keywords if kinds.get(k) in (None, _POSITIONAL_ONLY)]
        if unknown:
            found.append("keywords it has no parameter for: " + ", ".join(map(repr, unknown)))
    positional = [n for n, kind in kinds.items() if kind in (_POSITIONAL_ONLY, _POSITIONAL)]
    if _VAR_POSITIONAL not in kinds.values() and len(partial.args) > len(positional):
        found.append(f"{len(partial.args)} positional arguments, where it takes {len(positional)}")
    twice = [
        n
        for n in positional[: len(partial.args)]
        if n in partial.keywords and kinds[n] == _POSITIONAL
    ]
    if twice:
        found.append("bound both by position and by keyword: " + ", ".join(map(repr, twice)))
    return found


def _bound_by_partial(fn: Any) -> set[str]:
    """The parameters of a ``functools.partial``'s function (at any depth), which its
    docstring may document although the partial binds them."""
    found: set[str] = set()
    while isinstance(fn, functools.partial):
        fn = fn.func
        try:
            found.update(name for name, _, _ in _parameters(fn))
        except (ValueError, TypeError):
            break
    return found


def _partial_keywords(fn: Any) -> set[str]:
    """The keywords a ``functools.partial`` binds (at any depth): their values became
    defaults, which messages never show."""
    found: set[str] = set()
    while isinstance(fn, functools.partial):
        found.update(fn.keywords)
        fn = fn.func
    return found


def _bound_default_problem(name: str, default: Any) -> str:
    return (
        f"parameter {name!r}: the value the functools.partial binds it to (a"
        f" {type(default).__qualname__}) is not JSON-representable, and a bound keyword is"
        " a default the model may replace; bind it by position, or wrap the function in"
        " one without the parameter"
    )


def _named_so(documented: str, names: set[str], bound: set[str]) -> bool:
    """Whether a docstring's name is a parameter's as Python reads it (NFKC: ``ﬁle`` is ``file``)."""
    if documented.isascii():
        return False
    normal = unicodedata.normalize("NFKC", documented)
    return normal in names or normal in bound


def _check_documented(
    fn: Callable[..., Any],
    documented: dict[str, str],
    names: set[str],
    properties: dict[str, Any],
    out: FunctionSchema,
    required: bool,
) -> None:
    qualname = callable_name(fn)
    bound = _bound_by_partial(fn)
    for name in documented:
        if name not in names and name not in bound and not _named_so(name, names, bound):
            text = f"the docstring documents parameter {name!r}, which {qualname} does not have"
            if required:
                out.problems.append(text + "; fix the name or remove the entry")
            else:
                out.warnings.append(f"{qualname}: {text}")
    if not required:
        for name, schema in properties.items():
            if "description" not in schema:
                out.undocumented.append(
                    f"{qualname}: parameter {name!r} has no description; document it in the"
                    " docstring (Args:) or with Annotated[..., Field(description=...)]"
                )


def function_schema(
    fn: Callable[..., Any],
    *,
    docstring_style: str = "auto",
    require_parameter_descriptions: bool = False,
    skip_receiver: bool = False,
) -> FunctionSchema:
    """Derive the tool schema of a function.

    Args:
        fn: The function.
        docstring_style: "auto", "google", "numpy", "rest" or "epydoc".
        require_parameter_descriptions: Make a parameter without a description
            (or a documented parameter the function lacks) an error.
        skip_receiver: Leave the first parameter out (``self`` or ``cls``).

    Returns:
        The schema, description and parameter types.

    Raises:
        ToolDefinitionError: Every problem found, at once.
    """
    out = derive(
        fn,
        docstring_style=docstring_style,
        require_parameter_descriptions=require_parameter_descriptions,
        skip_receiver=skip_receiver,
    )
    if out.problems:
        from toolfold._errors import ToolDefinitionError

        raise ToolDefinitionError(callable_name(fn), out.problems)
    return out


__all__ = ["FunctionSchema", "derive", "function_schema", "type_repr"]
