"""Lenient decoding of a tool call's argument text (no validation here)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def parse_arguments(text: str) -> Mapping[str, Any] | None:
    """Decode argument text into a dict; ``""`` is ``{}``; None if not a JSON object."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
