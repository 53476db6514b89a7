"""What every provider codec shares, written once: in-band stream errors, event JSON, tool_choice.

- `inband_stream_error` builds the exception for an error a provider reported
  inside an HTTP 200 stream (Anthropic's ``event: error``, an OpenAI-style
  ``{"error": ...}`` event, Gemini's error chunk, Ollama's error line, a failed
  Responses event): one message form, the provider's message and code kept.
- `event_json` decodes a stream event's (or line's) data, or raises the
  `StreamError` saying it is not JSON; `carries_nothing` says which SSE events
  have nothing to decode (empty data, a ``ping``).
- `named_tool` is the tool a named ``tool_choice`` forces, or the
  `ModelConfigError` saying the request has no such tool.
- `refuse_choices` refuses a setting asking for more than one answer.
- `refuse_setting` refuses a setting naming a body field the codec builds
  itself (``messages``, ``stream``...), saying what to use instead.
- `place_shared_setting` places a ``tools``, ``stream``, ``model`` or
  conversation setting the same way on every codec (merged or refused).
- `inline_media` decodes the images and files a message gives as ``data:``
  URLs, lower-cases their media types, and refuses (or, in a tool's result,
  describes) one no provider can take, before any codec encodes it;
  `url_excerpt` is a URL as an error may quote it (short, no password, query
  nor fragment).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar, cast
from urllib.parse import unquote_to_bytes

import attrs

from toolfold._errors import ModelConfigError, StreamError
from toolfold.adapters import _wire as wire
from toolfold.adapters._http._keys import mask_url_credentials
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
    describe_media,
)
from toolfold.runtime.core._repr import short
from toolfold.runtime.core._request import ToolDefinition

Media = TypeVar("Media", bound=ImagePart | FilePart)

#: ``provider_data`` key of the empty `ReasoningPart` after an `ImagePart` the
#: Responses built-in ``image_generation`` tool made: ``[item id, status]``.
IMAGE_CALL = "image_generation_call"
#: ``provider_data`` key of the empty `ReasoningPart` standing for a Responses output
#: item toolfold does not read: ``[type, id]`` (the request notes it was left out).
OUTPUT_ITEM = "output_item"
#: ``provider_data`` key of the empty `ReasoningPart` after a Chat Completions audio
#: answer's `FilePart`: ``{"id": ..., "expires_at": ...}``, the id the next request
#: sends back as the assistant message's ``audio``.
AUDIO = "audio"


def inband_stream_error(
    provider: str, body: str, message: str | None, code: str | None = None
) -> StreamError:
    """The exception for an error reported inside an HTTP 200 stream.

    Args:
        provider: The provider name.
        body: The raw event data (or line) that carried the error.
        message: The provider's own message, if it gave one (else the start of
            ``body`` is quoted).
        code: The provider's error code or type, if any.
    """
    text, fields = inband_error_fields(provider, body, message, code)
    return StreamError(text, **fields)


def inband_error_fields(
    provider: str, body: str, message: str | None, code: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The message and keyword fields of `inband_stream_error`, for another error class."""
    said = message or wire.encodable(body.strip()[:500]) or "(no message)"
    text = f"{provider} reported an error inside the stream: {said}"
    if code:
        text += f" (code {code})"
    fields = {
        "provider": provider,
        "status_code": 200,
        "body": body,
        "provider_message": message,
        "code": code,
    }
    return text, fields


def event_json(provider: str, data: str, what: str = "stream event") -> Any:
    """``data`` decoded as JSON.

    Raises:
        StreamError: ``data`` is not JSON (the message quotes its start).
    """
    try:
        return wire.loads(data)
    except ValueError as exc:
        raise StreamError(
            f"{provider} sent a {what} that is not JSON: {data[:200]!r} ({exc})",
            provider=provider,
            status_code=200,
            body=data,
        ) from None


def carries_nothing(data: str, event: str | None) -> bool:
    """Whether an SSE event has nothing to decode: it is skipped, not an error.

    An event with empty (or blank) data is legal: the SSE standard dispatches
    ``data:`` with nothing after it as an event whose data is empty, and no
    provider documents a meaning for one (a keep-alive at most). A ``ping``
    (Anthropic sends ``event: ping`` "anywhere" in a stream, providers.md §3
    [A2]) is a keep-alive whatever its data: ``{"type": "ping"}`` today,
    possibly nothing or plain text from a gateway. ``event: error`` is never
    skipped, however empty: the in-band check raises it, or the codec does
    when that check is off (`inband_errors=False`).
    """
    return event != "error" and (event == "ping" or not data or data.isspace())


def named_tool(choice: str, tools: Sequence[ToolDefinition]) -> ToolDefinition:
    """The tool of ``tools`` a named ``tool_choice`` forces.

    Raises:
        ModelConfigError: No tool of the request has that name.
    """
    for tool in tools:
        if tool.name == choice:
            return tool
    names = ", ".join(t.name for t in tools) or "none"
    raise ModelConfigError(f"tool_choice {choice!r} names no tool of this request; tools: {names}")


def refuse_choices(setting: str, value: Any, provider: str) -> None:
    """Refuse a setting asking for more than one answer (Chat ``n``, Gemini ``candidate_count``).

    toolfold reads one answer (the first choice or candidate): the others
    would be generated, paid for and dropped without a word. One (or None)
    passes. A whole float (``2.0``) or a string of digits (``"2"``) is the
    count it spells, as a provider reads it; any other value that is no count
    (``2.5``, ``"two"``) is left for the provider to judge.

    Raises:
        ModelConfigError: ``value`` is a count above 1, or a bool (``True``
            is no count, though Python reads it as 1), naming the setting.
    """
    if type(value) is bool:
        raise ModelConfigError(
            f"the setting {setting}={value!r} is no count of answers: give a whole "
            f"number (1, as a run reads one answer) or remove {setting}"
        )
    count = _count(value)
    if count is not None and count > 1:
        many = f"{count} answers" if count < _MANY else "more answers than any model gives"
        others = f"the other {count - 1}" if count < _MANY else "all but one"
        # (a huge int is not written out: Python refuses to write one of over 4,300 digits)
        shown = (
            short(value)
            if type(value) is not int or count < _MANY
            else f"(an int of {value.bit_length()} bits)"
        )
        raise ModelConfigError(
            f"the setting {setting}={shown} asks {provider} for {many}, but a run "
            f"reads one: {others} would be paid for and dropped; remove "
            f"{setting} (or set it to 1) and make separate requests for more answers"
        )


# A count this large or more is not read out: a string of many digits is not converted
# (Python refuses an int of over 4,300 digits with a bare ValueError).
_MANY = 10**9


def _count(value: Any) -> int | None:
    """The whole number ``value`` spells (an int, a whole float, a string of digits), or None;
    `_MANY` for a string of more digits than it has (leading zeros aside)."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    text = value.strip() if type(value) is str else ""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) < len(str(_MANY)) else _MANY


def check_token_limit(key: str, value: Any, *, digits: bool = False) -> None:
    """Refuse a token limit (``max_tokens``) that is no whole number of tokens.

    Every provider's API types the field as an integer and answers 400 for
    ``300.5``; ``True`` is no count, though Python reads it as 1. A whole float
    (``300.0``) is an integer to JSON Schema, and goes as given. A string of
    digits (``"300"``) is refused too, unless ``digits``: Gemini reads its body
    as proto3 JSON, where an int32 may be written as a string, and takes it.

    Raises:
        ModelConfigError: ``value`` is a bool, a float with a fraction or not
            a number (a string of digits unless ``digits``), naming the setting.
    """
    if type(value) is int or (type(value) is float and value.is_integer()):
        return
    if isinstance(value, int) and not isinstance(value, bool):
        return
    if digits and type(value) is str and _count(value) is not None:
        return
    takes = "a whole number or a string of digits" if digits else "an integer"
    raise ModelConfigError(
        f"the setting {key}={short(value)} is no number of tokens: give a whole number "
        f"({key}=300), as the provider's API takes {takes} there"
    )


def refuse_setting(key: str, provider: str, instead: str) -> NoReturn:
    """Refuse the setting ``key``, a request field ``provider``'s codec builds itself.

    Sent as given, it would replace what the codec built (the conversation,
    the model, the stream switch) without a word.

    Raises:
        ModelConfigError: Always, naming the setting and what to use instead.
    """
    raise ModelConfigError(
        f"the setting {key!r} names a field of the {provider} request that toolfold builds "
        f"itself; it would replace it: remove it and {instead}"
    )


def no_equivalent(key: str, api: str, instead: str | None = None) -> ModelConfigError:
    """The error for the setting ``key``, which ``api`` (``"the Anthropic Messages API"``) lacks.

    Where it comes from, and how to drop it from there: the agent's settings
    (`Agent.evolve` merges ``settings=``; ``key=None`` is not sent), or
    the state of a resumed run, which sends the settings it started with.
    ``instead``: what ``api`` has for it (``"the setting 'stop' ..."``), said first.
    """
    said = (
        f"has no equivalent in {api}"
        if instead is None
        else f"is not a field of {api}: use {instead} instead"
    )
    return ModelConfigError(
        f"the setting {key!r} {said}. It comes from the agent's "
        f"settings (agent.evolve({key}=None) stops sending it: settings={{...}} merges, "
        f"settings={{}} changes nothing) or, in a resumed run, from the settings its state stored when it "
        f"started, which a resume keeps: resume that run with a model of the provider it "
        f"started on, or start a new run from its messages with an agent without "
        f"{key!r} (agent.evolve(model=..., {key}=None).run(prompt, "
        f"history=state.messages), once no call of it waits)"
    )


#: What a `refuse_setting` says to use instead of ``stream``: a blocking call
#: given ``stream=True`` would be answered with a stream it cannot read.
STREAM_INSTEAD = (
    "stream with the stream API instead (agent.stream(...), or model.stream() / "
    "stream_sync()); toolfold asks for a stream itself there"
)


def place_shared_setting(
    body: dict[str, Any],
    key: str,
    value: Any,
    provider: str,
    *,
    tools: str,
    model: str = "",
    field: str | None = None,
) -> None:
    """Place a setting naming a body field every codec builds the same way.

    Each codec's own settings of that kind (``system``, ``tool_choice``, an
    output field...) are placed by the codec; the rest goes here:

    - ``tools`` (a list: a provider's built-in or server tools) is sent after
      the run's function tools, which stay;
    - ``stream``: a true value is refused (a blocking call would be answered
      with a stream it cannot read), a false one dropped: the stream switch
      is the codec's, which sends what the call asks for (a state saved
      with ``stream=False``, once sent as given, still runs);
    - ``model`` is refused, pointing at the model string;
    - anything else (the conversation: ``messages``, ``contents``,
      ``input``) is refused, pointing at the run's prompt or messages.

    Args:
        body: The body built so far (``tools`` merged into it).
        key: The setting's name, as an error quotes it.
        value: The setting's value.
        provider: The provider's name, as an error says it.
        tools: What ``tools`` must hold, as an error words it
            (``"Anthropic tool objects (server tools such as web search)"``).
        model: The model string's form, as the ``model`` refusal shows it
            (``" ('anthropic:<model>')"``).
        field: The body field ``key`` names, when the API reads two spellings
            (Gemini's ``tool_config``); ``key`` when None.

    Raises:
        ModelConfigError: The setting cannot be placed, naming it and what to
            use instead.
    """
    field = key if field is None else field
    if field == "tools":
        if not isinstance(value, (list, tuple)):
            raise ModelConfigError(
                f"the setting {key!r} must be a list of {tools}, sent after the run's tools; "
                f"got {type(value).__name__}"
            )
        body["tools"] = [*body.get("tools", ()), *value]
    elif field == "stream":
        if value:
            refuse_setting(key, provider, STREAM_INSTEAD)
    elif field == "model":
        refuse_setting(key, provider, f"name the model in the model string{model}")
    else:
        refuse_setting(key, provider, "give the conversation as the run's prompt or messages")


#: The most characters of a URL an error quotes (`url_excerpt`).
URL_EXCERPT = 60


def url_excerpt(url: str) -> str:
    """A URL as an error quotes it: its whole ``user:password@`` masked
    (`mask_url_credentials`: a token may be the user, ``https://ghp_...@host``),
    without its query and fragment (a presigned URL's signature), a ``data:``
    URL as its header only, and at most `URL_EXCERPT` characters, with the full
    length."""
    if url[:5].lower() == "data:":
        whole = url
        header, comma, _ = url.partition(",")
        shown = header + ",..." if comma else url
    else:
        whole = mask_url_credentials(url)
        base, hashed, _ = whole.partition("#")
        base, asked, _ = base.partition("?")
        shown = base + ("?..." if asked else "#..." if hashed else "")
    if len(shown) > URL_EXCERPT:
        shown = shown[: URL_EXCERPT - 3] + "..."
    return repr(shown) if shown == whole else f"{shown!r} ({len(url):,} chars)"


def is_data_url(part: object) -> bool:
    """Whether ``part`` is an image or file given as a ``data:`` URL (and no data)."""
    if not isinstance(part, (ImagePart, FilePart)):
        return False
    url = part.url
    return url is not None and part.data is None and url[:5].lower() == "data:"


def inline_media(messages: Iterable[Message]) -> Sequence[Message]:
    """``messages`` with each image or file given as a ``data:`` URL decoded into
    ``data=``, each media type lower-cased, and each part no provider can take refused.

    The one place a data URL is read: every codec passes the conversation
    here before encoding it, so an image or file given as a data URL, in a
    message or in a tool's result, is sent and described (``[image:
    image/png, 300,004 bytes]``) exactly as if given as ``data=``, with the
    data URL's media type. A media type is compared lower-cased everywhere
    (``image/PNG`` is ``image/png``: media types are case-insensitive, and
    Anthropic takes lower case only). ``messages`` itself comes back when no
    part needs any of this (one pass over a message's parts, a type test
    each, the first time it is sent; a flag on the message after that), and
    a part is prepared once for as long as it lives (`_decoded`), not on
    every request of a tool loop.

    A part no provider can take (`media_problem`: a data URL that cannot be
    decoded, no data and no url, empty data, a url that is a local path or a
    ``file:`` URL) is refused in a message the caller gave, and described
    (never quoted) in a tool's result or beside it, as an image the provider
    cannot take is there.

    Raises:
        ModelConfigError: A part outside a tool's result cannot be sent,
            naming the message and part and saying why.
    """
    if not isinstance(messages, (tuple, list)):
        messages = tuple(messages)
    for index, message in enumerate(messages):
        try:
            known = message._needs_inline  # None until looked at
        except AttributeError:  # a message-like object of the caller's own
            known = None
        if known is False or (known is None and not _message_needs_inline(message)):
            continue
        rest = messages[index:]
        return [*messages[:index], *map(_inlined_message, rest, range(index, len(messages)))]
    return messages


def _message_needs_inline(message: Message) -> bool:
    """Whether a part of ``message`` needs `inline_media` (`_part_needs_inline`),
    remembered on the message."""
    found = False
    for part in message.parts:
        kind = type(part)
        if kind in _NO_MEDIA or (kind is ToolResultPart and not cast(ToolResultPart, part).parts):
            continue
        if _part_needs_inline(part):
            found = True
            break
    if isinstance(message, Message):  # (not on a message-like object of the caller's)
        object.__setattr__(message, "_needs_inline", found)
    return found


# The part types that hold no image or file (a type test: cheaper than isinstance).
_NO_MEDIA = frozenset({TextPart, ToolCallPart, ReasoningPart})


def _part_needs_inline(part: Part) -> bool:
    """Whether ``part`` is, or is a tool result holding, an image or file that
    `inline_media` changes: given as a data URL, of a media type not in lower
    case, or one no provider can take (`media_problem`)."""
    if isinstance(part, ToolResultPart):
        return any(map(_media_needs_inline, part.parts))
    return _media_needs_inline(part)


def _media_needs_inline(part: object) -> bool:
    """Whether ``part`` is an image or file that `_inline` changes or refuses."""
    if not isinstance(part, (ImagePart, FilePart)):
        return False
    media_type = part.media_type
    return (
        is_data_url(part)
        or (isinstance(media_type, str) and lower_media_type(media_type) != media_type)
        or bool(media_problem(part))
    )


def lower_media_type(media_type: str) -> str:
    """``media_type`` with its type and subtype (before any ``;``) lower-cased."""
    kind, semicolon, parameters = media_type.partition(";")
    return kind.lower() + semicolon + parameters


def media_problem(part: ImagePart | FilePart) -> str:
    """Why no provider can take ``part``, given as data or a URL ("" if nothing).

    Neither data nor a url; empty data (every provider refuses an empty
    image or file); a url that is no URL a provider can fetch: a local path
    (``/tmp/chart.png``, ``cat.png``, ``C:\\chart.png``) or a ``file:`` URL,
    which names a file on this machine. A ``data:`` URL is `inline_media`'s to
    decode, and not looked at here.
    """
    what = type(part).__name__
    data, url = part.data, part.url
    if data is not None:
        if not data:
            return (
                f"the {what}'s data is empty (0 bytes), which no provider takes: "
                "give its bytes, or leave the part out"
            )
        return ""
    if url is None:
        return f"the {what} has neither data nor a url: give its bytes as data= or a url="
    if is_data_url(part):
        return ""
    scheme = url_scheme(url)
    if not scheme:
        return (
            f"the {what}'s url {url_excerpt(url)} is not a URL (no scheme, such as https:): "
            "a provider cannot read a local file; give its bytes as data="
        )
    if scheme == "file":
        return (
            f"the {what}'s url {url_excerpt(url)} is a file: URL, which a provider cannot "
            "read; give the file's bytes as data="
        )
    return ""


def url_scheme(url: object) -> str:
    """The scheme of ``url``, lower-cased (``https``, ``file``, ``data``), or ""
    when it has none (a local path such as ``cat.png`` or ``C:\\chart.png``)."""
    if not isinstance(url, str):
        return ""
    scheme = _SCHEME.match(url)
    return scheme[1].lower() if scheme else ""


# A URL's scheme (RFC 3986: a letter, then letters, digits, +, - or .), of two
# characters at least: ``C:\\chart.png`` is a Windows path, not the scheme ``c``.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")


def _inlined_message(message: Message, position: int) -> Message:
    """``message`` prepared (`inline_media`), or itself when no part needs it."""
    if not any(map(_part_needs_inline, message.parts)):
        return message
    lenient = message.role == "tool"
    parts: list[Part] = []
    for index, part in enumerate(message.parts):
        if isinstance(part, ToolResultPart) and _part_needs_inline(part):
            content = tuple(_inline(item, lenient=True) for item in part.parts)
            part = attrs.evolve(part, parts=content)
        elif isinstance(part, (ImagePart, FilePart)):
            try:
                part = _inline(part, lenient=lenient)
            except ModelConfigError as error:
                raise ModelConfigError(
                    f"messages[{position}] ({message.role}) part {index}: {error}"
                ) from None
        parts.append(part)
    return Message(message.role, parts)


# Each part given as a data URL, decoded, by the part: a tool loop resends it
# on every request. Weak keys: an entry goes with its part.
_decoded: weakref.WeakKeyDictionary[ImagePart | FilePart, ImagePart | FilePart] = (
    weakref.WeakKeyDictionary()
)


def _inline(part: ResultContent, *, lenient: bool) -> ResultContent:
    """``part`` decoded and its media type lower-cased (`inline_media`); with
    ``lenient``, a part no provider can take is its description instead of a
    `ModelConfigError`."""
    if not _media_needs_inline(part):
        return part
    part = cast("ImagePart | FilePart", part)
    hit = _decoded.get(part)
    if hit is not None:
        return hit
    try:
        decoded = _decode(part) if is_data_url(part) else part
        problem = media_problem(decoded)
        if problem:
            raise ModelConfigError(problem)
        if lower_media_type(decoded.media_type) != decoded.media_type:
            decoded = attrs.evolve(decoded, media_type=lower_media_type(decoded.media_type))
    except ModelConfigError:
        if not lenient:
            raise
        return TextPart(describe_media(part))
    with contextlib.suppress(TypeError):  # (a part of a subclass without weak references)
        _decoded[part] = decoded
    return decoded


def prepared_media(part: ImagePart | FilePart) -> ImagePart | FilePart | TextPart:
    """A tool's image or file as `inline_media` sends it in a tool's result:
    a ``data:`` URL decoded into ``data=``, the media type lower-cased, and a
    part no provider can take (`media_problem`, or a data URL that cannot be
    decoded) its one-line description.

    For what sends a tool's result elsewhere (the MCP server)."""
    return _inline(part, lenient=True)


# ASCII whitespace, as bytes.split() takes it (a data URL's base64 skips it).
_SPACE = b" \t\n\r\x0b\x0c"


def _decode(part: Media) -> Media:
    """``part``, whose ``url`` is a data URL, with its bytes as ``data``.

    The media type the URL names wins over the part's (whose default may not
    have been chosen), lower-cased (media types are case-insensitive, and
    Anthropic takes lower case only). ASCII whitespace in base64 (MIME's
    76-character lines) is skipped, as browsers skip it.
    """
    url = cast(str, part.url)
    header, comma, payload = url[5:].partition(",")
    kind, _, parameters = header.partition(";")
    try:
        if not comma:
            raise ValueError("no ',' before the data")
        data = unquote_to_bytes(payload)
        if parameters.lower().rstrip().endswith("base64"):
            try:
                data = base64.b64decode(data, validate=True)
            except binascii.Error:  # whitespace (MIME's lines) is skipped, only where there is some
                data = base64.b64decode(data.translate(None, _SPACE), validate=True)
    except (ValueError, binascii.Error) as error:
        raise ModelConfigError(
            f"the {type(part).__name__}'s data: URL {url_excerpt(url)} cannot be decoded "
            f"({error}); give the bytes as data= instead"
        ) from None
    media_type = kind.strip().lower() or part.media_type
    return attrs.evolve(part, data=data, url=None, media_type=media_type)


def media_marker(parts: Sequence[Part], index: int) -> ReasoningPart | None:
    """The marker after the image or file at ``index`` when a provider made it, or None.

    Only the markers toolfold's own parsers put after an answer's media count:
    Gemini's signature part (``gemini/_response.parse_part``), a Responses
    ``image_generation_call`` after its image (``openai_responses/_response``)
    and a Chat audio id after its audio file (``openai_chat/_response.audio_parts``).
    Anything else after it (Anthropic's signed or redacted thinking, say) is
    reasoning, not a marker: media a user put in an assistant message has none.
    """
    after = parts[index + 1] if index + 1 < len(parts) else None
    if type(after) is not ReasoningPart or after.text:
        return None
    part = parts[index]
    data = after.provider_data
    if after.provider == "gemini" and after.signature is not None and not data:
        return after
    if after.signature is not None:
        return None
    if (
        after.provider == "openai-responses"
        and isinstance(part, ImagePart)
        and isinstance(data.get(IMAGE_CALL), (list, tuple))
    ):
        return after
    audio = data.get(AUDIO)  # a Chat audio answer's id, after its audio file only
    if (
        isinstance(part, FilePart)
        and isinstance(audio, Mapping)
        and isinstance(audio.get("id"), str)
    ):
        return after
    return None


def dropped_media_note(part: ImagePart | FilePart, marker: ReasoningPart, target: str) -> str:
    """The report note (after its ``messages[i]: ``) for a provider's image or file
    ``target`` cannot take back in an assistant turn, dropped as another
    provider's reasoning is."""
    audio = part.media_type.lower().startswith("audio/")
    what = "audio" if audio else "image" if isinstance(part, ImagePart) else "file"
    kept = " (its transcript is sent)" if audio else ""
    return (
        f"{what} from {marker.provider or 'an unknown provider'} "
        f"left out: {target} takes no {what} in an assistant turn{kept}"
    )
