"""Neutral `ModelRequest` -> Gemini ``GenerateContentRequest`` body (pure functions).

- System messages become ``systemInstruction``; user and tool messages ``user``
  contents, assistant messages ``model`` contents; consecutive contents of one
  role are merged (the API wants turns to alternate) [G1].
- A tool result is a ``functionResponse`` part: ``response: {"output": ...}``,
  or ``{"error": ...}`` for a failed call (there is no error flag) [G4 FunctionResponse].
- Model parts go back unchanged: a call's ``thoughtSignature`` (kept in
  ``ToolCallPart.provider_data``; a call made on Gemini's OpenAI endpoint keeps
  it as ``extra_content.google.thought_signature``, sent here as its
  ``thoughtSignature``, noted) and signed text parts are sent as received;
  thought summaries are not sent back (the API reads signatures only) [G2].
- Reasoning from another provider cannot be verified by Gemini and is dropped,
  with a note in the `RequestReport`. A Gemini 3 turn whose first call carries
  no signature (history made by another provider) gets the documented
  placeholder signature, also noted [G2, G5].
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from toolfold._errors import ModelConfigError
from toolfold.adapters._codec import (
    check_token_limit,
    inline_media,
    named_tool,
    no_equivalent,
    place_shared_setting,
    refuse_choices,
)
from toolfold.adapters._dialects import CompiledTool, Dialect, compile_tool, sent_name
from toolfold.adapters._output import compile_output
from toolfold.adapters._results import media_of, text_of
from toolfold.adapters.gemini._providers import (
    GENERATION_SETTINGS,
    REFUSED_SETTINGS,
    SKIP_SIGNATURE,
    needs_signature,
    takes_json_schema,
)
from toolfold.runtime._model import Prepared, RequestReport
from toolfold.runtime.core._arguments import parse_arguments
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
#: The providers whose reasoning parts are Gemini's own.
OWN = frozenset({"gemini", "google"})
_HANDLED = frozenset({"parallel_tool_calls", "generationConfig", "generation_config"})
# Settings naming a field the codec builds (in either spelling the API reads), by
# the field's camelCase name: each merged with it or refused (`_own_setting`).
_OWNED = {
    "contents": "contents",
    "model": "model",
    "stream": "stream",
    "tools": "tools",
    "systemInstruction": "systemInstruction",
    "system_instruction": "systemInstruction",
    "toolConfig": "toolConfig",
    "tool_config": "toolConfig",
}


def schema_dialect(model_name: str, schema_form: str | None = None) -> Dialect:
    """``"gemini"`` (``parametersJsonSchema``) or ``"gemini-openapi"`` (``parameters``) for a model."""
    if schema_form is None:
        return "gemini" if takes_json_schema(model_name) else "gemini-openapi"
    if schema_form == "json-schema":
        return "gemini"
    if schema_form == "openapi":
        return "gemini-openapi"
    raise ModelConfigError(f"schema_form must be 'json-schema' or 'openapi', got {schema_form!r}")


def compiled_tool(tool: ToolDefinition, dialect: Dialect) -> CompiledTool:
    """The compilation of ``tool`` this adapter sends (memoized by `compile_tool`)."""
    return compile_tool(tool, dialect, strict=tool.strict)


def build_body(
    request: ModelRequest, model_name: str, *, schema_form: str | None = None
) -> Prepared:
    """Build the JSON body of one ``generateContent`` / ``streamGenerateContent`` call.

    Args:
        request: The neutral request.
        model_name: The Gemini model id (decides the schema form and signatures).
        schema_form: Force ``"json-schema"`` or ``"openapi"`` tool schemas.

    Raises:
        ModelConfigError: The request cannot be expressed for Gemini (a named
            tool choice for an unknown tool, ``parallel_tool_calls=False``, another
            provider's reasoning setting: `REFUSED_SETTINGS`...).
        SchemaCompileError: A tool schema Gemini's form cannot express.
    """
    for key, instead in REFUSED_SETTINGS.items():
        if request.settings.get(key) is not None:
            raise no_equivalent(key, "the Gemini API", instead)
    notes: list[str] = []
    system, contents = encode_messages(request.messages, model_name, notes)
    body: Body = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": system}
    dialect = schema_dialect(model_name, schema_form)
    tools = list(request.tools)
    if tools:
        compiled = [compiled_tool(t, dialect) for t in tools]
        body["tools"] = [{"functionDeclarations": [c.payload for c in compiled]}]
        config = _calling_config(request.tool_choice, tools, dialect)
        if config is not None:
            body["toolConfig"] = {"functionCallingConfig": config}
        if request.settings.get("parallel_tool_calls") is False:
            raise ModelConfigError(
                "Gemini has no switch for one tool call per turn; "
                "remove parallel_tool_calls=False (or ask for it in the instructions)"
            )
    owned = _output_config(request.output, dialect) if request.output is not None else {}
    generation = _generation_config(request.settings, owned, notes)
    generation.update(owned)
    if generation:
        body["generationConfig"] = generation
    for key, value in request.settings.items():
        if value is not None and key not in GENERATION_SETTINGS and key not in _HANDLED:
            field = _OWNED.get(key)
            if field is None:
                body[key] = value
            else:
                _own_setting(body, key, field, value)
    return Prepared(body, RequestReport("gemini", tuple(notes)))


def _own_setting(body: Body, key: str, field: str, value: Any) -> None:
    """Place a setting naming a field `build_body` builds: merged with it, or refused.

    ``tools`` (built-in tools such as ``{"googleSearch": {}}``) go after the
    function declarations; ``systemInstruction`` parts go before the system
    messages'; ``toolConfig`` (``retrievalConfig``) is merged with the built
    ``functionCallingConfig``, which it may not set as well. ``tools``,
    ``contents``, ``model`` and ``stream`` as every codec places them
    (`place_shared_setting`).

    Raises:
        ModelConfigError: The setting cannot be placed, naming it and what to
            use instead.
    """
    if field == "systemInstruction":
        if isinstance(value, str):
            value = {"parts": [{"text": value}]}
        parts = value.get("parts") if isinstance(value, Mapping) else None
        if not isinstance(parts, (list, tuple)):
            raise ModelConfigError(
                f"the setting {key!r} must be a Content object ({{'parts': [{{'text': ...}}]}}) "
                f"or a string, got {type(value).__name__}"
            )
        built = body.get("systemInstruction")
        merged = [*parts, *(built["parts"] if built is not None else ())]
        body["systemInstruction"] = {**value, "parts": merged}
    elif field == "toolConfig":
        built = body.get("toolConfig")
        if not isinstance(value, Mapping):
            raise ModelConfigError(
                f"the setting {key!r} must be a ToolConfig object, got {type(value).__name__}"
            )
        if built is not None and not {
            "functionCallingConfig",
            "function_calling_config",
        }.isdisjoint(value):
            raise ModelConfigError(
                f"the setting {key!r} sets functionCallingConfig, which the run's tool_choice "
                "(or strict tools) sets too; give tool_choice only"
            )
        body["toolConfig"] = {**built, **value} if built is not None else value
    else:
        place_shared_setting(
            body,
            key,
            value,
            "Gemini",
            tools="Gemini Tool objects (built-in tools such as googleSearch)",
            model=" ('gemini:<model>')",
            field=field,
        )


def _calling_config(
    choice: str | None, tools: list[ToolDefinition], dialect: Dialect
) -> Body | None:
    # VALIDATED constrains calls to the declared schemas; asked for by strict
    # tools on models that have it (2.5 on) [G4 FunctionCallingConfigMode, G5].
    strict = dialect == "gemini" and any(t.strict for t in tools)
    if choice is None:
        return {"mode": "VALIDATED"} if strict else None
    if choice == "auto":
        return {"mode": "VALIDATED" if strict else "AUTO"}
    if choice == "none":
        return {"mode": "NONE"}
    if choice == "required":
        return {"mode": "ANY"}
    named_tool(choice, tools)
    return {"mode": "ANY", "allowedFunctionNames": [choice]}


def _generation_config(settings: Mapping[str, Any], owned: Body, notes: list[str]) -> Body:
    """``generationConfig``: the neutral settings' fields, then a ``generation_config`` /
    ``generationConfig`` mapping's, then ``owned`` (the output type's fields, added by the caller).

    A later source wins a field an earlier one sets, whichever spelling each uses (the API
    reads a field under either spelling; one field under both was never checked, so it goes
    once): ``generationConfig`` over ``generation_config`` over a neutral setting, as toolfold
    always sent them (so a run saved with both resumes as it started), and the output type
    over either. What is left out is noted in ``notes``.

    Raises:
        ModelConfigError: A count of answers above 1; or, beside an output type, a
            mapping's response schema in the other form than the output type's, as the
            two schemas would go together, which the API refuses.
    """
    config: Body = {}
    # a field's camelCase name -> (its key in ``config``, the setting that set it)
    given: dict[str, tuple[str, str]] = {}
    for key, value in settings.items():
        field = GENERATION_SETTINGS.get(key)
        if field is not None and value is not None:
            if key == "max_tokens":
                check_token_limit(key, value, digits=True)
            config[field] = [value] if key == "stop" and isinstance(value, str) else value
            given[field] = (field, key)
    counts = [("candidate_count", settings.get("candidate_count"))]
    extras = []
    for key in ("generation_config", "generationConfig"):
        extra = settings.get(key)
        if isinstance(extra, Mapping):
            extras.append((key, extra))
            # Gemini reads the field in either spelling: each is checked under its own name.
            counts += [(f"{key}.{inner}", extra.get(inner)) for inner in _CANDIDATE_COUNT_KEYS]
    for named, count in counts:
        if count is not None:
            refuse_choices(named, count, "gemini")
    for key, extra in extras:
        for inner, value in extra.items():
            field = _camel(inner) if isinstance(inner, str) else inner
            output_field = bool(owned) and field in _OUTPUT_FIELDS
            if output_field and _yield_to_output(f"{key}.{inner}", field, value, owned, notes):
                continue
            if field in given:
                earlier, setting = given[field]
                notes.append(
                    f"the setting {setting} is not sent: the setting {key}.{inner} sets "
                    f"generationConfig.{field} too, and wins"
                )
                del config[earlier]
            config[inner] = value
            given[field] = (inner, f"{key}.{inner}")
    return config


def _yield_to_output(setting: str, field: str, value: Any, owned: Body, notes: list[str]) -> bool:
    """Leave out ``setting``, a ``generationConfig`` key for ``field``, which the output type sets.

    Returns:
        Whether it is left out: not when ``field`` is the schema form the output type does
        not send and ``value`` is None, which goes as given (``null``, unset to the API, as
        toolfold always sent it).

    Raises:
        ModelConfigError: ``field`` is the response schema in the other form than the
            output type's, naming both: two schemas, which the API refuses
            (``responseJsonSchema``: "When this field is set, response_schema must be
            omitted").
    """
    if field in owned:
        notes.append(
            f"the setting {setting} is not sent: the run's output type sets "
            f"generationConfig.{field}"
        )
        return True
    if value is None:
        return False
    (sent,) = (name for name in owned if name != "responseMimeType")
    raise ModelConfigError(
        f"the setting {setting} and the run's output type both give Gemini a response schema "
        f"(the output type sends {sent}), and the API takes one; give one"
    )


#: ``candidateCount`` as a ``generation_config`` may spell it (the API takes both).
_CANDIDATE_COUNT_KEYS = ("candidateCount", "candidate_count")
#: The ``generationConfig`` fields an output type sets (``_output_config``: the MIME type
#: and one of the two schema forms), by their camelCase names.
_OUTPUT_FIELDS = frozenset({"responseMimeType", "responseSchema", "responseJsonSchema"})


def _camel(name: str) -> str:
    """A proto field's JSON name (``max_output_tokens`` -> ``maxOutputTokens``): the API
    reads a field under either."""
    if "_" not in name:
        return name
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _output_config(output: OutputSpec, dialect: Dialect) -> Body:
    hint = (
        "\n(the OpenAPI form of Gemini's older models cannot carry it; a model that takes "
        "JSON Schema, gemini-2.5 and later, or schema_form='json-schema' sends it as "
        "responseJsonSchema)"
        if dialect == "gemini-openapi"
        else ""
    )
    compiled = compile_output(output, dialect, strict=output.strict, hint=hint)
    key = "responseJsonSchema" if dialect == "gemini" else "responseSchema"
    return {"responseMimeType": "application/json", key: compiled.schema_sent}


# --- messages --------------------------------------------------------------


def encode_messages(
    messages: tuple[Message, ...], model_name: str, notes: list[str]
) -> tuple[list[Body], list[Body]]:
    """``(systemInstruction parts, contents)`` for the conversation; notes what was dropped."""
    system: list[Body] = []
    contents: list[Body] = []
    signed = needs_signature(model_name)
    for position, message in enumerate(inline_media(messages)):
        if message.role == "system":
            system.extend(_system_parts(message))
            continue
        if message.role == "assistant":
            role, parts = "model", _model_parts(message, position, signed, notes)
        else:
            role, parts = "user", _user_parts(message)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return system, contents


def _system_parts(message: Message) -> list[Body]:
    parts: list[Body] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"text": part.text})
        elif not isinstance(part, ReasoningPart):
            raise ModelConfigError(f"a system message can only hold text, got {part.kind!r}")
    return parts


def _user_parts(message: Message) -> list[Body]:
    parts: list[Body] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"text": part.text})
        elif isinstance(part, ToolResultPart):
            key = "error" if part.is_error else "output"
            name = sent_name(part.tool_name, "gemini")  # (as its call is sent: `_call`)
            response: Body = {"name": name, "response": {key: text_of(part)}}
            if part.call_id:
                response["id"] = part.call_id
            media = [_response_media(m) for m in media_of(part)]
            if any(media):  # images and documents beside the text [G4 FunctionResponsePart]
                response["parts"] = [m for m in media if m]
            parts.append({"functionResponse": response})
        elif isinstance(part, (ImagePart, FilePart)):
            parts.append(_media(part))
        elif isinstance(part, ToolCallPart):
            raise ModelConfigError(f"a {message.role} message cannot carry a tool call")
    return parts


# What `FunctionResponse.parts` takes (providers.md, Gemini 3); text goes in ``response``.
RESPONSE_MEDIA = frozenset({"image/png", "image/jpeg", "image/webp", "application/pdf"})


def _response_media(part: ImagePart | FilePart) -> Body | None:
    """An image or document of a tool result as inline bytes, or None (then only described)."""
    if part.data is None or part.media_type not in RESPONSE_MEDIA:
        return None
    data = base64.b64encode(part.data).decode()
    return {"inlineData": {"mimeType": part.media_type, "data": data}}


def _media(part: ImagePart | FilePart) -> Body:
    if part.data is not None:
        data = base64.b64encode(part.data).decode()
        return {"inlineData": {"mimeType": part.media_type, "data": data}}
    if part.url is None:
        raise ModelConfigError(f"a {type(part).__name__} needs data or a url")
    return {"fileData": {"mimeType": part.media_type, "fileUri": part.url}}


def _model_parts(message: Message, position: int, signed: bool, notes: list[str]) -> list[Body]:
    parts: list[Body] = []
    first_call = True
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append({"text": part.text})
        elif isinstance(part, ToolCallPart):
            parts.append(_call(part, position, first_call and signed, notes))
            first_call = False
        elif isinstance(part, ReasoningPart):
            _reasoning(part, parts, position, notes)
        elif isinstance(part, (ImagePart, FilePart)):
            parts.append(_media(part))  # an image the model made, sent back as it came
        elif isinstance(part, ToolResultPart):
            raise ModelConfigError("an assistant message cannot carry a tool result")
        else:
            raise ModelConfigError(f"an assistant message cannot carry a {part.kind!r} part")
    return parts


def _reasoning(part: ReasoningPart, parts: list[Body], position: int, notes: list[str]) -> None:
    if part.provider not in OWN:
        if part.text or part.signature:
            what = "signed reasoning" if part.signature else "reasoning"
            notes.append(
                f"messages[{position}]: {what} from {part.provider or 'an unknown provider'} "
                "dropped: Gemini cannot take another provider's reasoning"
            )
        return
    if part.signature is None:
        return  # a thought summary: Gemini reads signatures only [G2]
    last = parts[-1] if parts else None
    if not part.text and last is not None and "thoughtSignature" not in last and _signable(last):
        last["thoughtSignature"] = part.signature  # the signed text or media part, as received
        return
    signed: Body = {"text": part.text, "thoughtSignature": part.signature}
    if part.text:
        signed["thought"] = True
    parts.append(signed)


def compat_signature(data: Mapping[str, Any]) -> str | None:
    """The thought signature a call made on Gemini's OpenAI-compatible endpoint keeps
    (``extra_content.google.thought_signature``), or None: the same signature the
    native API calls ``thoughtSignature`` [G2]."""
    extra = data.get("extra_content")
    google = extra.get("google") if isinstance(extra, Mapping) else None
    signature = google.get("thought_signature") if isinstance(google, Mapping) else None
    return signature if isinstance(signature, str) else None


def _signable(part: Body) -> bool:
    """Whether a signature after ``part`` was received on it (a text or media part)."""
    return "text" in part or "inlineData" in part or "fileData" in part


def _call(call: ToolCallPart, position: int, needs_sig: bool, notes: list[str]) -> Body:
    arguments = call.arguments
    if arguments is None:
        arguments = parse_arguments(call.arguments_text)
        if arguments is None:
            notes.append(
                f"messages[{position}]: call {call.id} had arguments that are not a JSON "
                "object; sent as {}"
            )
            arguments = {}
    # (a made-up name Gemini refuses goes as a valid stand-in; both dialects' rule is one)
    name = sent_name(call.name, "gemini")
    encoded: Body = {"functionCall": {"name": name, "args": arguments, "id": call.id}}
    signature = call.provider_data.get("thought_signature")
    if signature is None:
        signature = compat_signature(call.provider_data)
        if signature is not None:
            notes.append(
                f"messages[{position}]: call {call.id}'s thought signature from Gemini's "
                "OpenAI endpoint (extra_content.google.thought_signature) sent as its "
                "thoughtSignature"
            )
    if signature is None and needs_sig:
        signature = SKIP_SIGNATURE
        notes.append(
            f"messages[{position}]: call {call.id} has no Gemini thought signature; "
            "sent with the documented placeholder"
        )
    if signature is not None:
        encoded["thoughtSignature"] = signature
    return encoded
