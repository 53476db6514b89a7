"""`LocalModel`: a GGUF model on a ``llama-server`` this process runs, as a toolfold `Model`.

It rides on `OpenAIChatModel` with the llama.cpp server preset; what it adds
is the setup (build the server, install the model, start it) on first use, and
the tool-choice policy small models need (see `LocalModel`).
"""

from __future__ import annotations

import asyncio
import copy
import os
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import attrs

from toolfold._errors import (
    ContextWindowExceededError,
    ProviderConnectionError,
    ProviderError,
    StreamError,
    Unpicklable,
)
from toolfold.adapters._provider_model import Endpoint
from toolfold.adapters.openai_chat import SERVER_PRESETS, OpenAIChatModel
from toolfold.local._build import ensure_server_binary
from toolfold.local._paths import Progress, check_cache_dir
from toolfold.local._server import LocalServer, shared_server
from toolfold.local._weights import check_model_name, ensure_model
from toolfold.runtime._model import Prepared
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._stream import StreamEvent
from toolfold.runtime.drive._output import is_rejection

#: The llama.cpp preset under the name ``local`` (no key, no named tool choice).
LOCAL_PROVIDER = attrs.evolve(SERVER_PRESETS["llama.cpp"], name="local", parallel_default=False)

#: Settings sent unless the caller gives their own: greedy decoding keeps a
#: small model on its best guess, and a cap stops a runaway answer early.
DEFAULT_SETTINGS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 512}

#: How long a lost connection waits for the exit of a server seen exiting.
_EXIT_WAIT = 2.0
#: A client's errors for a connection lost in a stream (the server may have read the request).
_LOST = frozenset(
    {"TransportError", "ClientConnectionError", "ClientPayloadError", "OSError", "EOFError"}
)
#: Every LocalModel of this process not yet collected (`_forked`).
_MODELS: weakref.WeakSet[LocalModel] = weakref.WeakSet()


class _LoopbackChatModel(OpenAIChatModel):
    """The chat model of the server this process runs on 127.0.0.1: reached directly.

    No proxy could reach this machine's loopback server: with ``HTTPS_PROXY``
    or ``HTTP_PROXY`` set for the rest of the traffic (and ``NO_PROXY`` not
    naming 127.0.0.1), its requests went to the proxy and failed.
    """

    def _endpoint(self, base_url: str | None) -> Endpoint:
        return attrs.evolve(super()._endpoint(base_url), trust_env=False)


def print_progress(line: str) -> None:
    """The default progress reporter: one line on stderr per step."""
    print(f"toolfold local: {line}", file=sys.stderr, flush=True)


class LocalModel:
    """A GGUF model served on 127.0.0.1 by llama.cpp's ``llama-server``: no key, no network.

    On first use the server is built (once per machine, minutes) and cached,
    the model is installed, and a server is started on a free port; later runs
    in the same process reuse it, and it stops when the process exits.

    Tool choice: with tools and no explicit ``tool_choice``, the first step is
    sent as ``"required"``, and a step after tool results, or one asking
    again for an answer the output type rejected, as ``"none"`` (the model
    answers). "required" does not guarantee a call: the server's grammar for
    this template lets text without a "{" come first, then holds a call to
    its tool's schema; a model that writes words instead (no "{") writes on
    to ``max_tokens``, and the step ends with no call and finish reason
    "length". With an output type, ``response_format`` goes on a step sent
    with "none" or "auto", never on one forcing a call ("required", a tool's
    name): the server follows it over the tools, so a step sent with "auto"
    and the schema calls no tool; it answers typed. ``"auto"`` without an
    output type lets the model choose, which small models do badly: the
    server may then answer HTTP 500 ("does not match the expected format", a
    `ServerError`, which ends the run) or send an error event inside the
    stream (a `StreamError`). An explicit ``tool_choice`` is always sent as
    given.

    A server that died (killed, out of memory) is started again by the next
    call. A call whose connection failed because its server had died, before
    any of the answer came, is sent once more, to a new server: a dead server
    can neither answer it nor act on it. A connection lost while the server
    still runs raises its error at once (the request may have been read by a
    server that lives: it is never sent twice), as does one lost in the midst
    of a streamed answer.

    Args:
        model_name: ``"smollm2"`` (SmolLM2-135M-Instruct) or a path to a ``.gguf`` file.
        progress: Called with one line per setup step (default: printed to stderr).
        **options: Passed to `OpenAIChatModel` (``timeout``, ``retry``, ``headers``...).

    Raises:
        LocalSetupError: ``model_name`` is neither a known model nor an existing
            ``.gguf`` file, or ``$TOOLFOLD_CACHE_DIR`` cannot be a folder (a
            file is in its way).
    """

    def __init__(
        self, model_name: str = "smollm2", *, progress: Progress | None = None, **options: Any
    ) -> None:
        check_model_name(model_name)
        check_cache_dir()
        self.model_name = model_name
        self._progress = progress or print_progress
        self._options = options
        self._chat: OpenAIChatModel | None = None
        self._offline: OpenAIChatModel | None = None  # `_encoder`'s, before a server runs
        self._server: LocalServer | None = None
        self._lock = threading.Lock()
        _MODELS.add(self)

    @property
    def name(self) -> str:
        """``local:<model>``."""
        return f"local:{self.model_name}"

    def __repr__(self) -> str:
        return f"LocalModel({self.model_name!r}, server={self._server!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Its server is a process of this one's: nothing of it can travel (a lock, a pipe).
        raise Unpicklable(
            f"the model {self.name!r} cannot be pickled: its llama-server runs in this "
            f"process. Pass the string {self.name!r} instead of the model object (e.g. "
            f"Agent({self.name!r})), so that each process (each Ray actor) starts a server "
            "of its own"
        )

    def __copy__(self) -> LocalModel:
        # A copy shares the server and its client (a process and a pool, not data), as a
        # provider model's copies share its transport; `copy` would otherwise use
        # `__reduce__` and refuse. Its own lock guards its own fields.
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin._lock = threading.Lock()
        _MODELS.add(twin)
        return twin

    def __deepcopy__(self, memo: dict[int, Any]) -> LocalModel:
        # The same, with its options copied (an Agent holding it deep-copies too).
        twin = self.__copy__()
        memo[id(self)] = twin
        twin._options = copy.deepcopy(self._options, memo)
        return twin

    def server(self) -> LocalServer:
        """The running server, set up and started first if needed (blocking)."""
        return self._ready()[1]

    def _ready(self) -> tuple[OpenAIChatModel, LocalServer]:
        """The chat model and the server it calls, both set up first if needed.

        A server that has exited is replaced, and the chat model with it: its
        pooled connections went to the dead server.
        """
        with self._lock:
            if self._chat is None or self._server is None or not self._server.alive():
                binary = ensure_server_binary(self._progress)
                model = ensure_model(self.model_name, self._progress)
                self._server = shared_server(binary, model)
                options = {"retry": 0, **self._options}  # a local 500 does not pass by itself
                self._chat = _LoopbackChatModel(
                    self.model_name,
                    provider=LOCAL_PROVIDER,
                    base_url=self._server.base_url,
                    **options,
                )
            return self._chat, self._server

    def _dead(self, server: LocalServer, exc: ProviderError) -> bool:
        """Whether ``exc`` is a lost connection of a server that has died: then the
        client is dropped, and the next `_ready` starts another server (and client).

        A killed server's connections break while it exits, a moment (milliseconds)
        before its exit pipe closes: its exit is waited for only when its process
        is seen exiting already (`LocalServer.exiting`), so a server that runs on
        adds no delay to its error. Where that cannot be seen (no ``/proc``), a
        server whose exit has not shown yet is taken for alive.
        """
        if not _connection_lost(exc):
            return False
        if server.alive() and not (server.exiting() and server.wait(_EXIT_WAIT)):
            return False
        with self._lock:
            if self._server is server:
                self._chat = None
        return True

    def as_sent(self, request: ModelRequest) -> ModelRequest:
        """The request as sent: the tool-choice policy and default settings applied.

        The output schema (``response_format``) is held back on a step that
        forces a call ("required", a tool's name); a step sent with "none" or
        "auto" gets it (with "auto" the model then answers and calls no tool).
        """
        changes: dict[str, Any] = {}
        choice = request.tool_choice
        if request.tools and choice is None:
            choice = changes["tool_choice"] = "none" if _answering(request) else "required"
        if request.output is not None and request.tools and choice not in ("none", "auto"):
            # llama-server constrains the answer to ``response_format`` whatever
            # ``tool_choice`` says: sent with a forced call, no tool was ever called and
            # the structured answer was made up. With "auto" it goes as on main: the
            # step answers typed (held back, a small model's words failed every run).
            changes["output"] = None
        missing = {k: v for k, v in DEFAULT_SETTINGS.items() if k not in request.settings}
        if missing:
            changes["settings"] = {**missing, **request.settings}
        return attrs.evolve(request, **changes) if changes else request

    def _encoder(self) -> OpenAIChatModel:
        """The chat model that encodes requests: the server's, else one not connected.

        ``prepare`` and ``check_arguments`` need no server: before one runs
        they use a chat model of the same preset and options whose URL (the
        discard port) is never called.
        """
        with self._lock:
            if self._chat is not None:
                return self._chat
            if self._offline is None:
                options = {**self._options, "base_url": "http://127.0.0.1:9/v1"}
                self._offline = _LoopbackChatModel(
                    self.model_name, provider=LOCAL_PROVIDER, **options
                )
            return self._offline

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body sent for ``request`` (`as_sent`'s request), and what encoding changed.

        Nothing is sent and no server is started.
        """
        return self._encoder().prepare(self.as_sent(request), stream=stream)

    def check_arguments(self, request: ModelRequest, call: ToolCallPart) -> Mapping[str, Any]:
        """Validate a call's arguments against the schema sent for its tool.

        Raises:
            ArgumentJSONError: The argument text is not JSON.
            ArgumentValidationError: The arguments break the schema sent, or
                name no tool of the request.
        """
        return self._encoder().check_arguments(self.as_sent(request), call)

    def body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body sent for ``request`` (starts the server if needed)."""
        return self._ready()[0].body(self.as_sent(request), stream=stream)

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """One response, blocking."""
        prepared = self.as_sent(request)
        chat, server = self._ready()
        try:
            return chat.request_sync(prepared)
        except ProviderError as exc:
            if not self._lost(server, exc):
                raise
        chat, server = self._ready()  # (the dead server cannot answer it)
        try:
            return chat.request_sync(prepared)
        except ProviderError as exc:
            self._lost(server, exc)
            raise

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One response, asynchronously (the first setup runs in a thread)."""
        prepared = self.as_sent(request)
        chat, server = await asyncio.to_thread(self._ready)
        try:
            return await chat.request(prepared)
        except ProviderError as exc:
            # (in a thread: it may wait seconds for the lock or the server's exit)
            if not await asyncio.to_thread(self._lost, server, exc):
                raise
        chat, server = await asyncio.to_thread(self._ready)
        try:
            return await chat.request(prepared)
        except ProviderError as exc:
            await asyncio.to_thread(self._lost, server, exc)
            raise

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        prepared = self.as_sent(request)
        for again in (False, True):
            chat, server = self._ready()
            started = False
            try:
                for event in chat.stream_sync(prepared):
                    started = True
                    yield event
                return
            except ProviderError as exc:
                if not self._lost(server, exc) or started or again:
                    raise

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        prepared = self.as_sent(request)
        for again in (False, True):
            chat, server = await asyncio.to_thread(self._ready)
            started = False
            try:
                async for event in chat.stream(prepared):
                    started = True
                    yield event
                return
            except ProviderError as exc:
                lost = await asyncio.to_thread(self._lost, server, exc)
                if not lost or started or again:
                    raise

    def _lost(self, server: LocalServer, exc: ProviderError) -> bool:
        """`_dead`, and a dead server's error says how it ended and where its log is; a
        prompt too long for the context says how to give the server a larger one."""
        if isinstance(exc, ContextWindowExceededError):
            _append_to_message(exc, server.context_note())
            return False
        if not self._dead(server, exc):
            return False
        _append_to_message(exc, server.exit_report())
        return True

    def close(self) -> None:
        """Close the HTTP client (the server stays up for other runs until exit)."""
        for chat in (self._chat, self._offline):
            if chat is not None:
                chat.close()

    async def aclose(self) -> None:
        """Close the async HTTP client (the server stays up until exit)."""
        for chat in (self._chat, self._offline):
            if chat is not None:
                await chat.aclose()


def _answering(request: ModelRequest) -> bool:
    """Whether ``request``'s step is for the answer: its tools' results came (the last
    message holds them), or the run asks again for an answer its output type rejected."""
    if not request.messages:
        return False
    last = request.messages[-1]
    if last.role == "tool":
        return True
    return request.output is not None and last.role == "user" and is_rejection(last)


def _append_to_message(exc: ProviderError, note: str) -> None:
    """Append ``(note)`` to ``exc``'s message, once (the same error may pass twice)."""
    if exc.args and isinstance(exc.args[0], str) and note not in exc.args[0]:
        exc.args = (f"{exc.args[0]} ({note})", *exc.args[1:])


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from (or during, as a traceback shows)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        if current.__cause__ is not None or current.__suppress_context__:
            current = current.__cause__
        else:
            current = current.__context__


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cause in _causes(exc) for cls in type(cause).__mro__}


def _connection_lost(exc: ProviderError) -> bool:
    """The connection failed or dropped (not an answer the server sent, an in-stream error)."""
    if isinstance(exc, ProviderConnectionError):
        return True
    return isinstance(exc, StreamError) and bool(_names(exc) & _LOST)


def _forked() -> None:
    """In a child forked from this process: each model's lock is a new one (another
    thread, which the child does not have, may have held it at the fork: the child's
    first call then hung); its server is the parent's, and the next call starts one."""
    for model in list(_MODELS):
        model._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
