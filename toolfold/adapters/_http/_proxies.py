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
    """The proxy from the environment that requests to ``url`` go through; one aiohttp cannot use is a `ModelConfigError`.

    The stdlib's rules, as aiohttp's own ``trust_env`` and urllib apply them:
    ``getproxies_environment`` (a lower-case variable wins over its upper-case
    twin) and ``proxy_bypass_environment`` for ``NO_PROXY``. Then, as httpx
    and curl do, ``ALL_PROXY`` when the URL's scheme has no variable of its
    own (aiohttp alone ignores it: the requests would go direct under the
    backend and through the proxy under httpx). A proxy ``NO_PROXY`` spares
    this host from is not looked at. aiohttp takes ``http://`` proxies only:
    it spoke HTTP to a ``socks5://`` one (each request a retried connection
    error), dropped an ``https://`` one with a log line (the requests went
    direct), and refused a value without a scheme per request.
    """
    proxies = urllib.request.getproxies_environment()
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname
    # Undocumented, so not in typeshed's stub, but in urllib.request on every
    # Python toolfold supports: proxy_bypass on Linux, given the variables
    # read above (proxy_bypass itself would read them again).
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    # NO_PROXY entries name a host or a host:port (as httpx and curl read them)
    if host is not None and (
        bypass(host, proxies)
        or (parts.port is not None and bypass(f"{host}:{parts.port}", proxies))
    ):
        return None
    for name in (parts.scheme.lower(), "all"):
        value = proxies.get(name)
        if value:
            scheme = urllib.parse.urlsplit(value).scheme.lower() if "://" in value else ""
            if scheme != "http":
                raise ModelConfigError(
                    f"aiohttp cannot use the proxy {name.upper()}_PROXY names: it takes http:// "
                    f"proxies only, this one is {f'{scheme}://' if scheme else 'without a scheme'}"
                )
            return value
    return None
