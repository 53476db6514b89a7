"""What every provider model shares: the transport seam, error scrubbing, the stream loop.

An adapter (Anthropic, Gemini, OpenAI Responses, Ollama, Chat Completions) is a
pure codec (request builder, response parser, stream decoder) plus a
`ProviderModel` subclass that names its `Endpoint` and hooks the codec in. This
base owns the rest, written once: the constructor's connection options (key,
base URL, clients, limits, timeout, retry, headers) and the `Transport` made
from them, the four calls of the `Model` protocol (async and blocking, whole
and streamed), ``name``/``base_url``/``repr``, closing clients, the one boundary
where a `ProviderError` raised anywhere in a call (the transport's, or the
codec's own for an in-band error) is refined and has the key scrubbed from it,
driving the pure stream decoder over the transport's items (Server-Sent Events,
JSON lines or a streamed JSON array) and closing the connection however the loop
ends, and checking a call's arguments against the schema sent.

`RequestReport` is how an encoder says what it could not send as given (a
reasoning block from another provider, a signature only its maker can verify):
the notes are returned by ``model.prepare(request)`` and logged on the
``toolfold.adapters`` logger when a request is sent, so nothing is dropped
silently: at INFO the first time the model sends that message, at DEBUG when a
later request of the same conversation carries it again (a run's every request
resends its history: a note a step would make a run's log grow with the square
of its steps). A note about a setting is at INFO the first time the model makes
it, then at DEBUG (every request of a run with that setting makes it again).
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import re
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

from toolfold._errors import (
    MalformedResponseError,
    ModelConfigError,
    ProviderError,
    ToolfoldError,
    Unpicklable,
)
from toolfold.adapters import _wire as wire
from toolfold.adapters._call_ids import UniqueStreamCalls, unique_calls
from toolfold.adapters._dialects import CompiledTool, check_arguments
from toolfold.adapters._http._checks import check_base_url, check_mapping
from toolfold.adapters._http._echoes import Echoes
from toolfold.adapters._http._keys import (
    KEY_HEADERS,
    Secret,
    is_credential_header,
    keys_are_deferred,
    keys_unpickled,
    mask_url_credentials,
    quoted_masker,
    resolve_api_key,
    shown_userinfo,
)
from toolfold.adapters._http._retry import HttpLimits
from toolfold.adapters._http._streaming import unechoed
from toolfold.adapters._http._transport import ErrorParser, Transport
from toolfold.adapters._json_array import JSONArrayDecoder
from toolfold.adapters._split_echoes import SplitEchoes, whole_split_echoes
from toolfold.runtime._model import Prepared, RequestReport
from toolfold.runtime.core._arguments import call_arguments
from toolfold.runtime.core._messages import Message, ToolCallPart, Usage
from toolfold.runtime.core._request import (
    ModelRequest,
    ModelResponse,
    ToolDefinition,
    without_cut_calls,
)
from toolfold.runtime.core._stream import StreamEvent, ToolCallStart

_log = logging.getLogger("toolfold.adapters")

#: Sentinel for "option not given": the transport's own default applies.
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
class Endpoint:
    """How one provider's API is reached: all its transport has of its own.

    Attributes:
        provider: The provider name (in errors and logs; whose key it is).
        base_url: The API root requests go to.
        key_env: The environment variables tried, in order, for the key.
        key_required: Refuse to start without a key (False for local servers).
        auth_header: The header that carries the key.
        auth_scheme: The prefix before the key in it (empty for a bare key).
        headers: Headers every request sends (the user's own win).
        error_parser: Reads the provider's error bodies (None: the transport's default).
        trust_env: False for a server on this machine no proxy could reach:
            the clients toolfold makes send to it directly (see `Transport`).
        base_url_from_env: ``base_url`` was read from the environment (no
            base_url given): a pickle does not carry it, the process that
            loads the model reads its own.
        base_url_option: Where ``base_url`` came from, as an error about it
            names it: ``"base_url"``, or the environment variable read
            (``"OPENAI_BASE_URL"``).
    """

    provider: str
    base_url: str
    key_env: tuple[str, ...]
    key_required: bool = True
    auth_header: str = "authorization"
    auth_scheme: str = "Bearer"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    error_parser: ErrorParser | None = None
    trust_env: bool = True
    base_url_from_env: bool = False
    base_url_option: str = "base_url"


StreamFormat = Literal["sse", "lines", "json-array"]

# A request note's message: every encoder starts its notes with the message's position.
_NOTE_POSITION = re.compile(r"messages\[(\d+)\]: ")
# How many notes naming no message a model remembers having logged (they come from
# settings, so a handful; the bound keeps a model serving odd settings from growing).
_MAX_UNBOUND = 256


class LoggedNotes:
    """The notes a model has logged, by the message they are about (held weakly, by identity).

    A run sends its whole history with every request, so the same message is
    noted again on each: `first` tells the first time apart. A message is
    known by identity, not equality (two runs' equal messages are each noted),
    and forgotten when it is freed. A note naming no message (a setting left
    out, which every request of a run with that setting makes again) is known
    by its text: first the first time the model makes it (the record keeps
    `_MAX_UNBOUND` of them; past that, every new such note is a first each time).
    """

    __slots__ = ("_by_message", "_unbound")

    def __init__(self) -> None:
        self._by_message: dict[int, tuple[weakref.ref[Message], set[str]]] = {}
        self._unbound: set[str] = set()

    def first(self, note: str, messages: Sequence[Message]) -> bool:
        """Whether ``note`` (from a request of ``messages``) is logged the first time.

        The first time for its message, or, naming none, for this model.
        """
        match = _NOTE_POSITION.match(note)
        if match is None:
            if note in self._unbound:
                return False
            if len(self._unbound) < _MAX_UNBOUND:
                self._unbound.add(note)
            return True
        position = int(match[1])
        if not position < len(messages):
            return True
        message = messages[position]
        key = id(message)
        known = self._by_message.get(key)
        if known is None or known[0]() is not message:
            try:
                ref = weakref.ref(message, functools.partial(_forget, self._by_message, key))
            except TypeError:  # (a message type without weak references: noted every time)
                return True
            known = self._by_message[key] = (ref, set())
        if note in known[1]:
            return False
        known[1].add(note)
        return True


def _forget(
    by_message: dict[int, tuple[weakref.ref[Message], set[str]]],
    key: int,
    ref: weakref.ref[Message],
) -> None:
    """A noted message was freed: its entry goes (unless a newer message took the id since)."""
    known = by_message.get(key)
    if known is not None and known[0] is ref:
        del by_message[key]


# What `ProviderModel.__init__` sets (a subclass may add its own): an unpickled model
# must have them.
_ATTRIBUTES = frozenset(
    (
        "model_name",
        "provider_name",
        "_logged_notes",
        "_transport",
        "_stays_with",
        "_built_with",
    )
)


class ProviderModel:
    """Base of the provider models: a codec on the shared `Transport` (see the module docstring).

    It implements `toolfold.runtime.ConnectedModel`, what ``toolfold.model(...)``
    gives for a ``provider:model`` string.

    A subclass names its `Endpoint` (`_endpoint`) and gives the codec:
    `prepare`, `_path`, `_parse`, `_compiled`, and the pure stream decoder
    `_stream_start` / `_stream_step` / `_stream_end` (and `_stream_done` when
    the stream says so before it ends). ``_stream_format`` says how the
    transport frames the stream. A subclass with options of its own sets them
    before calling this constructor (its `_endpoint` may read them), and gives
    them back from `_own_options`: a model pickles as its class, name and
    options, and is built again where it is loaded (its key read from that
    process's environment); one given a credential or a client in code refuses.
    """

    model_name: str
    provider_name: str
    _transport: Transport
    _logged_notes: LoggedNotes
    _stream_format: StreamFormat = "sse"

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        http_client: Any = None,
        async_http_client: Any = None,
        http: str | None = None,
        limits: HttpLimits | None = None,
        timeout: Any = UNSET,
        retry: Any = UNSET,
        headers: Mapping[str, str | Secret] | None = None,
        trust_env: bool = True,
    ) -> None:
        self.model_name = model_name
        if type(trust_env) is not bool:
            raise ModelConfigError(f"trust_env must be True or False, got {trust_env!r}")
        if base_url is not None:
            # The URL as given: an empty one would read as none and fall back
            # to the provider's own (see `check_base_url`).
            check_base_url(base_url)
        if headers is not None:
            check_mapping(headers)
        endpoint = self._endpoint(base_url)
        credentials = key_headers(endpoint, headers)
        _refuse_two_keys(endpoint, api_key, credentials)
        refusal: str | None = None
        try:
            key = resolve_api_key(
                endpoint.provider,
                api_key,
                env_vars=endpoint.key_env,
                # A key header of headers= stands in for a missing key: a gateway's
                # (``x-portkey-api-key``), which holds the provider's key itself.
                required=endpoint.key_required and not credentials,
            )
        except ModelConfigError as exc:
            # Under `keys_deferred` (a process that only reads the spec) the
            # model is built, and each of its requests raises this instead.
            if api_key is not None or not keys_are_deferred():
                raise
            key = None
            refusal = (
                f"{exc} (this model was built without its key where only its spec was read, "
                "under keys_deferred: Ray's driver importing a batch's agent; build it again, "
                "its module imported anew, once the key is set)"
            )
        self.provider_name = endpoint.provider
        self._logged_notes = LoggedNotes()
        self._transport = Transport(
            endpoint.provider,
            endpoint.base_url,
            key,
            base_url_option=endpoint.base_url_option,
            refusal=refusal,
            auth_header=endpoint.auth_header,
            auth_scheme=endpoint.auth_scheme,
            headers={**endpoint.headers, **(headers or {})},
            http_client=http_client,
            async_http_client=async_http_client,
            http=http,
            limits=limits,
            trust_env=trust_env and endpoint.trust_env,
            error_parser=endpoint.error_parser,
            # Every codec reads its provider's in-band errors itself (Anthropic's
            # error type as code, Groq's tool_use_failed, Ollama's NDJSON lines...).
            inband_errors=False,
            **transport_options(timeout, retry),
        )
        self._configure(headers or {})
        # (the URL a pickle carries: the one given, or the provider row's, not one
        # read from the environment)
        url = None if endpoint.base_url_from_env else endpoint.base_url
        self._stays_with = _credential_given(
            api_key, http_client, async_http_client, headers, url, endpoint.key_env
        )
        # What a pickle rebuilds the model from (`__reduce__`): its options as given
        # (None too: ``timeout=None`` means no limits), none of them a credential (a
        # model given one does not pickle).
        self._built_with: dict[str, Any] | None = None
        if self._stays_with is None:
            self._built_with = {
                "base_url": base_url,
                "http": http,
                "limits": limits,
                "headers": dict(headers) if headers is not None else None,
                "trust_env": trust_env,
                **transport_options(timeout, retry),
            }

    # --- pickling and copies ----------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        # A model travels (to a Ray actor, another process) as how it was built, and is
        # built again where it lands: its clients and their pool stay behind, and a key
        # read from the environment is read again from that process's own.
        if self._built_with is None:
            raise Unpicklable(f"the model {self.name!r} cannot be pickled: {self._stays_with}")
        options = {**self._built_with, **self._own_options()}
        unbuildable = _unbuildable(type(self), self.model_name, options)
        if unbuildable is not None:
            raise Unpicklable(
                f"the model {self.name!r} cannot be pickled: {unbuildable}. Or build it where "
                "it runs (for Ray: from an import path 'package.module:name' that each actor "
                "imports)"
            )
        return (_rebuilt, (type(self), self.model_name, options))

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Only a model pickled before `__reduce__` gets here (an older toolfold's, its
        # attributes as they were then): its options were not kept, so it is not
        # built again, but refused, saying so, rather than failing on its first request.
        missing = _ATTRIBUTES.difference(state)
        if missing:
            name = f"{state.get('provider_name', '?')}:{state.get('model_name', '?')}"
            raise Unpicklable(
                f"cannot unpickle the model {name!r}: it was pickled by an older toolfold "
                f"and has no {', '.join(sorted(missing))}; build the model again "
                "(toolfold.model(...)) rather than unpickle it (a model this toolfold "
                "pickles is built again from its options where it loads)"
            )
        self.__dict__.update(state)

    def __copy__(self) -> ProviderModel:
        # A copy shares the transport (its clients are a resource, not data), as before
        # `__reduce__` existed: `copy` would otherwise build a new model, or refuse one
        # built with a key.
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        return twin

    def __deepcopy__(self, memo: dict[int, Any]) -> ProviderModel:
        twin = object.__new__(type(self))
        memo[id(self)] = twin
        twin.__dict__.update(copy.deepcopy(self.__dict__, memo))  # (`Transport`: itself)
        return twin

    def _own_options(self) -> dict[str, Any]:
        """The constructor options of a subclass's own, as given (for `__reduce__`).

        A subclass whose ``__init__`` takes options the base's does not gives
        them back here, by keyword: a pickled model is built again as
        ``cls(model_name, **base_options, **own_options)``. One with an
        ``__init__`` of its own and no `_own_options` refuses to pickle.
        """
        return {}

    # --- what a codec provides ------------------------------------------------

    def _endpoint(self, base_url: str | None) -> Endpoint:
        """Where and how this model connects, given the ``base_url`` the user named (if any)."""
        raise NotImplementedError

    def _configure(self, headers: Mapping[str, str | Secret]) -> None:
        """Derive what the codec needs from the user's ``headers`` (default: nothing)."""

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body this model sends for ``request``, and what encoding changed."""
        raise NotImplementedError

    def _path(self, prepared: Prepared, stream: bool) -> str:
        raise NotImplementedError

    def _parse(self, data: Mapping[str, Any]) -> ModelResponse:
        raise NotImplementedError

    def _usage(self, data: Mapping[str, Any]) -> Usage | None:
        """The usage a whole answer ``data`` reports, read alone, or None when it has none.

        Read only for an answer the codec refused (`_whole`): it was billed all
        the same. May raise what a codec raises on a bad field (`_billed` catches it).
        """
        return None

    def _compiled(self, tool: ToolDefinition) -> CompiledTool:
        raise NotImplementedError

    def _refine(self, error: ProviderError) -> ProviderError:
        """A more precise exception for a mapped error (default: the error itself)."""
        return error

    def _stream_start(self) -> Any:
        raise NotImplementedError

    def _stream_step(self, state: Any, item: Any) -> tuple[Any, list[StreamEvent]]:
        raise NotImplementedError

    def _stream_end(self, state: Any) -> list[StreamEvent]:
        raise NotImplementedError

    def _stream_done(self, state: Any) -> bool:
        return False

    def _sent_id(self) -> Callable[[str], str] | None:
        """How the codec rewrites a call id it sends (Mistral's 9 characters), or None: as is."""
        return None

    # --- the Model protocol ----------------------------------------------------

    @property
    def name(self) -> str:
        """``provider:model``, e.g. ``anthropic:claude-sonnet-4-5``."""
        return f"{self.provider_name}:{self.model_name}"

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._transport.base_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, base_url={mask_url_credentials(self.base_url)!r})"

    def secret_masker(self) -> Callable[[str], str] | None:
        """What masks this model's credentials (its API key, a URL password, a credential
        header's value) in a text as ``***``: each secret of `QUOTED_BARE` characters or
        more wherever it is written, a shorter one (``EMPTY``, ``ollama``: a word a tool's
        data may hold) where it is written as a credential (``Bearer ollama``); None when
        it holds none. The function gives a text holding none back as it is, after a
        substring test per credential. A run's loop masks its tools' result and error
        texts so, before they reach the state, the next request and the log."""
        return quoted_masker(getattr(self._transport, "quoted_scrubs", ()))

    def body(self, request: ModelRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body this model sends for ``request`` (for inspection and tests)."""
        return self.prepare(request, stream=stream).body

    def compiled_tools(self, request: ModelRequest) -> list[CompiledTool]:
        """How each tool of ``request`` is sent: the schema, strictness, every rewrite."""
        return [self._compiled(t) for t in request.tools]

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One response, asynchronously."""
        # `_boundary`, spelled out: a plain try costs nothing per call when all is well.
        try:
            path, body, headers = self._outgoing(request, False)
            transport = self._transport
            if type(transport) is Transport:
                # `Transport.post_json`, spelled out: one coroutine fewer per call,
                # held while the answer is awaited (a subclass keeps its own).
                sender = transport._sender
                url, content, sent, deadline = transport._parts(
                    path, body, transport._headers, headers
                )
                try:
                    response, answer = await sender.fetch(url, content, sent, deadline)
                    data = sender.json(answer, response, url)
                except ProviderError as exc:
                    transport.scrub(exc)  # again, now that it is chained to its cause
                    raise
            else:
                data = await transport.post_json(path, body, headers=headers)
            # A cut answer keeps no calls, as a folded stream (`finish_stream`); the run
            # drops them again for any model (idempotent).
            return unique_calls(request, without_cut_calls(self._whole(data)), self._sent_id())
        except ProviderError as exc:
            failed = self._scrubbed(exc)
            if failed is exc:
                raise
            raise failed from exc

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """One response, blocking."""
        try:
            path, body, headers = self._outgoing(request, False)
            data = self._transport.post_json_sync(path, body, headers=headers)
            # A cut answer keeps no calls, as a folded stream (`finish_stream`); the run
            # drops them again for any model (idempotent).
            return unique_calls(request, without_cut_calls(self._whole(data)), self._sent_id())
        except ProviderError as exc:
            failed = self._scrubbed(exc)
            if failed is exc:
                raise
            raise failed from exc

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        with self._boundary():
            items = self._aitems(*self._outgoing(request, True))
            state = self._stream_start()
            split = self._split_echoes()
            unique = UniqueStreamCalls(request, self._sent_id())
            try:
                async for item in items:
                    state, out = self._step(state, item)
                    for event in out if split is None else _fed(split, out):
                        # Only a call's start can carry a taken id: no call per text delta.
                        yield unique(event) if type(event) is ToolCallStart else event
                    if self._stream_done(state):
                        break
                end = self._stream_end(state)  # (raises when the stream stopped short)
            except ProviderError:
                if split is not None:  # what it held back, as far as it is safe to show
                    for event in split.cut():
                        yield unique(event) if type(event) is ToolCallStart else event
                raise
            finally:
                await items.aclose()  # type: ignore[attr-defined]
            for event in end if split is None else [*_fed(split, end), *split.end()]:
                yield unique(event) if type(event) is ToolCallStart else event

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        with self._boundary():
            items = self._items(*self._outgoing(request, True))
            state = self._stream_start()
            split = self._split_echoes()
            unique = UniqueStreamCalls(request, self._sent_id())
            try:
                for item in items:
                    state, out = self._step(state, item)
                    for event in out if split is None else _fed(split, out):
                        # Only a call's start can carry a taken id: no call per text delta.
                        yield unique(event) if type(event) is ToolCallStart else event
                    if self._stream_done(state):
                        break
                end = self._stream_end(state)  # (raises when the stream stopped short)
            except ProviderError:
                if split is not None:  # what it held back, as far as it is safe to show
                    for event in split.cut():
                        yield unique(event) if type(event) is ToolCallStart else event
                raise
            finally:
                items.close()  # type: ignore[attr-defined]
            for event in end if split is None else [*_fed(split, end), *split.end()]:
                yield unique(event) if type(event) is ToolCallStart else event

    def check_arguments(self, request: ModelRequest, call: ToolCallPart) -> Mapping[str, Any]:
        """Validate a call's arguments against the schema this model sent for its tool.

        Where the schema sent differs from the tool's own (strict mode makes
        optional parameters required-and-nullable), valid arguments come back
        as the tool's own schema expects them (those nulls removed again).

        Raises:
            ArgumentJSONError: The argument text is not JSON.
            ArgumentValidationError: The arguments break the schema sent (each
                error with its ``$.path``), or name no tool of the request.
        """
        tool, arguments = call_arguments(request, call)
        return check_arguments(self._compiled(tool), arguments)

    async def aclose(self) -> None:
        """Close the HTTP clients this model made (injected ones stay open)."""
        await self._transport.aclose()

    def close(self) -> None:
        """Close the blocking HTTP client this model made."""
        self._transport.close()

    # --- shared plumbing -------------------------------------------------------

    def _step(self, state: Any, item: Any) -> tuple[Any, list[StreamEvent]]:
        # `guarded`, unrolled: a plain try costs nothing per chunk when all is well.
        try:
            return self._stream_step(state, item)
        except ToolfoldError:
            raise
        except wire.CODEC_ERRORS as exc:
            cause = None if isinstance(exc, wire.WireError) else exc
            raise wire.malformed(self.provider_name, exc, _raw(item)) from cause

    def _whole(self, data: Any) -> ModelResponse:
        """The whole answer ``data`` is, with a secret the model wrote across two of its
        texts masked (`whole_split_echoes`), as a stream's is."""
        try:
            response = self._read(data)
        except MalformedResponseError as exc:
            # A 200 answer was billed, however malformed: its state counts what it
            # reported, as a cut stream's does (it was lost: `Usage()`).
            if exc.usage is None:
                exc.usage = self._billed(data)
            raise
        echoes = _echoes(self._transport)
        return response if echoes is None else whole_split_echoes(response, echoes.pairs)

    def _read(self, data: Any) -> ModelResponse:
        # A body that is no object, or a codec crash on an unexpected one, is the
        # provider's fault: say so. (A codec that checks the whole body itself
        # with the `wire` getters overrides this.)
        body = as_object(data, self.provider_name)
        with wire.guarded(self.provider_name, functools.partial(wire.dumps_raw, body)):
            return self._parse(body)

    def _billed(self, data: Any) -> Usage | None:
        """`_usage` of a refused answer, leniently: None when it cannot be read either."""
        if not isinstance(data, Mapping):
            return None
        try:
            return self._usage(data)
        except (ToolfoldError, *wire.READ_ERRORS, *wire.CODEC_ERRORS):
            return None

    def _outgoing(
        self, request: ModelRequest, stream: bool
    ) -> tuple[str, Any, Mapping[str, str] | None]:
        """``(path, body, headers)`` of one call; the body a dict or its JSON as bytes."""
        prepared = self.prepare(request, stream=stream)
        self._log_notes(prepared.report, request.messages)
        return self._path(prepared, stream), prepared.body, prepared.headers

    def _log_notes(self, report: RequestReport, messages: Sequence[Message]) -> None:
        """Log ``report``'s notes: at INFO the first time this model makes one, else DEBUG."""
        if not report.notes or not _log.isEnabledFor(logging.INFO):
            return
        for note in report.notes:
            first = self._logged_notes.first(note, messages)
            _log.log(logging.INFO if first else logging.DEBUG, "%s request: %s", self.name, note)

    def _split_echoes(self) -> SplitEchoes | None:
        """What joins a secret written across a stream's deltas (see `SplitEchoes`)."""
        echoes = _echoes(self._transport)
        return None if echoes is None else SplitEchoes(echoes.pairs)

    def _boundary(self) -> _Boundary:
        return _Boundary(self)

    def _scrubbed(self, exc: ProviderError) -> ProviderError:
        """``exc`` as the caller gets it: refined by the adapter, the key scrubbed."""
        return self._transport.scrub(self._refine(exc))

    def _aitems(
        self, path: str, body: Any, headers: Mapping[str, str] | None
    ) -> AsyncIterator[Any]:
        transport = self._transport
        if self._stream_format == "lines":
            return transport.stream_lines(path, body, headers=headers)
        if self._stream_format == "json-array":
            return _aobjects(
                transport.stream_bytes(path, body, headers=headers), _echoes(transport)
            )
        return transport.stream(path, body, headers=headers)

    def _items(self, path: str, body: Any, headers: Mapping[str, str] | None) -> Iterator[Any]:
        transport = self._transport
        if self._stream_format == "lines":
            return transport.stream_lines_sync(path, body, headers=headers)
        if self._stream_format == "json-array":
            return _objects(
                transport.stream_bytes_sync(path, body, headers=headers), _echoes(transport)
            )
        return transport.stream_sync(path, body, headers=headers)


class _Boundary:
    """One boundary for every error of a call: the codec raises errors from
    text a server may have filled with the key (a plain class: cheaper per call
    than a generator-based context manager)."""

    __slots__ = ("_model",)

    def __init__(self, model: ProviderModel) -> None:
        self._model = model

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, ProviderError):
            failed = self._model._scrubbed(exc)
            if failed is not exc:
                raise failed from exc


def _rebuilt(cls: type[ProviderModel], model_name: str, options: dict[str, Any]) -> ProviderModel:
    """A pickled model built again (see `ProviderModel.__reduce__`)."""
    with keys_unpickled():  # (a missing key: set it here, api_key= would not pickle)
        return cls(model_name, **options)


def _unbuildable(cls: type[ProviderModel], model_name: str, options: dict[str, Any]) -> str | None:
    """Why ``cls`` could not be built again from ``model_name`` and ``options`` (None: it can).

    Said where the model is pickled, not where it lands (a Ray actor): a
    subclass's constructor with options of its own that `_own_options` does
    not give back (they would come back as their defaults, or fail), or one
    that does not take the options the model is built with.
    """
    try:
        inspect.signature(cls).bind(model_name, **options)
    except TypeError as exc:
        names = ", ".join(options)
        return (
            f"{cls.__qualname__}(model_name, **options) does not take the options it is "
            f"built again with ({names}): {exc}; make its constructor take them, or have "
            "_own_options give its own"
        )
    except ValueError:  # (no signature to read: the load will tell)
        pass
    built = next(c for c in cls.__mro__ if "__init__" in vars(c))
    told = next(c for c in cls.__mro__ if "_own_options" in vars(c))
    if not issubclass(told, built):
        return (
            f"its class {cls.__qualname__} has a constructor of its own ({built.__qualname__}"
            f".__init__) but no _own_options giving its options back, which would be lost: "
            f"define {built.__qualname__}._own_options returning them by keyword"
        )
    return None


def credential_headers(headers: Mapping[str, object] | None) -> list[str]:
    """The names of ``headers`` (a model's ``headers=``) that carry a credential, in order.

    A value given as a `Secret`, or a header whose name says it carries one
    (`is_credential_header`: ``Authorization``, ``api-key``, ``x-portkey-api-key``).
    """
    return [
        name
        for name, value in (headers or {}).items()
        if isinstance(value, Secret) or is_credential_header(name.lower())
    ]


#: The headers that carry an API key whatever the provider (`key_headers`).
_KEY_HEADERS = frozenset({*KEY_HEADERS, "api-key"})  # (and Azure's)


def key_headers(endpoint: Endpoint, headers: Mapping[str, object] | None) -> list[str]:
    """The names of ``headers`` that carry an API key in place of ``endpoint``'s, in order.

    ``Authorization``, ``api-key`` (Azure), ``x-api-key``, ``x-goog-api-key``,
    the provider's own key header, and a gateway's key header, named
    ``...-api-key`` (``x-portkey-api-key``, ``x-litellm-api-key``): they stand
    in for a missing key. Not every credential header (`credential_headers`):
    a session id or an observability tool's key (``Helicone-Auth``) is no key
    of the provider, and one given without a key is still told "no API key".
    """
    return [
        name
        for name in headers or {}
        if (folded := name.lower()) in _KEY_HEADERS
        or folded == endpoint.auth_header
        or folded.endswith("-api-key")
    ]


def _refuse_two_keys(endpoint: Endpoint, api_key: object, credentials: Sequence[str]) -> None:
    """Refuse ``api_key=`` given with a header of ``credentials`` that is the one it is sent in.

    The header won, so the key given was silently never sent (``Authorization``
    for a bearer provider, ``x-api-key`` for Anthropic, ``x-goog-api-key`` for
    Gemini). A key read from the environment gives way to the header, unsent.

    Raises:
        ModelConfigError: Naming both, and no value.
    """
    if api_key is None:
        return
    for name in credentials:
        if name.lower() == endpoint.auth_header:
            raise ModelConfigError(
                f"api_key= and headers={{{name!r}: ...}} both give the credential of provider "
                f"{endpoint.provider!r}, whose key is sent in the {name} header: give one of "
                "them (a gateway's own credential goes in a header of its own)"
            )


def _credential_given(
    api_key: object,
    http_client: object,
    async_http_client: object,
    headers: Mapping[str, object] | None,
    url: str | None,
    key_env: Sequence[str],
) -> str | None:
    """Why a model built with these options cannot be pickled, and what to do (None: it can).

    A credential given to the model itself (a key, a credential header, a
    URL's password) never leaves its process, and a client of the user's own
    is a live object: a model without them is built again where it lands,
    reading its key from that process's environment. ``url``: the base URL
    the pickle would carry (given, or a provider row's; None when read from
    the environment, which the loading process reads again).
    """
    if api_key is not None:
        why = "it was built with api_key=..., and a key never leaves its process"
    elif http_client is not None or async_http_client is not None:
        why = "it was built with an HTTP client of your own (http_client=...), a live object"
    else:
        named = credential_headers(headers)
        if named:
            why = f"its headers= carry a credential ({named[0]!r}), which never leaves its process"
        elif url is not None and shown_userinfo(url) is not None:
            # (a token as the user, ``https://TOKEN@host``, is one too: `mask_url_credentials`)
            why = (
                "its base URL holds credentials before its host (user:password@, or a token "
                "as the user), which never leave its process"
            )
        else:
            return None
    read = f" (each process then reads {' or '.join(key_env)} from its own environment)"
    return (
        f"{why}. Build it without that{read if key_env else ''}, or build it where it runs "
        "(for Ray: from an import path 'package.module:name' that each actor imports)"
    )


def _fed(split: SplitEchoes, events: Iterable[StreamEvent]) -> list[StreamEvent]:
    """``events`` through ``split``: what to pass on (`SplitEchoes.feed`)."""
    out: list[StreamEvent] = []
    for event in events:
        out += split.feed(event)
    return out


def _echoes(transport: Transport) -> Echoes | None:
    """What a streamed array's elements are masked by: a transport's own secrets (a
    subclass's stream is its own)."""
    sender = getattr(transport, "_sender", None)
    echoes = getattr(sender, "echoes", None)
    return echoes if isinstance(echoes, Echoes) and echoes else None


async def _aobjects(chunks: AsyncIterator[bytes], echoes: Echoes | None) -> AsyncIterator[Any]:
    """The items of a streamed JSON array (Gemini's stream without ``alt=sse``), each with
    the key a server echoes in it masked (`Echoes`)."""
    decoder = JSONArrayDecoder(clean=None if echoes is None else unechoed(echoes))
    try:
        async for chunk in chunks:
            for item in decoder.feed(chunk):
                yield item
        for item in decoder.close():
            yield item
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]


def _objects(chunks: Iterator[bytes], echoes: Echoes | None) -> Iterator[Any]:
    """Blocking `_aobjects`."""
    decoder = JSONArrayDecoder(clean=None if echoes is None else unechoed(echoes))
    try:
        for chunk in chunks:
            yield from decoder.feed(chunk)
        yield from decoder.close()
    finally:
        chunks.close()  # type: ignore[attr-defined]


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
