"""An incremental Server-Sent Events decoder, and a line decoder for NDJSON streams.

Follows the WHATWG "event stream interpretation" rules: lines end with CRLF, LF
or CR (a CRLF split across two network chunks is one line break); a line that
starts with ``:`` is a comment (``: keep-alive``, ``: OPENROUTER PROCESSING``)
and is skipped; ``data:`` lines accumulate, joined by ``\\n``; an empty line
dispatches the event; one space after the colon is dropped; a UTF-8 byte-order
mark at the very start is dropped. Bytes may be split anywhere, even inside a
multi-byte character.

The decoder knows nothing about providers: ``[DONE]`` and in-band ``error``
payloads are plain events here (see `SSEEvent.is_done` and
`toolfold.adapters._http._http_errors.inband_error`).
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

import attrs

from toolfold.adapters._http._json import decode_cut

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_FIELDS = frozenset({"data", "event", "id", "retry"})
KEEP = 2000  # characters of a stream's start kept until an event arrives (`SSEDecoder.unread`)


@attrs.frozen
class SSEEvent:
    """One dispatched Server-Sent Event.

    Attributes:
        data: The data lines joined by ``\\n`` (no trailing newline).
        event: The ``event:`` field, or None for unnamed (``message``) events.
        id: The last event id seen on the stream, or None.
        retry: The ``retry:`` reconnection time in milliseconds, when sent.
    """

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None

    @property
    def is_done(self) -> bool:
        """True for OpenAI's ``data: [DONE]`` end-of-stream sentinel."""
        return self.data == "[DONE]"

    def json(self) -> Any:
        """The data parsed as JSON.

        Data nested deeper than the interpreter decodes is read with what
        lies more than 200 levels deep replaced by null.

        Raises:
            ValueError: The data is not JSON (``json.JSONDecodeError``), or
                nests too deep even so.
        """
        return decode_cut(json.loads, self.data)


class SSEDecoder:
    """Turns a stream of text or bytes chunks into `SSEEvent` values, incrementally.

    Example:
        >>> decoder = SSEDecoder()
        >>> decoder.feed(b"data: {\\"a\\": 1}\\n")
        []
        >>> decoder.feed(b"\\n")
        [SSEEvent(data='{"a": 1}', event=None, id=None, retry=None)]
    """

    __slots__ = (
        "_bytes",
        "_cr",
        "_data",
        "_ended",
        "_event",
        "_has_data",
        "_id",
        "_partial",
        "_retry",
        "_seen",
        "_seen_size",
        "_started",
        "_told",
    )

    def __init__(self) -> None:
        self._bytes = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # An unterminated line, in the pieces it came in: joined once, when a chunk
        # ends it (joining each time rescanned a long line per chunk: quadratic).
        self._partial: list[str] = []
        self._cr = False  # the last chunk ended with CR: a leading LF is not a new line
        self._started = False
        self._data: list[str] = []
        self._has_data = False
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._ended = False
        self._told = False  # whether an event was dispatched
        self._seen: list[str] = []  # the stream's start while it told nothing (see `unread`)
        self._seen_size = 0

    def ended(self) -> bool:
        """Whether the stream's end-of-stream sentinel (``data: [DONE]``) was dispatched."""
        return self._ended

    def feed(self, chunk: str | bytes) -> list[SSEEvent]:
        """Decode one network chunk; return the events it completed (often none)."""
        text = self._bytes.decode(chunk) if isinstance(chunk, bytes) else chunk
        if not text:
            return []
        if not self._started:
            self._started = True
            self._told, self._seen, self._seen_size = False, [], 0
            if text[0] == "\ufeff":
                text = text[1:]
        if not self._told and self._seen_size < KEEP:
            self._seen.append(text)
            self._seen_size += len(text)
        if self._cr:
            self._cr = False
            if text[:1] == "\n":
                text = text[1:]
        has_cr = "\r" in text
        if not has_cr and "\n" not in text:  # the line goes on
            if text:
                self._partial.append(text)
            return []
        if self._partial:
            self._partial.append(text)
            text = "".join(self._partial)
        # Fast path: most servers send LF only.
        lines = _LINE_BREAK.split(text) if has_cr else text.split("\n")
        last = lines.pop()
        self._partial = [last] if last else []
        if text.endswith("\r"):
            self._cr = True
        events: list[SSEEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def unread(self) -> str | None:
        """The start of a body that was no event stream, once `close` read all of it; else None.

        No event in it and a line that is no SSE line (a field other than
        ``data``, ``event``, ``id``, ``retry``, or a comment): a whole JSON
        answer from a server that ignored ``"stream": true``, a proxy's HTML page.
        A stream of comments or empty events alone is a stream (it told nothing).
        At most the first 2,000 characters are kept, and only until an event arrives.
        """
        if self._told or not self._seen:
            return None
        text = "".join(self._seen)[:KEEP]
        lines = _LINE_BREAK.split(text)
        if len(text) == KEEP and ":" not in lines[-1]:
            # Cut where the kept text ends: its name may be cut too ("da").
            last = lines.pop()
            if not any(name.startswith(last) for name in _FIELDS):
                return text
        for line in lines:
            if line and line[0] != ":" and line.partition(":")[0] not in _FIELDS:
                return text
        return None

    def close(self) -> list[SSEEvent]:
        """End of stream: return the last event if it was not followed by a blank line.

        The standard says to drop such an event; several servers end the body
        right after the last ``data:`` line, so it is kept (a truncated JSON
        payload still fails loudly when the codec parses it).
        """
        tail = self._bytes.decode(b"", final=True)
        events = self.feed(tail) if tail else []
        if self._partial:
            line, self._partial = "".join(self._partial), []
            event = self._line(line)
            if event is not None:
                events.append(event)
        event = self._dispatch()
        if event is not None:
            events.append(event)
        # The stream is over: a decoder used again reads a new one, whose cut
        # must not pass for an end after [DONE] (`ended`), nor its BOM for text.
        self._ended = self._started = False
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        event_name, self._event = self._event, None
        if not self._has_data:
            return None
        data = self._data[0] if len(self._data) == 1 else "\n".join(self._data)
        self._data = []
        self._has_data = False
        if data == "[DONE]":
            self._ended = True
        self._told = True
        return SSEEvent(data, event_name or None, self._id, self._retry)


class LineDecoder:
    """Splits a text or bytes stream into lines (for NDJSON streams such as Ollama's).

    Empty lines are skipped. Lines end with LF or CRLF.
    """

    __slots__ = ("_bytes", "_partial")

    def __init__(self) -> None:
        self._bytes = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial: list[str] = []  # an unterminated line's pieces (see SSEDecoder)

    def feed(self, chunk: str | bytes) -> list[str]:
        """Decode one network chunk; return the complete non-empty lines it ended."""
        text = self._bytes.decode(chunk) if isinstance(chunk, bytes) else chunk
        if "\n" not in text:
            if text:
                self._partial.append(text)
            return []
        if self._partial:
            self._partial.append(text)
            text = "".join(self._partial)
        lines = text.split("\n")
        last = lines.pop()
        self._partial = [last] if last else []
        return [s for s in (line.rstrip("\r") for line in lines) if s]

    def close(self) -> list[str]:
        """End of stream: return the last line when it had no line break."""
        tail = "".join(self._partial) + self._bytes.decode(b"", final=True)
        self._partial = []
        tail = tail.rstrip("\r\n")
        return [tail] if tail else []
