"""Turning a tool's return value into the text a model reads.

- ``str`` passes through unchanged (a ``str`` subclass becomes a plain ``str``).
- Everything else is unstructured with the toolkit's cattrs converter and
  written as compact JSON (no spaces after separators, non-ASCII kept as is):
  attrs classes, dataclasses, named tuples and mappings become objects; lists,
  tuples, sets and frozensets become arrays (a set's order is Python's);
  enums become their values; ``datetime``/``date``/``time`` become ISO 8601
  text; ``UUID``, ``Decimal`` and paths become their text; ``None`` is
  ``null``.
- ``bytes`` become text when they are UTF-8, else base64 text (on their own
  too: ``b"hi"`` is sent as ``hi``).
- Objects with a ``model_dump`` method (pydantic v2 models) are written as
  ``model_dump(mode="json")`` gives them, wherever they are.
- Any other object returned on its own is sent as its ``str()`` text.
- A generator or another iterator (``map(...)``, ``zip``, ``iter(...)``..., not
  a class of the user's own with its own ``__str__``/``__repr__``) is refused
  with a ``TypeError`` saying to return a list: its repr is no result; an
  open file or stream (``io.IOBase``) with one saying to read it.
- Nothing else here raises. A value JSON cannot hold (an arbitrary object inside a
  list, say) is written as its ``str()`` text in its place; ``NaN`` and the
  infinities, which JSON lacks, are written as the strings ``"NaN"``,
  ``"Infinity"`` and ``"-Infinity"``; a value that cannot be unstructured at
  all (a cycle, a failing property) falls back to its ``repr()``, or to
  ``<unprintable T>`` if even that fails.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import math
import sys
import types
from collections.abc import Mapping
from enum import Enum
from typing import Any

import attrs

__all__ = [
    "class_name",
    "describe_exception",
    "exception_text",
    "format_result",
    "iterator_kind",
    "stream_kind",
]

_SIMPLE = (int, float, bool, type(None))
#: Exact types that are neither an iterator nor a stream: `format_result` skips
#: those checks for them.
_PLAIN = frozenset({dict, list, tuple, float})


def iterator_kind(value: Any) -> str:
    """What ``value`` is when it is an iterator and no result ("" when it is none).

    A generator, an async generator, an iterator of Python's own (``map``,
    ``zip``, ``filter``, ``iter(...)``, itertools and csv objects...), or any
    other object with ``__next__`` or ``__anext__`` whose class keeps
    ``object``'s repr: its values were never read, and its repr is no result.
    An iterator class of the user's own with a ``__str__`` or ``__repr__`` of
    its own (a cursor printing its rows, say) is left alone: its text is what
    it chose to show, and the model reads it as before. So is a value
    toolfold writes as JSON (an attrs class, a dataclass, a mapping, a
    pydantic model). An open file or stream is an iterator too: see
    `stream_kind`, which callers ask first.
    """
    if isinstance(value, types.GeneratorType):
        return "a generator"
    if isinstance(value, types.AsyncGeneratorType):
        return "an async generator"
    cls = type(value)
    if not (hasattr(cls, "__next__") or hasattr(cls, "__anext__")):
        return ""
    if (
        attrs.has(cls)
        or dataclasses.is_dataclass(cls)
        or isinstance(value, Mapping)
        or callable(getattr(value, "model_dump", None))
    ):
        return ""
    methods: Any = cls  # (its __str__ and __repr__ compared with object's, as functions)
    own_text = methods.__str__ is not object.__str__ or methods.__repr__ is not object.__repr__
    if own_text and not _of_python(cls):
        return ""
    return f"an iterator ({cls.__name__})"


def _of_python(cls: type) -> bool:
    """Whether ``cls`` is one of Python's own: from a module of the standard library by
    name and, when the module has a file, by where it lies (an app's package named
    ``profile`` or ``queue`` is not)."""
    if cls.__module__.partition(".")[0] not in sys.stdlib_module_names:
        return False
    where = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if not isinstance(where, str):
        return True
    stdlib, installed = _where_python()
    return where.startswith(stdlib) and not where.startswith(installed)


@functools.cache
def _where_python() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Where the standard library's files lie, and installed packages (a venv's stdlib
    path may hold its site-packages); read once, when first asked (sysconfig is not
    imported with toolfold)."""
    import sysconfig

    paths = sysconfig.get_paths()

    def of(*keys: str) -> tuple[str, ...]:
        return tuple({paths[key] for key in keys if key in paths})

    return of("stdlib", "platstdlib"), of("purelib", "platlib")


def stream_kind(value: Any) -> str:
    """What ``value`` is when it is an open file or stream (`io.IOBase`: a file,
    ``StringIO``, ``BytesIO``), whose text was never read ("" when it is none)."""
    if isinstance(value, io.IOBase):
        return f"an open file/stream ({type(value).__name__})"
    return ""


def describe_exception(exc: BaseException) -> str:
    """An exception as a model reads it: ``ValueError: no such city`` (or just the class name).

    Never raises: an exception whose ``str()`` fails (or is no string) reads
    ``BadError: <unprintable BadError>`` (see `exception_text`).
    """
    name = class_name(exc)
    text = exception_text(exc)
    return f"{name}: {text}" if text else name


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, which never raises: ``<unprintable T>`` when the exception's
    ``__str__`` raises or gives no string (a tool's exception is the user's code,
    and describing it must not fail the run)."""
    try:
        text = str(exc)
    except Exception:
        return f"<unprintable {class_name(exc)}>"
    return str.__str__(text)  # (a str subclass's own __str__ is the user's code too)


def class_name(value: object) -> str:
    """The name of ``value``'s class, which never raises (a metaclass may make
    ``__name__`` anything)."""
    cls = type(value)
    name = type.__dict__["__name__"].__get__(cls)
    return name if isinstance(name, str) else "object"


def format_result(value: Any) -> str:
    """Turn a tool's return value into text for a model.

    Args:
        value: Whatever the tool returned.

    Returns:
        ``value`` itself for a string; otherwise compact JSON, or a readable
        fallback for values JSON cannot hold.

    Raises:
        TypeError: ``value`` is a generator, an async generator or another
            iterator (``map(...)``, ``iter(...)``, ``zip``...; see
            `iterator_kind`): its values were never produced, and its repr
            is no result; or an open file or stream (`stream_kind`), to be
            read. The run reads the error as the call's result.
    """
    if type(value) is str:
        return value
    if type(value) is int:  # the commonest non-text result: JSON is its decimal text
        try:
            return int.__repr__(value)
        except ValueError:  # more digits than Python will print
            return safe_repr(value)
    if value is None or type(value) is bool:
        return "null" if value is None else ("true" if value else "false")
    if isinstance(value, str) and not isinstance(value, Enum):
        return str.__str__(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return str(_default(value))  # its text if UTF-8, else base64, like bytes inside JSON
    if type(value) not in _PLAIN:
        kind = stream_kind(value)
        if kind:
            raise TypeError(f"returned {kind}: read it and return its text")
        kind = iterator_kind(value)
        if kind:
            raise TypeError(
                f"returned {kind}, whose values were never produced: a tool returns its "
                "result once; return the values (e.g. a list) instead"
            )
    try:
        if isinstance(value, _SIMPLE) and not isinstance(value, Enum):
            data: Any = value
        else:
            from toolfold.toolkit._converter import get_converter

            data = get_converter().unstructure(value)
            if data is value and not isinstance(value, _JSON_CONTAINERS):
                # cattrs knows no rule for it: a model (pydantic) dumps itself;
                # anything else reads best as its own text, not a quoted string.
                dumped = _model_dump(value)
                if dumped is _NOTHING:
                    return str(value)
                data = dumped
        return _dumps(data)
    except Exception:
        return safe_repr(value)


def _dumps(data: Any) -> str:
    try:
        return json.dumps(
            data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default
        )
    except ValueError as exc:
        if "Circular reference" in str(exc):
            raise
        # NaN or an infinity somewhere: JSON has no such number.
        return json.dumps(
            _replace_nonfinite(data),
            ensure_ascii=False,
            separators=(",", ":"),
            allow_nan=False,
            default=_default,
        )


_JSON_CONTAINERS = (dict, list, tuple, str, int, float)  # and their subclasses (str enums)
_NOTHING: Any = object()


def _model_dump(obj: Any) -> Any:
    """What ``obj.model_dump(mode="json")`` gives (pydantic v2 models), else _NOTHING."""
    dump = getattr(obj, "model_dump", None)
    if not callable(dump) or isinstance(obj, type):
        return _NOTHING
    return dump(mode="json")


def _default(obj: Any) -> Any:
    """Stand in for anything json cannot write, after cattrs left it as is."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        raw = bytes(obj)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            import base64  # rare: only bytes that are not UTF-8

            return base64.b64encode(raw).decode("ascii")
    if isinstance(obj, (set, frozenset)):
        return list(obj)
    dumped = _model_dump(obj)
    return str(obj) if dumped is _NOTHING else dumped


def _replace_nonfinite(data: Any) -> Any:
    if isinstance(data, float) and not math.isfinite(data):
        return "NaN" if math.isnan(data) else ("Infinity" if data > 0 else "-Infinity")
    if isinstance(data, dict):
        return {k: _replace_nonfinite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_replace_nonfinite(v) for v in data]
    return data


def safe_repr(value: object, suffix: str = "") -> str:
    """``repr(value)``, which never raises: ``<unprintable T>`` (``T`` then
    ``suffix``) when the value's ``__repr__`` raises or gives no string (it is
    the user's code)."""
    try:
        text = repr(value)
    except Exception:
        return f"<unprintable {class_name(value)}{suffix}>"
    return str.__str__(text)  # (a str subclass's own __str__ is the user's code too)
