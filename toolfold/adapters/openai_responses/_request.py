"""Neutral `ModelRequest` -> OpenAI Responses ``CreateResponse`` body (pure functions).

The whole conversation is sent every time as ``input`` items; the API's
server-side state (``previous_response_id``) is never used, so the neutral
messages stay the one source of truth: a run replays, resumes and switches
provider without depending on what OpenAI stored.

- System messages are ``developer`` messages; user text and images/files are
  ``input_text`` / ``input_image`` / ``input_file`` parts [O5 response_input_param.py].
- An assistant turn goes back as its items in order: reasoning items (item id
  and, with ``reasoning_text`` content, its summary and content texts from
  ``ReasoningPart.provider_data``, encrypted
  content from its ``signature``), an assistant message for
  its text (the ``message`` item with its id and ``phase`` when it followed a
  reasoning item that keeps them, ``"message_id"`` and ``"message_phase"``: OpenAI refuses a reasoning item sent
  without the item that followed it), and one ``function_call`` item per call
  (``call_id``, and the item id ``fc_...`` kept in ``provider_data``).
- A tool result is a ``function_call_output`` linked by ``call_id``; the API
  has no error flag, so the text says what failed. Its images and PDF files go
  as ``input_image`` / ``input_file`` items; another file as its description.
  What a run of tool messages holds beside its results (text, images, files)
  goes in one user message after the run's outputs, which stay together as
  the API's guide shows them (one output per call after the calls).
- Reasoning made by another provider cannot be sent: it is dropped with a note
  in the `RequestReport`; so is, with ``store=False``, a reasoning item that only
  OpenAI's stored copy could give (no encrypted content, no reasoning text).
- An image the built-in ``image_generation`` tool made goes back as its
  ``image_generation_call`` item (id and status from the empty part after it,
  the image as ``result``); an output item toolfold does not read is noted as
  not sent back.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from toolfold._errors import ModelConfigError
from toolfold.adapters._codec import (
    IMAGE_CALL,
    OUTPUT_ITEM,
    check_token_limit,
    dropped_media_note,
    inline_media,
    media_marker,
    named_tool,
    no_equivalent,
    place_shared_setting,
)
from toolfold.adapters._dialects import CompiledTool, compile_tool, sent_name
from toolfold.adapters._output import compile_output
from toolfold.adapters._results import default_filename, joins_run, result_items
from toolfold.adapters.openai_responses._providers import (
    ENCRYPTED_REASONING,
    INSTEAD,
    MIN_OUTPUT_TOKENS,
    PREFIX,
    REASONING_PROVIDER,
    RENAMES,
    RESULT_FILE_TYPES,
    UNSUPPORTED_SETTINGS,
    is_reasoning_model,
)
from toolfold.adapters.openai_responses._response import as_summary, joined
from toolfold.runtime._model import Prepared, RequestReport
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from toolfold.runtime.core._request import ModelRequest, OutputSpec, ToolDefinition

Body = dict[str, Any]
_HANDLED = frozenset({"parallel_tool_calls"})
# Settings naming a field the codec builds: each merged with it or refused (`_own_setting`).
_OWNED = frozenset({"model", "input", "stream", "tools", "tool_choice", "text"})


def compiled_tool(tool: ToolDefinition) -> CompiledTool:
    """The flat function tool sent for ``tool``: strict whenever its schema allows [O2, O12]."""
    return compile_tool(tool, "openai-responses", strict=tool.strict)


def build_body(
    request: ModelRequest, model_name: str, *, stream: bool = False, openai: bool = True
) -> Prepared:
    """Build the JSON body of one ``POST /responses``.

    Args:
        request: The neutral request.
        model_name: The model id.
        stream: Ask for the SSE event stream.
        openai: The body goes to OpenAI's own API, which has no field for the
            `UNSUPPORTED_SETTINGS`; False for another server, which gets every
            setting as given.

    Raises:
        ModelConfigError: The request cannot be expressed (a named tool choice
            for a tool not in ``tools``, a message part the API cannot take, a
            setting OpenAI's API has no field for).
    """
    notes: list[str] = []
    stored = request.settings.get("store") is not False
    body: Body = {"model": model_name, "input": encode_input(request.messages, notes, stored)}
    tools = list(request.tools)
    if tools:
        body["tools"] = [compiled_tool(t).payload for t in tools]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice, tools)
        parallel = request.settings.get("parallel_tool_calls")
        if parallel is not None:
            body["parallel_tool_calls"] = bool(parallel)
    if request.output is not None:
        body["text"] = {"format": _output_format(request.output)}
    for key, value in request.settings.items():
        if value is None or key in _HANDLED:
            continue
        if key in _OWNED:
            _own_setting(body, key, value)
            continue
        if openai and key in UNSUPPORTED_SETTINGS:
            raise no_equivalent(key, "the OpenAI Responses API", INSTEAD.get(key))
        field = RENAMES.get(key, key)
        if field == "max_output_tokens":
            check_token_limit(key, value)
            if openai:
                _check_output_tokens(key, value)
        body[field] = value
    if is_reasoning_model(model_name):
        _include_reasoning(body)
    if stream:
        body["stream"] = True
    return Prepared(body, RequestReport(PREFIX, tuple(notes)))


def _own_setting(body: Body, key: str, value: Any) -> None:
    """Place a setting naming a field `build_body` builds: merged with it, or refused.

    ``tools`` (built-in tools such as ``{"type": "web_search"}``) go after the
    function tools; ``text`` (``{"verbosity": "low"}``) is merged with the
    output type's ``text.format``; ``tool_choice`` goes as given when the
    request chose none. ``tools``, ``model``, ``input`` and ``stream`` as
    every codec places them (`place_shared_setting`).

    Raises:
        ModelConfigError: The setting cannot be placed, naming it and what to
            use instead.
    """
    if key == "text":
        built = body.get("text")
        if not isinstance(value, Mapping):
            raise ModelConfigError(
                f"the setting 'text' must be an object (e.g. {{'verbosity': 'low'}}), "
                f"got {type(value).__name__}"
            )
        if built is not None and "format" in value:
            raise ModelConfigError(
                "the setting text={'format': ...} and the run's output type both set the "
                "Responses text.format; give one (the output type sends its JSON schema "
                "there; other text fields such as verbosity merge with it)"
            )
        body["text"] = {**built, **value} if built is not None else value
    elif key == "tool_choice":
        if "tool_choice" in body:
            raise ModelConfigError(
                f"the setting 'tool_choice' and the run's tool_choice={body['tool_choice']!r} "
                "both set the Responses tool_choice; give one"
            )
        body["tool_choice"] = value
    else:
        place_shared_setting(
            body,
            key,
            value,
            "OpenAI Responses",
            tools="Responses tool objects (built-in tools such as web_search)",
        )


def _include_reasoning(body: Body) -> None:
    """Ask a reasoning model for its encrypted reasoning (`ENCRYPTED_REASONING`),
    which toolfold sends back on the next step, after an ``include`` setting's items
    (``["web_search_call.action.sources"]``), which add to it and never drop it. An
    empty ``include=[]`` asks for none (for a server that refuses the item)."""
    given = body.get("include")
    if given is None:
        body["include"] = [ENCRYPTED_REASONING]
    elif isinstance(given, (list, tuple)) and given and ENCRYPTED_REASONING not in given:
        body["include"] = [*given, ENCRYPTED_REASONING]


def _check_output_tokens(key: str, value: Any) -> None:
    """Refuse a ``max_output_tokens`` below `MIN_OUTPUT_TOKENS`, which OpenAI answers with a 400."""
    if type(value) is int and value < MIN_OUTPUT_TOKENS:
        raise ModelConfigError(
            f"the setting {key}={value} is below the OpenAI Responses API's minimum: "
            f"max_output_tokens must be at least {MIN_OUTPUT_TOKENS} (CreateResponse); "
            f"raise it to {MIN_OUTPUT_TOKENS} or more"
        )


def _tool_choice(choice: str, tools: list[ToolDefinition]) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    named_tool(choice, tools)
    return {"type": "function", "name": choice}


def _output_format(output: OutputSpec) -> Body:
    compiled = compile_output(output, "openai-responses", strict=output.strict)
    return {
        "type": "json_schema",
        "name": output.name,
        "schema": compiled.schema_sent,
        "strict": compiled.strict,
    }


# --- input items -----------------------------------------------------------


def encode_input(
    messages: tuple[Message, ...], notes: list[str], stored: bool = True
) -> list[Body]:
    """The ``input`` items for the conversation; notes what could not be sent.

    Args:
        messages: The conversation.
        notes: Receives a note for each part dropped.
        stored: OpenAI keeps the responses (``store``, true by default). When
            False, a reasoning item that carries no reasoning of its own (neither
            encrypted content nor reasoning text: its id alone, which OpenAI
            resolves only from what it stored) is dropped with a note: OpenAI
            answers 404 "Item with id 'rs_...' not found" for it.
    """
    items: list[Body] = []
    # The user message holding what a run of messages with results (tool messages,
    # or a user message holding results) has beside them. It stays after the run's
    # outputs: a later message of the run puts its outputs before it, so the outputs
    # answering one turn's calls stay together. (Checked only for messages with
    # results, so other messages cost what they did.)
    after_run: Body | None = None
    for position, message in enumerate(inline_media(messages)):
        role = message.role
        parts = message.parts
        if role == "user" and len(parts) == 1 and type(parts[0]) is TextPart:
            items.append({"role": "user", "content": parts[0].text})
        elif role == "system":
            items.append({"role": "developer", "content": _system_text(message)})
        elif role == "assistant":
            _assistant(message, position, items, notes, stored)
        else:
            in_run = role == "tool" or joins_run(message)
            if after_run is not None and items[-1] is after_run and in_run:
                items.pop()
                after_run["content"].extend(_outputs(message, items))
                items.append(after_run)
                continue
            content = _outputs(message, items)
            if content:
                items.append({"role": "user", "content": content})
                after_run = items[-1] if in_run else None
    return items


def _system_text(message: Message) -> str:
    for part in message.parts:
        if not isinstance(part, (TextPart, ReasoningPart)):
            raise ModelConfigError(f"a system message can only hold text, got {part.kind!r}")
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


def _outputs(message: Message, items: list[Body]) -> list[Body]:
    """Add the user or tool message's results to ``items``; its other parts' content.

    The caller sends that content in a user message after the outputs (of
    the whole run of tool messages, for a tool message).
    """
    content: list[Body] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            output: str | list[Body] = _result_output(part) if part.parts else part.content
            items.append(
                {"type": "function_call_output", "call_id": part.call_id, "output": output}
            )
        elif isinstance(part, TextPart):
            content.append({"type": "input_text", "text": part.text})
        elif isinstance(part, (ImagePart, FilePart)):
            content.append(_input_media(part))
        elif isinstance(part, ToolCallPart):
            raise ModelConfigError(f"a {message.role} message cannot carry a tool call")
    return content


def _result_output(part: ToolResultPart) -> list[Body]:
    """A result with images or files: input_text / input_image / input_file items [O5].

    A file of a type the API refuses there goes as its description instead.
    """
    return result_items(part, _input_text, _result_media)


def _result_media(part: ImagePart | FilePart) -> Body:
    if isinstance(part, FilePart) and part.media_type not in RESULT_FILE_TYPES:
        known = ", ".join(sorted(RESULT_FILE_TYPES))
        raise ModelConfigError(
            f"the Responses API takes {known} files in a tool output, not {part.media_type!r}"
        )
    return _input_media(part)


def _input_text(text: str) -> Body:
    return {"type": "input_text", "text": text}


def _input_media(part: ImagePart | FilePart) -> Body:
    if isinstance(part, FilePart):
        return _file(part)
    # ``detail`` is required by the published spec (InputImageContent), "auto" its default.
    return {"type": "input_image", "image_url": _data_url(part), "detail": "auto"}


def _data_url(part: ImagePart | FilePart) -> str:
    if part.url is not None:
        return part.url
    if part.data is None:
        raise ModelConfigError(f"a {type(part).__name__} needs data or a url")
    return f"data:{part.media_type};base64,{base64.b64encode(part.data).decode()}"


def _file(part: FilePart) -> Body:
    if part.data is None and part.url is not None:
        return {"type": "input_file", "file_url": part.url}
    # OpenAI refuses inline file_data without a filename (its 400 asks for a file_id)
    file: Body = {
        "type": "input_file",
        "file_data": _data_url(part),
        "filename": part.filename or default_filename(part.media_type),
    }
    return file


def _assistant(
    message: Message, position: int, items: list[Body], notes: list[str], stored: bool
) -> None:
    text: list[str] = []
    # What the reasoning item sent keeps of the message item that followed it.
    following: Mapping[str, Any] = {}
    # A reasoning item was dropped (see below): the items it led to go without their ids,
    # which OpenAI would pair with it (400 "... provided without its required 'reasoning'
    # item"); a call keeps its call_id.
    orphaned = False
    parts = message.parts
    marker = None  # the marker of another provider's media dropped just before
    for index, part in enumerate(parts):
        if part is marker:
            continue  # its media's note says it all
        if isinstance(part, TextPart):
            text.append(part.text)
            continue
        if text:
            items.append(_assistant_text("".join(text), following))
            text = []
        following = {}
        if isinstance(part, ToolCallPart):
            items.append(_call(part, orphaned))
        elif (
            isinstance(part, ImagePart) and index + 1 < len(parts) and _image_call(parts[index + 1])
        ):
            continue  # the image of the item the part after it sends back
        elif isinstance(part, ReasoningPart) and _image_call(part):
            before = parts[index - 1] if index else None
            items.append(_image_item(part, before if isinstance(before, ImagePart) else None))
        elif isinstance(part, ReasoningPart) and (unread := _output_item(part)) is not None:
            kind, item_id = unread
            notes.append(
                f"messages[{position}]: the {kind} output item {item_id} not sent back: "
                "toolfold does not read that item type"
            )
        elif isinstance(part, ReasoningPart):
            item = reasoning_item(part)
            if item is not None and not stored and _by_id_only(item):
                orphaned = True
                notes.append(
                    f"messages[{position}]: reasoning item {item['id']} dropped: it has no "
                    "encrypted content (ask for it with include=['reasoning.encrypted_content']) "
                    "and with store=False OpenAI keeps no item to find by its id"
                )
            elif item is not None:
                items.append(item)
                following, orphaned = part.provider_data, False
            elif part.text or part.signature:
                notes.append(
                    f"messages[{position}]: reasoning from {part.provider or 'an unknown provider'} "
                    "dropped: the Responses API takes back only its own reasoning items"
                )
        elif isinstance(part, (ImagePart, FilePart)) and (marker := media_marker(parts, index)):
            # Another provider's answer media: dropped with a note, as its reasoning is.
            notes.append(
                f"messages[{position}]: {dropped_media_note(part, marker, 'the Responses API')}"
            )
        else:
            raise ModelConfigError(f"an assistant message cannot carry a {part.kind!r} part")
    if text and "".join(text):
        items.append(_assistant_text("".join(text), following))


def _image_call(part: object) -> bool:
    """Whether ``part`` keeps an ``image_generation_call`` item of this API's (`_response`)."""
    return (
        isinstance(part, ReasoningPart)
        and part.provider == REASONING_PROVIDER
        and isinstance(part.provider_data.get(IMAGE_CALL), (list, tuple))
    )


def _image_item(part: ReasoningPart, image: ImagePart | None) -> Body:
    """The ``image_generation_call`` item as it came [openai-openapi.yaml ImageGenToolCall]:
    id and status from ``part``, the image (the part before it) as the base64 ``result``."""
    kept = [v for v in part.provider_data[IMAGE_CALL] if isinstance(v, str)]
    item_id, status = (kept[0], kept[1]) if len(kept) == 2 else ("", "completed")
    result = None
    if image is not None and image.data is not None:
        result = base64.b64encode(image.data).decode()
    return {"type": IMAGE_CALL, "id": item_id, "status": status, "result": result}


def _output_item(part: ReasoningPart) -> tuple[str, str] | None:
    """``(type, id)`` of the output item toolfold did not read that ``part`` names, or None."""
    found = part.provider_data.get(OUTPUT_ITEM) if part.provider == REASONING_PROVIDER else None
    if not isinstance(found, (list, tuple)) or not found or not isinstance(found[0], str):
        return None
    item_id = found[1] if len(found) > 1 and isinstance(found[1], str) else ""
    return found[0], item_id


def _assistant_text(text: str, following: Mapping[str, Any]) -> Body:
    """The assistant's text: the output message item it came as when the reasoning item
    sent before it keeps that item's id (``following["message_id"]``; OpenAI wants a
    reasoning item followed by the item that followed it), with its ``phase`` when it had
    one, else a plain assistant message."""
    message_id, phase = following.get("message_id"), following.get("message_phase")
    if not isinstance(message_id, str):
        return {"role": "assistant", "content": text}
    # OutputMessage and OutputTextContent, with the fields the published spec requires.
    content = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    item: Body = {
        "type": "message",
        "id": message_id,
        "status": "completed",
        "role": "assistant",
        "content": [content],
    }
    if isinstance(phase, str):  # newer models want it back (spec MessagePhase)
        item["phase"] = phase
    return item


def _call(call: ToolCallPart, orphaned: bool) -> Body:
    """The function_call item of ``call``; without its item id when ``orphaned`` (the
    reasoning item it followed was dropped)."""
    item: Body = {
        "type": "function_call",
        "call_id": call.id,
        "name": sent_name(call.name, "openai-responses"),  # (a made-up name: a valid stand-in)
        "arguments": call.arguments_text or "{}",
    }
    item_id = call.provider_data.get("item_id")
    if isinstance(item_id, str) and not orphaned:
        item["id"] = item_id
    return item


def reasoning_item(part: ReasoningPart) -> Body | None:
    """The reasoning input item a part stands for, or None when it is not this API's.

    The part keeps the item id in ``provider_data["item_id"]`` and the
    encrypted content (when asked for) in ``signature``. The summary goes back
    part for part as ``provider_data["summary"]`` keeps it (an item with
    ``reasoning_text`` content, or a summary of several parts), the content as
    ``provider_data["content"]`` does; a part without ``"summary"`` (OpenAI's
    one-part summary, or a part recorded before it was kept) has its text as
    its one summary part (none when the text is the content).
    """
    data = part.provider_data
    item_id = data.get("item_id")
    if part.provider != REASONING_PROVIDER or not isinstance(item_id, str):
        return None
    content = _texts(data.get("content"))
    if "summary" in data:  # the summary's parts as they came
        summary = _texts(data["summary"])
    elif content and part.text == joined(content):  # a part with no summary, its text the content
        summary = []
    else:  # a one-part summary, or one recorded before "summary" was kept: the text is it
        summary = as_summary(part.text)
    item: Body = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text} for text in summary],
    }
    if content:
        item["content"] = [{"type": "reasoning_text", "text": text} for text in content]
    if part.signature is not None:
        item["encrypted_content"] = part.signature
    return item


def _by_id_only(item: Body) -> bool:
    """Whether the reasoning ``item`` carries no reasoning of its own (no encrypted content,
    no reasoning text), so OpenAI reads it from what it stored, found by its id."""
    return "encrypted_content" not in item and "content" not in item


def _texts(value: object) -> list[str]:
    """The strings of a list ``provider_data`` keeps (none for anything else)."""
    return [t for t in value if isinstance(t, str)] if isinstance(value, list) else []
