"""Decoders a streamed answer's body goes through: SSE, lines, bytes, and in-band errors.

`Transport.stream_decoded` feeds the decoded body to a `Decoder` and yields
what it completes; the stream methods of the transport choose the decoder,
and clean (`unechoed`) and check (`inband_check`) each item.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import attrs

from toolfold.adapters._http._echoes import Echoes
from toolfold.adapters._http._http_errors import inband_error
from toolfold.adapters._http._sse import SSEEvent

__all__ = ["BytesDecoder", "Decoder", "inband_check", "unechoed"]

_T = TypeVar("_T")


class Decoder(Protocol[_T]):
    """Turns body bytes into items: `SSEDecoder`, `LineDecoder`, `BytesDecoder`."""

    def feed(self, chunk: bytes) -> list[_T]: ...

    def close(self) -> list[_T]: ...


class BytesDecoder:
    """Passes the body through as it arrives."""

    __slots__ = ()

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk] if chunk else []

    def close(self) -> list[bytes]:
        return []


def unechoed(echoes: Echoes) -> Callable[[Any], Any]:
    """A ``clean`` for `Transport.stream_decoded`: an SSE event or a JSON line with the
    secrets ``echoes`` looks for masked in its data (see `Echoes`)."""

    def clean(item: Any) -> Any:
        if isinstance(item, SSEEvent):
            if echoes.may_hold_text(item.data):
                masked = echoes.masked_text(item.data)
                if masked is not item.data:
                    return attrs.evolve(item, data=masked)
        elif isinstance(item, str) and echoes.may_hold_text(item):
            return echoes.masked_text(item)
        return item

    return clean


def inband_check(provider: str) -> Callable[[object], None]:
    """A check for `Transport.stream_decoded`: an error event in a 200 stream raises `StreamError`."""

    def check(item: object) -> None:
        if isinstance(item, SSEEvent):
            error = inband_error(provider, item.event, item.data)
            if error is not None:
                raise error

    return check
