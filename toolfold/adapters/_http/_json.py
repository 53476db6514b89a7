"""How request bodies become bytes (one place, shared by the sync and async paths)."""

from __future__ import annotations

import json
from typing import Any

# One encoder for every body: `json.dumps` with options builds a new one per call.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_COMPACT_ASCII = json.JSONEncoder(separators=(",", ":"))

encode_text = _COMPACT.encode
"""Compact JSON text, non-ASCII kept as is (what `dumps` encodes to UTF-8)."""


def dumps(body: Any) -> bytes:
    """Compact UTF-8 JSON: no spaces, non-ASCII text kept as is (smaller than escapes).

    ``bytes`` are taken as a body already encoded (a codec that builds its
    JSON from memoized pieces). A lone surrogate (which UTF-8 cannot encode)
    that reached the body anyway is sent as a JSON escape instead of failing
    every later request of a run.
    """
    if type(body) is bytes:
        return body
    text = _COMPACT.encode(body)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _COMPACT_ASCII.encode(body).encode()


# The decoder `json.loads` uses (NaN and Infinity accepted, as there: the codecs
# check each field's type), called through its public `raw_decode`.
_decode = json.JSONDecoder().raw_decode


def loads_text(text: str) -> Any:
    """``json.loads(text)``, for a body whose JSON value starts at its first character.

    The same decoder, through `json.JSONDecoder.raw_decode`, without
    `json.loads`' two whitespace scans around the value (about a fifth of the
    parse of a small answer); anything else (leading whitespace, a BOM, text
    that is not JSON, data after the value) goes through `json.loads`, which
    raises its own error.

    Raises:
        ValueError: Not JSON (a `json.JSONDecodeError`).
        RecursionError: Nested deeper than the interpreter decodes.
    """
    try:
        value, end = _decode(text)
    except ValueError:
        return json.loads(text)
    if end != len(text) and text[end:].strip(" \t\n\r"):  # JSON's whitespace, not isspace()'s
        return json.loads(text)  # data after the value: "Extra data"
    return value
