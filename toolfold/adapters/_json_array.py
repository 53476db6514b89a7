"""A streamed JSON array (``[{...}\\n,\\n{...}]``) split into its elements as bytes arrive.

Gemini streams this way when ``alt=sse`` is not asked for. The transport caps the
body's size, which bounds the text an unfinished element can grow to.

Each piece of text is scanned once, keeping the nesting depth and whether it
is inside a string from one piece to the next; an element is decoded once,
when its end has arrived, with the strict decoder every other stream event
gets (NaN refused, nesting too deep a `StreamError`). Decoding the text so
far after each piece, as this did before, cost time quadratic in an
element's size: a 64 MiB element arriving in 16 KiB pieces held the event
loop for minutes.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from typing import Any

from toolfold._errors import StreamError
from toolfold.adapters._codec import event_json

# Outside a string: what opens or closes a level, or opens a string.
_OUTSIDE = re.compile(r'["\[\]{}]')
# Whitespace between elements.
_SPACE = re.compile(r"\s*")
# The end of an element that is a number or a literal (true, null...).
_LITERAL_END = re.compile(r"[\s,\]]")


class JSONArrayDecoder:
    """Splits a streamed JSON array (``[{...}\\n,\\n{...}]``) into its elements as bytes arrive."""

    def __init__(self, provider: str = "gemini", clean: Callable[[str], str] | None = None) -> None:
        """A decoder for one stream.

        Args:
            provider: The provider, for errors.
            clean: Called on each element's text before it is decoded; what it
                returns is decoded (a provider's model masks its key there: `Echoes`).
        """
        self._provider = provider
        self._clean = clean
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._started = False
        self._ended = False
        self._after = ""  # what came after the closing "]" (the start of it)
        self._parts: list[str] = []  # the current element's text so far
        self._depth = 0
        self._in_string = False
        self._escape = False  # the last piece ended inside a string on a backslash
        self._literal = False  # the element is a number or a literal

    def feed(self, chunk: bytes) -> list[Any]:
        """The elements completed by ``chunk``.

        Raises:
            StreamError: The body is not a JSON array, or an element is not JSON.
        """
        return self._take(self._decoded(chunk))

    def close(self) -> list[Any]:
        """The body ended.

        Raises:
            StreamError: Bytes are left that are not a complete element.
        """
        found = self._take(self._decoded(b"", final=True))
        rest = ("".join(self._parts) + self._after).strip()
        if rest:
            raise _not_array(self._provider, rest)
        return found

    def _decoded(self, chunk: bytes, final: bool = False) -> str:
        try:
            return self._utf8.decode(chunk, final)
        except UnicodeDecodeError as exc:
            raise StreamError(
                f"{self._provider} stream is not UTF-8: {exc.reason}",
                provider=self._provider,
                status_code=200,
            ) from None

    def _take(self, text: str) -> list[Any]:
        # An offset into the piece, never a slice of what is left: slicing after
        # each element copied the rest of the piece once per element (a 1 MiB
        # piece of short elements took 16 s).
        found: list[Any] = []
        at, size = 0, len(text)
        while at < size:
            if self._ended:
                rest = text[at:]
                self._after = (self._after + (rest if self._after else rest.lstrip()))[:200]
                break
            if not self._parts:  # between elements
                at = _SPACE.match(text, at).end()  # type: ignore[union-attr]  # matches ""
                if at == size:
                    break
                head = text[at]
                if not self._started:
                    if head != "[":
                        raise _not_array(self._provider, text[at:])
                    self._started = True
                    at += 1
                    continue
                if head == ",":
                    at += 1
                    continue
                if head == "]":
                    self._ended = True
                    at += 1
                    continue
                self._literal = head not in '{["'
            end = self._end(text, at)
            if end is None:
                self._parts.append(text[at:])
                break
            self._parts.append(text[at:end])
            found.append(self._element())
            at = end
        return found

    def _end(self, text: str, at: int) -> int | None:
        """Where the current element ends in ``text`` (its next piece, from ``at`` on), or None: not yet."""
        if self._literal:
            match = _LITERAL_END.search(text, at)
            return None if match is None else match.start()
        if self._escape:  # the escaped character
            self._escape = False
            at += 1
        while True:
            if self._in_string:
                quote = _closing_quote(text, at)
                if quote < 0:  # ending on a lone backslash, it escapes the next piece's first
                    self._escape = _backslashes_before(text, at, len(text)) % 2 == 1
                    return None
                at = quote + 1
                self._in_string = False
                if self._depth == 0:
                    return at  # a string element
                continue
            match = _OUTSIDE.search(text, at)
            if match is None:
                return None
            at = match.end()
            found = match.group()
            if found == '"':
                self._in_string = True
            elif found in "[{":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth <= 0:
                    return at

    def _element(self) -> Any:
        text = "".join(self._parts)
        if self._clean is not None:
            text = self._clean(text)
        self._parts = []
        self._depth = 0
        self._in_string = self._escape = self._literal = False
        return event_json(self._provider, text, "stream element")


def _closing_quote(text: str, at: int) -> int:
    """The index of the quote closing the string ``text[at:]`` is inside, or -1: not in ``text``.

    ``at`` is not inside an escape. A quote is escaped when an odd run of
    backslashes comes right before it. (Searched with ``str.find``, in C: a
    regular expression over the string's characters kept backtracking state
    for each of them, ~95 bytes a character, 2 GB for a 16 MiB piece.)
    """
    while True:
        quote = text.find('"', at)
        if quote < 0 or _backslashes_before(text, at, quote) % 2 == 0:
            return quote
        at = quote + 1


def _backslashes_before(text: str, start: int, end: int) -> int:
    """How many backslashes come right before ``text[end]``, counting from ``start`` on."""
    run = text[start:end]
    return len(run) - len(run.rstrip("\\"))


def _not_array(provider: str, text: str) -> StreamError:
    return StreamError(
        f"{provider} stream is not a JSON array of responses: {text[:200]!r}",
        provider=provider,
        status_code=200,
    )
