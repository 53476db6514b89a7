"""How request bodies become bytes, and answers values (one place, shared by the sync and async paths)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

# One encoder for every body: `json.dumps` with options builds a new one per call.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

encode_text = _COMPACT.encode
"""Compact JSON text, non-ASCII kept as is (what `dumps` encodes to UTF-8)."""


def dumps(body: Any) -> bytes:
    """Compact UTF-8 JSON: no spaces, non-ASCII text kept as is (smaller than escapes).

    ``bytes`` are taken as a body already encoded (a codec that builds its
    JSON from memoized pieces). A lone surrogate (which UTF-8 cannot encode:
    a tool's ``os.listdir()`` of a file name that is not UTF-8, text read with
    ``surrogateescape``) that reached the body is sent as U+FFFD: as a
    ``\\udcXX`` escape, Anthropic's and OpenAI's parsers refuse the body (400
    "no low surrogate in string"), and it would stay in every later request
    of the run. A surrogate pair held as two characters is sent as the
    character it stands for. The state keeps what the tool returned.
    """
    if type(body) is bytes:
        return body
    text = _COMPACT.encode(body)
    try:
        return text.encode()
    except UnicodeEncodeError:  # rare: the common body pays nothing for it
        return sendable(text).encode()


def sendable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, a surrogate pair joined."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


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


#: How deep `shallow` keeps a body's arrays and objects: far below what the
#: interpreter decodes, far above anything toolfold reads (arguments nested
#: deeper than 64 levels are refused, whatever their provider).
SHALLOW_DEPTH = 200

#: The longest text `shallow` walks (its brackets one by one, in Python: about
#: 0.3 s for a MiB of them); a longer one is returned as is. Arguments nested
#: too deep to decode take a few KiB.
SHALLOW_LIMIT = 1 << 20

# A JSON string (skipped whole: brackets inside it are text), or a bracket. A
# string that never closes runs to the end of the text, so that no quote starts
# a second scan of the rest: the walk stays linear in the text's length.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_CLOSING = {"]": "[", "}": "{"}


def decode_cut(decode: Callable[[str], Any], text: str) -> Any:
    """``decode(text)``; for a text nested deeper than the interpreter decodes, ``decode(shallow(text))``.

    Raises:
        ValueError: What ``decode`` raises, or "nested too deep to decode"
            when even the cut text is (see `shallow`).
    """
    try:
        try:
            return decode(text)
        except RecursionError:  # absurdly deep nesting: read it cut to a sane depth
            return decode(shallow(text))
    except RecursionError:
        raise ValueError("nested too deep to decode") from None


def shallow(text: str, depth: int = SHALLOW_DEPTH) -> str:
    """``text`` with each array and object nested deeper than ``depth`` replaced by ``null``.

    For an answer nested deeper than the interpreter decodes (a hostile one,
    whose decoding raised `RecursionError`): cut to ``depth``, the rest of the
    answer reads as before, so a tool call's arguments nested that deep
    become an argument error the model reads (they are deeper than any
    arguments toolfold takes) instead of failing the whole model call.

    The text is returned as is, and so fails to decode as before, when it
    has nothing that deep, when its brackets do not pair (``[`` closed by
    ``}``, one left open or closed twice) or when it is longer than
    `SHALLOW_LIMIT`: called only after a decoding failed, it walks the
    text's strings and brackets in Python, in time linear in its length.
    What it cuts is dropped unread, so a text that is not JSON only there
    (a stray comma 300 levels down) decodes.
    """
    if len(text) > SHALLOW_LIMIT:
        return text
    pieces: list[str] = []
    opened: list[str] = []  # the brackets open at this point, outermost first
    kept = 0  # where the text not yet copied to `pieces` starts
    cut = -1  # where the array or object being cut starts
    for match in _STRING_OR_BRACKET.finditer(text):
        start = match.start()
        char = text[start]
        if char == '"':
            continue
        if char in "[{":
            opened.append(char)
            if len(opened) == depth + 1:
                cut = start
            continue
        if not opened or opened.pop() != _CLOSING[char]:
            return text
        if len(opened) == depth and cut >= 0:
            pieces.append(text[kept:cut])
            pieces.append("null")
            kept, cut = match.end(), -1
    if not pieces or opened:
        return text
    pieces.append(text[kept:])
    return "".join(pieces)
