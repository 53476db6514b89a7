"""`CodecModel`: the part of a provider model that is the same for every native API.

A provider model is a codec (request body out, response body or stream events
in) on the shared `Transport`. This base owns the rest, written once: the four
calls of the `Model` protocol (async and blocking, whole and streamed), closing
the stream early, the one boundary where a `ProviderError` raised anywhere in
a call (the transport's, or the codec's own for an in-band error) has the key
scrubbed from it, and checking a call's arguments against the schema sent.

A subclass gives the codec: `body` (or `prepare`, when encoding can leave
something out), `_path`, `_parse`, the pure stream decoder (`_stream_start`,
`_stream_step`, `_stream_end`, `_stream_done`) and, for a stream of
newline-delimited JSON instead of Server-Sent Events, ``_lines`` (another
framing overrides `_open_stream` / `_open_stream_sync`).

`RequestReport` is how an encoder says what it could not send as given (a
reasoning block from another provider, a signature only its maker can verify):
``model.prepare(request)`` returns it with the body, and each note is logged at
INFO on the ``toolfold.adapters`` logger when the request is sent, so nothing is
dropped silently.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import attrs

from toolfold._errors import ArgumentJSONError, ArgumentValidationError, ProviderError
from toolfold.adapters._dialects import CompiledTool, check_arguments
from toolfold.adapters._http._transport import Transport
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._request import ModelRequest, ModelResponse, ToolDefinition
from toolfold.runtime.core._stream import StreamEvent

_log = logging.getLogger("toolfold.adapters")

#: Sentinel for an option not given: the transport's own default applies.
UNSET: Any = object()


def transport_options(timeout: Any, retry: Any) -> dict[str, Any]:
    """The ``timeout``/``retry`` keyword arguments a user gave (unset ones left to the transport)."""
    options: dict[str, Any] = {}
    if timeout is not UNSET:
        options["timeout"] = timeout
    if retry is not UNSET:
        options["retry"] = retry
    return options


@attrs.frozen
class RequestReport:
    """What encoding a neutral request for one API changed or left out.

    Attributes:
        provider: The provider the request was encoded for.
        notes: One sentence per change, in message order (empty: sent as given).
    """

    provider: str
    notes: tuple[str, ...] = ()


@attrs.frozen
class Prepared:
    """A request body ready to send, with the report of how it was made.

    Attributes:
        body: The JSON body.
        report: What was dropped or rewritten on the way.
    """

    body: dict[str, Any]
    report: RequestReport


class CodecModel:
    """A model behind one provider's native HTTP API (see the module docstring).

    Attributes:
        model_name: The provider's model id.
        provider_name: The model-string prefix (``"anthropic"``).
    """

    _lines = False  # the stream is NDJSON (Ollama), not Server-Sent Events

    def __init__(self, model_name: str, provider_name: str, transport: Transport) -> None:
        self.model_name = model_name
        self.provider_name = provider_name
        self._transport = transport

    # --- what a codec provides --------------------------------------------

    def body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body this model sends for ``request`` (for inspection and tests)."""
        return self.prepare(request, stream=stream).body

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body this model sends for ``request``, and what encoding left out."""
        return Prepared(self.body(request, stream=stream), RequestReport(self.provider_name))

    def _path(self, body: Mapping[str, Any]) -> str:
        raise NotImplementedError

    def _headers(self, body: Mapping[str, Any]) -> Mapping[str, str] | None:
        return None

    def _parse(self, data: Mapping[str, Any]) -> ModelResponse:
        raise NotImplementedError

    def _stream_start(self) -> Any:
        raise NotImplementedError

    def _stream_step(self, state: Any, item: Any) -> tuple[Any, list[StreamEvent]]:
        raise NotImplementedError

    def _stream_end(self, state: Any) -> list[StreamEvent]:
        raise NotImplementedError

    def _stream_done(self, state: Any) -> bool:
        return False

    def _compiled(self, tool: ToolDefinition) -> CompiledTool:
        raise NotImplementedError

    def _refine(self, error: ProviderError) -> ProviderError:
        """A more precise exception for a mapped error (default: the error itself)."""
        return error

    def _open_stream(self, body: dict[str, Any]) -> AsyncIterator[Any]:
        opener = self._transport.stream_lines if self._lines else self._transport.stream
        return opener(self._path(body), body, headers=self._headers(body))

    def _open_stream_sync(self, body: dict[str, Any]) -> Iterator[Any]:
        opener = self._transport.stream_lines_sync if self._lines else self._transport.stream_sync
        return opener(self._path(body), body, headers=self._headers(body))

    # --- the Model protocol -------------------------------------------------

    @property
    def name(self) -> str:
        """``provider:model``, e.g. ``anthropic:claude-sonnet-4-5``."""
        return f"{self.provider_name}:{self.model_name}"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._transport.base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, base_url={self.base_url!r})"

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One response, asynchronously."""
        body = self._send_body(request, False)
        try:
            data = await self._transport.post_json(
                self._path(body), body, headers=self._headers(body)
            )
            return self._parse(self._as_mapping(data))
        except ProviderError as exc:
            failed = self._failed(exc)
            if failed is exc:
                raise
            raise failed from exc

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """One response, blocking."""
        body = self._send_body(request, False)
        try:
            data = self._transport.post_json_sync(
                self._path(body), body, headers=self._headers(body)
            )
            return self._parse(self._as_mapping(data))
        except ProviderError as exc:
            failed = self._failed(exc)
            if failed is exc:
                raise
            raise failed from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        body = self._send_body(request, True)
        state = self._stream_start()
        items = self._open_stream(body)
        try:
            try:
                async for item in items:
                    state, out = self._stream_step(state, item)
                    for event in out:
                        yield event
                    if self._stream_done(state):
                        break
            finally:
                closer = getattr(items, "aclose", None)
                if closer is not None:
                    await closer()
            for event in self._stream_end(state):
                yield event
        except ProviderError as exc:
            failed = self._failed(exc)
            if failed is exc:
                raise
            raise failed from exc

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        body = self._send_body(request, True)
        state = self._stream_start()
        items = self._open_stream_sync(body)
        try:
            try:
                for item in items:
                    state, out = self._stream_step(state, item)
                    yield from out
                    if self._stream_done(state):
                        break
            finally:
                closer = getattr(items, "close", None)
                if closer is not None:
                    closer()
            yield from self._stream_end(state)
        except ProviderError as exc:
            failed = self._failed(exc)
            if failed is exc:
                raise
            raise failed from exc

    def check_arguments(self, request: ModelRequest, call: ToolCallPart) -> Mapping[str, Any]:
        """Validate a call's arguments against the schema this model sent for its tool.

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
                arguments = json.loads(call.arguments_text)
            except ValueError as exc:
                raise ArgumentJSONError(call.name, str(exc), getattr(exc, "pos", 0)) from exc
        return check_arguments(self._compiled(tool), arguments)

    async def aclose(self) -> None:
        """Close the HTTP clients this model made (injected ones stay open)."""
        await self._transport.aclose()

    def close(self) -> None:
        """Close the blocking HTTP client this model made."""
        self._transport.close()

    def _send_body(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        prepared = self.prepare(request, stream=stream)
        if prepared.report.notes and _log.isEnabledFor(logging.INFO):
            for note in prepared.report.notes:
                _log.info("%s request: %s", self.name, note)
        return prepared.body

    def _failed(self, exc: ProviderError) -> ProviderError:
        # One boundary for every error of a call: the codec raises errors from
        # text a server may have filled with the key.
        return self._transport._scrubbed(self._refine(exc))

    def _as_mapping(self, data: Any) -> Mapping[str, Any]:
        if isinstance(data, Mapping):
            return data
        raise ProviderError(
            f"{self.provider_name} answered with JSON that is not an object: {str(data)[:200]}",
            provider=self.provider_name,
            status_code=200,
        )
