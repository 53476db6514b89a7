"""How request bodies become bytes (one place, shared by the sync and async paths)."""

from __future__ import annotations

import json
from typing import Any


def dumps(body: Any) -> bytes:
    """Compact UTF-8 JSON: no spaces, non-ASCII text kept as is (smaller than escapes).

    A lone surrogate (which UTF-8 cannot encode) that reached the body anyway
    is sent as a JSON escape instead of failing every later request of a run.
    """
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(body, separators=(",", ":")).encode()
