"""`LocalModel`: a GGUF model on a ``llama-server`` this process runs, as a toolfold `Model`.

It rides on `OpenAIChatModel` with the llama.cpp server preset; what it adds
is the setup (build the server, install the model, start it) on first use, and
the tool-choice policy small models need (see `LocalModel`).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import attrs

from toolfold.adapters._provider_model import Endpoint
from toolfold.adapters.openai_chat import SERVER_PRESETS, OpenAIChatModel
from toolfold.local._build import ensure_server_binary
from toolfold.local._paths import Progress
from toolfold.local._server import LocalServer, shared_server
from toolfold.local._weights import ensure_model
from toolfold.runtime._model import Prepared
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._stream import StreamEvent

#: The llama.cpp preset under the name ``local`` (no key, no named tool choice).
LOCAL_PROVIDER = attrs.evolve(SERVER_PRESETS["llama.cpp"], name="local", parallel_default=False)

#: Settings sent unless the caller gives their own: greedy decoding keeps a
#: small model on its best guess, and a cap stops a runaway answer early.
DEFAULT_SETTINGS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 512}


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
    sent as ``"required"`` (the server's grammar then guarantees a call that
    fits the schema) and a step after tool results as ``"none"`` (the model
    answers in words). ``"auto"`` lets the model choose, which small models do
    badly: the server may then answer HTTP 500 ("does not match the expected
    format", a `ServerError`) or send an error event inside the stream (a
    `StreamError`). An explicit ``tool_choice`` is always sent as given.

    Args:
        model_name: ``"smollm2"`` (SmolLM2-135M-Instruct) or a path to a ``.gguf`` file.
        progress: Called with one line per setup step (default: printed to stderr).
        **options: Passed to `OpenAIChatModel` (``timeout``, ``retry``, ``headers``...).
    """

    def __init__(
        self, model_name: str = "smollm2", *, progress: Progress | None = None, **options: Any
    ) -> None:
        self.model_name = model_name
        self._progress = progress or print_progress
        self._options = options
        self._chat: OpenAIChatModel | None = None
        self._offline: OpenAIChatModel | None = None  # `_encoder`'s, before a server runs
        self._server: LocalServer | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """``local:<model>``."""
        return f"local:{self.model_name}"

    def __repr__(self) -> str:
        return f"LocalModel({self.model_name!r}, server={self._server!r})"

    def server(self) -> LocalServer:
        """The running server, set up and started first if needed (blocking)."""
        self._ready()
        assert self._server is not None
        return self._server

    def _ready(self) -> OpenAIChatModel:
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
            return self._chat

    def as_sent(self, request: ModelRequest) -> ModelRequest:
        """The request as sent: the tool-choice policy and default settings applied."""
        changes: dict[str, Any] = {}
        if request.tools and request.tool_choice is None:
            results_in = bool(request.messages) and request.messages[-1].role == "tool"
            changes["tool_choice"] = "none" if results_in else "required"
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
        return self._ready().body(self.as_sent(request), stream=stream)

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """One response, blocking."""
        return self._ready().request_sync(self.as_sent(request))

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One response, asynchronously (the first setup runs in a thread)."""
        chat = await asyncio.to_thread(self._ready)
        return await chat.request(self.as_sent(request))

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        yield from self._ready().stream_sync(self.as_sent(request))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        chat = await asyncio.to_thread(self._ready)
        async for event in chat.stream(self.as_sent(request)):
            yield event

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
