"""Anthropic error bodies -> toolfold's `ProviderError` tree.

The body is ``{"type": "error", "error": {"type": "...", "message": "..."},
"request_id": "req_..."}`` [A6 shared/error_response.py]; the status carries
the class (400 ``invalid_request_error``, 401 ``authentication_error``, 403
``permission_error``, 404 ``not_found_error``, 413, 429 ``rate_limit_error``,
500 ``api_error``, 504 ``timeout_error``, 529 ``overloaded_error`` [A6
shared/error_type.py]), which the transport's `status_error` maps in one place;
Anthropic's error type becomes the error's ``code`` (there is no other code).
529 is a `ServerError` and retried like every 5xx, as the SDK does [A7].
After HTTP 200 the same body arrives as ``event: error`` (e.g. an
``overloaded_error`` mid-stream) and is a `StreamError` [A2].
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import attrs

from toolfold._errors import ProviderError, StreamError
from toolfold.adapters._codec import inband_stream_error
from toolfold.adapters._http._http_errors import ErrorInfo, parse_error_body, status_error


def parse_error(status: int, body: str, headers: Mapping[str, str]) -> ErrorInfo:
    """Read an Anthropic error body (the transport's ``error_parser``); never raises."""
    info = parse_error_body(status, body, headers)
    if info.code is None and info.type is not None:
        info = attrs.evolve(info, code=info.type)
    return info


def error_from_response(
    status: int, body: str, headers: Mapping[str, str] | None = None, url: str = ""
) -> ProviderError:
    """The exception for a non-2xx response, exactly as the transport raises it."""
    headers = dict(headers or {})
    return status_error("anthropic", status, body, headers, parse_error(status, body, headers), url)


def stream_error(data: str) -> StreamError:
    """The exception for an ``event: error`` inside an HTTP 200 stream."""
    info = parse_error(200, data, {})
    return inband_stream_error("anthropic", data, info.message, info.code)


def is_error_body(data: Mapping[str, object]) -> bool:
    """A 200 body that is an error object (``{"type": "error", ...}``)."""
    return data.get("type") == "error" and isinstance(data.get("error"), Mapping)


def error_in_body(data: Mapping[str, object]) -> ProviderError:
    """The exception for an error object sent with HTTP 200."""
    text = json.dumps(data)
    info = parse_error(200, text, {})
    return ProviderError(
        f"anthropic returned an error with HTTP 200: {info.message}",
        provider="anthropic",
        status_code=200,
        body=text,
        provider_message=info.message,
        code=info.code,
    )
