"""`OpenAIResponsesModel`: the OpenAI Responses codec on the shared transport."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfold.adapters._dialects import CompiledTool
from toolfold.adapters._http._checks import base_url_from_env
from toolfold.adapters._http._keys import Secret
from toolfold.adapters._provider_model import Endpoint, ProviderModel
from toolfold.adapters.openai_responses._providers import (
    API_KEY_ENV,
    BASE_URL,
    BASE_URL_ENV,
    PATH,
    PREFIX,
    is_openai,
)
from toolfold.adapters.openai_responses._request import build_body, compiled_tool
from toolfold.adapters.openai_responses._response import parse_response, parse_usage
from toolfold.adapters.openai_responses._stream import (
    DecoderState,
    decode_end,
    decode_event,
)
from toolfold.runtime._model import Prepared
from toolfold.runtime.core._messages import Usage
from toolfold.runtime.core._request import ModelRequest, ModelResponse, ToolDefinition
from toolfold.runtime.core._stream import StreamEvent


class OpenAIResponsesModel(ProviderModel):
    """An OpenAI model behind ``POST /v1/responses``.

    The whole conversation is sent on every request; ``previous_response_id`` is
    never used, so a run stays replayable and can switch provider between steps.

    Args:
        model_name: The model id, e.g. ``"gpt-5-mini"``.
        base_url: The API root; default ``OPENAI_BASE_URL`` when set, as
            openai-python reads it, else ``https://api.openai.com/v1``.
        api_key: The key; by default ``OPENAI_API_KEY``.
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
        retry: Retries (a number or a ``RetryPolicy``); 0 or None never retries.
        headers: Extra headers for every request.

    Raises:
        ModelConfigError: No key.
    """

    _openai: bool

    def _endpoint(self, base_url: str | None) -> Endpoint:
        from_env = base_url_from_env(BASE_URL_ENV) if base_url is None else None
        url = base_url or from_env or BASE_URL
        return Endpoint(
            PREFIX,
            url,
            API_KEY_ENV,
            base_url_from_env=from_env is not None,
            base_url_option="base_url" if from_env is None else BASE_URL_ENV,
        )

    def _configure(self, headers: Mapping[str, str | Secret]) -> None:
        # Settings CreateResponse lacks are refused for OpenAI only (see `build_body`).
        self._openai = is_openai(self.base_url)

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body this model sends for ``request``, and what encoding dropped."""
        return build_body(request, self.model_name, stream=stream, openai=self._openai)

    def _path(self, prepared: Prepared, stream: bool) -> str:
        return PATH

    def _parse(self, data: Mapping[str, Any]) -> ModelResponse:
        return parse_response(data, self.provider_name)

    def _usage(self, data: Mapping[str, Any]) -> Usage | None:
        usage = data.get("usage")
        return parse_usage(usage) if isinstance(usage, Mapping) else None

    def _compiled(self, tool: ToolDefinition) -> CompiledTool:
        return compiled_tool(tool)

    def _stream_start(self) -> DecoderState:
        return DecoderState(self.provider_name)

    def _stream_step(
        self, state: DecoderState, item: Any
    ) -> tuple[DecoderState, list[StreamEvent]]:
        return decode_event(state, item)

    def _stream_end(self, state: DecoderState) -> list[StreamEvent]:
        return decode_end(state)

    def _stream_done(self, state: DecoderState) -> bool:
        return state.done


def responses_model(model_name: str, **options: Any) -> OpenAIResponsesModel:
    """The factory `register_provider` stores for ``openai-responses``."""
    return OpenAIResponsesModel(model_name, **options)
