"""Errors from HTTP, mapped at one boundary into toolfold's `ProviderError` tree.

Two entry points: `status_error` turns a non-2xx response into the right
`ProviderError` child, and `transport_error` turns any httpx exception (or an
OS-level one from a custom client) into `ProviderConnectionError`,
`ProviderTimeoutError` or `StreamError`. An answer that is not HTTP at all (a
bad status line or ``Content-Length``, a line over the parser's limit, an
interim 1xx status as the final answer) is found by `malformed_answer` and
named by `malformed_error`, the same way on every client. `parse_error_body` reads the error bodies of every provider in
providers.md (OpenAI and the compatible family, Mistral's flat shape, Anthropic,
Gemini and its list-wrapped variant, OpenRouter's integer codes); an adapter
with another shape passes its own parser to the transport.
"""

from __future__ import annotations

import functools
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from toolfold._errors import (
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    NotFoundError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamError,
    ToolUseFailedError,
)
from toolfold.adapters._codec import inband_stream_error
from toolfold.adapters._http._keys import (
    MASK,
    Secret,
    mask_cut_tail,
    mask_url_credentials,
    redact,
)
from toolfold.adapters._http._retry import (
    header_values,
    retry_after_seconds,
    should_retry_hint,
)
from toolfold.adapters._http._sse import KEEP as SSE_KEEP
from toolfold.adapters._wire import encodable, loads
from toolfold.toolkit._results import one_line


@attrs.frozen
class ErrorInfo:
    """What a provider said in an error body.

    Attributes:
        message: The provider's own message.
        code: The provider's error code (as text).
        type: The provider's error type or status word (``rate_limit_error``,
            ``RESOURCE_EXHAUSTED``).
        retry_after: A wait the body asked for, in seconds (Gemini ``RetryInfo``).
        failed_generation: Groq's raw model output for ``tool_use_failed``.
        retryable: Overrides the status-based retry decision when not None
            (e.g. False for a per-day quota that will not clear soon).
        quoted: ``message`` is the start of a body that held no message
            (`parse_error_body`), not the provider's words: a parser adding
            its own text to a message leaves such a quote out.
    """

    message: str | None = None
    code: str | None = None
    type: str | None = None
    retry_after: float | None = None
    failed_generation: str | None = None
    retryable: bool | None = None
    quoted: bool = False


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")

#: Characters of a body quoted as its message when no message is found in it, and
#: the most a list of validation errors is written in.
_QUOTED = 500

#: Validation errors of a FastAPI ``detail`` list written out; the others are counted.
_LISTED = 5


def parse_error_body(status: int, body: str, headers: Mapping[str, str]) -> ErrorInfo:
    """Read a provider error body (any of the shapes in providers.md); never raises.

    A body that is not strict JSON (NaN, nesting deeper than the interpreter
    reads), whose fields have unexpected types or that holds no message
    (``"message": null``) still gives an `ErrorInfo`: the fields that could
    be read, and the start of the text as the message when none was found
    (`quoted`, on one line: see `_quote`). The transport passes a body
    already scrubbed of secrets, so its start shows nothing ``body`` does not.
    """
    try:
        data: Any = loads(body) if body else None
    except ValueError:
        return _quote(ErrorInfo(), body)
    if isinstance(data, list) and data and isinstance(data[0], Mapping):
        data = data[0]  # Gemini sometimes wraps the error object in a list
    if not isinstance(data, Mapping):
        return _quote(ErrorInfo(), body)
    try:
        info = _error_info(data)
    except RecursionError:
        return _quote(ErrorInfo(), body)
    return info if info.message else _quote(info, body)


def _quote(info: ErrorInfo, body: str) -> ErrorInfo:
    """``info`` with the start of ``body`` as its message, marked `quoted`: each run
    of whitespace one space, so that a pretty-printed JSON body or an HTML page
    reads on one line, and written as `_shown` has it (any other control
    character escaped, `_QUOTED` characters at most)."""
    # (its first _QUOTED words are that many characters at least: the rest is not split)
    said = _shown(" ".join(body.split(None, _QUOTED)[:_QUOTED]))
    return attrs.evolve(info, message=said or None, quoted=bool(said))


def _shown(text: str) -> str:
    """``text`` on one line (`one_line`: its control characters as visible escapes),
    `_QUOTED` characters at most: when longer, as many as fit before an ellipsis,
    an escape whole or not at all; lone surrogates as U+FFFD (`encodable`)."""
    text = encodable(text[: _QUOTED + 1])  # (no more can show: the rest is not read)
    line = one_line(text)
    if len(line) <= _QUOTED:
        return line
    kept: list[str] = []
    room = _QUOTED - 1
    for char in text:  # (a character is one, or an escape of 4 or 6)
        written = one_line(char)
        room -= len(written)
        if room < 0:
            break
        kept.append(written)
    return "".join(kept) + "\u2026"


def _error_info(data: Mapping[str, Any]) -> ErrorInfo:
    error = data.get("error")
    if isinstance(error, str):
        return ErrorInfo(message=encodable(error), type=_text(data.get("type")))
    if not isinstance(error, Mapping):
        error = data  # Mistral and old vLLM: the fields are at the top level
    return ErrorInfo(
        message=_said(error.get("message")) or _said(data.get("detail")),
        code=_text(error.get("code")),
        type=_text(error.get("type")) or _text(error.get("status")),
        retry_after=_gemini_retry_delay(error.get("details")),
        failed_generation=_text(error.get("failed_generation")),
        retryable=_gemini_retryable(error.get("details")),
    )


def _text(value: Any) -> str | None:
    # Scalars only: an object or array where a message belongs is left out.
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, (bool, int, float)):
        return str(value)
    return None


def _said(value: Any) -> str | None:
    """The message a ``message`` or ``detail`` field holds: text, or validation errors.

    FastAPI's 422 (Mistral's documented ``HTTPValidationError``, vLLM, many
    proxies) is ``{"detail": [{"loc": [...], "msg": ..., "type": ...}]}``,
    and Mistral also sends it as ``{"message": {"detail": [...]}}``: each
    error is written ``body.messages: field required``, joined by ``; ``
    (the first `_LISTED`, then how many more; as `_shown` has it).
    """
    if isinstance(value, Mapping):
        if "msg" in value:
            return _validation_errors([value])
        return _said(value.get("message")) or _said(value.get("detail"))
    if isinstance(value, list):
        return _validation_errors(value)
    return _text(value)


def _validation_errors(errors: list[Any]) -> str | None:
    said = [one for one in map(_validation_error, errors) if one]
    if len(said) > _LISTED:
        said[_LISTED:] = [f"and {len(said) - _LISTED} more"]
    return _shown("; ".join(said))


def _validation_error(error: Any) -> str | None:
    if not isinstance(error, Mapping):
        return _text(error)
    msg = _text(error.get("msg")) or _text(error.get("message")) or _text(error.get("type"))
    loc = error.get("loc")
    where = ".".join(map(str, loc)) if isinstance(loc, list) else _text(loc)
    if not msg:
        return None
    return f"{encodable(where)}: {msg}" if where else msg


def _details(details: Any) -> list[Mapping[str, Any]]:
    if not isinstance(details, list):
        return []
    return [d for d in details if isinstance(d, Mapping)]


def _gemini_retry_delay(details: Any) -> float | None:
    for detail in _details(details):
        if (_text(detail.get("@type")) or "").endswith("google.rpc.RetryInfo"):
            match = _DURATION.match(_text(detail.get("retryDelay")) or "")
            if match:
                return float(match.group(1))
    return None


def _gemini_retryable(details: Any) -> bool | None:
    # A per-day quota does not clear within minutes: retrying it only burns time.
    for detail in _details(details):
        if (_text(detail.get("@type")) or "").endswith("google.rpc.QuotaFailure"):
            for violation in _details(detail.get("violations")):
                quota_id = _text(violation.get("quotaId")) or ""
                quota = quota_id + (_text(violation.get("quotaMetric")) or "")
                if "PerDay" in quota:
                    return False
    return None


# What says a 400 / 413 / 422 is a request longer than the model's context window: an
# error code or type (the main signal), or, for providers that send neither, the
# provider's own message shape (case-insensitive), each from its docs or a reported
# error body. The shapes are anchored where the provider's message starts (or where a
# proxy's prefix ends), so another 400 that only mentions a prompt or a context (a bad
# ``stop`` value, say) stays a BadRequestError.
_WINDOW_CODES = frozenset(
    {
        "context_length_exceeded",  # OpenAI Chat and Responses, Groq, vLLM: error.code
        "exceed_context_size_error",  # llama.cpp's llama-server: error.type
    }
)
_WINDOW_WORDS = re.compile(
    "|".join(
        (
            # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
            r"^prompt is too long:",
            # Anthropic, when max_tokens makes the overflow: "input length and `max_tokens`
            # exceed context limit: 198000 + 8192 > 200000, decrease input length or ..."
            r"^input length and `?max_tokens`? exceed context limit:",
            # Gemini: "The input token count (1200000) exceeds the maximum number of
            # tokens allowed (1048576)."
            r"^the input token count \(\d+\) exceeds the maximum number of tokens",
            # OpenAI, vLLM: "This model's maximum context length is 8192 tokens. However,
            # you requested ..."; vLLM: "'max_tokens' is too large: 5000. This model's ...";
            # OpenRouter: "This endpoint's maximum context length is 163840 tokens. ...";
            # LiteLLM: "litellm.BadRequestError: OpenAIException - This model's ..."
            r"(?:^|\. |- )this (?:model|endpoint).?s maximum context length is \d+ tokens",
            # OpenAI Responses: "Your input exceeds the context window of this model. ..."
            r"^your input exceeds the context window of this model",
            # Mistral: "Prompt contains 40000 tokens ..., too large for model with 32768
            # maximum context length"
            r"^prompt contains \d+ tokens.* too large for model with \d+ maximum context length",
            # Ollama: "prompt too long; exceeded max context length by 100 tokens"
            r"^prompt too long; exceeded (?:max |maximum )?context length",
        )
    ),
    re.IGNORECASE,
)

#: The advice a `ContextWindowExceededError`'s message ends with.
WINDOW_ADVICE = (
    "the model's context window holds the prompt plus the max_tokens asked for the "
    "answer, and asking again fails the same way: shorten the history (drop or "
    "summarise earlier turns, trim large tool results), lower max_tokens, or use a "
    "model with a larger window"
)


def _window_exceeded(info: ErrorInfo) -> bool:
    """True when ``info`` says the request was longer than the model's context window."""
    if info.code in _WINDOW_CODES or info.type in _WINDOW_CODES:
        return True
    return info.message is not None and _WINDOW_WORDS.search(info.message) is not None


def status_error(
    provider: str,
    status: int,
    body: str,
    headers: Mapping[str, str],
    info: ErrorInfo,
    url: str,
    secrets: Iterable[Secret | None] = (),
    proxy: str | None = None,
) -> ProviderError:
    """The `ProviderError` child for an HTTP error response; never raises.

    Args:
        provider: The provider name, for the message.
        status: The HTTP status.
        body: The response body as text (already scrubbed of secrets).
        headers: The response headers.
        info: What `parse_error_body` (or the adapter's parser) read from the body.
        url: The request URL, for the message (a password in it is scrubbed by the caller).
        secrets: What to mask in the ``location`` a 3xx message shows, before it is
            cut (`_location`): the caller scrubs the whole error afterwards, which
            would miss the few characters of a secret that a cut left.
        proxy: The ``host:port`` of the proxy the request went through, when known:
            a 407 is the proxy's answer, never the provider's (`proxy_refused`).
    """
    if status == 407:
        return proxy_refused(
            provider, url, proxy, 407, "Proxy Authentication Required", body=body, headers=headers
        )
    said = f": {info.message}" if info.message else ""
    message = f"{provider} returned HTTP {status} for POST {url}{said}"
    if 300 <= status < 400:
        message += _redirect(status, headers, url, secrets)
    # The verdict the transport's retries follow (`RetryPolicy.status_delay`), kept on
    # the error for whoever retries next (Temporal, a workflow's step): a per-day quota
    # with a retryDelay of 1 s was retried by them without end.
    retryable = should_retry_hint(headers)
    if retryable is None:
        retryable = info.retryable
    retry_after = retry_after_seconds(headers)
    if retry_after is None:
        retry_after = info.retry_after
    if retryable is False:
        retry_after = None  # (no wait after which asking again helps)
        if info.retryable is False:
            message += " (a quota that will not clear soon: asking again fails the same way)"
    common: dict[str, Any] = {
        "provider": provider,
        "status_code": status,
        "body": body,
        "headers": headers,
        "provider_message": info.message,
        "code": info.code,
        "retry_after": retry_after,
        "retryable": retryable,
    }
    if status == 429:
        return RateLimitError(message, **common)
    if status in (400, 413, 422):
        if info.code == "tool_use_failed":
            return ToolUseFailedError(
                message, failed_generation=info.failed_generation or "", **common
            )
        if _window_exceeded(info):
            return ContextWindowExceededError(f"{message} ({WINDOW_ADVICE})", **common)
        return BadRequestError(message, **common)
    if status in (401, 403):
        return AuthenticationError(message, **common)
    if status == 404:
        return NotFoundError(message, **common)
    if status == 408:
        return ProviderTimeoutError(message, **common)
    if status >= 500:
        return ServerError(message, **common)
    return ProviderError(message, **common)


#: The 3xx statuses that redirect: their ``location`` is where the request should go.
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _redirect(
    status: int, headers: Mapping[str, str], url: str, secrets: Iterable[Secret | None]
) -> str:
    """What a 3xx message adds: where it leads, and what to do, as toolfold follows none.

    A 304 is no redirect: it answers a conditional request, which toolfold never
    makes, and says so. A 300 offers choices, its ``location`` the preferred one.
    """
    if status == 304:
        return (
            " (Not Modified: the answer to a conditional request, which toolfold does not "
            "make; a cache or proxy between it and the provider may have sent it)"
        )
    advice = "toolfold follows no redirect: point base_url= at the new address"
    locations = header_values(headers, "location")
    where = _location(locations[0], url, secrets) if locations and locations[0] else None
    if status in _REDIRECTS:
        said = f"redirected to {where}" if where else "a redirect with no location header"
    elif status == 300:
        said = (
            f"multiple choices, the preferred one at {where}"
            if where
            else "multiple choices with no location header"
        )
    else:
        said = f"location: {where}" if where else "no location header"
    return f" ({said}; {advice})"


def _location(location: str, url: str, secrets: Iterable[Secret | None]) -> str:
    """A ``location`` header as a message shows it; never raises.

    Made absolute (against the request's ``url``) and shown with any
    ``user:password@``, query value and fragment masked (`mask_url_credentials`:
    a key may sit in any of them) and ``secrets`` masked before it is cut
    (`_shown`: its control characters as visible escapes, `_QUOTED` characters
    at most; a cut inside a secret would leave its start, which scrubbing the
    error later does not find). One that urllib cannot read (an unclosed ``[``; on
    recent Pythons, a bracketed host that is no IP address) is shown as it came,
    masked alike.
    """
    try:
        shown = urllib.parse.urljoin(url, location)
    except ValueError:
        shown = location
    return _shown(redact(encodable(mask_url_credentials(shown)), secrets))


#: The roots of exceptions `transport_error` maps. Matching is by class name along
#: the MRO, so clients with httpx's API but their own classes (httpx2) map too.
CLIENT_ERROR_MODULES = (
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "h11",
    "anyio",
    "ssl",
    "aiohttp",
)


def is_client_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the HTTP stack (so `transport_error` should map it)."""
    if isinstance(exc, ProviderError):
        # Already mapped (and an OSError too when it is a timeout or a lost connection).
        return False
    if isinstance(exc, (OSError, EOFError)):
        return True
    return type(exc).__module__.split(".")[0] in CLIENT_ERROR_MODULES


def _waited_for_a_slot(exc: BaseException) -> bool:
    """Whether aiohttp's ``ConnectionTimeoutError`` ended the wait for a free connection.

    aiohttp raises it for its ``connect`` timeout (toolfold's ``pool``: the wait
    for a free connection plus the connection) and for ``sock_connect``
    (toolfold's ``connect``) alike; the cancellation its ``connect`` timeout
    made tells where it landed: in ``_wait_for_available_connection``, the
    server was never the matter, the pool was full.
    """
    found: list[BaseException] = []
    stack: list[BaseException | None] = [exc]
    while stack:
        cause = stack.pop()
        if cause is None or any(cause is seen for seen in found) or len(found) > 8:
            continue
        found.append(cause)
        frames = cause.__traceback__
        while frames is not None:
            if frames.tb_frame.f_code.co_name == "_wait_for_available_connection":
                return True
            frames = frames.tb_next
        stack += [cause.__cause__, cause.__context__]
    return False


#: What aiohttp's text of a failed connection says of its TLS setting (``Cannot connect to
#: host h:80 ssl:default [...]``): its default, to verify TLS as usual, is named for a
#: plain ``http://`` URL too, where no TLS is used, and read as if TLS had been tried.
_AIOHTTP_TLS = re.compile(r" ssl:(?:default|True|False|None)(?= \[)")


def transport_error(
    provider: str,
    exc: BaseException,
    url: str,
    *,
    streaming: bool = False,
    answered: bool = False,
    secrets: Iterable[Secret | None] = (),
    proxy: str | None = None,
) -> ProviderError:
    """The `ProviderError` child for an exception raised while talking HTTP.

    Args:
        provider: The provider name, for the message.
        exc: What the HTTP client raised.
        url: The request URL, for the message.
        streaming: The response had started: a lost connection is a cut stream.
        answered: The head of a whole (not streamed) answer had arrived: a lost
            connection cut its body (a `ProviderConnectionError` that says so,
            not "cannot reach": the server was reached and answered).
        secrets: What to mask before a cut: the ``location`` of a 3xx that a
            user's client raised for (``raise_for_status`` in an event hook),
            as `status_error` has it.
        proxy: The ``host:port`` of the proxy the request went to, when known
            (`proxy_refusal`: aiohttp's error names it itself).
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    refused = proxy_refusal(provider, exc, url, proxy)
    if refused is not None:
        return refused
    text = str(exc)
    if "ClientConnectorError" in names and url[:7].lower() == "http://":
        text = _AIOHTTP_TLS.sub("", text, count=1)  # (no TLS on a plain URL)
    detail = f" ({type(exc).__name__}: {text})" if text else f" ({type(exc).__name__})"
    where = f"{provider} at {url}"
    if names & {"ConnectTimeout", "ConnectionTimeoutError"} and not _waited_for_a_slot(exc):
        return ProviderTimeoutError(f"connecting to {where} timed out{detail}", provider=provider)
    if names & {"PoolTimeout", "ConnectionTimeoutError"}:
        return ProviderTimeoutError(
            f"no free connection to {where} within the pool timeout{detail}", provider=provider
        )
    if "WriteTimeout" in names:  # httpx's, httpx2's, and toolfold's own under aiohttp
        return ProviderTimeoutError(
            f"sending the request to {where} timed out: its body was not written within "
            f"the write timeout{detail}",
            provider=provider,
        )
    if names & {"TimeoutException", "ServerTimeoutError"} or isinstance(exc, TimeoutError):
        what = "the stream from" if streaming else "the response from"
        return ProviderTimeoutError(f"{what} {where} timed out{detail}", provider=provider)
    if "HTTPStatusError" in names:
        response: Any = getattr(exc, "response", None)
        status = int(getattr(response, "status_code", 0))
        headers: Mapping[str, str] = getattr(response, "headers", {})
        # httpx's text of a 3xx ends with the raw location (password, query values,
        # control characters, uncut): `status_error` names it masked, cut and escaped.
        info = ErrorInfo() if 300 <= status < 400 else ErrorInfo(message=str(exc))
        return status_error(provider, status, "", headers, info, url, secrets)
    if streaming and (
        names & {"TransportError", "DecodingError", "ClientConnectionError", "ClientPayloadError"}
        or isinstance(exc, (OSError, EOFError))
    ):
        return StreamError(
            f"the stream from {where} was cut before it ended{detail}", provider=provider
        )
    if names & {"TransportError", "ClientConnectionError", "ClientPayloadError"} or isinstance(
        exc, (OSError, EOFError)
    ):
        if answered:
            return ProviderConnectionError(
                f"the answer from {where} was cut before it ended{detail}", provider=provider
            )
        return ProviderConnectionError(f"cannot reach {where}{detail}", provider=provider)
    if "DecodingError" in names:
        return ProviderError(f"cannot decode the response from {where}{detail}", provider=provider)
    if "TooManyRedirects" in names:
        return ProviderError(f"too many redirects from {where}{detail}", provider=provider)
    if "InvalidURL" in names:
        return ProviderConnectionError(f"invalid URL for {where}{detail}", provider=provider)
    if "ClientResponseError" in names:
        # aiohttp's parser refused the answer (with a status 400 no server sent);
        # a genuine status of an injected session's raise_for_status has no such cause.
        broken = malformed_answer(exc)
        if broken is not None:
            if streaming:
                return StreamError(
                    f"the stream from {where} broke HTTP before it ended ({broken})",
                    provider=provider,
                )
            return malformed_error(provider, url, broken)
    # StreamConsumed / StreamClosed / CookieConflict...: a client used the wrong way.
    return ProviderError(f"HTTP client error with {where}{detail}", provider=provider)


def is_proxy_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` says a proxy answered the tunnel's CONNECT with an error status:
    httpx's and httpx2's ``ProxyError``, aiohttp's ``ClientHttpProxyError``."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"ProxyError", "ClientHttpProxyError"})


#: httpcore's text of a refused CONNECT: ``407 Proxy Authentication Required``.
_CONNECT_STATUS = re.compile(r"(\d{3})(?: (.*))?", re.DOTALL)


def proxy_refusal(
    provider: str, exc: BaseException, url: str, proxy: str | None = None
) -> ProviderError | None:
    """The error of a proxy that answered the tunnel's CONNECT with an error status, else None.

    httpx and httpx2 raise ``ProxyError`` (``407 Proxy Authentication Required``:
    a status and its reason, the proxy unnamed: ``proxy`` names it), aiohttp
    ``ClientHttpProxyError`` (with ``status``, ``message`` and the proxy's URL,
    without its password: see `without_credentials`). A ``ProxyError`` with no
    status (a SOCKS proxy's failure) is left to `transport_error`'s other cases.
    The credentials an aiohttp error holds are masked in it (`_mask_proxy_credentials`).
    """
    if not is_proxy_refusal(exc):
        return None
    headers: Mapping[str, str] | None = None
    if isinstance(getattr(exc, "status", None), int):  # aiohttp's
        _mask_proxy_credentials(exc)
        status, reason = int(getattr(exc, "status", 0)), str(getattr(exc, "message", "") or "")
        headers = getattr(exc, "headers", None)
        if proxy is None:
            info = getattr(exc, "request_info", None)
            proxy = host_and_port(str(getattr(info, "real_url", "") or ""))
    else:
        found = _CONNECT_STATUS.fullmatch(str(exc))
        if found is None:
            return None
        status, reason = int(found.group(1)), found.group(2) or ""
    return proxy_refused(provider, url, proxy, status, reason, headers=headers, tunnel=True)


def _mask_proxy_credentials(exc: BaseException) -> None:
    """Mask, in place, the proxy credentials an aiohttp ``ClientHttpProxyError`` holds.

    Its ``request_info`` (also its ``args[0]``) is the CONNECT's: the proxy's URL
    as the session was given it (``http://user:password@host:port``, an injected
    session's: toolfold's own give none, see `without_credentials`), which its
    text shows, and the ``Proxy-Authorization`` header it sent. The error is
    chained under toolfold's, so a traceback showed the password (the transport
    does not know it, to scrub it: `redact_chain`). The request is finished:
    editing what it holds changes nothing sent.
    """
    info = getattr(exc, "request_info", None)
    # aiohttp's RequestInfo: a NamedTuple since 3.11, a frozen attrs class before.
    if info is not None and hasattr(info, "_replace"):
        replace: Any = info._replace
    elif info is not None and attrs.has(type(info)):
        replace = functools.partial(attrs.evolve, info)
    else:
        return
    import multidict  # aiohttp's dependencies
    import yarl

    headers = multidict.CIMultiDict(
        (name, MASK if name.lower() in {"authorization", "proxy-authorization"} else value)
        for name, value in info.headers.items()
    )
    masked = replace(
        url=yarl.URL(mask_url_credentials(str(info.url))),
        real_url=yarl.URL(mask_url_credentials(str(info.real_url))),
        headers=multidict.CIMultiDictProxy(headers),
    )
    exc.request_info = masked  # type: ignore[attr-defined]
    exc.args = (masked, *exc.args[1:])


def proxy_refused(
    provider: str,
    url: str,
    proxy: str | None,
    status: int,
    reason: str,
    *,
    body: str = "",
    headers: Mapping[str, str] | None = None,
    tunnel: bool = False,
) -> ProviderError:
    """The error of a proxy that refused a request with ``status``, the same on every backend.

    A 407 is an `AuthenticationError` (never retried: asking again sends the
    same credentials), whether it answered the CONNECT of an ``https://``
    request (``tunnel``) or a plain ``http://`` request the proxy would have
    forwarded (which read as the provider's own 407). A CONNECT refused
    otherwise is a `ProviderConnectionError` with the proxy's status: a 5xx is
    retried as a connection that could not be made is (the CONNECT failed, so
    nothing reached the provider and asking again cannot bill twice), another
    status is not (``retryable`` False). The proxy is named by its
    ``host:port``, never its user or password.
    """
    by = f"the proxy {proxy}" if proxy else "a proxy"
    said = f"HTTP {status}" + (f" {_shown(reason)}" if reason else "")
    where = f"{provider} at {url}"
    common: dict[str, Any] = {"provider": provider, "status_code": status, "body": body}
    common["headers"] = headers
    if status == 407:
        what = "the tunnel (CONNECT) to" if tunnel else "the request to"
        return AuthenticationError(
            f"{by} refused {what} {where}: {said} (it asks for a user and password it was "
            "not given, or refused those given: give them in the proxy's URL, "
            "HTTPS_PROXY=http://user:password@host:port; asking again fails the same way)",
            retryable=False,
            **common,
        )
    if status >= 500:
        return ProviderConnectionError(
            f"cannot reach {where}: {by} answered its CONNECT with {said} "
            f"(nothing reached {provider})",
            **common,
        )
    return ProviderConnectionError(
        f"cannot reach {where}: {by} refused its CONNECT with {said} "
        "(asking again fails the same way)",
        retryable=False,
        **common,
    )


def host_and_port(url: str) -> str | None:
    """``host:port`` of ``url`` (a proxy's), as an error names it: never a user or password."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


# The packages whose exceptions a client chains under its own (see `malformed_answer`).
_CLIENT_PACKAGES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2", "h11", "aiohttp"})


def malformed_answer(exc: BaseException) -> str | None:
    """What was wrong, when ``exc`` says the server answered with something that is not HTTP.

    The clients' HTTP/1.1 parsers raise their own exception, which the client
    chains under its own: h11's ``RemoteProtocolError`` (under httpx and httpx2:
    ``illegal status line``, ``bad Content-Length``, ``conflicting Content-Length
    headers``, ``Receive buffer too long``...), or one of ``aiohttp.http_exceptions``
    (``BadStatusLine``, ``BadHttpMessage``, ``LineTooLong``...) under aiohttp's
    ``ClientResponseError``. Only the chain is read, so a lost connection (httpcore's
    own ``Server disconnected without sending a response``, aiohttp's
    ``ServerDisconnectedError``) and a cut body (aiohttp's ``ClientPayloadError``) are
    not taken for one. Asked only while the answer's head is awaited: once it
    arrived, h11's error is also how a cut body shows.
    """
    aiohttp = "ClientResponseError" in {cls.__name__ for cls in type(exc).__mro__}
    # The walk stays inside the clients' own exceptions: past them, a ``__context__`` is
    # whatever the caller was handling when it made the call (a malformed answer it
    # caught before), not this call's failure.
    parser: BaseException | None = None  # aiohttp's, the innermost: the most precise
    cause: BaseException | None = exc
    for _ in range(8):  # the clients chain two or three deep
        if cause is None:
            break
        module = type(cause).__module__
        package = module.split(".")[0]
        if package not in _CLIENT_PACKAGES:
            break
        if package == "h11" and type(cause).__name__ == "RemoteProtocolError":
            if "_SWITCH_UPGRADE" in str(cause):  # h11's name for a 101
                return interim_answer(101)
            return f"{type(exc).__name__}: {exc}"
        if aiohttp and module == "aiohttp.http_exceptions":
            parser = cause
        cause = cause.__cause__ or cause.__context__
    if parser is None:
        return None
    said = " ".join(str(getattr(parser, "message", "") or parser).split())
    return f"{type(parser).__name__}: {said}"


def interim_answer(status: int) -> str:
    """What is wrong with an answer whose final status is ``status``, below 200."""
    if status == 101:
        return "HTTP 101 (Switching Protocols) as its answer, though no upgrade was asked for"
    return f"HTTP {status} as its final answer, a status below 200"


def malformed_error(provider: str, url: str, what: str) -> ProviderConnectionError:
    """The error of an answer that is not HTTP; ``what`` says why (`malformed_answer`)."""
    return ProviderConnectionError(
        f"{provider} at {url} sent a malformed HTTP answer: {what}", provider=provider
    )


#: Characters of a non-event-stream body quoted in its message (all of it is ``body``).
_SHOWN = 200


def not_an_event_stream(
    provider: str,
    url: str,
    status: int,
    headers: Mapping[str, str],
    text: str,
    secrets: Iterable[Secret | None] = (),
) -> StreamError:
    """The error of a 2xx answer to a streamed request that was no event stream.

    ``text`` is its start (`SSEDecoder.unread`, at most 2,000 characters): a
    whole JSON answer from a server that ignored ``"stream": true``, a
    proxy's login page. It read as a stream that ended early, with nothing
    to show what came instead. ``secrets`` are redacted before the text is
    cut (200 characters in the message), and a cut that lands inside an
    echoed one masks the start that shows (`mask_cut_tail`), in the message
    and in ``body`` alike: scrubbing the error later finds whole secrets only.
    """
    kept = tuple(secrets)
    body = redact(text, kept)
    if len(text) >= SSE_KEEP:  # the decoder kept only the body's start
        body = mask_cut_tail(body, kept)
    shown = body if len(body) <= _SHOWN else mask_cut_tail(body[:_SHOWN], kept)
    kind = headers.get("content-type") or "none"
    return StreamError(
        f"{provider} answered the streamed POST {url} with HTTP {status} that is not an "
        f"event stream (content-type: {kind}): {shown!r}",
        provider=provider,
        status_code=status,
        body=body,
        headers=headers,
    )


def inband_error(provider: str, event_name: str | None, data: str) -> StreamError | None:
    """A `StreamError` for an error sent inside a 200 stream, else None.

    Catches ``event: error`` (Anthropic), a payload with a top-level ``error``
    (OpenAI, OpenRouter, vLLM, Ollama) and ``{"type": "error"}``. Cheap for the
    common case: the JSON is parsed only when ``"error"`` appears in the text.
    """
    if event_name != "error" and '"error"' not in data:
        return None
    try:
        payload: Any = loads(data)
    except ValueError:
        if event_name != "error":
            return None
        payload = {"error": {"message": data}}
    if not isinstance(payload, Mapping):
        return None
    if event_name != "error" and "error" not in payload and payload.get("type") != "error":
        return None
    info = parse_error_body(200, data, {})
    return inband_stream_error(provider, data, info.message, info.code or info.type)
