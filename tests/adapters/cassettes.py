"""Load the recorded provider traffic in ``../shared/fixtures/provider-traffic``.

Follows the fixture README's rules: prefer ``parsed_body``; else take ``body``
(request) or ``body.string`` (response); bytes are gunzipped when they start
with ``1f 8b`` and decoded as UTF-8; a mapping is re-encoded as JSON.
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import yaml

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"
TRAFFIC = FIXTURES / "provider-traffic"
SPECS = FIXTURES / "specs"

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Loader = yaml.SafeLoader


@attrs.frozen
class Exchange:
    """One recorded HTTP exchange.

    Attributes:
        method: The request method.
        uri: The request URI.
        request_text: The request body as text ("" when none).
        status: The response status code.
        response_headers: Response headers, names lower-cased, values joined by ", ".
        response_text: The response body as text (gunzipped when stored compressed).
    """

    method: str
    uri: str
    request_text: str
    status: int
    response_headers: Mapping[str, str]
    response_text: str

    @property
    def request_json(self) -> Any:
        """The request body parsed as JSON."""
        return json.loads(self.request_text)

    @property
    def response_json(self) -> Any:
        """The response body parsed as JSON."""
        return json.loads(self.response_text)

    @property
    def is_stream(self) -> bool:
        """The response is an SSE stream."""
        return "text/event-stream" in self.response_headers.get("content-type", "")


def body_text(value: Any) -> str:
    """A stored body as text, whatever dialect stored it."""
    if value is None:
        return ""
    if isinstance(value, Mapping) and set(value) == {"string"}:
        value = value["string"]
    if isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return raw.decode("utf-8")
    if isinstance(value, (Mapping, list)):
        return json.dumps(value)
    return str(value)


def _headers(raw: Mapping[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, values in (raw or {}).items():
        out[str(name).lower()] = (
            ", ".join(str(v) for v in values) if isinstance(values, list) else str(values)
        )
    return out


def _side(side: Mapping[str, Any]) -> str:
    if "parsed_body" in side:
        return body_text(side["parsed_body"])
    return body_text(side.get("body"))


@functools.cache
def load(relative: str) -> tuple[Exchange, ...]:
    """The exchanges of ``provider-traffic/<relative>``, in recorded order."""
    data = yaml.load((TRAFFIC / relative).read_text(encoding="utf-8"), Loader=_Loader)
    exchanges = []
    for item in data["interactions"]:
        request, response = item["request"], item["response"]
        exchanges.append(
            Exchange(
                method=request.get("method", "POST"),
                uri=request["uri"],
                request_text=_side(request),
                status=int(response["status"]["code"]),
                response_headers=_headers(response.get("headers")),
                response_text=_side(response),
            )
        )
    return tuple(exchanges)


def raw_response(relative: str, index: int) -> tuple[int, dict[str, str], bytes]:
    """Exchange ``index``'s response as recorded: status, headers to replay, body bytes.

    The body keeps its stored form: a gzipped body stays gzipped and gets
    ``content-encoding: gzip`` (kept from the recording, or added when the
    bytes start with ``1f 8b``); ``retry-after`` headers are kept too.
    """
    data = yaml.load((TRAFFIC / relative).read_text(encoding="utf-8"), Loader=_Loader)
    response = data["interactions"][index]["response"]
    headers = _headers(response.get("headers"))
    value: Any = response.get("parsed_body", response.get("body"))
    if isinstance(value, Mapping) and set(value) == {"string"}:
        value = value["string"]
    if isinstance(value, (bytes, bytearray)):
        body = bytes(value)
    elif isinstance(value, (Mapping, list)):
        body = json.dumps(value).encode()
    else:
        body = str(value or "").encode()
    kept = {k: v for k, v in headers.items() if k == "content-type" or k.startswith("retry-after")}
    if body[:2] == b"\x1f\x8b":
        kept["content-encoding"] = "gzip"
    return int(response["status"]["code"]), kept, body


def folder(name: str) -> list[str]:
    """The cassettes of one provider-API folder, as ``folder/file.yaml`` names."""
    return sorted(f"{name}/{p.name}" for p in (TRAFFIC / name).glob("*.yaml"))


# --- replaying an exchange through a real model over httpx.MockTransport ----


@attrs.define
class Recorder:
    """Serves recorded responses in order and keeps the request bodies sent."""

    exchanges: tuple[Exchange, ...]
    sent: list[Any] = attrs.field(factory=list)

    def handler(self, request: Any) -> Any:
        import httpx

        exchange = self.exchanges[len(self.sent) % len(self.exchanges)]
        self.sent.append(json.loads(request.content))
        content_type = exchange.response_headers.get("content-type", "application/json")
        return httpx.Response(
            exchange.status,
            headers={"content-type": content_type, **_retry_headers(exchange)},
            content=exchange.response_text.encode("utf-8"),
        )


def _retry_headers(exchange: Exchange) -> dict[str, str]:
    return {k: v for k, v in exchange.response_headers.items() if k.startswith("retry-after")}


# --- a recorded Chat Completions body, read back as a neutral request -------
# Written independently of the codec (which only encodes), so that encoding
# this neutral request and comparing with the recording tests the encoder.

_NOT_SETTINGS = {"model", "messages", "tools", "tool_choice", "stream", "stream_options"}


def neutral_request(body: Mapping[str, Any]) -> Any:
    """The neutral `ModelRequest` a recorded Chat Completions body expresses."""
    from toolfold.runtime import ModelRequest, ToolDefinition

    tools = tuple(
        ToolDefinition(
            t["function"]["name"],
            t["function"].get("description") or "",
            t["function"].get("parameters") or {"type": "object", "properties": {}},
            t["function"].get("strict", False),
        )
        for t in body.get("tools") or ()
    )
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping):
        choice = choice["function"]["name"]
    elif choice == "any":  # Mistral's word for "required"
        choice = "required"
    settings = {
        k: v for k, v in body.items() if k not in _NOT_SETTINGS and not (k == "n" and v == 1)
    }
    return ModelRequest(neutral_messages(body["messages"]), tools, choice, None, settings)


def neutral_messages(messages: list[Mapping[str, Any]]) -> tuple[Any, ...]:
    """Neutral messages from recorded wire messages."""
    from toolfold.runtime import (
        ImagePart,
        Message,
        ReasoningPart,
        TextPart,
        ToolCallPart,
        ToolResultPart,
    )

    names: dict[str, str] = {}
    out: list[Any] = []
    for wire in messages:
        role = wire["role"]
        content = wire.get("content")
        if role == "system":
            out.append(Message.system(content))
        elif role == "user":
            if isinstance(content, str):
                out.append(Message.user(content))
            else:
                parts = [
                    TextPart(c["text"])
                    if c["type"] == "text"
                    else ImagePart(url=c["image_url"]["url"])
                    for c in content
                ]
                out.append(Message("user", parts))
        elif role == "assistant":
            parts: list[Any] = []
            if wire.get("reasoning_content"):
                parts.append(ReasoningPart(wire["reasoning_content"], provider="deepseek"))
            if isinstance(content, str) and content:
                parts.append(TextPart(content))
            for call in wire.get("tool_calls") or ():
                names[call["id"]] = call["function"]["name"]
                arguments = call["function"]["arguments"]
                parts.append(
                    ToolCallPart(
                        call["id"], call["function"]["name"], arguments, json.loads(arguments)
                    )
                )
            out.append(Message("assistant", parts))
        elif role == "tool":
            call_id = wire["tool_call_id"]
            out.append(Message.tool(ToolResultPart(call_id, names.get(call_id, ""), content)))
        else:  # pragma: no cover - no other role is recorded
            raise AssertionError(role)
    return tuple(out)


def normalise_body(body: Mapping[str, Any], *, recorded: Mapping[str, Any] | None = None) -> Any:
    """A body with the differences that carry no meaning removed.

    Equivalences (each from a recording): an assistant message's ``content``
    absent, null, ``""`` or ``[]`` next to tool calls (OpenAI, Mistral SDK);
    Mistral SDK echoes ``prefix: false`` and a call ``index``; ``type:
    "function"`` is the only type (Mistral SDK omits it); an empty tool
    description equals none; ``n: 1`` and ``stream: false`` are the defaults;
    an empty ``reasoning_content`` equals none; toolfold always asks for
    stream usage, so ``stream_options`` only counts when the recording sent it.
    """
    out = json.loads(json.dumps(body))
    if out.get("n") == 1:
        del out["n"]
    if out.get("stream") is False:
        del out["stream"]
    if recorded is not None and "stream_options" not in recorded:
        out.pop("stream_options", None)
    for message in out.get("messages", []):
        if message.get("prefix") is False:
            del message["prefix"]
        if message.get("role") == "assistant":
            if message.get("tool_calls") and message.get("content") in (None, "", []):
                message.pop("content", None)
            if message.get("reasoning_content") == "":
                del message["reasoning_content"]
            for call in message.get("tool_calls") or ():
                call.pop("index", None)
                call.setdefault("type", "function")
    for tool in out.get("tools", []):
        tool.setdefault("type", "function")
        if tool["function"].get("description") == "":
            del tool["function"]["description"]
    return out


def answer(model: Any, request: Any, streamed: bool) -> Any:
    """``model``'s response to ``request``: whole, or streamed and folded (ids the stream lacks read ``missing-<n>``)."""
    from toolfold.runtime import StreamState, finish_stream, fold_stream

    if not streamed:
        return model.request_sync(request)
    state = StreamState()
    for event in model.stream_sync(request):
        state = fold_stream(state, event)
    return finish_stream(state, lambda i: f"missing-{i}")


def replay(
    relative: str, index: int, provider: str, **options: Any
) -> tuple[Any, Any, Mapping[str, Any]]:
    """Send the recorded request of exchange ``index`` through a real model.

    The model talks to an ``httpx.MockTransport`` that answers with the
    recorded response. Returns ``(response or exception, request sent,
    recorded request)``; a stream is folded into the response it makes.
    """
    import httpx

    from toolfold.adapters.openai_chat import OpenAIChatModel

    exchange = load(relative)[index]
    recorder = Recorder((exchange,))
    client = httpx.Client(transport=httpx.MockTransport(recorder.handler))
    model = OpenAIChatModel(
        exchange.request_json["model"],
        provider=provider,
        base_url=options.pop("base_url", "http://127.0.0.1:9/v1"),
        api_key="sk-test-key-0000",
        http_client=client,
        retry=0,
        **options,
    )
    recorded = exchange.request_json
    request = neutral_request(recorded)
    result: Any
    try:
        result = answer(model, request, bool(recorded.get("stream")))
    except Exception as exc:  # the test asserts on it
        result = exc
    finally:
        client.close()
    return result, recorder.sent[0], recorded
