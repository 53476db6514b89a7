"""Show each public name under the module users import it from.

The implementation lives in private modules (``toolfold.runtime._agent``);
users import from the public ones (``toolfold``). As httpx does, each public
namespace rewrites the ``__module__`` of its classes and functions, so reprs,
tracebacks and generated docs read ``toolfold.Agent``, and pickle finds the
class where users find it.

One catch: ``typing.get_type_hints`` (which attrs, cattrs and users call)
evaluates a class's string annotations in the module ``__module__`` names. So
before the rewrite, a class's own annotations are evaluated once in its real
module and stored as objects; nothing needs that module afterwards.

This module is a leaf: every layer may import it, it imports none of them.
"""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Iterable, Mapping, MutableMapping
from types import FunctionType
from typing import Any


def publish(namespace: MutableMapping[str, Any], names: Iterable[str], module: str) -> None:
    """Make ``module`` the ``__module__`` of each class and function in ``names``.

    Args:
        namespace: The public module's globals, where the names are bound.
        names: The public names (its ``__all__``); other values (type aliases,
            constants, lazily loaded names) are left as they are.
        module: The public module's name, e.g. ``"toolfold"``.
    """
    for name in names:
        value = namespace.get(name)
        if isinstance(value, type) and value.__module__.startswith("toolfold."):
            _evaluate_annotations(value, namespace)
            value.__module__ = module
        elif isinstance(value, FunctionType) and value.__module__.startswith("toolfold."):
            value.__module__ = module  # a function's hints resolve through its __globals__


def _evaluate_annotations(cls: type, public: Mapping[str, Any]) -> None:
    own = inspect.get_annotations(cls)
    if not own or not any(isinstance(hint, str) for hint in own.values()):
        return
    # The home module first; the public namespace adds what the home module
    # imports only for type checking (the names an import cycle keeps out).
    scope = {**public, **vars(sys.modules[cls.__module__])}
    holder = type(cls.__name__, (), {"__annotations__": dict(own), "__module__": cls.__module__})
    hints = typing.get_type_hints(
        holder, globalns=scope, localns=dict(vars(cls)), include_extras=True
    )
    cls.__annotations__ = hints
