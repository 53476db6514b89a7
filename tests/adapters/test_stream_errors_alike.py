"""Every provider reports a stream's in-band error, and an event that is not JSON, the same way."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold import StreamError
from toolfold.runtime import Message, ModelRequest

REQUEST = ModelRequest((Message.user("hi"),))
SSE = {"content-type": "text/event-stream"}
NDJSON = {"content-type": "application/x-ndjson"}


def _model(provider: str, url: str) -> Any:
    if provider == "ollama":
        return toolfold.model("ollama:m", base_url=url, retry=0)
    base = {"openai": f"{url}/v1", "openai-responses": f"{url}/v1"}.get(provider, url)
    return toolfold.model(f"{provider}:m", base_url=base, api_key="k" * 24, retry=0)


def _sse(data: str, event: str | None = None) -> bytes:
    return (f"event: {event}\n" if event else "").encode() + f"data: {data}\n\n".encode()


ERRORS = {
    "anthropic": (
        _sse(
            json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}),
            "error",
        ),
        "Busy",
        "overloaded_error",
    ),
    "gemini": (
        _sse(json.dumps({"error": {"code": 500, "message": "Busy", "status": "INTERNAL"}})),
        "Busy",
        "INTERNAL",
    ),
    "openai-responses": (
        _sse(
            json.dumps(
                {
                    "type": "response.failed",
                    "response": {
                        "status": "failed",
                        "error": {"code": "server_error", "message": "Busy"},
                    },
                }
            ),
            "response.failed",
        ),
        "Busy",
        "server_error",
    ),
    "openai": (
        _sse(json.dumps({"error": {"message": "Busy", "type": "server_error"}})),
        "Busy",
        "server_error",
    ),
    "ollama": (json.dumps({"error": "Busy"}).encode() + b"\n", "Busy", None),
}


@pytest.mark.parametrize("provider", list(ERRORS))
def test_an_in_band_error_reads_alike_for_every_provider(
    http_server: ScriptedServer, opened: list[Any], provider: str
) -> None:
    """An error inside an HTTP 200 stream is a StreamError with one message form, the provider's message and code."""
    chunk, said, code = ERRORS[provider]
    http_server.add(Reply(headers=NDJSON if provider == "ollama" else SSE, chunks=[chunk]))
    model = _model(provider, http_server.url)
    opened.append(model)
    with pytest.raises(StreamError) as raised:
        list(model.stream_sync(REQUEST))
    error = raised.value
    suffix = f" (code {code})" if code else ""
    assert str(error) == f"{provider} reported an error inside the stream: {said}{suffix}"
    assert (error.provider, error.status_code, error.provider_message, error.code) == (
        provider,
        200,
        said,
        code,
    )


@pytest.mark.parametrize("provider", list(ERRORS))
def test_an_event_that_is_not_json_reads_alike_for_every_provider(
    http_server: ScriptedServer, opened: list[Any], provider: str
) -> None:
    """A stream event (an NDJSON line for Ollama) that is not JSON is a StreamError quoting its start."""
    chunk = b"{half\n" if provider == "ollama" else _sse("{half")
    http_server.add(Reply(headers=NDJSON if provider == "ollama" else SSE, chunks=[chunk]))
    model = _model(provider, http_server.url)
    opened.append(model)
    what = "stream line" if provider == "ollama" else "stream event"
    with pytest.raises(StreamError, match=f"^{provider} sent a {what} that is not JSON: '{{half'"):
        list(model.stream_sync(REQUEST))
