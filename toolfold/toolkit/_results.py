"""Turning a tool's return value into the text a model reads.

- ``str`` passes through unchanged (a ``str`` subclass becomes a plain ``str``).
- Everything else is unstructured with the toolkit's cattrs converter and
  written as compact JSON (no spaces after separators, non-ASCII kept as is):
  attrs classes, dataclasses, named tuples and mappings become objects; lists,
  tuples, sets, frozensets, deques, dict views and ranges become arrays (a set's
  order is Python's);
  enums become their values; ``datetime``/``date``/``time`` become ISO 8601
  text; ``UUID``, ``Decimal`` and paths become their text; ``None`` is
  ``null``.
- ``bytes`` become text when they are UTF-8, else base64 text (on their own
  too: ``b"hi"`` is sent as ``hi``).
- pydantic v2 models are written as their JSON (pydantic's dump by alias,
  without computed fields: ``toolkit/_pydantic.py``), wherever they are; other
  objects with a ``model_dump`` method as ``model_dump(mode="json")`` gives them.
- Any other object returned on its own is sent as its ``str()`` text.
- A generator or another iterator (``map(...)``, ``zip``, ``iter(...)``..., not
  a class of the user's own with its own ``__str__``/``__repr__``) is refused
  with a ``TypeError`` saying to return a list: its repr is no result; an
  open file or stream (``io.IOBase``) with one saying to read it; a run's
  ``Response`` or ``RunState`` (alone or inside the result) with one saying to
  return its text or output: its JSON is the other run's whole state.
- Nothing else here raises. A value JSON cannot hold (an arbitrary object inside a
  list, say) is written as its ``str()`` text in its place (its ``repr()``, or
  ``<unprintable T>``, when ``str()`` raises); ``NaN`` and the infinities,
  which JSON lacks, are written as the strings ``"NaN"``, ``"Infinity"`` and
  ``"-Infinity"``; an ``int`` with more digits than Python prints
  (``sys.get_int_max_str_digits()``, 4300 by default) is written in full, as a
  JSON number. When the value cannot be converted whole, each part is
  (`_Salvage`): a mapping key JSON cannot hold (a tuple, a frozenset) is written
  as its text (``NaN`` as ``"NaN"``), a dataclass or attrs class whose
  annotations cannot be read by its fields' values, a pydantic model whose JSON
  dump fails by its Python dump, any other part that fails as its text; the
  rest stays JSON. A value that cannot be walked at all (a cycle), or a mapping
  two of whose keys JSON would write as one (``{1: "a", "1": "b"}``: JSON
  object keys are text), falls back to its ``repr()``, or to
  ``<unprintable T>`` if even that fails.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
import math
import re
import sys
import types
from collections import deque
from collections.abc import ItemsView, KeysView, Mapping, ValuesView
from enum import Enum
from itertools import compress
from typing import Any

import attrs

__all__ = [
    "class_name",
    "describe_exception",
    "exception_text",
    "format_result",
    "iterator_kind",
    "NoResultError",
    "quoted",
    "record_kind",
    "refuse_run",
    "run_kind",
    "stream_kind",
]

_SIMPLE = (int, float, bool, type(None))
#: A dict's views and a range: written as arrays, as sets are (not their repr), by the
#: converter (`get_converter`), `_Salvage` and `_default` alike.
VIEWS = (KeysView, ValuesView, ItemsView, range)
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


class NoResultError(TypeError):
    """A tool returned a run's whole record (`run_kind`): raised through every fallback.

    Attributes:
        record: The record named without a subject (`record_kind`), for an
            error about a value no tool returned (a workflow's input...).
        kind: Its class's name (``"Response"``).
        advice: What to give instead (its class's ``_no_tool_result``).
    """

    def __init__(self, message: str, *, record: str = "", kind: str = "", advice: str = "") -> None:
        super().__init__(message)
        self.record = record
        self.kind = kind
        self.advice = advice

    @classmethod
    def of(cls, value: Any) -> NoResultError:
        """The error for a tool or step that returned ``value``, a run's whole record."""
        advice: str = type(value)._no_tool_result
        return cls(
            run_kind(value), record=record_kind(value), kind=type(value).__name__, advice=advice
        )

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled and copied with its attributes (the keyword arguments ``args`` lacks)."""
        return (
            _rebuilt_no_result,
            (str(self), self.record, self.kind, self.advice),
            self.__dict__,
        )


def _rebuilt_no_result(message: str, record: str, kind: str, advice: str) -> NoResultError:
    """A pickled `NoResultError` made again (`NoResultError.__reduce__`)."""
    return NoResultError(message, record=record, kind=kind, advice=advice)


def record_kind(value: Any) -> str:
    """``value`` named when it is a run's whole record, no data ("" when it is none).

    ``"a Response, another run's whole record: <advice>"``: a class says so
    with a ``_no_tool_result`` text, the advice to give (the runtime's
    ``Response`` and ``RunState``: the toolkit does not import them). Its JSON
    would hand on the other run's state: its instructions, messages and
    config, never meant for it.
    """
    advice = getattr(type(value), "_no_tool_result", None)
    if not isinstance(advice, str):
        return ""
    return f"a {type(value).__name__}, another run's whole record: {advice}"


def run_kind(value: Any) -> str:
    """What a tool or step returning ``value`` did, when it is a run's whole record ("" if not).

    ``"returned a Response, another run's whole record: <advice>"`` (`record_kind`).
    """
    record = record_kind(value)
    return f"returned {record}" if record else ""


def refuse_run(value: Any) -> Any:
    """The converter's hook for a run's record (`run_kind`), wherever it is: refused."""
    raise NoResultError.of(value)


def stream_kind(value: Any) -> str:
    """What ``value`` is when it is an open file or stream (`io.IOBase`: a file,
    ``StringIO``, ``BytesIO``), whose text was never read ("" when it is none)."""
    if isinstance(value, io.IOBase):
        return f"an open file/stream ({type(value).__name__})"
    return ""


#: Characters of an inner text (a group's member error, another failed call's result in
#: a note) that a description quotes before it cuts it (`quoted`). An error's own
#: message is never cut: it is a sub-run's stored result.
QUOTED = 2000

#: How many errors of an exception group (`describe_exception`) a description names.
GROUP_SHOWN = 10


def quoted(text: str, limit: int = QUOTED) -> str:
    """``text`` as a group's description or an error's note quotes it: cut at ``limit``
    characters with ``… (N characters)`` saying its full length, so that a thousand
    members' or calls' texts do not make a megabyte traceback."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def describe_exception(exc: BaseException) -> str:
    """An exception as a model reads it: ``ValueError: no such city`` (or just the class name).

    Never raises: an exception whose ``str()`` fails (or is no string) reads
    ``BadError: <unprintable BadError>`` (see `exception_text`). An exception
    group (an ``asyncio.TaskGroup``'s failure) names the errors it holds, nested
    groups' too, after its own text: ``ExceptionGroup: unhandled errors in a
    TaskGroup (1 sub-exception): ValueError: no such city`` (the first
    `GROUP_SHOWN`, each cut as `quoted` cuts it; ``; `` between them). Groups
    nested more than 20 deep are named, not gone into.
    """
    described = _plain(exc)
    leaves = _group_leaves(exc)
    if not leaves:
        return described
    # (each leaf plainly: a group among them is one nested past `_group_leaves`'s depth,
    # which a description does not go into, however deep it goes)
    shown = "; ".join(quoted(_plain(leaf)) for leaf in leaves[:GROUP_SHOWN])
    more = len(leaves) - GROUP_SHOWN
    return f"{described}: {shown}" + (f"; and {more} more" if more > 0 else "")


def _plain(exc: BaseException) -> str:
    """``ValueError: no such city``: `describe_exception` without a group's errors."""
    name = class_name(exc)
    text = exception_text(exc)
    return f"{name}: {text}" if text else name


def _group_leaves(exc: BaseException, depth: int = 0) -> list[BaseException]:
    """The errors an exception group holds, those of nested groups in their place (an
    empty list for an exception that is no group). By its ``exceptions``, a tuple of
    exceptions, beside ``split``: Python 3.10's backport (``exceptiongroup``) too."""
    try:
        held = getattr(exc, "exceptions", None)
        if not (type(held) is tuple and callable(getattr(exc, "split", None))):
            return []
    except Exception:  # (an attribute of the user's code that raises: no group)
        return []
    leaves: list[BaseException] = []
    for inner in held:
        if not isinstance(inner, BaseException):
            return []
        nested = _group_leaves(inner, depth + 1) if depth < 20 else []
        leaves.extend(nested or [inner])
    return leaves


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, which never raises: ``<unprintable T>`` when the exception's
    ``__str__`` raises or gives no string (a tool's exception is the user's code,
    and describing it must not fail the run)."""
    try:
        text = str(exc)
    except Exception:
        return f"<unprintable {class_name(exc)}>"
    return str.__str__(text)  # (a str subclass's own __str__ is the user's code too)


# What a terminal or a log reader acts on instead of showing: the C0 controls
# (a newline starts a new log record, ESC the sequences that clear a line or
# colour it, CR returns to the line's start, BS steps back), DEL, the C1 controls
# (CSI, U+009B, is ESC [ to some terminals), and the bidirectional overrides and
# isolates, which reorder what is shown; and the line and paragraph separators
# (U+2028, U+2029), line breaks to `str.splitlines` and to many log readers.
BIDI = r"\u202a-\u202e\u2066-\u2069"
#: What a terminal acts on instead of showing (`one_line` escapes each).
CONTROLS = re.compile(rf"[\x00-\x1f\x7f-\x9f\u2028\u2029{BIDI}]")


def escaped(char: str) -> str:
    """One character as a visible escape (``\\x1b``, ``\\u202e``)."""
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escaped_control(found: re.Match[str]) -> str:
    """A control character `re.sub` found, as a visible escape (`escaped`)."""
    return escaped(found.group())


def one_line(text: str) -> str:
    """``text`` with each control character (newlines and tabs too) written as a
    visible escape (``\\x0a``, ``\\x1b``, ``\\u202e``): on one line, which text a
    provider, a model, a tool or a server wrote cannot split (a forged log record
    after a newline), colour or reorder. Text with none is returned as it is."""
    return CONTROLS.sub(escaped_control, text) if CONTROLS.search(text) else text


class NotUTF8Error(ValueError):
    """A file's bytes are not the text `decoded_file` reads; ``line`` is where the
    first bad byte is (None: the whole file is UTF-16 or UTF-32)."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def decoded_file(raw: bytes, *, wide: bool = False) -> str:
    """A text file's bytes (an agent file, a run file) as text: UTF-8, a byte order
    mark dropped (Windows editors and PowerShell 7's ``>`` may write one); with
    ``wide``, UTF-16 and UTF-32 too, known by their BOM or the NULs of an ASCII start
    (`json.detect_encoding`, as `RunState.from_json` reads bytes).

    Raises:
        NotUTF8Error: It is not such text; the message names the encoding it is in
            (UTF-16, which PowerShell 5's ``>`` writes, or UTF-32) or the first
            byte that is not UTF-8 and its offset, and says to save it as UTF-8.
    """
    found = json.detect_encoding(raw)
    wide_found = found.startswith(("utf-16", "utf-32"))
    if wide_found and not wide:
        how = " (PowerShell 5's > writes it)" if found.startswith("utf-16") else ""
        raise NotUTF8Error(
            f"not UTF-8 but {found[:6].upper()}{how}: save it as UTF-8 (PowerShell: "
            "... | Out-File -Encoding utf8 FILE, or Set-Content -Encoding utf8)",
            None,
        )
    encoding = found if wide_found else "utf-8"  # (offsets from the start, a BOM counted)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].decode(encoding, "replace").count("\n") + 1
        why = (
            "saved in another encoding, such as Windows' cp1252?"
            if encoding == "utf-8"
            else "damaged or cut short"  # (a UTF-16/32 file known by its start)
        )
        named = "UTF-8" if encoding == "utf-8" else found[:6].upper()
        raise NotUTF8Error(
            f"not {named}: byte 0x{raw[exc.start]:02x} at offset {exc.start} ({why}): "
            "save it as UTF-8",
            line,
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


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
            is no result; an open file or stream (`stream_kind`), to be
            read; or a run's `Response` or `RunState`, there or inside it
            (`run_kind`). The run reads the error as the call's result.
    """
    if type(value) is str:
        return value
    if type(value) is int:  # the commonest non-text result: JSON is its decimal text
        try:
            return int.__repr__(value)
        except ValueError:  # more digits than Python will print
            return int_digits(value)
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
        text = _dumps(data)
        # Keys may clash only where JSON wrote a key that was no text, which reads as a
        # number, true, false or null (a key of text may too: then the dicts are walked).
        if type(data) in _CONTAINERS and _key_of_no_text(text) and _keys_clash(data):
            return safe_repr(value)
        return text
    except NoResultError:
        raise
    except Exception:
        return _salvaged_text(value)


def _salvaged_text(value: Any) -> str:
    """``value`` as JSON when converting it whole failed: each part converted on its own
    (`_Salvage`), so that only a part that fails is written as its text, the rest kept
    JSON; its ``repr()`` if even that fails (a cycle, keys that JSON writes alike)."""
    try:
        data = _Salvage().part(value)
        if isinstance(data, str):  # (the value itself has no JSON form: its text)
            return data
        text = _dumps(data)
        if type(data) in _CONTAINERS and _key_of_no_text(text) and _keys_clash(data):
            return safe_repr(value)
        return text
    except NoResultError:
        raise
    except Exception:
        return safe_repr(value)


class _Salvage:
    """A value walked part by part, for `_salvaged_text`: containers by their items
    (mapping keys JSON cannot hold as their text, ``NaN`` as ``"NaN"``); any other
    part by the converter, and when that fails, a dataclass or attrs class by its
    fields' values and a pydantic model by its Python dump (an annotation that names a
    type imported only for type checkers, a field of no type, bytes that are not
    UTF-8); what is left as its text. A cycle raises `ValueError`, keys that become
    the same text `_KeysClash`."""

    def __init__(self) -> None:
        from toolfold.toolkit._converter import get_converter

        self.unstructure = get_converter().unstructure
        self.open: set[int] = set()  # the parts being walked (a cycle comes back to one)

    def part(self, value: Any) -> Any:
        if isinstance(value, str) and not isinstance(value, Enum):
            return str.__str__(value)
        if isinstance(value, _SIMPLE) and not isinstance(value, Enum):
            return value
        if id(value) in self.open:
            raise ValueError("Circular reference detected")
        self.open.add(id(value))
        try:
            return self._walked(value)
        finally:
            self.open.discard(id(value))

    def _walked(self, value: Any) -> Any:
        if isinstance(value, Mapping) and not _has_fields(value):
            data = {self.key(key): self.part(item) for key, item in value.items()}
            if len(data) < len(value):
                raise _KeysClash
            return data
        if isinstance(value, _ARRAYS) and not hasattr(type(value), "_fields"):
            return [self.part(item) for item in value]
        try:
            data = self.unstructure(value)
            if data is value and not isinstance(value, _JSON_CONTAINERS):
                dumped = _model_dump(value)
                return value if dumped is _NOTHING else self.part(dumped)
        except NoResultError:
            raise  # (its fields are what must not be written)
        except Exception:
            return self._by_fields(value)
        return self.part(data) if isinstance(data, (dict, list)) else data

    def _by_fields(self, value: Any) -> Any:
        cls = type(value)
        if attrs.has(cls) or dataclasses.is_dataclass(cls):
            # (what cattrs writes: every field by its name, read from the object)
            fields = attrs.fields(cls) if attrs.has(cls) else dataclasses.fields(value)
            return {field.name: self.part(getattr(value, field.name)) for field in fields}
        from toolfold.toolkit._pydantic import is_model, unstructure_model

        if is_model(cls):
            return self.part(unstructure_model(value, mode="python"))
        return _text(value)

    def key(self, key: Any) -> Any:
        """A mapping's key as JSON can hold it: text, a number, true, false or null as
        it is, another key as its JSON form when that is text, else as its text."""
        if isinstance(key, str):
            return str.__str__(key)
        if key is None or isinstance(key, (bool, int)):
            return key
        if isinstance(key, float):
            return key if math.isfinite(key) else _replace_unwritable(key, [])
        if isinstance(key, (bytes, bytearray, memoryview)):
            return _default(key)  # as a value of bytes is written: its text, else base64
        try:
            data = self.unstructure(key)
        except Exception:
            return _text(key)
        return data if isinstance(data, (str, int, float)) and data is not key else _text(key)


class _KeysClash(Exception):
    """Two keys of a mapping became the same text (`_Salvage.key`)."""


def _has_fields(value: Any) -> bool:
    """Whether ``value`` is a dataclass or attrs instance (even one that is a mapping)."""
    return dataclasses.is_dataclass(value) or attrs.has(type(value))


# Walked as arrays by `_Salvage` (named tuples aside: objects).
_ARRAYS = (list, tuple, set, frozenset, deque, *VIEWS)


def _dumps(data: Any) -> str:
    try:
        return json.dumps(
            data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default
        )
    except ValueError as exc:
        if "Circular reference" in str(exc):
            raise
        # NaN or an infinity somewhere (JSON has no such number), or an int with more
        # digits than Python prints: written as placeholders, the digits put in after.
        huge: list[str] = []
        text = json.dumps(
            _replace_unwritable(data, huge),
            ensure_ascii=False,
            separators=(",", ":"),
            allow_nan=False,
            # (what stands in for an object, a pydantic model's dump, may hold them too)
            default=lambda obj: _replace_unwritable(_default(obj), huge),
        )
        if not huge:
            return text
        # The digits put in with one pass over the text (a replace per int is quadratic).
        return _huge_placeholder().sub(lambda found: huge[int(found[1])], text)


# Around the number of a huge int's placeholder string (private-use characters,
# which json writes as they are with ensure_ascii=False).
_HUGE_MARK = "\ue000toolfold-int\ue000"


@functools.cache
def _huge_placeholder() -> re.Pattern[str]:
    """The placeholder of a huge int (the quoted number between two marks), compiled once."""
    mark = re.escape(_HUGE_MARK)
    return re.compile(f'"{mark}([0-9]+){mark}"')


# The end of a key json writes from an int, a float (its repr ends in a digit), a bool
# or None: found in the text, C-fast, by its '":' (a quote inside a string is escaped).
# Keys of text may match too ("id2", "true"): the dicts are then walked (`_keys_clash`).
_key_of_no_text = re.compile(r'":(?:(?<=[0-9]":)|(?<=true":)|(?<=false":)|(?<=null":))').search
_CONTAINERS = frozenset({dict, list})
_is_container = _CONTAINERS.__contains__
_ONLY_TEXT = frozenset({str})
# Fewer bits than this: Python prints the int (4300 digits take about 14284 bits).
_PRINTABLE_BITS = 14000


def _keys_clash(data: Any) -> bool:
    """Whether a mapping in ``data`` (unstructured: dicts and lists) has two keys that
    JSON writes as the same text (``1`` and ``"1"``, ``True`` and ``"true"``)."""
    todo = [data]
    while todo:
        node = todo.pop()
        if type(node) is dict:
            # A key that is not text (rare) may be written like another key.
            if not _ONLY_TEXT.issuperset(map(type, node)) and len(set(map(_key_text, node))) < len(
                node
            ):
                return True
            node = node.values()
        # (C loops only: most keys are text, most items no containers)
        todo.extend(compress(node, map(_is_container, map(type, node))))
    return False


def _key_text(key: Any) -> Any:
    """What json writes for a mapping's ``key`` (the key itself when json refuses it)."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, bool):
        return "null" if key is None else ("true" if key else "false")
    if isinstance(key, int):
        return _int_text(key)
    if isinstance(key, float):
        return float.__repr__(key)
    return key


def _int_text(value: int) -> str:
    try:
        return int.__repr__(value)
    except ValueError:  # more digits than Python will print
        return int_digits(value)


def int_digits(value: int) -> str:
    """``value``'s decimal digits, however many (Python refuses to print more than
    ``sys.get_int_max_str_digits()``, since its own conversion takes time quadratic
    in the length): the number is split in halves of bits and put together in
    `decimal`, whose multiplication of long numbers is fast (as Python 3.12's
    ``_pylong`` does), so a million digits take well under a second."""
    import decimal  # rare: only ints with thousands of digits

    number = decimal.Decimal
    powers: dict[int, decimal.Decimal] = {}

    def power(bits: int) -> decimal.Decimal:  # 2 ** bits, made once
        found = powers.get(bits)
        if found is None:
            if bits <= 1024:
                found = number(1 << bits)
            elif bits & 1:
                found = power(bits - 1) * 2
            else:
                half = power(bits >> 1)
                found = half * half
            powers[bits] = found
        return found

    def join(value: int, bits: int) -> decimal.Decimal:
        if bits <= 4096:  # (about 1233 digits: printed by Python itself)
            return number(value)
        low_bits = bits >> 1
        high = value >> low_bits
        return join(value - (high << low_bits), low_bits) + join(high, bits - low_bits) * power(
            low_bits
        )

    with decimal.localcontext() as context:
        context.prec = decimal.MAX_PREC
        context.Emax = decimal.MAX_EMAX
        context.Emin = decimal.MIN_EMIN
        context.traps[decimal.Inexact] = True  # exact, or an error (never rounded)
        digits = str(join(abs(value), value.bit_length()))
    return f"-{digits}" if value < 0 else digits


_JSON_CONTAINERS = (dict, list, tuple, str, int, float)  # and their subclasses (str enums)
_NOTHING: Any = object()


def _model_dump(obj: Any) -> Any:
    """What ``obj.model_dump(mode="json")`` gives, else _NOTHING.

    For objects with a ``model_dump`` method the converter does not know:
    pydantic v2 models are written by their keys before this is asked.
    """
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
    if isinstance(obj, (set, frozenset, *VIEWS)):
        return list(obj)
    dumped = _model_dump(obj)
    return _text(obj) if dumped is _NOTHING else dumped


def _text(obj: Any) -> str:
    """``str(obj)``, else its ``repr()``, else ``<unprintable T>``: an item of a
    result whose ``__str__`` raises is written in its place, the rest kept."""
    try:
        return str.__str__(str(obj))
    except Exception:
        return safe_repr(obj)


def _replace_unwritable(data: Any, huge: list[str]) -> Any:
    """``data`` with its non-finite floats as text and its ints with more digits than
    Python prints as placeholders (their digits appended to ``huge``): keys as text."""
    if isinstance(data, float) and not math.isfinite(data):
        return "NaN" if math.isnan(data) else ("Infinity" if data > 0 else "-Infinity")
    if isinstance(data, int) and not isinstance(data, bool):
        if data.bit_length() < _PRINTABLE_BITS:
            return data
        try:
            int.__repr__(data)
        except ValueError:
            huge.append(int_digits(data))
            return f"{_HUGE_MARK}{len(huge) - 1}{_HUGE_MARK}"
        return data
    if isinstance(data, dict):
        return {_written_key(k): _replace_unwritable(v, huge) for k, v in data.items()}
    if isinstance(data, (list, tuple, set, frozenset)):
        return [_replace_unwritable(v, huge) for v in data]
    return data


def _written_key(key: Any) -> Any:
    """A mapping's key as json writes it: a huge int as its digits, others as they are."""
    if isinstance(key, int) and not isinstance(key, bool) and key.bit_length() >= _PRINTABLE_BITS:
        return _int_text(key)
    return key


def safe_repr(value: object, suffix: str = "") -> str:
    """``repr(value)``, which never raises: ``<unprintable T>`` (``T`` then
    ``suffix``) when the value's ``__repr__`` raises or gives no string (it is
    the user's code)."""
    try:
        text = repr(value)
    except Exception:
        return f"<unprintable {class_name(value)}{suffix}>"
    return str.__str__(text)  # (a str subclass's own __str__ is the user's code too)
