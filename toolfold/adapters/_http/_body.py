"""An answer's body as it arrives: size limits and decompression (pure, no I/O).

Every backend hands the transport the body as it came off the wire (httpx's
``iter_raw``, aiohttp with ``auto_decompress=False``); `BodyReader` counts those
bytes, inflates gzip/deflate with zlib at most 1 MiB at a time, and counts the
result, so `HttpLimits` hold the same way on every backend and a gzip bomb ends
long before memory grows. httpx itself inflates a whole network read at once
(64 KiB can become 64 MiB), which is why the transport decodes here.
"""

from __future__ import annotations

import re
import sys
import zlib

from toolfold.adapters._http._retry import HttpLimits

__all__ = ["ACCEPT_ENCODING", "BodyCut", "BodyError", "BodyReader", "plain_limit"]

#: What the transport asks for: the encodings `BodyReader` can inflate.
ACCEPT_ENCODING = "gzip, deflate"

_STEP = 2**20  # the most zlib inflates in one call
_WINDOW = 2**14  # the most compressed bytes given to zlib in one call
_FIRST_WINDOW = 64  # the first window of a gzip member after the first
_NOT_ZERO = re.compile(rb"[^\0]")  # where the zero padding after a gzip member ends
_NO_CAP = sys.maxsize  # `BodyReader.passthrough` without any limit


def plain_limit(limits: HttpLimits) -> int:
    """How many bytes of an uncompressed body are within both of ``limits``."""
    wire, decoded = limits.max_body_bytes, limits.max_decoded_bytes
    if wire is None:
        return _NO_CAP if decoded is None else decoded
    return wire if decoded is None or wire < decoded else decoded


class BodyError(Exception):
    """The body broke a limit or cannot be decoded (the transport names the provider)."""


class BodyCut(BodyError):
    """The compressed body ended before its compressed data did: a cut answer."""


class BodyReader:
    """Counts and decodes one body; `feed` raises `BodyError` past a limit.

    Args:
        encoding: The ``content-encoding`` header (None or ``identity``: none).
        limits: The body limits to enforce.
    """

    __slots__ = (
        "_decoded",
        "_encoding",
        "_gzip",
        "_head",
        "_inflater",
        "_limits",
        "_raw_deflate",
        "_wire",
    )

    def __init__(self, encoding: str | None, limits: HttpLimits) -> None:
        self._limits = limits
        self._wire = 0
        self._decoded = 0
        self._raw_deflate = False
        self._head = b""  # "deflate": its first byte, until a second tells the two forms apart
        self._gzip = False  # gzip: members may follow one another (RFC 1952 2.2)
        name = (encoding or "").strip().lower()
        self._encoding = name
        self._inflater: zlib._Decompress | None
        if name in ("", "identity"):
            self._inflater = None
        elif name in ("gzip", "x-gzip"):
            self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self._gzip = True
        elif name == "deflate":
            self._inflater = zlib.decompressobj()
            self._raw_deflate = True  # may still turn out to be raw deflate (no zlib header)
        else:
            raise BodyError(
                f"the answer uses content-encoding {encoding!r}, which was not asked for "
                f"(accept-encoding: {ACCEPT_ENCODING})"
            )

    def feed(self, raw: bytes) -> bytes:
        """The decoded bytes of the next piece of the body."""
        self._wire += len(raw)
        cap = self._limits.max_body_bytes
        if cap is not None and self._wire > cap:
            raise BodyError(f"the answer is larger than max_body_bytes={cap} bytes")
        if self._inflater is None:
            return self._count(raw)
        return self._inflate(raw)

    def passthrough(self) -> int:
        """How many bytes of the body may be taken as they are, without `feed`.

        An uncompressed body's pieces are the body: below both limits,
        feeding them only counts. 0 for a compressed body (feed every
        piece). Past it, `skip` the bytes taken and `feed` the piece, which
        raises the limit's error.
        """
        return 0 if self._inflater is not None else plain_limit(self._limits)

    def skip(self, size: int) -> None:
        """Count ``size`` bytes of an uncompressed body taken without `feed` (see `passthrough`)."""
        self._wire += size
        self._decoded += size

    def close(self) -> bytes:
        """What the decoder still holds at the end of the body.

        Raises:
            BodyCut: The body ended before its compressed data did: a gzip
                body without its CRC-32 and length trailer (or part of it),
                a deflate body without its last block or checksum. httpx and
                aiohttp take such a body as whole; zlib ends its stream
                (``eof``) only once the trailer was read and checked.
        """
        if self._inflater is None:
            return b""
        if self._head and self._gzip:  # one byte after a member: no member's start
            raise _not_a_member(self._head)
        try:
            rest = self._count(self._inflater.flush())
        except zlib.error as exc:
            raise BodyError(f"cannot decompress the answer: {exc}") from exc
        if self._wire and not self._inflater.eof:  # an empty body is empty, not cut
            raise BodyCut(
                f"its {self._encoding} data stops before its end (the trailer with the "
                "checksum and length, or the last block, is missing)"
            )
        return rest

    def _inflate(self, data: bytes) -> bytes:
        assert self._inflater is not None
        if self._raw_deflate and len(self._head) + len(data) < 2:
            # A zlib header is two bytes: zlib takes one without a word, and the
            # form would be settled as zlib before the header could be checked.
            self._head += data
            return b""
        if self._head:
            data, self._head = self._head + data, b""
        pieces = []
        cap = self._limits.max_decoded_bytes
        # The member going on is given the whole piece (one zlib call on the hot
        # path). Once a member ends inside the piece, the next ones get bounded
        # windows (64 B growing to 16 KiB): zlib copies what it leaves
        # (``unused_data``), and a body of many tiny gzip members copied the rest
        # of the piece per member. The whole rest is copied at most once a piece.
        view, at, size = memoryview(data), 0, len(data)
        while at < len(view):
            if self._inflater.eof:
                if not self._gzip:  # after a deflate stream's end the rest is ignored
                    break
                at = self._next_member(data, at)
                size = _FIRST_WINDOW  # grown while the member goes on: linear in all
                continue
            # Never more than one byte past the cap: a bomb costs the cap, not a whole step.
            step = _STEP if cap is None else max(1, min(_STEP, cap - self._decoded + 1))
            window = view[at : at + size]
            try:
                piece = self._inflater.decompress(window, step)
            except zlib.error as exc:
                if not self._raw_deflate:
                    raise BodyError(f"cannot decompress the answer: {exc}") from exc
                # "deflate" without the zlib wrapper, as some servers send it.
                self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                self._raw_deflate = False
                continue
            self._raw_deflate = False
            pieces.append(self._count(piece))
            left = len(self._inflater.unconsumed_tail) + len(self._inflater.unused_data)
            if not left:
                size = min(2 * size, max(size, _WINDOW))
            at += len(window) - left
        return b"".join(pieces)

    def _next_member(self, data: bytes, at: int) -> int:
        """Where the next gzip member starts in ``data`` after a member ended at ``at``.

        As Python's ``gzip.decompress`` reads a body: gzip members may follow one
        another (RFC 1952), each inflated under the same cap; zero bytes after a
        member are padding; anything else is an error (a body cut at the first
        member's end silently lost the others). ``len(data)`` when the piece
        holds no next member's start (zeros, or its first byte alone, kept).
        """
        found = _NOT_ZERO.search(data, at)
        if found is None:
            return len(data)
        at = found.start()
        if (
            at == len(data) - 1 and data[at] == 0x1F
        ):  # the second byte tells (kept, as deflate's is)
            self._head = b"\x1f"
            return len(data)
        if data[at : at + 2] != b"\x1f\x8b":
            raise _not_a_member(bytes(data[at:]))
        self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return at

    def _count(self, decoded: bytes) -> bytes:
        self._decoded += len(decoded)
        cap = self._limits.max_decoded_bytes
        if cap is not None and self._decoded > cap:
            raise BodyError(f"the decompressed answer is larger than max_decoded_bytes={cap} bytes")
        return decoded


def _not_a_member(data: bytes) -> BodyError:
    return BodyError(
        f"cannot decompress the answer: its gzip data is followed by {len(data)} "
        f"bytes that are not another gzip member (starting {data[:16]!r})"
    )
