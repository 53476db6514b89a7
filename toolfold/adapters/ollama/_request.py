"""Neutral `ModelRequest` -> Ollama ``/api/chat`` request body (pure functions).

Rules (providers.md §5 [L1, L2]):

- Tools are ``{"type": "function", "function": {...}}`` with their schema in
  the ``ollama`` dialect (references inlined; Ollama's Go structs drop other
  keywords, each drop reported by `compile_tool`).
- There is no ``tool_choice``: ``"none"`` is sent by leaving the tools out;
  ``"required"`` or a named tool cannot be expressed, so it is a
  `ModelConfigError` before any request, never silently ignored. There is no
  parallel-calls switch either: ``parallel_tool_calls=False`` is refused the
  same way.
- Calls go back with ``arguments`` as an object; results as one
  ``role: "tool"`` message each, with ``tool_name`` (and the call's id as
  ``tool_call_id``). There is no error flag: the result text says it.
- Images go inline as base64 in ``images``; Ollama cannot fetch a URL.
- ``stream`` is always sent: Ollama streams unless told ``false``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolfold._errors import ModelConfigError
from toolfold.adapters._codec import (
    check_token_limit,
    dropped_media_note,
    inline_media,
    media_marker,
    no_equivalent,
    place_shared_setting,
    url_excerpt,
)
from toolfold.adapters._dialects import CompiledTool, compile_tool
from toolfold.adapters._results import beside_items, joins_run, media_of, text_of
from toolfold.adapters.ollama._provider import (
    REFUSED_SETTINGS,
    RENAMED_OPTIONS,
    TOP_LEVEL_SETTINGS,
)
from toolfold.runtime._model import Prepared, RequestReport
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from toolfold.runtime.core._request import ModelRequest, ToolDefinition

Body = dict[str, Any]

PROVIDER = "ollama"

# Roles whose one text part is not sent as a plain message of that role: an assistant
# message may carry thinking and calls, and a tool message's text is no result.
_NOT_PLAIN = ("assistant", "tool")
# Settings naming a field the codec builds: each merged with it or refused (`_own_setting`).
_OWNED = frozenset({"model", "messages", "stream", "tools", "format"})


def prepare(request: ModelRequest, model_name: str, *, stream: bool = False) -> Prepared:
    """`build_body`, with the report of what was left out (another provider's reasoning)."""
    notes: list[str] = []
    body = build_body(request, model_name, stream=stream, notes=notes)
    return Prepared(body, RequestReport(PROVIDER, tuple(notes)))


def build_body(
    request: ModelRequest,
    model_name: str,
    *,
    stream: bool = False,
    notes: list[str] | None = None,
) -> Body:
    """Build the JSON body of one ``POST /api/chat``.

    ``notes`` receives one sentence per reasoning part left out.

    Raises:
        ModelConfigError: The request asks for what Ollama cannot do: a
            required or named ``tool_choice``, ``parallel_tool_calls=False``,
            an image by URL, a file.
    """
    body: Body = {"model": model_name, "messages": encode_messages(request.messages, notes)}
    tools = list(request.tools)
    choice = request.tool_choice
    if tools and choice not in (None, "auto", "none"):
        what = "a tool call" if choice == "required" else f"a call of {choice!r}"
        raise ModelConfigError(
            f"tool_choice {choice!r} cannot be sent to Ollama: its API has no tool_choice, "
            f"so it cannot force {what}; use 'auto' or 'none'"
        )
    if tools and choice != "none":
        if request.settings.get("parallel_tool_calls") is False:
            raise ModelConfigError(
                "parallel_tool_calls=False cannot be sent to Ollama: its API has no switch "
                "for parallel tool calls"
            )
        body["tools"] = [compiled_tool(t).payload for t in tools]
    if request.output is not None:
        body["format"] = dict(request.output.schema)
    _add_settings(body, request.settings)
    body["stream"] = stream
    return body


def compiled_tool(tool: ToolDefinition) -> CompiledTool:
    """The compilation of ``tool`` Ollama gets (no strict mode exists)."""
    return compile_tool(tool, "ollama", strict=False)


def _add_settings(body: Body, settings: Mapping[str, Any]) -> None:
    options: dict[str, Any] = {}
    for key, value in settings.items():
        if value is None or key == "parallel_tool_calls":
            continue
        if key in _OWNED:
            _own_setting(body, key, value)
        elif key == "options" and isinstance(value, Mapping):
            options.update(value)
        elif key in TOP_LEVEL_SETTINGS:
            body[key] = value
        elif key in REFUSED_SETTINGS:
            raise no_equivalent(key, "Ollama's chat API", REFUSED_SETTINGS[key])
        else:
            if key == "stop" and isinstance(value, str):
                value = [value]
            elif key == "max_tokens":
                check_token_limit(key, value)
            options[RENAMED_OPTIONS.get(key, key)] = value
    if options:
        body["options"] = options


def _own_setting(body: Body, key: str, value: Any) -> None:
    """Place a setting naming a field `build_body` builds: merged with it, or refused.

    ``format`` goes as given when the request has no output type;
    ``tools``, ``model``, ``messages`` and ``stream`` as every codec places
    them (`place_shared_setting`).

    Raises:
        ModelConfigError: The setting cannot be placed, naming it and what to
            use instead.
    """
    if key == "format":
        if "format" in body:
            raise ModelConfigError(
                "the setting 'format' and the run's output type both set Ollama's format; "
                "give one (the output type sends its JSON schema there)"
            )
        body["format"] = value
    else:
        place_shared_setting(
            body, key, value, "Ollama", tools="tool objects", model=" ('ollama:<model>')"
        )


def encode_messages(messages: Iterable[Message], notes: list[str] | None = None) -> list[Body]:
    """The ``messages`` array: one message per tool result, the rest one to one.

    What a tool message holds beside its results, and what a user message
    holding results (a history from Anthropic's format) holds beside them,
    goes in one user message after the run of tool messages (`_after_run`):
    no user message comes between the tool messages answering one call,
    whichever of them a user message holds (`joins_run`).
    """
    out: list[Body] = []
    attached: list[Body] = []  # tools' images, sent after the run of tool messages
    beside: list[tuple[str, str]] = []  # the run's own parts beside its results
    for position, message in enumerate(inline_media(messages)):
        parts = message.parts
        role = message.role
        if (attached or beside) and role != "tool" and not joins_run(message):
            out.extend(_after_run(beside, attached))
            attached, beside = [], []
        # Fast path for what every step resends: a plain text message. (A tool message's
        # text is no result: it goes after the run of tool messages, below.)
        if len(parts) == 1 and type(parts[0]) is TextPart and role not in _NOT_PLAIN:
            out.append({"role": role, "content": parts[0].text})
            continue
        results = [p for p in parts if isinstance(p, ToolResultPart)]
        out.extend(_tool_messages(results, attached))
        if role == "tool" or (role == "user" and bool(results)):  # joins_run, results found
            if len(results) < len(parts):
                # Text (or an image, a file) beside the results: a tool message holds one
                # result, so it goes in a user message after the run of tool messages.
                beside.extend(
                    beside_items(
                        [p for p in parts if not isinstance(p, ToolResultPart)],
                        bool(results),
                        lambda text: ("text", text),
                        _inline_image,
                        role,
                    )
                )
            continue
        if attached:
            out.extend(attached)
            attached = []
        if results and len(results) == len(parts):
            continue
        if role == "assistant":
            out.append(_assistant(message, position, notes))
        else:
            rest = [p for p in parts if not isinstance(p, ToolResultPart)] if results else parts
            out.append(_user_or_system(role, rest))
    out.extend(_after_run(beside, attached))
    return out


def _after_run(beside: list[tuple[str, str]], attached: list[Body]) -> list[Body]:
    """The user messages after a run of tool messages: one of ``beside``, then ``attached``.

    ``beside`` holds what the run's tool messages hold beside their results
    (`beside_items`: text, inline images, described files) as ``(kind,
    value)``: they go in one user message, its text pieces a blank line apart
    as Chat Completions joins them, its images in ``images``. Nothing when
    every piece was empty.
    """
    texts = [value for kind, value in beside if kind == "text"]
    images = [value for kind, value in beside if kind == "image"]
    if not (texts or images):
        return attached
    encoded: Body = {"role": "user", "content": "\n\n".join(texts)}
    if images:
        encoded["images"] = images
    return [encoded, *attached]


def _tool_messages(results: list[ToolResultPart], attached: list[Body]) -> list[Body]:
    """One ``role: tool`` message per result; their images go to ``attached``.

    A tool message takes text: a result with images sends its text there (each
    image or file described in brackets), and a user message per result after
    the run of tool messages carries its images (``images``, inline base64,
    the only way Ollama takes them; `encode_messages` adds them). Files have
    no place in Ollama's chat API: their description is all the model gets.
    """
    out: list[Body] = [
        {
            "role": "tool",
            "tool_name": r.tool_name,
            "tool_call_id": r.call_id,
            "content": text_of(r) if r.parts else r.content,
        }
        for r in results
    ]
    heads: list[str] = []
    images: list[str] = []
    for result in results:
        found = [
            base64.b64encode(part.data).decode()
            for part in (media_of(result) if result.parts else [])
            if isinstance(part, ImagePart) and part.data is not None
        ]
        if found:
            heads.append(
                f"{len(found)} image(s) returned by tool call {result.call_id} ({result.tool_name})."
            )
            images.extend(found)
    if images:  # (after the run of tool messages, as on Chat Completions)
        attached.append({"role": "user", "content": " ".join(heads), "images": images})
    return out


def _inline_image(part: ImagePart | FilePart) -> tuple[str, str]:
    """An image as Ollama takes it (inline base64); `ModelConfigError` for anything else."""
    if isinstance(part, ImagePart) and part.data is not None:
        return ("image", base64.b64encode(part.data).decode())
    raise ModelConfigError(f"Ollama cannot take {part.kind!r} {part.media_type} here")


def _assistant(message: Message, position: int, notes: list[str] | None) -> Body:
    text: list[str] = []
    thinking: list[str] = []
    calls: list[Body] = []
    foreign: set[str] = set()
    marker = None  # the marker of the media part dropped just before
    for index, part in enumerate(message.parts):  # one pass: this runs for every turn
        if part is marker:
            continue  # its media's note says it all
        if isinstance(part, TextPart):
            text.append(part.text)
        elif isinstance(part, ToolCallPart):
            calls.append(_call(part))
        elif isinstance(part, ReasoningPart):
            if part.provider in (None, PROVIDER):
                thinking.append(part.text)
            elif part.text or part.signature:
                foreign.add(str(part.provider))
        elif isinstance(part, (ImagePart, FilePart)):
            marker = media_marker(message.parts, index)
            if marker is None:
                raise ModelConfigError(
                    f"an assistant message for Ollama cannot carry {part.kind!r}"
                )
            # Another provider's answer media: dropped with a note, as its reasoning is.
            if notes is not None:
                notes.append(f"messages[{position}]: {dropped_media_note(part, marker, 'Ollama')}")
    encoded: Body = {"role": "assistant", "content": "".join(text)}
    if foreign and notes is not None:
        notes.append(
            f"messages[{position}]: reasoning from {', '.join(sorted(foreign))} "
            "left out: it was written for another provider"
        )
    if thinking and any(thinking):
        encoded["thinking"] = "".join(thinking)
    if calls:
        encoded["tool_calls"] = calls
    return encoded


def _call(call: ToolCallPart) -> Body:
    arguments = call.arguments if call.arguments is not None else {}
    # (Ollama documents no rule for names: each goes as the model gave it)
    return {"id": call.id, "function": {"name": call.name, "arguments": arguments}}


def _user_or_system(role: str, parts: Sequence[Part]) -> Body:
    """A user or system message of ``parts`` (no tool results: they go as tool messages)."""
    text: list[str] = []
    images: list[str] = []
    for part in parts:
        if isinstance(part, TextPart):
            text.append(part.text)
        elif isinstance(part, ImagePart):
            if part.data is None:
                raise ModelConfigError(
                    f"Ollama takes images inline only; ImagePart {url_excerpt(part.url or '')} "
                    "has a url and no data: give its bytes as data="
                )
            images.append(base64.b64encode(part.data).decode())
        elif isinstance(part, FilePart):
            raise ModelConfigError(
                f"Ollama's chat API takes text and images, not files ({part.media_type})"
            )
        elif isinstance(part, ToolCallPart):
            raise ModelConfigError(f"a {role} message cannot carry a tool call")
        elif not isinstance(part, ReasoningPart):
            raise ModelConfigError(f"Ollama cannot take a {part.kind!r} part here")
    encoded: Body = {"role": role, "content": "".join(text)}
    if images:
        encoded["images"] = images
    return encoded
