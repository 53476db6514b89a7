"""Ollama's native API: constants, quirk tables and the server address, each with its source.

Source tags are those of the shared ``docs/providers.md`` §5 (``[L1]`` Ollama's
``docs/api.md`` and ``docs/capabilities/tool-calling.mdx``, ``[L2]`` its
``api/types.go``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from urllib.parse import SplitResult, urlsplit

from toolfold._errors import ModelConfigError
from toolfold.adapters._http._checks import check_base_url
from toolfold.adapters._http._keys import mask_url
from toolfold.runtime.core._request import FinishReason

_log = logging.getLogger("toolfold.http")

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
#: Other providers' reasoning settings, which Ollama's chat API has no field for (in
#: ``options`` the server ignores them): refused before the request, naming its own,
#: ``think`` [L1 "Thinking"].
REFUSED_SETTINGS: Mapping[str, str] = dict.fromkeys(
    ("thinking", "reasoning_effort"),
    "the setting 'think' (think=True; 'low', 'medium' or 'high' for models that take levels)",
)
#: Neutral setting names Ollama's ``options`` spell differently [L1 Modelfile PARAMETER].
RENAMED_OPTIONS = {"max_tokens": "num_predict"}


def host_from_env(environ: Mapping[str, str] | None = None) -> str:
    """The server root from ``OLLAMA_HOST``, else ``http://localhost:11434``.

    ``OLLAMA_HOST`` takes the forms the Ollama CLI and Python client accept:
    ``host``, ``host:port``, ``:port``, or a URL with a scheme; a missing
    scheme is ``http`` and a missing port (without a scheme) 11434. A port
    that is no number from 0 to 65535 (``myhost:abc``) is replaced by the
    default one, with a warning, as the Ollama CLI and server do (their
    ``envconfig.Host``): the server listens where the CLI connects.

    Raises:
        ModelConfigError: ``OLLAMA_HOST`` names no server (``http://``, ``ftp://x``),
            or has an ``@`` after its host part ends (a password holding ``/``,
            ``?`` or ``#`` unencoded: ``http://bob:pa/ss@host``); the value is
            not shown, as it may hold a password.
    """
    env = os.environ if environ is None else environ
    value = env.get("OLLAMA_HOST", "").strip()
    if not value:
        return DEFAULT_HOST
    if "://" in value:
        url = value.rstrip("/") if "://" in value.rstrip("/") else value  # ("http://": as given)
        parts = urlsplit(url)
        _check_userinfo(parts)
        given = _given_port(parts)
        if given is not None and _port(parts) is None:  # "host:abc", "host:": the scheme's port
            url = parts._replace(netloc=parts.netloc[: -len(given) - 1]).geturl()
    else:
        parts = urlsplit(f"http://{value}")
        _check_userinfo(parts)
        host = parts.hostname or "127.0.0.1"
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        port = _port(parts) or DEFAULT_PORT
        url = f"http://{host}:{port}{parts.path.rstrip('/')}"
    try:
        check_base_url(url, "OLLAMA_HOST")
    except ModelConfigError as exc:
        raise ModelConfigError(
            f"{exc} (OLLAMA_HOST gives the Ollama server: host, host:port or an "
            "http(s):// URL with a host)"
        ) from None
    return url


def _check_userinfo(parts: SplitResult) -> None:
    """Refuse ``parts`` when an ``@`` follows the end of its host part (not shown: a password).

    A password with an unencoded ``/``, ``?`` or ``#`` ends the host part there:
    ``http://bob:hunter2/x@host`` reads as server ``bob``, port ``hunter2``
    (logged as "the port"), path ``/x@host``.
    """
    if "@" not in parts.netloc and "@" in f"{parts.path}?{parts.query}#{parts.fragment}":
        raise ModelConfigError(
            "OLLAMA_HOST has an '@' after the end of its host part (value not shown: it may "
            "hold a password): a password holding '/', '?' or '#' must be percent-encoded "
            "('%2F', '%3F', '%23'), as must an '@' in the path ('%40')"
        )


def _given_port(parts: SplitResult) -> str | None:
    """The port of ``parts`` as written (``"abc"``, ``""`` for ``host:``); None when none is written.

    Read from the host part alone: a ``user:password@`` before it has colons
    of its own, and an IPv6 address in brackets too.
    """
    host = parts.netloc.rpartition("@")[2].rpartition("]")[2]
    return host.rpartition(":")[2] if ":" in host else None


def _port(parts: SplitResult) -> int | None:
    """The port of ``parts``; None when none is given or it is no port (logged, password masked)."""
    try:
        return parts.port
    except ValueError:
        _log.warning(
            "OLLAMA_HOST=%r: the port %r is no number from 0 to 65535, so the default "
            "port is used, as the Ollama CLI and server do",
            mask_url(parts.geturl()),
            _given_port(parts),
        )
        return None
