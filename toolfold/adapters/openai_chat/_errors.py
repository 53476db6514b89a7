"""Error bodies of the OpenAI-compatible family -> toolfold's `ProviderError` tree.

Shapes met in the wild (providers.md §1, §6):

- OpenAI, Groq, DeepSeek: ``{"error": {"message", "type", "param", "code"}}``;
  Groq adds ``failed_generation`` to ``code: "tool_use_failed"`` [C2].
- Mistral and older vLLM: flat ``{"object": "error", "message", "type", "param", "code"}`` [C4, C11].
- OpenRouter: ``{"error": {"code": <int>, "message", "metadata": {"raw", "provider_name"}}}``;
  its message is generic ("Provider returned error"), the upstream's is in
  ``metadata.raw`` [C8, openrouter-error-429 cassette].
- vLLM: ``{"error": {..., "code": <int HTTP status>}}`` [C11].
- Gemini's OpenAI endpoint: the OpenAI shape wrapped in a one-element list.

The status -> exception mapping is the transport's (`status_error`), so it
lives in one place; this module only reads the family's bodies, and maps the
errors that arrive inside an HTTP 200 stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from toolfold._errors import ProviderError, ToolUseFailedError
from toolfold.adapters import _wire as wire
from toolfold.adapters._codec import inband_error_fields, inband_stream_error
from toolfold.adapters._http._http_errors import ErrorInfo, parse_error_body, status_error


def parse_error(status: int, body: str, headers: Mapping[str, str]) -> ErrorInfo:
    """Read a family error body (the transport's ``error_parser``); never raises."""
    info = parse_error_body(status, body, headers)
    raw = _openrouter_raw(body)
    if raw is not None:
        upstream, detail = raw
        where = f" ({upstream})" if upstream else ""
        said = None if info.quoted else info.message  # (a quote of this very body: not words)
        message = f"{said or 'upstream error'}{where}: {detail}"
        info = attrs.evolve(info, message=message, quoted=False)
    return info


def _openrouter_raw(body: str) -> tuple[str | None, str] | None:
    if '"metadata"' not in body:
        return None
    try:
        payload = wire.loads(body)
    except ValueError:
        return None
    error = payload.get("error") if isinstance(payload, Mapping) else None
    metadata = error.get("metadata") if isinstance(error, Mapping) else None
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("raw"), str):
        return None
    if not isinstance(metadata.get("provider_name"), (str, type(None))):
        return None
    upstream = wire.text(metadata, "provider_name", "$.error.metadata")
    return upstream or None, wire.encodable(metadata["raw"])


def error_from_response(
    provider: str, status: int, body: str, headers: Mapping[str, str] | None = None, url: str = ""
) -> ProviderError:
    """The exception for a non-2xx response, exactly as the transport raises it."""
    headers = dict(headers or {})
    return status_error(provider, status, body, headers, parse_error(status, body, headers), url)


def inband_error(provider: str, event: str | None, data: str) -> ProviderError | None:
    """The exception for an error reported inside an HTTP 200 stream, else None.

    Groq's ``tool_use_failed`` stays a `ToolUseFailedError` (as its 400 twin
    would be), so the run can feed it back to the model instead of failing
    [C2]; anything else is a `StreamError`. Both carry the provider's message.
    """
    if event != "error" and '"error"' not in data:
        return None
    try:
        payload: Any = wire.loads(data)
        text = data
    except ValueError:
        if event != "error":
            return None
        text = json.dumps({"error": {"message": data}})
    else:
        if event != "error" and not (
            isinstance(payload, Mapping) and payload.get("error") is not None
        ):
            return None
    info = parse_error(200, text, {})
    code = info.code or info.type
    if info.code == "tool_use_failed":
        text, fields = inband_error_fields(provider, data, info.message, code)
        return ToolUseFailedError(text, failed_generation=info.failed_generation or "", **fields)
    return inband_stream_error(provider, data, info.message, code)
