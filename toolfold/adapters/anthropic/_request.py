"""Neutral `ModelRequest` -> Anthropic Messages request body (pure functions).

Rules (providers.md §3 and the spec's ``CreateMessageParams``):

- System messages become the top-level ``system`` field, joined in order.
- Tool results go back in a ``user`` turn as ``tool_result`` blocks, with
  ``is_error: true`` for a failed call; results of consecutive tool messages
  (and a user message that follows them) make one user turn, results first,
  because the turn after a ``tool_use`` must answer every call before any
  text [A1, A8].
- Thinking blocks go back unchanged (text and signature); a redacted block
  goes back as ``redacted_thinking`` with its data. Reasoning from another
  provider, or without a signature, cannot be verified by the API and is left
  out.
- Call ids must match ``^[a-zA-Z0-9_-]+$`` (``RequestToolUseBlock.id``):
  an id from another provider that does not (Kimi's ``functions.get:0``)
  is rewritten the same way in the call and its result (`anthropic_id`).
- ``tool_choice``: ``auto``, ``any`` (neutral ``required``), ``tool`` +
  ``name``, ``none``; ``parallel_tool_calls=False`` is
  ``disable_parallel_tool_use: true`` [A6 tool_choice_*_param.py].
- A request without tools whose history holds calls or results (a handoff
  target without tools, a run continued tool-less) names those tools with
  stand-in definitions and ``tool_choice: none`` (`_tools_of_history`), by the
  names the calls are sent by (`sent_name`: a made-up one made valid): the
  API answers 400 "Requests which include tool_use or tool_result blocks
  must define tools" (anthropics/anthropic-sdk-python#494).
"""

from __future__ import annotations

import base64
import hashlib
import math
import numbers
import re
from collections.abc import Iterable, Mapping
from typing import Any

from toolfold._errors import ModelConfigError
from toolfold.adapters._codec import (
    check_token_limit,
    dropped_media_note,
    inline_media,
    media_marker,
    named_tool,
    no_equivalent,
    place_shared_setting,
    url_excerpt,
)
from toolfold.adapters._dialects import CompiledTool, compile_tool, sent_name
from toolfold.adapters._output import compile_output
from toolfold.adapters._results import result_items
from toolfold.adapters.anthropic._provider import (
    BETA_ONLY_FIELDS,
    DEFAULT_MAX_TOKENS,
    IMAGE_TYPES,
    INSTEAD,
    RENAMED_SETTINGS,
    UNSUPPORTED_SETTINGS,
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
from toolfold.runtime.core._request import ModelRequest, OutputSpec, ToolDefinition

Body = dict[str, Any]

PROVIDER = "anthropic"
_HANDLED_SETTINGS = frozenset({"parallel_tool_calls", "max_tokens"})
# Settings naming a field the codec builds: each merged with it or refused (`_own_setting`).
_OWNED = frozenset(
    {"model", "messages", "stream", "system", "tools", "tool_choice", "output_format"}
)
_NOT_ID = re.compile(r"[^A-Za-z0-9_-]")


def anthropic_id(call_id: str) -> str:
    """The call id as Anthropic takes it (ASCII letters, digits, ``_`` and ``-``).

    Ids that fit pass unchanged, so Anthropic's own ``toolu_`` ids round-trip.
    Any other id (``functions.get_weather:0`` from an OpenAI-compatible
    server, or an empty one) has every other character replaced by ``_`` and
    12 hex digits of its SHA-256 appended: the same input gives the same id,
    so a call and its result still match, and two ids that differ only in
    the replaced characters stay apart.
    """
    if call_id and not _NOT_ID.search(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{_NOT_ID.sub('_', call_id)}_{digest}"


def prepare(request: ModelRequest, model_name: str, *, stream: bool = False) -> Prepared:
    """`build_body`, with the report of what was left out (reasoning Anthropic cannot verify)."""
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
    """Build the JSON body of one ``POST /v1/messages``.

    Args:
        request: The neutral request.
        model_name: Anthropic's model id, e.g. ``"claude-sonnet-4-5"``.
        stream: Ask for a Server-Sent Events stream.
        notes: Receives one sentence per reasoning part left out.

    Raises:
        ModelConfigError: The request cannot be expressed for Anthropic (a
            named tool choice for a tool not offered, a forced tool with
            extended thinking on, a setting the API has no field for, a file
            type it cannot take).
        SchemaCompileError: A tool asked for strict mode and its schema
            cannot be sent strict.
    """
    settings = request.settings
    max_tokens = settings.get("max_tokens")
    budget = _thinking_budget(settings)
    if max_tokens is None:
        max_tokens = _default_max_tokens(budget)
    else:
        check_token_limit("max_tokens", max_tokens)
    if max_tokens < 1:
        raise ModelConfigError(
            f"the setting max_tokens={max_tokens!r} is below the Anthropic Messages API's "
            "minimum: max_tokens must be at least 1 (CreateMessageParams); raise it"
        )
    body: Body = {"model": model_name, "max_tokens": max_tokens}
    system = "\n\n".join(_system_text(m) for m in request.messages if m.role == "system")
    if _sendable(system):
        body["system"] = system
    body["messages"] = encode_messages(request.messages, notes)
    if request.tools:
        _add_tools(body, request)
    if request.output is not None:
        body["output_format"] = {"type": "json_schema", "schema": output_schema(request.output)}
    _add_settings(body, settings, request.tool_choice)
    if "tools" not in body:
        _tools_of_history(body, request.messages, notes)
    if stream:
        body["stream"] = True
    return body


def _tools_of_history(body: Body, messages: Iterable[Message], notes: list[str] | None) -> None:
    """Stand-in definitions of the tools the history's calls and results name, offered
    with ``tool_choice: none``, in a body without tools (noted).

    The API refuses ``tool_use`` or ``tool_result`` blocks in a request that defines no
    tools (400 "Requests which include tool_use or tool_result blocks must define
    tools", anthropics/anthropic-sdk-python#494); the conversation is sent whole, as
    the other providers take it, and the model cannot call the stand-ins.
    """
    names: dict[str, None] = {}
    for message in messages:
        for part in message.parts:
            if type(part) is ToolCallPart:
                names[sent_name(part.name, "anthropic")] = None  # (the name its call is sent by)
            elif type(part) is ToolResultPart:
                names[sent_name(part.tool_name, "anthropic")] = None
    if not names:
        return
    body["tools"] = [
        {
            "name": name,
            "description": "A tool called earlier in this conversation; not offered now.",
            "input_schema": {"type": "object"},
        }
        for name in names
    ]
    # Whatever a setting asked (an agent sharing another's settings): the stand-ins
    # must not be callable, so the choice is none.
    asked = body.get("tool_choice")
    body["tool_choice"] = {"type": "none"}
    if notes is not None:
        notes.append(
            f"the history calls tools and the request offers none: {', '.join(names)} "
            "sent as stand-in definitions with tool_choice none (the API refuses "
            "tool_use blocks in a request without tools)"
            + ("" if asked in (None, {"type": "none"}) else f"; tool_choice {asked} not sent")
        )


def _system_text(message: Message) -> str:
    """A system message's text.

    Raises:
        ModelConfigError: It holds an image, file or other non-text part,
            which Anthropic's ``system`` (text blocks only) cannot carry.
    """
    for part in message.parts:
        if not isinstance(part, (TextPart, ReasoningPart)):
            raise ModelConfigError(
                f"a system message can only hold text for Anthropic, got {part.kind!r}: "
                "put images and files in a user message"
            )
    return message.text


def _default_max_tokens(budget: int | None) -> int:
    """`DEFAULT_MAX_TOKENS`, or more when a thinking ``budget`` needs it.

    The API wants ``budget_tokens`` below ``max_tokens``: with a budget of
    4096 or more and no ``max_tokens`` given, the default leaves
    `DEFAULT_MAX_TOKENS` for the answer after the budget. (A ``max_tokens``
    the user gives is sent as it is: with interleaved thinking the budget may
    exceed it.)
    """
    if budget is not None and budget >= DEFAULT_MAX_TOKENS:
        return budget + DEFAULT_MAX_TOKENS
    return DEFAULT_MAX_TOKENS


def _thinking_budget(settings: Mapping[str, Any]) -> int | None:
    """The thinking budget as whole tokens, or None (thinking off, or no number given).

    A budget given as any real number counts (``5000.0``, a NumPy integer),
    as the API reads it.

    Raises:
        ModelConfigError: Thinking is on and its budget is inf or nan, which
            no JSON body can carry (checked whether or not ``max_tokens`` is
            given).
    """
    if not _thinking_on(settings):
        return None
    budget = settings["thinking"].get("budget_tokens")
    if type(budget) is bool or not isinstance(budget, numbers.Real):
        return None
    try:
        return int(budget if isinstance(budget, numbers.Integral) else math.ceil(budget))
    except (OverflowError, ValueError):  # inf, nan
        raise ModelConfigError(
            f"the setting thinking={{..., 'budget_tokens': {budget!r}}} is no number of "
            "tokens: the Anthropic Messages API wants a whole number of at least 1024 "
            "(below max_tokens); give one"
        ) from None


def _thinking_on(settings: Mapping[str, Any]) -> bool:
    """Whether the ``thinking`` setting turns extended thinking on (``{"type": "enabled"}``)."""
    thinking = settings.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") == "enabled"


def is_beta(body: Mapping[str, Any]) -> bool:
    """The body uses a beta feature (a strict tool, ``output_format``...): send it to the beta endpoint."""
    if not BETA_ONLY_FIELDS.isdisjoint(body):
        return True
    return any(tool.get("strict") for tool in body.get("tools") or ())


def compiled_tool(tool: ToolDefinition) -> CompiledTool:
    """The compilation of ``tool`` this adapter sends: strict only when the tool asks.

    Strict tools need the beta endpoint, so a tool that leaves ``strict`` unset
    goes as its own schema, unchanged.
    """
    return compile_tool(tool, "anthropic", strict=bool(tool.strict))


def output_schema(output: OutputSpec) -> dict[str, Any]:
    """The schema of ``output_format``, always in Anthropic's strict subset.

    ``output_format`` has no loose mode: Anthropic refuses a schema outside the
    subset (a bound, a recursive schema) with a 400. Keywords the subset lacks
    (bounds, ``pattern``...) go into descriptions, as the Anthropic SDK moves
    them (toolfold still checks the answer against the whole schema); with
    ``output.strict`` True, any such loss is an error instead.

    Raises:
        SchemaCompileError: A schema the subset cannot carry at all (a
            recursive one, a map, a value of any type), or with
            ``output.strict`` True one it would lose a keyword of.
    """
    compiled = compile_output(
        output,
        "anthropic",
        strict=True,
        allow_loss=not output.strict,
        hint=(
            "\n(Anthropic's structured output takes only its strict subset of JSON Schema: "
            "no recursion, objects with declared properties, arrays with typed items)"
        ),
    )
    return compiled.schema_sent


def _add_tools(body: Body, request: ModelRequest) -> None:
    tools = list(request.tools)
    body["tools"] = [compiled_tool(t).payload for t in tools]
    choice = _tool_choice(request.tool_choice, tools)
    if request.settings.get("parallel_tool_calls") is False and request.tool_choice != "none":
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice is not None:
        if choice["type"] in ("any", "tool") and _thinking_on(request.settings):
            raise ModelConfigError(
                f"tool_choice {request.tool_choice!r} forces a tool, which Anthropic rejects "
                "while extended thinking is on; use 'auto' or turn thinking off"
            )
        body["tool_choice"] = choice


def _tool_choice(choice: str | None, tools: list[ToolDefinition]) -> dict[str, Any] | None:
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    named_tool(choice, tools)
    return {"type": "tool", "name": choice}


def _add_settings(body: Body, settings: Mapping[str, Any], tool_choice: str | None) -> None:
    for key, value in settings.items():
        if value is None or key in _HANDLED_SETTINGS:
            continue
        if key in _OWNED:
            _own_setting(body, key, value, settings, tool_choice)
            continue
        if key in UNSUPPORTED_SETTINGS:
            raise no_equivalent(key, "the Anthropic Messages API", INSTEAD.get(key))
        if key == "stop" and isinstance(value, str):
            value = [value]
        body[RENAMED_SETTINGS.get(key, key)] = value


def _own_setting(
    body: Body, key: str, value: Any, settings: Mapping[str, Any], tool_choice: str | None
) -> None:
    """Place a setting naming a field `build_body` builds: merged with it, or refused.

    ``system`` (a string or a list of text blocks, e.g. with ``cache_control``)
    goes before the system messages' text, which follows as one more block;
    ``tools`` (server tools such as web search) go after the function tools;
    ``tool_choice`` goes as given when the request chose none (a forced tool
    while thinking is on still refused); ``output_format`` goes as given when
    the request has no output type. (``output_config``, even with a ``format``,
    is no owned setting: it goes as given beside an output type or an
    ``output_format`` setting, as toolfold always sent it, so runs saved with
    both resume.) ``tools``, ``model``, ``messages`` and
    ``stream`` as every codec places them (`place_shared_setting`).

    Raises:
        ModelConfigError: The setting cannot be placed, naming it and what to
            use instead.
    """
    if key == "system":
        system = _merged_system(value, body.get("system"))
        if system is None:
            body.pop("system", None)
        else:
            body["system"] = system
    elif key == "tool_choice":
        if "tool_choice" in body:
            raise ModelConfigError(
                f"the setting 'tool_choice' and the run's tool_choice={tool_choice!r} (or "
                "parallel_tool_calls=False) both set Anthropic's tool_choice; give one"
            )
        forced = isinstance(value, Mapping) and value.get("type") in ("any", "tool")
        if forced and _thinking_on(settings):
            raise ModelConfigError(
                f"the setting tool_choice={value!r} forces a tool, which Anthropic rejects "
                "while extended thinking is on; use 'auto' or turn thinking off"
            )
        body["tool_choice"] = value
    elif key == "output_format" and "output_format" in body:
        raise ModelConfigError(
            "the setting 'output_format' and the run's output type both set Anthropic's "
            "output_format; give one (the output type sends its schema there)"
        )
    elif key == "output_format":
        body["output_format"] = value
    else:
        place_shared_setting(
            body,
            key,
            value,
            "Anthropic",
            tools="Anthropic tool objects (server tools such as web search)",
            model=" ('anthropic:<model>')",
        )


def _merged_system(value: Any, instructions: str | None) -> Any:
    """The ``system`` field of a ``system`` setting and the system messages' text.

    The setting's blocks come first: a ``cache_control`` breakpoint on them
    caches them whatever instructions follow. Blank text (a block of it, or the
    whole string) is left out, as the API refuses it; None when nothing is left.
    """
    if isinstance(value, str):
        if not instructions:
            return value if _sendable(value) else None
        blocks: list[Any] = [{"type": "text", "text": value}] if _sendable(value) else []
    elif isinstance(value, (list, tuple)) and all(isinstance(b, Mapping) for b in value):
        blocks = [block for block in value if not _blank_block(block)]
    else:
        raise ModelConfigError(
            "the setting 'system' must be a string or a list of text blocks "
            f"({{'type': 'text', 'text': ..., 'cache_control': ...}}), got {type(value).__name__}"
        )
    if not blocks:
        return instructions
    if instructions:
        blocks.append({"type": "text", "text": instructions})
    return blocks


def _blank_block(block: Mapping[str, Any]) -> bool:
    """Whether ``block`` is a text block of only whitespace (or none), which the API refuses."""
    text = block.get("text")
    return block.get("type") == "text" and isinstance(text, str) and not _sendable(text)


# --- messages --------------------------------------------------------------


def encode_messages(messages: Iterable[Message], notes: list[str] | None = None) -> list[Body]:
    """The ``messages`` array: user and tool messages merge into user turns, results first.

    Reasoning left out (another provider's, or unsigned) is noted in ``notes``.
    """
    turns: list[tuple[str, list[Body]]] = []
    blank_prompt = False  # the last message is a user message left out as blank
    for position, message in enumerate(inline_media(messages)):
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if role == "assistant":
            blocks = _assistant_blocks(message.parts, position, notes)
        else:
            blocks = _user_blocks(message)
        blank_prompt = not blocks and message.role == "user"
        if not blocks:
            # Nothing the API takes (only blank text, or another provider's
            # reasoning): the message is left out, and its neighbours merge.
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    if not turns:
        # ``"messages": []`` (or a lone blank text), which the API answers with a 400. A blank
        # prompt after other turns is left out like any blank message (after tool results, the
        # request goes on from them as inside a tool loop), but not after an answer: see below.
        raise ModelConfigError(
            "the prompt is empty or only whitespace, and no other message has anything to "
            "send, which the Anthropic Messages API refuses (a conversation needs a message "
            "with non-whitespace text, an image, a file or a tool result); give a prompt with "
            "some text (a saved run that failed on one: resume(state, message=...))"
        )
    if blank_prompt and turns[-1][0] == "assistant":
        # Left out, the blank prompt would leave the request ending with the last answer: a
        # prefill, which Claude continues (an answer ending in whitespace gets a 400, and
        # models from Claude 4.6 on refuse any prefill), so the run would return a fragment.
        raise ModelConfigError(
            "the prompt is empty or only whitespace and comes after an assistant answer; the "
            "Anthropic Messages API takes no blank message, and without it the request would "
            "end with that answer, which Claude would continue as a prefill instead of "
            "answering; give a prompt with some text, or, to prefill on purpose, end the "
            'messages with the start of the answer: run([Message.user("..."), '
            'Message.assistant("...")])'
        )
    out: list[Body] = []
    for role, blocks in turns:
        if role == "user":
            results = [b for b in blocks if b["type"] == "tool_result"]
            if results and len(results) < len(blocks):
                blocks = [*results, *(b for b in blocks if b["type"] != "tool_result")]
            if len(blocks) == 1 and blocks[0]["type"] == "text":
                out.append({"role": "user", "content": blocks[0]["text"]})
                continue
        out.append({"role": role, "content": blocks})
    return out


def _user_blocks(message: Message) -> list[Body]:
    blocks: list[Body] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            result: Body = {
                "type": "tool_result",
                "tool_use_id": anthropic_id(part.call_id),
                "content": _result_content(part) if part.parts else part.content,
            }
            if part.is_error:
                result["is_error"] = True
            blocks.append(result)
        elif isinstance(part, TextPart):
            text = part.text
            if text and not text.isspace():  # blank text is left out (`_sendable`)
                blocks.append({"type": "text", "text": text})
        elif isinstance(part, ImagePart):
            blocks.append(_image(part))
        elif isinstance(part, FilePart):
            blocks.append(_document(part))
        elif isinstance(part, ToolCallPart):
            raise ModelConfigError(f"a {message.role} message cannot carry a tool call")
    return blocks


def _sendable(text: str) -> bool:
    """Whether a text block of ``text`` is sent. An empty or whitespace-only one is
    left out: it says nothing the model needs, and the API refuses a message (or
    ``system``) whose only text it is (400 "text content blocks must contain
    non-whitespace text"; beside other blocks it is taken)."""
    return bool(text) and not text.isspace()


def _result_content(part: ToolResultPart) -> list[Body]:
    """A result with images or files: text, image and document blocks [A6 tool_result]."""
    return result_items(part, _text_block, _media_block)


def _text_block(text: str) -> Body:
    return {"type": "text", "text": text}


def _media_block(part: ImagePart | FilePart) -> Body:
    return _image(part) if isinstance(part, ImagePart) else _document(part)


def _assistant_blocks(
    parts: tuple[Part, ...], position: int, notes: list[str] | None
) -> list[Body]:
    blocks: list[Body] = []
    marker = None  # the marker of the media part dropped just before
    for index, part in enumerate(parts):
        if part is marker:
            continue  # its media's note says it all
        if isinstance(part, TextPart):
            text = part.text
            if text and not text.isspace():  # blank text is left out (`_sendable`)
                blocks.append({"type": "text", "text": text})
        elif isinstance(part, ToolCallPart):
            arguments = part.arguments if part.arguments is not None else {}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": anthropic_id(part.id),
                    "name": sent_name(part.name, "anthropic"),  # (a made-up name: a stand-in)
                    "input": arguments,
                }
            )
        elif isinstance(part, ReasoningPart):
            block = thinking_block(part)
            if block is not None:
                blocks.append(block)
            elif notes is not None and (part.text or part.signature):
                source = part.provider or "an unknown provider"
                why = "is unsigned" if part.provider == PROVIDER else f"comes from {source}"
                notes.append(
                    f"messages[{position}]: reasoning left out: it {why}, and Anthropic "
                    "only takes back its own signed thinking"
                )
        elif isinstance(part, (ImagePart, FilePart)) and (marker := media_marker(parts, index)):
            # Another provider made it (Anthropic makes no media): dropped with a
            # note, as another provider's reasoning is.
            if notes is not None:
                notes.append(
                    f"messages[{position}]: {dropped_media_note(part, marker, 'Anthropic')}"
                )
        else:
            raise ModelConfigError(
                f"an assistant message for Anthropic can hold text, reasoning and tool calls, "
                f"not {part.kind!r}"
            )
    return blocks


def thinking_block(part: ReasoningPart) -> Body | None:
    """The block a reasoning part goes back as, or None when Anthropic cannot take it."""
    if part.signature is None or part.provider not in (None, PROVIDER):
        return None
    if part.provider_data.get("type") == "redacted_thinking":
        return {"type": "redacted_thinking", "data": part.signature}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _image(part: ImagePart) -> Body:
    if part.url is not None:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    if part.data is None:
        raise ModelConfigError("an ImagePart needs data or a url")
    if part.media_type not in IMAGE_TYPES:
        known = ", ".join(sorted(IMAGE_TYPES))
        raise ModelConfigError(f"Anthropic takes images of type {known}, not {part.media_type!r}")
    data = base64.b64encode(part.data).decode()
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type, "data": data},
    }


def _document(part: FilePart) -> Body:
    if part.media_type == "application/pdf":
        if part.url is not None:
            source: Body = {"type": "url", "url": part.url}
        elif part.data is not None:
            data = base64.b64encode(part.data).decode()
            source = {"type": "base64", "media_type": "application/pdf", "data": data}
        else:
            raise ModelConfigError("a FilePart needs data or a url")
    elif part.media_type == "text/plain" and part.data is not None:
        try:
            text = part.data.decode("utf-8")
        except UnicodeDecodeError as error:
            name = f" {part.filename!r}" if part.filename else ""
            raise ModelConfigError(
                f"the text/plain FilePart{name} is not UTF-8 ({error.reason} at byte "
                f"{error.start:,} of {len(part.data):,}); Anthropic takes a text document as "
                "UTF-8 text: decode it from its encoding and give the text as a TextPart, "
                "or its UTF-8 bytes"
            ) from None
        source = {"type": "text", "media_type": "text/plain", "data": text}
    else:
        raise ModelConfigError(
            "Anthropic takes PDF files (inline or by URL) and inline text/plain files, "
            f"not {part.media_type!r}" + (f" by URL ({url_excerpt(part.url)})" if part.url else "")
        )
    block: Body = {"type": "document", "source": source}
    if part.filename:
        block["title"] = part.filename
    return block
