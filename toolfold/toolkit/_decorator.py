"""`@tool`: a function becomes a `Tool`, its schema derived from hints and docstring."""

from __future__ import annotations

import functools
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar, overload

from toolfold._errors import ToolDefinitionError
from toolfold.toolkit._docstrings import ToolDefinitionWarning, UndocumentedParameterWarning
from toolfold.toolkit._options import ApprovalPolicy, ToolOptions, name_problems
from toolfold.toolkit._signature import FunctionSchema, callable_name, derive
from toolfold.toolkit._tool import P, Tool, generator_problems, is_async_callable

R = TypeVar("R")


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool | None = None,
    requires_approval: ApprovalPolicy = False,
    timeout: float | None = None,
    max_retries: int = 3,
    blocking: bool = True,
    docstring_style: str = "auto",
    require_parameter_descriptions: bool = False,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool | None = None,
    requires_approval: ApprovalPolicy = False,
    timeout: float | None = None,
    max_retries: int = 3,
    blocking: bool = True,
    docstring_style: str = "auto",
    require_parameter_descriptions: bool = False,
) -> Any:
    """Turn a function into a tool; its schema comes from its hints and docstring.

    Use it bare (``@tool``) or with options (``@tool(name="search")``). The
    tool stays callable exactly like the function. On a method it gives each
    instance a tool bound to it (no ``self`` in the schema); ``staticmethod``
    and ``classmethod`` work under it too. Callable objects (their ``__call__``),
    classes (their constructor) and ``functools.partial`` objects become tools too.

    Args:
        fn: The function (when used bare).
        name: The tool name; the function's name by default (a callable
            object's class name; a partial has none, so it needs one).
        description: What the tool does; the docstring's summary and long
            description by default.
        strict: Ask providers for strict schema adherence (None: when possible).
        requires_approval: True, or a predicate over (call, state), to make the
            run wait for an approval before executing a call.
        timeout: Seconds a call may take before it counts as failed.
        max_retries: Consecutive failures allowed before the run fails.
        blocking: False for a quick sync function that never blocks (no I/O,
            no sleeping, no locks held long): async runs call it inline on the
            event loop instead of handing it to a worker thread, which saves
            the hand-off. Not allowed with ``timeout`` (an inline call cannot
            be interrupted). Ignored for async functions, which always run on
            the loop.
        docstring_style: "auto", "google", "numpy", "rest" or "epydoc".
        require_parameter_descriptions: Make an undocumented parameter (or a
            documented one the function lacks) an error instead of a warning.

    Returns:
        The Tool, or a decorator that makes one.

    Raises:
        ToolDefinitionError: Every problem with the function, at once: ``*args``,
            ``**kwargs``, unannotated parameters, types with no schema rule,
            defaults that are not JSON, an invalid name or option.
    """

    options = ToolOptions(
        name=name,
        description=description,
        strict=strict,
        requires_approval=requires_approval,
        timeout=timeout,
        max_retries=max_retries,
        blocking=blocking,
    )
    how = _Derivation(docstring_style, require_parameter_descriptions)

    if fn is not None:
        return _make_tool(fn, options, how, 3)

    def decorate(function: Any) -> Tool[Any, Any]:
        return _make_tool(function, options, how, 3)

    setattr(decorate, _UNAPPLIED, True)  # (see `is_unapplied`)
    return decorate


#: The attribute marking the decorator ``tool(name=...)`` returns: given where a tool
#: goes (``tools=[tool(name="x")]``, the function forgotten) it made a tool of itself.
_UNAPPLIED = "_toolfold_tool_decorator"


def is_unapplied(value: Any) -> bool:
    """Whether ``value`` is the decorator ``tool(...)`` returns, not applied to a function
    (or a wrapper of it made with `functools.wraps`, which copies the mark)."""
    return isinstance(value, types.FunctionType) and value.__dict__.get(_UNAPPLIED) is True


def _unapplied_problem() -> str:
    return (
        "is the decorator tool(...) returns, not applied to a function: write "
        "@tool(...) above the def, or give tool(function, ...)"
    )


class _Derivation(NamedTuple):
    """How ``@tool`` reads a function: the options that are not the tool's own."""

    docstring_style: str
    require_parameter_descriptions: bool


def _make_tool(
    function: Any, options: ToolOptions, how: _Derivation, stacklevel: int
) -> Tool[Any, Any]:
    """The tool of ``function``; ``stacklevel`` is the user's frame as warnings count it."""
    if isinstance(function, Tool):
        # Named by its function's Python name: a tool's name may be no identifier (get-time).
        variable = getattr(function.function, "__name__", "")
        if not variable.isidentifier():
            variable = "the_tool"
        raise ToolDefinitionError(
            function.name,
            [
                "is already a tool; apply @tool once (for a copy with other options: "
                f"{variable}.replace(name=..., timeout=...))"
            ],
        )
    if is_unapplied(function):  # tool(tool(name="x"))
        raise ToolDefinitionError("tool(...)", [_unapplied_problem()])
    if isinstance(function, types.MethodType) and isinstance(function.__func__, Tool):
        # `@classmethod` over `@tool`: from Python 3.13 on, classmethod no longer
        # calls the tool's __get__, so `Shop.search` is a method of the tool.
        return _rebind(function.__func__, function.__self__, options)
    function, receiver = _receiver(_over_tool_function(function))
    if not callable(function):
        what = f"an object of type {type(function).__qualname__}"
        raise ToolDefinitionError(what, [f"@tool needs a function, not {what}"])
    derived = _derive(function, receiver, how, stacklevel)
    options = options.resolved(default_name(function), derived.description)
    is_async = is_async_callable(function)
    problems = generator_problems(function) + options.problems(is_async) + derived.problems
    if options.name is None and isinstance(function, functools.partial):
        asked = _partial_name_problem(function)
        problems = [asked if p.startswith("tool name None ") else p for p in problems]
    if problems:
        raise ToolDefinitionError(callable_name(function), problems)
    for message in derived.warnings:
        warnings.warn(message, ToolDefinitionWarning, stacklevel=stacklevel)
    for message in derived.undocumented:
        warnings.warn(message, UndocumentedParameterWarning, stacklevel=stacklevel)
    return Tool._derived(function, derived, options, receiver, is_async)


def _over_tool_function(function: Any) -> Any:
    """A ``functools.partial`` of a tool (``partial(base_tool, b=1)``) as the same partial
    of the tool's function, which calling the tool calls: a `Tool` has no signature
    ``inspect`` can read (it is a descriptor, for method tools)."""
    if not isinstance(function, functools.partial):
        return function
    inner = _over_tool_function(function.func)
    if isinstance(inner, Tool) and inner.function is not None:
        inner = inner.function
    if inner is function.func:
        return function
    return functools.partial(inner, *function.args, **function.keywords)


def _receiver(function: Any) -> tuple[Any, str | None]:
    """The function to derive from, and what binds its first parameter (if anything)."""
    if isinstance(function, staticmethod):
        return function.__func__, None
    if isinstance(function, classmethod):
        return function.__func__, "class"
    bound = isinstance(function, types.MethodType)  # tool(obj.method): self is already bound
    if not bound and callable(function) and _defined_in_class(function):
        return function, "instance"
    return function, None


def _derive(
    function: Any, receiver: str | None, how: _Derivation, stacklevel: int
) -> FunctionSchema:
    derived = derive(
        function,
        docstring_style=how.docstring_style,
        require_parameter_descriptions=how.require_parameter_descriptions,
        skip_receiver=receiver is not None,
    )
    if derived.unresolved:
        # String annotations may name classes local to the caller's function.
        caller = sys._getframe(stacklevel)
        localns = {**caller.f_locals}
        if caller.f_back is not None and _defined_in_class(function):
            localns = {**caller.f_back.f_locals, **localns}  # class body -> its enclosing function
        derived = derive(
            function,
            docstring_style=how.docstring_style,
            require_parameter_descriptions=how.require_parameter_descriptions,
            skip_receiver=receiver is not None,
            localns=localns,
        )
    return derived


def _partial_name_problem(partial: functools.partial[Any]) -> str:
    """The problem of a partial given no name: which name= to pass, its function's as a
    hint when that is a valid tool name (a lambda's ``<lambda>`` is not)."""
    inner: Any = partial
    while isinstance(inner, functools.partial):
        inner = inner.func
    name = getattr(inner, "__name__", None)
    valid = isinstance(name, str) and not name_problems(name)
    example = f', e.g. tool(name="{name}")(partial) for its function\'s' if valid else ""
    return f"a functools.partial has no name of its own: pass name=...{example}"


def default_name(function: Any) -> Any:
    """A tool's name when none is given: the function's name, or a callable object's class name.

    Partials have neither (their function's name would hide what was bound):
    they get None, which asks for ``name=...``.
    """
    name = getattr(function, "__name__", None)
    if name is None and not isinstance(function, functools.partial):
        name = type(function).__name__
    return name


def _rebind(made: Tool[Any, Any], receiver: object, options: ToolOptions) -> Tool[Any, Any]:
    bound = made.__get__(receiver, type(receiver)) if made._receiver is not None else made
    changes = options.given()
    return bound.replace(**changes) if changes else bound


def _defined_in_class(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is being defined in a class body as a method.

    At decoration time a method is still a plain function; its qualified name
    (``Shop.search``, not ``make.<locals>.search``) tells where it lives. A
    function in a class used as a namespace (``def search(query: str)``) is not
    a method: a receiver is called ``self``/``cls`` or left unannotated.
    """
    parts = getattr(function, "__qualname__", "").split(".")
    if len(parts) < 2 or parts[-2] == "<locals>":
        return False
    code = getattr(function, "__code__", None)
    if code is None or code.co_argcount == 0:
        return False
    first = code.co_varnames[0]
    return first in ("self", "cls") or first not in getattr(function, "__annotations__", {})
