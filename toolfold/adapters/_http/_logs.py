"""Keys kept out of the HTTP stacks' own DEBUG logs, with nothing for the user to install.

httpcore and httpcore2 log the response headers at DEBUG, and a server may
echo the key in one. A filter on the ``httpcore`` logger does not see the
records of ``httpcore.http11``, so the filter goes on each logger that emits
(their names are fixed in those packages). Every transport adds its key here,
and the password of its base URL (httpx logs each request's URL at INFO); the
filter only runs for records a logger actually emits, so it costs nothing while
DEBUG logging is off. `redact_logs` still covers handlers and loggers of the
user's own.

The MCP SDK makes many loggers, some not under its package's name (its
client session logs as ``client``, at WARNING with the server's message in
a traceback): `MCPServerHTTP` guards every logger the installed SDK's modules
make (`package_loggers`), found in their source, rather than a list of names
that goes stale with the SDK's next release.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
from pathlib import Path

from toolfold.adapters._http._keys import Scrubs, Secret, scrub_record, scrubs

__all__ = ["guard_logs", "package_loggers"]

_EMITTERS = (
    *(
        f"{core}.{part}"
        for core in ("httpcore", "httpcore2")
        for part in ("connection", "connection_pool", "http11", "http2", "proxy", "socks")
    ),
    "httpx",
    "httpx2",
    "aiohttp.client",
    "aiohttp.internal",
    "toolfold.http",
)

#: ``logging.getLogger(NAME)`` (or the MCP SDK's ``get_logger(NAME)``), ``NAME`` a
#: literal or the module's ``__name__``.
_GET_LOGGER = re.compile(r"""\b(?:getLogger|get_logger)\(\s*(__name__|"[^"\n]*"|'[^'\n]*')\s*\)""")


@functools.cache
def package_loggers(package: str) -> frozenset[str]:
    """The names of the loggers the installed ``package``'s modules make, found in their
    source (not imported): a module's ``getLogger(__name__)`` is its own name, a
    ``getLogger("client")`` that literal name; and the loggers made already under
    ``package``'s name. Empty when ``package`` is not installed.
    """
    spec = importlib.util.find_spec(package)
    made = list(logging.root.manager.loggerDict)  # (copied at once: other threads add to it)
    names = {name for name in made if name == package or name.startswith(f"{package}.")}
    for root in (spec.submodule_search_locations or ()) if spec is not None else ():
        for path in Path(root).rglob("*.py"):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            module = (package, *path.relative_to(root).with_suffix("").parts)
            if module[-1] == "__init__":
                module = module[:-1]
            for found in _GET_LOGGER.finditer(text):
                given = found.group(1)
                names.add(".".join(module) if given == "__name__" else given[1:-1])
    return frozenset(names)


class _KeyFilter(logging.Filter):
    """Scrubs every key a transport was given from the records it sees.

    What to replace is worked out (`scrubs`) when a key
    is added, not for each record; a record sees one tuple, swapped whole, so
    a transport made on another thread never changes it under a filter.
    """

    def __init__(self) -> None:
        super().__init__()
        self.keys: frozenset[Secret] = frozenset()
        self.scrubs: Scrubs = ()

    def add(self, secret: Secret) -> None:
        """Scrub ``secret`` too."""
        self.keys = self.keys | {secret}
        self.scrubs = scrubs(self.keys)

    def filter(self, record: logging.LogRecord) -> bool:
        scrub_record(record, self.scrubs)
        return True


_FILTER = _KeyFilter()
#: The loggers to guard once there is a key, and those guarded.
_WANTED: set[str] = set(_EMITTERS)
_GUARDED: set[str] = set()


def guard_logs(*secrets: Secret | None, package: str | None = None) -> None:
    """Keep ``secrets`` out of the records of httpx, httpcore, httpx2, httpcore2 and aiohttp
    (and of every logger of ``package``, an SDK's: `package_loggers`)."""
    if package is not None:
        _WANTED.update(package_loggers(package))
    for secret in secrets:
        if secret and secret not in _FILTER.keys:
            _FILTER.add(secret)
    if _FILTER.keys and len(_GUARDED) < len(_WANTED):
        for name in sorted(_WANTED - _GUARDED):
            logging.getLogger(name).addFilter(_FILTER)
            _GUARDED.add(name)
