"""Provider-neutral messages and their parts: frozen values with tuples."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Union

import attrs

from toolfold._errors import UsageError
from toolfold.runtime.core._arguments import MAX_DEPTH, TOO_DEEP, parse_arguments
from toolfold.runtime.core._repr import excerpt, fields, short
from toolfold.toolkit._frozen import FrozenDict as FrozenDict
from toolfold.toolkit._frozen import FrozenList as FrozenList
from toolfold.toolkit._frozen import freeze as freeze
from toolfold.toolkit._frozen import frozen_dict as frozen_dict
from toolfold.toolkit._frozen import frozen_list as frozen_list
from toolfold.toolkit._frozen import new_frozen_dict, new_frozen_list
from toolfold.toolkit._frozen import thaw as thaw

Role = Literal["system", "user", "assistant", "tool"]


def as_item(value: Any) -> tuple[Any]:
    """The ``eq`` key of a field holding a JSON value bare (an output).

    attrs compares a field with ``==`` alone, and a NaN is not equal to itself,
    so a state whose output is NaN would not equal itself, nor its own replay
    or load. The key is the value in a tuple, which compares its items by
    identity first, as a dict or a list compares its values; a NaN (any: a
    model's answer, a numpy value) is keyed as `math.nan` itself, so it equals
    every NaN, as a load gives `math.nan` for each.
    """
    if isinstance(value, float) and value != value:  # (NaN)
        return _NAN_ITEM
    return (value,)


_NAN_ITEM = (math.nan,)


#: The most digits an int in a stored value may have: what Python converts to and
#: from text by default (``sys.int_info.default_max_str_digits``, a constant here: the
#: core reads no interpreter setting); a longer one could neither be written to a saved
#: state nor read back from one.
MAX_INT_DIGITS = 4300
_INT_BOUND: int = 10**MAX_INT_DIGITS
_NEG_BOUND: int = -_INT_BOUND

# Keys JSON writes as text (``1`` as ``"1"``): taken as that text.
_TEXT_KEYS = (int, float, type(None))


class NotJSONError(ValueError):
    """A value a saved state cannot hold (see `frozen_json`).

    Attributes:
        path: Where in the value, as subscripts (``['a'][0]``); "" for the value itself.
        problem: What is wrong there.
        refused: What was refused: ``"value"`` (no JSON kind) or ``"key"`` (no
            JSON object key), ``got`` being it; None for the others (a clash,
            a depth, a huge int).
        got: The value or key refused (``refused``), else None.
    """

    def __init__(
        self, problem: str, refused: Literal["value", "key"] | None = None, got: object = None
    ) -> None:
        super().__init__(problem)
        self.steps: list[str] = []  # innermost first, added on the way out
        self.problem = problem
        self.refused = refused
        self.got = got

    @property
    def path(self) -> str:
        path = "".join(reversed(self.steps))
        return path if len(path) <= _PATH_SHOWN else f"{path[: _PATH_SHOWN - 3]}..."

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}" if self.steps else self.problem


_PATH_SHOWN = 80
_TOO_DEEP = TOO_DEEP  # (the argument text's own words: one limit, one message)


def frozen_json(value: Any) -> Any:
    """``value`` (JSON data: a tool call's arguments, an output) frozen as `freeze`
    does, checked to come back equal from a saved state's JSON.

    A key JSON writes as text (an int, a float, a bool, None) is that text from
    the start (``{1: "a"}`` is ``{"1": "a"}``), as the state would load it.
    Flat objects of text, numbers, booleans and None (the usual arguments) are
    checked in one pass without recursion.

    Raises:
        NotJSONError: A value is no JSON (a set, bytes, an object...), a key is
            not one JSON writes (a tuple), two keys would be written as the
            same text, an int has more than `MAX_INT_DIGITS` digits, or the
            value nests more than `MAX_DEPTH` levels deep (what argument text
            may nest); its ``path`` names where.
    """
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is str:
                kind = type(item)
                if kind is str or kind is float or kind is bool or item is None:
                    continue
                if kind is int and _NEG_BOUND < item < _INT_BOUND:
                    continue
            return _checked(value, 0)
        return new_frozen_dict(FrozenDict, value)
    return _checked(value, 0)


#: How deep a workflow's own output (its planner's, from its steps' values) may
#: nest: not a model's text, so not held to `MAX_DEPTH`, but a state holding it
#: must still save and load (JSON's and Python's recursion bound that well above).
OUTPUT_MAX_DEPTH = 400


#: How deep a run's setting may nest: the user's own data too, and a state holding
#: one nested this deep saves, loads and resumes (as states saved before the depth
#: was checked did; a few levels more, and Python's recursion failed them).
SETTING_MAX_DEPTH = 300


def frozen_output(value: Any, levels: int = OUTPUT_MAX_DEPTH) -> Any:
    """The user's own data (a workflow's output, a run's setting) frozen and
    checked as `frozen_json` does, but allowed to nest ``levels`` levels (as
    a state saved before the depth was checked holds it).

    Raises:
        NotJSONError: As `frozen_json`'s, the depth being ``levels``.
    """
    try:
        return _checked(value, MAX_DEPTH - levels)  # (the same walk, started lower)
    except NotJSONError as error:
        if error.problem == _TOO_DEEP:
            error.problem = f"nested more than {levels} levels deep"
        raise


def _checked(value: Any, depth: int) -> Any:
    # Recursion bounded by `MAX_DEPTH`; each level adds its step to the path on the way
    # out. Items that are text, floats, booleans, None or ints in bounds (most) are
    # taken in the loops, without a call.
    if depth > MAX_DEPTH:
        raise NotJSONError(_TOO_DEEP)
    kind = type(value)
    if kind is dict or kind is FrozenDict:
        return _checked_object(value, depth)
    if kind is list or kind is FrozenList:
        return _checked_array(value, depth)
    if isinstance(value, (str, float, bool)) or value is None:
        return value
    if isinstance(value, int):
        if _NEG_BOUND < value < _INT_BOUND:
            return value
        raise NotJSONError(
            f"an int of more than {MAX_INT_DIGITS:,} digits, which Python does not read "
            "back from JSON text by default (give it as a str)"
        )
    if isinstance(value, Mapping):
        return _checked_object(value, depth)
    if isinstance(value, (list, tuple)):
        return _checked_array(value, depth)
    raise NotJSONError(
        f"{type(value).__name__} {short(value)} is no JSON value (text, a number, a boolean, "
        "None, a dict with text keys or a list), which a saved state could not hold",
        "value",
        value,
    )


def _checked_object(value: Mapping[Any, Any], depth: int) -> FrozenDict:
    if depth >= MAX_DEPTH and value:  # (its items would be deeper)
        raise NotJSONError(_TOO_DEEP)
    items: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str:
            key = _key_text(key)
        kind = type(item)
        if (kind is str or kind is float or kind is bool or item is None) or (
            kind is int and _NEG_BOUND < item < _INT_BOUND
        ):
            items[key] = item
        else:
            try:
                items[key] = _checked(item, depth + 1)
            except NotJSONError as error:
                error.steps.append(f"[{key!r}]")
                raise
    if len(items) != len(value):
        _refuse_clash(value)
    return new_frozen_dict(FrozenDict, items)


def _checked_array(value: list[Any] | tuple[Any, ...], depth: int) -> FrozenList:
    if depth >= MAX_DEPTH and value:  # (its items would be deeper)
        raise NotJSONError(_TOO_DEEP)
    frozen = []
    for index, item in enumerate(value):
        kind = type(item)
        if (kind is str or kind is float or kind is bool or item is None) or (
            kind is int and _NEG_BOUND < item < _INT_BOUND
        ):
            frozen.append(item)
        else:
            try:
                frozen.append(_checked(item, depth + 1))
            except NotJSONError as error:
                error.steps.append(f"[{index}]")
                raise
    return new_frozen_list(FrozenList, frozen)


def _refuse_clash(value: Mapping[Any, Any]) -> NoReturn:
    """Name two keys of ``value`` that JSON writes as the same text."""
    given: dict[str, Any] = {}
    for key in value:
        text = _key_text(key)
        if text in given:
            raise NotJSONError(
                f"the keys {given[text]!r} and {key!r} are both written {text!r} in JSON, "
                "so one would be lost when the state is saved"
            )
        given[text] = key
    raise AssertionError("no two keys clash")  # pragma: no cover - the caller found a clash


def _too_long(value: object) -> bool:
    """Whether ``value`` is an int of more than `MAX_INT_DIGITS` digits, which Python
    neither writes nor reads as JSON text by default (a bool is no such int)."""
    return isinstance(value, int) and not _NEG_BOUND < value < _INT_BOUND


def _key_text(key: Any) -> str:
    """The text JSON writes for the object key ``key``."""
    if type(key) is str:
        return key
    if isinstance(key, str):
        return str.__str__(key)  # (a str subclass, e.g. an enum: the text JSON writes)
    if isinstance(key, _TEXT_KEYS) and not _too_long(key):
        text: str = json.dumps(key)
        return text
    if isinstance(key, int) and not isinstance(key, bool):  # (its repr would raise)
        raise NotJSONError(
            f"an int key of over {MAX_INT_DIGITS:,} digits, which Python does not write "
            "as JSON text by default (give it as a str)"
        )
    raise NotJSONError(
        f"the key {type(key).__name__} {short(key)} is no JSON object key "
        "(text, or a number, boolean or None that JSON writes as text)",
        "key",
        key,
    )


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if value is None:
        return EMPTY_MAPPING
    if type(value) is FrozenDict:
        return value
    given: object = value  # (typed a mapping; callers' values come unchecked)
    if type(given) is not dict and not isinstance(given, Mapping):
        kept: Mapping[str, Any] = freeze(given)  # (no mapping: frozen as it always was)
        return kept
    try:
        frozen: Mapping[str, Any] = frozen_json(value)
    except NotJSONError as error:
        raise UsageError(
            f"provider_data{error.path}: {error.problem}; provider fields go back to the "
            "provider as JSON"
        ) from None
    return frozen


def _frozen_arguments(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if value is None or type(value) is FrozenDict:
        return value
    if type(value) is not dict and not isinstance(value, Mapping):
        # A tool takes an object of arguments; anything else could not be stored
        # (the JSON form of a state keeps arguments as an object).
        raise UsageError(
            "ToolCallPart.arguments must be the decoded JSON object (a mapping) or None "
            f"(the text is not an object), got {type(value).__name__} {short(value)}; "
            "leave it out to decode arguments_text: a call whose text is not an object "
            "gets an argument error the model reads"
        )
    try:
        frozen: Mapping[str, Any] = frozen_json(value)
    except NotJSONError as error:
        raise UsageError(
            f"ToolCallPart.arguments{error.path}: {error.problem}; arguments are a JSON "
            "object, as a model writes them"
        ) from None
    return frozen


def decoded_arguments(text: str) -> Mapping[str, Any] | None:
    """The arguments a call's text holds, read-only; None when it is not a JSON object.

    Decoded JSON is what `frozen_json` checks for (text keys, depth as
    `MAX_DEPTH`; a NaN, which a saved state keeps, is taken), so it is only frozen: a codec that gives a call these
    costs it no second walk.
    """
    frozen: Mapping[str, Any] | None = freeze(parse_arguments(text))
    return frozen


EMPTY_MAPPING: FrozenDict = frozen_dict()
"""The empty read-only mapping, shared (a default of ``provider_data`` and settings)."""


@attrs.frozen
class TextPart:
    """Plain text.

    Attributes:
        text: The text.
    """

    text: str
    kind: Literal["text"] = "text"

    def __repr__(self) -> str:
        return fields(type(self).__name__, [("text", excerpt(self.text))])


@attrs.frozen
class ToolCallPart:
    """A model's request to call a tool.

    Attributes:
        id: The call id (the provider's, or one toolfold made when it sent none).
        name: The tool name the model asked for.
        arguments_text: The arguments exactly as the model wrote them (JSON text).
        arguments: The decoded arguments, or None when the text is not a JSON
            object; decoded from ``arguments_text`` when not given. Read-only (a `FrozenDict`, nested arrays `FrozenList`):
            a stored call never changes; tools get a copy of their own.
            Anything but a mapping or None raises `UsageError` (a tool takes
            an object of arguments; give the text alone when it may be another value),
            and so does a mapping a saved state could not give back equal
            (`frozen_json`: no JSON value or key, nested deeper than 64 levels,
            an int of over 4,300 digits); an int, float, bool or None key is
            held as the text JSON writes for it.
        provider_data: Opaque provider fields that must go back unchanged
            (e.g. a Responses item id or a Gemini thought signature); read-only,
            checked as ``arguments`` are.
    """

    id: str
    name: str
    arguments_text: str = "{}"
    arguments: Mapping[str, Any] | None = attrs.field(
        default=attrs.Factory(lambda self: decoded_arguments(self.arguments_text), takes_self=True),
        converter=_frozen_arguments,
    )
    provider_data: Mapping[str, Any] = attrs.field(default=EMPTY_MAPPING, converter=_frozen_mapping)
    kind: Literal["tool_call"] = "tool_call"

    def __repr__(self) -> str:
        return fields(
            type(self).__name__,
            [
                ("id", repr(self.id)),
                ("name", repr(self.name)),
                ("arguments", excerpt(self.arguments_text)),
            ],
        )


def _as_bytes(
    data: bytes | bytearray | memoryview | None,
) -> bytes | None:
    """A part's inline data as bytes: a bytearray or memoryview copied (a state keeps
    bytes, which every codec encodes, pickles and compares; a view over a buffer need
    not be contiguous, nor of bytes). Anything else is left for the checks to name."""
    return bytes(data) if isinstance(data, (bytearray, memoryview)) else data


@attrs.frozen
class ImagePart:
    """An image, inline or by URL.

    Attributes:
        data: The image bytes, or None when given by URL.
        url: The image URL, or None when given inline.
        media_type: The MIME type, e.g. ``image/png``.
    """

    data: bytes | None = attrs.field(default=None, converter=_as_bytes)
    url: str | None = None
    media_type: str = "image/png"
    kind: Literal["image"] = "image"

    def __repr__(self) -> str:
        return fields(type(self).__name__, _media(self.data, self.url, self.media_type))


@attrs.frozen
class FilePart:
    """A file (document, audio...), inline or by URL.

    Attributes:
        data: The file bytes, or None when given by URL.
        url: The file URL, or None when given inline.
        media_type: The MIME type, e.g. ``application/pdf``.
        filename: An optional file name for providers that want one.
    """

    data: bytes | None = attrs.field(default=None, converter=_as_bytes)
    url: str | None = None
    media_type: str = "application/octet-stream"
    filename: str | None = None
    kind: Literal["file"] = "file"

    def __repr__(self) -> str:
        name = None if self.filename is None else repr(self.filename)
        pairs = [*_media(self.data, self.url, self.media_type), ("filename", name)]
        return fields(type(self).__name__, pairs)


@attrs.frozen
class ReasoningPart:
    """A model's reasoning ("thinking") text.

    Attributes:
        text: The reasoning text (may be empty when the provider hides it).
        signature: An opaque provider signature that must be sent back unchanged.
        provider: The provider that produced it; a signature only means
            something to that provider.
        provider_data: Opaque provider fields that must go back unchanged
            (e.g. ``{"type": "redacted_thinking"}`` for an Anthropic block whose
            text is hidden and whose ``signature`` holds the encrypted data); read-only.
    """

    text: str = ""
    signature: str | None = None
    provider: str | None = None
    provider_data: Mapping[str, Any] = attrs.field(default=EMPTY_MAPPING, converter=_frozen_mapping)
    kind: Literal["reasoning"] = "reasoning"

    def __repr__(self) -> str:
        signature = None if self.signature is None else f"<{len(self.signature):,} chars>"
        provider = None if self.provider is None else repr(self.provider)
        pairs = [("text", excerpt(self.text)), ("signature", signature), ("provider", provider)]
        return fields(type(self).__name__, pairs)


ResultContent = Union[TextPart, ImagePart, FilePart]  # noqa: UP007
"""What a tool result may hold beside text: see `ToolResultPart.parts`."""


def content_tuple(items: Iterable[ResultContent]) -> tuple[ResultContent, ...]:
    """A result's parts as a tuple (the converter of the ``parts`` fields)."""
    return tuple(items)


@attrs.frozen
class ToolResultPart:
    """The result of one tool call, as the model will see it.

    Attributes:
        call_id: The id of the call this answers.
        tool_name: The tool that was called.
        content: The result as text: all of it for a text result; for a
            result with images or files, its text with each of those
            described (``[image: image/png, 1,024 bytes]``), for readers that
            show text only.
        is_error: True when the call failed, was invalid or was denied.
        parts: The result's content in order when it holds more than text
            (`TextPart`, `ImagePart`, `FilePart`); empty for a text result.
            Each provider adapter sends these in its own format, or says in
            its docs what it does instead.
    """

    call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    parts: tuple[ResultContent, ...] = attrs.field(default=(), converter=content_tuple)
    kind: Literal["tool_result"] = "tool_result"

    def __repr__(self) -> str:
        shown = None if not self.parts else f"<{len(self.parts)} parts>"
        return fields(
            type(self).__name__,
            [
                ("call_id", repr(self.call_id)),
                ("tool_name", repr(self.tool_name)),
                ("content", excerpt(self.content)),
                ("is_error", "True" if self.is_error else None),
                ("parts", shown),
            ],
        )


def _media(data: bytes | None, url: str | None, media_type: str) -> list[tuple[str, Any]]:
    shown_data = None if data is None else f"<{len(data):,} bytes>"
    shown_url = None if url is None else excerpt(url)
    return [("media_type", repr(media_type)), ("data", shown_data), ("url", shown_url)]


Part = Union[TextPart, ToolCallPart, ToolResultPart, ImagePart, FilePart, ReasoningPart]  # noqa: UP007

PART_TYPES = frozenset({TextPart, ToolCallPart, ToolResultPart, ImagePart, FilePart, ReasoningPart})
"""The classes a message's parts are of."""

_PART_CLASSES = tuple(PART_TYPES)


def part_problem(part: object) -> str:
    """What makes ``part`` unfit for a message's parts ("" if nothing).

    A part must be of a part class (the JSON form of a state stores each by its
    ``kind``), its text fields text (or None where they may be), a tool call's
    decoded arguments an object or None, and a result's parts text, images
    or files that are fit themselves.
    """
    if not isinstance(part, _PART_CLASSES):
        advice = ": wrap text in TextPart(...)" if isinstance(part, str) else ""
        return (
            "expected a part (TextPart, ImagePart, FilePart, ReasoningPart, ToolCallPart, "
            f"ToolResultPart), got {type(part).__name__} {_shown(part)}{advice}"
        )
    return _field_problem(part)


# The fields of each part class that hold text, each with whether it may be None.
_TEXT_FIELDS: dict[type[Any], tuple[tuple[str, bool], ...]] = {
    TextPart: (("text", False),),
    ReasoningPart: (("text", False), ("signature", True), ("provider", True)),
    ToolCallPart: (("id", False), ("name", False), ("arguments_text", False)),
    ToolResultPart: (("call_id", False), ("tool_name", False), ("content", False)),
    ImagePart: (("url", True), ("media_type", False)),
    FilePart: (("url", True), ("media_type", False), ("filename", True)),
}

_CONTENT_CLASSES = (TextPart, ImagePart, FilePart)


def _field_problem(part: object) -> str:
    """What makes a field of ``part`` (of a part class) unfit ("" if nothing)."""
    name = type(part).__name__
    base = next(cls for cls in _TEXT_FIELDS if isinstance(part, cls))
    for field, optional in _TEXT_FIELDS[base]:
        value = getattr(part, field)
        if not isinstance(value, str) and not (optional and value is None):
            expected = "a str or None" if optional else "a str"
            return (
                f"{name}.{field}: expected {expected}, got {type(value).__name__} {_shown(value)}"
            )
    if isinstance(part, (ImagePart, FilePart)):
        data: object = part.data  # (typed bytes; callers' values come unchecked)
        if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
            advice = (
                " (for base64 text give base64.b64decode(text))" if isinstance(data, str) else ""
            )
            return (
                f"{name}.data: expected bytes or None, got {type(data).__name__} "
                f"{_shown(data)}{advice}"
            )
    elif isinstance(part, ToolCallPart):
        arguments: object = part.arguments  # (typed a mapping; a part made around its check)
        if arguments is not None and not isinstance(arguments, Mapping):
            return (
                f"tool call {part.id!r} ({part.name}) has arguments that are not an object "
                f"(a {type(arguments).__name__})"
            )
        if arguments is not None and type(arguments) is not FrozenDict:
            try:  # (the part's converter checks them: a part made around it)
                frozen_json(arguments)
            except NotJSONError as error:
                return (
                    f"tool call {part.id!r} ({part.name}): arguments{error.path}: {error.problem}"
                )
    elif isinstance(part, ToolResultPart):
        is_error: object = part.is_error
        if not isinstance(is_error, bool):
            return f"{name}.is_error: expected True or False, got {_shown(is_error)}"
        contents: tuple[object, ...] = part.parts  # (typed as content; made around its check)
        for index, content in enumerate(contents):
            if not isinstance(content, _CONTENT_CLASSES):
                return (
                    f"{name}.parts[{index}]: expected a TextPart, ImagePart or FilePart, "
                    f"got {type(content).__name__} {_shown(content)}"
                )
            problem = _field_problem(content)
            if problem:
                return f"{name}.parts[{index}]: {problem}"
    return ""


_STR_OR_NONE = frozenset({str, type(None)})
_BYTES_OR_NONE = frozenset({bytes, type(None)})
# What a stored call's decoded arguments are (`ToolCallPart` freezes a mapping).
_ARGUMENT_TYPES = frozenset({FrozenDict, type(None)})


def parts_fit(parts: tuple[Any, ...]) -> bool:
    """Whether every one of ``parts`` is surely fit: a scan of the exact types only.

    The usual case (parts made by their classes from text) is answered here
    with no function call a part; False only means `part_problem` must look
    (a subclass of str, say, is fit but not scanned as such).
    """
    for part in parts:
        kind = type(part)
        if kind is TextPart:
            if type(part.text) is not str:
                return False
        elif kind is ToolCallPart:
            if (
                type(part.id) is not str
                or type(part.name) is not str
                or type(part.arguments_text) is not str
                or type(part.arguments) not in _ARGUMENT_TYPES
            ):
                return False
        elif kind is ToolResultPart:
            if (
                type(part.call_id) is not str
                or type(part.tool_name) is not str
                or type(part.content) is not str
                or type(part.is_error) is not bool
                or (part.parts and not _content_fit(part.parts))
            ):
                return False
        elif kind is ReasoningPart:
            if (
                type(part.text) is not str
                or type(part.signature) not in _STR_OR_NONE
                or type(part.provider) not in _STR_OR_NONE
            ):
                return False
        elif kind is ImagePart or kind is FilePart:
            if not _media_fit(part):
                return False
        else:
            return False
    return True


def _content_fit(parts: tuple[Any, ...]) -> bool:
    for part in parts:
        kind = type(part)
        if kind is TextPart:
            if type(part.text) is not str:
                return False
        elif kind is ImagePart or kind is FilePart:
            if not _media_fit(part):
                return False
        else:
            return False
    return True


def _media_fit(part: Any) -> bool:
    return (
        type(part.media_type) is str
        and type(part.url) in _STR_OR_NONE
        and type(part.data) in _BYTES_OR_NONE
        and type(getattr(part, "filename", None)) in _STR_OR_NONE
    )


def _shown(value: object) -> str:
    """``value``'s short repr, or its type's name when its repr fails."""
    try:
        return short(value)
    except Exception:
        return f"(a {type(value).__name__} whose repr fails)"


def wrong_argument(
    function: str, argument: str, expected: str, value: object, hint: str = ""
) -> UsageError:
    """The error for ``function`` given ``value`` as ``argument``, which must be ``expected``.

    Reads ``f(): <argument> must be <expected>, got <type> <repr><hint>``;
    ``hint`` (with its leading space) says what to pass instead when the
    wrong value has an obvious right one.
    """
    return UsageError(
        f"{function}(): {argument} must be {expected}, got {type(value).__name__} "
        f"{_shown(value)}{hint}"
    )


def held(value: object, name: str) -> object:
    """``value``'s attribute ``name``, for a wrong argument's hint (`wrong_argument`); None
    when it has none.

    The probe runs the value's own code (a property, ``__getattr__``), so any
    failure of it only means no hint.
    """
    try:
        return getattr(value, name, None)
    except Exception:
        return None


# A repr shows this many parts of a message, then a count of the rest.
_PARTS_SHOWN = 4


def _to_parts(parts: Iterable[Part], message: Any) -> tuple[Part, ...]:
    """``Message.parts`` as a tuple, checked; ``message.role`` (set before) is checked here
    too, so that making a message costs one converter call (see `parts_fit`)."""
    role: object = message.role  # (typed as a role; callers' values come unchecked)
    if type(role) is not str or role not in _ROLES:
        _check_role(role)
    given: object = parts  # (typed as parts; callers' values come unchecked)
    if type(given) is not tuple:
        if isinstance(given, str):
            raise UsageError(
                f"Message.parts must be a list of parts, got the str {excerpt(given)}: for "
                "text write Message.user(text) (or .system / .assistant), or "
                "Message(role, [TextPart(text)])"
            )
        if isinstance(given, (Mapping, bytes, bytearray, memoryview)):
            # (iterating one would give its keys or its byte values as parts)
            raise UsageError(
                f"Message.parts must be a list of parts, got a {type(given).__name__}: "
                "wrap it in a part (TextPart, ImagePart, FilePart...) inside a list"
            )
        try:
            given = tuple(parts)
        except TypeError:
            raise UsageError(
                f"Message.parts must be a list of parts, got {type(given).__name__}"
            ) from None
    made: tuple[Any, ...] = given  # checked below
    # A scan of the exact types only (the usual case): `parts_fit` inlined for the
    # common parts; any other (or a field to look at) goes to it, then to the
    # check that names the index and the field.
    for part in made:
        kind = type(part)
        if kind is TextPart:
            if type(part.text) is str:
                continue
        elif kind is ToolCallPart:
            if (
                type(part.id) is str
                and type(part.name) is str
                and type(part.arguments_text) is str
                and type(part.arguments) in _ARGUMENT_TYPES
            ):
                continue
        elif (
            kind is ToolResultPart
            and not part.parts
            and (
                type(part.call_id) is str
                and type(part.tool_name) is str
                and type(part.content) is str
                and type(part.is_error) is bool
            )
        ):
            continue
        if not parts_fit(made):
            _check_parts(made)
        break
    return made


_ROLES = frozenset({"system", "user", "assistant", "tool"})


def _check_role(role: object) -> None:
    """Refuse a role that is none of the four (a str subclass, a StrEnum, of one is fine)."""
    if not isinstance(role, str) or role not in _ROLES:
        raise UsageError(
            "Message.role: expected one of 'system', 'user', 'assistant', 'tool', "
            f"got {type(role).__name__} {_shown(role)}"
        )


if TYPE_CHECKING:  # (attrs' mypy plugin reads a named function as the converter only)

    def _parts_converter(parts: Iterable[Part]) -> tuple[Part, ...]: ...

else:
    _parts_converter = attrs.Converter(_to_parts, takes_self=True)


def _check_parts(parts: tuple[object, ...]) -> None:
    for index, part in enumerate(parts):
        problem = part_problem(part)
        if problem:
            raise UsageError(f"Message.parts[{index}]: {problem}")


@attrs.frozen
class Message:
    """One message of a conversation.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        parts: The content, in order: a list or tuple of parts (`TextPart`,
            `ImagePart`, `FilePart`, `ReasoningPart`, `ToolCallPart`,
            `ToolResultPart`). For text alone use `Message.user` (or
            ``system`` / ``assistant``).

    Raises:
        UsageError: ``role`` is not one of the four, ``parts`` is a str, or
            holds something that is not a part or a part with a field of
            the wrong type (``TextPart(42)``: text must be a str), naming
            the part's index and the field.
    """

    role: Role
    # (its converter checks ``role`` too: one call a message)
    parts: tuple[Part, ...] = attrs.field(converter=_parts_converter)
    # Not part of the value (no init, eq, hash, repr, or serialized form): a
    # codec's memo of this message's encoding as ``(key, encoded)``. A message
    # never changes, so a tool loop that resends the whole conversation on
    # every request encodes each message once (see `wire_memo`).
    _wire: Any = attrs.field(default=None, init=False, eq=False, hash=False, repr=False)
    # Not part of the value either: None until `inline_media` looks, then
    # whether a part holds an image or file it changes or refuses (a ``data:``
    # URL, a media type not in lower case, empty data...: a message never
    # changes, so a tool loop looks at each message's parts once).
    _needs_inline: bool | None = attrs.field(
        default=None, init=False, eq=False, hash=False, repr=False
    )

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled and copied without the memo (its key is a codec's object).
        return (Message, (self.role, self.parts))

    def __repr__(self) -> str:
        shown = [repr(part) for part in self.parts[:_PARTS_SHOWN]]
        if len(self.parts) > _PARTS_SHOWN:
            shown.append(f"... {len(self.parts) - _PARTS_SHOWN} more")
        parts = f"[{', '.join(shown)}]"
        return fields(type(self).__name__, [("role", repr(self.role)), ("parts", parts)])

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message (instructions)."""
        return cls("system", (TextPart(text),))

    @classmethod
    def user(cls, *content: str | Part) -> Message:
        """A user message from text and/or parts (images, files)."""
        if cls is Message and len(content) == 1 and type(content[0]) is str:
            # A prompt (every run starts with one): built without the converter's copy.
            return _build_message("user", (_build_text(content[0]),))
        return cls("user", tuple(_as_part(c) for c in content))

    @classmethod
    def assistant(cls, text: str = "", tool_calls: Iterable[ToolCallPart] = ()) -> Message:
        """An assistant message with text and/or tool calls.

        Raises:
            UsageError: ``tool_calls`` holds something else than `ToolCallPart`s.
        """
        parts: list[Part] = [TextPart(text)] if text else []
        parts.extend(tool_calls)
        for part in parts[1 if text else 0 :]:
            if type(part) is not ToolCallPart and not isinstance(part, ToolCallPart):
                raise UsageError(
                    "Message.assistant(tool_calls=...) takes ToolCallParts, "
                    f"got {type(part).__name__}"
                )
        return cls("assistant", tuple(parts))

    @classmethod
    def tool(cls, *results: ToolResultPart) -> Message:
        """A message carrying tool results, one argument each: ``Message.tool(*results)``.

        Raises:
            UsageError: An argument is not a `ToolResultPart` (a list of them
                is passed as ``Message.tool(*results)``).
        """
        given: tuple[object, ...] = results  # (typed as results; callers' values come unchecked)
        for index, result in enumerate(given):
            if not isinstance(result, ToolResultPart):
                hint = (
                    ": pass a list of results as Message.tool(*results)"
                    if isinstance(result, (list, tuple))
                    else ""
                )
                raise UsageError(
                    f"Message.tool() takes ToolResultParts, one argument each; argument "
                    f"{index} is a {type(result).__name__}{hint}"
                )
        return cls("tool", results)

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        # A loop, not a comprehension (a function object and a frame in 3.11): read for
        # every answer.
        texts = []
        for part in self.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
        return "".join(texts)

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls in this message."""
        return tool_calls_of(self)

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        """The tool results in this message."""
        return tuple([p for p in self.parts if isinstance(p, ToolResultPart)])


def drop_tool_calls(messages: Iterable[Message]) -> list[Message]:
    """The conversation without its tool calls and tool results: a handoff's input filter.

    Tool messages go; an assistant message loses its tool calls and goes when
    nothing but reasoning is left of it (reasoning belongs to the calls it led
    to). Everything else stays, in order: the target of a handoff reads what
    was said, not what the agent before it did.

    Example:
        >>> triage = Agent(model, handoffs=[Handoff(refunds, input_filter=drop_tool_calls)])

    Args:
        messages: The conversation (a handoff passes a tuple of `Message`).

    Returns:
        The messages to continue with.

    Raises:
        UsageError: ``messages`` is no iterable of `Message` (one of them is
            something else, or it is a single message).
    """
    kept: list[Message] = []
    position, message = -1, None
    given: object = messages  # (typed as messages, a caller may pass anything)
    if isinstance(given, str | bytes):  # ("" and b"" hold no item to fail on)
        _refuse_messages("drop_tool_calls", given, position, message, None)
    try:
        for position, message in enumerate(messages):  # noqa: B007  (read on failure)
            parts = message.parts
            if not any(isinstance(p, ToolCallPart | ToolResultPart) for p in parts):
                kept.append(message)
                continue
            left = tuple(p for p in parts if not isinstance(p, ToolCallPart | ToolResultPart))
            if any(not isinstance(p, ReasoningPart) for p in left):
                kept.append(Message(message.role, left))
    except (AttributeError, TypeError) as error:
        _refuse_messages("drop_tool_calls", messages, position, message, error)
    return kept


def _refuse_messages(
    function: str, messages: object, position: int, message: object, error: BaseException | None
) -> NoReturn:
    """Name what made ``function`` fail on ``messages`` (at ``message``, its ``position``th),
    or raise ``error`` again when it was no wrong argument."""
    expected = "an iterable of Messages"
    if isinstance(messages, Message):
        hint = " (pass [message])"
        raise wrong_argument(function, "messages", expected, messages, hint) from None
    if isinstance(messages, str | bytes) or (position < 0 and not _iterable(messages)):
        hint = " (pass its .messages)" if _held_messages(messages) else ""
        raise wrong_argument(function, "messages", expected, messages, hint) from None
    if position >= 0 and not isinstance(message, Message):
        raise wrong_argument(function, f"messages[{position}]", "a Message", message) from None
    assert error is not None  # (only str and bytes are refused before anything failed)
    raise error


def _iterable(value: object) -> bool:
    try:
        iter(value)  # type: ignore[call-overload]
    except TypeError:
        return False
    return True


def _held_messages(value: object) -> bool:
    """Whether ``value.messages`` is a tuple of Messages (as a state's or a response's is)."""
    messages = held(value, "messages")
    return isinstance(messages, tuple) and all(isinstance(m, Message) for m in messages)


def tool_calls_of(message: Message) -> tuple[ToolCallPart, ...]:
    """``message.tool_calls``, called as a function: the loop and the reducer read it
    for every response, where a property's call costs about as much as its work."""
    parts = message.parts
    for part in parts:
        if not isinstance(part, ToolCallPart):
            break
    else:
        return parts  # type: ignore[return-value]  # only calls (a tool step's answer)
    # A loop, not a comprehension (a function object and a frame in 3.11).
    calls = []
    for part in parts:
        if isinstance(part, ToolCallPart):
            calls.append(part)
    return tuple(calls)


def wire_memo(message: Message, key: object) -> Any:
    """What a codec memoized for ``message`` under ``key`` (see `set_wire_memo`), or None."""
    memo = message._wire
    if memo is not None and memo[0] is key:
        return memo[1]
    return None


def set_wire_memo(message: Message, key: object, encoded: Any) -> None:
    """Memoize a codec's encoding of ``message`` under ``key`` (an object the codec keeps).

    One entry per message: another key replaces it. ``encoded`` must be
    immutable and depend only on the message and ``key``.
    """
    object.__setattr__(message, "_wire", (key, encoded))


def _as_part(content: str | Part) -> Part:
    return TextPart(content) if isinstance(content, str) else content


COUNT_LIMIT: int = _INT_BOUND
"""Int counts stay below this in size (4300 digits at most): Python writes and reads
no longer int as JSON text by default (``sys.get_int_max_str_digits``), so a saved
state could not hold one."""


def is_count_value(value: object) -> bool:
    """Whether ``value`` is a count a `Usage` may hold: an int (no bool) of at most 4300
    digits (`COUNT_LIMIT`), or a finite float."""
    if type(value) is int:
        return _NEG_BOUND < value < _INT_BOUND  # (the usual case: the exact type first)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return _NEG_BOUND < value < _INT_BOUND
    return math.isfinite(value)


def _counts(usage: Usage, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Refuse a count a saved state cannot hold exactly (`Usage`'s one validator).

    One validator for all six counts (attrs runs it once every field is set),
    exact types first: what a provider's codec makes (six ints, none negative,
    each below 2**62) costs six type tests and one bound, on the counts or'ed
    together. Anything else (a float, a negative or longer int) is checked count
    by count: an int of more than 4300 digits is refused, as with a float beside
    it (six plain ints took it, and the state then could not be saved).
    """
    if (
        type(usage.input_tokens) is int
        and type(usage.output_tokens) is int
        and type(usage.cached_tokens) is int
        and type(usage.reasoning_tokens) is int
        and type(usage.requests) is int
        and type(value) is int
        and not (
            usage.input_tokens
            | usage.output_tokens
            | usage.cached_tokens
            | usage.reasoning_tokens
            | usage.requests
            | value
        )
        >> 62
    ):
        return
    problem = usage_problem(usage)
    if problem:
        raise UsageError(problem)


def count_problem(name: str, value: object) -> str:
    """Why ``value`` is no count for `Usage`'s field ``name`` ("" if it is one)."""
    if is_count_value(value):
        return ""
    shown = _shown_count(value) if _too_long(value) else repr(value)
    return f"Usage.{name}: expected an int or a finite float, got {type(value).__name__} {shown}"


@attrs.frozen
class Usage:
    """Token and request counts, added up with ``+``.

    Each count is an int of at most 4300 digits (`COUNT_LIMIT`), or a finite
    float (as a custom model may report); anything else (a bool, text, None,
    NaN, an infinity, a longer int) raises a `UsageError` naming the field,
    since a saved state could not hold it. Counts are kept
    as given otherwise (a negative one too).

    Attributes:
        input_tokens: Prompt tokens, cached ones (read or written) included.
        output_tokens: Completion tokens, reasoning ones included.
        cached_tokens: Prompt tokens read from the provider's cache.
        reasoning_tokens: Completion tokens spent on reasoning.
        requests: Model requests made.
        cache_write_tokens: Prompt tokens written to the provider's cache
            (Anthropic's ``cache_creation_input_tokens``; billed above the base
            input price, where reads are billed below it). Last, so the
            positional order of the other counts stays as it was.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    requests: int = 0
    cache_write_tokens: int = attrs.field(default=0, validator=_counts)

    def __repr__(self) -> str:
        # Only the counts that are not zero: most providers report two of five.
        counts = [(a.name, _shown_count(getattr(self, a.name))) for a in attrs.fields(Usage)]
        return fields("Usage", counts)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):  # (Usage + 1: Python's TypeError, not an AttributeError)
            return NotImplemented
        return _usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.requests + other.requests,
            self.cache_write_tokens + other.cache_write_tokens,
        )


def _shown_count(count: Any) -> Any:
    """``count`` as `Usage`'s repr shows it: None for zero; an int too long for ``str``
    (`COUNT_LIMIT`) by its size, so that the error refusing it can name it."""
    if _too_long(count):
        return f"<an int of more than {MAX_INT_DIGITS} digits>"
    return count or None


def usage_problem(usage: object) -> str:
    """What makes ``usage`` unfit for a saved state ("" if nothing): no `Usage`, or a
    count that is no int or finite float (one made around `Usage`'s check)."""
    if not isinstance(usage, Usage):
        return f"expected a Usage, got {type(usage).__name__}"
    for field in attrs.fields(Usage):
        problem = count_problem(field.name, getattr(usage, field.name))
        if problem:
            return problem
    return ""


from toolfold.runtime.core._build import builder  # noqa: E402  (needs the classes above)

_usage = builder(Usage)
# For `Message.user`'s prompt: values of the fields' final types (see `builder`).
_build_message = builder(Message)
_build_text = builder(TextPart)

NO_USAGE = Usage()
"""A response that used nothing (a workflow's planner answers without a model): adding it
changes no count, so the reducer keeps the run's usage as it is."""


def result_content(
    value: Any, text: Callable[[Any], str] | None = None
) -> tuple[ResultContent, ...] | None:
    """A tool's return value as result parts, when it holds an image or a file.

    An `ImagePart` or `FilePart`, or a list/tuple with at least one of them,
    is a rich result; anything else (None) is formatted as text the usual way.
    The list's strings and `TextPart` items are its text; any other item
    (``2024``, a dict) is written by ``text`` (the tool's `format_result`) as
    a text part of its own, so the image is never sent as base64 text. Without
    ``text``, such a list is no rich result.

    Raises:
        Exception: What ``text`` raised for an item.
    """
    if isinstance(value, (ImagePart, FilePart)):
        return (value,)
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if not any(isinstance(item, (ImagePart, FilePart)) for item in value):
        return None
    parts: list[ResultContent] = []
    for item in value:
        if isinstance(item, (TextPart, ImagePart, FilePart)):
            parts.append(item)
        elif isinstance(item, str):
            parts.append(TextPart(item))
        elif text is None:
            return None
        else:
            parts.append(TextPart(text(item)))
    return tuple(parts)


def content_problem(parts: tuple[ResultContent, ...]) -> str:
    """What makes one of a tool result's ``parts`` (`result_content`) unfit ("" if nothing).

    A tool's value is checked here, where it comes in, so that a part with a
    wrong-typed field (``ImagePart(data="aGk=")``, ``TextPart(42)``) is the
    call's error rather than a refused event, or a ``TypeError`` from
    `describe_content`, that ends the run.
    """
    if _content_fit(parts):
        return ""
    for index, part in enumerate(parts):
        problem = _field_problem(part)
        if problem:
            return problem if len(parts) == 1 else f"item {index} of the list, {problem}"
    return ""


def describe_content(parts: Iterable[ResultContent]) -> str:
    """The text of result parts, with each image or file described in brackets."""
    lines = []
    for part in parts:
        if isinstance(part, TextPart):
            lines.append(part.text)
        else:
            lines.append(describe_media(part))
    return "\n".join(lines)


def describe_media(part: ImagePart | FilePart) -> str:
    """One image or file as a bracketed line of text (for text-only readers).

    Its size when inline, else its URL; a ``data:`` URL, which carries the
    bytes, is never quoted (it would put all of them in the text): its
    length is given instead (``[image: image/png, a data: URL of 400,032 chars]``).
    """
    what = "image" if isinstance(part, ImagePart) else "file"
    name = getattr(part, "filename", None)
    where = f" {name}" if name else ""
    url = part.url
    if part.data is not None:
        size = f", {len(part.data):,} bytes"
    elif url is None:
        size = ", no data or url"
    elif url[:5].lower() == "data:":
        size = f", a data: URL of {len(url):,} chars"
    else:
        size = f", {url}"
    return f"[{what}{where}: {part.media_type}{size}]"
