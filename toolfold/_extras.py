"""Importing a module that comes with one of toolfold's extras (``pip install 'toolfold[x]'``).

Code that needs an optional package when it runs imports it with `optional`
(a toolfold error); a package of toolfold that imports one at its top raises
`raise_missing_extra` when that import fails (an ImportError); code that only checks
that the package is there (loading an agent file) asks `installed`, which does
not import it. Where the package is missing, the message says which extra to
install, never a bare ``ModuleNotFoundError`` about a module the user may never
have heard of; where it is installed but its own import fails (a version
conflict), the original error is kept.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Collection
from typing import Any, NoReturn

from toolfold._errors import ModelConfigError
from toolfold.toolkit._results import class_name, exception_text


def missing(module: str, extra: str, what: str, exc: ImportError | None = None) -> str:
    """The message for ``what`` whose ``module`` (of the extra ``extra``) cannot be imported.

    ``exc``, when given and about another module than ``module`` (a submodule of
    it), is added to the message.
    """
    message = f"{what} needs {module!r}: pip install 'toolfold[{extra}]'"
    if exc is not None and exc.name not in (None, module):
        message += f" ({type(exc).__name__}: {exc.msg})"
    return message


def _is_missing(exc: ImportError, modules: Collection[str]) -> str | None:
    """The top-level module of ``modules`` that ``exc`` says is not installed, or None
    (``exc`` is about another module, or an installed one failing in its own import)."""
    if not isinstance(exc, ModuleNotFoundError) or exc.name is None:
        return None
    top = exc.name.partition(".")[0]
    return top if top in modules else None


def raise_missing_extra(
    exc: ImportError, extra: str, what: str, modules: Collection[str]
) -> NoReturn:
    """Raise the error for ``exc``, the failed import of a module of the extra ``extra``
    that ``what`` (a toolfold package importing it at the top) needs.

    Args:
        exc: The ImportError caught.
        extra: The extra of toolfold (``"otel"``).
        what: The package importing it (``"toolfold.otel"``).
        modules: The top-level modules the extra installs (``("opentelemetry",)``).

    Raises:
        ModuleNotFoundError: One of ``modules`` is not installed: still an
            ImportError (``try: import toolfold.otel`` guards keep working),
            naming it and ``pip install 'toolfold[extra]'``.
        ImportError: ``exc`` itself, with its message, cause and traceback,
            where it is about another module or an installed one failing in its
            own import (a version conflict): the extra is not what is missing.
    """
    module = _is_missing(exc, modules)
    if module is None:
        raise exc
    raise ModuleNotFoundError(missing(module, extra, what, exc), name=exc.name) from None


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
        module: The top-level module to import (``"mcp"``, ``"platformdirs"``).
        extra: The extra of toolfold that installs it (``"mcp"``, ``"local"``).
        what: What needs it, for the message (``"the local: provider"``).
        error: Makes the error raised from the message.

    Raises:
        ModelConfigError: (or what ``error`` makes) It cannot be imported. Not
            installed: the message says ``pip install 'toolfold[extra]'``.
            Installed but failing in its own import (an ImportError, or any
            other error its code raises while imported): the message gives
            that error, which is also the cause.
    """
    try:
        return importlib.import_module(module)
    except Exception as exc:  # (an installed package may raise anything as it is imported)
        if isinstance(exc, ImportError) and _is_missing(exc, (module,)) is not None:
            raise error(missing(module, extra, what, exc)) from None
        raise error(
            f"{what} needs {module!r} (toolfold[{extra}]), installed but failing to import:"
            f" {class_name(exc)}: {exception_text(exc)}"
        ) from exc
