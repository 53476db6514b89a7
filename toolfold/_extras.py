"""Importing a module that comes with one of toolfold's extras (``pip install 'toolfold[x]'``).

Code that needs an optional package when it runs imports it with `optional`
(a toolfold error); a package of toolfold that imports one at its top raises
`missing_extra` when that import fails (an ImportError); code that only checks
that the package is there (loading an agent file) asks `installed`, which does
not import it. Each way the message says which extra to install, never a bare
``ModuleNotFoundError`` about a module the user may never have heard of.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

from toolfold._errors import ModelConfigError


def missing(module: str, extra: str, what: str, exc: ImportError | None = None) -> str:
    """The message for ``what`` whose ``module`` (of the extra ``extra``) cannot be imported.

    ``exc``, when given and about another module than ``module`` (installed, but
    one of its own imports failed), is added to the message.
    """
    message = f"{what} needs {module!r}: pip install 'toolfold[{extra}]'"
    if exc is not None and exc.name not in (None, module):
        message += f" ({type(exc).__name__}: {exc.msg})"
    return message


def missing_extra(exc: ImportError, extra: str, what: str) -> ModuleNotFoundError:
    """The error to raise for ``exc``, the failed import of a module of the extra ``extra``
    that ``what`` (a toolfold package importing it at the top) needs.

    It is still an ImportError (``try: import toolfold.otel`` guards keep working),
    naming the top-level module that is missing and ``pip install 'toolfold[extra]'``.
    """
    module = (exc.name or extra).partition(".")[0]
    return ModuleNotFoundError(missing(module, extra, what, exc), name=exc.name)


def installed(module: str) -> bool:
    """Whether the top-level ``module`` is installed, found without importing it.

    Its import may still fail (`optional` says so when it is imported). A
    ``None`` in ``sys.modules`` (what Python records for a missing module) is
    not installed.
    """
    if module in sys.modules:
        return sys.modules[module] is not None
    return importlib.util.find_spec(module) is not None


def optional(
    module: str,
    extra: str,
    what: str,
    error: Callable[[str], Exception] = ModelConfigError,
) -> Any:
    """The module ``module`` of the extra ``extra``, imported.

    Args:
        module: The module to import (``"mcp"``, ``"platformdirs"``).
        extra: The extra of toolfold that installs it (``"mcp"``, ``"local"``).
        what: What needs it, for the message (``"the local: provider"``).
        error: Makes the error raised from the message.

    Raises:
        ModelConfigError: (or what ``error`` makes) It cannot be imported: the
            message says ``pip install 'toolfold[extra]'``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise error(missing(module, extra, what, exc)) from None
