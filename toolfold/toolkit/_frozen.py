"""Read-only JSON for the schemas ``@tool`` derives.

A derived schema is made once, when the function is decorated, and then read
on every request of every run: the request encoders memoize a tool's compiled
entry and, for a schema a user may still edit in place, compare it with the
copy it was compiled from on each request. A derived schema is frozen all the
way down instead (`freeze_schema`), so that check can be skipped for it
(`is_frozen_schema`): nothing can change it.

`SchemaDict` and `SchemaList` are a real dict and list underneath, so
``json.dumps``, ``==`` with plain values, JSON Schema validators and
``isinstance`` behave as before; only mutation raises ``TypeError``.
``copy.deepcopy`` gives a plain, editable copy (the way to start a schema of
one's own from a derived one).
"""

from __future__ import annotations

from typing import Any, NoReturn


def _read_only(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        "a schema derived by @tool is read-only: edit a copy "
        "(copy.deepcopy(tool.parameters) is a plain dict) and give it to "
        "Tool(name, description, parameters=...), or change the function's annotations"
    )


class SchemaDict(dict[str, Any]):
    """A JSON object of a derived schema: a dict that refuses changes."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (SchemaDict, (dict(self),))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: Any) -> dict[str, Any]:
        thawed: dict[str, Any] = thaw_schema(self)
        return thawed


class SchemaList(list[Any]):
    """A JSON array of a derived schema: a list that refuses changes."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = _read_only
    clear = sort = reverse = __iadd__ = __imul__ = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return (SchemaList, (list(self),))

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: Any) -> list[Any]:
        thawed: list[Any] = thaw_schema(self)
        return thawed


def freeze_schema(schema: dict[str, Any]) -> SchemaDict:
    """``schema`` (JSON made of dicts and lists) copied into read-only containers."""
    frozen: SchemaDict = _freeze(schema)
    return frozen


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return SchemaDict({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return SchemaList([_freeze(item) for item in value])
    return value


def thaw_schema(value: Any) -> Any:
    """A plain, independent deep copy of a JSON value (dicts and lists, frozen or not)."""
    if isinstance(value, dict):
        return {key: thaw_schema(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw_schema(item) for item in value]
    return value


def is_frozen_schema(schema: object) -> bool:
    """Whether ``schema`` was made by `freeze_schema`, so it cannot change."""
    return type(schema) is SchemaDict
