"""`OpenAIChatModel`: the Chat Completions codec on the shared transport."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from toolfold._errors import ModelConfigError
from toolfold.adapters._codec import no_equivalent
from toolfold.adapters._dialects import CompiledTool
from toolfold.adapters._http._checks import base_url_from_env, check_base_url
from toolfold.adapters._http._keys import Secret
from toolfold.adapters._http._retry import HttpLimits
from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters._provider_model import UNSET, Endpoint, ProviderModel
from toolfold.adapters.gemini._providers import needs_signature
from toolfold.adapters.openai_chat._errors import parse_error
from toolfold.adapters.openai_chat._providers import (
    GEMINI_3,
    GEMINI_HOST,
    OPENAI_INSTEAD,
    OPENAI_MAX_STOP,
    OPENAI_MAX_TOOLS,
    OPENAI_UNSUPPORTED_SETTINGS,
    SERVER_PRESETS,
    ChatProvider,
    provider_for,
)
from toolfold.adapters.openai_chat._request import (
    build_body,
    compiled_tool,
    encode_body,
    id_rewrite,
    reasoning_notes,
)
from toolfold.adapters.openai_chat._response import parse_response, parse_usage
from toolfold.adapters.openai_chat._stream import DecoderState, decode_chunk, decode_end
from toolfold.adapters.openai_responses._providers import is_openai
from toolfold.runtime._model import Prepared, RequestReport
from toolfold.runtime.core._messages import Usage
from toolfold.runtime.core._repr import short
from toolfold.runtime.core._request import ModelRequest, ModelResponse, ToolDefinition
from toolfold.runtime.core._stream import StreamEvent

_PATH = "chat/completions"
_API = "the OpenAI Chat Completions API"


class OpenAIChatModel(ProviderModel):
    """A model behind ``POST /chat/completions``: OpenAI and the compatible family.

    Args:
        model_name: The provider's model id, e.g. ``"gpt-4o-mini"``.
        provider: A family prefix (``"openai"``, ``"groq"``, ``"mistral"``,
            ``"deepseek"``, ``"openrouter"``, ``"openai-compatible"``) or a
            `ChatProvider` row of your own.
        base_url: The API root (``http://localhost:8000/v1``); required for
            ``openai-compatible``, optional elsewhere (a proxy, a region);
            ``openai`` reads ``OPENAI_BASE_URL`` when none is given, as
            openai-python does.
        api_key: The key; by default read from the provider's environment
            variable (``OPENAI_API_KEY``...). Kept in a `Secret`, never printed.
        server: For ``openai-compatible``: ``"vllm"``, ``"llama.cpp"``,
            ``"lmstudio"``, ``"ollama"`` or ``"gemini"`` (Gemini's OpenAI
            endpoint; the default for a base URL on its host), to apply that
            server's quirks.
        http: The HTTP client to make: ``"httpx"``, ``"httpx2"`` or
            ``"aiohttp"`` (async only, ``pip install toolfold[aiohttp]``).
            Default: httpx2 where installed, else httpx.
        http_client: An ``httpx.AsyncClient`` or ``httpx.Client`` (or httpx2's),
            or an ``aiohttp.ClientSession``, to use instead.
        async_http_client: An async client, when ``http_client`` is the sync one.
        timeout: Seconds, a ``Timeouts``, or None for no limits.
        retry: Retries (a number or a ``RetryPolicy``); 0 or None never retries.
        headers: Extra headers for every request.
        limits: An ``HttpLimits``: pool size and the largest answer accepted.
        trust_env: False: the clients toolfold makes read no proxy setting
            (``HTTP_PROXY``..., the system's) and send to the API directly;
            under httpx and httpx2 this is their own ``trust_env``, which
            also ignores ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``. An injected
            client keeps its own.

    Raises:
        ModelConfigError: An unknown provider, a missing ``base_url`` or key,
            or a bad base URL, key or header (checked before any connection).
    """

    def __init__(
        self,
        model_name: str,
        *,
        provider: str | ChatProvider = "openai",
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        server: str | None = None,
        http: str | None = None,
        http_client: Any = None,
        async_http_client: Any = None,
        timeout: Any = UNSET,
        retry: Any = UNSET,
        headers: Mapping[str, str | Secret] | None = None,
        limits: HttpLimits | None = None,
        trust_env: bool = True,
    ) -> None:
        if base_url is not None:
            check_base_url(base_url)  # (a URL of another type is refused, not searched)
        if server is None and provider == "openai-compatible" and GEMINI_HOST in (base_url or ""):
            server = "gemini"
        self.provider = _row(provider, server)
        if self.provider is SERVER_PRESETS["gemini"] and needs_signature(model_name):
            self.provider = GEMINI_3  # (its unsigned calls get the placeholder)
        self._report = RequestReport(self.provider.name)  # without notes: nothing is changed
        super().__init__(
            model_name,
            base_url=base_url,
            api_key=api_key,
            http_client=http_client,
            async_http_client=async_http_client,
            http=http,
            limits=limits,
            trust_env=trust_env,
            timeout=timeout,
            retry=retry,
            headers=headers,
        )

    def _own_options(self) -> dict[str, Any]:
        # (the row, which ``server=`` chose, stands for both)
        return {"provider": self.provider}

    def _endpoint(self, base_url: str | None) -> Endpoint:
        row = self.provider
        variable = row.base_url_env if base_url is None else None  # (OPENAI_BASE_URL)
        from_env = base_url_from_env(variable) if variable is not None else None
        url = base_url or from_env or row.base_url
        if not url:
            raise ModelConfigError(
                f"{row.name}:{self.model_name} needs base_url=..., e.g. "
                "'http://localhost:8000/v1' (vLLM) or 'http://localhost:11434/v1' (Ollama)"
            )
        return Endpoint(
            row.name,
            url,
            row.api_key_env,
            row.key_required,
            error_parser=parse_error,
            base_url_from_env=from_env is not None,
            base_url_option=variable if variable is not None and from_env else "base_url",
        )

    def _configure(self, headers: Mapping[str, str | Secret]) -> None:
        # Settings CreateChatCompletionRequest lacks are refused for OpenAI only.
        openai = self.provider.name == "openai" and is_openai(self.base_url)
        self._openai = openai
        self._refused = OPENAI_UNSUPPORTED_SETTINGS if openai else frozenset()
        # A named provider at a URL the user gave (a gateway, Vertex AI's OpenAI
        # endpoint: maybe Gemini 3 behind it) gets a call's extra_content back, as an
        # openai-compatible server does; only its own host is sent none.
        row = self.provider
        named = not (row.keeps_extra_content or row.thought_signatures)
        at_gateway = not (openai or _same_host(self.base_url, row.base_url))
        self._wire = attrs.evolve(row, keeps_extra_content=True) if named and at_gateway else row

    def _refuse_unsupported(self, request: ModelRequest) -> None:
        """Refuse a setting OpenAI's Chat Completions API has no field for, a ``stop``
        it does not take, or more tools than it takes (on its own host)."""
        settings = request.settings
        if self._refused:
            for key, value in settings.items():  # (in their order: the first is named)
                if key in self._refused and value is not None:
                    raise no_equivalent(key, _API, OPENAI_INSTEAD.get(key))
        if self._openai:
            stop = settings.get("stop")
            if stop is not None:
                check_openai_stop(stop)
            if len(request.tools) > OPENAI_MAX_TOOLS or "tools" in settings:
                check_openai_tools(request)

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body this model sends for ``request`` (the family's quirks applied)."""
        self._refuse_unsupported(request)
        notes = reasoning_notes(request.messages, self._wire)
        report = self._report if not notes else RequestReport(self.provider.name, notes)
        return Prepared(build_body(request, self.model_name, self._wire, stream=stream), report)

    def _path(self, prepared: Prepared, stream: bool) -> str:
        return _PATH

    def _outgoing(
        self, request: ModelRequest, stream: bool
    ) -> tuple[str, Any, Mapping[str, str] | None]:
        # The body's JSON is made from the messages' memoized encodings (`encode_body`),
        # unless a subclass builds its own body; the reasoning it leaves out is logged
        # as `prepare`'s report notes it (a test holds both paths to the same log and bytes).
        if type(self).prepare is OpenAIChatModel.prepare:
            self._refuse_unsupported(request)
            notes: list[str] = []
            content = encode_body(request, self.model_name, self._wire, stream=stream, notes=notes)
            if content is not None:
                if notes:
                    self._log_notes(
                        RequestReport(self.provider.name, tuple(notes)), request.messages
                    )
                return _PATH, content, None
        return super()._outgoing(request, stream)

    def _read(self, data: Any) -> ModelResponse:
        # The codec reads the whole body with the `wire` getters: a body that is
        # no object is a MalformedResponseError at ``$``, like any bad field.
        return parse_response(
            data, self.provider_name, thinking_in_total=self.provider.thinking_in_total
        )

    def _usage(self, data: Mapping[str, Any]) -> Usage | None:
        usage = data.get("usage")
        if not isinstance(usage, Mapping):
            return None
        return parse_usage(usage, thinking_in_total=self.provider.thinking_in_total)

    def _compiled(self, tool: ToolDefinition) -> CompiledTool:
        return compiled_tool(tool, self.provider)

    def _stream_start(self) -> DecoderState:
        return DecoderState(self.provider_name, thinking_in_total=self.provider.thinking_in_total)

    def _stream_step(
        self, state: DecoderState, item: SSEEvent
    ) -> tuple[DecoderState, list[StreamEvent]]:
        return decode_chunk(state, item.data, item.event)

    def _stream_end(self, state: DecoderState) -> list[StreamEvent]:
        return decode_end(state)

    def _stream_done(self, state: DecoderState) -> bool:
        return state.done

    def _sent_id(self) -> Callable[[str], str] | None:
        # Mistral sees each id as its 9 characters and may say one of those again.
        return id_rewrite(self.provider)


def check_openai_stop(stop: Any) -> None:
    """Refuse a ``stop`` setting OpenAI's Chat Completions API does not take.

    ``StopConfiguration`` is a string or a list of 1 to `OPENAI_MAX_STOP`
    strings [openai-openapi.yaml]; OpenAI answers 400 for anything else, after
    the request is sent.

    Raises:
        ModelConfigError: Naming the setting, what OpenAI takes and what was given.
    """
    if isinstance(stop, str) or (
        type(stop) in (list, tuple)
        and 0 < len(stop) <= OPENAI_MAX_STOP
        and all(type(s) is str for s in stop)
    ):
        return
    takes = f"a string or a list of 1 to {OPENAI_MAX_STOP} strings"
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
        raise ModelConfigError(f"the setting 'stop' must be {takes} for {_API}, got {short(stop)}")
    if not stop:
        raise ModelConfigError(
            f"the setting 'stop' is an empty list; {_API} takes {takes}: for no stop "
            "sequence, leave it out (stop=None)"
        )
    if len(stop) > OPENAI_MAX_STOP:
        raise ModelConfigError(
            f"the setting 'stop' holds {len(stop)} sequences; {_API} takes at most "
            f"{OPENAI_MAX_STOP} ({takes}), got {short(stop)}"
        )


def check_openai_tools(request: ModelRequest) -> None:
    """Refuse a request that offers OpenAI's Chat Completions API more than
    `OPENAI_MAX_TOOLS` tools: the run's (its own, an MCP source's, its handoffs') and a
    ``tools`` setting's, all sent in one ``tools`` array. OpenAI answers 400 ("array too
    long") after the request is sent.

    Raises:
        ModelConfigError: Naming the count, the limit and how to offer fewer.
    """
    extra = request.settings.get("tools")
    added = len(extra) if isinstance(extra, (list, tuple)) else 0
    count = len(request.tools) + added
    if count <= OPENAI_MAX_TOOLS:
        return
    among = (
        f" ({len(request.tools)} of the run's and {added} of the setting 'tools')" if added else ""
    )
    raise ModelConfigError(
        f"the request offers {count} tools{among}; {_API} takes at most {OPENAI_MAX_TOOLS} "
        '("A max of 128 functions are supported"): offer fewer, e.g. split the tools '
        "between agents (handoffs, an agent as a tool), give each agent or call only the "
        "tools it needs (agent.evolve(tools=...), an MCP source's include=[...]), or use a "
        "provider that takes more"
    )


def _same_host(url: str, own: str | None) -> bool:
    """Whether ``url`` is on the host of ``own`` (a provider row's URL; None: no host)."""
    if own is None:
        return False
    host = (urlsplit(url).hostname or "").removesuffix(".")  # (the DNS root: same host)
    return host == urlsplit(own).hostname


def _row(provider: str | ChatProvider, server: str | None) -> ChatProvider:
    if isinstance(provider, ChatProvider):
        return provider
    if server is not None:
        if provider != "openai-compatible":
            raise ModelConfigError(f"server={server!r} only applies to openai-compatible models")
        try:
            return SERVER_PRESETS[server]
        except KeyError:
            known = ", ".join(sorted(SERVER_PRESETS))
            raise ModelConfigError(f"unknown server {server!r}; known: {known}") from None
    try:
        return provider_for(provider)
    except KeyError as exc:
        raise ModelConfigError(str(exc.args[0])) from None


def make_factory(prefix: str) -> Any:
    """The factory `register_provider` stores for ``prefix``."""

    def factory(model_name: str, **options: Any) -> OpenAIChatModel:
        return OpenAIChatModel(model_name, provider=prefix, **options)

    factory.__name__ = f"{prefix.replace('-', '_')}_model"
    return factory
