"""Recorded OpenAI Responses request bodies read back as neutral requests, and compared semantically.

Written independently of the codec (which only encodes), so that encoding the
neutral request and comparing with the recording tests the encoder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolfold.runtime import (
    Message,
    ModelRequest,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

_NOT_SETTINGS = {"model", "input", "tools", "tool_choice", "stream"}


class NotNeutral(Exception):
    """The recorded request holds something neutral messages cannot express."""


def neutral_request(body: Mapping[str, Any]) -> ModelRequest:
    """The neutral `ModelRequest` a recorded ``CreateResponse`` body expresses.

    Raises:
        NotNeutral: A tool output that is not text (a file by URL has no media type to
            rebuild its `FilePart` from).
    """
    tools = [
        ToolDefinition(t["name"], t.get("description") or "", t["parameters"], t.get("strict"))
        for t in body.get("tools") or ()
    ]
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        choice = choice["name"]
    settings = {k: v for k, v in body.items() if k not in _NOT_SETTINGS}
    messages: list[Message] = []
    names: dict[str, str] = {}
    assistant: list[Any] = []
    results: list[ToolResultPart] = []

    def flush() -> None:
        if assistant:
            messages.append(Message("assistant", list(assistant)))
            assistant.clear()
        if results:
            messages.append(Message.tool(*results))
            results.clear()

    for item in body["input"]:
        kind = item.get("type", "message")
        if kind == "message" and item["role"] == "assistant":
            if results:
                flush()
            if item["content"]:
                assistant.append(TextPart(item["content"]))
        elif kind == "reasoning":
            if results:
                flush()
            text = "\n\n".join(s["text"] for s in item["summary"])
            part = ReasoningPart(
                text, item.get("encrypted_content"), "openai-responses", {"item_id": item["id"]}
            )
            assistant.append(part)
        elif kind == "function_call":
            if results:
                flush()
            names[item["call_id"]] = item["name"]
            assistant.append(
                ToolCallPart(
                    item["call_id"],
                    item["name"],
                    item["arguments"],
                    json.loads(item["arguments"]),
                    {"item_id": item["id"]} if item.get("id") else None,
                )
            )
        elif kind == "function_call_output":
            if assistant:
                flush()
            if not isinstance(item["output"], str):
                raise NotNeutral(f"tool output {item['output']!r} is not text")
            call_id = item["call_id"]
            results.append(ToolResultPart(call_id, names.get(call_id, ""), item["output"]))
        else:
            flush()
            content = item["content"]
            if item["role"] in ("system", "developer"):
                messages.append(Message.system(content))
            else:
                messages.append(Message.user(content))
    flush()
    return ModelRequest(messages, tools, choice, None, settings)


def normalise(body: Mapping[str, Any]) -> Any:
    """A request body with the differences that carry no meaning removed.

    Equivalences (each from a recording): ``stream: false``; ``"type":
    "message"`` on a role item (openllmetry); ``"status": null`` on a call item
    (pydantic-ai); an empty assistant message before calls (pydantic-ai 2025);
    a tool ``description`` null or ``""``; a tool without ``strict`` is strict
    (the API's default [O12]; the 2026 gzip recording's response echoes the
    tool back with ``strict: true`` and ``additionalProperties: false``);
    schema annotations (``title``, ``default``), which toolfold's strict
    compilation drops or writes into the description as ``default: <value>``,
    while the API accepted them under strict (error-400-invalid-tool-schema #2).
    """
    out = json.loads(json.dumps(body))
    if out.get("stream") is False:
        del out["stream"]
    items = []
    for item in out["input"]:
        if item.get("type") == "message" and "role" in item:
            del item["type"]
        if item.get("type") == "function_call" and item.get("status") is None:
            item.pop("status", None)
        if item.get("role") == "assistant" and item.get("content") == "":
            continue
        items.append(item)
    out["input"] = items
    for tool in out.get("tools") or ():
        if not tool.get("description"):
            tool.pop("description", None)
        if "strict" not in tool:
            tool["strict"] = True
            tool["parameters"].setdefault("additionalProperties", False)
        tool["parameters"] = _annotations_dropped(tool["parameters"])
    return out


def _annotations_dropped(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {
            k: _annotations_dropped(v) for k, v in schema.items() if k not in ("title", "default")
        }
        if str(out.get("description", "")).startswith("default: "):
            del out["description"]
        return out
    if isinstance(schema, list):
        return [_annotations_dropped(v) for v in schema]
    return schema
