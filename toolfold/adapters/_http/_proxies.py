"""The proxy settings the clients a transport makes are given, read once when each is made.

aiohttp's own ``trust_env`` reads the proxy settings again for every request
(about 150 us each), so the owned session is made with ``trust_env=False`` and
given the proxy that applies to the model's base URL (`aiohttp_proxy`),
without the user and password aiohttp would write into its errors, and with
them, or the netrc file's for the proxy, as its ``Proxy-Authorization``
(`without_credentials`). httpx reads the proxies itself but not the system's
list of hosts to reach directly: `system_spares` says when that list spares
the base URL's host. Each takes the proxies `urllib.request.getproxies` gave,
read once by the caller.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import pathlib
import sys
import urllib.parse
import urllib.request
from collections.abc import Mapping

from toolfold._errors import ModelConfigError
from toolfold.adapters._http._keys import login_secrets, url_secrets
from toolfold.adapters._http._logs import guard_logs

__all__ = ["aiohttp_proxy", "netrc_login", "system_spares", "without_credentials"]


def without_credentials(proxy: str | None) -> tuple[str | None, Mapping[str, str] | None]:
    """The proxy URL without its ``user:password@``, and the proxy's ``Proxy-Authorization``.

    The user and password in the proxy's URL, else those the netrc file holds
    for the proxy's host (`netrc_login`), as aiohttp's ``trust_env`` takes them;
    with neither, no header. They are sent apart from the URL, as ``trust_env``
    passes them: aiohttp writes the proxy URL it was given into its errors
    (``ClientHttpProxyError``, ``url=...``), so a password left in it would
    show in toolfold's. The password is also kept out of the HTTP stacks' DEBUG
    logs, like the base URL's. A user or password aiohttp's basic auth cannot
    carry (a ``:`` in the user, a character outside Latin-1) is a
    `ModelConfigError` showing neither (it was aiohttp's ValueError).
    """
    if proxy is None:
        return None, None
    import yarl  # aiohttp's URL type (a dependency of aiohttp)

    parsed = yarl.URL(proxy)
    if parsed.raw_user is None and parsed.raw_password is None:  # as aiohttp's BasicAuth.from_url
        login = netrc_login(parsed.host) if parsed.host else None
        if login is None:
            return proxy, None
        (user, password), where = login, f"the netrc file's entry for {parsed.host}"
        guard_logs(*login_secrets(user, password))
    else:
        user, password, where = parsed.user or "", parsed.password or "", "the proxy's URL"
        guard_logs(*url_secrets(proxy))
    try:
        credentials = None if ":" in user else f"{user}:{password}".encode("latin-1")
    except UnicodeEncodeError:  # (which holds the password)
        credentials = None
    if credentials is None:
        raise ModelConfigError(
            f"the user and password of {where} cannot be sent to the proxy as basic auth: "
            "a ':' in the user, or a character outside Latin-1"
        )
    # The header, not aiohttp's ``proxy_auth`` (which aiohttp 3.12 deprecates),
    # encoded as aiohttp's BasicAuth encodes it.
    header = "Basic " + base64.b64encode(credentials).decode("ascii")
    return str(parsed.with_user(None)), {"Proxy-Authorization": header}


def netrc_login(host: str) -> tuple[str, str] | None:
    """The user and password the netrc file holds for ``host`` (else its ``default``), or None.

    As aiohttp's ``trust_env`` reads them, with the standard library's
    ``netrc``: the file ``NETRC`` names, else ``~/.netrc`` (``~/_netrc`` on
    Windows); the entry's ``login``, else its ``account``. A file missing,
    unreadable or that does not parse gives no credentials, and says nothing
    (aiohttp logs a warning, and a parse error can quote the file's words, a
    password among them).
    """
    import netrc

    path = os.environ.get("NETRC")
    try:
        if path is None:  # (Path.home raises RuntimeError when there is no home)
            path = str(pathlib.Path.home() / ("_netrc" if sys.platform == "win32" else ".netrc"))
        entry = netrc.netrc(path).authenticators(host)
    except (OSError, RuntimeError, UnicodeDecodeError, netrc.NetrcParseError):
        return None
    if entry is None:
        return None
    login, account, password = entry
    # (None on Python 3.10 for what the entry leaves out, "" from 3.11)
    return login or account or "", password or ""


def _bypassed(parts: urllib.parse.SplitResult, proxies: Mapping[str, str]) -> bool:
    """Whether ``urllib.request.proxy_bypass`` spares the URL's host from the proxy,
    or an address range ``NO_PROXY`` names holds it (`_in_no_proxy_range`).

    Asked with the host, then with ``host:port`` when the URL names a port:
    ``NO_PROXY`` entries name a host or a host:port (as httpx and curl read
    them). Ask only once a proxy applies: the system's rules may resolve the
    host (macOS for an address range in its exceptions, Windows for any).
    """
    host = parts.hostname
    bypass = urllib.request.proxy_bypass
    return host is not None and bool(
        bypass(host)
        or (parts.port is not None and bypass(f"{host}:{parts.port}"))
        or _in_no_proxy_range(host, proxies)
    )


def _in_no_proxy_range(host: str, proxies: Mapping[str, str]) -> bool:
    """Whether ``host`` is an IP address in a range ``NO_PROXY`` names (``10.0.0.0/8``, ``fd00::/8``).

    As curl and httpx2 read such an entry; the standard library's
    ``proxy_bypass_environment`` (so aiohttp's ``trust_env``) and httpx take it
    for a host name, which no host has: a base URL in the range went through the
    proxy under those and directly under httpx2. An IPv6 entry in brackets, as
    in a URL (``[fd00::]/8``, ``[::1]``: the one address), is read without
    them, as httpx2 reads it. A name is not resolved to match.
    """
    entries = proxies.get("no", "")
    if "/" not in entries and "[" not in entries:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    for entry in entries.split(","):
        entry = entry.strip()
        if entry.startswith("["):
            inside, closed, rest = entry[1:].partition("]")
            if not closed or rest[:1] not in ("", "/"):
                continue  # (unclosed, or a port after it: "[::1]:8080" is no address range)
            entry = inside + rest
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        if network.version == address.version and address in network:
            return True
    return False


def _applying(parts: urllib.parse.SplitResult, proxies: Mapping[str, str]) -> str | None:
    """The key of ``proxies`` (``getproxies``') whose proxy the URL takes: its scheme's, else ``all``."""
    return next((key for key in (parts.scheme.lower(), "all") if proxies.get(key)), None)


def system_spares(url: str, proxies: Mapping[str, str]) -> bool:
    """Whether the proxy settings name a proxy for ``url`` but spare its host where httpx
    would not.

    Where no proxy variable is set (any ``*_PROXY``, ``NO_PROXY`` too), the
    standard library reads the system's settings (macOS, Windows): its
    proxies, which httpx takes too, and its list of hosts to reach directly
    (macOS's "Bypass proxy settings for these hosts", Windows'
    ``ProxyOverride``), which httpx does not read. With the variables set,
    httpx reads ``NO_PROXY`` itself, but not its address ranges
    (`_in_no_proxy_range`); on Linux there are only the variables.
    ``proxies``: what ``urllib.request.getproxies`` gives.
    """
    parts = urllib.parse.urlsplit(url)
    if urllib.request.getproxies_environment():
        return (
            parts.hostname is not None
            and _applying(parts, proxies) is not None
            and _in_no_proxy_range(parts.hostname, proxies)
        )
    return _applying(parts, proxies) is not None and _bypassed(parts, proxies)


def aiohttp_proxy(url: str, proxies: Mapping[str, str]) -> str | None:
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
    refused a value without a scheme per request. ``proxies``: what
    ``urllib.request.getproxies`` gives.
    """
    parts = urllib.parse.urlsplit(url)
    name = _applying(parts, proxies)
    if name is None:
        return None
    if _bypassed(parts, proxies):  # asked only once a proxy applies (see `_bypassed`)
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
