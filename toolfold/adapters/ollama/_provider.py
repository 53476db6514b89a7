"""Ollama's native API: constants, quirk tables and the server address, each with its source.

Source tags are those of the shared ``docs/providers.md`` §5 (``[L1]`` Ollama's
``docs/api.md`` and ``docs/capabilities/tool-calling.mdx``, ``[L2]`` its
``api/types.go``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from toolfold.runtime.core._request import FinishReason

DEFAULT_HOST = "http://localhost:11434"
DEFAULT_PORT = 11434
#: Ollama's cloud models take a key as a bearer token; a local server needs none.
API_KEY_ENV = ("OLLAMA_API_KEY",)

#: ``done_reason`` -> neutral finish reason; ``stop`` ends tool turns too [L1],
#: ``load``/``unload`` answer a request with no messages.
DONE_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "load": "other",
    "unload": "other",
}

#: Body keys that sit next to ``messages``; every other setting is a model
#: option and goes under ``options`` [L1 "Parameters", "Advanced parameters"].
TOP_LEVEL_SETTINGS = frozenset({"think", "format", "keep_alive", "options"})
#: Neutral setting names Ollama's ``options`` spell differently [L1 Modelfile PARAMETER].
RENAMED_OPTIONS = {"max_tokens": "num_predict"}


def host_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The server root from ``OLLAMA_HOST``, else ``http://localhost:11434``.

    ``OLLAMA_HOST`` takes the forms the Ollama CLI and Python client accept:
    ``host``, ``host:port``, ``:port``, or a URL with a scheme; a missing
    scheme is ``http`` and a missing port (without a scheme) 11434.
    """
    env = os.environ if environ is None else environ
    value = env.get("OLLAMA_HOST", "").strip()
    if not value:
        return DEFAULT_HOST
    if "://" in value:
        return value.rstrip("/")
    parts = urlsplit(f"http://{value}")
    host = parts.hostname or "127.0.0.1"
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    port = parts.port or DEFAULT_PORT
    return f"http://{host}:{port}{parts.path.rstrip('/')}"
