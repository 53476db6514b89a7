"""`OpenAIChatModel`: the Chat Completions codec on the shared transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from toolfold._errors import (
    ArgumentJSONError,
    ArgumentValidationError,
    ModelConfigError,
    ProviderError,
)
from toolfold.adapters._dialects import check_arguments
from toolfold.adapters._http._keys import Secret, resolve_api_key
from toolfold.adapters._http._retry import HttpLimits
from toolfold.adapters._http._transport import Transport
from toolfold.adapters.openai_chat._errors import parse_error
from toolfold.adapters.openai_chat._providers import (
    GEMINI_HOST,
    SERVER_PRESETS,
    ChatProvider,
    provider_for,
)
from toolfold.adapters.openai_chat._request import build_body, compiled_tool
from toolfold.adapters.openai_chat._response import parse_response
from toolfold.adapters.openai_chat._stream import DecoderState, decode_chunk, decode_end
from toolfold.runtime.core._arguments import decode_arguments
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._stream import StreamEvent

_PATH = "chat/completions"
_UNSET: Any = object()


class OpenAIChatModel:
    """A model behind ``POST /chat/completions``: OpenAI and the compatible family.

    Args:
        model_name: The provider's model id, e.g. ``"gpt-4o-mini"``.
        provider: A family prefix (``"openai"``, ``"groq"``, ``"mistral"``,
            ``"deepseek"``, ``"openrouter"``, ``"openai-compatible"``) or a
            `ChatProvider` row of your own.
        base_url: The API root (``http://localhost:8000/v1``); required for
            ``openai-compatible``, optional elsewhere (a proxy, a region).
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
        timeout: Any = _UNSET,
        retry: Any = _UNSET,
        headers: Mapping[str, str] | None = None,
        limits: HttpLimits | None = None,
    ) -> None:
        if server is None and provider == "openai-compatible" and GEMINI_HOST in (base_url or ""):
            server = "gemini"
        row = _row(provider, server)
        url = base_url or row.base_url
        if not url:
            raise ModelConfigError(
                f"{row.name}:{model_name} needs base_url=..., e.g. "
                "'http://localhost:8000/v1' (vLLM) or 'http://localhost:11434/v1' (Ollama)"
            )
        key = resolve_api_key(
            row.name, api_key, env_vars=row.api_key_env, required=row.key_required
        )
        options: dict[str, Any] = {}
        if timeout is not _UNSET:
            options["timeout"] = timeout
        if retry is not _UNSET:
            options["retry"] = retry
        self.model_name = model_name
        self.provider = row
        self._transport = Transport(
            row.name,
            url,
            key,
            headers=headers,
            limits=limits,
            http=http,
            http_client=http_client,
            async_http_client=async_http_client,
            error_parser=parse_error,
            inband_errors=False,  # the codec maps them (Groq's tool_use_failed)
            **options,
        )

    @property
    def name(self) -> str:
        """``provider:model``, e.g. ``groq:llama-3.3-70b-versatile``."""
        return f"{self.provider.name}:{self.model_name}"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._transport.base_url

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.name!r}, base_url={self.base_url!r})"

    def body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body this model sends for ``request`` (for inspection and tests)."""
        return build_body(request, self.model_name, self.provider, stream=stream)

    def check_arguments(self, request: ModelRequest, call: ToolCallPart) -> Mapping[str, Any]:
        """Validate a call's arguments against the schema this model sent for its tool.

        Strict mode makes optional parameters required-and-nullable; valid
        arguments come back with those nulls removed again, as the tool's own
        schema expects them.

        Raises:
            ArgumentJSONError: The argument text is not JSON.
            ArgumentValidationError: The arguments break the schema sent (each
                error with its ``$.path``), or name no tool of the request.
        """
        tool = next((t for t in request.tools if t.name == call.name), None)
        if tool is None:
            names = ", ".join(t.name for t in request.tools) or "none"
            raise ArgumentValidationError(
                call.name, [f"$: no tool {call.name!r} in the request; tools: {names}"]
            )
        arguments: Any = call.arguments
        if arguments is None:
            try:
                arguments = decode_arguments(call.arguments_text)
            except ValueError as exc:
                raise ArgumentJSONError(call.name, str(exc), getattr(exc, "pos", 0)) from exc
        return check_arguments(compiled_tool(tool, self.provider), arguments)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One response, asynchronously."""
        try:
            data = await self._transport.post_json(_PATH, self.body(request))
            return parse_response(
                data, self.provider.name, thinking_in_total=self.provider.thinking_in_total
            )
        except ProviderError as exc:
            self._transport.scrub(exc)
            raise

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """One response, blocking."""
        try:
            data = self._transport.post_json_sync(_PATH, self.body(request))
            return parse_response(
                data, self.provider.name, thinking_in_total=self.provider.thinking_in_total
            )
        except ProviderError as exc:
            self._transport.scrub(exc)
            raise

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        state = DecoderState(self.provider.name, thinking_in_total=self.provider.thinking_in_total)
        events = self._transport.stream(_PATH, self.body(request, stream=True))
        # One boundary for every error of this call: the codec raises in-band
        # errors itself, from text a server may have filled with the key.
        try:
            try:
                async for event in events:
                    state, out = decode_chunk(state, event.data, event.event)
                    for item in out:
                        yield item
                    if state.done:
                        break
            finally:
                closer = getattr(events, "aclose", None)
                if closer is not None:
                    await closer()
            for item in decode_end(state):
                yield item
        except ProviderError as exc:
            self._transport.scrub(exc)
            raise

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        state = DecoderState(self.provider.name, thinking_in_total=self.provider.thinking_in_total)
        events = self._transport.stream_sync(_PATH, self.body(request, stream=True))
        try:
            try:
                for event in events:
                    state, out = decode_chunk(state, event.data, event.event)
                    yield from out
                    if state.done:
                        break
            finally:
                closer = getattr(events, "close", None)
                if closer is not None:
                    closer()
            yield from decode_end(state)
        except ProviderError as exc:
            self._transport.scrub(exc)
            raise

    async def aclose(self) -> None:
        """Close the HTTP clients this model made (injected ones stay open)."""
        await self._transport.aclose()

    def close(self) -> None:
        """Close the blocking HTTP client this model made."""
        self._transport.close()


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
