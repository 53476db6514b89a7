"""A streamed JSON array (``[{...}\\n,\\n{...}]``) split into its elements as bytes arrive.

Gemini streams this way when ``alt=sse`` is not asked for. The transport caps the
body's size, which bounds the buffer an unfinished element can grow to.
"""

from __future__ import annotations

import codecs
import json
from typing import Any

from toolfold._errors import StreamError


class JSONArrayDecoder:
    """Splits a streamed JSON array (``[{...}\\n,\\n{...}]``) into its elements as bytes arrive."""

    def __init__(self, provider: str = "gemini") -> None:
        self._provider = provider
        self._text = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._decoder = json.JSONDecoder()
        self._started = False
        self._ended = False

    def feed(self, chunk: bytes) -> list[Any]:
        """The elements completed by ``chunk``.

        Raises:
            StreamError: The body is not a JSON array of objects.
        """
        self._text += self._utf8.decode(chunk)
        found: list[Any] = []
        while True:
            text = self._text.lstrip()
            self._text = text
            if not text or self._ended:
                return found
            if not self._started:
                if text[0] != "[":
                    raise _not_array(self._provider, text)
                self._started = True
                self._text = text[1:]
            elif text[0] == ",":
                self._text = text[1:]
            elif text[0] == "]":
                self._ended = True
                self._text = text[1:]
            else:
                try:
                    value, end = self._decoder.raw_decode(text)
                except ValueError:
                    return found  # incomplete: wait for more bytes
                found.append(value)
                self._text = text[end:]

    def close(self) -> list[Any]:
        """The body ended.

        Raises:
            StreamError: Bytes are left that are not a complete element.
        """
        rest = (self._text + self._utf8.decode(b"", final=True)).strip()
        if rest:
            raise _not_array(self._provider, rest)
        return []


def _not_array(provider: str, text: str) -> StreamError:
    return StreamError(
        f"{provider} stream is not a JSON array of responses: {text[:200]!r}",
        provider=provider,
        status_code=200,
    )
