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
