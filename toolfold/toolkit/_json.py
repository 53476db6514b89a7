"""JSON decoded by orjson, when it is installed, to exactly what `json.loads` gives.

orjson (``pip install 'toolfold[speedups]'``; the ``aiohttp`` extra brings it
too) decodes a small model answer in about half the time the standard library
takes, with the checks below, and a call's argument text in about a fifth. Every caller keeps
the standard library as its reference: `exact_loads` hands back orjson's value
only where the two agree, and `UNDECODED` everywhere else, for the caller's own
`json` path to decode (or to refuse, with its usual error):

* orjson refuses what the standard library refuses, and more: NaN and
  Infinity, numbers that overflow a float, escaped lone surrogates (``"\\ud800"``),
  a byte-order mark, nesting deeper than 1,024 levels, text that is not UTF-8;
* where both accept a text they read it alike (duplicate keys: the last one
  wins; floats correctly rounded), except for integers outside 64 bits, which
  orjson reads as floats. An integer that long has 19 digits or more, so a text
  with 19 digits in a row anywhere (in a number or a string) is left to the
  standard library;
* a text longer than `LONGEST` is left to it too (memory, below).

``tests/toolkit/test_json.py`` holds the two decoders equal over random and
mutated texts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = ["UNDECODED", "exact_loads"]

#: What `exact_loads` returns for a text it leaves to the standard library.
UNDECODED: Final = object()

# Each ASCII digit as "0", every other byte as a space: a run of 19 zeros in a
# text put through this table is a run of 19 digits in the text.
_DIGITS_AS_ZEROS: Final = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGIT_RUN: Final = b"0" * 19

#: The longest text `exact_loads` decodes (a MiB): reading a text, orjson and
#: the digit check hold a few copies of it at once, where the standard library
#: holds none; past this size the speed matters less than that memory.
LONGEST: Final = 1 << 20


def _imported() -> Callable[[bytes], Any] | None:
    """orjson's ``loads``, or None when it is not installed."""
    try:
        from orjson import loads
    except ImportError:
        return None
    return loads


class _Orjson:
    """orjson's ``loads``, imported on first use: ``import toolfold`` does not pay for it."""

    loads: Callable[[bytes], Any] | None = None
    looked: bool = False


def exact_loads(data: bytes | str) -> Any:
    """``data`` decoded by orjson when that is sure to equal ``json.loads(data)``.

    Args:
        data: A JSON text (bytes are read as UTF-8).

    Returns:
        The decoded value, or `UNDECODED`: orjson is not installed, refused
        the text, could read it otherwise than the standard library (a run
        of 19 digits or more), or the text is longer than `LONGEST`. The
        caller then decodes ``data`` its own way.
    """
    loads = _Orjson.loads
    if loads is None:
        if _Orjson.looked:
            return UNDECODED
        _Orjson.loads = loads = _imported()
        _Orjson.looked = True
        if loads is None:
            return UNDECODED
    if len(data) > LONGEST:
        return UNDECODED
    if isinstance(data, str):
        try:
            raw = data.encode()
        except UnicodeEncodeError:  # a lone surrogate: not UTF-8, the standard library's
            return UNDECODED
    else:
        raw = data
    # (A text shorter than the run cannot hold one: most argument texts.)
    if len(raw) >= 19 and _LONG_DIGIT_RUN in raw.translate(_DIGITS_AS_ZEROS):
        return UNDECODED
    try:
        return loads(raw)
    except ValueError:  # orjson.JSONDecodeError is a ValueError
        return UNDECODED
