"""What every native provider model shares: the transport seam, error scrubbing, the stream loop.

A native adapter (Gemini, OpenAI Responses...) is a pure codec (request builder,
response parser, stream decoder) plus a `ProviderModel` subclass that wires the
codec to the shared `Transport`. The subclass names its endpoint and codec; this
base owns the rest: ``name``/``base_url``/``repr``, closing clients, scrubbing the
key from every error the codec raises, and driving a pure stream decoder over the
transport's events, sync and async, closing the connection however the loop ends.

`RequestReport` is how an encoder says what it could not send as given (a
reasoning block from another provider, a signature only its maker can verify):
the notes are returned by ``model.prepare(request)`` and logged at INFO on the
``toolfold.adapters`` logger when a request is sent, so nothing is dropped silently.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, TypeVar

import attrs

from toolfold._errors import ProviderError
from toolfold.adapters import _wire as wire
from toolfold.adapters._http._transport import Transport
from toolfold.runtime.core._request import ModelRequest
from toolfold.runtime.core._stream import StreamEvent

_log = logging.getLogger("toolfold.adapters")

S = TypeVar("S")
Item = TypeVar("Item")

#: Sentinel for "option not given": the transport's own default applies.
UNSET: Any = object()


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


def transport_options(timeout: Any, retry: Any) -> dict[str, Any]:
    """The ``timeout``/``retry`` keyword arguments a user gave (unset ones left to the transport)."""
    options: dict[str, Any] = {}
    if timeout is not UNSET:
        options["timeout"] = timeout
    if retry is not UNSET:
        options["retry"] = retry
    return options


class ProviderModel:
    """Base of the native models: a codec on the shared `Transport`.

    Subclasses set ``provider_name`` and ``_transport`` and implement `prepare`,
    `_parse` (a whole response body) and `_stream_state` / `_decode` /
    `_decode_end` (the pure stream decoder).
    """

    model_name: str
    provider_name: str
    _transport: Transport

    @property
    def name(self) -> str:
        """``provider:model``, e.g. ``gemini:gemini-2.5-flash``."""
        return f"{self.provider_name}:{self.model_name}"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._transport.base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, base_url={self.base_url!r})"

    # --- what a subclass provides ------------------------------------------

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body this model sends for ``request``, and what encoding changed."""
        raise NotImplementedError

    def _path(self, stream: bool) -> str:
        raise NotImplementedError

    def _parse(self, data: Any) -> Any:
        raise NotImplementedError

    def _refine(self, error: ProviderError) -> ProviderError:
        """A more precise exception for a mapped error (default: the error itself)."""
        return error

    # --- shared ------------------------------------------------------------

    def body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body this model sends for ``request`` (for inspection and tests)."""
        return self.prepare(request, stream=stream).body

    def _send_body(self, request: ModelRequest, stream: bool) -> dict[str, Any]:
        prepared = self.prepare(request, stream=stream)
        if prepared.report.notes and _log.isEnabledFor(logging.INFO):
            for note in prepared.report.notes:
                _log.info("%s request: %s", self.name, note)
        return prepared.body

    def _parse_guarded(self, data: Any) -> Any:
        # A codec crash on an unexpected body is the provider's fault: say so.
        with wire.guarded(self.provider_name, lambda: wire.dumps_raw(data)):
            return self._parse(data)

    def _failed(self, exc: ProviderError) -> ProviderError:
        # One boundary for every error of a call: the codec raises errors from
        # text a server may have filled with the key.
        return self._transport._scrubbed(self._refine(exc))

    async def request_json(self, request: ModelRequest) -> Any:
        """POST the request and parse the whole answer (see `request`)."""
        try:
            body = self._send_body(request, False)
            return self._parse_guarded(await self._transport.post_json(self._path(False), body))
        except ProviderError as exc:
            failed = self._failed(exc)
            if failed is exc:
                raise
            raise failed from exc

    def request_json_sync(self, request: ModelRequest) -> Any:
        """Blocking `request_json`."""
        try:
            body = self._send_body(request, False)
            return self._parse_guarded(self._transport.post_json_sync(self._path(False), body))
        except ProviderError as exc:
            failed = self._failed(exc)
            if failed is exc:
                raise
            raise failed from exc

    async def decode_stream(
        self,
        items: AsyncIterator[Item],
        state: S,
        decode: Callable[[S, Item], tuple[S, list[StreamEvent]]],
        end: Callable[[S], list[StreamEvent]],
        done: Callable[[S], bool],
    ) -> AsyncIterator[StreamEvent]:
        """Drive a pure decoder over the transport's items; the connection is closed however it ends."""
        try:
            try:
                async for item in items:
                    with wire.guarded(self.provider_name, functools.partial(_raw, item)):
                        state, out = decode(state, item)
                    for event in out:
                        yield event
                    if done(state):
                        break
            finally:
                closer = getattr(items, "aclose", None)
                if closer is not None:
                    await closer()
            for event in end(state):
                yield event
        except ProviderError as exc:
            failed = self._failed(exc)
            if failed is exc:
                raise
            raise failed from exc

    def decode_stream_sync(
        self,
        items: Iterator[Item],
        state: S,
        decode: Callable[[S, Item], tuple[S, list[StreamEvent]]],
        end: Callable[[S], list[StreamEvent]],
        done: Callable[[S], bool],
    ) -> Iterator[StreamEvent]:
        """Blocking `decode_stream`."""
        try:
            try:
                for item in items:
                    with wire.guarded(self.provider_name, functools.partial(_raw, item)):
                        state, out = decode(state, item)
                    yield from out
                    if done(state):
                        break
            finally:
                closer = getattr(items, "close", None)
                if closer is not None:
                    closer()
            yield from end(state)
        except ProviderError as exc:
            failed = self._failed(exc)
            if failed is exc:
                raise
            raise failed from exc

    async def aclose(self) -> None:
        """Close the HTTP clients this model made (injected ones stay open)."""
        await self._transport.aclose()

    def close(self) -> None:
        """Close the blocking HTTP client this model made."""
        self._transport.close()


def _raw(item: Any) -> str:
    """A stream item (an SSE event, a decoded JSON value) as text for an error's body."""
    data = getattr(item, "data", None)
    return data if isinstance(data, str) else wire.dumps_raw(item)


def as_object(data: Any, provider: str) -> Mapping[str, Any]:
    """``data`` when it is a JSON object, else a `ProviderError` naming what came instead."""
    if isinstance(data, Mapping):
        return data
    raise ProviderError(
        f"{provider} answered with JSON that is not an object: {str(data)[:200]}",
        provider=provider,
        status_code=200,
    )
