"""How request bodies become bytes (one place, shared by the sync and async paths)."""

from __future__ import annotations

import json
from typing import Any


def dumps(body: Any) -> bytes:
    """Compact UTF-8 JSON: no spaces, non-ASCII text kept as is (smaller than escapes)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
