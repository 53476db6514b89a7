"""Reading a provider's JSON at the boundary: typed getters that name the bad field.

A codec reads a decoded body with these getters instead of ``dict.get`` and
``isinstance`` checks of its own. Each takes the parent (an object or an array),
the key (a name or an index) and the parent's path, and returns the value or
raises `WireError` with the field's JSON path::

    message = wire.mapping(choice, "message", "$.choices[0]")
    for i, call in enumerate(wire.array(message, "tool_calls", at)):
        call_id = wire.text(call, "id", f"{at}.tool_calls[{i}]")

A missing field and ``null`` read as "absent" (``{}``, ``()``, ``None``); a
value of another type is the provider's fault (and so is ``null`` where an
array must hold an object). `reading` turns a `WireError`
(and the RecursionError of absurdly deep JSON) into a `MalformedResponseError`
naming the provider, the path and the raw body, so every adapter reports a
broken body the same way and the core never sees a list where an id belongs.

Strings come back encodable: a lone surrogate (``"\\ud800"`` in the JSON) is
replaced by U+FFFD, so it cannot break the encoding of every later request.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from toolfold._errors import MalformedResponseError, ToolfoldError, reduce_error
from toolfold.adapters._http._json import decode_cut, sendable
from toolfold.runtime.core._json_text import LONE_SURROGATE
from toolfold.runtime.core._messages import freeze
from toolfold.runtime.core._stream import ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from toolfold.toolkit._problems import json_kind

#: Deeper nesting than this in a value toolfold keeps (extra provider fields)
#: is refused: no answer needs it, and deep values break recursion later.
MAX_DEPTH = 64


kind = json_kind
"""The JSON name of a decoded value's type (``object``, ``array``, ``string``...)."""


class WireError(ValueError):
    """A field of a provider's JSON has the wrong type or value.

    Attributes:
        path: The JSON path of the field.
        problem: What is wrong with it.
    """

    __reduce__ = reduce_error  # (its __init__ takes fields, not the message)

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{problem} @ {path}")


def path(at: str, key: str | int) -> str:
    """The path of ``key`` under ``at``: ``$.a`` + ``b`` -> ``$.a.b``, + ``0`` -> ``$.a[0]``."""
    return f"{at}[{key}]" if isinstance(key, int) else f"{at}.{key}"


def _get(parent: Any, key: str | int) -> Any:
    # Field names far outnumber indexes; the getters inline this line (hot path).
    return parent.get(key) if type(key) is str else parent[key]


def _wrong(parent: Any, key: str | int, at: str, expected: str, value: Any) -> WireError:
    return WireError(path(at, key), f"expected {expected}, got {kind(value)}")


def root(value: Any) -> Mapping[str, Any]:
    """A whole body, which must be a JSON object."""
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise WireError("$", f"expected an object, got {kind(value)}")


def mapping(parent: Any, key: str | int, at: str) -> Mapping[str, Any]:
    """An object field; absent or ``null`` reads as ``{}`` (an array item must be an object)."""
    value = parent.get(key) if type(key) is str else parent[key]
    if type(value) is dict or isinstance(value, Mapping):
        return value
    if value is None and type(key) is str:
        return _EMPTY
    raise _wrong(parent, key, at, "an object", value)


def array(parent: Any, key: str | int, at: str) -> Sequence[Any]:
    """An array field; absent or ``null`` reads as ``()``."""
    value = parent.get(key) if type(key) is str else parent[key]
    if type(value) is list:
        return value
    if value is None:
        return ()
    raise _wrong(parent, key, at, "an array", value)


def text(parent: Any, key: str | int, at: str) -> str | None:
    """A string field, made encodable; absent or ``null`` reads as None."""
    value = parent.get(key) if type(key) is str else parent[key]
    if type(value) is str:
        return value if value.isascii() else encodable(value)
    if value is None:
        return None
    raise _wrong(parent, key, at, "a string", value)


def integer(parent: Any, key: str | int, at: str) -> int | None:
    """An integer field (not a boolean, not a float); absent or ``null`` reads as None."""
    value = parent.get(key) if type(key) is str else parent[key]
    if type(value) is int:
        return value
    if value is None:
        return None
    raise _wrong(parent, key, at, "an integer", value)


def base64_bytes(parent: Any, key: str | int, at: str) -> bytes | None:
    """A base64 string field decoded (media a model made); absent or ``null`` reads as None."""
    found = text(parent, key, at)
    if found is None:
        return None
    try:
        return base64.b64decode(found, validate=True)
    except (binascii.Error, ValueError):
        raise WireError(path(at, key), "expected base64 data") from None


def count(parent: Any, key: str | int, at: str) -> int:
    """A token count: a non-negative integer; absent or ``null`` reads as 0.

    A float with no fraction (``12.0``, sent by a few servers) reads as the integer.
    """
    value = parent.get(key) if type(key) is str else parent[key]
    if type(value) is int and value >= 0:
        return value
    if value is None:
        return 0
    if type(value) is float and value.is_integer() and value >= 0:
        return int(value)
    raise _wrong(parent, key, at, "a non-negative integer", value)


def value(parent: Any, key: str | int, at: str) -> Any:
    """Any JSON value to keep as is (an opaque provider field), checked to be safe.

    Finite numbers only, nesting up to `MAX_DEPTH`, strings made encodable.
    """
    found = _get(parent, key)
    return _checked(found, path(at, key), 0)


def _checked(found: Any, at: str, depth: int) -> Any:
    if type(found) is str:
        return encodable(found)
    if type(found) is float and not math.isfinite(found):
        raise WireError(at, f"expected a finite number, got {found}")
    if isinstance(found, Mapping):
        _deeper(at, depth)
        return {
            encodable(str(k)): _checked(v, path(at, str(k)), depth + 1) for k, v in found.items()
        }
    if isinstance(found, list):
        _deeper(at, depth)
        return [_checked(v, path(at, i), depth + 1) for i, v in enumerate(found)]
    return found


def call_arguments(found: Mapping[str, Any], at: str) -> tuple[str, Mapping[str, Any] | None]:
    """A tool call's arguments sent as an object: ``(text, value)``.

    When the model nested the object deeper than `MAX_DEPTH`, the value is
    None and the text shows it, so the model reads an argument error and can
    correct itself, as when argument text cannot be parsed; the rest of the
    answer stands. (That text is ASCII, so a lone surrogate in it cannot break
    a later request's encoding.) A number that is not finite cannot come from
    JSON: it is a malformed body.

    Raises:
        WireError: A number in the object is not finite.
    """
    try:
        value = _checked(found, at, 0)
    except _TooDeep:
        try:
            text = json.dumps(found, allow_nan=True)
        except (RecursionError, ValueError):  # deeper than the encoder goes
            text = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
        return text, None
    # Frozen here: checked as `frozen_json` would (text keys, depth, finite numbers), so
    # the call keeps it without a second walk.
    return json.dumps(value, ensure_ascii=False), freeze(value)


class _TooDeep(WireError):
    """A value nested deeper than `MAX_DEPTH`."""


def _deeper(at: str, depth: int) -> None:
    if depth >= MAX_DEPTH:
        raise _TooDeep(at, f"nested more than {MAX_DEPTH} levels deep")


def encodable(s: str) -> str:
    """``s`` with lone surrogates (which UTF-8 cannot encode) replaced by U+FFFD."""
    if s.isascii():
        return s
    return LONE_SURROGATE.sub("\ufffd", s)


#: A part of a streamed answer that holds what its pieces end with (`hold`): ``"text"``,
#: ``"reasoning"`` or a call's index (its arguments).
HeldKey = str | int

#: What a stream decoder's ``held`` starts as: no part holds half a character.
NOTHING_HELD: Mapping[HeldKey, str] = MappingProxyType({})

#: The parts whose pieces the answer places in the order they come (a call's arguments
#: go to the call by its index, wherever they come): what one holds goes out before
#: anything else of the answer does, or it would land after it, a part of its own.
IN_ORDER = ("text", "reasoning")

#: What a high surrogate a part still holds when it ends goes out as (see `held_piece`).
HELD_ALONE = "\ufffd"


def held_piece(held: str, piece: str) -> tuple[str, str]:
    """A streamed piece of a part's text made encodable, and what it holds back.

    A server that cuts text into pieces by UTF-16 length (a Node proxy) can split a
    character past U+FFFF between two pieces, each half an escape (``"\\ud83d"``, then
    ``"\\ude00b"``): read alone, each half is a lone surrogate, U+FFFD. So a high
    surrogate a piece ends with is held back (returned, to be passed as ``held`` with the
    next piece of the same part): a low surrogate there completes the character,
    anything else leaves it lone, U+FFFD. When the part ends, what it still holds goes
    out as `HELD_ALONE`. A decoder calls this only when it holds something or the piece
    is not ASCII (an ASCII piece ends with no surrogate), so plain text pays nothing.

    Returns:
        The text to show (possibly empty), and what the part holds now: ``""`` or a
        high surrogate.
    """
    text = held + piece if held else piece
    last = text[-1:]
    if "\ud800" <= last <= "\udbff":
        text, last = text[:-1], last
    else:
        last = ""
    if held:  # (a pair held as two characters is joined into the one it stands for)
        return sendable(text), last
    return encodable(text), last


def hold(
    held: Mapping[HeldKey, str], part: HeldKey, piece: str, events: list[StreamEvent], provider: str
) -> tuple[Mapping[HeldKey, str], str]:
    """`held_piece` for a stream decoder that keeps what each part holds by part.

    A piece of another part ends the text or the reasoning that holds a half (`IN_ORDER`):
    its `HELD_ALONE` goes into ``events`` first (`let_go`).

    Returns:
        What ``held`` is now (``held`` itself when it did not change, the common case),
        and the text to show of ``piece``.
    """
    if held and any(key != part and key in IN_ORDER for key in held):
        held = let_go(held, events, provider, [key for key in IN_ORDER if key != part])
    before = held.get(part, "")
    text, now = held_piece(before, piece)
    if now == before:
        return held, text
    kept = {key: value for key, value in held.items() if key != part}
    if now:
        kept[part] = now
    return kept, text


def let_go(
    held: Mapping[HeldKey, str],
    events: list[StreamEvent],
    provider: str,
    parts: Sequence[HeldKey] | None = None,
) -> Mapping[HeldKey, str]:
    """``parts`` (every part when None) end: the half each held goes out alone (a
    `HELD_ALONE` piece of it, into ``events``). Returns what the other parts still hold
    (``held`` itself when none of ``parts`` held anything)."""
    ending = [key for key in held if parts is None or key in parts]
    if not ending:
        return held
    events.extend(held_alone(key, provider) for key in ending)
    return {key: value for key, value in held.items() if key not in ending} or NOTHING_HELD


def held_alone(part: HeldKey, provider: str) -> StreamEvent:
    """The piece a part that still holds a high surrogate as it ends goes out with
    (`HELD_ALONE`): ``part`` is ``"text"``, ``"reasoning"`` or a call's index."""
    if part == "text":
        return TextDelta(HELD_ALONE)
    if part == "reasoning":
        return ReasoningDelta(HELD_ALONE, provider=provider)
    return ToolCallDelta(int(part), HELD_ALONE)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def loads(data: str | bytes) -> Any:
    """Strict JSON: NaN and Infinity refused, too-deep nesting a ValueError too.

    Raises:
        ValueError: Not JSON, a non-finite number, or nesting deeper than the
            interpreter can decode.
    """
    return decode_cut(_DECODER.decode, data if isinstance(data, str) else data.decode("utf-8"))


def dumps_raw(body: Any) -> str:
    """A decoded body as text again, for an error's ``body`` (never raises)."""
    try:
        return json.dumps(body, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return "<a body nested too deep to print>"


#: What reading an answer with the getters raises: a wrong field, or absurd nesting.
READ_ERRORS = (WireError, RecursionError)

#: What any codec raises when an answer is not what it expects (see `guarded`).
CODEC_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError)


def malformed(
    provider: str, error: BaseException, body: str, status_code: int | None = 200
) -> MalformedResponseError:
    """The `MalformedResponseError` for ``error`` met reading ``body`` from ``provider``.

    A `WireError` gives its path; anything else (a RecursionError, a codec's
    TypeError...) is reported at ``$`` with the exception's name.
    """
    if isinstance(error, WireError):
        at, problem = error.path, error.problem
    elif isinstance(error, RecursionError):
        at, problem = "$", "nested more than the interpreter can read"
    else:
        at, problem = "$", f"the codec could not read it ({type(error).__name__}: {error!s:.200})"
    return MalformedResponseError(
        f"{provider} sent a malformed response: {problem} @ {at}",
        provider=provider,
        status_code=status_code,
        body=body,
        path=at,
        problem=problem,
    )


@contextmanager
def reading(provider: str, body: Callable[[], str]) -> Iterator[None]:
    """Raise a `MalformedResponseError` for a `WireError` (or a RecursionError) inside.

    For a whole body (once per call). Per stream chunk, the same in a plain
    ``try``/``except READ_ERRORS`` costs nothing when nothing is wrong.

    Args:
        provider: The provider name, for the error.
        body: Gives the raw body text; called only when something is wrong.
    """
    try:
        yield
    except READ_ERRORS as exc:
        raise malformed(provider, exc, body()) from None


@contextmanager
def guarded(provider: str, body: Callable[[], str]) -> Iterator[None]:
    """Like `reading`, for a codec that reads without the getters: any crash is malformed.

    A TypeError, AttributeError, KeyError, IndexError, ValueError or
    RecursionError raised while reading a provider's answer means the answer
    is not what the codec expects: it becomes a `MalformedResponseError` at
    ``$`` naming the exception (chained, for debugging). A `ToolfoldError` the
    codec raises on purpose passes through. The getters give the field's path;
    this is the net under the codecs that do not use them.
    """
    try:
        yield
    except ToolfoldError:
        raise
    except CODEC_ERRORS as exc:
        raise malformed(provider, exc, body()) from (None if isinstance(exc, WireError) else exc)


_EMPTY: Mapping[str, Any] = MappingProxyType({})
