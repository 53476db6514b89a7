"""Neutral `ModelRequest` -> Chat Completions request body (a pure function)."""

from __future__ import annotations

import base64
import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar, cast

from toolfold._errors import ModelConfigError
from toolfold.adapters._call_ids import mistral_id as mistral_id  # re-exported
from toolfold.adapters._codec import (
    AUDIO,
    IMAGE_CALL,
    OUTPUT_ITEM,
    check_token_limit,
    dropped_media_note,
    inline_media,
    media_marker,
    named_tool,
    place_shared_setting,
    refuse_choices,
    url_excerpt,
)
from toolfold.adapters._dialects import CompiledTool, Dialect, compile_tool, sent_name
from toolfold.adapters._http._json import encode_text, sendable
from toolfold.adapters._output import compile_output
from toolfold.adapters._results import (
    beside_items,
    default_filename,
    joins_run,
    media_of,
    text_of,
)
from toolfold.adapters.gemini._providers import SKIP_SIGNATURE
from toolfold.adapters.openai_chat._providers import REASONING_DETAILS, ChatProvider
from toolfold.adapters.openai_chat._stream import merge_details
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    set_wire_memo,
)
from toolfold.runtime.core._request import ModelRequest, OutputSpec, ToolDefinition
from toolfold.runtime.core._same_json import same_json, typed_leaves

Body = dict[str, Any]
T = TypeVar("T")
ToolCompiler = Callable[[ToolDefinition, ChatProvider], Mapping[str, Any]]
OutputCompiler = Callable[[OutputSpec, ChatProvider], Mapping[str, Any]]

# Neutral settings the codec places itself; everything else goes to the body as is.
_HANDLED_SETTINGS = frozenset({"parallel_tool_calls", "max_tokens", "stream_options"})
# Settings naming a field the codec builds: each merged with it or refused (`_own_setting`).
_OWNED = frozenset({"model", "messages", "stream", "tools", "tool_choice", "response_format"})
# OpenAI's input_audio part takes only these formats [O4 chat_completion_content_part_input_audio_param.py].
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def build_body(
    request: ModelRequest,
    model_name: str,
    provider: ChatProvider,
    *,
    stream: bool = False,
    compile_tool: ToolCompiler | None = None,
    compile_output: OutputCompiler | None = None,
) -> Body:
    """Build the JSON body of one ``POST /chat/completions``.

    Args:
        request: The neutral request.
        model_name: The provider's model id.
        provider: The family row whose quirks apply.
        stream: Ask for an SSE stream (with usage, where the provider takes the option).
        compile_tool: Turns a tool into the ``function`` object (schema dialect);
            defaults to the schema as given, strict only when asked.
        compile_output: Turns the output spec into the ``json_schema`` object.

    Raises:
        ModelConfigError: The request cannot be expressed for this provider (a
            named tool choice for a tool not in ``tools``, a file by URL...).
    """
    rewrite_id = id_rewrite(provider) or _same
    messages = encode_messages(request.messages, provider, rewrite_id)
    return _body(request, model_name, provider, messages, stream, compile_tool, compile_output)


def encode_body(
    request: ModelRequest,
    model_name: str,
    provider: ChatProvider,
    *,
    stream: bool = False,
    notes: list[str] | None = None,
) -> bytes | None:
    """`build_body` with the default compilers, as the JSON bytes the transport sends.

    The same bytes as encoding `build_body`'s dict, made from each message's
    JSON memoized on the message (`wire_memo`): a message never changes, so a
    tool loop, which resends the whole conversation on every request, encodes
    each message once instead of once per request; each tool's entry is
    memoized per compilation (`compile_tool` makes a new one when a schema
    changes). None where the messages do not encode one by one (a tool's
    images and files, and a tool message's parts beside its results, travel in
    a user message after the run of tool messages;
    json_object output appends a message) or a ``tools`` setting adds to
    the tools: `build_body` then.

    Reasoning the provider does not take back is left out as `build_body`
    leaves it out, and said: with ``notes`` (a list), each part left out is
    appended to it as `reasoning_notes` words it, for the caller to log; with
    none, such a request is None (`build_body` then, whose report notes it).
    A message's notes are memoized with its JSON.

    Raises:
        ModelConfigError: As `build_body`.
    """
    if request.output is not None and not provider.json_schema_output:
        return None
    rewrite_id = id_rewrite(provider)
    fragments: list[str] = []
    bridge = provider.assistant_after_tool
    edges: list[tuple[bool, bool]] = []  # with a `bridge`: each fragment's (see `_bridged`)
    for position, message in enumerate(request.messages):
        memo = message._wire  # `wire_memo`, inlined: once per message per request
        fragment = memo[1] if memo is not None and memo[0] is provider else None
        if fragment is None:
            fragment = _loop_fragment(message, provider, rewrite_id)
            if fragment is None:
                if _sent_after(message):
                    return None
                text = encode_text(encode_messages((message,), provider, rewrite_id or _same))
                reasons = _left_out(message, provider)
                fragment = _Noted(text[1:-1], reasons) if reasons else text[1:-1]
            set_wire_memo(message, provider, fragment)
        if type(fragment) is not str:  # reasoning left out (a type test: cheaper than isinstance)
            if notes is None:
                return None
            noted = cast(_Noted, fragment)
            notes.extend([f"messages[{position}]: {why}" for why in noted.reasons])
            fragment = noted.text
        if fragment:
            if bridge is not None:
                edges.append((_starts_with_user(message), _ends_with_tool(message)))
            fragments.append(fragment)
    if bridge is not None:
        turn = encode_text({"role": "assistant", "content": bridge})
        fragments = _bridged(zip(edges, fragments, strict=True), lambda: turn)
    frame = _frame(request, model_name, provider, stream)
    if frame is None:
        return None  # a tools setting adds to the tools: let build_body place them
    text = f"{frame[0]}{','.join(fragments)}{frame[1]}"
    try:
        return text.encode()
    except UnicodeEncodeError:
        return sendable(text).encode()  # a lone surrogate: sent as U+FFFD (see `dumps`)


class _Noted(NamedTuple):
    """A message's memoized JSON that leaves reasoning out, and why (see `_left_out`)."""

    text: str
    reasons: tuple[str, ...]


# Each tool's schema, read without a comprehension's frame (see `_frame`).
_parameters = operator.attrgetter("parameters")
# Where `encode_body` splices the memoized messages in (never sent).
_SPLICED: Any = []
_SPLICED_KEYS = frozenset({"model", "messages", "tools"})
_MAX_FRAMES = 1024
# (provider, tools, model, stream, choice, settings' JSON) -> what the frame
# was made from and the frame: a run sends the same one on every request.
_frames: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _frame(
    request: ModelRequest, model_name: str, provider: ChatProvider, stream: bool
) -> tuple[str, str] | None:
    """The body's JSON before and after the messages' (None: see `encode_body`).

    Memoized per run: the same tools, choice and settings give the same
    text. The memo holds the tuple of tools (so its id names it while the
    entry lives) and the schemas its tools were compiled from: a
    `ToolDefinition` is frozen, so only its ``parameters`` can change, in
    place (a user's dict), and a hit compares each one with its schema, types
    included (`same_json`, what `compile_tool` checks on each call, without
    its key to build and its cache to look up; a changed schema, a ``1``
    become ``True`` included, misses and compiles anew).
    """
    tools, settings = request.tools, request.settings
    if settings.get("tools") is not None:
        return None  # the tools setting goes after the built tools: `build_body` merges them
    key = (
        id(provider),
        id(tools),
        model_name,
        stream,
        request.tool_choice,
        encode_text(settings) if settings else "",
    )
    hit = _frames.get(key) if request.output is None else None
    if (
        hit is not None
        and hit[0] is provider
        and hit[1] is tools
        and same_json(list(map(_parameters, tools)), hit[2], hit[3])
    ):
        return hit[4]  # type: ignore[no-any-return]
    compiled = {id(tool): compiled_tool(tool, provider) for tool in tools}  # each tool once

    def entries(chosen: list[ToolDefinition], provider: ChatProvider) -> Any:
        return _tools_json([compiled[id(tool)] for tool in chosen])

    # (``model``, ``messages`` and ``tools`` settings never reach the body: the first
    # two are refused, the last is merged by `build_body`, above.)
    body = _body(request, model_name, provider, _SPLICED, stream, None, None, entries)
    spliced = body.get("tools")
    rest = {key: value for key, value in body.items() if key not in _SPLICED_KEYS}
    tail = encode_text(rest)[1:] if rest else "}"
    after = f',"tools":{spliced}' if spliced is not None else ""
    frame = (
        f'{{"model":{encode_text(model_name)},"messages":[',
        f"]{after}{',' if rest else ''}{tail}",
    )
    # Not memoized: an output spec (no part of the key), or a tool that is not a
    # frozen `ToolDefinition` (any object with its attributes compiles; its name
    # or description could change in place).
    if request.output is None and all(type(tool) is ToolDefinition for tool in tools):
        if len(_frames) >= _MAX_FRAMES:
            _frames.clear()
        schemas = [compiled[id(tool)].source_schema for tool in tools]
        _frames[key] = (provider, tools, schemas, typed_leaves(schemas), frame)
    return frame


_MAX_TOOL_ENTRIES = 4096
_tool_json: dict[int, tuple[CompiledTool, str]] = {}


class _JSONText(str):
    """JSON already encoded, for `encode_body` to splice in."""

    __slots__ = ()


def _tools_json(compilations: list[CompiledTool]) -> Any:
    """The ``tools`` array as JSON, each entry encoded once per compilation."""
    entries = []
    for compiled in compilations:
        hit = _tool_json.get(id(compiled))
        if hit is None or hit[0] is not compiled:
            hit = (
                compiled,
                encode_text({"type": "function", "function": compiled.payload["function"]}),
            )
            if len(_tool_json) >= _MAX_TOOL_ENTRIES:
                _tool_json.clear()
            _tool_json[id(compiled)] = hit
        entries.append(hit[1])
    return _JSONText(f"[{','.join(entries)}]")


# The stdlib's JSON string encoder, the one `encode_text` uses (non-ASCII kept).
_string = json.encoder.encode_basestring


def _loop_fragment(
    message: Message, provider: ChatProvider, rewrite_id: Callable[[str], str] | None
) -> str | None:
    """The JSON of the messages every tool loop sends, or None for any other message.

    A prompt of one text, an assistant turn that only calls tools (without a
    thinking field or a provider's data on a call) and a message of text-only
    tool results (None when a result holds images or files): their objects
    have a fixed shape, so only their strings go through the JSON encoder; the
    text is the same as encoding `encode_messages`' dicts (a test compares
    them). ``rewrite_id`` None: the ids as they are.
    """
    parts = message.parts
    if not parts:
        return None
    role = message.role
    if role == "tool":
        results = []
        for result in parts:
            if type(result) is not ToolResultPart or result.parts:
                return None
            call_id = result.call_id if rewrite_id is None else rewrite_id(result.call_id)
            results.append(
                f'{{"role":"tool","tool_call_id":{_string(call_id)},'
                f'"content":{_string(result.content)}}}'
            )
        return ",".join(results)
    if role == "user":
        if len(parts) == 1 and type(parts[0]) is TextPart:
            return f'{{"role":"user","content":{_string(parts[0].text)}}}'
        return None
    if role != "assistant" or provider.reasoning_out is not None or provider.signature_placeholder:
        return None
    calls = []
    for call in parts:
        if type(call) is not ToolCallPart or call.provider_data:
            return None  # (a thought signature: sent or left out by `_call`, noted)
        call_id = call.id if rewrite_id is None else rewrite_id(call.id)
        name = sent_name(call.name, provider.dialect)
        calls.append(
            f'{{"id":{_string(call_id)},"type":"function","function":'
            f'{{"name":{_string(name)},"arguments":{_string(call.arguments_text or "{}")}}}}}'
        )
    return f'{{"role":"assistant","content":null,"tool_calls":[{",".join(calls)}]}}'


def _sent_after(message: Message) -> bool:
    """Part of ``message`` goes in the user message after the run of tool messages.

    A result's images or files, or a tool message's parts beside its results
    (or a user message's, beside the results it holds: `joins_run`): its
    JSON is no fragment of its own.
    """
    tool = message.role == "tool" or joins_run(message)
    return any(part.parts if type(part) is ToolResultPart else tool for part in message.parts)


def _body(
    request: ModelRequest,
    model_name: str,
    provider: ChatProvider,
    messages: list[Body],
    stream: bool,
    compile_tool: ToolCompiler | None,
    compile_output: OutputCompiler | None,
    tools_json: Callable[[list[ToolDefinition], ChatProvider], Any] | None = None,
) -> Body:
    body: Body = {"model": model_name, "messages": messages}
    tools = list(request.tools)
    choice: Any = None
    if request.tool_choice is not None and tools:
        tools, choice = _tool_choice(request.tool_choice, tools, provider)
    if tools:
        if tools_json is not None:  # `encode_body`: the array as JSON
            body["tools"] = tools_json(tools, provider)
        elif compile_tool is None:  # the default, without copying each function twice
            functions = [default_function(t, provider) for t in tools]
            body["tools"] = [{"type": "function", "function": f} for f in functions]
        else:
            functions = [dict(compile_tool(t, provider)) for t in tools]
            body["tools"] = [{"type": "function", "function": f} for f in functions]
        if choice is not None:
            body["tool_choice"] = choice
        parallel = request.settings.get("parallel_tool_calls", provider.parallel_default)
        # Only when asked: some reasoning models reject the parameter outright [O8].
        if parallel is not None:
            body["parallel_tool_calls"] = bool(parallel)
    if request.output is not None:
        _add_output(body, request.output, provider, compile_output or default_output)
    _add_settings(body, request.settings, provider)
    if stream:
        body["stream"] = True
        options = _stream_options(request.settings.get("stream_options"), provider)
        if options is not None:
            body["stream_options"] = options
    return body


def _stream_options(asked: Any, provider: ChatProvider) -> Any:
    """The ``stream_options`` of a streamed request: the user's setting with
    ``include_usage`` added (the usage chunk counts the tokens) where the provider
    takes it; the user's own keys are kept (``include_obfuscation``, vLLM's
    ``continuous_usage_stats``), and win. A request that does not stream sends
    none: the spec says to set it only with ``stream: true`` (OpenAI answers 400)."""
    if not provider.stream_usage_option:
        return asked
    if asked is None:
        return {"include_usage": True}
    if isinstance(asked, Mapping):
        return {"include_usage": True, **asked}
    return asked  # not an object: as given, for the provider to refuse by name


def _same(call_id: str) -> str:
    return call_id


def id_rewrite(provider: ChatProvider) -> Callable[[str], str] | None:
    """How ``provider``'s call ids are rewritten when sent: `mistral_id` for Mistral's
    9-alphanumeric rule, else None (sent as they are)."""
    return mistral_id if provider.id_rule == "mistral9" else None


def default_function(tool: ToolDefinition, provider: ChatProvider) -> dict[str, Any]:
    """The ``function`` object: the tool's schema compiled to the provider's dialect.

    Strict mode is used when the tool asks for it, or, where the provider
    enables it by default (OpenAI), whenever the schema allows it without loss.

    Raises:
        SchemaCompileError: The tool asked for strict mode and its schema
            cannot be sent strict without loss.
    """
    return dict(compiled_tool(tool, provider).payload["function"])


def compiled_tool(tool: ToolDefinition, provider: ChatProvider) -> CompiledTool:
    """The compilation of ``tool`` this provider sends (memoized by `compile_tool`)."""
    dialect: Dialect = provider.dialect  # type: ignore[assignment]  # a row names a dialect
    asked = tool.strict
    strict = asked if asked is not None else (None if provider.auto_strict else False)
    return compile_tool(tool, dialect, strict=strict)


def default_output(output: OutputSpec, provider: ChatProvider) -> dict[str, Any]:
    """The ``json_schema`` object of ``response_format``, compiled like a tool's schema."""
    compiled = compile_output(
        output, cast(Dialect, provider.dialect), strict=_strict(output.strict, provider)
    )
    spec: dict[str, Any] = {"name": output.name, "schema": compiled.schema_sent}
    if compiled.strict:
        spec["strict"] = True
    return spec


def _strict(asked: bool | None, provider: ChatProvider) -> bool | None:
    if asked is None:
        return None if provider.auto_strict else False
    return asked


def _tool_choice(
    choice: str, tools: list[ToolDefinition], provider: ChatProvider
) -> tuple[list[ToolDefinition], Any]:
    if choice == "auto":
        return tools, "auto"
    if choice == "none":
        return ([], None) if provider.none_drops_tools else (tools, "none")
    if choice == "required":
        return tools, provider.required_word
    named = [named_tool(choice, tools)]
    if provider.named_tool_choice:
        return tools, {"type": "function", "function": {"name": choice}}
    # No named choice on this server: force "some tool" and offer only that one.
    return named, provider.required_word


def _add_output(
    body: Body, output: OutputSpec, provider: ChatProvider, compile_output: OutputCompiler
) -> None:
    if provider.json_schema_output:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": dict(compile_output(output, provider)),
        }
        return
    # json_object mode needs the word "json" in the prompt and cannot carry the
    # schema, so the schema goes in a system message [C6 json_mode].
    schema = json.dumps(output.schema, separators=(",", ":"), sort_keys=True)
    body["messages"].append(
        {
            "role": "system",
            "content": f"Answer with a JSON object ({output.name}) matching this JSON Schema: {schema}",
        }
    )
    body["response_format"] = {"type": "json_object"}


def _add_settings(body: Body, settings: Mapping[str, Any], provider: ChatProvider) -> None:
    for key, value in settings.items():
        if value is None or key in _HANDLED_SETTINGS:
            continue
        if key in _OWNED:
            _own_setting(body, key, value, provider)
            continue
        if key == "n":
            refuse_choices(key, value, provider.name)
        body[provider.renames.get(key, key)] = value
    max_tokens = settings.get("max_tokens")
    if max_tokens is not None:
        check_token_limit("max_tokens", max_tokens)
        body[provider.max_tokens_key] = max_tokens


def _own_setting(body: Body, key: str, value: Any, provider: ChatProvider) -> None:
    """Place a setting naming a field `_body` builds: merged with it, or refused.

    ``tool_choice`` and ``response_format`` go as given when the request has
    no tool choice or output type of its own; ``tools``, ``model``,
    ``messages`` and ``stream`` as every codec places them
    (`place_shared_setting`).

    Raises:
        ModelConfigError: The setting cannot be placed, naming it and what to
            use instead.
    """
    if key in ("tool_choice", "response_format"):
        if key in body:
            given = "tool_choice" if key == "tool_choice" else "output type"
            raise ModelConfigError(
                f"the setting {key!r} and the run's {given} both set {provider.name}'s "
                f"{key}; give one"
            )
        body[key] = value
    else:
        place_shared_setting(body, key, value, provider.name, tools="tool objects")


# --- messages --------------------------------------------------------------


def encode_messages(
    messages: Iterable[Message], provider: ChatProvider, rewrite_id: Callable[[str], str] = _same
) -> list[Body]:
    """The ``messages`` array: tool results become one ``role: tool`` message each."""
    out: list[Body] = []
    attached: list[Body] = []  # tools' images and files, sent after the run of tool messages
    beside: list[Body] = []  # the tool messages' own parts beside their results, sent before them
    for message in inline_media(messages):
        role = message.role
        parts = message.parts
        if (attached or beside) and role != "tool" and not joins_run(message):
            out.append(_after_run(beside, attached))
            attached, beside = [], []
        # Fast paths for the shapes every tool loop resends on each request:
        # a plain text prompt and a message of tool results.
        if role == "user" and len(parts) == 1 and type(parts[0]) is TextPart:
            out.append({"role": "user", "content": parts[0].text})
            continue
        if role == "tool" and _only(parts, ToolResultPart):
            out.extend(
                _tool_messages(
                    cast("tuple[ToolResultPart, ...]", parts), provider, rewrite_id, attached
                )
            )
            continue
        if role == "assistant" and parts and _only(parts, ToolCallPart):
            out.append(_calls_only(cast("tuple[ToolCallPart, ...]", parts), provider, rewrite_id))
            continue
        results = [p for p in parts if isinstance(p, ToolResultPart)]
        out.extend(_tool_messages(results, provider, rewrite_id, attached))
        # A user message holding results (a history from Anthropic's format) joins the
        # run of tool messages as a tool message does.
        joins = role == "user" and bool(results)  # joins_run, with the results found above
        if attached and role != "tool" and not joins:  # (another role's results): media first
            out.append(_after_run([], attached))
            attached = []
        if role == "tool" or joins:
            # Text (or an image, a file) beside the results: a tool message holds one
            # result, and no user message may come between the tool messages answering
            # one assistant message, so it goes in the user message after their run.
            beside.extend(
                beside_items(
                    [p for p in parts if not isinstance(p, ToolResultPart)],
                    bool(results),
                    lambda text: {"type": "text", "text": text},
                    lambda part: _media_part(part, provider),
                    role,
                )
            )
            continue
        rest: list[Part] = (
            [p for p in parts if not isinstance(p, ToolResultPart)] if results else list(parts)
        )
        if results and not rest:
            continue
        if role == "assistant":
            out.append(_assistant(rest, provider, rewrite_id))
        elif role == "system":
            out.append({"role": "system", "content": _only_text(rest, "system")})
        else:
            out.append({"role": "user", "content": _user_content(rest, provider)})
    if attached or beside:
        out.append(_after_run(beside, attached))
    text = provider.assistant_after_tool
    if text is not None:
        edges = [((m["role"] == "user", m["role"] == "tool"), m) for m in out]
        return _bridged(edges, lambda: {"role": "assistant", "content": text})
    return out


def _after_run(beside: list[Body], attached: list[Body]) -> Body:
    """The user message after a run of tool messages.

    First what the tool messages hold beside their results (``beside``), then
    the results' images and files (``attached``), each group under its call's
    heading: so the tool messages' own text or images never sit under a
    result's heading, read as that tool's output. All text (a tool message's
    text beside its results, a described file) is sent as one string, the
    pieces a blank line apart: the form every Chat Completions server takes.
    """
    content = [*beside, *attached]
    if all(part["type"] == "text" for part in content):
        return {"role": "user", "content": "\n\n".join(part["text"] for part in content)}
    return {"role": "user", "content": content}


def _bridged(items: Iterable[tuple[tuple[bool, bool], T]], bridge: Callable[[], T]) -> list[T]:
    """The items with ``bridge()`` between each one that ends with a tool message and
    one right after it that starts with a user message (`ChatProvider.assistant_after_tool`).

    Each item comes as ``((starts with a user message, ends with a tool
    message), item)``: a message's dict, or a message's JSON fragment, which
    may hold several wire messages (`_starts_with_user`, `_ends_with_tool`).
    """
    out: list[T] = []
    after_tool = False
    for (starts_with_user, ends_with_tool), item in items:
        if after_tool and starts_with_user:
            out.append(bridge())
        out.append(item)
        after_tool = ends_with_tool
    return out


def _ends_with_tool(message: Message) -> bool:
    """The last message `encode_messages` makes of ``message`` is a tool message."""
    results = False
    for part in message.parts:
        if type(part) is ToolResultPart:
            results = True
        elif message.role != "tool":  # a user or assistant message after its results
            return False
    return results


def _starts_with_user(message: Message) -> bool:
    """The first message `encode_messages` makes of ``message`` is a user message."""
    return message.role == "user" and not any(type(p) is ToolResultPart for p in message.parts)


def _tool_messages(
    results: Sequence[ToolResultPart],
    provider: ChatProvider,
    rewrite_id: Callable[[str], str],
    attached: list[Body],
) -> list[Body]:
    """One ``role: tool`` message per result; their images and files go to ``attached``.

    A tool message holds text only [O4 ChatCompletionRequestToolMessageContentPart]:
    a result with images or files sends its text there (each image or file
    described in brackets), and one user message after the run of tool
    messages carries the images and files themselves, each group headed by the
    call it came from (`encode_messages` adds it).
    """
    out: list[Body] = [
        {
            "role": "tool",
            "tool_call_id": rewrite_id(r.call_id),
            "content": text_of(r) if r.parts else r.content,
        }
        for r in results
    ]
    for result in results:
        media = media_of(result) if result.parts else []
        encoded = [m for m in (_attachment(part, provider) for part in media) if m is not None]
        if encoded:
            name = sent_name(result.tool_name, provider.dialect)  # (as its call was sent)
            head = f"Images and files returned by tool call {rewrite_id(result.call_id)} ({name}):"
            attached.extend([{"type": "text", "text": head}, *encoded])
    return out


def _attachment(part: ImagePart | FilePart, provider: ChatProvider) -> Body | None:
    """A tool's image or file as a user content part, or None when the provider cannot take it."""
    try:
        return _media_part(part, provider)
    except ModelConfigError:
        return None  # its description is in the tool message already


def _media_part(part: ImagePart | FilePart, provider: ChatProvider) -> Body:
    """An image or file as a user content part; `ModelConfigError` if the provider cannot take it."""
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": _image_url(part)}}
    return _mistral_file(part) if provider.files == "mistral" else _file(part)


def _assistant(parts: list[Part], provider: ChatProvider, rewrite_id: Callable[[str], str]) -> Body:
    text = "".join(p.text for p in parts if isinstance(p, TextPart))
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    audio = _audio_id(parts, provider)
    message: Body = {"role": "assistant", "content": text or (None if calls or audio else "")}
    if audio is not None:
        message["audio"] = {"id": audio}  # a previous audio answer, by id [O4]
    if provider.reasoning_out is not None and calls:
        # DeepSeek wants the thinking of a tool turn back, even when empty [C7]: its own
        # only (another provider's is noted by `_left_out`).
        reasoning = "".join(
            p.text for p in parts if isinstance(p, ReasoningPart) and p.provider == provider.name
        )
        message[provider.reasoning_out] = reasoning
    if provider.reasoning_details:
        details = _own_details(parts, provider)
        if details is not None:
            message[REASONING_DETAILS] = details  # OpenRouter's blocks, unchanged
    if calls:
        message["tool_calls"] = _calls(calls, rewrite_id, provider)
    return message


def _calls(
    calls: Sequence[ToolCallPart], rewrite_id: Callable[[str], str], provider: ChatProvider
) -> list[Body]:
    """An assistant turn's ``tool_calls``; on a `ChatProvider.signature_placeholder` row, the
    first gets Google's placeholder signature when it has none (noted by `_left_out`)."""
    encoded = [_call(c, rewrite_id, provider) for c in calls]
    if provider.signature_placeholder and encoded and "extra_content" not in encoded[0]:
        encoded[0]["extra_content"] = {"google": {"thought_signature": SKIP_SIGNATURE}}
    return encoded


def _own_details(parts: Sequence[Part], provider: ChatProvider) -> Any:
    """The ``reasoning_details`` the provider's reasoning parts in ``parts`` keep, or None:
    a whole answer's one part's array unchanged; a streamed answer's parts, each holding
    the blocks new since the one before (`_stream._flush_details`), joined in order, a
    block continued across two parts made one again (`_stream.merge_details`)."""
    found: Any = None
    for part in parts:
        if type(part) is ReasoningPart and part.provider == provider.name:
            details = part.provider_data.get(REASONING_DETAILS)
            if not details:
                continue
            if found is None:
                found = details
                continue
            found = [*found]  # (the stored array is never changed)
            if isinstance(found[-1], Mapping) and all(isinstance(b, Mapping) for b in details):
                # (a part's own blocks never continue each other: merged when streamed)
                found[-1:] = merge_details((found[-1], *details))
            else:
                found.extend(details)
    return found


def _audio_id(parts: list[Part], provider: ChatProvider) -> str | None:
    """The id of the audio answer ``parts`` hold (`_response.audio_parts`) when
    ``provider`` made it, or None (another's goes as its transcript, noted by `_left_out`).

    An assistant message takes audio back by id only, and no image or other
    file: another provider's answer media is dropped (noted by `_left_out`),
    media a user put there refused, never dropped unsaid.

    Raises:
        ModelConfigError: An image or file with no provider's marker after it.
    """
    found = None
    for index, part in enumerate(parts):
        if isinstance(part, (ImagePart, FilePart)):
            # A provider's answer media (followed by its marker) is sent by id when
            # it is this provider's audio, else dropped (noted by `_left_out`).
            if media_marker(parts, index) is None:
                raise ModelConfigError(
                    "an assistant message for Chat Completions can hold text, reasoning, "
                    f"tool calls and an audio answer it made (sent back by id), not {part.kind!r}"
                )
        elif isinstance(part, ReasoningPart) and part.provider == provider.name:
            found = _audio_marker(part) or found
    return found


def _audio_marker(part: object) -> str | None:
    """The audio id an empty `ReasoningPart` keeps (`_codec.AUDIO`), or None."""
    if not isinstance(part, ReasoningPart) or part.text or part.signature:
        return None
    kept = part.provider_data.get(AUDIO)
    audio_id = kept.get("id") if isinstance(kept, Mapping) else None
    return audio_id if isinstance(audio_id, str) else None


def reasoning_notes(messages: Sequence[Message], provider: ChatProvider) -> tuple[str, ...]:
    """What `build_body` leaves out of ``messages``' reasoning, one note per part.

    Chat Completions takes no reasoning back, except DeepSeek's own
    ``reasoning_content`` on an assistant turn that calls tools (the text: a
    signature only its maker can verify never goes) and OpenRouter's own
    ``reasoning_details`` (unchanged). A call's Gemini thought signature goes
    to Gemini's OpenAI endpoint only (a native call's mapped, noted); elsewhere
    it is left out, noted. A part with nothing in it is no loss and has no note.
    """
    notes: list[str] = []
    for position, message in enumerate(messages):
        notes.extend(f"messages[{position}]: {why}" for why in _left_out(message, provider))
    return tuple(notes)


def _left_out(message: Message, provider: ChatProvider) -> tuple[str, ...]:
    """What `reasoning_notes` says of each part of ``message`` left out, without its position."""
    taken = (
        message.role == "assistant"
        and provider.reasoning_out is not None
        and any(type(part) is ToolCallPart for part in message.parts)
    )
    reasons: list[str] = []
    marker = None  # the marker of the media part dropped just before
    parts = message.parts
    first_call = message.role == "assistant" and provider.signature_placeholder
    for index, part in enumerate(parts):
        if type(part) is ToolCallPart:
            if first_call and extra_content(part.provider_data) is None:
                reasons.append(
                    f"call {part.id} has no Gemini thought signature; sent with the "
                    "documented placeholder"
                )
            first_call = False
            if part.provider_data:
                note = _signature_note(part, provider)
                if note is not None:
                    reasons.append(note)
            continue
        if isinstance(part, (ImagePart, FilePart)) and message.role == "assistant":
            found = media_marker(parts, index)
            if found is not None and _audio_marker(found) is None:
                marker = found  # another provider's image or file: dropped
                reasons.append(dropped_media_note(part, found, provider.name))
            continue
        if not isinstance(part, ReasoningPart) or part is marker:
            continue
        if _audio_marker(part) is not None:
            if part.provider != provider.name:
                reasons.append(
                    f"audio answer from {part.provider or 'an unknown provider'} left out: "
                    f"its id means nothing to {provider.name} (its transcript is sent)"
                )
            continue  # an audio answer's id: sent as the message's ``audio``
        marked = None if part.text or part.signature else _marked(part.provider_data)
        if marked is not None:
            # A Responses output item's marker, not reasoning.
            reasons.append(
                f"{marked} from {part.provider or 'an unknown provider'} "
                f"left out: {provider.name} cannot take it back"
            )
            continue
        hidden = part.signature or part.provider_data
        own = part.provider == provider.name
        if (
            own
            and provider.reasoning_details
            and message.role == "assistant"
            and part.provider_data.get(REASONING_DETAILS)
        ):
            continue  # sent back as its reasoning_details (`_own_details`)
        if taken:
            if not own:
                if part.text or hidden:
                    reasons.append(
                        f"reasoning from {part.provider or 'an unknown provider'} left out: "
                        f"{provider.name} takes back its own reasoning only"
                    )
            elif hidden:
                reasons.append(
                    f"reasoning's signature left out: {provider.name} takes back the text only"
                )
            continue
        if not (part.text or hidden):
            continue
        if message.role != "assistant":
            why = f"{provider.name} takes no reasoning in a {message.role} message"
        elif provider.reasoning_out is not None:
            why = f"{provider.name} takes reasoning back on turns that call tools only"
        elif provider.reasoning_details and own:
            why = (
                f"{provider.name} takes its reasoning back as the reasoning_details "
                "it answered with, and this part has none"
            )
        elif provider.reasoning_details:
            why = f"{provider.name} takes back only the reasoning_details it answered with"
        else:
            why = f"{provider.name} takes no reasoning back"
        reasons.append(f"reasoning left out: {why}")
    return tuple(reasons)


def _marked(data: Mapping[str, Any]) -> str | None:
    """The Responses output item a marker part's ``provider_data`` keeps, named, or
    None when it keeps none (a reasoning item's ids, say: that part is reasoning)."""
    item = data.get(OUTPUT_ITEM)
    if isinstance(item, (list, tuple)) and item and isinstance(item[0], str):
        return f"the {item[0]} output item"
    if isinstance(data.get(IMAGE_CALL), (list, tuple)):  # the image tool's item
        return f"the {IMAGE_CALL} output item"
    return None


def _only(parts: tuple[Part, ...], kind: type) -> bool:
    # A loop, not all(<generator>): this runs for every message of every request.
    for part in parts:  # noqa: SIM110
        if type(part) is not kind:
            return False
    return True


def _calls_only(
    calls: tuple[ToolCallPart, ...], provider: ChatProvider, rewrite_id: Callable[[str], str]
) -> Body:
    # What `_assistant` makes of a turn that only calls tools, in one pass.
    message: Body = {"role": "assistant", "content": None}
    if provider.reasoning_out is not None:
        message[provider.reasoning_out] = ""
    message["tool_calls"] = _calls(calls, rewrite_id, provider)
    return message


def _call(call: ToolCallPart, rewrite_id: Callable[[str], str], provider: ChatProvider) -> Body:
    encoded: Body = {
        "id": rewrite_id(call.id),
        "type": "function",
        # (a name the model made up that the API refuses goes as a valid stand-in)
        "function": {
            "name": sent_name(call.name, provider.dialect),
            "arguments": call.arguments_text or "{}",
        },
    }
    if provider.thought_signatures:
        extra = extra_content(call.provider_data)
        if extra is not None:
            # Gemini's OpenAI endpoint wants its thought signature back on the call.
            encoded["extra_content"] = extra
    elif provider.keeps_extra_content and call.provider_data:
        extra = call.provider_data.get("extra_content")
        if extra is not None:  # (a Gemini behind another URL wants it too)
            encoded["extra_content"] = extra
    return encoded


def extra_content(data: Mapping[str, Any]) -> Any:
    """The ``extra_content`` a call sends Gemini's OpenAI endpoint: the one it came with,
    or a native Gemini call's ``thought_signature`` as ``google.thought_signature``
    (the same signature [G2]); None when it has neither."""
    extra = data.get("extra_content")
    if extra is not None:
        return extra
    signature = data.get("thought_signature")
    if isinstance(signature, str):
        return {"google": {"thought_signature": signature}}
    return None


def _signature_note(call: ToolCallPart, provider: ChatProvider) -> str | None:
    """What `_call` does with a call's Gemini thought signature, when it is worth a note."""
    data = call.provider_data
    if "extra_content" not in data and not isinstance(data.get("thought_signature"), str):
        return None
    if provider.keeps_extra_content and not provider.thought_signatures:
        if "extra_content" in data:
            return None  # sent as it came
        return (
            f"call {call.id}'s native Gemini thought signature left out: "
            f"{provider.name} is sent only the extra_content a call came with "
            '(server="gemini" sends it as extra_content.google.thought_signature)'
        )
    if not provider.thought_signatures:
        return (
            f"call {call.id}'s Gemini thought signature left out: only Gemini "
            f"takes it back, {provider.name} would refuse or ignore it"
        )
    if "extra_content" not in data:
        return (
            f"call {call.id}'s native Gemini thought signature sent as "
            "extra_content.google.thought_signature"
        )
    return None


def _only_text(parts: list[Part], role: str) -> str:
    for part in parts:
        if not isinstance(part, (TextPart, ReasoningPart)):
            raise ModelConfigError(
                f"a {role} message can only hold text for Chat Completions, got {part.kind!r}"
            )
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def _user_content(parts: list[Part], provider: ChatProvider) -> str | list[Body]:
    if all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    content: list[Body] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "image_url", "image_url": {"url": _image_url(part)}})
        elif isinstance(part, FilePart):
            content.append(_mistral_file(part) if provider.files == "mistral" else _file(part))
        elif isinstance(part, ToolCallPart):
            raise ModelConfigError("a user message cannot carry a tool call")
    return content


def _image_url(part: ImagePart) -> str:
    if part.url is not None:
        return part.url
    if part.data is None:
        raise ModelConfigError("an ImagePart needs data or a url")
    return f"data:{part.media_type};base64,{base64.b64encode(part.data).decode()}"


def _mistral_file(part: FilePart) -> Body:
    if part.data is None and part.url is None:
        raise ModelConfigError("a FilePart needs data or a url")
    if part.media_type in _AUDIO_FORMATS:
        if part.data is None:
            raise ModelConfigError(
                f"Mistral takes audio inline only; FilePart {url_excerpt(part.url or '')} has no data"
            )
        return {"type": "input_audio", "input_audio": base64.b64encode(part.data).decode()}
    url = part.url
    if url is None:
        url = f"data:{part.media_type};base64,{base64.b64encode(part.data or b'').decode()}"
    document: Body = {"type": "document_url", "document_url": url}
    if part.filename:
        document["document_name"] = part.filename
    return document


def _file(part: FilePart) -> Body:
    if part.data is None:
        raise ModelConfigError(
            f"Chat Completions takes files inline only; FilePart {url_excerpt(part.url or '')} "
            "has a url and no data: give its bytes as data="
        )
    encoded = base64.b64encode(part.data).decode()
    audio = _AUDIO_FORMATS.get(part.media_type)
    if audio is not None:
        return {"type": "input_audio", "input_audio": {"data": encoded, "format": audio}}
    # OpenAI refuses inline file_data without a filename (its 400 asks for a file_id)
    file: Body = {
        "file_data": f"data:{part.media_type};base64,{encoded}",
        "filename": part.filename or default_filename(part.media_type),
    }
    return {"type": "file", "file": file}
