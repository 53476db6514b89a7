"""`AnthropicModel`: the Messages codec on the shared transport."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from toolfold.adapters._dialects import CompiledTool
from toolfold.adapters._http._checks import base_url_from_env
from toolfold.adapters._http._keys import Secret
from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters._provider_model import Endpoint, ProviderModel
from toolfold.adapters.anthropic._errors import parse_error
from toolfold.adapters.anthropic._provider import (
    API_KEY_ENV,
    API_VERSION,
    BASE_URL,
    BASE_URL_ENV,
    STRICT_BETA,
)
from toolfold.adapters.anthropic._request import compiled_tool, is_beta, prepare
from toolfold.adapters.anthropic._response import parse_response, parse_usage
from toolfold.adapters.anthropic._stream import DecoderState, decode_end, decode_event
from toolfold.runtime._model import Prepared
from toolfold.runtime.core._messages import Usage
from toolfold.runtime.core._request import ModelRequest, ModelResponse, ToolDefinition
from toolfold.runtime.core._stream import StreamEvent

_PATH = "v1/messages"


class AnthropicModel(ProviderModel):
    """A Claude model behind ``POST /v1/messages``.

    Args:
        model_name: Anthropic's model id, e.g. ``"claude-sonnet-4-5"``.
        base_url: The API root (default ``ANTHROPIC_BASE_URL`` when set, as the
            SDK reads it, else ``https://api.anthropic.com``; the adapter adds
            ``/v1/messages``), e.g. for a proxy.
        api_key: The key; by default read from ``ANTHROPIC_API_KEY``. Kept in
            a `Secret`, never printed.
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
        headers: Extra headers for every request (``anthropic-beta``...).

    Raises:
        ModelConfigError: No key given and ``ANTHROPIC_API_KEY`` unset.
    """

    def _endpoint(self, base_url: str | None) -> Endpoint:
        from_env = base_url_from_env(BASE_URL_ENV) if base_url is None else None
        return Endpoint(
            "anthropic",
            base_url or from_env or BASE_URL,
            API_KEY_ENV,
            auth_header="x-api-key",
            auth_scheme="",
            headers={"anthropic-version": API_VERSION},
            error_parser=parse_error,
            base_url_from_env=from_env is not None,
            base_url_option="base_url" if from_env is None else BASE_URL_ENV,
        )

    def _configure(self, headers: Mapping[str, str | Secret]) -> None:
        # Strict tools need the beta flag: sent joined to any betas the user asked for.
        extra = {k.lower(): v for k, v in headers.items()}
        given = extra.get("anthropic-beta", "")
        if isinstance(given, Secret):  # (headers= may hold Secrets)
            given = given.reveal()
        betas = [b.strip() for b in given.split(",") if b.strip()]
        if STRICT_BETA not in betas:
            betas.append(STRICT_BETA)
        self._beta_headers = {"anthropic-beta": ",".join(betas)}

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body for ``request``, the reasoning it left out, and the beta header strict tools need."""
        prepared = prepare(request, self.model_name, stream=stream)
        if not is_beta(prepared.body):
            return prepared
        return attrs.evolve(prepared, headers=self._beta_headers)

    def _path(self, prepared: Prepared, stream: bool) -> str:
        return f"{_PATH}?beta=true" if prepared.headers else _PATH

    def _parse(self, data: Mapping[str, Any]) -> ModelResponse:
        return parse_response(data)

    def _usage(self, data: Mapping[str, Any]) -> Usage | None:
        usage = data.get("usage")
        return parse_usage(usage) if isinstance(usage, Mapping) else None

    def _stream_start(self) -> DecoderState:
        return DecoderState()

    def _stream_step(
        self, state: DecoderState, item: SSEEvent
    ) -> tuple[DecoderState, list[StreamEvent]]:
        return decode_event(state, item.data, item.event)

    def _stream_end(self, state: DecoderState) -> list[StreamEvent]:
        return decode_end(state)

    def _stream_done(self, state: DecoderState) -> bool:
        return state.done

    def _compiled(self, tool: ToolDefinition) -> CompiledTool:
        return compiled_tool(tool)


def anthropic_model(model_name: str, **options: Any) -> AnthropicModel:
    """The factory registered for ``anthropic:<model>``."""
    return AnthropicModel(model_name, **options)
