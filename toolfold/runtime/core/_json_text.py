"""JSON text that UTF-8 can always encode, non-ASCII text kept as it is.

A tool's ``os.listdir()`` of a file name that is not UTF-8 returns a lone
surrogate (``'caf\\udce9.txt'``): ``json.dumps(..., ensure_ascii=False)``
writes it raw, and UTF-8 cannot encode it. Writing the whole text with
``ensure_ascii=True`` instead made every other non-ASCII character an escape
too (an emoji is 12 bytes, not 4): escaping only the lone surrogates keeps the
rest as UTF-8, and the text reads back the same.
"""

from __future__ import annotations

import re

__all__ = ["LONE_SURROGATE", "escape_lone_surrogates"]

#: A lone surrogate: a character UTF-8 cannot encode. (In JSON text written with
#: ``ensure_ascii=False``, a raw one is only ever inside a string.)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its ``\\uXXXX`` escape, the rest as it is.

    For JSON text: the escape reads back as the surrogate (``json.loads``).
    """
    return LONE_SURROGATE.sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"
