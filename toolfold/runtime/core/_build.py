"""Cheap construction of the core's frozen records where the inputs are known valid.

A frozen attrs class refuses assignment by defining ``__setattr__``, so its
``__init__`` must set every field through ``object.__setattr__``: about 90 ns
a field, against about 10 ns for a plain slotted assignment. A run builds
some 90 fields of records per tool step (states, calls, results, events),
which made frozen construction the largest single cost of the core.

`builder(cls)` returns a function that makes an instance of ``cls`` the cheap
way: it fills the slots of an instance of a private subclass that keeps the
generic ``__setattr__`` (same memory layout, no fields of its own), then
turns the instance into a ``cls`` by assigning ``__class__``. The result is
an ordinary instance of ``cls`` in every respect: ``type(x) is cls``,
assignment raises `attrs.exceptions.FrozenInstanceError`, and equality,
hashing, repr, pickling, weak references and the cattrs converter are those
of ``cls``. What it skips is the class's converters and validators, so it is
for the core's own hot paths only, where every value is already of the
field's final type (a tuple where a converter would make one, a `FrozenDict`
where it would freeze): values from outside go through the class itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import attrs

T = TypeVar("T")

_NOTHING: Any = object()

new_tuple = tuple.__new__
"""``new_tuple(NT, values)``: the named tuple ``NT`` of ``values`` (every field, in
order), made without a frame for ``NT.__new__``; `builder`'s counterpart for
named tuples on hot paths."""


def _shell(cls: type[Any]) -> type[Any]:
    """A private subclass of ``cls`` with its layout and the generic ``__setattr__``."""
    if not attrs.has(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"builder() needs a slotted attrs class, got {cls!r}")
    if hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__"):
        raise TypeError(f"builder() does not run {cls.__name__}'s pre- or post-init hook")
    if "_attrs_cached_hash" in getattr(cls, "__slots__", ()):
        raise TypeError(f"builder() does not fill {cls.__name__}'s cached hash (cache_hash=True)")
    shell = _SHELLS.get(cls)
    if shell is None:
        # Same layout as `cls` (no slots of its own) with the generic
        # ``__setattr__``: both it and ``__delattr__`` must be object's for
        # Python to give the class the fast slot assignment.
        namespace: dict[str, Any] = {
            "__slots__": (),
            "__setattr__": object.__setattr__,
            "__delattr__": object.__delattr__,
            "__module__": cls.__module__,
        }
        if cls.__new__ is object.__new__ and type(cls) is type:
            # ``_shell()`` then makes a blank instance straight through the type's
            # call (object's new and init, no arguments): cheaper than
            # ``object.__new__(_shell)``, which checks and slices its arguments.
            # (A metaclass's own ``__call__`` would run there: such a class keeps
            # the other way.)
            namespace["__init__"] = object.__init__
        shell = type(f"_Building{cls.__name__}", (cls,), namespace)
        _SHELLS[cls] = shell
    return shell


_SHELLS: dict[type[Any], type[Any]] = {}


def _blank(shell: type[Any]) -> str:
    """The expression a generated function makes a blank ``shell`` instance with."""
    return "_shell()" if shell.__init__ is object.__init__ else "_new(_shell)"


def builder(cls: type[T]) -> Callable[..., T]:
    """A constructor of the frozen attrs class ``cls`` that skips converters and validators.

    It takes the same arguments as ``cls`` (the ``init`` fields, in order,
    with the same defaults; ``kw_only`` ones by keyword only) and sets the fields without ``init`` to their
    defaults, as the class does. A default factory runs as in the class (one
    that takes self sees the fields before it); like any value, what it makes
    is not converted, so it must make the field's final type.

    Raises:
        TypeError: ``cls`` is not a slotted attrs class.
    """
    shell = _shell(cls)
    params: list[str] = []
    keywords: list[str] = []  # the kw_only fields' parameters, after a ``*``
    lines: list[str] = []
    namespace: dict[str, Any] = {"_new": object.__new__, "_shell": shell, "_cls": cls}
    for index, field in enumerate(attrs.fields(cast(Any, cls))):
        name = field.name
        default = field.default
        factory = isinstance(default, attrs.Factory)  # type: ignore[arg-type]
        if field.init:
            arg = field.alias or name.lstrip("_")
            into = keywords if field.kw_only else params
            if default is attrs.NOTHING:
                into.append(arg)
            elif factory:
                into.append(f"{arg}=_NOTHING")
                namespace["_NOTHING"] = _NOTHING
                # A factory that takes self sees the fields before it, as in attrs.
                made = f"_factory{index}(self)" if default.takes_self else f"_factory{index}()"
                lines.append(f"    if {arg} is _NOTHING: {arg} = {made}")
                namespace[f"_factory{index}"] = default.factory
            else:
                into.append(f"{arg}=_default{index}")
                namespace[f"_default{index}"] = default
            lines.append(f"    self.{name} = {arg}")
        elif factory:
            namespace[f"_factory{index}"] = default.factory
            made = f"_factory{index}(self)" if default.takes_self else f"_factory{index}()"
            lines.append(f"    self.{name} = {made}")
        elif default is not attrs.NOTHING:
            namespace[f"_default{index}"] = default
            lines.append(f"    self.{name} = _default{index}")
    body = "\n".join(
        [f"    self = {_blank(shell)}", *lines, "    self.__class__ = _cls", "    return self"]
    )
    signature = ", ".join([*params, "*", *keywords] if keywords else params)
    source = f"def build_{cls.__name__}({signature}):\n{body}\n"
    exec(compile(source, f"<builder of {cls.__qualname__}>", "exec"), namespace)
    build: Callable[..., T] = namespace[f"build_{cls.__name__}"]
    build.__doc__ = f"A `{cls.__name__}` from values of the fields' final types (see `builder`)."
    return build


def replacer(cls: type[T], *names: str) -> Callable[..., T]:
    """``replace(record, *values)``: ``attrs.evolve(record, **dict(zip(names, values)))``, cheaply.

    The other fields are copied from ``record`` (those without ``init`` get
    their defaults, as ``evolve`` gives them); like `builder`, it skips
    converters and validators, so the new values must be of the fields'
    final types.

    Raises:
        TypeError: ``cls`` is not a slotted attrs class, or ``names`` are not
            ``init`` fields of it.
    """
    shell = _shell(cls)
    fields = attrs.fields(cast(Any, cls))
    unknown = set(names) - {f.name for f in fields if f.init}
    if unknown:
        raise TypeError(f"replacer(): {cls.__name__} has no init fields {sorted(unknown)}")
    namespace: dict[str, Any] = {"_new": object.__new__, "_shell": shell, "_cls": cls}
    lines = [f"    self = {_blank(shell)}"]
    for index, field in enumerate(fields):
        name = field.name
        if name in names:
            lines.append(f"    self.{name} = _v_{name}")
        elif field.init:
            lines.append(f"    self.{name} = record.{name}")
        elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            if field.default.takes_self:
                raise TypeError(f"replacer() does not take a factory that takes self ({name})")
            namespace[f"_factory{index}"] = field.default.factory
            lines.append(f"    self.{name} = _factory{index}()")
        elif field.default is not attrs.NOTHING:
            namespace[f"_default{index}"] = field.default
            lines.append(f"    self.{name} = _default{index}")
    lines += ["    self.__class__ = _cls", "    return self"]
    params = ", ".join(["record", *(f"_v_{n}" for n in names)])
    source = f"def replace({params}):\n" + "\n".join(lines) + "\n"
    exec(compile(source, f"<replacer of {cls.__qualname__}>", "exec"), namespace)
    replace: Callable[..., T] = namespace["replace"]
    return replace


def evolver(cls: type[T]) -> Callable[[T, dict[str, Any]], T]:
    """``evolve(record, changes)``: ``attrs.evolve(record, **changes)``, cheaply.

    Straight-line code, one line a field: the new value where ``changes``
    names the field, else ``record``'s, set into the slot as `builder` sets
    it (no builder's frame with a parameter a field in between). Like
    `builder`, it skips converters and validators, so the new values must be
    of the fields' final types; names that are no field are ignored.

    Raises:
        TypeError: ``cls`` is not a slotted attrs class, or has fields without ``init``.
    """
    shell = _shell(cls)
    fields = attrs.fields(cast(Any, cls))
    if not all(field.init for field in fields):
        raise TypeError(f"evolver() copies init fields only; {cls.__name__} has others")
    namespace: dict[str, Any] = {"_new": object.__new__, "_shell": shell, "_cls": cls}
    lines = [f"    self = {_blank(shell)}"]
    for field in fields:
        name = field.name
        lines.append(
            f"    self.{name} = changes['{name}'] if '{name}' in changes else record.{name}"
        )
    lines += ["    self.__class__ = _cls", "    return self"]
    source = "def evolve(record, changes):\n" + "\n".join(lines) + "\n"
    exec(compile(source, f"<evolver of {cls.__qualname__}>", "exec"), namespace)
    evolve: Callable[[T, dict[str, Any]], T] = namespace["evolve"]
    return evolve
