"""One cattrs converter for state, events and effects.

Unions (message parts, events, effects, stop conditions) are tagged by each
class's ``kind`` field; bytes travel as base64; `Log` values as lists. Live
objects never appear: tools and the model are named in `RunConfig` and
re-attached by the driver on load.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar, cast, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
    StructureHandlerNotFoundError,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.v import format_exception

from toolfold._errors import InvalidEventError, SerializationError, UsageError, add_note
from toolfold.runtime.core import _state
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._effects import EFFECT_TYPES, Effect
from toolfold.runtime.core._events import EVENT_TYPES, Event, OutputAccepted, RunStarted
from toolfold.runtime.core._json_numbers import NON_FINITE_NUMBERS, number_text
from toolfold.runtime.core._json_text import escape_lone_surrogates
from toolfold.runtime.core._log import Log
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    ResultContent,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    freeze,
)
from toolfold.runtime.core._older_wording import with_older_wording
from toolfold.runtime.core._replay import replay
from toolfold.runtime.core._request import ModelRequest, ModelResponse, OutputSpec, ToolDefinition
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._stop import MaxSteps, StopCondition, TokenBudget, ToolCalled
from toolfold.toolkit._frozen import FrozenDict, FrozenList

T = TypeVar("T")
_NOTES = "__notes__"
STATE_FORMAT = "toolfold.run_state/1"
"""The ``format`` tag written at the top of `RunState.to_json` output."""
STATE_FORMAT_NON_FINITE = "toolfold.run_state/2"
"""The tag of a document that lists NaN and infinities in `NON_FINITE_FIELD`: a
reader that knows only `STATE_FORMAT` refuses it, where it would have read those
numbers as text."""
_FORMATS = (STATE_FORMAT, STATE_FORMAT_NON_FINITE)  # (a tuple: `in` takes any value)


def _kind_of(cls: type[Any]) -> str:
    default = attrs.fields_dict(cls)["kind"].default
    assert isinstance(default, str)
    return default


def _register_union(conv: cattrs.Converter, union: Any, classes: Iterable[type[Any]]) -> None:
    """Hooks for ``union`` and ``union | None``, tagged by each class's ``kind``."""
    by_kind = {_kind_of(cls): cls for cls in classes}
    optional = union | None  # the union with None: a new, flat union

    def structure(value: Any, type_: Any) -> Any:
        if value is None and type_ == optional:
            return None
        if not isinstance(value, dict):
            raise ValueError(f"expected an object with a 'kind', got {type(value).__name__}")
        kind = value.get("kind")
        cls = by_kind.get(kind)  # type: ignore[arg-type]
        if cls is None:
            raise ValueError(f"unknown kind {kind!r}; expected one of {sorted(by_kind)}")
        return conv.structure(value, cls)

    conv.register_structure_hook_func(lambda t: t in (union, optional), structure)
    conv.register_unstructure_hook_func(
        lambda t: t in (union, optional), lambda value: conv.unstructure(value, type(value))
    )


def _is_log(t: Any) -> bool:
    return t is Log or get_origin(t) is Log


def _log_hooks(conv: cattrs.Converter) -> None:
    def unstructure_factory(t: Any) -> Callable[[Any], Any]:
        (item,) = get_args(t) or (Any,)
        handler = conv.get_unstructure_hook(item)
        return lambda log: [handler(x) for x in log]

    def structure_factory(t: Any) -> Callable[[Any, Any], Any]:
        (item,) = get_args(t) or (Any,)
        handler = conv.get_structure_hook(item)

        def structure(value: Any, _: Any) -> Log[Any]:
            if not isinstance(value, list):
                raise ValueError(f"expected a list, got {type(value).__name__}")
            items: list[Any] = []
            errors: list[Exception] = []
            for index, x in enumerate(value):
                try:
                    items.append(handler(x, item))
                except Exception as exc:
                    note = IterableValidationNote(f"Structuring {t} @ index {index}", index, item)
                    # __notes__ is what cattrs' transform_error reads for the index.
                    add_note(exc, note)
                    errors.append(exc)
            if errors:
                raise IterableValidationError(f"While structuring {t!r}", errors, t)
            return Log(items)

        return structure

    conv.register_unstructure_hook_factory(_is_log, unstructure_factory)
    conv.register_structure_hook_factory(_is_log, structure_factory)


def _structure_bytes(value: Any, _: Any) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"expected base64 text, got {type(value).__name__}")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"invalid base64: {exc}") from exc


def _structure_int(value: Any, _: Any) -> int:
    """An integer field: an int as is, never a fraction truncated.

    A float with no fraction (``2.0``, as another JSON writer may put it) is
    that int. Text and bools are read as `int` reads them, as before (a state
    that held one loaded so).
    """
    if type(value) is int:
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise ValueError(f"expected an integer, got {value!r}")
    if isinstance(value, (str, bool, int)):
        return int(value)
    raise ValueError(f"expected an integer, got {type(value).__name__}")


def _structure_count(value: Any, _: Any) -> Any:
    """A count (`Usage`'s, a stop condition's bound): an int, or a float kept exact.

    Counts may be floats (a custom model's usage); NaN and infinities are
    refused, as `Usage` refuses them. Text and bools are read as `int` reads
    them, as before (a state that held one loaded so).
    """
    if type(value) is int:
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise ValueError(f"expected an int or a finite float, got {value!r}")
    if isinstance(value, (str, bool, int)):
        return int(value)
    raise ValueError(f"expected an int or a finite float, got {type(value).__name__}")


def _structure_flag(value: Any, _: Any) -> bool:
    """A flag (`TokenBudget.tree`): true or false, not text or a number read as one."""
    if type(value) is not bool:
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _structure_int_table(value: Any, _: Any) -> dict[str, int]:
    """A table of integer counts (`RunState.failures`): text keys, `_structure_int` values."""
    if not isinstance(value, dict):
        raise ValueError(f"expected an object, got {type(value).__name__}")
    return {str(key): _structure_int(number, int) for key, number in value.items()}


_COUNT_FIELDS: dict[type[Any], frozenset[str]] = {
    Usage: frozenset(a.name for a in attrs.fields(Usage)),
    MaxSteps: frozenset({"steps"}),
    TokenBudget: frozenset({"tokens"}),
}


def _own_classes(roots: Iterable[Any]) -> frozenset[type[Any]]:
    """Toolfold's attrs classes reachable from ``roots`` (their types resolved)."""
    found: set[type[Any]] = set()
    todo = list(roots)
    while todo:
        t = todo.pop()
        todo.extend(get_args(t))
        if isinstance(t, type) and attrs.has(t) and t not in found:
            found.add(t)
            attrs.resolve_types(t)  # (once done, a no-op: RunState's is, with its namespace)
            todo.extend(a.type for a in attrs.fields(t))
    return frozenset(t for t in found if t.__module__.split(".")[0] == "toolfold")


def _own_class_hooks(
    conv: cattrs.Converter, classes: frozenset[type[Any]], forbid_extra_keys: bool = False
) -> None:
    """Read toolfold's own classes from mappings only, and their number fields strictly.

    Anything but a mapping where a class goes is refused (``expected a
    mapping, got list``), with its path.

    An ``int`` field takes `_structure_int` (no fraction truncated), a count
    `_structure_count`. With ``forbid_extra_keys``, a key that is no field is
    refused (`state_converter`). Only these classes' fields: the converter's hook for
    ``int`` itself stays cattrs' own, so users' types (an IntEnum, an int
    subclass, an int field of their own Temporal payloads) load as they did.
    """

    def hooks_for(cls: type[Any]) -> dict[str, Any]:
        overrides: dict[str, Any] = {}
        for a in attrs.fields(cls):
            if cls is TokenBudget and a.name == "tree":
                overrides[a.name] = override(struct_hook=_structure_flag)
            elif a.name in _COUNT_FIELDS.get(cls, ()):
                overrides[a.name] = override(struct_hook=_structure_count)
            elif a.type is int:
                overrides[a.name] = override(struct_hook=_structure_int)
            elif get_origin(a.type) in (dict, Mapping) and get_args(a.type) == (str, int):
                overrides[a.name] = override(struct_hook=_structure_int_table)
            elif (cls, a.name) in _SCHEMA_FIELDS:
                overrides[a.name] = override(struct_hook=frozen_schema)
        return overrides

    def frozen_schema(value: Any, type_: Any) -> Any:
        # Frozen here, from the JSON just decoded (the state's own): the field's
        # converter keeps a FrozenDict as it is, and remembers no dict of ours.
        return freeze(conv.get_structure_hook(type_)(value, type_))

    strict = {cls: hooks_for(cls) for cls in classes}

    def factory(cls: Any) -> Callable[[Any, Any], Any]:
        # (cast: cattrs types its keyword overrides and its own options as one **kwargs)
        make = cast(Any, make_dict_structure_fn)
        made = cast(
            Callable[[Any, Any], Any],
            make(cls, conv, _cattrs_forbid_extra_keys=forbid_extra_keys, **strict[cls]),
        )

        def structure(value: Any, type_: Any) -> Any:
            # cattrs' own hook reads fields with ``in`` and ``[]``: a list or a text
            # had no key, so a class whose fields all have defaults (`RunConfig`)
            # loaded from ``[]`` as the default, everything it held lost.
            if type(value) is not dict and not isinstance(value, Mapping):
                raise ValueError(f"expected a mapping, got {type(value).__name__}")
            try:
                return made(value, type_)
            except ClassValidationError as exc:
                # The class's own check (its fields read): cattrs gives no attribute.
                if len(exc.exceptions) == 1 and isinstance(exc.exceptions[0], UsageError):
                    _at_field(cls, exc.exceptions[0])
                raise

        return structure

    # A factory, so each class's hook is made on first use, with every other hook in place.
    conv.register_structure_hook_factory(lambda t: t in strict, factory)


def _at_field(cls: type[Any], exc: UsageError) -> None:
    """Place ``exc`` (a class's own check: ``"RunConfig.max_steps must be ..."``) at the
    field it names, so its path is ``$.config.max_steps``; nowhere when it names none."""
    message = str(exc)
    if getattr(exc, _NOTES, None):
        return
    for a in attrs.fields(cls):
        prefix = f"{cls.__name__}.{a.name}"
        if message.startswith(prefix) and not message[len(prefix) : len(prefix) + 1].isidentifier():
            where = f"Structuring class {cls.__qualname__} @ attribute {a.name}"
            add_note(exc, AttributeValidationNote(where, a.name, a.type))
            return


# A schema read from JSON: frozen as it is structured (see `_own_class_hooks`). So are
# a call's arguments, provider data, an output and a run's settings: JSON just read, which
# the fields' converters then keep as they are (a state saved before they checked nesting
# depth loads as it did).
_SCHEMA_FIELDS = frozenset(
    {
        (ToolDefinition, "parameters"),
        (OutputSpec, "schema"),
        (ToolCallPart, "arguments"),
        (ToolCallPart, "provider_data"),
        (ReasoningPart, "provider_data"),
        (OutputAccepted, "value"),
        (RunConfig, "settings"),
    }
)


def make_converter(forbid_extra_keys: bool = False) -> cattrs.Converter:
    """A fresh converter with toolfold's hooks (the module keeps one: `converter`).

    Args:
        forbid_extra_keys: Refuse a key that is no field of toolfold's classes
            (`state_converter`, for saved states and event logs).
    """
    namespace = {**vars(_state), "Event": Event, "RunState": RunState}
    attrs.resolve_types(RunState, namespace)
    attrs.resolve_types(_state.CallState, namespace)
    for cls in (*EVENT_TYPES, *EFFECT_TYPES):
        attrs.resolve_types(cls, {**namespace, **vars(__import__(cls.__module__, fromlist=["_"]))})
    conv = cattrs.Converter()
    conv.register_unstructure_hook(bytes, lambda b: base64.b64encode(b).decode("ascii"))
    conv.register_structure_hook(bytes, _structure_bytes)
    _register_union(conv, ResultContent, (TextPart, ImagePart, FilePart))
    _register_union(
        conv, Part, (TextPart, ToolCallPart, ToolResultPart, ImagePart, FilePart, ReasoningPart)
    )
    _register_union(conv, Event, EVENT_TYPES)
    _register_union(conv, Effect, EFFECT_TYPES)
    _register_union(conv, StopCondition, (MaxSteps, TokenBudget, ToolCalled))
    # ``tree`` only when set: a budget of the run's own calls writes what it always
    # wrote, so states and histories read and written before compare equal.
    conv.register_unstructure_hook(
        TokenBudget,
        make_dict_unstructure_fn(TokenBudget, conv, tree=override(omit_if_default=True)),
    )
    # ``earlier_steps`` only when the history had model responses: a first run's
    # log reads as it always did, and one written before they were counted loads as 0.
    conv.register_unstructure_hook(
        RunStarted,
        make_dict_unstructure_fn(RunStarted, conv, earlier_steps=override(omit_if_default=True)),
    )
    _log_hooks(conv)
    roots = (RunState, *EVENT_TYPES, *EFFECT_TYPES, *_COUNT_FIELDS, ToolCalled, Message)
    _own_class_hooks(conv, _own_classes((*roots, ModelRequest, ModelResponse)), forbid_extra_keys)
    return conv


converter = make_converter()
"""The one converter for state, events and effects."""

state_converter = make_converter(forbid_extra_keys=True)
"""`converter` refusing a key that is no field: what reads saved states and event logs.

A newer toolfold's field would otherwise be dropped without a word (and lost
on the next save). No field of a stored class was ever removed, so every
state an earlier version wrote has none. (The Temporal payload converter
keeps `converter`: workers of two versions may run side by side.)
"""


def unstructure(value: Any, type_: Any = None) -> Any:
    """``value`` as JSON-ready data (dicts, lists, strings, numbers)."""
    return converter.unstructure(value, type_ if type_ is not None else type(value))


def structure(data: Any, type_: type[T] | Any, conv: cattrs.Converter | None = None) -> Any:
    """Rebuild a value of ``type_`` from `unstructure` output.

    Args:
        data: The data.
        type_: Its type.
        conv: The converter (default `converter`; `state_converter` for a saved state).

    Raises:
        SerializationError: The data does not fit the type; the message lists
            every problem with its path.
    """
    try:
        return (converter if conv is None else conv).structure(data, type_)
    except StructureHandlerNotFoundError as exc:  # (no class: a name, `object`...)
        name = getattr(type_, "__name__", repr(type_))
        hint = ": pass the class itself, not its name" if isinstance(type_, str) else ""
        raise SerializationError(name, [f"no loader for the type {name}{hint}"]) from exc
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError, RecursionError) as exc:
        problems = (
            cattrs.transform_error(exc, format_exception=_format)
            if isinstance(exc, cattrs.BaseValidationError)
            else [str(exc)]
        )
        name = getattr(type_, "__name__", str(type_))
        raise SerializationError(name, problems) from exc


def _format(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, ForbiddenExtraKeysError):
        names = ", ".join(repr(k) for k in sorted(exc.extra_fields, key=str))
        noun = "field" if len(exc.extra_fields) == 1 else "fields"
        return (
            f"unknown {noun} {names} (the document may be from a newer toolfold: "
            "load it with that version)"
        )
    # cattrs' default drops the message of our own ValueErrors (unknown kind, bad base64)
    # and of a class's own checks (a UsageError: "RunConfig.max_steps must be ...").
    if isinstance(exc, ValueError):
        return str(exc)
    if get_origin(type_) is Literal:  # cattrs: "unknown error (x not in literal ...)"
        allowed = ", ".join(repr(a) for a in get_args(type_))
        got, sep, _ = str(exc).rpartition(" not in literal ")
        return f"expected one of {allowed}" + (f", got {got}" if sep else "")
    return format_exception(exc, type_)


def to_json(value: Any, type_: Any = None) -> str:
    """``value`` (state, event, effect, message...) as compact JSON text.

    A `RunState` is written as `RunState.to_json` writes it (its format tag,
    and NaN or infinities listed in `NON_FINITE_FIELD`), so `RunState.from_json`
    reads it.
    """
    if type(value) is RunState and type_ in (None, RunState):
        return state_to_json(value)
    return json.dumps(unstructure(value, type_), ensure_ascii=False, separators=(",", ":"))


def from_json(text: str | bytes, type_: Any) -> Any:
    """Rebuild a value of ``type_`` from `to_json` output.

    A `RunState` is loaded as `RunState.from_json` loads it (without a key):
    checked against its own event log, so an edited document is refused. A
    document with no format tag (what ``to_json(state)`` wrote before it wrote
    one) is read as ``toolfold.run_state/1``.

    Raises:
        SerializationError: The text is not JSON or does not fit the type.
        UsageError: ``text`` is not str or bytes (None, a dict already decoded).
    """
    if type_ is RunState:
        data = _loads(text, "RunState", "from_json")
        if isinstance(data, dict) and "format" not in data:
            data["format"] = STATE_FORMAT
        return _state_from_data(data, None)
    return structure(_loads(text, _name(type_), "from_json"), type_)


def snapshot_to_json(state: RunState) -> str:
    """A state as plain JSON text, with no format tag: a Temporal workflow's snapshot.

    A snapshot holds its sub-runs in flight in their calls, so it is no state
    its own event log replays to, and `from_json` would refuse it. Read it
    with `snapshot_from_json`. (What ``to_json(state)`` wrote before it wrote
    `RunState.to_json`'s document: workers of either version read each other's.)
    """
    return json.dumps(unstructure(state, RunState), ensure_ascii=False, separators=(",", ":"))


def snapshot_from_json(text: str | bytes) -> RunState:
    """A state `snapshot_to_json` wrote, as it is (not checked against its event log).

    Raises:
        SerializationError: The text is not JSON or does not fit the type.
    """
    state: RunState = structure(_loads(text, "RunState", "snapshot_from_json"), RunState)
    return state


def _loads(text: str | bytes, name: str, function: str) -> Any:
    """``json.loads(text)``, or a `SerializationError` for ``name`` saying why not.

    Raises:
        UsageError: ``text`` is no text at all (None, a number, a dict already
            decoded), naming ``function``'s argument.
    """
    given: object = text
    if not isinstance(given, (str, bytes, bytearray)):
        decoded = isinstance(given, (dict, list))
        hint = " (already decoded: pass the JSON text itself)" if decoded else ""
        raise UsageError(
            f"{function}(text): expected JSON text (str or bytes), got {type(given).__name__}{hint}"
        )
    try:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
        elif text.startswith("\ufeff"):
            # A byte order mark left by decoding a file as UTF-8 rather than utf-8-sig
            # (a file Notepad saved): dropped, as it is from bytes (detect_encoding).
            text = text[1:]
        return _DECODER.decode(text)
    except ValueError as exc:
        raise SerializationError(name, [f"not JSON: {exc}"]) from exc
    except RecursionError as exc:  # (arrays or objects nested deeper than Python recurses)
        raise SerializationError(name, ["not JSON this reader takes: nested too deeply"]) from exc


def _name(type_: Any) -> str:
    return getattr(type_, "__name__", str(type_))


SigningKey = str | bytes
"""A key for `RunState.to_json(key=...)`: text (UTF-8) or bytes (a bytearray or memoryview too)."""

# One key, not a list of them (bytes-like values iterate as ints).
_ONE_KEY = (str, bytes, bytearray, memoryview)

SIGNATURE_FIELD = "signature"
"""The top-level field a signed state carries: ``"hmac-sha256-v2:<64 hex digits>"``
(``"hmac-sha256:<64 hex digits>"`` in a state signed before numbers were signed by value)."""

NON_FINITE_FIELD = "non_finite"
"""The top-level field listing where a state's NaN and infinities are.

JSON has no such numbers (Python's ``json`` writes a bare ``NaN``, which a
browser's ``JSON.parse`` and PostgreSQL's ``jsonb`` refuse). `state_to_json`
writes each as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` and
lists its path here (a list of object keys and array indexes), and
`state_from_json` turns those strings back into numbers. The field is left
out when there is none; a document that has it is tagged
`STATE_FORMAT_NON_FINITE`, so a reader that does not know the field refuses it.
"""

# A bare NaN (a log `events_to_json` wrote, a state written before `NON_FINITE_FIELD`)
# is read as `math.nan` itself, as `NON_FINITE_FIELD`'s strings are: containers compare
# NaN by identity (NaN != NaN), so values loaded twice compare equal.
_DECODER = json.JSONDecoder(parse_constant=NON_FINITE_NUMBERS.__getitem__)
# Signatures over the document with numbers by value (`_canonical`) carry their own scheme:
# a reader from before them refuses it as a scheme it does not know ("the signature is not
# 'hmac-sha256:<hex digest>'"), not as a changed state. States signed before carry
# `_SCHEME_BEFORE`, over the numbers as written, and still verify.
_SCHEME = "hmac-sha256-v2:"
_SCHEME_BEFORE = "hmac-sha256:"
_HEX = frozenset("0123456789abcdef")


def state_to_json(state: RunState, key: SigningKey | Sequence[SigningKey] | None = None) -> str:
    """The state as JSON text, tagged with `STATE_FORMAT`.

    Args:
        state: The state.
        key: Sign the document with HMAC-SHA256 under this key (the first,
            when a list is given for key rotation); see `state_from_json`.
    """
    data = {"format": STATE_FORMAT, **converter.unstructure(state, RunState)}
    signing = None if key is None else _keys(key)[0]
    try:
        return _text(data, signing)
    except ValueError:  # a NaN or an infinity (a workflow step's output): written as text
        # First as JSON gives it back (keys as text, a duplicate once), so each path
        # listed leads where `state_from_json` looks.
        data = json.loads(json.dumps(data))
        paths: list[list[str | int]] = []
        _finite(data, [], paths)
        if paths:
            data["format"] = STATE_FORMAT_NON_FINITE
            data[NON_FINITE_FIELD] = paths
        return _text(data, signing)


def _text(data: dict[str, Any], key: bytes | None) -> str:
    """The document's JSON text, signed under ``key`` if given.

    Raises:
        ValueError: ``data`` holds a NaN or an infinity.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate: escaped, so the text can be written anywhere
        text = escape_lone_surrogates(text)
    if key is None:
        return text
    # Signed as `state_from_json` reads it back: keys that are not text (a step's
    # output {9: "a", 10: "b"}) are text there, and sort so ("10" before "9").
    signature = _digest(_SCHEME, _canonical(_DECODER.decode(text)), key)
    return f'{text[:-1]},"{SIGNATURE_FIELD}":"{signature}"}}'


def state_from_json(
    text: str | bytes, key: SigningKey | Sequence[SigningKey] | None = None
) -> RunState:
    """Load a state written by `state_to_json`.

    Args:
        text: The JSON text.
        key: Require a signature made with this key, or with any key of a list
            (key rotation: sign with the new key, still accept the old ones).
            Without a key, a signature is not checked.

    Raises:
        SerializationError: The text is not a serialized state of this format,
            or (with ``key``) it is unsigned or its signature does not match.
        UsageError: ``text`` is not str or bytes (None, a dict already decoded).
    """
    return _state_from_data(_loads(text, "RunState", "RunState.from_json"), key)


def _state_from_data(data: Any, key: SigningKey | Sequence[SigningKey] | None) -> RunState:
    """The state a document holds (``data``: its JSON text just decoded, once: a
    signature is checked over it too), as `state_from_json` reads it."""
    if not isinstance(data, dict) or data.get("format") not in _FORMATS:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        expected = f"{STATE_FORMAT!r} or {STATE_FORMAT_NON_FINITE!r}"
        raise SerializationError("RunState", [f"expected format {expected}, got {found!r}"])
    signature = data.pop(SIGNATURE_FIELD, None)
    if key is not None:
        _check_signature(data, signature, _keys(key))
    non_finite = data.get("format") == STATE_FORMAT_NON_FINITE
    data = {k: v for k, v in data.items() if k != "format"}
    if non_finite != (NON_FINITE_FIELD in data):
        tag = STATE_FORMAT_NON_FINITE if non_finite else STATE_FORMAT
        lists = "lists no" if non_finite else "lists"
        raise SerializationError(
            "RunState",
            [f"the document is {tag!r} but {lists} NaN or infinities @ $.{NON_FINITE_FIELD}"],
        )
    if non_finite:
        _restore_non_finite(data, data.pop(NON_FINITE_FIELD))
    first = _config_of_first_event(data)
    try:
        state: RunState = structure(data, RunState, state_converter)
    except SerializationError:
        if first is None:
            raise
        data["log"][0] = first  # every problem, at both of its paths
        structure(data, RunState, state_converter)
        raise
    if first is not None:
        started: Any = state.log[0]  # (a RunStarted: its kind was checked)
        started = attrs.evolve(started, config=state.config)
        state = attrs.evolve(state, log=Log([started, *state.log[1:]]))
    return _verified(state)


def _config_of_first_event(data: dict[str, Any]) -> dict[str, Any] | None:
    """The log's `RunStarted` (as decoded) when it holds the state's own config (the
    usual case, until a handoff), else None. Its config is then set aside in
    ``data`` (a default config stands in) and the caller puts the state's one in
    its place, so the config (and its tools' schemas) is read and frozen once,
    not twice; a document that does not load is read again with it, so that
    each problem is reported at both paths.

    Equal as `_verified` compares them (``==``, at C speed: a ``1`` and a
    ``1.0`` are one value to it, as they are to the check of the log).
    """
    log = data.get("log")
    if type(log) is not list or not log:
        return None
    first = log[0]
    if type(first) is not dict or first.get("kind") != "run_started":
        return None
    config, own = first.get("config"), data.get("config")
    if type(config) is not dict or config != own:
        return None
    log[0] = {**first, "config": {}}
    return first


def _finite(value: Any, path: list[str | int], paths: list[list[str | int]]) -> Any:
    """``value`` (JSON data just decoded: its own) with each NaN or infinity in it
    written as text, in place, its path added to ``paths``."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        paths.append(list(path))
        return _number_text(value)
    if isinstance(value, dict):
        for k, v in value.items():
            value[k] = _finite(v, [*path, k], paths)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            value[i] = _finite(v, [*path, i], paths)
    return value


def _number_text(number: float) -> str:
    return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")


def _restore_non_finite(data: dict[str, Any], paths: Any) -> None:
    """Turn the strings `NON_FINITE_FIELD` lists back into numbers, in place (``data``
    was just parsed), refusing a list that does not point at such strings."""
    where = f"$.{NON_FINITE_FIELD}"
    if not isinstance(paths, list):
        raise SerializationError(
            "RunState", [f"expected a list of paths, got {type(paths).__name__} @ {where}"]
        )
    for index, path in enumerate(paths):
        at = f"{where}[{index}]"
        if not isinstance(path, list) or not path:
            raise SerializationError("RunState", [f"expected a non-empty list of keys @ {at}"])
        holder: Any = data
        for step in path[:-1]:
            holder = _step(holder, step, at)
        last = path[-1]
        found = _step(holder, last, at)
        if not isinstance(found, str) or found not in NON_FINITE_NUMBERS:
            shown = repr(found[:40]) if isinstance(found, str) else f"a {type(found).__name__}"
            raise SerializationError(
                "RunState",
                [f"the value there is {shown}, not 'NaN', 'Infinity' or '-Infinity' @ {at}"],
            )
        holder[last] = NON_FINITE_NUMBERS[found]


def _step(holder: Any, step: Any, at: str) -> Any:
    """``holder[step]`` for a path of `NON_FINITE_FIELD`, or a `SerializationError`."""
    if isinstance(holder, dict) and isinstance(step, str) and step in holder:
        return holder[step]
    if isinstance(holder, list) and type(step) is int and 0 <= step < len(holder):
        return holder[step]
    raise SerializationError("RunState", [f"the path does not lead to a value ({step!r}) @ {at}"])


def _keys(key: SigningKey | Sequence[SigningKey]) -> list[bytes]:
    """The keys ``key`` gives, as bytes: one key (str, bytes, bytearray, memoryview) or a list of them.

    A bytearray or memoryview is a key as the bytes it holds (what `hmac`
    takes), not a list of ints; a mapping is refused, not read as a list of
    its keys.
    """
    given: object = key
    if isinstance(given, Mapping):
        raise UsageError(
            f"key: a signing key is str or bytes (or a list of them), got {type(given).__name__} "
            "(a mapping's keys are not a key list: pass a list)"
        )
    try:
        listed = [key] if isinstance(given, _ONE_KEY) else list(key)
    except TypeError:
        raise UsageError(
            f"key: a signing key is str or bytes (or a list of them), got {type(key).__name__}"
        ) from None
    if not listed:
        raise UsageError("key=[] gives no key to sign or check a state with")
    found: list[bytes] = []
    for given_item in listed:
        item: object = given_item
        if isinstance(item, (bytearray, memoryview)):
            item = bytes(item)
        if not isinstance(item, (str, bytes)):
            raise UsageError(f"key: a signing key is str or bytes, got {type(item).__name__}")
        try:
            raw = item.encode("utf-8") if isinstance(item, str) else item
        except UnicodeEncodeError:
            raise UsageError("a signing key given as text must encode to UTF-8") from None
        if not raw:
            raise UsageError("a signing key must not be empty")
        found.append(raw)
    return found


def _canonical(data: dict[str, Any]) -> bytes:
    """The canonical JSON of a document (``data``: its text as decoded, not changed
    here): what a signature covers now.

    Sorted keys, no spaces, ASCII escapes, and numbers by value: a float with no
    fraction below 1e21 is the integer JavaScript writes for it (``1.0`` and
    ``1``, ``-0.0`` and ``0``, ``2.0**60`` and ``1152921504606847000`` are one
    number), other floats their shortest digits, integers exactly. So the same
    state signs the same whatever the JSON text's own layout, and after a
    browser's ``JSON.parse``/``JSON.stringify``, which writes ``1.0`` as ``1``.
    The signature field, if any, is left out.
    """
    by_value: dict[str, Any] = _by_value_any(data)
    by_value.pop(SIGNATURE_FIELD, None)
    return _canonical_before(by_value)


def canonical_json(value: Any, *, by_value: bool = True) -> bytes:
    """The canonical JSON of decoded JSON ``value`` as a signature reads a document
    (`_canonical`): sorted keys, no spaces, ASCII escapes, numbers by value, so that
    ``1.0`` and ``1`` are one number, as they are after a browser's
    ``JSON.parse``/``JSON.stringify``. An approval key's fingerprint hashes it too.

    With ``by_value=False``, numbers as written (``1.0`` and ``1`` apart), as
    `_SCHEME_BEFORE` signatures and approval keys made before covered them.
    """
    return _canonical_before(_by_value_any(value) if by_value else value)


# In canonical JSON as written, what only a float with no fraction (below 1e21: what
# `_by_value` changes) is written with: ``100.0``, ``-0.0``, ``1e+16`` (or a string that
# holds the same characters).
_INTEGRAL_FLOAT = re.compile(rb"\.0(?![0-9])|e\+")


def same_by_value(written: bytes) -> bool:
    """Whether ``written``, `canonical_json` of a value with ``by_value=False``, is certainly
    its `canonical_json` by value too: it holds no float that `_by_value` changes (read from
    the text, in C: no walk of the value). False may be a string that only looks like one."""
    return _INTEGRAL_FLOAT.search(written) is None


def _by_value_any(value: Any) -> Any:
    try:
        return _by_value(value)
    except RecursionError:  # (nested deeper than its frames go: JSON's own limit is deeper)
        return _by_value_deep(value)


# What `_by_value` goes into (anything else in decoded JSON is kept as it is): a stored
# value's frozen objects and arrays too (a call's arguments), copied as plain ones.
_BY_VALUE_TYPES = frozenset((float, dict, list, FrozenDict, FrozenList))
_DICTS = (dict, FrozenDict)
_LISTS = (list, FrozenList)
_EXACT_INTEGERS = float(2**53)


def _by_value(value: Any) -> Any:
    """A copy of decoded JSON ``value`` with each float that has no fraction (below 1e21)
    the integer JavaScript writes for it (`number_text`); the rest as it is.

    The document is decoded once, by the C decoder (a ``parse_float`` hook is a
    Python call per number: twice as slow to check a state full of numbers).
    """
    kind = type(value)
    if kind is float:
        if value.is_integer() and -1e21 < value < 1e21:
            # Up to 2**53 every integer is exact, and `number_text` writes its digits.
            exact = -_EXACT_INTEGERS <= value <= _EXACT_INTEGERS
            return int(value) if exact else int(number_text(value))
        return value
    if kind in _DICTS:
        return {k: _by_value(v) if type(v) in _BY_VALUE_TYPES else v for k, v in value.items()}
    if kind in _LISTS:
        return [_by_value(v) if type(v) in _BY_VALUE_TYPES else v for v in value]
    return value


def _by_value_deep(data: Any) -> Any:
    """`_by_value` of a document (an object or an array), in a loop rather than a call
    per level: for one nested deeper than Python's recursion limit lets `_by_value` go
    (it takes two frames a level), which JSON reads and writes (one level a frame, in C)."""
    top: Any = {} if type(data) in _DICTS else [None] * len(data)
    todo: list[tuple[Any, Any]] = [(top, data)]
    while todo:
        copy, original = todo.pop()
        items = original.items() if type(original) in _DICTS else enumerate(original)
        for k, v in items:
            kind = type(v)
            if kind in _DICTS or kind in _LISTS:
                child: Any = {} if kind in _DICTS else [None] * len(v)
                copy[k] = child
                todo.append((child, v))
            else:
                copy[k] = _by_value(v)  # (a float by value, the rest as it is)
    return top


def _canonical_before(data: dict[str, Any]) -> bytes:
    """The canonical JSON `_SCHEME_BEFORE` signatures cover: ``data`` (the document as
    decoded, its signature left out) with numbers as written (``1.0`` and ``1`` apart)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return text.encode("ascii")


def _signature_before(data: dict[str, Any], key: bytes) -> str:
    """A `_SCHEME_BEFORE` signature, as toolfold made them before `_SCHEME` (tests make old states)."""
    return _digest(_SCHEME_BEFORE, _canonical_before(data), key)


def _digest(scheme: str, canonical: bytes, key: bytes) -> str:
    return scheme + hmac.new(key, canonical, hashlib.sha256).hexdigest()


def _check_signature(data: dict[str, Any], signature: Any, keys: list[bytes]) -> None:
    """Check ``signature`` of a document (``data``: it decoded, the signature popped)."""
    if signature is None:
        raise SerializationError(
            "RunState",
            [f"the state is not signed, but a key was given: refusing it @ $.{SIGNATURE_FIELD}"],
        )
    scheme = next(
        (
            s
            for s in (_SCHEME, _SCHEME_BEFORE)
            if isinstance(signature, str) and signature.startswith(s)
        ),
        None,
    )
    # Checked in full before compare_digest, which raises TypeError on non-ASCII text.
    if not (
        scheme is not None
        and len(signature) == len(scheme) + 64
        and _HEX.issuperset(signature[len(scheme) :])
    ):
        raise SerializationError(
            "RunState",
            [
                f"the signature is not '{_SCHEME}<hex digest>' (nor '{_SCHEME_BEFORE}<hex "
                f"digest>', as states were signed before) @ $.{SIGNATURE_FIELD}"
            ],
        )
    try:
        canonical = _canonical(data) if scheme == _SCHEME else _canonical_before(data)
    except RecursionError as exc:  # (read in this call stack, but not written again in it)
        raise SerializationError(
            "RunState",
            [f"nested too deeply to check its signature @ $.{SIGNATURE_FIELD}"],
        ) from exc
    # compare_digest over every key: the time taken says nothing about the digest.
    matches = [hmac.compare_digest(_digest(scheme, canonical, k), signature) for k in keys]
    if not any(matches):
        noun = "the key" if len(keys) == 1 else f"any of the {len(keys)} keys"
        raise SerializationError(
            "RunState",
            [
                f"the signature does not match {noun}: the state was changed after it "
                f"was signed, or signed with another key @ $.{SIGNATURE_FIELD}"
            ],
        )


def _verified(state: RunState, at: str = "$") -> RunState:
    """``state`` checked against its own event log, which is the source of truth.

    A document whose fields were edited (a call marked ``to_run`` that awaits
    approval, a phase changed by hand) would otherwise let ``resume`` do what
    the events never allowed. The sub-runs the log carries (an agent used as a
    tool, a workflow's step) are checked against their own logs too, and the
    state returned carries them as checked (a sub-run saved finished ``stop``
    where its log gives ``length`` carries ``length``, as it would loaded alone).
    """
    return _checked(state, at)[0]


# What a difference from the log may mean (`SerializationError.hint`).
_CHANGED_OR_OTHER_TOOLFOLD = (
    "the document was changed after it was saved, or written by an older or a newer "
    "toolfold whose runs replay otherwise; load it with the toolfold that wrote it"
)


def _checked(state: RunState, at: str) -> tuple[RunState, bool]:
    """`_verified`'s work: the state its log replays to, and whether it differs from
    ``state`` (a finish reason saved before runs carried it, here or in a sub-run)."""
    try:
        replayed = replay(state.log)
    except Exception as exc:  # a refusal, or whatever else a log no run wrote may raise
        what = str(exc) if isinstance(exc, InvalidEventError) else f"{type(exc).__name__}: {exc}"
        raise SerializationError(
            "RunState", [f"the event log does not replay: {what} @ {at}.log"]
        ) from exc
    changed = False
    if replayed != state:
        found = _as_carried(state, replayed)
        # An argument error an older toolfold worded otherwise loads as saved.
        replayed = with_older_wording(found, replayed)
        if found != replayed:
            # The finish reason saved before runs carried it, and those words, are no
            # problem: only the differences that remain without them are named.
            problems: list[str] = []
            for field in attrs.fields(RunState):
                _differences(
                    f"{at}.{field.name}",
                    getattr(found, field.name),
                    getattr(replayed, field.name),
                    problems,
                )
            raise SerializationError(
                "RunState",
                problems or ["the state differs from its event log"],
                hint=_CHANGED_OR_OTHER_TOOLFOLD,
            )
        changed = found is not state
    events: list[Event] | None = None  # the log with its sub-runs as checked, once one differs
    for index, event in enumerate(state.log):
        child = getattr(event, "child", None)
        if child is not None:
            checked, child_changed = _checked(child, f"{at}.log[{index}].child")
            if child_changed:
                if events is None:
                    events = list(state.log.as_tuple()[:index])
                event = attrs.evolve(cast(Any, event), child=checked)
        if events is not None:
            events.append(event)
    if events is None:
        return replayed, changed
    # Only a state saved before runs carried their finish gets here: replayed again,
    # the parent's fields that copy a sub-run (a call's result) carry it as checked.
    return with_older_wording(state, replay(events)), True


# The finish reasons an answer's response carries to its run now
# (`_steps.accepted_reason`), where a run finished "stop" before: its log
# then gave ``other`` (any output type) and, for a str output, ``length`` or
# ``content_filter`` too.
_CARRIED_SINCE = frozenset(("length", "content_filter", "other"))


def _as_carried(state: RunState, replayed: RunState) -> RunState:
    """``state`` with the finish reason its log's ``replayed`` state gives, where
    it says ``stop`` as a state saved before the run carried its answer's finish
    reason does (the log now giving ``length``, ``content_filter`` or ``other``);
    else ``state`` itself. Equal to ``replayed``, it loads with the log's reason
    (a hand edit gains nothing)."""
    if (
        state.phase == "finished"
        and state.finish_reason == "stop"
        and replayed.finish_reason in _CARRIED_SINCE
    ):
        return attrs.evolve(state, finish_reason=replayed.finish_reason)
    return state


def _differences(path: str, found: Any, expected: Any, out: list[str]) -> None:
    """Where ``found`` differs from ``expected``, down to the differing leaves."""
    if found == expected:
        return
    if isinstance(found, Log) and isinstance(expected, Log):
        found, expected = found.as_tuple(), expected.as_tuple()
    if type(found) is type(expected) and attrs.has(type(found)):
        for field in attrs.fields(type(found)):
            if not field.eq:  # no part of the value (a message's codec memo)
                continue
            name = field.name
            _differences(f"{path}.{name}", getattr(found, name), getattr(expected, name), out)
        return
    if isinstance(found, tuple) and isinstance(expected, tuple) and len(found) == len(expected):
        for index, (a, b) in enumerate(zip(found, expected, strict=True)):
            _differences(f"{path}[{index}]", a, b, out)
        return
    name = path.rsplit(".", 1)[-1]
    if isinstance(found, str) and isinstance(expected, str):
        out.append(f"{name} {_text_difference(found, expected)} @ {path}")
        return
    out.append(f"{name} is {found!r:.80} but the event log gives {expected!r:.80} @ {path}")


# How much of two texts that differ a difference shows: whole up to `_SHOWN`
# characters (as repr), else `_SHOWN` around where they part, `_BEFORE` of it before.
_SHOWN = 80
_BEFORE = 24


def _text_difference(found: str, expected: str) -> str:
    """``is <found> but the event log gives <expected>``, each shown whole when short, else
    a window from a little before the first character where they differ (which the
    first 80 characters of each, alike, would hide)."""
    if len(repr(found)) <= _SHOWN and len(repr(expected)) <= _SHOWN:
        return f"is {found!r} but the event log gives {expected!r}"
    at, size = 0, min(len(found), len(expected))
    while at < size and found[at : at + 4096] == expected[at : at + 4096]:  # (a long text)
        at += 4096
    while at < size and found[at] == expected[at]:
        at += 1
    start = max(0, at - _BEFORE)
    return (
        f"is {_window(found, start)} but the event log gives {_window(expected, start)} "
        f"(first difference at character {at}; {len(found):,} and {len(expected):,} characters)"
    )


def _window(text: str, start: int) -> str:
    """``text`` from ``start``, `_SHOWN` characters of it, with ``…`` where it is cut."""
    end = start + _SHOWN
    return f"{'…' if start else ''}{text[start:end]!r}{'…' if end < len(text) else ''}"


def events_to_json(events: Iterable[Event]) -> str:
    """An event log as a JSON array."""
    return to_json(tuple(events), tuple[Event, ...])


def events_from_json(text: str | bytes) -> tuple[Event, ...]:
    """An event log written by `events_to_json`.

    Raises:
        SerializationError: The text is not JSON, not a JSON array (``{}``
            is no log), or an item is no event.
        UsageError: ``text`` is not str or bytes (None, a list already decoded).
    """
    data = _loads(text, "tuple", "events_from_json")
    if not isinstance(data, list):
        raise SerializationError(
            "tuple", [f"expected a JSON array of events, got {type(data).__name__} @ $"]
        )
    events: tuple[Event, ...] = structure(data, tuple[Event, ...], state_converter)
    return events
