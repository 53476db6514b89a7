"""Gemini error bodies -> toolfold's `ProviderError` tree.

The body is ``{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT",
"details": [...]}}`` (sometimes wrapped in a one-element list) [G4 errors.py].
The shared `parse_error_body` reads it, ``RetryInfo.retryDelay`` included (the
wait honoured before retrying a 429 ``RESOURCE_EXHAUSTED``) and per-day
``QuotaFailure`` (never retried) [G6, G7]. This module adds Gemini's own:

- ``code`` is the status word (``RESOURCE_EXHAUSTED``, ``INVALID_ARGUMENT``,
  ``PERMISSION_DENIED``, ``NOT_FOUND``), not the repeated HTTP number;
- a bad key comes as HTTP 400 ``INVALID_ARGUMENT`` with reason
  ``API_KEY_INVALID`` (error-400-invalid-key cassette): an `AuthenticationError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from toolfold._errors import AuthenticationError, BadRequestError, ProviderError, StreamError
from toolfold.adapters._codec import inband_stream_error
from toolfold.adapters._http._http_errors import ErrorInfo, parse_error_body
from toolfold.adapters._wire import loads
from toolfold.adapters.gemini._providers import BAD_KEY_REASONS


def parse_error(status: int, body: str, headers: Mapping[str, str]) -> ErrorInfo:
    """Read a Gemini error body (the transport's ``error_parser``); never raises."""
    info = parse_error_body(status, body, headers)
    if info.type is not None:
        info = attrs.evolve(info, code=info.type)
    return info


def error_reason(body: str) -> str | None:
    """The ``google.rpc.ErrorInfo`` reason of an error body (``API_KEY_INVALID``), if any."""
    try:
        data: Any = loads(body) if body else None  # deep nesting is a ValueError too
    except ValueError:
        return None
    if isinstance(data, list) and data:
        data = data[0]
    error = data.get("error") if isinstance(data, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("rpc.ErrorInfo"):
            reason = detail.get("reason")
            return reason if isinstance(reason, str) else None
    return None


def refine(error: ProviderError) -> ProviderError:
    """A bad key reported as HTTP 400 becomes the `AuthenticationError` it is."""
    if type(error) is BadRequestError and error_reason(error.body) in BAD_KEY_REASONS:
        return AuthenticationError(
            str(error),
            provider=error.provider,
            status_code=error.status_code,
            body=error.body,
            headers=error.headers,
            provider_message=error.provider_message,
            code=error.code,
        )
    return error


def stream_error(provider: str, chunk: Mapping[str, Any]) -> StreamError:
    """The exception for an error object sent inside an HTTP 200 stream."""
    text = json.dumps(chunk)
    info = parse_error(200, text, {})
    return inband_stream_error(provider, text, info.message, info.code)
