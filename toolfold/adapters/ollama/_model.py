"""`OllamaModel`: Ollama's native ``/api/chat`` codec on the shared transport."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfold.adapters._dialects import CompiledTool
from toolfold.adapters._provider_model import Endpoint, ProviderModel
from toolfold.adapters.ollama._provider import API_KEY_ENV, host_from_env
from toolfold.adapters.ollama._request import compiled_tool, prepare
from toolfold.adapters.ollama._response import parse_response, parse_usage
from toolfold.adapters.ollama._stream import DecoderState, decode_end, decode_line
from toolfold.runtime._model import Prepared
from toolfold.runtime.core._messages import Usage
from toolfold.runtime.core._request import ModelRequest, ModelResponse, ToolDefinition
from toolfold.runtime.core._stream import StreamEvent

_PATH = "api/chat"


class OllamaModel(ProviderModel):
    """A model served by Ollama, through its native ``POST /api/chat``.

    Args:
        model_name: The model as Ollama names it, e.g. ``"qwen3"`` or ``"llama3.2:3b"``.
        base_url: The server root; default ``OLLAMA_HOST`` when set, else
            ``http://localhost:11434``.
        api_key: For Ollama's cloud or a server behind an authenticating
            proxy (sent as a bearer token); default ``OLLAMA_API_KEY``, and
            none is needed for a local server.
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
    """

    _stream_format = "lines"

    def _endpoint(self, base_url: str | None) -> Endpoint:
        return Endpoint(
            "ollama",
            base_url or host_from_env(),
            API_KEY_ENV,
            key_required=False,
            base_url_from_env=base_url is None,  # (OLLAMA_HOST: read again where it is loaded)
            base_url_option="base_url" if base_url is not None else "OLLAMA_HOST",
        )

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body this model sends for ``request``, and what encoding left out."""
        return prepare(request, self.model_name, stream=stream)

    def _path(self, prepared: Prepared, stream: bool) -> str:
        return _PATH

    def _parse(self, data: Mapping[str, Any]) -> ModelResponse:
        return parse_response(data)

    def _usage(self, data: Mapping[str, Any]) -> Usage | None:
        if "prompt_eval_count" not in data and "eval_count" not in data:
            return None
        return parse_usage(data)

    def _stream_start(self) -> DecoderState:
        return DecoderState()

    def _stream_step(
        self, state: DecoderState, item: str
    ) -> tuple[DecoderState, list[StreamEvent]]:
        return decode_line(state, item)

    def _stream_end(self, state: DecoderState) -> list[StreamEvent]:
        return decode_end(state)

    def _stream_done(self, state: DecoderState) -> bool:
        return state.done

    def _compiled(self, tool: ToolDefinition) -> CompiledTool:
        return compiled_tool(tool)


def ollama_model(model_name: str, **options: Any) -> OllamaModel:
    """The factory registered for ``ollama:<model>``."""
    return OllamaModel(model_name, **options)
