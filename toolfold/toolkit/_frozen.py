"""Read-only JSON values: `FrozenDict` and `FrozenList`, and `freeze` / `thaw` between them.

What a run or a spec stores (a call's arguments, an output, a config's settings,
a tool's parameters schema) is frozen so that no one changes it in place. Here, in the lowest layer, so
that the toolkit (a `Tool`'s ``parameters``) and the runtime share one kind of
read-only value (`toolfold.runtime` exports the two classes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn, TypeVar

__all__ = ["FrozenDict", "FrozenList", "freeze", "thaw"]


def _read_only(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        f"{type(self).__name__} is read-only: what a run or a spec stores (a tool call's "
        "arguments, an output, a config's settings or schema, a Route's branches) never changes; take a plain "
        "deep copy with .thaw() and change that"
    )


_T = TypeVar("_T")


class _Sealed(type):
    """The type of `FrozenDict` and `FrozenList`: calling the class fills a new
    instance (its values frozen), so ``__init__`` can refuse refilling one."""

    def __call__(cls: type[_T], *args: Any, **kwargs: Any) -> _T:
        made: _T = cls._made(*args, **kwargs)  # type: ignore[attr-defined]
        return made


class FrozenDict(dict[str, Any], metaclass=_Sealed):
    """A dict that refuses changes: decoded JSON objects inside a stored value.

    A real dict underneath, so ``json.dumps``, JSON Schema checks and ``==``
    with plain dicts behave as before; any change (``__init__`` again
    included) raises ``TypeError``. Made from any mapping, its values are
    frozen too (nested mappings become `FrozenDict`, lists and tuples
    `FrozenList`). It hashes when its values do, consistently with ``==``.
    `thaw` gives a plain, independent deep copy to change.

    Where a value must be JSON a saved state gives back equal (a call's
    arguments, an output, a run's setting), one built by ``FrozenDict(...)``
    is checked as a plain dict is.
    """

    # (weakly referenced: a tool's compilations are kept while its schema lives)
    __slots__ = ("__weakref__",)
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = __init__ = _read_only

    @classmethod
    def _made(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        # (a caller's: not known to be JSON, so checked where JSON must go; see `frozen_dict`)
        plain = dict(*args, **kwargs)
        return new_frozen_dict(CallersDict, {k: freeze(v) for k, v in plain.items()})

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(dict.items(self)))

    def thaw(self) -> dict[str, Any]:
        """A plain, independent deep copy (dicts and lists all the way down) to change.

        Returns:
            The same items in a new plain ``dict``; nested values copied too.
        """
        copied: dict[str, Any] = thaw(self)
        return copied

    def __reduce__(self) -> tuple[Any, ...]:
        # (toolfold's own comes back its own; a caller's, `CallersDict`, a caller's)
        return (frozen_dict if type(self) is FrozenDict else FrozenDict, (dict(self),))

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: Any) -> FrozenDict:
        return self


class FrozenList(list[Any], metaclass=_Sealed):
    """A list that refuses changes: decoded JSON arrays inside a stored value.

    Like `FrozenDict`: a real list, its items frozen, any change refused,
    hashable when its items are, `thaw` for a plain deep copy.
    """

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _read_only
    clear = sort = reverse = __iadd__ = __imul__ = __init__ = _read_only

    @classmethod
    def _made(cls, *args: Any, **kwargs: Any) -> FrozenList:
        plain: list[Any] = list(*args, **kwargs)
        return new_frozen_list(CallersList, [freeze(v) for v in plain])

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def thaw(self) -> list[Any]:
        """A plain, independent deep copy (dicts and lists all the way down) to change.

        Returns:
            The same items in a new plain ``list``; nested values copied too.
        """
        copied: list[Any] = thaw(self)
        return copied

    def __reduce__(self) -> tuple[Any, ...]:
        return (frozen_list if type(self) is FrozenList else FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: Any) -> FrozenList:
        return self


class CallersDict(FrozenDict):
    """A `FrozenDict` a caller built (``FrozenDict(...)``): its values are not known to
    be JSON, so where JSON must go (arguments, an output, a setting) it is checked,
    where toolfold's own (decoded, checked or loaded: exactly `FrozenDict`) is taken."""

    __slots__ = ()


class CallersList(FrozenList):
    """A `FrozenList` a caller built (see `CallersDict`)."""

    __slots__ = ()


def frozen_dict(*args: Any, **kwargs: Any) -> FrozenDict:
    """A `FrozenDict` of toolfold's own (its values frozen), taken unchecked where JSON
    must go: for values toolfold made, never a caller's (``FrozenDict(...)`` is checked)."""
    plain = dict(*args, **kwargs)
    return new_frozen_dict(FrozenDict, {k: freeze(v) for k, v in plain.items()})


def frozen_list(items: Iterable[Any] = ()) -> FrozenList:
    """A `FrozenList` of toolfold's own (see `frozen_dict`)."""
    return new_frozen_list(FrozenList, [freeze(v) for v in items])


def new_frozen_dict(cls: type[FrozenDict], items: Mapping[str, Any]) -> FrozenDict:
    """A `FrozenDict` of ``items`` (their values frozen already), past the refusing ``__init__``."""
    made = _dict_new(cls)
    _dict_update(made, items)
    return made


def new_frozen_list(cls: type[FrozenList], items: list[Any]) -> FrozenList:
    """A `FrozenList` of ``items`` (frozen already), past the refusing ``__init__``."""
    made = _list_new(cls)
    _list_extend(made, items)
    return made


_dict_new = dict.__new__
_dict_update = dict.update
_list_new = list.__new__
_list_extend = list.extend


# Values that are read-only as they are: what most arguments and outputs hold.
_ATOMS = frozenset({str, int, float, bool, type(None)})


def freeze(value: Any) -> Any:
    """``value`` (decoded JSON) with every mapping and list made read-only.

    Any mapping (a ``defaultdict``, ``OrderedDict``, ``MappingProxyType``...)
    becomes a `FrozenDict`, any list or tuple a `FrozenList`, all the way
    down: nothing of the caller's stays shared. Other values stay as they are.
    """
    kind = type(value)
    if kind in _ATOMS or kind is FrozenDict or kind is FrozenList:
        return value  # a frozen one is frozen all the way down since it was made
    if kind is dict:
        # Flat objects (the usual arguments) skip the recursion.
        for item in value.values():
            if type(item) not in _ATOMS:
                return new_frozen_dict(FrozenDict, {k: freeze(v) for k, v in value.items()})
        return new_frozen_dict(FrozenDict, value)
    if kind is list or kind is tuple:
        return new_frozen_list(FrozenList, [freeze(v) for v in value])
    if isinstance(value, Mapping):
        return new_frozen_dict(FrozenDict, {k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return new_frozen_list(FrozenList, [freeze(v) for v in value])
    return value


def thaw(value: Any) -> Any:
    """A plain, independent deep copy of decoded JSON (what a tool may mutate).

    Every mapping becomes a plain ``dict`` and every list or tuple a plain
    ``list``, all the way down; other values stay as they are.
    """
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict or kind is FrozenDict:
        for item in value.values():
            if type(item) not in _ATOMS:
                return {k: thaw(v) for k, v in value.items()}
        return dict(value)
    if kind is list or kind is FrozenList:
        return [thaw(v) for v in value]
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value
