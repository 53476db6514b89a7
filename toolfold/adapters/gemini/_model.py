"""`GeminiModel`: the Gemini ``generateContent`` codec on the shared transport."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from toolfold._errors import ModelConfigError, ProviderError
from toolfold.adapters._dialects import CompiledTool
from toolfold.adapters._http._keys import Secret
from toolfold.adapters._http._retry import HttpLimits
from toolfold.adapters._provider_model import UNSET, Endpoint, ProviderModel
from toolfold.adapters.gemini._errors import parse_error, refine
from toolfold.adapters.gemini._providers import (
    API_KEY_ENV,
    API_VERSION,
    BASE_URL,
    KEY_HEADER,
)
from toolfold.adapters.gemini._request import build_body, compiled_tool, schema_dialect
from toolfold.adapters.gemini._response import parse_response, parse_usage
from toolfold.adapters.gemini._stream import (
    DecoderState,
    decode_chunk,
    decode_end,
    decode_event,
)
from toolfold.runtime._model import Prepared
from toolfold.runtime.core._messages import Usage
from toolfold.runtime.core._request import ModelRequest, ModelResponse, ToolDefinition
from toolfold.runtime.core._stream import StreamEvent

_STREAM_FORMATS = ("sse", "json")


def api_root(base_url: str) -> str:
    """``base_url`` without a last ``/v1beta`` segment: the adapter adds the version itself.

    Gateways document Gemini's base URL with its version (Cloudflare's
    ``.../google-ai-studio/v1beta``, LiteLLM's pass-through): taken as given,
    it became ``.../v1beta/v1beta/models/...``, a 404 with no hint.
    """
    root = base_url.rstrip("/")
    return root[: -len(_VERSION_SEGMENT)] if root.endswith(_VERSION_SEGMENT) else base_url


_VERSION_SEGMENT = f"/{API_VERSION}"


class GeminiModel(ProviderModel):
    """A Gemini model behind ``POST /v1beta/models/{model}:generateContent``.

    Args:
        model_name: The model id, e.g. ``"gemini-2.5-flash"``.
        provider: The prefix it was named with (``"gemini"`` or ``"google"``).
        base_url: The API root, default ``https://generativelanguage.googleapis.com``;
            the adapter adds ``/v1beta/models/...``. A base URL ending in
            ``/v1beta`` (as gateways give theirs) is taken without it, not
            doubled (`api_root`).
        api_key: The key; by default ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``.
            Sent in the ``x-goog-api-key`` header, never in the URL.
        schema_form: ``"json-schema"`` (``parametersJsonSchema``) or ``"openapi"``
            (``parameters``); by default chosen from the model (the OpenAPI form
            for models before the 2.5 generation).
        stream_format: ``"sse"`` (``?alt=sse``, the default) or ``"json"`` (the
            streamed JSON array Gemini sends without ``alt``).
        http_client: An ``httpx.AsyncClient`` or ``httpx.Client`` to use.
        async_http_client: An async client, when ``http_client`` is the sync one.
        http: The HTTP client to make: ``"httpx"``, ``"httpx2"`` or ``"aiohttp"``
            (see docs/providers-and-transport.md).
        limits: An ``HttpLimits``: pool size and the largest answer accepted.
        trust_env: False: the clients toolfold makes read no proxy setting
            (``HTTP_PROXY``..., the system's) and send to the API directly;
            under httpx and httpx2 this is their own ``trust_env``, which
            also ignores ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``. An injected
            client keeps its own.
        timeout: Seconds, a ``Timeouts``, or None for no limits.
        retry: Retries (a number or a ``RetryPolicy``); a 429 waits the
            ``retryDelay`` the error body gives.
        headers: Extra headers for every request.

    Raises:
        ModelConfigError: No key, or an unknown ``schema_form`` / ``stream_format``.
    """

    def __init__(
        self,
        model_name: str,
        *,
        provider: str = "gemini",
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        schema_form: str | None = None,
        stream_format: str = "sse",
        http_client: Any = None,
        async_http_client: Any = None,
        http: str | None = None,
        limits: HttpLimits | None = None,
        trust_env: bool = True,
        timeout: Any = UNSET,
        retry: Any = UNSET,
        headers: Mapping[str, str | Secret] | None = None,
    ) -> None:
        schema_dialect(model_name, schema_form)  # refuses an unknown form now
        if stream_format not in _STREAM_FORMATS:
            raise ModelConfigError(f"stream_format must be 'sse' or 'json', got {stream_format!r}")
        self.schema_form = schema_form
        self.stream_format = stream_format
        self._stream_format = "sse" if stream_format == "sse" else "json-array"
        self._model_path = f"{API_VERSION}/models/{quote(model_name.removeprefix('models/'))}"
        self.provider_name = provider
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
        return {
            "provider": self.provider_name,
            "schema_form": self.schema_form,
            "stream_format": self.stream_format,
        }

    def _endpoint(self, base_url: str | None) -> Endpoint:
        return Endpoint(
            self.provider_name,
            api_root(base_url or BASE_URL),
            API_KEY_ENV,
            auth_header=KEY_HEADER,
            auth_scheme="",
            error_parser=parse_error,
        )

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body this model sends for ``request``, and what encoding dropped or rewrote."""
        return build_body(request, self.model_name, schema_form=self.schema_form)

    def _path(self, prepared: Prepared, stream: bool) -> str:
        if not stream:
            return f"{self._model_path}:generateContent"
        suffix = "?alt=sse" if self.stream_format == "sse" else ""
        return f"{self._model_path}:streamGenerateContent{suffix}"

    def _parse(self, data: Mapping[str, Any]) -> ModelResponse:
        return parse_response(data, self.provider_name)

    def _usage(self, data: Mapping[str, Any]) -> Usage | None:
        usage = data.get("usageMetadata")
        return parse_usage(usage) if isinstance(usage, Mapping) else None

    def _compiled(self, tool: ToolDefinition) -> CompiledTool:
        return compiled_tool(tool, schema_dialect(self.model_name, self.schema_form))

    def _refine(self, error: ProviderError) -> ProviderError:
        return refine(error)

    def _stream_start(self) -> DecoderState:
        return DecoderState(self.provider_name)

    def _stream_step(
        self, state: DecoderState, item: Any
    ) -> tuple[DecoderState, list[StreamEvent]]:
        if self._stream_format == "sse":
            return decode_event(state, item)
        return decode_chunk(state, item)

    def _stream_end(self, state: DecoderState) -> list[StreamEvent]:
        return decode_end(state)


def make_factory(prefix: str) -> Any:
    """The factory `register_provider` stores for ``prefix`` (``gemini`` or ``google``)."""

    def factory(model_name: str, **options: Any) -> GeminiModel:
        return GeminiModel(model_name, provider=prefix, **options)

    factory.__name__ = f"{prefix}_model"
    return factory
