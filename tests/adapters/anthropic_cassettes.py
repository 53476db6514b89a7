"""The recorded Anthropic Messages traffic: expectations, a neutral reading of recorded requests, the spec.

Expectations were written from the recorded bodies (calls, text, usage with the
cache fields added to the input, stop reason, model). `neutral_request` reads a
recorded body back into the neutral request it expresses, independently of the
codec (which only encodes), so that encoding it and comparing with the
recording tests the encoder.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import jsonschema
from cassettes import SPECS, folder, load
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from replay_expectations import Answer, Failure

from toolfold import AuthenticationError, BadRequestError
from toolfold.runtime import (
    Message,
    ModelRequest,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

FOLDER = "anthropic-messages"
CASES = [(name, i) for name in folder(FOLDER) for i in range(len(load(name)))]
IDS = [f"{n.split('/')[1]}#{i}" for n, i in CASES]

ANTHROPIC: dict[tuple[str, int], Answer | Failure] = {
    ("error-400-invalid-option.yaml", 0): Failure(
        BadRequestError,
        "This model does not support effort level 'xhigh'",
        400,
        "invalid_request_error",
    ),
    ("error-401-invalid-key.yaml", 0): Failure(
        AuthenticationError, "invalid x-api-key", 401, "authentication_error"
    ),
    ("parallel-2-calls-with-text-gzip-body.yaml", 0): Answer(
        (
            (
                "toolu_012r6TBCWjRHG71j6zruYyUL",
                "get_weather",
                {"location": "New York, NY", "unit": "fahrenheit"},
            ),
            ("toolu_01SkeBKkLCNYWNuivqFerGDd", "get_time", {"timezone": "America/New_York"}),
        ),
        text="Certainly! I'd be happy to help you with both the current weather in New York and "
        "the current time there. Let's use the available tools to get this information for you.",
        usage=(514, 152, 0, 0),
        finish="tool_calls",
        raw_finish="tool_use",
        model="claude-3-5-sonnet-20240620",
    ),
    ("parallel-4-calls-results-final.yaml", 0): Answer(
        tuple(
            (call_id, "retrieve_entity_info", {"name": name})
            for call_id, name in (
                ("toolu_0167cfEnoQaPviGdVXA95zcu", "Alice"),
                ("toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "Bob"),
                ("toolu_01XFyAjstT3966qvRynZyVPo", "Charlie"),
                ("toolu_013mnQZbgtK2oe3Mo3XKJsx3", "Daisy"),
            )
        ),
        text="I'll help you find out who is the youngest by retrieving information about each "
        "family member. I'll retrieve their entity information to compare their ages.",
        usage=(423, 202, 0, 0),
        finish="tool_calls",
        raw_finish="tool_use",
        model="claude-haiku-4-5-20251001",
    ),
    ("parallel-4-calls-results-final.yaml", 1): Answer(
        text="Based on the retrieved information, we can see the family relationships:\n"
        "- Alice and Bob are married\n- Charlie is their son\n"
        "- Daisy is their daughter and Charlie's younger sister\n\n"
        "Therefore, Daisy is the youngest in the family. She is described as Charlie's younger "
        "sister, which indicates she is the youngest among the four family members.",
        usage=(771, 77, 0, 0),
        raw_finish="end_turn",
    ),
    ("single-call-result-final.yaml", 0): Answer(
        (("toolu_01WN4AuToBnJyXNQXwQBBebj", "get_weather", {"city": "Paris"}),),
        usage=(572, 53, 0, 0),
        finish="tool_calls",
        raw_finish="tool_use",
        model="claude-sonnet-4-5-20250929",
    ),
    ("single-call-result-final.yaml", 1): Answer(
        text="The weather in Paris is currently sunny with a temperature of 22\u00b0C "
        "(approximately 72\u00b0F). It's a beautiful day!",
        usage=(646, 31, 0, 0),
        raw_finish="end_turn",
    ),
    ("single-call-tool-choice-any.yaml", 0): Answer(
        (("toolu_01Dxp8hdnkA8bsrVJJ8LB9q1", "get_weather", {"city": "Paris"}),),
        usage=(655, 38, 0, 0),
        finish="tool_calls",
        raw_finish="tool_use",
    ),
    ("stream-beta-parallel-2-calls-results-final.yaml", 0): Answer(
        (
            ("toolu_01VWFW9FF8QaS9aWvBEPAw9z", "secret_retrieval_tool", {"password": "mellon"}),
            ("toolu_012pyoQwpU3MUduNm1AEuMYz", "secret_retrieval_tool", {"password": "radiance"}),
        ),
        text="I'll retrieve the secrets for both passwords using the secret retrieval tool.",
        usage=(416, 113, 0, 0),
        finish="tool_calls",
        raw_finish="tool_use",
        model="claude-sonnet-4-20250514",
    ),
    ("stream-beta-parallel-2-calls-results-final.yaml", 1): Answer(
        text='Here are the secrets retrieved for each password:\n\n- Password "mellon": '
        '"Welcome to Moria!"\n- Password "radiance": "Life before Death"',
        usage=(606, 38, 0, 0),
        raw_finish="end_turn",
    ),
    ("stream-parallel-2-calls-results-final-gzip-body.yaml", 0): Answer(
        (
            ("toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
            ("toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}),
        ),
        usage=(542, 62, 0, 0),
        finish="tool_calls",
        raw_finish="tool_use",
    ),
    ("stream-parallel-2-calls-results-final-gzip-body.yaml", 1): Answer(
        text="Here are two great names for your pet pelican:\n\n1. **Charles** - A sophisticated "
        "and dignified name, perfect for a pelican with personality!\n2. **Sammy** - A friendly "
        "and playful name that gives off warm, approachable vibes.\n\nEither of these would make "
        "an excellent name for your feathered friend! \U0001f985",
        usage=(678, 82, 0, 0),
        raw_finish="end_turn",
    ),
    ("stream-parallel-2-calls.yaml", 0): Answer(
        (
            ("toolu_01Mo5Ee5Yb7vrzaxSNS5DVuP", "get_weather", {"location": "New York, NY"}),
            ("toolu_01GDAGw1KUdi1DCPPprMKGHR", "get_time", {"timezone": "America/New_York"}),
        ),
        text="I'll check both the current weather and time in New York simultaneously right away!",
        usage=(721, 113, 0, 0),
        finish="tool_calls",
        raw_finish="tool_use",
        model="claude-sonnet-4-6",
    ),
    ("stream-single-call-result-final.yaml", 0): Answer(
        (("toolu_01UmKD1vMphVCN9vw8PEMk1q", "fixed_version", {}),),
        usage=(563, 37, 0, 0),
        finish="tool_calls",
        raw_finish="tool_use",
    ),
    ("stream-single-call-result-final.yaml", 1): Answer(
        text="The version is **0.32a0**.\n\nHere's a joke: I guess you could say this version is "
        'still in the "alpha" stages of being useful! \U0001f604',
        usage=(617, 41, 0, 0),
        raw_finish="end_turn",
    ),
    ("thinking-single-call-result-final.yaml", 0): Answer(
        (("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", {}),),
        text="I'll help you find the largest city in your country. First, let me determine which "
        "country you're from.",
        usage=(398, 155, 0, 0),
        finish="tool_calls",
        raw_finish="tool_use",
        reasoning="The user is asking about the largest city in",
    ),
    ("thinking-single-call-result-final.yaml", 1): Answer(
        text="Based on the information that you're from Mexico, the largest city in your country "
        "is **Mexico City** (Ciudad de M\u00e9xico). \n\nMexico City is not only the largest "
        "city in Mexico but also one of the largest metropolitan areas in the world. The city "
        "proper has a population of approximately 9.2 million people, while the greater Mexico "
        "City metropolitan area (which includes surrounding municipalities) has over 21 million "
        "inhabitants, making it one of the most populous urban agglomerations globally.\n\n"
        "Mexico City serves as the country's capital and is the political, economic, and "
        "cultural center of Mexico.",
        usage=(566, 126, 0, 0),
        raw_finish="end_turn",
    ),
}


# --- a recorded Messages body, read back as a neutral request ---------------

_NOT_SETTINGS = {"model", "messages", "tools", "tool_choice", "stream", "system"}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block["text"] for block in content if block["type"] == "text")


def neutral_request(body: Mapping[str, Any]) -> ModelRequest:
    """The neutral `ModelRequest` a recorded Messages body expresses."""
    messages: list[Message] = []
    if body.get("system"):
        messages.append(Message.system(_text_of(body["system"])))
    names: dict[str, str] = {}
    for wire in body["messages"]:
        content = wire["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if wire["role"] == "assistant":
            parts: list[Any] = []
            for block in content:
                if block["type"] == "text":
                    parts.append(TextPart(block["text"]))
                elif block["type"] == "thinking":
                    parts.append(ReasoningPart(block["thinking"], block["signature"], "anthropic"))
                elif block["type"] == "tool_use":
                    names[block["id"]] = block["name"]
                    parts.append(
                        ToolCallPart(
                            block["id"], block["name"], json.dumps(block["input"]), block["input"]
                        )
                    )
            messages.append(Message("assistant", parts))
            continue
        results = [
            ToolResultPart(
                b["tool_use_id"],
                names.get(b["tool_use_id"], ""),
                _text_of(b["content"]),
                bool(b.get("is_error")),
            )
            for b in content
            if b["type"] == "tool_result"
        ]
        if results:
            messages.append(Message.tool(*results))
        texts = [TextPart(b["text"]) for b in content if b["type"] == "text"]
        if texts:
            messages.append(Message("user", texts))
    tools = tuple(
        ToolDefinition(t["name"], t.get("description") or "", t["input_schema"], t.get("strict"))
        for t in body.get("tools") or ()
    )
    settings = {k: v for k, v in body.items() if k not in _NOT_SETTINGS}
    wire_choice = body.get("tool_choice")
    choice = None
    if wire_choice is not None:
        choice = {"auto": "auto", "any": "required", "none": "none"}.get(
            wire_choice["type"], wire_choice.get("name")
        )
        if wire_choice.get("disable_parallel_tool_use"):
            settings["parallel_tool_calls"] = False
    return ModelRequest(tuple(messages), tools, choice, None, settings)


def normalise_body(body: Mapping[str, Any]) -> Any:
    """A Messages body with the differences that carry no meaning removed.

    Equivalences: user content as a string or one text block; a system prompt
    as a string or text blocks; ``tool_result`` content as a string or text
    blocks; ``is_error: false``, ``strict: false``, ``stream: false`` and an
    empty tool description are the defaults. ``cache_control`` marks are
    dropped: toolfold does not place cache breakpoints (the beta recording
    has them). A whitespace-only text block beside other blocks says nothing:
    toolfold leaves it out (the API refuses a turn of only such text), where
    the recordings send back the ``" "`` Claude wrote before its tool calls.
    """
    out = json.loads(json.dumps(body))
    if out.get("stream") is False:
        del out["stream"]
    if isinstance(out.get("system"), list):
        out["system"] = _text_of(out["system"])
    for message in out["messages"]:
        if isinstance(message["content"], str):
            message["content"] = [{"type": "text", "text": message["content"]}]
        message["content"] = [b for b in message["content"] if not _blank_text(b)] or message[
            "content"
        ]
        for block in message["content"]:
            block.pop("cache_control", None)
            if block["type"] == "tool_result":
                if block.get("is_error") is False:
                    del block["is_error"]
                block["content"] = _text_of(block["content"])
    for tool in out.get("tools") or ():
        tool.pop("cache_control", None)
        if tool.get("strict") is False:
            del tool["strict"]
        if tool.get("description") == "":
            del tool["description"]
    return out


def _blank_text(block: Mapping[str, Any]) -> bool:
    """A text block of only whitespace."""
    return block["type"] == "text" and not block["text"].strip()


# --- the spec -----------------------------------------------------------------

_URI = "urn:anthropic-openapi"


@functools.cache
def _registry() -> Registry:
    document = json.loads((SPECS / "anthropic-openapi.json").read_text(encoding="utf-8"))
    return Registry().with_resource(_URI, Resource(contents=document, specification=DRAFT202012))


@functools.cache
def validator(schema_name: str) -> jsonschema.protocols.Validator:
    """A validator for ``#/components/schemas/<schema_name>`` of Anthropic's OpenAPI document."""
    schema = {"$ref": f"{_URI}#/components/schemas/{schema_name}"}
    return jsonschema.Draft202012Validator(schema, registry=_registry())


def spec_problems(body: Mapping[str, Any], *, beta: bool) -> list[str]:
    """Every error of ``body`` against ``CreateMessageParams`` (``BetaCreateMessageParams`` for beta)."""
    name = "BetaCreateMessageParams" if beta else "CreateMessageParams"
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:300]}"
        for e in validator(name).iter_errors(body)
    ]
