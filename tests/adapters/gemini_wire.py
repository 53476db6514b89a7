"""Recorded Gemini request bodies read back as neutral requests, and compared semantically.

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
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

_TOP = {"contents", "systemInstruction", "tools", "toolConfig"}


def _camel(part: Mapping[str, Any]) -> dict[str, Any]:
    # The API accepts snake_case too (the llm-gemini recording sends it).
    renames = {"function_call": "functionCall", "function_response": "functionResponse"}
    return {renames.get(k, k): v for k, v in part.items()}


def _json_schema(schema: Any) -> Any:
    """An OpenAPI-form schema as the JSON Schema a user would have written."""
    if isinstance(schema, dict):
        out = {k: _json_schema(v) for k, v in schema.items() if k != "title"}
        if isinstance(out.get("type"), str):
            out["type"] = out["type"].lower()
        return out
    if isinstance(schema, list):
        return [_json_schema(v) for v in schema]
    return schema


def schema_form(body: Mapping[str, Any]) -> str:
    """The tool-schema form a recording used (``"openapi"`` or ``"json-schema"``)."""
    for tool in body.get("tools") or ():
        for declaration in tool.get("functionDeclarations") or ():
            if "parameters" in declaration:
                return "openapi"
    return "json-schema"


def neutral_request(body: Mapping[str, Any]) -> ModelRequest:
    """The neutral `ModelRequest` a recorded ``GenerateContentRequest`` expresses."""
    tools = []
    for tool in body.get("tools") or ():
        for d in tool.get("functionDeclarations") or ():
            schema = (
                d.get("parametersJsonSchema")
                or d.get("parameters_json_schema")
                or _json_schema(d.get("parameters"))
            )
            tools.append(ToolDefinition(d["name"], d.get("description") or "", schema))
    config = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
    mode = config.get("mode")
    choice = {"AUTO": "auto", "ANY": "required", "NONE": "none", None: None}[mode]
    allowed = config.get("allowedFunctionNames")
    if mode == "ANY" and allowed and len(allowed) == 1 and len(tools) > 1:
        choice = allowed[0]
    settings = {k: v for k, v in body.items() if k not in _TOP}
    messages: list[Message] = []
    system = body.get("systemInstruction")
    if system:
        messages.append(Message.system("".join(p["text"] for p in system["parts"])))
    names: dict[str, int] = {}
    for content in body["contents"]:
        parts = [_camel(p) for p in content["parts"]]
        if content["role"] == "model":
            out: list[Any] = []
            for part in parts:
                call = part.get("functionCall")
                if call is None:
                    out.append(TextPart(part["text"]))
                    continue
                number = names.setdefault("calls", 0)
                names["calls"] = number + 1
                signature = part.get("thoughtSignature")
                out.append(
                    ToolCallPart(
                        call.get("id") or f"recorded_{number}",
                        call["name"],
                        json.dumps(call["args"]),
                        call["args"],
                        {"thought_signature": signature} if signature else None,
                    )
                )
            messages.append(Message("assistant", out))
        elif any("functionResponse" in p for p in parts):
            results = []
            for number, part in enumerate(parts):
                answer = part["functionResponse"]
                response = answer["response"]
                is_error = "error" in response
                value = response.get(
                    "error" if is_error else "output", response.get("return_value")
                )
                results.append(
                    ToolResultPart(
                        answer.get("id") or f"recorded_{names.get('results', 0) + number}",
                        answer["name"],
                        value if isinstance(value, str) else json.dumps(value),
                        is_error,
                    )
                )
            names["results"] = names.get("results", 0) + len(parts)
            messages.append(Message.tool(*results))
        else:
            messages.append(Message("user", [TextPart(p["text"]) for p in parts]))
    return ModelRequest(messages, tools, choice, None, settings)


def normalise(body: Mapping[str, Any], *, keep_ids: bool) -> Any:
    """A request body with the differences that carry no meaning removed.

    Equivalences (each from a recording): snake_case part keys (llm-gemini);
    ``systemInstruction.role`` (always ``user``); a tool ``description`` null
    or ``""``; a ``title`` in a schema (an annotation); ``propertyOrdering``
    (toolfold states the declared order); OpenAPI type names in either case;
    ``functionCallingConfig`` mode AUTO, which is the default, and an
    ``allowedFunctionNames`` listing every tool; an empty ``generationConfig``;
    ``response: {"return_value": x}`` (pydantic-ai) and ``{"output": x}``;
    call ids when the recording sent none (ids toolfold made for id-less calls);
    thought signatures in base64url (pydantic-ai re-encodes them) or base64.
    """
    out = json.loads(json.dumps(body))
    if out.get("generationConfig") == {}:
        del out["generationConfig"]
    out.get("systemInstruction", {}).pop("role", None)
    names = []
    for tool in out.get("tools") or ():
        for d in tool.get("functionDeclarations") or ():
            names.append(d["name"])
            if not d.get("description"):
                d.pop("description", None)
            if "parameters_json_schema" in d:
                d["parametersJsonSchema"] = d.pop("parameters_json_schema")
            if "parameters" in d:
                d["parameters"] = _upper_types(_strip(d["parameters"]))
            if "parametersJsonSchema" in d:
                d["parametersJsonSchema"] = _strip(d["parametersJsonSchema"])
    config = (out.get("toolConfig") or {}).get("functionCallingConfig")
    if config is not None:
        if sorted(config.get("allowedFunctionNames") or ()) == sorted(names) and names:
            config.pop("allowedFunctionNames", None)
        if config == {"mode": "AUTO"}:
            del out["toolConfig"]
    for content in out["contents"]:
        content["parts"] = [_part(_camel(p), keep_ids) for p in content["parts"]]
    return out


def _strip(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip(v) for k, v in schema.items() if k not in ("title", "propertyOrdering")}
    if isinstance(schema, list):
        return [_strip(v) for v in schema]
    return schema


def _upper_types(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _upper_types(v) for k, v in schema.items()}
        if isinstance(out.get("type"), str):
            out["type"] = out["type"].upper()
        return out
    if isinstance(schema, list):
        return [_upper_types(v) for v in schema]
    return schema


def _part(part: dict[str, Any], keep_ids: bool) -> dict[str, Any]:
    for key in ("functionCall", "functionResponse"):
        if key in part and not keep_ids:
            part[key].pop("id", None)
    response = part.get("functionResponse", {}).get("response")
    if isinstance(response, dict) and set(response) == {"return_value"}:
        part["functionResponse"]["response"] = {"output": response["return_value"]}
    signature = part.get("thoughtSignature")
    if isinstance(signature, str):
        part["thoughtSignature"] = signature.replace("-", "+").replace("_", "/")
    return part


def has_ids(body: Mapping[str, Any]) -> bool:
    """Whether the recorded request sends call ids back."""
    for content in body["contents"]:
        for part in content["parts"]:
            part = _camel(part)
            if "id" in (part.get("functionCall") or part.get("functionResponse") or {}):
                return True
    return False
