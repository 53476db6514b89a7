"""Decoders a streamed answer's body goes through: SSE, lines, bytes, and in-band errors.

`Transport.stream_decoded` feeds the decoded body to a `Decoder` and yields
what it completes; the stream methods of the transport choose the decoder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from toolfold.adapters._http._http_errors import inband_error
from toolfold.adapters._http._sse import SSEEvent

__all__ = ["BytesDecoder", "Decoder", "inband_check"]

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


def inband_check(provider: str) -> Callable[[object], None]:
    """A check for `Transport.stream_decoded`: an error event in a 200 stream raises `StreamError`."""

    def check(item: object) -> None:
        if isinstance(item, SSEEvent):
            error = inband_error(provider, item.event, item.data)
            if error is not None:
                raise error

    return check
