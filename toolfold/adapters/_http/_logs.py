"""Keys kept out of the HTTP stacks' own DEBUG logs, with nothing for the user to install.

httpcore and httpcore2 log the response headers at DEBUG, and a server may
echo the key in one. A filter on the ``httpcore`` logger does not see the
records of ``httpcore.http11``, so the filter goes on each logger that emits
(their names are fixed in those packages). Every transport adds its key here,
and the password of its base URL (httpx logs each request's URL at INFO), for
as long as it lives: a key is counted once for each holder, and taken off when
the last one is garbage-collected (not when it is closed: a closed model
opens a client again on its next call), so a service that makes a model per
tenant's key and drops it keeps only the live ones, and a record costs what
they do. The filter only runs for records a logger actually emits, so it costs
nothing while DEBUG logging is off. `redact_logs` still covers handlers and
loggers of the user's own.

The MCP SDK makes many loggers, some not under its package's name (its
client session logs as ``client``, at WARNING with the server's message in
a traceback): `MCPServerHTTP` guards the loggers of the installed SDK's
client side, found in its modules' compiled code (`package_loggers`: source,
compiled-only or zipped alike), the names the SDK used when this was written
(`_KNOWN`) whatever the scan finds, and each logger under ``mcp.`` made by
the time a key is added. Its server side and CLI are left alone: they log as
``server`` and ``cli``, names an application's own loggers often have.
"""

from __future__ import annotations

import dis
import functools
import importlib.machinery
import importlib.util
import logging
import os
import pkgutil
import threading
import weakref
from collections.abc import Iterator
from types import CodeType

from toolfold.adapters._http._keys import Scrub, Scrubs, Secret, scrub_record, scrubs

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

#: Per package: its parts not scanned (the MCP SDK's server side and CLI, whose
#: loggers are named ``server`` and ``cli``), and the loggers guarded whatever a
#: scan finds (the names the SDK's client used when this was written).
_LEFT: dict[str, tuple[str, ...]] = {"mcp": ("mcp.server", "mcp.cli")}
_KNOWN: dict[str, tuple[str, ...]] = {
    "mcp": (
        "client",
        "mcp.client.streamable_http",
        "mcp.client.sse",
        "mcp.client.client",
        "mcp.client.stdio",
        "mcp.shared.jsonrpc_dispatcher",
        "mcp.shared.dispatcher",
    ),
}
_LOGGER_CALLS = frozenset({"getLogger", "get_logger"})


def _left(name: str, left: tuple[str, ...]) -> bool:
    """Whether module or logger ``name`` is in one of the parts ``left``."""
    return any(name == part or name.startswith(f"{part}.") for part in left)


@functools.cache
def package_loggers(package: str, left: tuple[str, ...] = ()) -> frozenset[str]:
    """The names of the loggers the installed ``package``'s modules make, found in their
    compiled code (not imported): a module's ``getLogger(__name__)`` is its own name, a
    ``getLogger("client")`` that literal name. Modules in the subpackages ``left``
    (full names) are not read. Empty when ``package`` is not installed.

    Each module is read through its loader, so a package installed as compiled
    files only, in a zip or frozen (PyInstaller) is read as one of source files.
    """
    names: set[str] = set()
    for module, code in _package_code(package, left):
        names.update(_loggers_named(code, module))
    return frozenset(names)


def _package_code(package: str, left: tuple[str, ...]) -> Iterator[tuple[str, CodeType]]:
    """Each module of ``package`` outside ``left`` with its code, found by the finders
    its modules are imported by (no module is imported)."""
    try:
        top = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return
    pending = [(package, top)] if top is not None else []
    while pending:
        module, spec = pending.pop()
        try:
            code = _loader(spec.loader).get_code(module) if spec.loader is not None else None  # type: ignore[attr-defined]
        except Exception:  # a module that will not compile, an unusual loader: not read
            code = None
        if isinstance(code, CodeType):
            yield module, code
        for found in pkgutil.iter_modules(spec.submodule_search_locations or ()):
            name = f"{module}.{found.name}"
            if _left(name, left):
                continue
            try:
                sub = found.module_finder.find_spec(name)  # type: ignore[call-arg]
            except Exception:
                continue
            if sub is not None:
                pending.append((name, sub))


class _Reading(importlib.machinery.SourceFileLoader):
    """A source file's loader that writes no bytecode: its cached ``.pyc`` is read when
    it is valid for the source (as an import checks it), else the source is compiled in
    memory. (A scan writing ``.pyc`` files into site-packages would leave them there for
    modules never imported, on installs made without bytecode.)"""

    def set_data(self, path: str, data: object, *, _mode: int = 0o666) -> None:
        """Writes nothing."""


def _loader(loader: object) -> object:
    """``loader``, or for a source file's loader, one reading the same file that writes
    no bytecode (a compiled-only, zipped or frozen module's loader writes none)."""
    if isinstance(loader, importlib.machinery.SourceFileLoader):
        return _Reading(loader.name, loader.path)
    return loader


def _loggers_named(code: CodeType, module: str) -> Iterator[str]:
    """The loggers ``code`` (and the functions and classes in it) gets by a name it
    spells out: ``getLogger("name")`` or ``getLogger(__name__)`` (``module``)."""
    # (disassembling only code that names a logger call: dis reads the rest 20x slower)
    named = not _LOGGER_CALLS.isdisjoint(code.co_names)
    instructions = [
        instruction
        for instruction in (dis.get_instructions(code) if named else ())
        if instruction.opname != "PUSH_NULL"  # (3.11: before the callable; 3.13: after it)
    ]
    for call, argument, after in zip(
        instructions, instructions[1:], instructions[2:], strict=False
    ):
        if call.argval not in _LOGGER_CALLS or not after.opname.startswith(("CALL", "PRECALL")):
            continue
        if argument.opname == "LOAD_CONST" and isinstance(argument.argval, str):
            yield argument.argval
        elif argument.opname in ("LOAD_NAME", "LOAD_GLOBAL") and argument.argval == "__name__":
            yield module
    for inner in code.co_consts:
        if isinstance(inner, CodeType):
            yield from _loggers_named(inner, module)


def _made(package: str, left: tuple[str, ...]) -> set[str]:
    """The loggers made by now under ``package``'s name, outside ``left``."""
    made = list(logging.root.manager.loggerDict)  # (copied at once: other threads add to it)
    return {
        name
        for name in made
        if (name == package or name.startswith(f"{package}.")) and not _left(name, left)
    }


class _KeyFilter(logging.Filter):
    """Scrubs from the records it sees every key a live holder (a transport) was given.

    Each key is counted once for each holder that added it; one added with no
    holder (a proxy's password, read from the environment) or with one that
    takes no weak reference stays. Each key's part of what to replace
    (`scrubs`) is worked out once, when it comes; the whole is put together
    again from those parts when a key comes that it lacks or one goes, not for
    each record. A record sees one tuple, swapped whole, so a transport made
    or collected on another thread never changes it under a filter.

    Whether a key is scrubbed is told by what `scrubs` was made from
    (`_scrubbed`), not by its count: a key counted but never put in (the
    process forked, or KeyboardInterrupt came, between the two) goes in when
    it is added again, and a forked child makes its scrubs again at once.

    A holder collected only notes its keys as dropped (`_dropped`): the
    collector may run inside `add` on the same thread, under the lock. They
    are taken off by whoever holds the lock next, or at once when it is free.
    """

    def __init__(self) -> None:
        super().__init__()
        self._held: dict[Secret, int] = {}  # each key and how many holders have it
        self._parts: dict[Secret, Scrub] = {}  # each key's part of the scrubs
        self._scrubbed: dict[Secret, Scrub] = {}  # the parts `scrubs` was made from
        self._dropped: list[tuple[Secret, ...]] = []  # the keys of holders collected
        self._lock = threading.Lock()
        self.scrubs: Scrubs = ()

    @property
    def keys(self) -> frozenset[Secret]:
        """The keys held now: those of the holders still alive and those kept for good
        (all of them scrubbed, a key being added among them)."""
        with self._lock:
            self._settle(changed=False)
            return frozenset(self._held)

    def add(self, *secrets: Secret, holder: object = None) -> None:
        """Scrub ``secrets`` too: while ``holder`` lives, or for good without one (or when
        it takes no weak reference)."""
        if holder is not None:
            try:
                weakref.ref(holder)
            except TypeError:  # (a user's client with __slots__: its keys stay for good)
                holder = None
        with self._lock:
            changed = False
            for secret in secrets:
                if secret not in self._parts:  # (its part first: never a key held and no part)
                    parts = scrubs((secret,))
                    if not parts:
                        continue
                    self._parts[secret] = parts[0]
                self._held[secret] = self._held.get(secret, 0) + 1
                changed = changed or secret not in self._scrubbed
            if holder is not None:
                # (not at exit: a record logged as the interpreter shuts down is scrubbed)
                weakref.finalize(holder, self._drop, secrets).atexit = False
            self._settle(changed)

    def _after_fork(self) -> None:
        """In a forked child: a lock another thread of the parent held is free, and the
        keys that thread had counted but not yet put in the scrubs are put in."""
        self._lock = threading.Lock()
        with self._lock:  # (a collection meanwhile queues its keys, see `_drop`)
            self._settle(changed=True)

    def _drop(self, secrets: tuple[Secret, ...]) -> None:
        """What a collected holder calls, from the garbage collector: maybe inside `add`."""
        self._dropped.append(secrets)
        if self._lock.acquire(blocking=False):  # (else its holder takes them off)
            try:
                self._settle(changed=False)
            finally:
                self._lock.release()

    def _settle(self, changed: bool) -> None:
        """Take the dropped keys off, and make the scrubs again if the keys changed."""
        while self._dropped:
            for secret in self._dropped.pop():
                count = self._held.pop(secret, 0)
                if count > 1:
                    self._held[secret] = count - 1
                elif self._parts.pop(secret, None) is not None:
                    changed = True
        if changed:
            self._scrubbed = {}  # (never more than `scrubs` has, should this stop half-way)
            self.scrubs = tuple(self._parts.values())  # (one per value: no two alike)
            self._scrubbed = self._parts.copy()

    def filter(self, record: logging.LogRecord) -> bool:
        found = self.scrubs
        if found:
            scrub_record(record, found)
        return True


_FILTER = _KeyFilter()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_FILTER._after_fork)
#: The loggers to guard once there is a key, and those guarded.
_WANTED: set[str] = set(_EMITTERS)
_GUARDED: set[str] = set()


def guard_logs(*secrets: Secret | None, package: str | None = None, holder: object = None) -> None:
    """Keep ``secrets`` out of the records of httpx, httpcore, httpx2, httpcore2 and aiohttp
    (and of the loggers of ``package``, an SDK's: `package_loggers`, those it is known
    to make and those made by now under its name; a logger made beforehand by the name
    of a module not yet imported is the one that module gets), as long as ``holder``
    (what sends them: a transport's `Sender`, a client the user gave it) lives, or for
    good without one or when it takes no weak reference."""
    if package is not None:
        left = _LEFT.get(package, ())
        _WANTED.update(
            package_loggers(package, left), _KNOWN.get(package, ()), _made(package, left)
        )
    given = tuple(dict.fromkeys(secret for secret in secrets if secret))
    if given:
        _FILTER.add(*given, holder=holder)
    if _FILTER.scrubs and len(_GUARDED) < len(_WANTED):
        for name in sorted(_WANTED - _GUARDED):
            logging.getLogger(name).addFilter(_FILTER)
            _GUARDED.add(name)
