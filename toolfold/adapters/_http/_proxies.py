"""The proxy of the aiohttp session a transport makes, read once when the session is made.

aiohttp's own ``trust_env`` reads the proxy settings again for every request
(about 150 us each), so the owned session is made with ``trust_env=False`` and
given the proxy that applies to the model's base URL (`aiohttp_proxy`),
without the user and password aiohttp would write into its errors
(`without_credentials`).
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from toolfold._errors import ModelConfigError
from toolfold.adapters._http._keys import url_secrets
from toolfold.adapters._http._logs import guard_logs

__all__ = ["aiohttp_proxy", "without_credentials"]


def without_credentials(
    aiohttp: Any, proxy: str | None
) -> tuple[str | None, Mapping[str, str] | None]:
    """The proxy URL without its ``user:password@``, and them as a ``Proxy-Authorization``.

    As aiohttp's ``trust_env`` passes them (apart from the URL): it writes the proxy URL it
    was given into its errors (``ClientHttpProxyError``, ``url=...``), so a
    password left in it would show in toolfold's. The password is also kept
    out of the HTTP stacks' DEBUG logs, like the base URL's.
    """
    if proxy is None:
        return None, None
    import yarl  # aiohttp's URL type (a dependency of aiohttp)

    parsed = yarl.URL(proxy)
    auth = aiohttp.BasicAuth.from_url(parsed)
    if auth is None:
        return proxy, None
    guard_logs(*url_secrets(proxy))
    # (the header, not aiohttp's ``proxy_auth``, which aiohttp 3.12 deprecates)
    return str(parsed.with_user(None)), {"Proxy-Authorization": auth.encode()}


def aiohttp_proxy(url: str) -> str | None:
    """The proxy that requests to ``url`` go through; one aiohttp cannot use is a `ModelConfigError`.

    The standard library's, as aiohttp's own ``trust_env`` and urllib read them:
    ``getproxies`` (the ``*_PROXY`` variables, a lower-case one winning over its
    upper-case twin; when none is set, the system's proxy settings on macOS and
    Windows, as httpx reads them too) and ``proxy_bypass`` for the hosts spared
    (``NO_PROXY``; without variables, the system's exceptions). Then, as httpx
    and curl do, ``ALL_PROXY`` when the URL's scheme has no variable of its
    own (aiohttp alone ignores it: the requests would go direct under the
    backend and through the proxy under httpx). A proxy this host is spared
    from is not looked at. aiohttp takes ``http://`` proxies only: it spoke
    HTTP to a ``socks5://`` one (each request a retried connection error),
    dropped an ``https://`` one with a log line (the requests went direct), and
    refused a value without a scheme per request.
    """
    proxies = urllib.request.getproxies()
    parts = urllib.parse.urlsplit(url)
    name = next((key for key in (parts.scheme.lower(), "all") if proxies.get(key)), None)
    if name is None:
        return None
    host = parts.hostname
    # Asked only once a proxy applies: the system's rules may resolve the host
    # (macOS for an address range in its exceptions, Windows for any).
    # NO_PROXY entries name a host or a host:port (as httpx and curl read them).
    bypass = urllib.request.proxy_bypass
    if host is not None and (
        bypass(host) or (parts.port is not None and bypass(f"{host}:{parts.port}"))
    ):
        return None
    value = proxies[name]
    scheme = urllib.parse.urlsplit(value).scheme.lower() if "://" in value else ""
    if scheme != "http":
        if name in urllib.request.getproxies_environment():
            named = f"{name.upper()}_PROXY names"
        else:
            named = f"the system's proxy settings name for {name}://"
        raise ModelConfigError(
            f"aiohttp cannot use the proxy {named}: it takes http:// proxies only, "
            f"this one is {f'{scheme}://' if scheme else 'without a scheme'}"
        )
    return value
