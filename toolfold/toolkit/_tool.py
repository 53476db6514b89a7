"""`Tool`: a name, a description, a JSON Schema and (optionally) a function.

Contract the runtime relies on (do not change without telling everyone):

- ``tool.name``, ``tool.description``, ``tool.parameters`` (JSON Schema, a read-only `FrozenDict`),
  ``tool.function`` (None for schema-only tools), ``tool.strict``,
  ``tool.requires_approval`` (bool or a predicate ``(call, state) -> bool``),
  ``tool.timeout`` (seconds or None), ``tool.max_retries`` (int, default 3),
  ``tool.is_async``, ``tool.blocking`` (bool, default True: a sync function
  may block, so the async runtime runs it in a worker thread; False: it is
  quick and never blocks, so it runs inline on the event loop; never False
  together with a timeout for a sync function). These are the plain fields of the runtime's
  ``ToolDefinition`` (toolkit cannot import runtime, so runtime converts).
- ``tool.validate_arguments(raw)`` -> dict of structured arguments, or raises
  ``ToolArgumentError`` (with ``message_for_model``).
- ``tool.invoke(arguments, context)`` calls the function with structured
  arguments (keyword arguments for decorated tools, one dict for explicit-schema
  tools), injecting ``context`` into the RunContext parameter if there is one.
  Returns whatever the function returns (a coroutine for async functions).
- ``tool.format_result(value)`` -> str for the model.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, NoReturn, ParamSpec, TypeVar, overload

from toolfold._errors import RENAME_PARAMETER, ToolDefinitionError, advise_renaming
from toolfold.toolkit._context import RunContext
from toolfold.toolkit._frozen import freeze
from toolfold.toolkit._jsonschema import MISSING, escape, not_json, ref_loops, resolve_local
from toolfold.toolkit._options import OPTION_NAMES, ApprovalPolicy, ToolOptions
from toolfold.toolkit._pydantic import is_model
from toolfold.toolkit._results import NoResultError
from toolfold.toolkit._results import format_result as _format_result

if TYPE_CHECKING:
    from toolfold.toolkit._signature import FunctionSchema

P = ParamSpec("P")
R = TypeVar("R", covariant=True)

_EMPTY_OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}


# The key prefix of a method tool bound to an object, cached in the object (`Tool.__get__`).
_BOUND = "_toolfold_bound_"


class Tool(Generic[P, R]):
    """A tool a model can call.

    Made by ``@tool`` from a function (the schema is derived), or directly with
    an explicit JSON Schema; with ``function=None`` the tool's calls are handed
    back to the caller instead of being run. A Tool is callable exactly like its
    function.

    Args:
        name: The tool name the model sees (``a-zA-Z0-9_-``, at most 64
            characters; not "auto", "none" or "required").
        description: What the tool does, for the model.
        parameters: The JSON Schema of the arguments (an object schema); it is
            checked against the JSON Schema meta-schema. Its function receives
            the arguments as one dict. The tool keeps a deep copy, read-only
            (``tool.parameters`` is a `FrozenDict`): changing the caller's dict
            afterwards changes no tool.
        function: The function to run, or None for a tool whose calls are
            returned to the caller.
        strict: Ask providers for strict schema adherence (None: when possible).
        requires_approval: True, or a predicate over (call, state), to make the
            run wait for an approval before executing a call.
        timeout: Seconds a call may take before it counts as failed.
        max_retries: Consecutive failures allowed before the run fails.
        blocking: False for a quick sync function that never blocks (no I/O,
            no sleeping, no locks held long): async runs call it inline on the
            event loop instead of handing it to a worker thread. Not allowed
            with ``timeout`` (an inline call cannot be interrupted). Ignored
            for async functions, which always run on the loop.

    Raises:
        ToolDefinitionError: Every problem with the name, the schema and the
            options, at once.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[P, R] | None
    strict: bool | None
    requires_approval: ApprovalPolicy
    timeout: float | None
    max_retries: int
    blocking: bool
    is_async: bool

    # A tool without a function (its calls go back to the caller) is a
    # ``Tool[..., Any]``: nothing says what calling it would take or give.
    @overload
    def __init__(
        self: Tool[..., Any],
        name: str,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        function: None = None,
        *,
        strict: bool | None = None,
        requires_approval: ApprovalPolicy = False,
        timeout: float | None = None,
        max_retries: int = 3,
        blocking: bool = True,
    ) -> None: ...

    @overload
    def __init__(
        self,
        name: str,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        function: Callable[P, R] = ...,
        *,
        strict: bool | None = None,
        requires_approval: ApprovalPolicy = False,
        timeout: float | None = None,
        max_retries: int = 3,
        blocking: bool = True,
    ) -> None: ...

    def __init__(
        self,
        name: str,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        function: Callable[P, R] | None = None,
        *,
        strict: bool | None = None,
        requires_approval: ApprovalPolicy = False,
        timeout: float | None = None,
        max_retries: int = 3,
        blocking: bool = True,
    ) -> None:
        options = ToolOptions(
            name=name,
            description=description,
            strict=strict,
            requires_approval=requires_approval,
            timeout=timeout,
            max_retries=max_retries,
            blocking=blocking,
        )
        is_async = function is not None and is_async_callable(function)
        problems = options.problems(is_async)
        given: object = function  # explicit tools are often built from config data
        if given is not None and not callable(given):
            problems.append(f"function must be callable or None, not {given!r}")
        elif function is not None:
            problems += [f"function {p}" for p in generator_problems(function)]
            problems += one_dict_problems(function)
        schema = _EMPTY_OBJECT if parameters is None else parameters
        if parameters is not None:
            problems += schema_problems(schema)
        if problems:
            raise ToolDefinitionError(repr(name), problems)
        self._init(options, freeze(schema), function, is_async)

    @classmethod
    def _derived(
        cls,
        function: Callable[P, R],
        signature: FunctionSchema,
        options: ToolOptions,
        receiver: str | None,
        is_async: bool,
    ) -> Tool[P, R]:
        """The tool ``@tool`` makes: options checked, schema derived from ``function``."""
        made: Tool[P, R] = cls.__new__(cls)
        made._init(options, freeze(signature.parameters), function, is_async, signature, receiver)
        return made

    def _init(
        self,
        options: ToolOptions,
        parameters: dict[str, Any],
        function: Callable[P, R] | None,
        is_async: bool,
        signature: FunctionSchema | None = None,
        receiver: str | None = None,
    ) -> None:
        # the only place a Tool's fields are set; options are already checked
        # (through ``__dict__``: assigning a field is refused, see ``__setattr__``)
        self._apply(options)
        fields = self.__dict__
        fields["parameters"] = parameters
        self._set_function(function, is_async)
        self._pass_dict = signature is None
        self._param_types = None if signature is None else signature.param_types
        self._model = None if signature is None else signature.model  # tool(Model)
        self._context_param = None if signature is None else signature.context_param
        self._positional_only = () if signature is None else signature.positional_only
        self._positional_defaults = {} if signature is None else signature.positional_defaults
        self._receiver = receiver  # "instance" / "class": bind through __get__
        self._attribute: str | None = None
        # shared by the bound copies of a method tool, so one checker serves them all
        self._checker: list[Any] = [None]
        # the parameters' structure hooks, when `build_hooks` built them before the checker
        self._hooks: list[Any] = [None]
        if function is not None:
            for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
                value = getattr(function, attr, None)
                if value is not None:
                    self.__dict__[attr] = value

    def _set_function(self, function: Callable[P, R] | None, is_async: bool) -> None:
        """Set the function the tool runs and what follows from it: ``is_async``,
        ``__wrapped__`` and, for an async one, the marks that make the tool a coroutine
        function to ``inspect`` (`_mark_coroutine_function`)."""
        fields = self.__dict__
        fields["function"] = function
        fields["is_async"] = is_async
        if function is not None:
            fields["__wrapped__"] = function
            if is_async:
                _mark_coroutine_function(self, function)

    def _apply(self, options: ToolOptions) -> None:
        self.__dict__.update(zip(OPTION_NAMES, options, strict=True))

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FIELDS:
            _refuse(self, name, "set")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in _FIELDS:
            _refuse(self, name, "delete")
        object.__delattr__(self, name)

    def _options(self) -> ToolOptions:
        fields = self.__dict__
        return ToolOptions(*[fields[name] for name in OPTION_NAMES])

    def _copy(self) -> Tool[P, R]:
        new: Tool[P, R] = Tool.__new__(Tool)
        new.__dict__.update(self.__dict__)
        return new

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        # A module-level ``@tool`` (or one in a class body) replaced its function in the
        # module: pickle's own way, which names the function by module and qualname,
        # would find this tool there instead and refuse. Such a tool pickles as that
        # name, as a function does; any other (a copy from `replace`, a bound method
        # tool, one made in a function) as its attributes, as before.
        # A module cloudpickle was told to pickle by value (``register_pickle_by_value``,
        # how a module the Ray workers lack is shipped) keeps its tools pickling by
        # attributes: the other side has no module to find the name in.
        found = _module_attribute_name(self)
        if found is not None and not _pickled_by_value(found[0]):
            return (_module_attribute, found)
        bound = _bound_method(self)
        if bound is not None:
            # A method tool bound to an object: its bound method would pickle as
            # ``getattr(obj, name)``, which finds this tool (cached in the object) and
            # not the method: loaded, the tool would call itself. Named by the class
            # defining it instead, bound again on load.
            state = self.__getstate__()
            del state["function"], state["__wrapped__"]
            return (_bind_again, (type(self), *bound, state))
        found = _module_tool_function_name(self)
        if found is not None:
            # A copy (`replace`) of a module-level tool runs its function, whose name
            # finds that tool, not the function: pickle's own way would refuse it. The
            # function pickles as that tool's ``.function`` instead.
            state = self.__getstate__()
            del state["function"], state["__wrapped__"]
            return (_with_module_tool_function, (type(self), *found, state))
        return object.__reduce_ex__(self, protocol)

    def __copy__(self) -> Tool[P, R]:
        # A new tool, even of a module-level one (which pickles as its name, the very
        # tool): a copy's changes (otel sets its ``invoke``) stay off the original.
        new: Tool[P, R] = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def __deepcopy__(self, memo: dict[int, Any]) -> Tool[P, R]:
        import copy

        new: Tool[P, R] = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__getstate__(), memo))
        new._mark_again()
        return new

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (or copied) by its attributes: without its argument checker and
        # structure hooks, caches built again on use, which hold what pickle cannot
        # take (a compiled validator's class, generated hooks); a tool pickled only
        # until its first call, or until an agent built its hooks.
        # Without the marks that make an async tool a coroutine function to inspect:
        # before 3.12 a code object (which pickle refuses), from 3.12 a marker object
        # (which would load as another object, no mark); `__setstate__` marks again.
        state = dict(self.__dict__)
        for mark in _COROUTINE_MARKS:
            state.pop(mark, None)
        state["_checker"] = [None]
        state["_hooks"] = [None]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A tool pickled by an earlier version has no ``_hooks`` nor ``_model`` (and its parameters
        # are a plain dict): filled in, so that it validates and runs when loaded.
        fields = self.__dict__
        fields.update(state)
        fields.setdefault("_checker", [None])
        fields.setdefault("_hooks", [None])
        fields.setdefault("_model", None)  # (no tool of a pydantic model then)
        if "parameters" in fields:
            fields["parameters"] = freeze(fields["parameters"])
        self._mark_again()

    def _mark_again(self) -> None:
        """Mark a loaded or deep-copied async tool as a coroutine function again (the
        marks are no state: `__getstate__`; one pickled by an earlier version may hold
        another process's)."""
        fields = self.__dict__
        for mark in _COROUTINE_MARKS:
            fields.pop(mark, None)
        function = fields.get("function")
        if function is not None and fields.get("is_async"):
            _mark_coroutine_function(self, function)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.function is None:
            raise TypeError(f"tool {self.name!r} has no function to call")
        return self.function(*args, **kwargs)

    # -- methods: a tool in a class body binds to the instance (or the class) --

    def __set_name__(self, owner: type, name: str) -> None:
        self._attribute = name
        if self._receiver == "instance":
            self._cache_key = _BOUND + name
        if is_model(owner):
            _class_var_of_model(owner, name)

    # Where a method tool's tool bound to an object is cached in the object (`__get__`):
    # none for other tools, for which no object has this key.
    _cache_key = _BOUND

    def __get__(self, instance: object, owner: type | None = None) -> Tool[..., R]:
        if instance is not None:
            # The tool bound to this object, cached in it, first: every ``obj.method``
            # reads it, so one dict lookup and two identity checks.
            try:
                cached: Any = instance.__dict__.get(self._cache_key)
            except AttributeError:  # (no __dict__: a slotted object caches nothing)
                cached = None
            if cached is not None:
                method = cached.function
                if method.__self__ is instance and method.__func__ is self.function:
                    return cached  # type: ignore[no-any-return]
        return self._bind(instance, owner)

    def _bind(self, instance: object, owner: type | None) -> Tool[..., R]:
        """`__get__` but for the bound tool cached in ``instance``: this tool (a tool of no
        method, or read from the class), or a copy bound to ``instance`` (or to the
        class, for a classmethod tool), cached in ``instance`` when it is its method's."""
        if self._receiver is None or self.function is None:
            return self
        if self._receiver == "class":
            target: object = owner if owner is not None else type(instance)
        elif instance is None:
            return self
        else:
            target = instance
        attribute = self._attribute
        instance_dict = None
        if instance is not None and self._receiver == "instance" and attribute is not None:
            # Cached in the object under a key of its own, not the attribute's name
            # (where later lookups would find it first, this not asked): a copy of the
            # object (`copy.copy` shares its values) holds the tool bound to the
            # original, which it would call, so the cache serves only the object it is
            # bound to (`__get__`). Only when the object's class finds this tool by its
            # name: one reached through super() (the base's, which a subclass
            # overrides) is not what the object's attribute is.
            instance_dict = getattr(instance, "__dict__", None)
            if _defined(type(instance), attribute) is not self:
                instance_dict = None
        bound: Tool[..., R] = self._copy()
        bound.__dict__["function"] = types.MethodType(self.function, target)
        bound.__dict__["__wrapped__"] = bound.function
        bound._receiver = None
        if instance_dict is not None:
            instance_dict[self._cache_key] = bound
        return bound

    # -- the runtime's side --

    def validate_arguments(self, raw: str | Mapping[str, Any]) -> dict[str, Any]:
        """Parse, validate and structure arguments from a model.

        The checker (a compiled JSON Schema validator and cattrs hooks) is built
        on the first call, so decorating stays cheap.

        Args:
            raw: The JSON text or the already-decoded mapping.

        Returns:
            The structured arguments by parameter name (decorated tools), or
            the validated dict (explicit-schema tools).

        Raises:
            ArgumentJSONError: The text is not JSON.
            ArgumentValidationError: The value breaks the schema or the types.
        """
        checker = self._checker[0]
        if checker is None:
            from toolfold.toolkit._arguments import ArgumentChecker

            checker = ArgumentChecker(
                self.name,
                self.parameters,
                self._param_types,
                self._pass_dict,
                self._hooks[0],
                self._model,
            )
            self._checker[0] = checker
        result: dict[str, Any] = checker.check(raw)
        return result

    def invoke(self, arguments: Mapping[str, Any], context: RunContext[Any] | None = None) -> Any:
        """Call the function with validated arguments (a coroutine if async).

        Args:
            arguments: What ``validate_arguments`` returned.
            context: The run context, passed to the RunContext parameter.

        Returns:
            Whatever the function returns.

        Raises:
            TypeError: The tool has no function, or its function takes a
                RunContext (a parameter without a default) and ``context`` is None.
        """
        function: Callable[..., Any] | None = self.function
        if function is None:
            raise TypeError(f"tool {self.name!r} has no function to call")
        if self._pass_dict:
            return function(dict(arguments))
        if self._model is not None and function is self._model:
            from toolfold.toolkit._arguments import ModelArguments

            # the model the check made (its validators ran there); else it is made now
            if isinstance(arguments, ModelArguments) and arguments.model is function:
                return arguments.built
        kwargs = dict(arguments)
        if self._context_param is not None:
            if context is None and self._context_required():
                raise TypeError(
                    f"tool {self.name!r} takes a RunContext (parameter "
                    f"{self._context_param!r}): pass context=RunContext(...) to invoke()"
                )
            kwargs[self._context_param] = context
        if self._positional_only:
            return function(*self._positional_arguments(kwargs), **kwargs)
        return function(**kwargs)

    def _context_required(self) -> bool:
        """Whether the RunContext parameter has no default (``ctx: RunContext | None = None``
        has one: None is its value). Asked only when `invoke` is given no context."""
        try:
            parameter = inspect.signature(self.function).parameters[self._context_param]  # type: ignore[arg-type,index]
        except (TypeError, ValueError, KeyError):  # (no signature to read: as before)
            return False
        return parameter.default is inspect.Parameter.empty

    def _positional_arguments(self, kwargs: dict[str, Any]) -> list[Any]:
        """The positional-only arguments, taken out of ``kwargs``, up to the last one given.

        One left out before a given one is passed as its default, so that every
        value reaches its own parameter.
        """
        names = self._positional_only
        count = next((i + 1 for i in range(len(names) - 1, -1, -1) if names[i] in kwargs), 0)
        args: list[Any] = []
        for name in names[:count]:
            if name in kwargs:
                args.append(kwargs.pop(name))
            elif name in self._positional_defaults:
                args.append(self._positional_defaults[name])
            else:
                raise TypeError(f"tool {self.name!r}: missing the argument {name!r}")
        return args

    def format_result(self, value: Any) -> str:
        """Turn a tool's return value into text for the model.

        Raises:
            TypeError: ``value`` is a generator or another iterator (``map(...)``,
                ``iter(...)``...), an open file or stream, or a run's ``Response``
                or ``RunState`` (there or inside it), naming the tool (a run gives
                the model the error as the call's result).
        """
        try:
            return _format_result(value)
        except TypeError as exc:  # (only for an iterator, a stream or a run's record)
            # A TypeError the model reads as such; a run's record stays the cause (`resume`).
            cause = exc if isinstance(exc, NoResultError) else None
            raise TypeError(f"tool {self.name!r} {exc}") from cause

    def replace(self, **changes: Any) -> Tool[P, R]:
        """A copy with some options, or its function, changed (``name``, ``timeout``, ``function``...).

        ``function=`` swaps the function the tool runs (a test's fake, a
        wrapper), keeping the name, description and schema: the new function
        must be callable and accept the arguments the tool passes (the
        schema's parameters by keyword, as the old one did; an explicit-schema
        tool passes one dict), and ``is_async`` follows it. For a test:
        ``agent.evolve(tools=[add.replace(function=fake_add)])``.

        Raises:
            ToolDefinitionError: A changed name or option is invalid, or the new
                function is not callable, is a generator function or does not
                accept the tool's arguments.
            TypeError: An unknown option is given.
        """
        allowed = sorted({*OPTION_NAMES, "function"})
        unknown = sorted(set(changes).difference(allowed))
        if unknown:
            raise TypeError(f"replace() got unexpected options {unknown}; allowed: {allowed}")
        swapping = "function" in changes
        function = changes.pop("function", self.function)
        options = self._options()._replace(**changes)
        is_async = self.is_async
        problems: list[str] = []
        if swapping:
            is_async = callable(function) and is_async_callable(function)
            problems += self._function_problems(function)
        problems = options.problems(is_async) + problems
        if problems:
            raise ToolDefinitionError(repr(options.name), problems)
        new = self._copy()
        new._apply(options)
        if "name" in changes:
            new._checker = [None]  # the checker's messages name the tool
        if swapping:
            for mark in _COROUTINE_MARKS:
                new.__dict__.pop(mark, None)  # the old function's
            new._set_function(function, is_async)
        return new

    def _function_problems(self, function: object) -> list[str]:
        """Why ``function`` cannot replace this tool's function (``[]``: it can)."""
        if not callable(function):
            return [f"function must be callable, not {function!r}"]
        problems = [f"function {p}" for p in generator_problems(function)]
        receiver: list[Any] = (
            [None] if self._receiver is not None and self.function is not None else []
        )
        if self._pass_dict:  # (one check, one wording with Tool(...)'s)
            return problems + one_dict_problems(function, receiver)
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):  # a builtin without a signature: not checkable
            return problems
        calls: dict[str, tuple[list[Any], dict[str, Any]]]
        properties = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", ()))
        context = [self._context_param] if self._context_param is not None else []
        positional = self._positional_only
        names = [n for n in properties if n not in positional] + context
        calls = {
            f"every parameter ({', '.join(map(repr, [*positional, *names]))})": (
                [*receiver, *(None for _ in positional)],
                dict.fromkeys(names),
            ),
            "the required parameters alone": (
                [*receiver, *(None for n in positional if n in required)],
                dict.fromkeys(n for n in names if n in required or n in context),
            ),
        }
        for what, (args, kwargs) in calls.items():
            try:
                signature.bind(*args, **kwargs)
            except TypeError as exc:
                problems.append(
                    f"function {_label(function)} cannot be called with {what}, as the tool "
                    f"calls it: {exc}"
                )
                break
        return problems


def one_dict_problems(function: Callable[..., Any], receiver: Sequence[Any] = ()) -> list[str]:
    """Why an explicit-schema tool cannot call ``function`` with the arguments as one dict.

    Checked when the `Tool` is made and when `Tool.replace` swaps its
    function: the call shape it would otherwise fail every call with
    (``def run(args, extra)``), after the model's call was paid for. A
    function without a signature (a builtin) is not checked. The signature
    read is ``function``'s own, not the one `functools.wraps` copies from
    the function it adapts (``__wrapped__``): a dict-taking adapter over a
    function of named parameters is called with the dict.

    Args:
        function: The tool's function.
        receiver: What is passed before the arguments (``[None]`` for a
            tool that binds the instance or class it is read from).
    """
    try:
        signature = inspect.signature(function, follow_wrapped=False)
    except (TypeError, ValueError):
        return []
    try:
        signature.bind(*receiver, {})
    except TypeError as exc:
        return [
            f"function {_label(function)} cannot be called with the arguments as one dict, "
            f"as the tool calls it (function(arguments)): {exc}; a function of named "
            f"parameters is made a tool with @tool, which derives the schema"
        ]
    return []


# A tool's fields: read-only once made. Agents copy them when they are built
# (and cache what they derive), so a change afterwards would reach some runs
# and not others; `Tool.replace` makes a changed, checked copy instead.
_FIELDS = frozenset({*OPTION_NAMES, "parameters", "function", "is_async"})


def _refuse(tool: Tool[..., Any], name: str, action: str) -> NoReturn:
    if name in OPTION_NAMES or name == "function":
        how = f"make a changed copy with tool.replace({name}=...)"
        if name == "function":
            how += (
                " (in a test: agent.evolve(tools=[tool.replace(function=fake)]), see docs/tools.md)"
            )
    else:
        how = "make a new Tool(...) (or decorate a new function with @tool)"
    tool_name = tool.__dict__.get("name")
    # a subclass setting a field before super().__init__() has no name yet
    which = "a tool" if tool_name is None else f"tool {tool_name!r}"
    raise AttributeError(
        f"cannot {action} {name!r} of {which}: a Tool is "
        f"read-only once made (agents built with it keep what it was); {how}"
    )


def reads_context(tool: Tool[..., Any]) -> bool:
    """Whether `Tool.invoke` hands ``tool`` its `RunContext` (a parameter asks for it).

    True as well for a subclass with its own ``invoke``, which may read it.
    """
    return tool._context_param is not None or type(tool).invoke is not Tool.invoke


# The methods a call goes through when it does not take `quick_arguments`' lane:
# when either is replaced (a test's spy, a wrapper), every call goes through it.
_INVOKE = Tool.invoke
_VALIDATE = Tool.validate_arguments


def _module_attribute_name(tool: Tool[..., Any]) -> tuple[str, str] | None:
    """(module, qualname) where ``tool`` itself is found, importable, or None.

    Not in ``__main__`` nor in a module made without an import (no ``__spec__``):
    another process could not import that name, and cloudpickle (Ray) pickles
    such a module's functions by value, as it did the tool's function.
    """
    fields = tool.__dict__
    name = _importable_name(fields.get("__module__"), fields.get("__qualname__"))
    return name if name is not None and _importable_attribute(*name) is tool else None


def _module_tool_function_name(tool: Tool[..., Any]) -> tuple[str, str] | None:
    """(module, qualname) of the module-level tool (importable, as for
    `_module_attribute_name`) whose function ``tool`` runs, or None.

    The function of a copy of a module-level ``@tool`` (`Tool.replace`): its module
    and qualname find that tool, not the function.
    """
    function = tool.__dict__.get("function")
    name = _importable_name(
        getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    )
    if name is None or _pickled_by_value(name[0]):
        return None
    found = _importable_attribute(*name)
    if not isinstance(found, Tool) or found is tool or found.function is not function:
        return None
    return name


def _importable_name(module_name: object, qualname: object) -> tuple[str, str] | None:
    """(module, qualname) if both are names and the module, loaded, is one another
    process could import by that name (not ``__main__``, not one with no ``__spec__``)."""
    if not isinstance(module_name, str) or not isinstance(qualname, str):
        return None
    if module_name == "__main__":
        return None
    if getattr(sys.modules.get(module_name), "__spec__", None) is None:
        return None
    return (module_name, qualname)


def _importable_attribute(module_name: str, qualname: str) -> Any:
    """What loaded module ``module_name`` holds at ``qualname`` (None if nothing)."""
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):  # (a "<locals>" part is found nowhere)
        found = getattr(found, part, None)
    return found


def _pickled_by_value(module_name: str) -> bool:
    """Whether a loaded cloudpickle (its own or Ray's copy) pickles ``module_name`` by
    value (`cloudpickle.register_pickle_by_value` of it or of a package holding it).

    cloudpickle is not imported here: not loaded, it registered nothing.
    """
    names = {module_name}
    parts = module_name.split(".")
    names.update(".".join(parts[:i]) for i in range(1, len(parts)))
    for library in ("cloudpickle", "ray.cloudpickle"):
        registry = getattr(sys.modules.get(library), "list_registry_pickle_by_value", None)
        if registry is not None and names & set(registry()):
            return True
    return False


def _bound_method(tool: Tool[..., Any]) -> tuple[type, str, object] | None:
    """(the class defining it, its attribute, the object it is bound to) for a method
    tool bound by `Tool.__get__` (an instance's, or a class's for a classmethod), or
    None for any other tool."""
    function = tool.__dict__.get("function")
    attribute = tool._attribute
    if not isinstance(function, types.MethodType) or attribute is None:
        return None
    target = function.__self__
    owners = target.__mro__ if isinstance(target, type) else type(target).__mro__
    for owner in owners:  # (the class's own, or a base's reached through super())
        defined = owner.__dict__.get(attribute)
        if isinstance(defined, Tool) and defined.function is function.__func__:
            return (owner, attribute, target)
    return None


def _defined(cls: type, attribute: str) -> object:
    """What ``cls`` holds at ``attribute``, as its lookup finds it (None if nothing)."""
    for owner in cls.__mro__:
        if attribute in owner.__dict__:
            return owner.__dict__[attribute]
    return None


def _bind_again(
    kind: type[Tool[..., Any]], owner: type, attribute: str, target: object, state: dict[str, Any]
) -> Any:
    """A bound method tool loaded (`Tool.__reduce_ex__`): a ``kind`` with its attributes,
    its function ``owner``'s tool at ``attribute`` bound to ``target`` again."""
    defined: Tool[..., Any] = owner.__dict__[attribute]
    function = types.MethodType(defined.function, target)  # type: ignore[arg-type]
    made = kind.__new__(kind)
    made.__setstate__({**state, "function": function, "__wrapped__": function})
    return made


def _with_module_tool_function(
    kind: type[Tool[..., Any]], module_name: str, qualname: str, state: dict[str, Any]
) -> Any:
    """A copy of a module-level tool loaded (`Tool.__reduce_ex__`): a ``kind`` with its
    attributes, its function that module-level tool's function."""
    function = _module_attribute(module_name, qualname).function
    made = kind.__new__(kind)
    made.__setstate__({**state, "function": function, "__wrapped__": function})
    return made


def _module_attribute(module_name: str, qualname: str) -> Any:
    """What a module holds at ``qualname`` (a pickled module-level tool, loaded)."""
    import importlib

    found: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def build_hooks(tool: Tool[..., Any]) -> None:
    """Build the structure hooks of ``tool``'s parameters now, not at its first call.

    A run does this for its tools before it asks the model (as it checks its
    output type): a parameter type the converter cannot build (a class with a
    schema rule and no hooks) is then an error before any request is paid for,
    not one raised by the call. The hooks alone, not the checker (whose compiled
    schema costs far more): a run's tools cost little more to set up.

    Raises:
        ToolDefinitionError: The converter cannot structure a parameter's type.
    """
    param_types = getattr(tool, "_param_types", None)
    hooks = getattr(tool, "_hooks", None)
    if not param_types or hooks is None or hooks[0] is not None:
        return  # an explicit-schema tool's arguments are a dict: nothing to build
    checker = tool._checker[0]
    if checker is not None:
        checker.build_hooks()
        return
    from toolfold.toolkit._arguments import parameter_hooks

    hooks[0] = parameter_hooks(tool.name, param_types)


def quick_arguments(tool: Tool[..., Any], arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The keyword arguments for ``tool``'s function from a call's decoded ``arguments``,
    when nothing stands between the two; None: ask `Tool.validate_arguments` and `Tool.invoke`.

    Nothing does for a plain `Tool` (no method of its own, none patched on it
    or on the class, as a test's spy is) of a function that takes keywords
    alone (no context, none positional-only), once its checker has structured
    a call, and arguments that are JSON scalars already of their parameters'
    types (see `ArgumentChecker.as_is`) and pass the fast check:
    ``tool.function(**quick_arguments(tool, arguments))`` then does what
    ``tool.invoke(tool.validate_arguments(arguments))`` would, and the
    arguments are a new dict, as there.
    """
    checker = tool._checker[0]
    as_is = None if checker is None else checker.as_is
    if (
        as_is is None
        or type(tool) is not Tool
        or tool.function is None
        or tool._context_param is not None
        or tool._positional_only
        or tool._model is not None  # (the model checks the arguments as a whole)
        or Tool.invoke is not _INVOKE
        or Tool.validate_arguments is not _VALIDATE
        or "invoke" in tool.__dict__
        or "validate_arguments" in tool.__dict__
    ):
        return None
    for name, item in arguments.items():
        if type(item) not in as_is.get(name, ()):
            return None
    return dict(arguments) if checker.is_valid(arguments) else None


def is_async_callable(function: object) -> bool:
    """Whether calling ``function`` gives a coroutine.

    True for async functions and methods, and for partials and callable objects
    whose ``__call__`` is async (``inspect.iscoroutinefunction`` misses those).
    """
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.iscoroutinefunction(function):
        return True
    if isinstance(function, (types.FunctionType, types.MethodType, type)) or not callable(function):
        return False
    return inspect.iscoroutinefunction(type(function).__call__)


def generator_problems(function: object) -> list[str]:
    """Why ``function`` cannot be a tool because it is a generator function (``[]`` if it is not).

    A tool's result is sent to the model once, when the call returns; a
    generator function returns a generator object, whose repr would be all
    the model read. Refused rather than drained: a generator may never end,
    and what its values mean together (a list? text?) is the function's to say.
    """
    while isinstance(function, functools.partial):
        function = function.func
    call = function
    if not isinstance(function, (types.FunctionType, types.MethodType, type)) and callable(
        function
    ):
        call = type(function).__call__
    if inspect.isasyncgenfunction(function) or inspect.isasyncgenfunction(call):
        return [
            "is an async generator function (it yields): a tool returns its result once; "
            "collect the values and return them (e.g. a list) from an async def instead"
        ]
    if inspect.isgeneratorfunction(function) or inspect.isgeneratorfunction(call):
        return [
            "is a generator function (it yields): a tool returns its result once; "
            "return the values (e.g. a list) instead of yielding them"
        ]
    return []


#: What `_mark_coroutine_function` puts in a tool's ``__dict__`` (by Python version).
_COROUTINE_MARKS = (
    "_is_coroutine_marker",
    "_is_coroutine",
    "__code__",
    "__defaults__",
    "__kwdefaults__",
)


def _mark_coroutine_function(made: Tool[..., Any], function: Callable[..., Any]) -> None:
    """Make ``inspect.iscoroutinefunction`` (and asyncio's) true for a tool of an async function.

    Frameworks that dispatch on it (web servers, task runners) then await the tool.
    """
    mark_coroutine_function(made, function, made.name)
    if sys.version_info >= (3, 12):
        return
    # before 3.12 asyncio's own mark too (a callable whose code was not found)
    from asyncio import coroutines

    made.__dict__["_is_coroutine"] = coroutines._is_coroutine  # type: ignore[attr-defined]


def mark_coroutine_function(made: object, function: Callable[..., Any], name: str) -> bool:
    """Make ``inspect.iscoroutinefunction(made)`` true, ``made`` being a callable
    object (not a function) that stands for the async ``function``.

    On Python 3.12+ by `inspect.markcoroutinefunction`; before, inspect reads the
    code flags of anything function-like, so ``made`` takes ``function``'s
    ``__code__``, defaults and (if it has none) ``name`` as ``__name__``. Returns
    whether it was marked (False: no code was found in ``function``). Does not
    import asyncio (a blocking program never does).
    """
    if sys.version_info >= (3, 12):
        inspect.markcoroutinefunction(made)
        return True
    target: Any = function
    while isinstance(target, functools.partial):
        target = target.func
    if not hasattr(target, "__code__"):
        target = type(target).__call__  # a callable object with an async __call__
    code = getattr(target, "__code__", None)
    if not isinstance(code, types.CodeType):
        return False
    fields = made.__dict__
    fields["__code__"] = code
    fields["__defaults__"] = getattr(target, "__defaults__", None)
    fields["__kwdefaults__"] = getattr(target, "__kwdefaults__", None)
    fields.setdefault("__name__", name)  # function-like needs a name
    return True


def schema_problems(schema: object) -> list[str]:
    """What is wrong with an explicit parameters schema (empty if it is fine)."""
    if not isinstance(schema, Mapping):
        return [f"parameters must be a JSON Schema dict, not {type(schema).__name__}"]
    if schema.get("type") != "object":
        return [
            "parameters must be an object schema ({'type': 'object', 'properties': {...}}),"
            f" not type {schema.get('type')!r}"
        ]
    wrong = not_json(schema)
    if wrong:  # checked first: the meta-schema takes NaN for a number, and 1 for a key
        return [f"parameters is not JSON at {problem}" for problem in wrong]
    from jsonschema import validators

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    meta = validators.validator_for(cls.META_SCHEMA, default=cls)
    checker = meta(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)
    errors = sorted(checker.iter_errors(dict(schema)), key=lambda e: [str(p) for p in e.path])
    if errors:  # every one at once, like a function's problems
        return [
            f"parameters is not a valid JSON Schema: {e.message}"
            f" (at {''.join(f'[{p!r}]' for p in e.path) or 'the root'})"
            for e in errors
        ]
    return ref_problems(schema)


# Keywords whose values are data, not schemas: a {"$ref": ...} in them is not a reference.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})


def ref_problems(schema: Mapping[str, Any]) -> list[str]:
    """Every ``$ref`` that does not resolve inside the schema itself (remote ones are refused).

    Checked when the tool is made, so that a model's call never meets a
    reference jsonschema cannot follow.
    """
    root_id = schema.get("$id") if isinstance(schema.get("$id"), str) else None
    base = root_id.rstrip("#") if root_id is not None else None
    refs, anchors = _references(schema)
    problems: list[str] = []
    for ref, where in refs:
        local = (ref[len(base) :] or "#") if base is not None and ref.startswith(base) else ref
        at = f"at {where or '/'}"
        if not local.startswith("#"):
            problems.append(
                f"$ref {ref!r} {at} is remote; only references inside the schema are followed"
                " (move the referenced schema into $defs and use '#/$defs/...')"
            )
        elif local == "#" or local.startswith("#/"):
            if resolve_local(schema, local) is MISSING:
                problems.append(f"$ref {ref!r} {at} points to nothing in the schema")
        elif local[1:] not in anchors:
            problems.append(f"$ref {ref!r} {at} names no $anchor of the schema")
    if not problems:
        # A loop of references on one value made every call a bare RecursionError.
        problems += [
            f"$ref loop {loop} never reaches a part of the value: checking any arguments "
            "against it would never end (a recursive type refers to itself under "
            "properties or items)"
            for loop in ref_loops(schema)
        ]
    return problems


def _references(schema: Mapping[str, Any]) -> tuple[list[tuple[str, str]], set[str]]:
    """Every reference with the JSON pointer where it is, and every anchor name."""
    refs: list[tuple[str, str]] = []
    anchors: set[str] = set()

    def walk(node: Any, pointer: str) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in _DATA_KEYWORDS:
                    continue
                here = f"{pointer}/{escape(str(key))}"
                if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                    refs.append((value, here))
                elif key in ("$anchor", "$dynamicAnchor") and isinstance(value, str):
                    anchors.add(value)
                else:
                    walk(value, here)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{pointer}/{i}")

    walk(schema, "")
    return refs, anchors


def check_tool_names(
    tools: Iterable[Tool[..., Any]], *, owner: str | None = None
) -> dict[str, Tool[..., Any]]:
    """Index tools by name, refusing two tools with the same name.

    Args:
        tools: The tools of one agent or request.
        owner: Whose tools they are (``"agent 'billing'"``), named in the
            error; None for a list of no one in particular.

    Returns:
        Name -> tool, in the given order.

    Raises:
        ToolDefinitionError: Names used more than once, each with its tools; or a
            method tool taken from its class, whose ``self`` nothing would bind.
    """
    by_name: dict[str, list[Tool[..., Any]]] = {}
    for t in tools:
        if t._receiver == "instance":
            where = getattr(t.function, "__qualname__", t.name)
            raise ToolDefinitionError(
                t.name,
                [
                    f"is the method {where} taken from its class: nothing would give its "
                    "'self' a value; pass it from an instance (obj.method), or make it a "
                    "@staticmethod"
                ],
            )
        by_name.setdefault(t.name, []).append(t)
    problems = [_duplicate(name, group) for name, group in by_name.items() if len(group) > 1]
    if problems:
        error = ToolDefinitionError(f"the tools of {owner}" if owner else "the tool list", problems)
        lines = "\n".join(f"  - {p}" for p in problems)
        where = f" in the tools of {owner}" if owner else ""
        error.args = (
            f"duplicate tool names{where}: every tool of a list needs its own name\n{lines}",
        )
        raise error
    return {name: group[0] for name, group in by_name.items()}


def _duplicate(name: str, group: list[Tool[..., Any]]) -> str:
    """The problem of one name used by several tools: which functions they come from,
    telling apart the same object listed again from different ones that share a name."""
    count, first = len(group), group[0]
    if all(t is first for t in group):
        where = f"the same tool, made from {_origin(first)}, is listed {count} times"
    else:
        by_label: dict[str, list[Tool[..., Any]]] = {}
        for t in group:
            by_label.setdefault(_origin(t), []).append(t)
        parts = [_same_origin(label, tools) for label, tools in by_label.items()]
        if len(parts) == 1:
            where = parts[0]
        elif all(len(tools) == 1 for tools in by_label.values()):
            where = "made from " + ", ".join(parts)
        else:  # a part may list places with commas
            where = "made from " + "; ".join(parts)
    return f"tool name {name!r} is used by {count} tools ({where}); {_remedy(group)}"


def _remedy(group: list[Tool[..., Any]]) -> str:
    """How to give tools sharing a name their own names: ``name=``, or what a tool made
    elsewhere says it takes (`RENAMED_WITH`: an MCP server's ``prefix=``)."""
    ways = [getattr(t.function, RENAMED_WITH, None) for t in group]
    others = list(dict.fromkeys(way for way in ways if isinstance(way, str)))
    if not others:
        return "give each a distinct name=..."
    own = ["name=... for a tool of your own"] if any(way is None for way in ways) else []
    if len(own) + len(others) == 1:
        return f"give them distinct names: {others[0]}"
    return "give them distinct names: " + "; ".join([*own, *others])


def _same_origin(label: str, tools: list[Tool[..., Any]]) -> str:
    """How a duplicate-name message names tools whose functions share ``label``: the
    same function listed again, partials of one function, instances of one class, one
    method bound to several objects, or different functions (closures) with one name."""
    count = len(tools)
    if count == 1:
        return label
    functions: list[Any] = [t.function for t in tools]
    first = functions[0]
    if first is None:
        return f"{count} schema-only tools"
    if _made_as(first) is not None:  # e.g. one agent's as_tool() called twice
        return f"{count} tools made from {label}"
    if all(f is first for f in functions):
        return f"{count} tools made from the same function {label}"
    if all(isinstance(f, functools.partial) for f in functions):
        inner = _unwrapped(tools[0])
        if all(_unwrapped(t) is inner for t in tools):
            return f"{count} partials of {_label(inner)}"
    if all(isinstance(f, types.MethodType) and f.__func__ is first.__func__ for f in functions):
        objects = {id(f.__self__) for f in functions}
        if len(objects) == 1:
            return f"{count} tools made from the same function {label}"
        return f"{label} bound to {len(objects)} objects"
    if all(type(f) is type(first) and not _is_function(f) for f in functions):
        return f"{count} instances of {_label(type(first))}"
    places = list(dict.fromkeys(_place(t) for t in tools))
    return f"{count} different functions named {label}, " + (
        f"made by one definition, at {places[0]}, run {count} times"  # closures
        if len(places) == 1
        else "defined at " + ", ".join(places)
    )


def _is_function(value: Any) -> bool:
    """A function, method, partial or class, as opposed to an instance with ``__call__``."""
    kinds = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)
    return isinstance(value, (*kinds, type))


def _unwrapped(t: Tool[..., Any]) -> Any:
    """The function a tool calls, through any ``functools.partial``."""
    function: Any = t.function
    while isinstance(function, functools.partial):
        function = function.func
    return function


def _origin(t: Tool[..., Any]) -> str:
    """``module:qualname`` of the function behind a tool (never a repr, which may show
    what a partial binds)."""
    from toolfold.toolkit._signature import callable_name

    if t.function is None:
        return "a schema-only tool"
    made_as = _made_as(t.function)
    if made_as is not None:
        return made_as
    module = getattr(_unwrapped(t), "__module__", None)
    name = callable_name(t.function)
    return f"{module}:{name}" if isinstance(module, str) else name


#: The attribute of a function toolfold makes for a tool (an agent's ``as_tool()``)
#: that names what the tool was made from (``agent 'research'.as_tool()``): an
#: error about the tool names that, not the toolfold function.
MADE_AS = "__toolfold_made_as__"


#: The attribute of a function toolfold makes for a tool that cannot be given
#: ``name=`` (an MCP server's): how to rename it instead, for a duplicate-name error.
RENAMED_WITH = "__toolfold_renamed_with__"


#: The attribute of a function toolfold makes for a tool whose schema is not the
#: user's to change (an MCP server's): how to leave the tool out instead, for an
#: error about a parameter name a provider refuses.
LEFT_OUT_WITH = "__toolfold_left_out_with__"


#: The attribute of a function toolfold makes for a tool whose name is not the user's
#: (an MCP server's): how to give it one a provider takes, for an error about its name.
NAME_REFUSED_WITH = "__toolfold_name_refused_with__"


def advise_on_parameter_names(error: BaseException, tools: Mapping[str, Tool[..., Any]]) -> None:
    """Word the advice of a `SchemaCompileError` about refused parameter names for its tool.

    The compiler says "rename the parameter", right for a function's parameter.
    An MCP server's tool cannot be changed here: the error says how to leave it
    out (``include=[...]`` on its server). A tool made with an explicit schema:
    rename the property there, or leave the tool out. A refused tool name of an
    MCP server's tool (``2fa_verify`` for Gemini, a letter or _ first) says how
    to rename it (`NAME_REFUSED_WITH`: ``prefix=`` on its server).
    """
    tool_name = getattr(error, "tool_name", None)
    found = tools.get(tool_name) if isinstance(tool_name, str) else None
    if found is None:
        return
    left_out = getattr(found.function, LEFT_OUT_WITH, None)
    if isinstance(left_out, str):
        advice = f"(an MCP server's, which cannot be renamed: leave the tool out with {left_out})"
    elif found._pass_dict:  # an explicit schema, not a function's signature
        advice = (
            "(rename the property in the tool's parameters schema, or leave the tool out of "
            "tools=[...])"
        )
    else:
        advice = RENAME_PARAMETER
    name_advice = getattr(found.function, NAME_REFUSED_WITH, None)
    advise_renaming(error, advice, name_advice if isinstance(name_advice, str) else None)


def _made_as(function: Any) -> str | None:
    """What ``function`` says it was made from (`MADE_AS`), or None."""
    made_as = getattr(function, MADE_AS, None)
    return made_as if isinstance(made_as, str) else None


def _label(function: Any) -> str:
    """``module:qualname`` of a function or class."""
    from toolfold.toolkit._signature import callable_name

    module = getattr(function, "__module__", None)
    name = callable_name(function)
    return f"{module}:{name}" if isinstance(module, str) else name


def _place(t: Tool[..., Any]) -> str:
    """``file:line`` where the function behind a tool is defined, to tell apart two that
    share a name."""
    function = _unwrapped(t)
    code = getattr(function, "__code__", None)
    if not isinstance(code, types.CodeType):
        call: Any = type(function).__call__ if callable(function) else None  # an object's
        code = getattr(call, "__code__", None)
    if not isinstance(code, types.CodeType):
        return f"an unknown place (a {type(function).__qualname__})"
    # (the file's name by string, not os.path: workflow code reaches this, and os is refused)
    name = code.co_filename.replace("\\", "/").rpartition("/")[2]
    return f"{name}:{code.co_firstlineno}"


def _class_var_of_model(model: type, name: str) -> None:
    """Annotate the tool ``name`` in the body of the pydantic model ``model`` as a ``ClassVar``.

    pydantic takes every attribute of a model's body for a field, and refuses one
    without an annotation ("A non-annotated attribute was detected"), at the
    class statement; a method tool is a method, not a field. This is called from
    `Tool.__set_name__`, when the class exists and pydantic has not read its
    fields yet, and writes what pydantic's error tells the user to write,
    ``name: ClassVar[Tool]``. A tool annotated already is left as it is.
    """
    import typing

    try:
        annotations = model.__annotations__  # (its own: made empty if its body has none)
    except Exception:  # (3.14: an annotation naming what is not defined yet)
        return  # pydantic's own error then says what to write
    if name not in annotations:
        annotations[name] = typing.ClassVar[Tool]
