"""Which clients one transport uses: injected ones, or its own made on first use.

The transport makes one blocking client, and one async client per event loop
(connections belong to the loop that opened them; each is closed when its loop
shuts down). Injected clients are used as given and never closed; an injected
blocking httpx/httpx2 client's sockets are made to keep the total deadline of
the transport's calls (`cap_socket_io`), as the transport's own client's are.

A process forked from one whose transports made clients (gunicorn
``--preload``) must not use them: their pooled connections are the parent's
sockets, shared, and a child's request would interleave with another
process's, or read its answer. In the child every transport forgets the clients
it made (`_forget_after_fork`), without closing them (closing could end the
parent's connections), and makes new ones at its next call. An injected
client cannot be replaced: a process must not share one across a fork.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from toolfold._errors import ModelConfigError, UsageError
from toolfold.adapters._http._backends import (
    BACKENDS,
    AiohttpBackend,
    HttpxBackend,
    close_now,
    close_when_loop_ends,
    default_backend,
    is_aiohttp_session,
    make_async,
    make_sync,
)
from toolfold.adapters._http._deadlines import cap_socket_io
from toolfold.adapters._http._retry import HttpLimits, Timeouts

__all__ = ["Clients"]


class Clients:
    """The blocking and async backends of one transport.

    Args:
        http: The backend to make: ``"httpx"``, ``"httpx2"`` or ``"aiohttp"``
            (None: `default_backend`).
        http_client: An injected client (httpx-like, or an ``aiohttp.ClientSession``).
        async_http_client: An injected async client, when ``http_client`` is the sync one.
        timeouts: The timeouts owned clients are made with.
        limits: The pool limits owned clients are made with.
        url: The base URL requests go to (an owned aiohttp session picks its
            proxy for it; an owned httpx client, whether the system's proxy
            settings spare its host).
        trust_env: False: the clients made here read no proxy settings (see
            `Transport`); an injected client keeps its own.
    """

    def __init__(
        self,
        http: str | None,
        http_client: Any,
        async_http_client: Any,
        timeouts: Timeouts,
        limits: HttpLimits,
        url: str,
        trust_env: bool = True,
    ) -> None:
        if http is not None and (http_client is not None or async_http_client is not None):
            raise ModelConfigError("give http=... or an injected client, not both")
        if http is not None and http not in BACKENDS:
            raise ModelConfigError(f"http={http!r} is not a backend; known: {', '.join(BACKENDS)}")
        for option, client in (
            ("http_client", http_client),
            ("async_http_client", async_http_client),
        ):
            if client is not None and not (
                is_aiohttp_session(client) or callable(getattr(type(client), "send", None))
            ):  # found now, not as an AttributeError at the first call
                raise ModelConfigError(
                    f"{option}={type(client).__name__} is not an HTTP client: give an "
                    "httpx.Client or httpx.AsyncClient (or httpx2's), or an aiohttp.ClientSession"
                )
        if async_http_client is not None and _is_blocking(async_http_client):
            raise ModelConfigError(  # its blocking send would stall the event loop
                f"async_http_client={type(async_http_client).__name__} is a blocking client: "
                "give it as http_client=..., or give an httpx.AsyncClient (or httpx2's) or an "
                "aiohttp.ClientSession as async_http_client"
            )
        self.name = http or default_backend()
        self._timeouts, self._limits, self._url = timeouts, limits, url
        self._trust_env = trust_env
        sync_client, async_client = None, async_http_client
        if http_client is not None:
            if _is_async(http_client):
                async_client = http_client
            else:
                sync_client = http_client
        self._sync: Any = None
        if sync_client is not None:
            # Its sockets keep the total deadline too: a dripping head cannot pass it.
            cap_socket_io(sync_client)
            self._sync = HttpxBackend(sync_client, owned=False)
        self._async: Any = None if async_client is None else _wrap_async(async_client)
        self.owns_sync, self.owns_async = self._sync is None, self._async is None
        self.injected = not (self.owns_sync and self.owns_async)
        # Each live loop's (backend, closer): the closer, an async generator
        # started on that loop, closes the backend when the loop shuts down, so
        # it is held here as long as the loop may use the backend (dropped, it
        # would be finalised and close the backend under that loop's runs).
        self._loops: dict[asyncio.AbstractEventLoop, tuple[Any, Any]] = {}
        self._lock = threading.Lock()  # guards `_loops` (loops in several threads)
        self._sync_lock = threading.Lock()  # guards the blocking client's making and closing
        self._sync_finalizer: weakref.finalize[Any, Any] | None = None
        # The last (loop, backend) used, as one value read once: the usual
        # call (one loop) is answered without the lock; a thread running
        # another loop never pairs its loop with this one's client.
        self._bound: tuple[asyncio.AbstractEventLoop, Any] | None = None
        _MADE.add(self)

    def _after_fork(self) -> None:
        """In a forked child: forget the clients made in the parent (see the module's doc)."""
        # Another thread of the parent may have held them at the fork.
        self._lock, self._sync_lock = threading.Lock(), threading.Lock()
        if self.owns_sync and self._sync is not None:
            if self._sync_finalizer is not None:
                self._sync_finalizer.detach()  # (it would close them)
            _INHERITED.append(self._sync)
            self._sync, self._sync_finalizer = None, None
        if self.owns_async:
            _INHERITED.extend(self._loops.values())
            self._loops, self._bound = {}, None

    def ready_async(self) -> Any:
        """The async backend for the running loop if it is made already, else None."""
        if not self.owns_async:
            return self._async
        bound = self._bound
        if bound is not None and bound[0] is asyncio.get_running_loop():
            return bound[1]
        return None

    async def get_async(self) -> Any:
        """The async backend for the running loop (made on the loop's first call)."""
        if not self.owns_async:
            return self._async
        loop = asyncio.get_running_loop()
        bound = self._bound
        if bound is not None and bound[0] is loop:
            return bound[1]
        with self._lock:
            entry = self._loops.get(loop)
        if entry is not None:
            self._bound = (loop, entry[0])
            return entry[0]
        if not self.owns_sync:
            raise _one_mode_only("an async", "httpx.AsyncClient", "async_http_client")
        backend = await make_async(
            self.name, self._timeouts, self._limits, self._url, self._trust_env
        )
        with self._lock:
            entry = self._loops.get(loop)
        if entry is not None:
            # Another task made this loop's client while this one awaited (the proxy
            # settings are read in a thread): use that one, so no caller's client is
            # replaced, and closed by its replaced closer, while in use.
            await backend.aclose()
            return entry[0]
        closer = close_when_loop_ends(backend, _forgetting(self, loop, backend))
        await closer.__anext__()
        with self._lock:
            # A loop closed without shutting down its async generators never
            # ran its closer: its entry goes now.
            for gone in [old for old in self._loops if old.is_closed()]:
                del self._loops[gone]
            self._loops[loop] = (backend, closer)
        self._bound = (loop, backend)
        return backend

    def _forget(self, loop: asyncio.AbstractEventLoop, backend: Any) -> None:
        """Drop ``loop``'s entry if it still holds ``backend`` (its closer runs: the loop ends)."""
        with self._lock:
            entry = self._loops.get(loop)
            if entry is not None and entry[0] is backend:
                del self._loops[loop]
        bound = self._bound
        if bound is not None and bound[1] is backend:
            self._bound = None

    def get_sync(self) -> HttpxBackend:
        """The blocking backend (made once, by the first call of whichever thread)."""
        backend: HttpxBackend | None = self._sync
        if backend is not None:
            return backend
        if not self.owns_async:
            raise _one_mode_only("a blocking", "httpx.Client", "http_client")
        with self._sync_lock:  # threads' first calls at once make one client, not one each
            backend = self._sync
            if backend is None:
                backend = make_sync(
                    self.name, self._timeouts, self._limits, self._url, self._trust_env
                )
                self._sync = backend
                # A model dropped without close() still closes its sockets (no
                # ResourceWarning); close() detaches it, so a closed client is freed.
                self._sync_finalizer = weakref.finalize(self, backend.close)
        return backend

    async def aclose(self) -> None:
        """Close the async backends this transport made, then the blocking one.

        The running loop's is closed here; one of a loop running in another
        thread is closed on that loop (scheduled there, not awaited: that loop
        may be waiting for this one); one of a loop already closed was closed
        when it shut down. An httpx client of a loop that is not running is
        marked closed here (its connections close when that loop runs again);
        an aiohttp session, which closes only on its own loop, stays open for
        that loop to close, and is a `UsageError` naming the loop, once
        everything else is closed. A close that does not end within
        2 seconds is cut (the connections it had not closed are
        dropped), and is a ``TimeoutError`` once everything else is closed.

        Raises:
            UsageError: An aiohttp session belongs to a loop that is not running.
            TimeoutError: A client's close did not end within 2 seconds.
        """
        stuck: list[tuple[asyncio.AbstractEventLoop, tuple[Any, Any]]] = []
        cut: TimeoutError | None = None
        if self.owns_async:
            running = asyncio.get_running_loop()
            with self._lock:
                entries, self._loops = list(self._loops.items()), {}
                self._bound = None
            for loop, (backend, closer) in entries:
                if loop is running:
                    pass
                elif loop.is_closed():
                    continue
                elif loop.is_running():
                    asyncio.run_coroutine_threadsafe(closer.aclose(), loop)
                    continue
                elif isinstance(backend, AiohttpBackend):
                    stuck.append((loop, (backend, closer)))
                    continue
                try:  # (an httpx client of a loop not running is marked closed)
                    await close_now(closer)
                except TimeoutError as exc:
                    cut = exc
        self.close()
        if stuck:
            with self._lock:
                for loop, entry in stuck:
                    self._loops.setdefault(loop, entry)
            raise UsageError(
                f"aclose() cannot close the model's aiohttp session of event loop {stuck[0][0]!r}: "
                "aiohttp closes a session only on the loop it was opened on, and that loop is "
                "not running; await model.aclose() on that loop "
                "(loop.run_until_complete(model.aclose())), or shut that loop down "
                "(asyncio.run does; else loop.run_until_complete(loop.shutdown_asyncgens())), "
                "which closes it"
            ) from cut
        if cut is not None:
            raise cut

    def close(self) -> None:
        """Close the blocking backend this transport made."""
        if self.owns_sync and self._sync is not None:
            with self._sync_lock:
                backend, self._sync = self._sync, None
                finalizer, self._sync_finalizer = self._sync_finalizer, None
            if finalizer is not None:
                finalizer.detach()
            if backend is not None:
                backend.close()


#: Every live `Clients` (a forked child's forget the parent's clients).
_MADE: weakref.WeakSet[Clients] = weakref.WeakSet()
#: In a forked child, the clients (and their loops' closers) made in the parent:
#: kept, never used nor closed; collected, their sockets would warn as unclosed.
_INHERITED: list[Any] = []


def _forget_after_fork() -> None:
    for clients in list(_MADE):
        clients._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _forgetting(
    clients: Clients, loop: asyncio.AbstractEventLoop, backend: Any
) -> Callable[[], None]:
    """What a closer calls as its loop ends: ``clients`` forgets ``backend`` (if still alive).

    Weakly held: a model dropped without ``aclose()`` is freed at once, its
    closers finalised (each closes its client on its own loop).
    """
    held = weakref.ref(clients)

    def forget() -> None:
        owner = held()
        if owner is not None:
            owner._forget(loop, backend)

    return forget


def _is_blocking(client: Any) -> bool:
    """Whether ``client`` is httpx's or httpx2's blocking ``Client`` (a subclass too).

    Only those are refused as ``async_http_client``: a wrapper or subclass whose
    ``send`` is not a coroutine function may still return a coroutine.
    """
    for package in ("httpx", "httpx2"):
        module = sys.modules.get(package)
        blocking = getattr(module, "Client", None)
        if isinstance(blocking, type) and isinstance(client, blocking):
            return True
    return False


def _is_async(client: Any) -> bool:
    return is_aiohttp_session(client) or inspect.iscoroutinefunction(
        getattr(type(client), "send", None)
    )


def _wrap_async(client: Any) -> Any:
    if is_aiohttp_session(client):
        return AiohttpBackend(client, owned=False)
    return HttpxBackend(client, owned=False)


def _one_mode_only(mode: str, kind: str, option: str) -> ModelConfigError:
    # Falling back to a client of toolfold's own would silently drop the
    # injected client's proxy, certificates and headers.
    return ModelConfigError(
        f"{mode} call needs {mode.split()[0]} {kind} too: only a client for the other mode was "
        f"injected; pass {option}=... as well (toolfold does not fall back to its own client, "
        "which would drop your client's proxy, certificates and headers)"
    )
