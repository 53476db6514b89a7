"""The HTTP transport every provider adapter shares: one seam over the HTTP client, async and sync.

A `Transport` posts JSON and returns JSON, or streams Server-Sent Events, NDJSON
lines or raw bytes. It owns what every provider needs the same way: the base URL
and API key (held in a `Secret`, checked when the model is built; the
password of a ``user:password@`` in the base URL is kept as secret), default
headers, `Timeouts` (``total`` bounds the whole call, streamed or not, sync or
async), `HttpLimits` on the answer's size, retries per `RetryPolicy` (the plan
in `_attempts`), and the mapping of every failure to one `ProviderError` child.
Retries happen only before a 2xx answer starts: once it has, a failure is a
`StreamError` (or `ProviderConnectionError`/`ProviderTimeoutError`) for the caller, never a
silent second request (the model would bill and answer twice).

The client underneath is httpx, httpx2 or aiohttp (`_backends`), made and
owned by the transport, or injected by the user and never closed by it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random as _random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, TypeVar

from toolfold._errors import ModelConfigError, ProviderError, Unpicklable
from toolfold.adapters._http._body import ACCEPT_ENCODING
from toolfold.adapters._http._checks import (
    check_base_url,
    check_header_name,
    check_header_value,
    check_headers,
    check_limits,
    check_url_credentials,
)
from toolfold.adapters._http._clients import Clients
from toolfold.adapters._http._http_errors import not_an_event_stream, parse_error_body
from toolfold.adapters._http._json import dumps
from toolfold.adapters._http._keys import (
    QUOTED_BARE,
    Scrubs,
    Secret,
    api_key_secrets,
    header_secrets,
    is_credential_header,
    mask_url_credentials,
    scrubs,
    url_secrets,
)
from toolfold.adapters._http._logs import guard_logs
from toolfold.adapters._http._retry import HttpLimits, RetryPolicy, Timeouts, _count
from toolfold.adapters._http._sender import Call, ErrorParser, Sender, scrub_error
from toolfold.adapters._http._sse import LineDecoder, SSEDecoder, SSEEvent
from toolfold.adapters._http._streaming import BytesDecoder, Decoder, inband_check, unechoed

__all__ = ["ErrorParser", "Transport", "USER_AGENT", "scrub_error"]

USER_AGENT = "toolfold/0.1.0"

_T = TypeVar("_T")


class _Unset:
    def __repr__(self) -> str:
        return "<default>"


_UNSET: Any = _Unset()


# What `Transport.__init__` sets: the attributes an unpickled transport must have.
_ATTRIBUTES = frozenset(
    (
        "provider",
        "base_url",
        "_refusal",
        "_key",
        "_auth_header",
        "_auth_value",
        "_headers",
        "_quoted",
        "_hidden",
        "_stream_headers",
        "_sender",
        "_check",
        "_unechoed",
    )
)


class Transport:
    """POST JSON to one provider, with retries, timeouts, limits and mapped errors.

    Args:
        provider: The provider name, used in error messages (``"openai"``).
        base_url: The API root as the provider's official SDK spells it,
            e.g. ``"https://api.openai.com/v1"``; request paths are joined to it.
        api_key: The key (a string or `Secret`), or None for servers without auth.
        refusal: Why this transport may not send (a model built without its
            key under `keys_deferred`): each call raises it as a
            `ModelConfigError` before anything is sent.
        auth_header: The header that carries the key (``"authorization"``,
            Anthropic ``"x-api-key"``, Gemini ``"x-goog-api-key"``).
        auth_scheme: The prefix before the key in that header (``"Bearer"``;
            empty for a bare key).
        headers: Extra headers sent with every request. A value may be a
            `Secret`; it and the value of any header whose name carries a
            credential (``Authorization``, ``api-key``, ``x-api-key``, names
            with ``key``, ``token``, ``secret``, ``auth``...) are kept and
            scrubbed like the key.
        timeout: `Timeouts`, a number of seconds, or None for no limits. By
            default: an injected client's own timeouts, else `Timeouts()`.
        retry: A `RetryPolicy`, a number of retries, or None/0 to never retry
            (e.g. when a durable-execution engine owns retries).
        limits: `HttpLimits`: pool size and the largest answer accepted.
        http: The client to make: ``"httpx"``, ``"httpx2"`` or ``"aiohttp"``
            (async only; blocking calls then use the default). Default: httpx2
            where installed (Python 3.11+), else httpx.
        http_client: An ``httpx.AsyncClient`` or ``httpx.Client`` (or a client
            with the same API, e.g. httpx2), or an ``aiohttp.ClientSession``,
            to use instead of the transport's own. It serves its own mode only:
            a call in the other mode raises `ModelConfigError` rather than
            bypass it (give both to use both). A blocking httpx/httpx2
            client's connection pools are given the transport's cap on each
            socket read and write, so ``total`` bounds its calls as it does
            the transport's own client's; its requests outside the
            transport's calls keep the client's own timeouts.
        async_http_client: An async client, when ``http_client`` is the sync one.
        trust_env: Whether the clients the transport makes read the proxy
            settings (``HTTPS_PROXY``, ``NO_PROXY``... or the system's) and,
            under httpx, the other variables its own ``trust_env`` reads
            (``SSL_CERT_FILE``...). False sends every request directly: for a
            server on this machine that no proxy could reach (the local
            model's). An injected client keeps its own settings.
        error_parser: Reads the provider's error bodies; default
            `parse_error_body`, which knows every shape in providers.md.
        inband_errors: Raise `StreamError` for error events sent inside a 200
            stream (``event: error``, ``{"error": ...}``).
        sleep: The async sleep used between retries (tests inject a fake).
        sleep_sync: The blocking sleep used between retries.
        random: Returns a float in [0, 1) for the backoff jitter.
        clock: A monotonic clock, for the total timeout.

    Raises:
        ModelConfigError: A bad base URL, key or header (CR/LF/NUL or
            another control character, a key not ASCII), or an unknown
            ``http`` backend; nothing was sent.
    """

    def __init__(
        self,
        provider: str,
        base_url: str,
        api_key: str | Secret | None = None,
        *,
        base_url_option: str = "base_url",
        refusal: str | None = None,
        auth_header: str = "authorization",
        auth_scheme: str = "Bearer",
        headers: Mapping[str, str | Secret] | None = None,
        timeout: Timeouts | float | None = _UNSET,
        retry: RetryPolicy | int | None = _UNSET,
        limits: HttpLimits | None = None,
        http: str | None = None,
        http_client: Any = None,
        async_http_client: Any = None,
        trust_env: bool = True,
        error_parser: ErrorParser | None = None,
        inband_errors: bool = True,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        sleep_sync: Callable[[float], None] | None = None,
        random: Callable[[], float] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        check_base_url(base_url)
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self._refusal = refusal
        self._key = api_key if isinstance(api_key, Secret) or api_key is None else Secret(api_key)
        self._auth_header = auth_header.lower()
        self._auth_value = _auth_value(self._key, auth_header, auth_scheme)
        # The key and the credentials of headers= are not in these dicts: they are
        # added at send time from their Secrets, so neither vars(transport) nor a
        # stored header dict ever shows them.
        self._headers, hidden = _default_headers(headers or {})
        # A short key is scrubbed only where it is a credential (``Bearer k``).
        secrets = (
            *api_key_secrets(self._key, auth_header, auth_scheme),
            *url_secrets(self.base_url),
            *(found for name, value in hidden.items() for found in header_secrets(name, value)),
        )
        # What a text quoting them is masked by (`quoted_scrubs`): Secrets, which show
        # themselves masked (vars() of a transport holds no key).
        self._quoted = (
            *api_key_secrets(self._key, auth_header, auth_scheme, bare=QUOTED_BARE),
            *url_secrets(self.base_url, bare=QUOTED_BARE),
            *(
                found
                for name, value in hidden.items()
                for found in header_secrets(name, value, bare=QUOTED_BARE)
            ),
        )
        keyed = self._auth_value is not None and self._auth_header == "authorization"
        check_url_credentials(
            base_url, keyed or "authorization" in {**self._headers, **hidden}, base_url_option
        )
        if self._auth_value is not None and self._auth_header not in self._headers:
            # A header given by the user (headers= or per request) wins over the key.
            hidden.setdefault(self._auth_header, self._auth_value)
        self._hidden = hidden
        self._stream_headers = {**self._headers, "accept": "text/event-stream"}
        injected = http_client is not None or async_http_client is not None
        timeouts = (None if injected else Timeouts()) if timeout is _UNSET else _timeouts(timeout)
        if limits is None:
            limits = HttpLimits()
        else:
            check_limits(limits)
        self._sender = Sender(
            provider=provider,
            clients=Clients(
                http,
                http_client,
                async_http_client,
                timeouts or Timeouts(),
                limits,
                self.base_url,
                trust_env,
            ),
            retry=_policy(retry),
            timeouts=timeouts,
            limits=limits,
            error_parser=error_parser or parse_error_body,
            secrets=secrets,
            # An injected client may raise its own exception classes (or TypeError
            # on an argument its API spells differently): all of them are mapped.
            foreign=injected,
            sleep=sleep or asyncio.sleep,
            sleep_sync=sleep_sync or time.sleep,
            random=random or _random.random,
            clock=clock or time.monotonic,
        )
        # Out of the HTTP stacks' logs while the sender lives (held by the transport,
        # each call and each stream being read). A client the user gave may send them
        # of its own, after the model and in ways no check sees (headers set later,
        # hooks, params, its transport): its keys stay for good, as all keys did.
        given = http_client is not None or async_http_client is not None
        guard_logs(*secrets, holder=None if given else self._sender)
        self._check = inband_check(provider) if inband_errors else None
        # What a stream's events and lines are masked by (`Echoes`), when there is a secret.
        self._unechoed = unechoed(self._sender.echoes) if self._sender.echoes else None

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A transport is pickled with its model only by a toolfold from before models
        # pickled as their options (`ProviderModel.__reduce__`): one with attributes
        # today's lacks would fail on its first request with a bare AttributeError.
        missing = _ATTRIBUTES.difference(state)
        if missing:
            provider = state.get("provider", "?")
            raise Unpicklable(
                f"cannot unpickle this {provider!r} model: it was pickled by an older "
                f"toolfold, and its transport has no {', '.join(sorted(missing))}; build "
                "the model again (toolfold.model(...)) rather than unpickle it (a model "
                "this toolfold pickles is built again from its options where it loads)"
            )
        self.__dict__.update(state)

    @property
    def quoted_scrubs(self) -> Scrubs:
        """What masks this transport's credentials (the key, the base URL's password, the
        credential headers' values) in a text that quotes them, a tool's result or
        error (`scrub` it with ``starts=False``): as an answer is masked, but a secret
        shorter than `QUOTED_BARE` only where it is written as a credential."""
        return scrubs(self._quoted)

    @property
    def timeouts(self) -> Timeouts | None:
        """The timeouts of each attempt (None: the injected client's own) and the total."""
        return self._sender.timeouts

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy."""
        return self._sender.retry

    @property
    def limits(self) -> HttpLimits:
        """The pool and body limits."""
        return self._sender.limits

    # --- public API -------------------------------------------------------

    @property
    def backend(self) -> str:
        """The client this transport makes for itself: ``"httpx"``, ``"httpx2"`` or ``"aiohttp"``."""
        return self._sender.clients.name

    def url(self, path: str) -> str:
        """The full URL of ``path`` under the base URL."""
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.base_url}/{path.lstrip('/')}"

    async def post_json(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Any:
        """POST ``body`` as JSON and return the parsed JSON answer.

        A key the server writes into the answer is masked (``***``) before
        it is parsed, as in the events of `stream` and the lines of `stream_lines`.

        Args:
            path: The endpoint under the base URL (``"chat/completions"``); may
                carry a query string.
            body: Anything ``json.dumps`` accepts, or JSON already encoded (bytes).
            headers: Extra headers for this request only.

        Raises:
            ProviderError: A child for each failure: `RateLimitError`,
                `AuthenticationError`, `BadRequestError`, `NotFoundError`,
                `ServerError`, `ProviderConnectionError`, `ProviderTimeoutError`;
                `MalformedResponseError` for a body that is not JSON; a plain
                `ProviderError` for one that is too large.
        """
        sender = self._sender
        url, content, sent, deadline = self._parts(path, body, self._headers, headers)
        try:
            response, answer = await sender.fetch(url, content, sent, deadline)
            return sender.json(answer, response, url)
        except ProviderError as exc:
            self.scrub(exc)  # again, now that it is chained to its cause
            raise

    def post_json_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Any:
        """Blocking `post_json`."""
        sender = self._sender
        call = self._call(path, body, self._headers, headers, streaming=False)
        try:
            response = sender.send_sync(call)
            return sender.json(b"".join(sender.body_sync(response, call)), response, call.url)
        except ProviderError as exc:
            self.scrub(exc)  # again, now that it is chained to its cause
            raise

    def stream(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[SSEEvent]:
        """POST ``body`` as JSON and yield the Server-Sent Events of the answer.

        Retries happen only until the response starts. ``[DONE]`` is yielded
        like any event (see `SSEEvent.is_done`); the codec decides to stop.
        Stopping early is fine: close the iterator (``contextlib.aclosing``) to
        give the connection back at once.

        Raises:
            StreamError: The stream was cut, or sent an error in-band.
            ProviderTimeoutError: The stream stalled past the read timeout, or the whole
                call ran past the total timeout.
            ProviderError: As `post_json`, before the stream starts.
        """
        return self.stream_decoded(
            path, body, SSEDecoder(), headers=headers, check=self._check, clean=self._unechoed
        )

    def stream_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[SSEEvent]:
        """Blocking `stream`."""
        return self.stream_decoded_sync(
            path, body, SSEDecoder(), headers=headers, check=self._check, clean=self._unechoed
        )

    def stream_lines(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[str]:
        """Like `stream`, for newline-delimited JSON: yields each non-empty line."""
        return self.stream_decoded(
            path, body, LineDecoder(), headers=headers, accept=None, clean=self._unechoed
        )

    def stream_lines_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[str]:
        """Blocking `stream_lines`."""
        return self.stream_decoded_sync(
            path, body, LineDecoder(), headers=headers, accept=None, clean=self._unechoed
        )

    def stream_bytes(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[bytes]:
        """Like `stream`, yielding the decoded body bytes as they arrive (for custom formats)."""
        return self.stream_decoded(path, body, BytesDecoder(), headers=headers, accept=None)

    def stream_bytes_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[bytes]:
        """Blocking `stream_bytes`."""
        return self.stream_decoded_sync(path, body, BytesDecoder(), headers=headers, accept=None)

    async def stream_decoded(
        self,
        path: str,
        body: Any,
        decoder: Decoder[_T],
        *,
        headers: Mapping[str, str] | None = None,
        accept: str | None = "text/event-stream",
        check: Callable[[_T], None] | None = None,
        clean: Callable[[_T], _T] | None = None,
    ) -> AsyncIterator[_T]:
        """POST ``body`` and yield what ``decoder`` makes of the answer as it arrives.

        Args:
            path: The endpoint under the base URL.
            body: Anything ``json.dumps`` accepts, or JSON already encoded (bytes).
            decoder: Has ``feed(bytes) -> list`` and ``close() -> list``.
            headers: Extra headers for this request only.
            accept: The ``accept`` header (None: ``application/json``).
            check: Called on each item before it is yielded; may raise a
                `ProviderError` (e.g. for an error sent in-band).
            clean: Called on each item first; what it returns is checked and
                yielded instead (`stream` and `stream_lines` mask the key a
                server echoes in an event or a line: `unechoed`).

        Raises:
            ProviderError: As `stream`; every error is scrubbed of the key.
        """
        call = self._stream_call(path, body, headers, accept)
        try:
            response = await self._sender.send(call)
            ended = _end_seen(decoder)  # the SSE decoder saw [DONE]
            async with contextlib.aclosing(self._sender.body(response, call, ended)) as chunks:
                async for chunk in chunks:
                    for item in decoder.feed(chunk):
                        if clean is not None:
                            item = clean(item)
                        if check is not None:
                            check(item)
                        yield item
            for item in decoder.close():
                if clean is not None:
                    item = clean(item)
                if check is not None:
                    check(item)
                yield item
            self._refuse_unread(decoder, call, response)
        except ProviderError as exc:
            self.scrub(exc)
            raise

    def _refuse_unread(self, decoder: object, call: Call, response: Any) -> None:
        """Raise `not_an_event_stream` when toolfold's own SSE decoder found no event stream
        in a 2xx answer (a whole JSON answer, a proxy's page), quoting its start."""
        unread = _unread(decoder)
        if unread is not None:
            raise not_an_event_stream(
                self.provider,
                call.url,
                response.status_code,
                response.headers,
                unread,
                self._sender.secrets,
            )

    def stream_decoded_sync(
        self,
        path: str,
        body: Any,
        decoder: Decoder[_T],
        *,
        headers: Mapping[str, str] | None = None,
        accept: str | None = "text/event-stream",
        check: Callable[[_T], None] | None = None,
        clean: Callable[[_T], _T] | None = None,
    ) -> Iterator[_T]:
        """Blocking `stream_decoded`."""
        call = self._stream_call(path, body, headers, accept)
        try:
            response = self._sender.send_sync(call)
            ended = _end_seen(decoder)
            with contextlib.closing(self._sender.body_sync(response, call, ended)) as chunks:
                for chunk in chunks:
                    for item in decoder.feed(chunk):
                        if clean is not None:
                            item = clean(item)
                        if check is not None:
                            check(item)
                        yield item
            for item in decoder.close():
                if clean is not None:
                    item = clean(item)
                if check is not None:
                    check(item)
                yield item
            self._refuse_unread(decoder, call, response)
        except ProviderError as exc:
            self.scrub(exc)
            raise

    def scrub(self, error: ProviderError) -> ProviderError:
        """``error`` with the key and the base URL's password removed from its texts and chain."""
        return self._sender.scrub(error)

    async def aclose(self) -> None:
        """Close the clients this transport made (injected clients stay open)."""
        await self._sender.clients.aclose()

    def close(self) -> None:
        """Close the blocking client this transport made (injected clients stay open)."""
        self._sender.clients.close()

    async def __aenter__(self) -> Transport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __deepcopy__(self, memo: dict[int, object]) -> Transport:
        # Its clients and their connection pools are a resource, not data: a deep copy of
        # a model (or of an agent) shares them, as it would share an injected client.
        return self

    def __repr__(self) -> str:
        return (
            f"Transport(provider={self.provider!r}, base_url={mask_url_credentials(self.base_url)!r}, "
            f"api_key={self._key!r})"
        )

    # --- internals: the two shells of the retry plan ------------------------

    def _call(
        self,
        path: str,
        body: Any,
        base: dict[str, str],
        extra: Mapping[str, str] | None,
        *,
        streaming: bool,
    ) -> Call:
        return Call(*self._parts(path, body, base, extra), streaming)

    def _parts(
        self, path: str, body: Any, base: dict[str, str], extra: Mapping[str, str] | None
    ) -> tuple[str, bytes, dict[str, str], float | None]:
        """The URL, content, headers and deadline of a call to make now (see `Call`)."""
        if self._refusal is not None:  # built without its key (`keys_deferred`): send nothing
            raise ModelConfigError(self._refusal)
        headers = base
        if extra:
            check_headers(extra)
            headers = base.copy()
            for name, value in extra.items():
                headers[name.lower()] = value
        hidden = self._hidden
        if hidden:  # the key and headers= credentials; a per-request header wins
            if headers is base:
                headers = base.copy()
            for name, secret in hidden.items():
                if name not in headers:
                    headers[name] = secret.reveal()
        content = body if type(body) is bytes else dumps(body)  # a codec's JSON, as is
        # A call to make now: its total deadline starts counting.
        sender = self._sender
        total = sender.timeouts.total if sender.timeouts else None
        deadline = None if total is None else sender.clock() + total
        return self.url(path), content, headers, deadline

    def _stream_call(
        self, path: str, body: Any, headers: Mapping[str, str] | None, accept: str | None
    ) -> Call:
        if accept == "text/event-stream":
            return self._call(path, body, self._stream_headers, headers, streaming=True)
        if accept is not None and not any(name.lower() == "accept" for name in headers or ()):
            headers = {**(headers or {}), "accept": accept}
        return self._call(path, body, self._headers, headers, streaming=True)


def _auth_value(key: Secret | None, header: str, scheme: str) -> Secret | None:
    """The whole auth header value, masked like the key, made once (not per request)."""
    if not key:
        return None
    check_header_value(header, "auth_header", ascii_only=", which a header name cannot have")
    # A header name, not a value: 'x a' or 'x:a' passed the value check and failed at the call.
    check_header_name(header, "auth_header")
    value = key.reveal()
    check_header_value(
        value,
        "api_key",
        secret=True,
        ascii_only=(
            ", which an API key never has (was it copied with a typographic quote or a "
            "letter too many?)"
        ),
    )
    return Secret(f"{scheme} {value}" if scheme else value)


def _default_headers(extra: Mapping[str, str | Secret]) -> tuple[dict[str, str], dict[str, Secret]]:
    """The headers every request sends, and apart, those of ``extra`` that are secrets.

    A value given as a `Secret`, or in a header whose name carries a credential
    (`is_credential_header`: an Azure ``api-key``, an ``Authorization``), is
    kept as a `Secret`: it was shown in errors, tracebacks and DEBUG logs when
    a server echoed it, as the key never was.
    """
    check_headers(extra)
    headers = {
        "content-type": "application/json",
        "accept": "application/json",
        "accept-encoding": ACCEPT_ENCODING,
        "user-agent": USER_AGENT,
    }
    hidden: dict[str, Secret] = {}
    for name, value in extra.items():
        folded = name.lower()
        if isinstance(value, Secret):
            hidden[folded] = value
        elif is_credential_header(folded):
            hidden[folded] = Secret(value)
        else:
            headers[folded] = value
    return headers, hidden


def _policy(retry: RetryPolicy | int | None) -> RetryPolicy:
    """``retry=`` as a `RetryPolicy`; a bad one is a `ModelConfigError` naming the option."""
    if retry is _UNSET:
        return RetryPolicy()
    if retry is None:
        return RetryPolicy(max_retries=0)
    if isinstance(retry, RetryPolicy):
        return retry
    # 2.5 and True were taken as "never retry", -1 was attrs' bare ValueError.
    retry = _count(retry)  # numpy's int64 is integral but no int subclass
    if isinstance(retry, bool) or not isinstance(retry, int) or retry < 0:
        raise ModelConfigError(
            f"retry={retry!r} is not valid: expected a RetryPolicy, a number of retries "
            "(an int >= 0) or None (never retry)"
        )
    return RetryPolicy(max_retries=retry)


def _timeouts(timeout: Any) -> Timeouts:
    """``timeout=`` as `Timeouts`; a bad one is a `ModelConfigError` naming the option."""
    try:
        return Timeouts.of(timeout)
    except (TypeError, ValueError) as exc:
        raise ModelConfigError(f"timeout={timeout!r} is not valid: {exc}") from None


def _end_seen(decoder: object) -> Callable[[], bool] | None:
    """`SSEDecoder.ended` of toolfold's own SSE decoder, None for any other decoder.

    A decoder given to `Transport.stream_decoded` is the user's: an ``ended`` of
    its own may be anything (a flag, a method meaning something else), and
    calling it made a TypeError of a cut stream.
    """
    if isinstance(decoder, SSEDecoder):
        ended = decoder.ended
        if callable(ended):  # a subclass may have made it something else
            return ended
    return None


def _unread(decoder: object) -> str | None:
    """The start of a body toolfold's own SSE decoder found no event stream (`SSEDecoder.unread`)."""
    return decoder.unread() if type(decoder) is SSEDecoder else None
