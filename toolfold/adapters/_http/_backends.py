"""The HTTP clients under the transport: httpx, httpx2 and aiohttp, behind one small seam.

A backend sends one POST and hands back the answer as soon as its head
arrived, with the body still to read raw (``status_code``, ``headers``,
``aiter_raw()``/``iter_raw()``, ``aclose()``/``close()``): the transport
decodes and limits the body itself (`BodyReader`). Everything else (retries,
timeouts, error mapping, keys, SSE) is the transport's, one piece of code above
whichever client.

* ``"httpx"`` / ``"httpx2"``: the well-kept clients, sync and async, one pool
  per client with `HttpLimits`, HTTP/1.1, keep-alive, proxies from the
  environment; the transport's own send each request through the client's
  transport layer (`OwnedHttpxBackend`). Any client with httpx's API can be
  injected (its requests go through its ``send``).
* ``"aiohttp"`` (``pip install toolfold[aiohttp]``): async only, the fastest
  under many concurrent runs (bench/bench_http.py); blocking calls of a model
  built with it use the default client.

A blocking call cannot be interrupted from outside, so for the blocking
httpx/httpx2 clients, the transport's own and injected ones, every socket
read and write is capped by the time left before the call's total deadline
(`_deadlines`): a server dripping one byte a second cannot stretch a call
past ``total``.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import logging
import re
import sys
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

from toolfold._errors import ModelConfigError
from toolfold._extras import optional
from toolfold.adapters._http._certificates import aiohttp_ssl_context, shared_ssl_context
from toolfold.adapters._http._checks import utf8_headers
from toolfold.adapters._http._deadlines import cap_socket_io
from toolfold.adapters._http._http_errors import host_and_port
from toolfold.adapters._http._proxies import aiohttp_proxy, system_spares, without_credentials
from toolfold.adapters._http._retry import HttpLimits, Timeouts

T = TypeVar("T")

__all__ = [
    "AiohttpBackend",
    "BACKENDS",
    "ClosedUnderRead",
    "HttpxBackend",
    "OwnedHttpxBackend",
    "READ_IN_PIECES",
    "close_now",
    "close_when_loop_ends",
    "default_backend",
    "loop_mismatch",
    "make_async",
    "make_sync",
    "proxy_address",
]

BACKENDS = ("httpx", "httpx2", "aiohttp")


class ClosedUnderRead(Exception):
    """What the read of a body fails with when its aiohttp session is closed under it
    (`AiohttpBackend.aclose`); the transport raises `Sender.closed_during` for it."""


def default_backend() -> str:
    """The backend used when none is named: httpx2 on Python 3.11+ (a dependency there), else httpx."""
    # By Python version, not by what happens to be installed (another package
    # may pull an old httpx2 onto 3.10): the default is the one toolfold depends on.
    if sys.version_info >= (3, 11) and _installed("httpx2"):
        return "httpx2"
    return "httpx"


def _installed(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def _package(name: str) -> Any:
    """The package of backend ``name``, imported.

    Raises:
        ModelConfigError: It does not import: aiohttp (an extra) as every
            missing extra is said (`optional`: ``pip install
            'toolfold[aiohttp]'``, or its own ImportError when installed
            but failing); httpx2 with how it is installed.
    """
    if name == "aiohttp":
        return optional("aiohttp", "aiohttp", "http='aiohttp'")
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ModelConfigError(f"http={name!r} needs the {name} package{_install(name)}") from None


def _install(name: str) -> str:
    """How the package of backend ``name`` is installed, for the error of a missing one."""
    if name != "httpx2":  # (httpx: a dependency everywhere)
        return ""
    if sys.version_info >= (3, 11):
        return " (a dependency of toolfold on Python 3.11+: pip install 'httpx2>=2.16')"
    return (
        ": toolfold installs it on Python 3.11+ only (httpx2 2.16+ needs 3.11); "
        "on Python 3.10 use http='httpx', the default"
    )


# --- httpx and httpx2 ---------------------------------------------------------------


class HttpxBackend:
    """A client with httpx's API (httpx, httpx2, or the user's own), sync or async.

    A redirect is never followed, even by a client made with
    ``follow_redirects=True``: httpx drops only ``Authorization`` on the way to
    another host, so a key sent as ``x-api-key`` would go along, and the POST
    would be sent again outside the retry policy. The 3xx is the caller's error
    (as with aiohttp, asked with ``allow_redirects=False``).

    Args:
        client: The client.
        owned: Whether the transport made it (and closes it).
        timeouts: The timeouts the client was made with: a request with the
            same ones passes none, and the client's own apply.
    """

    __slots__ = (
        "_defaults",
        "_timeout_class",
        "_timeouts",
        "_url_class",
        "_urls",
        "client",
        "owned",
    )

    def __init__(self, client: Any, *, owned: bool, timeouts: Timeouts | None = None) -> None:
        self.client = client
        self.owned = owned
        self._timeouts = timeouts
        self._defaults = None if timeouts is None else _attempt_timeouts(timeouts)
        # httpx2 refuses httpx.Timeout: hand each client its own package's class.
        package = client_package(client)
        found = getattr(package, "Timeout", None)
        self._timeout_class: Any = found if isinstance(found, type) else None
        found = getattr(package, "URL", None)
        self._url_class: Any = found if isinstance(found, type) else None
        self._urls: dict[str, Any] = {}

    def _request(self, url: str, content: bytes, headers: Mapping[str, str], t: Any) -> Any:
        if _own_timeouts(t, self._timeouts, self._defaults):
            kwargs = {}  # the client's own: no Timeout to build and merge per request
        else:
            kwargs = {"timeout": self._timeout(t)}
        return self.client.build_request(
            "POST", self._url(url), content=content, headers=utf8_headers(headers), **kwargs
        )

    def _url(self, url: str) -> Any:
        # A transport posts to a handful of URLs: parse each once, not per request.
        parsed = self._urls.get(url)
        if parsed is None:
            if self._url_class is None:
                return url
            if len(self._urls) >= 64:
                self._urls.clear()
            parsed = self._urls[url] = self._url_class(url)
        return parsed

    def _timeout(self, t: Timeouts) -> Any:
        fields = {"connect": t.connect, "read": t.read, "write": t.write, "pool": t.pool}
        if self._timeout_class is None:
            return fields
        return self._timeout_class(**fields)

    async def send(
        self, url: str, content: bytes, headers: Mapping[str, str], timeout: Timeouts | None
    ) -> Any:
        """POST; the response once its head arrived (body unread)."""
        request = self._request(url, content, headers, timeout)
        if getattr(self.client, "follow_redirects", False):
            return await self.client.send(request, stream=True, follow_redirects=False)
        return await self.client.send(request, stream=True)

    def send_sync(
        self, url: str, content: bytes, headers: Mapping[str, str], timeout: Timeouts | None
    ) -> Any:
        """Blocking `send`."""
        request = self._request(url, content, headers, timeout)
        if getattr(self.client, "follow_redirects", False):
            return self.client.send(request, stream=True, follow_redirects=False)
        return self.client.send(request, stream=True)

    def is_closed(self) -> bool:
        """Whether the client is closed (by the transport, or its owner)."""
        return getattr(self.client, "is_closed", False) is True

    async def aclose(self) -> None:
        """Close the client if the transport made it."""
        if self.owned:
            await self.client.aclose()

    def close(self) -> None:
        """Close the blocking client if the transport made it."""
        if self.owned:
            self.client.close()


class OwnedHttpxBackend(HttpxBackend):
    """A client the transport made: each request goes to the client's own transport.

    ``Client.send`` spends 130-160 us of CPU per request (bench/README.md) on
    what an owned client never uses: the base URL merge, cookies, the auth
    flow, redirect checks, event hooks. Here the request is built as
    ``build_request`` would build it (the client's default headers, then the
    call's, and its timeouts as the ``timeout`` extension) and handed to the
    client's transport, httpx's documented lower layer (``handle_request`` /
    ``handle_async_request``, the same pool, httpcore and h11 underneath).
    The bytes on the wire are the same; so are the ``.request`` httpx errors
    carry, httpx's log line and the cookies a server sets, sent back on later
    requests. A URL that a proxy from the environment applies to, or that
    carries a user and password, and a closed client go through ``Client.send``.
    """

    __slots__ = (
        "_base",
        "_cookies",
        "_error",
        "_extensions",
        "_log",
        "_request_class",
        "_routes",
        "_transport",
    )

    def __init__(self, client: Any, *, timeouts: Timeouts) -> None:
        super().__init__(client, owned=True, timeouts=timeouts)
        package = client_package(client)
        self._transport: Any = getattr(client, "_transport", None)
        self._request_class: Any = package.Request
        self._error: type[Exception] = package.RequestError
        self._log = logging.getLogger(package.__name__)
        # The client's default headers as (name, lower-case name, value), what
        # build_request starts from and the call's headers replace by name.
        self._base = [(k, k.decode("latin-1").lower(), v) for k, v in client.headers.raw]
        self._extensions = {"timeout": client.timeout.as_dict()}
        self._routes: dict[str, Any] = {}
        self._cookies = False  # whether a server set one: they go in the client's jar

    def _route(self, url: str) -> Any:
        """The parsed URL when a request to it can skip ``Client.send``, else None."""
        try:
            target = self._routes[url]
        except KeyError:
            target = self._url(url)
            find = getattr(self.client, "_transport_for_url", None)
            if self._transport is None or find is None or isinstance(target, str):
                target = None  # a client without what is looked for here: it decides
            elif target.userinfo or find(target) is not self._transport:
                target = None  # basic auth from the URL, or a proxy applies
            if len(self._routes) >= 64:
                self._routes.clear()
            self._routes[url] = target
        return None if self.client.is_closed else target

    def _direct(self, target: Any, content: bytes, headers: Mapping[str, str], t: Any) -> Any:
        names = {name.lower() for name in headers}
        pairs: list[tuple[Any, Any]] = [(k, v) for k, low, v in self._base if low not in names]
        pairs.extend(utf8_headers(headers).items())
        if _own_timeouts(t, self._timeouts, self._defaults):
            extensions = self._extensions
        else:
            extensions = {"timeout": self._timeout(t).as_dict()}
        return self._request_class(
            "POST",
            target,
            content=content,
            headers=pairs,
            cookies=self.client.cookies if self._cookies else None,
            extensions=extensions,
        )

    def _answered(self, request: Any, response: Any) -> None:
        """What ``Client.send`` does with a response an owned client reads."""
        response.request = request
        if "set-cookie" in response.headers:
            self.client.cookies.extract_cookies(response)
            self._cookies = True
        if self._log.isEnabledFor(logging.INFO):  # not even the arguments otherwise
            self._log.info(
                'HTTP Request: %s %s "%s %d %s"',
                request.method,
                request.url,
                response.http_version,
                response.status_code,
                response.reason_phrase,
            )

    async def send(
        self, url: str, content: bytes, headers: Mapping[str, str], timeout: Timeouts | None
    ) -> Any:
        """POST; the response once its head arrived (body unread)."""
        target = self._route(url)
        if target is None:
            return await super().send(url, content, headers, timeout)
        request = self._direct(target, content, headers, timeout)
        try:
            response = await self._transport.handle_async_request(request)
        except self._error as exc:
            exc.request = request  # type: ignore[attr-defined]  # as the client's
            raise
        try:
            self._answered(request, response)
        except BaseException:
            await response.aclose()
            raise
        return response

    def send_sync(
        self, url: str, content: bytes, headers: Mapping[str, str], timeout: Timeouts | None
    ) -> Any:
        """Blocking `send`."""
        target = self._route(url)
        if target is None:
            return super().send_sync(url, content, headers, timeout)
        request = self._direct(target, content, headers, timeout)
        try:
            response = self._transport.handle_request(request)
        except self._error as exc:
            exc.request = request  # type: ignore[attr-defined]  # as the client's
            raise
        try:
            self._answered(request, response)
        except BaseException:
            response.close()
            raise
        return response


def make_sync(
    name: str,
    timeouts: Timeouts,
    limits: HttpLimits,
    url: str,
    trust_env: bool = True,
) -> HttpxBackend:
    """The blocking client a transport makes for itself (aiohttp has none: the default's).

    ``url``: the base URL requests go to (see `_owned_client`); ``trust_env``:
    False reads no proxy settings (see `Transport`).
    """
    if name == "aiohttp":
        name = default_backend()
    package = _package(name)
    spared = trust_env and system_spares(url, urllib.request.getproxies())
    client = _owned_client(package, package.Client, timeouts, limits, url, trust_env, spared)
    cap_socket_io(client)  # the total deadline, kept while the head is read too
    return OwnedHttpxBackend(client, timeouts=timeouts)


async def make_async(
    name: str, timeouts: Timeouts, limits: HttpLimits, url: str, trust_env: bool = True
) -> Any:
    """The async client a transport makes for itself, on the running loop, for requests to ``url``.

    The proxy settings that may block are read in a worker thread, and only
    when some proxy is set: the system's exceptions may resolve the host (on
    Windows; on macOS for an address range), and a proxy's credentials may
    come from a netrc file.
    """
    proxies = urllib.request.getproxies() if trust_env else {}  # (read once, passed on)
    # (``no`` alone, NO_PROXY without a proxy, has nothing to read)
    proxied = any(value for key, value in proxies.items() if key != "no")
    if name == "aiohttp":
        _package(name)  # (first: reading a proxy imports yarl, which comes with aiohttp)
        proxy = await _off_loop(_aiohttp_proxy, url, proxies) if proxied else (None, None)
        return _make_aiohttp(timeouts, limits, *proxy, ssl=aiohttp_ssl_context(trust_env))
    package = _package(name)
    spared = proxied and await _off_loop(system_spares, url, proxies)
    client = _owned_client(package, package.AsyncClient, timeouts, limits, url, trust_env, spared)
    return OwnedHttpxBackend(client, timeouts=timeouts)


async def _off_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in the loop's default executor; inline if that executor is shut down."""
    loop = asyncio.get_running_loop()
    try:
        running = loop.run_in_executor(None, function, *args)
    except RuntimeError:  # (`loop.shutdown_default_executor()` was called): block briefly
        return function(*args)
    return await running


def _owned_client(
    package: Any,
    make: Any,
    timeouts: Timeouts,
    limits: HttpLimits,
    url: str,
    trust_env: bool,
    spared: bool,
) -> Any:
    """An httpx/httpx2 client of the transport's own; a proxy it cannot use is a `ModelConfigError`.

    Its mounts send directly what the other backends send directly and httpx
    alone would send through a proxy: the hosts ``NO_PROXY`` names with a
    leading dot (`_dotted_no_proxy`), and ``url``'s host when ``spared`` (the
    system's proxy settings spare it, or an address range ``NO_PROXY`` names
    holds it: `system_spares`), as the owned aiohttp session and urllib do. With ``trust_env`` False it reads no proxy (nor
    any other) setting from the environment: httpx's own ``trust_env``.

    httpx reads the proxy variables when the client is made and raises
    ValueError for a scheme it lacks (``ftp://``) and ImportError for SOCKS
    without ``socksio``; a ``NO_PROXY`` host it cannot read is its InvalidURL
    (httpx: ``.ä_b.de``) or an IDNA error, a ValueError (httpx2: any name in its
    ``xn--`` form, ``.xn--bcher-kva.de`` as well as ``.xn--zz.de``: its pattern
    for the hosts under it, ``*.xn--bcher-kva.de``, is decoded as IDNA and ``*``
    is no IDNA label; nothing toolfold mounts can stand in for it, see
    `_idna_entries`).
    """
    verify = shared_ssl_context(package, trust_env)  # (its ModelConfigError is no proxy's)
    try:
        return make(
            limits=_pool_limits(package, limits),
            timeout=_package_timeout(package, timeouts),
            verify=verify,
            http1=True,
            follow_redirects=False,
            trust_env=trust_env,
            mounts=_direct_mounts(package, url, spared) if trust_env else None,
        )
    except (ValueError, ImportError, package.InvalidURL) as exc:
        said = (
            "the HTTP client cannot use the proxy settings in the environment "
            f"(HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY): {exc}"
        )
        names = _idna_entries() if isinstance(exc, UnicodeError) else ""  # idna's errors
        if names:
            said += (
                f"; {package.__name__} cannot make a client while NO_PROXY names a domain "
                f"in its xn-- form ({names}), whatever host it sends to: use http='httpx'"
            )
        raise ModelConfigError(said) from exc


def _idna_entries() -> str:
    """The ``NO_PROXY`` entries in IDNA's ASCII form (``xn--`` labels), for an error.

    httpx2 maps ``.xn--bcher-kva.de`` to the mount pattern ``all://*.xn--bcher-kva.de``;
    reading a pattern's host, its URL decodes any host holding ``xn--`` with
    ``idna.decode``, which refuses the ``*`` label (``InvalidCodepoint``, an
    ``IDNAError``). Its check of each NO_PROXY pattern catches only its InvalidURL,
    so the client is never made, whatever host it would send to. The name in
    Unicode (``.bücher.de``) cannot stand in: httpx2 encodes ``*.bücher.de`` as
    IDNA, gets InvalidURL, and drops the entry without a word. Nor can a mount
    of toolfold's: no httpx2 pattern names the hosts under an international
    domain, in either spelling (only the domain itself, ``all://xn--bcher-kva.de``).
    """
    entries = urllib.request.getproxies().get("no", "")  # what httpx2 reads
    return ", ".join(e.strip() for e in entries.split(",") if "xn--" in e.lower())


def _direct_mounts(package: Any, url: str, spared: bool) -> dict[str, None] | None:
    """The mounts sending hosts directly (see `_owned_client`), or None for none."""
    mounts = _dotted_no_proxy(package) or {}
    if spared:
        # The host and port as the package reads the requests' URLs: a default
        # port given (``:443``) is none, an IPv6 address keeps its case.
        try:
            parsed = package.URL(url)
            host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
            key = f"all://{host}" if parsed.port is None else f"all://{host}:{parsed.port}"
            _ = package.URL(key).host  # what the client's mount pattern reads
        except Exception:  # a host the package cannot read: it cannot send to it either
            pass
        else:
            mounts[key] = None
    return mounts or None


def _dotted_no_proxy(package: Any) -> dict[str, None] | None:
    """Mounts sparing ``example.com`` itself from the proxy when ``NO_PROXY`` names ``.example.com``.

    curl drops an entry's leading dot ("to match previous behaviour", lib/noproxy.c):
    ``.example.com`` spares example.com and every host under it, as it does in the
    standard library's ``proxy_bypass_environment`` (so under aiohttp, `aiohttp_proxy`)
    and in requests. httpx spares only the hosts under it: example.com itself went
    through the proxy under httpx and directly under aiohttp. A None mount sends
    the host's requests directly, as httpx's own ``NO_PROXY`` mounts do.

    An entry whose name ``package``'s URL class refuses is left out: no URL the
    client sends has that host, and the mount made of it stopped the client being
    made (httpx: ``.xn--zz.de``, an IDNA error; httpx2: ``.ä_b.de``, its InvalidURL),
    though the package itself reads the entry, or skips it.
    """
    entries = urllib.request.getproxies().get("no", "")  # what httpx reads
    if "." not in entries:
        return None
    bare: dict[str, None] = {}
    for entry in entries.split(","):
        name = entry.strip()
        if name[:1] == "." and _HOST_ENTRY.fullmatch(name[1:]):  # a host or host:port
            key = f"all://{name[1:]}"
            try:
                _ = package.URL(key).host  # what the client's mount pattern reads (IDNA decoded)
            except Exception:  # each package refuses a host its own way
                continue
            bare[key] = None
    return bare or None


_HOST_ENTRY = re.compile(r"[\w-]+(\.[\w-]+)*(:\d+)?")


def _pool_limits(package: Any, limits: HttpLimits) -> Any:
    return package.Limits(
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive,
        keepalive_expiry=limits.keepalive_expiry,
    )


def _package_timeout(package: Any, t: Timeouts) -> Any:
    return package.Timeout(connect=t.connect, read=t.read, write=t.write, pool=t.pool)


def _attempt_timeouts(t: Timeouts) -> tuple[float | None, ...]:
    """What a client applies to one attempt (``total`` is the transport's own)."""
    return (t.connect, t.read, t.write, t.pool)


def _own_timeouts(
    t: Timeouts | None, made_with: Timeouts | None, defaults: tuple[float | None, ...] | None
) -> bool:
    """Whether an attempt with timeouts ``t`` needs none of its own: the client's apply."""
    return t is None or t is made_with or _attempt_timeouts(t) == defaults


# --- aiohttp --------------------------------------------------------------------------

# Bytes aiohttp queues before it waits for the connection to drain (``StreamWriter.write``'s
# limit and asyncio's high-water mark): only a larger body's write can wait (`TimedBody`).
WAITS_ABOVE = 0x10000


class AiohttpBackend:
    """An ``aiohttp.ClientSession`` (async only).

    Args:
        session: The session.
        owned: Whether the transport made it (and closes it): then its
            responses are `_aiohttp_owned.Reply`, with the transport's names.
        timeouts: The timeouts the session was made with: a request with the
            same ones passes none, and the session's own apply.
        proxy: The proxy each request goes through (an owned session's, read
            from the environment or the system's settings when it was made),
            or None; without its user and password, which are in
            ``proxy_headers``.
        proxy_headers: The proxy's ``Proxy-Authorization``, or None.
    """

    __slots__ = (
        "_aiohttp",
        "_defaults",
        "_post",
        "_proxy",
        "_proxy_headers",
        "_timed_body",
        "_timeouts",
        "owned",
        "session",
    )

    def __init__(
        self,
        session: Any,
        *,
        owned: bool,
        timeouts: Timeouts | None = None,
        proxy: str | None = None,
        proxy_headers: Mapping[str, str] | None = None,
    ) -> None:
        import aiohttp

        self.session, self.owned, self._aiohttp = session, owned, aiohttp
        self._timeouts, self._proxy, self._proxy_headers = timeouts, proxy, proxy_headers
        self._defaults = None if timeouts is None else _attempt_timeouts(timeouts)
        self._post: Callable[..., Any] = _posting(session) if owned else session.post
        # (held here: its module imports aiohttp, which a transport under httpx never loads)
        from toolfold.adapters._http._aiohttp_body import TimedBody

        self._timed_body = TimedBody

    def send(
        self, url: str, content: bytes, headers: Mapping[str, str], timeout: Timeouts | None
    ) -> Awaitable[Any]:
        """POST; awaited, the response once its head arrived (body unread, not decompressed).

        A plain function handing back aiohttp's own request, which the caller
        awaits at once: no coroutine of ours in between while the answer is
        awaited (a session the transport made answers with `Reply` itself, and
        hands back its request's coroutine, see `_posting`).
        """
        options: Mapping[str, Any] = _NO_OPTIONS
        # (the usual attempt has the session's own timeouts: known without a call)
        if (
            timeout is not None
            and timeout is not self._timeouts
            and not _own_timeouts(timeout, self._timeouts, self._defaults)
        ):
            options = {"timeout": _aiohttp_timeout(self._aiohttp, timeout)}
        data: Any = content
        if len(content) > WAITS_ABOVE:
            # aiohttp has no write timeout: the body's write is bounded here
            # (`TimedBody`), and dropped with its connection if cancelled mid-body.
            data = self._timed_body(content, None if timeout is None else timeout.write)
        if self._proxy_headers is not None and url[:5].lower() == "http:":
            # aiohttp sends `proxy_headers` in the CONNECT of an https request
            # only: a plain-HTTP one, which the proxy forwards, carries them itself.
            headers = {**headers, **self._proxy_headers}
        request = self._post(
            url,
            data=data,
            headers=headers,
            allow_redirects=False,
            auto_decompress=False,
            raise_for_status=False,
            proxy=self._proxy,
            proxy_headers=self._proxy_headers,
            **options,
        )
        if self.owned:
            return request  # type: ignore[no-any-return]
        return _wrapped(request)

    def is_closed(self) -> bool:
        """Whether the session is closed (by the transport, or its owner)."""
        return getattr(self.session, "closed", False) is True

    async def aclose(self) -> None:
        """Close the session if the transport made it, failing the bodies still read.

        aiohttp detaches the body a connection is reading when it closes that
        connection (``ResponseHandler.close``): its reader then waits for good,
        whatever the read timeout (which it stops too). Each such body is
        failed first (`ClosedUnderRead`), so a call reading it ends, as one
        awaiting its head does, with the error saying the model was closed.
        """
        if self.owned:
            for body in _bodies_read(self.session):
                if not body.is_eof() and body.exception() is None:
                    body.set_exception(
                        ClosedUnderRead("the session was closed while this body was read")
                    )
            await self.session.close()


# What asyncio (and aiohttp) raise when something of one event loop is used on another.
_OTHER_LOOP = (
    "Event loop is closed",
    "attached to a different loop",
    "bound to a different event loop",
    "should be used inside a task",
)


def loop_mismatch(backend: Any, exc: BaseException) -> str | None:
    """Why an injected async client failed with ``exc``, when it is that the running event
    loop is not the one the client (or its pooled connections) belongs to; else None.

    An aiohttp session knows its loop (its ``_loop``, checked, not assumed); an
    httpx/httpx2 ``AsyncClient`` does not, and is known by the error asyncio
    raises for its connections of a loop that has closed or is another.
    """
    running = asyncio._get_running_loop()
    if running is None:  # (a blocking call's client)
        return None
    if isinstance(backend, AiohttpBackend):
        home = getattr(backend.session, "_loop", None)
        if isinstance(home, asyncio.AbstractEventLoop) and home is not running:
            state = "closed" if home.is_closed() else "not this call's"
            return (
                f"it is an aiohttp.ClientSession of event loop {home!r} ({state}), used on "
                f"{running!r}: aiohttp uses a session only on the loop it was made on"
            )
        return None
    if isinstance(exc, RuntimeError) and any(text in str(exc) for text in _OTHER_LOOP):
        return (
            f"{type(backend.client).__name__} holds connections of another event loop "
            f"(RuntimeError: {exc}), used on {running!r}: its pooled connections work only "
            "on the loop that opened them (each asyncio.run is a new loop)"
        )
    return None


def proxy_address(backend: Any, url: str) -> str | None:
    """The ``host:port`` of the proxy ``backend`` sends requests to ``url`` through, or None.

    For an error's message only (a proxy refused the request: `proxy_refused`),
    so read where it is: an owned aiohttp session's proxy; an httpx/httpx2
    client's transport for the URL, whose httpcore pool holds the proxy's URL
    (``_proxy_url``, no user or password in it). None when there is no proxy,
    or the client does not show it (an injected aiohttp session, a client of
    another make).
    """
    if isinstance(backend, AiohttpBackend):
        return None if backend._proxy is None else host_and_port(backend._proxy)
    try:
        transport = backend.client._transport_for_url(backend._url(url))
        proxy = transport._pool._proxy_url
        host, port = proxy.host.decode("ascii"), proxy.port
    except Exception:  # (another client, another layout: the message says "the proxy")
        return None
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


def _bodies_read(session: Any) -> list[Any]:
    """The bodies ``session``'s connections in use are reading (aiohttp's internals: the
    connector's ``_acquired`` protocols and their ``_payload``; none if renamed)."""
    acquired = getattr(getattr(session, "connector", None), "_acquired", None)
    if not acquired:
        return []
    found = (getattr(protocol, "_payload", None) for protocol in list(acquired))
    return [body for body in found if body is not None]


_NO_OPTIONS: Mapping[str, Any] = {}


def _posting(session: Any) -> Callable[..., Any]:
    """What makes an owned session's POST: aiohttp's request coroutine itself, when it has one.

    ``session.post(...)`` wraps the coroutine ``session._request("POST", ...)``
    in a context manager, made through a generic alias
    (``_BaseRequestContextManager[ClientResponse]``, whose call raises and
    clears an AttributeError setting ``__orig_class__`` on a slotted
    instance), and its ``__await__`` wraps it again (a ``coroutine_wrapper``,
    held while the answer is awaited by every run in flight): ~17k
    instructions an exchange (bench/README.md, eighteenth session). The
    transport made this session and awaits the request at once, so it takes
    the coroutine itself. Should
    an aiohttp release rename ``_request``, ``post`` is used (correct, one
    object more: tests/adapters/test_aiohttp_owned.py checks both).
    """
    request = getattr(session, "_request", None)
    if not inspect.iscoroutinefunction(request):
        return session.post  # type: ignore[no-any-return]
    return functools.partial(request, "POST")


async def _wrapped(request: Awaitable[Any]) -> AiohttpReply:
    return AiohttpReply(await request)


class AiohttpReply:
    """An aiohttp response with the names the transport reads (an injected session's)."""

    __slots__ = ("_response", "headers", "status_code")

    def __init__(self, response: Any) -> None:
        self._response = response
        self.status_code: int = response.status
        self.headers: Mapping[str, str] = response.headers

    def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives; what arrived before a failure comes before it."""
        return AiohttpPieces(self._response.content)

    def raw_reader(self) -> Callable[[], Awaitable[bytes]]:
        """What gives the next piece of the body as it arrives (empty at its end).

        It raises a failure before the data that arrived before it: `left_over` has that.
        """
        read: Callable[[], Awaitable[bytes]] = self._response.content.readany
        return read

    def left_over(self) -> bytes:
        """What arrived of the body before its connection failed (see `left_over`)."""
        return left_over(self._response.content)

    def arrived(self) -> bytes | None:
        """The whole body when it came with the head (taken, the connection given back), else None."""
        return arrived_body(self._response)

    async def aclose(self) -> None:
        """Give the connection back (a body not read to its end closes it)."""
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()


class AiohttpPieces:
    """An aiohttp body's pieces as they arrive (``content.iter_any()``), but what arrived
    before its connection failed comes before the failure (`left_over`)."""

    __slots__ = ("_content",)

    def __init__(self, content: Any) -> None:
        self._content = content

    def __aiter__(self) -> AiohttpPieces:
        return self

    async def __anext__(self) -> bytes:
        try:
            piece: bytes = await self._content.readany()
        except Exception:
            piece = left_over(self._content)
            if not piece:
                raise
        if not piece:
            raise StopAsyncIteration
        return piece


def left_over(content: Any) -> bytes:
    """What aiohttp's stream ``content`` still holds once its connection failed (else ``b""``).

    aiohttp's ``readany`` and ``read_nowait`` raise the stored failure before
    they hand over data already received: a stream cut right after its last
    event (``data: [DONE]``) lost that event whenever the reader was slower
    than the server, and a cut error body lost its end. aiohttp has no public
    way to read past a stored failure, so its buffer is read with its private
    ``_read_nowait``; should an aiohttp to come change it, nothing is left
    over and the failure shows at once (the data before it lost, as before).
    """
    if content.exception() is None or not getattr(content, "_buffer", None):
        return b""
    read = getattr(content, "_read_nowait", None)
    try:
        data = read(-1) if callable(read) else b""
    except Exception:  # its read timeout passed: the failure shows
        return b""
    return data if isinstance(data, bytes) else b""


def arrived_body(response: Any) -> bytes | None:
    """An aiohttp answer's whole body when the stream has it all already, else None.

    A small answer usually comes in the same packets as its head: aiohttp's
    stream then holds all of it and has seen its end, so it is taken at once
    (no coroutine to read it, no await per piece) and the connection given
    back, as reading it to its end would. The owned session's `Reply` has it as
    its ``arrived`` method itself (no call in between on every answer).
    """
    content = response.content
    if not content.is_eof() or content.exception() is not None:
        return None
    body: bytes = content.read_nowait()
    response.release()
    return body


# The answers whose body `Sender` reads straight from aiohttp's stream (the
# owned session's `Reply` joins when that module is imported): each has
# `raw_reader` and `arrived`.
READ_IN_PIECES: set[type[Any]] = {AiohttpReply}


def _aiohttp_proxy(
    url: str, proxies: Mapping[str, str]
) -> tuple[str | None, Mapping[str, str] | None]:
    """The owned session's proxy for ``url`` and its ``Proxy-Authorization`` (see `without_credentials`)."""
    return without_credentials(aiohttp_proxy(url, proxies))


def _make_aiohttp(
    timeouts: Timeouts,
    limits: HttpLimits,
    proxy: str | None,
    proxy_headers: Mapping[str, str] | None,
    ssl: Any = True,
) -> AiohttpBackend:
    aiohttp = _package("aiohttp")
    connector = aiohttp.TCPConnector(
        limit=limits.max_connections, keepalive_timeout=limits.keepalive_expiry, ssl=ssl
    )
    from toolfold.adapters._http._aiohttp_owned import Reply, watch_reads

    watch_reads(connector)  # the read timeout without a timer per read
    session = aiohttp.ClientSession(
        connector=connector,
        response_class=Reply,
        timeout=_aiohttp_timeout(aiohttp, timeouts),
        auto_decompress=False,
        # The proxy and its netrc credentials are read once, above, not by
        # aiohttp on every request (trust_env: about 150 us each).
        trust_env=False,
    )
    return AiohttpBackend(
        session, owned=True, timeouts=timeouts, proxy=proxy, proxy_headers=proxy_headers
    )


def _aiohttp_timeout(aiohttp: Any, t: Timeouts) -> Any:
    # aiohttp's "connect" is the wait for a pool slot plus the connection; it
    # has no write timeout: `AiohttpBackend.send` bounds the body's write itself.
    return aiohttp.ClientTimeout(
        total=None, connect=t.pool, sock_connect=t.connect, sock_read=t.read
    )


def is_aiohttp_session(client: Any) -> bool:
    """Whether ``client`` is an ``aiohttp.ClientSession``."""
    return _package_name(client) == "aiohttp"


def _package_name(client: Any) -> str:
    """The name of the package ``client`` is a client of (httpx, httpx2 or aiohttp), read from
    its class's bases: a subclass of ``httpx.Client`` defined in a user's module is httpx's;
    else the package of its own class."""
    for cls in type(client).__mro__:
        name = cls.__module__.split(".")[0]
        if name in BACKENDS:
            return name
    return type(client).__module__.split(".")[0]


def client_package(client: Any) -> Any:
    """The package ``client`` is a client of (see `_package_name`), imported."""
    return importlib.import_module(_package_name(client))


async def close_when_loop_ends(
    backend: Any, ended: Callable[[], None]
) -> AsyncGenerator[None, bool | None]:
    """An async generator to start on a loop; when the loop shuts down it closes ``backend``.

    ``ended`` is called first (the owner forgets the backend). ``model.aclose()``
    closes it by sending True (`close_now`): a close that does not end within
    `CLOSE_GRACE` is then a ``TimeoutError`` for that caller; at the loop's end
    (the generator closed or finalised) it is only logged.
    """
    # asyncio.run() finalises live async generators before closing the loop, so
    # the owned client's connections close on the loop that opened them.
    by_caller: bool | None = False
    try:
        by_caller = yield
    finally:
        ended()
        await _close_through_shutdown(backend, raising=bool(by_caller))


async def close_now(closer: AsyncGenerator[None, bool | None]) -> None:
    """Close ``closer``'s backend for a caller (``model.aclose()``): its errors are raised.

    Raises:
        TimeoutError: The close did not end within `CLOSE_GRACE` (it was cut).
    """
    try:
        await closer.asend(True)
    except StopAsyncIteration:
        pass
    else:  # pragma: no cover - the generator yields once
        await closer.aclose()


#: How long a client's close may take before it is cut. asyncio.run's shutdown
#: waits for dropped models' closes, then for kept models' (two phases one
#: after the other): closes that all hang hold it up to twice this.
CLOSE_GRACE = 2.0

_log = logging.getLogger("toolfold.http")


class _ClosingTask(asyncio.Task[None]):
    """A client's close at its loop's end: cancelled only by its own deadline.

    ``asyncio.run`` (and ``uvloop.run``) cancels every task left when its
    coroutine returns, before it shuts down the async generators. A model
    dropped as the coroutine returns has its closer finalised then, its close
    among those tasks: cut after its first connection, it left the others
    unclosed (a ResourceWarning each). This task declines that cancel, so the
    shutdown, which then waits for the tasks it cancelled, waits for the close;
    a close that hangs is cancelled after `CLOSE_GRACE` seconds all the same.
    """

    _cut = False

    def cancel(self, msg: Any = None) -> bool:
        return super().cancel(msg) if self._cut else False

    def cut(self) -> None:
        """Cancel the close (its deadline has passed)."""
        self._cut = True
        self.cancel()


def _start_closing(
    close: Coroutine[Any, Any, None], loop: asyncio.AbstractEventLoop
) -> _ClosingTask:
    """``close`` in a `_ClosingTask`; on Python 3.12+ its first step taken now (an eager task).

    A close started in a new task waits for the loop's next turn: a loop
    stopped and closed then (``run_until_complete``, then ``close()``, no
    ``shutdown_asyncgens()``) would drop it unstarted, its connections open.
    An eager task runs its first step at once, and a close of idle connections
    ends there. Before 3.12 (no eager tasks) the close starts on the next turn:
    such a loop must run ``shutdown_asyncgens()`` before it closes.
    """
    if sys.version_info >= (3, 12):
        return _ClosingTask(close, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    return _ClosingTask(close, loop=loop)


def _retrieved(closing: asyncio.Task[None]) -> None:
    """Read a finished close's outcome, so a close nobody awaits any more is not logged as unretrieved."""
    if closing.cancelled():
        return
    error = closing.exception()
    if error is not None:
        _log.debug("closing an HTTP client failed: %r", error)


def _cancelling(task: asyncio.Task[Any] | None) -> int:
    """``task.cancelling()`` (0 before Python 3.11, which does not count the cancels)."""
    count = getattr(task, "cancelling", None)
    return 0 if count is None else int(count())


async def _close_through_shutdown(backend: Any, *, raising: bool) -> None:
    """``await backend.aclose()`` in a `_ClosingTask`.

    A cancel of the caller (``model.aclose()`` under a timeout, the loop's
    shutdown) is raised at once; the close goes on in its task. A close cut at
    its deadline, or failing, is a ``TimeoutError`` / its error when
    ``raising`` (an explicit ``model.aclose()``), else logged at DEBUG (the
    loop's end: nobody to tell, and the loop must shut down).
    """
    loop = asyncio.get_running_loop()
    closing = _start_closing(backend.aclose(), loop)
    if closing.done():  # (an eager task) in its first step: nothing to wait for
        if raising and not closing.cancelled():
            closing.result()  # (its error, if it failed)
        _retrieved(closing)
        return
    deadline = loop.call_later(CLOSE_GRACE, closing.cut)
    closing.add_done_callback(lambda _: deadline.cancel())
    closing.add_done_callback(_retrieved)  # (shield forgets it once its caller is cancelled)
    caller = asyncio.current_task()
    cancels = _cancelling(caller)
    try:
        await asyncio.shield(closing)
    except asyncio.CancelledError:
        if not (closing.done() and closing._cut) or _cancelling(caller) > cancels:
            raise  # the caller was cancelled
        if raising:
            raise TimeoutError(
                f"closing the model's HTTP client did not finish within {CLOSE_GRACE:g} seconds: "
                "it was cut, and its connections still open were dropped"
            ) from None
        _log.debug("closing an HTTP client did not finish within %s s: cut", CLOSE_GRACE)
    except Exception:
        if raising:
            raise
