"""`GeminiModel`: the Gemini ``generateContent`` codec on the shared transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from toolfold._errors import ModelConfigError, ProviderError
from toolfold.adapters._dialects import CompiledTool
from toolfold.adapters._http._keys import Secret, resolve_api_key
from toolfold.adapters._http._transport import Transport
from toolfold.adapters._provider_model import (
    UNSET,
    Prepared,
    ProviderModel,
    as_object,
    transport_options,
)
from toolfold.adapters.gemini._errors import parse_error, refine
from toolfold.adapters.gemini._providers import (
    API_KEY_ENV,
    API_VERSION,
    BASE_URL,
    KEY_HEADER,
)
from toolfold.adapters.gemini._request import build_body, compiled_tool, schema_dialect
from toolfold.adapters.gemini._response import parse_response
from toolfold.adapters.gemini._stream import (
    DecoderState,
    JSONArrayDecoder,
    decode_chunk,
    decode_end,
    decode_event,
    is_done,
)
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._stream import StreamEvent

_STREAM_FORMATS = ("sse", "json")


class GeminiModel(ProviderModel):
    """A Gemini model behind ``POST /v1beta/models/{model}:generateContent``.

    Args:
        model_name: The model id, e.g. ``"gemini-2.5-flash"``.
        provider: The prefix it was named with (``"gemini"`` or ``"google"``).
        base_url: The API root, default ``https://generativelanguage.googleapis.com``;
            the adapter adds ``/v1beta/models/...``.
        api_key: The key; by default ``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``.
            Sent in the ``x-goog-api-key`` header, never in the URL.
        schema_form: ``"json-schema"`` (``parametersJsonSchema``) or ``"openapi"``
            (``parameters``); by default chosen from the model (the OpenAPI form
            for models before the 2.5 generation).
        stream_format: ``"sse"`` (``?alt=sse``, the default) or ``"json"`` (the
            streamed JSON array Gemini sends without ``alt``).
        http_client: An ``httpx.AsyncClient`` or ``httpx.Client`` to use.
        async_http_client: An async client, when ``http_client`` is the sync one.
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
        timeout: Any = UNSET,
        retry: Any = UNSET,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        schema_dialect(model_name, schema_form)  # refuses an unknown form now
        if stream_format not in _STREAM_FORMATS:
            raise ModelConfigError(f"stream_format must be 'sse' or 'json', got {stream_format!r}")
        key = resolve_api_key(provider, api_key, env_vars=API_KEY_ENV)
        self.model_name = model_name
        self.provider_name = provider
        self.schema_form = schema_form
        self.stream_format = stream_format
        self._model_path = f"{API_VERSION}/models/{quote(model_name.removeprefix('models/'))}"
        self._transport = Transport(
            provider,
            base_url or BASE_URL,
            key,
            auth_header=KEY_HEADER,
            auth_scheme="",
            headers=headers,
            http_client=http_client,
            async_http_client=async_http_client,
            error_parser=parse_error,
            inband_errors=False,  # the codec reads Gemini's error chunks
            **transport_options(timeout, retry),
        )

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body this model sends for ``request``, and what encoding dropped or rewrote."""
        return build_body(request, self.model_name, schema_form=self.schema_form)

    def compiled_tools(self, request: ModelRequest) -> list[CompiledTool]:
        """How each tool of ``request`` is sent: the dialect chosen, the schema, every rewrite."""
        dialect = schema_dialect(self.model_name, self.schema_form)
        return [compiled_tool(t, dialect) for t in request.tools]

    def _path(self, stream: bool) -> str:
        if not stream:
            return f"{self._model_path}:generateContent"
        suffix = "?alt=sse" if self.stream_format == "sse" else ""
        return f"{self._model_path}:streamGenerateContent{suffix}"

    def _parse(self, data: Any) -> ModelResponse:
        return parse_response(as_object(data, self.provider_name), self.provider_name)

    def _refine(self, error: ProviderError) -> ProviderError:
        return refine(error)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        state = DecoderState(self.provider_name)
        body = self._send_body(request, True)
        if self.stream_format == "sse":
            events = self._transport.stream(self._path(True), body)
            async for event in self.decode_stream(events, state, decode_event, decode_end, is_done):
                yield event
            return
        objects = _aobjects(self._transport.stream_bytes(self._path(True), body))
        async for event in self.decode_stream(objects, state, decode_chunk, decode_end, is_done):
            yield event

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        state = DecoderState(self.provider_name)
        body = self._send_body(request, True)
        if self.stream_format == "sse":
            events = self._transport.stream_sync(self._path(True), body)
            yield from self.decode_stream_sync(events, state, decode_event, decode_end, is_done)
            return
        objects = _objects(self._transport.stream_bytes_sync(self._path(True), body))
        yield from self.decode_stream_sync(objects, state, decode_chunk, decode_end, is_done)


async def _aobjects(chunks: AsyncIterator[bytes]) -> AsyncIterator[Any]:
    decoder = JSONArrayDecoder()
    try:
        async for chunk in chunks:
            for item in decoder.feed(chunk):
                yield item
        for item in decoder.close():
            yield item
    finally:
        closer = getattr(chunks, "aclose", None)
        if closer is not None:
            await closer()


def _objects(chunks: Iterator[bytes]) -> Iterator[Any]:
    decoder = JSONArrayDecoder()
    try:
        for chunk in chunks:
            yield from decoder.feed(chunk)
        yield from decoder.close()
    finally:
        closer = getattr(chunks, "close", None)
        if closer is not None:
            closer()


def make_factory(prefix: str) -> Any:
    """The factory `register_provider` stores for ``prefix`` (``gemini`` or ``google``)."""

    def factory(model_name: str, **options: Any) -> GeminiModel:
        return GeminiModel(model_name, provider=prefix, **options)

    factory.__name__ = f"{prefix}_model"
    return factory
