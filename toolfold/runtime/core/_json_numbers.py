"""NaN and infinities read from JSON text as the same objects every time.

Python's ``json`` writes them bare (``NaN``) and reads each as a new float. A
NaN is not equal to itself, and a dict or list compares its items by identity
before ``==``: values holding one compare equal only when it is the same
object. Everything toolfold reads back gives ``math.nan`` itself.
"""

from __future__ import annotations

import json
import math
from typing import Any

NON_FINITE_NUMBERS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""Python's JSON constants as the numbers every load gives: ``math.nan`` itself
(a ``parse_constant`` of ``json.loads``: ``NON_FINITE_NUMBERS.__getitem__``)."""


def json_value(text: str | bytes) -> Any:
    """``json.loads(text)``, each NaN and infinity the number a state's load gives.

    The workflow layer reads its steps' outputs back from JSON text: a NaN there
    is `math.nan` itself, so a dict or list holding it compares equal (identity
    first) to the same value in the state loaded from its saved text.
    """
    return json.loads(text, parse_constant=NON_FINITE_NUMBERS.__getitem__)


def number_text(value: float) -> str:
    """A float as JavaScript writes it (``Number.prototype.toString``, ECMA-262
    Number::toString, which ``JSON.stringify`` and RFC 8785 use).

    The shortest digits that read back as ``value`` (Python's `repr` gives the
    same ones), laid out as JavaScript lays them out: without an exponent from
    1e-6 up to below 1e21 (``1e20`` is ``100000000000000000000``, ``2.0**60``
    ``1152921504606847000``), ``1e+21`` and ``1e-7`` past them; ``-0.0`` is
    ``0``. NaN and infinities are ``NaN``, ``Infinity`` and ``-Infinity``.
    """
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr: d.ddd or d.ddde±x, its digits the shortest that read back as the value.
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    significant = digits.lstrip("0")
    # value = 0.<significant> * 10**point
    point = len(whole) + (int(exponent) if exponent else 0) - (len(digits) - len(significant))
    significant = significant.rstrip("0")
    k = len(significant)
    if k <= point <= 21:
        text = significant + "0" * (point - k)
    elif 0 < point <= 21:
        text = significant[:point] + "." + significant[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * -point + significant
    else:
        shown = point - 1
        power = f"e{'+' if shown >= 0 else '-'}{abs(shown)}"
        text = significant[0] + ("." + significant[1:] if k > 1 else "") + power
    return sign + text
