"""Conversion hooks users register for their own types (kept light: no cattrs here).

The toolkit's converter (`toolfold.toolkit._converter`) is built on first use;
hooks registered before that are applied when it is built, hooks registered
after are applied to it at once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["register_type_hooks"]

Structure = Callable[[Any, Any], Any]
Unstructure = Callable[[Any], Any]
HookEntry = tuple[Callable[[Any], bool], Structure | None, Unstructure | None]

user_hooks: list[HookEntry] = []


def register_type_hooks(
    match: type | Callable[[Any], bool],
    structure: Structure | None = None,
    unstructure: Unstructure | None = None,
) -> None:
    """Teach toolfold to convert a type of your own to and from JSON.

    Pair it with `register_schema_rule` for types that are not dataclasses,
    attrs classes, TypedDicts or NamedTuples. Register before the tools that use
    the type are first called.

    Args:
        match: A class (the hooks also cover its subclasses) or a predicate
            ``(tp) -> bool`` over type annotations.
        structure: ``(json_value, tp) -> value``, for arguments; raise
            ValueError or TypeError to report a bad value to the model.
        unstructure: ``(value) -> json_value``, for results.
    """
    predicate = _subclass_of(match) if isinstance(match, type) else match
    entry: HookEntry = (predicate, structure, unstructure)
    user_hooks.append(entry)
    converter = sys.modules.get("toolfold.toolkit._converter")
    if converter is not None:
        converter.apply_user_hook(entry)


def _subclass_of(cls: type) -> Callable[[Any], bool]:
    return lambda tp: isinstance(tp, type) and issubclass(tp, cls)
