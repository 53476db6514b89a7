"""The clients a transport makes itself send through httpx's transport layer, as the full client would.

An owned httpx/httpx2 client skips ``Client.send`` and hands each request to
the client's own transport (`OwnedHttpxBackend`). These tests hold it to what
``Client.send`` does, over real sockets on 127.0.0.1: the same request head
byte for byte as an injected client of the same package sends, cookies a
server set sent back, basic auth from the URL, proxies from the environment
(the sync client too), httpx's log line and the request an httpx error holds.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import sys
import traceback
import urllib.request
from typing import Any

import pytest
from backends import OWNED
from scripted_http import Reply, ScriptedServer, sse
from test_transport_clients import KEY, PACKAGES

import toolfold
from toolfold import AuthenticationError, ModelConfigError, ProviderConnectionError, ProviderError
from toolfold.adapters._http._backends import make_sync
from toolfold.adapters._http._retry import HttpLimits, RetryPolicy, Timeouts
from toolfold.adapters._http._transport import Transport

HTTPX = [name for name in OWNED if name != "aiohttp"]
CASES = [
    pytest.param(name, mode, what, id=f"{name}-{mode}-{what}")
    for name in HTTPX
    for mode in ("sync", "async")
    for what in ("post", "stream")
]
PAIRS = [
    pytest.param(name, mode, id=f"{name}-{mode}") for name in HTTPX for mode in ("sync", "async")
]
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
SOCKS = "socks5://127.0.0.1:9"  # a proxy aiohttp cannot use


def _reply(what: str) -> Reply:
    return Reply(json={"ok": 1}) if what == "post" else Reply(chunks=sse({"i": 0}, "[DONE]"))


def _send(
    base_url: str,
    mode: str,
    what: str = "post",
    *,
    times: int = 1,
    per_request: dict[str, str] | None = None,
    **options: Any,
) -> list[Any]:
    """POST or stream ``times`` times through a new transport (blocking or async), then close it.

    An injected ``http_client`` is closed too.
    """
    injected = options.get("http_client")
    transport = Transport("openai", base_url, options.pop("api_key", KEY), **options)
    body = {"model": "m"}

    def once() -> Any:
        if what == "post":
            return transport.post_json_sync("chat/completions", body, headers=per_request)
        return [e.data for e in transport.stream_sync("chat/completions", body)]

    async def once_async() -> Any:
        if what == "post":
            return await transport.post_json("chat/completions", body, headers=per_request)
        return [e.data async for e in transport.stream("chat/completions", body)]

    async def run() -> list[Any]:
        try:
            return [await once_async() for _ in range(times)]
        finally:
            await transport.aclose()
            if injected is not None:
                await injected.aclose()

    try:
        return [once() for _ in range(times)] if mode == "sync" else asyncio.run(run())
    finally:
        transport.close()
        if injected is not None and mode == "sync":
            injected.close()


# Every backend toolfold makes, in every mode it has (aiohttp is async only).
OWNED_MODES = [
    pytest.param(name, mode, id=f"{name}-{mode}")
    for name in OWNED
    for mode in ("sync", "async")
    if not (name == "aiohttp" and mode == "sync")
]


def _clear_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in PROXY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
        monkeypatch.delenv(variable.upper(), raising=False)


@pytest.mark.parametrize(("name", "mode", "what"), CASES)
def test_the_request_head_is_the_full_clients(
    http_server: ScriptedServer, name: str, mode: str, what: str
) -> None:
    """An owned client sends the head an injected client of its package sends, header for header."""
    http_server.add(_reply(what), _reply(what))
    base = f"{http_server.url}/v1"
    _send(base, mode, what, http=name, headers={"X-Extra": "1"})
    package = PACKAGES[name]
    client = package.Client() if mode == "sync" else package.AsyncClient()
    _send(base, mode, what, http_client=client, headers={"X-Extra": "1"})
    owned, injected = (request.head for request in http_server.requests)
    assert owned == injected
    lines = owned.decode("latin-1").split("\r\n")
    accept = "application/json" if what == "post" else "text/event-stream"
    body = http_server.requests[0].body
    assert lines == [
        "POST /v1/chat/completions HTTP/1.1",
        f"Host: 127.0.0.1:{http_server.port}",
        "Connection: keep-alive",
        "content-type: application/json",
        f"accept: {accept}",
        "accept-encoding: gzip, deflate",
        "user-agent: toolfold/0.1.0",
        "x-extra: 1",
        f"authorization: Bearer {KEY}",
        f"Content-Length: {len(body)}",
    ]


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_per_request_headers_and_timeouts_reach_the_wire(
    http_server: ScriptedServer, name: str, mode: str
) -> None:
    """A header given for one request is sent after the transport's, with timeouts of its own too."""
    http_server.add(Reply(json={"ok": 1}))
    base = f"{http_server.url}/v1"
    assert _send(base, mode, http=name, timeout=5.0, per_request={"X-Per": "2"}) == [{"ok": 1}]
    names = [line.split(":")[0] for line in http_server.requests[0].head.decode().split("\r\n")]
    assert names[-3:] == ["x-per", "authorization", "Content-Length"]


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_a_cookie_the_server_set_is_sent_back(
    http_server: ScriptedServer, name: str, mode: str
) -> None:
    """A cookie set by an answer goes with the next request, as httpx's client sends it."""
    cookie = {"set-cookie": "__cf_bm=abc; Path=/"}
    http_server.add(Reply(json={"ok": 1}, headers=cookie), Reply(json={"ok": 2}))
    answers = _send(f"{http_server.url}/v1", mode, times=2, http=name)
    assert answers == [{"ok": 1}, {"ok": 2}]
    first, second = http_server.requests
    assert "cookie" not in first.headers
    assert second.headers["cookie"] == "__cf_bm=abc"
    assert second.head.split(b"\r\n")[-2] == b"Cookie: __cf_bm=abc"  # where httpx puts it


@pytest.mark.parametrize("name", HTTPX)
def test_a_user_and_password_in_the_url_are_sent_as_basic_auth(
    http_server: ScriptedServer, name: str
) -> None:
    """A base URL with user:password@ sends basic auth, as httpx's client does."""
    http_server.add(Reply(json={"ok": 1}))
    url = f"http://user:pw@127.0.0.1:{http_server.port}/v1"
    assert _send(url, "sync", http=name, api_key=None) == [{"ok": 1}]
    assert http_server.requests[0].headers["authorization"] == "Basic dXNlcjpwdw=="


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_a_proxy_from_the_environment_is_used(
    http_server: ScriptedServer, name: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With HTTP_PROXY set, sync and async calls go to the proxy, the URL in absolute form."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", http_server.url)
    http_server.add(Reply(json={"ok": 1}))
    # The host is never resolved: only the proxy (the scripted server) is connected to.
    assert _send("http://api.example.invalid/v1", mode, http=name) == [{"ok": 1}]
    assert http_server.requests[0].path == "http://api.example.invalid/v1/chat/completions"


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_a_proxy_variable_httpx_cannot_use_is_a_config_error(
    http_server: ScriptedServer, name: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy httpx refuses (a scheme it lacks; SOCKS without socksio) names the variables.

    Making the client raised a bare ValueError (ImportError for SOCKS) out of the call.
    """
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", "ftp://127.0.0.1:9")
    with pytest.raises(ModelConfigError, match=r"HTTP_PROXY, HTTPS_PROXY, ALL_PROXY.*ftp"):
        _send(f"{http_server.url}/v1", mode, http=name)
    assert http_server.connections == 0


@pytest.mark.parametrize(("name", "mode"), [*PAIRS, pytest.param("aiohttp", "async", id="aiohttp")])
@pytest.mark.parametrize(
    ("variable", "path", "said"),
    [
        ("SSL_CERT_FILE", "missing.pem", "which is no file"),
        ("SSL_CERT_FILE", "garbage.pem", "whose certificates cannot be loaded (SSLError: "),
        ("SSL_CERT_FILE", "", "which is no file"),  # the directory itself
        ("SSL_CERT_DIR", "missing", "which is no directory"),
    ],
)
def test_a_certificates_variable_that_cannot_be_used_is_a_config_error(
    http_server: ScriptedServer,
    name: str,
    mode: str,
    variable: str,
    path: str,
    said: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SSL_CERT_FILE naming no file or one of no certificates, SSL_CERT_DIR naming no
    directory: a ModelConfigError naming the variable and its path when the client is made,
    on every backend, nothing sent. httpx raised a bare FileNotFoundError or SSLError (a
    run's error saying to resume it), and aiohttp ignored the variable without a word."""
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    value = str(tmp_path / path) if path else str(tmp_path)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ModelConfigError) as caught:
        _send(f"https://127.0.0.1:{http_server.port}/v1", mode, http=name)
    assert f"{variable} names {value!r}, {said}" in str(caught.value)
    assert http_server.connections == 0


@pytest.mark.parametrize(("name", "mode"), [*PAIRS, pytest.param("aiohttp", "async", id="aiohttp")])
def test_every_backend_trusts_the_certificates_ssl_cert_file_names_when_the_model_is_made(
    name: str, mode: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose certificate a private CA signed is reached on every backend once
    SSL_CERT_FILE names that CA, set after the clients' packages were imported: aiohttp's
    own context read the variable when aiohttp was imported, by OpenSSL's defaults."""
    import ssl

    import trustme

    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    authority.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    _clear_proxies(monkeypatch)
    server = ScriptedServer(server_context)
    try:
        server.add(Reply(json={"ok": 1}))
        assert _send(f"{server.url}/v1", mode, http=name) == [{"ok": 1}]
    finally:
        server.close()


def _subject_hash(pem: bytes) -> str:
    """The name OpenSSL looks a CA up by in a directory (``openssl x509 -hash``), without it."""
    import hashlib
    import re

    from cryptography import x509

    canonical = x509.Name(  # (values trimmed, spaces collapsed, lower case, as OpenSSL's)
        [
            x509.RelativeDistinguishedName(
                [
                    x509.NameAttribute(a.oid, re.sub(r"\s+", " ", str(a.value).strip()).lower())
                    for a in rdn
                ]
            )
            for rdn in x509.load_pem_x509_certificate(pem).subject.rdns
        ]
    ).public_bytes()
    body = canonical[2:] if canonical[1] < 0x80 else canonical[2 + (canonical[1] & 0x7F) :]
    return hashlib.sha1(body).digest()[3::-1].hex()


@pytest.mark.parametrize(("name", "mode"), [*PAIRS, pytest.param("aiohttp", "async", id="aiohttp")])
def test_with_both_certificates_variables_aiohttp_trusts_both_and_httpx_the_file(
    name: str, mode: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SSL_CERT_FILE naming a bundle and SSL_CERT_DIR a directory holding a private CA:
    aiohttp trusts both, as its own context (OpenSSL's default paths) did; it took the file
    alone and failed the private server's TLS check. httpx and httpx2 take the file alone,
    as their own contexts do."""
    import ssl

    import trustme

    authority, other = trustme.CA(), trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    other.cert_pem.write_to_path(str(tmp_path / "bundle.pem"))
    (tmp_path / "dir").mkdir()
    pem = authority.cert_pem.bytes()
    (tmp_path / "dir" / f"{_subject_hash(pem)}.0").write_bytes(pem)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "bundle.pem"))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "dir"))
    _clear_proxies(monkeypatch)
    server = ScriptedServer(server_context)
    try:
        server.add(Reply(json={"ok": 1}))
        if name == "aiohttp":
            assert _send(f"{server.url}/v1", mode, http=name) == [{"ok": 1}]
        else:
            with pytest.raises(ProviderConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
                _send(f"{server.url}/v1", mode, http=name, retry=0)
    finally:
        server.close()


@pytest.mark.parametrize(("name", "mode"), [*PAIRS, pytest.param("aiohttp", "async", id="aiohttp")])
def test_an_ssl_key_log_file_that_cannot_be_opened_is_named_not_the_certificates(
    http_server: ScriptedServer,
    name: str,
    mode: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SSLKEYLOGFILE in a directory that does not exist, beside a good SSL_CERT_FILE: the
    error names SSLKEYLOGFILE and its path; it said SSL_CERT_FILE's certificates could not
    be loaded (the standard library opens the key log file as it makes the context)."""
    import trustme

    trustme.CA().cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    keys = str(tmp_path / "missing" / "keys.log")
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSLKEYLOGFILE", keys)
    with pytest.raises(ModelConfigError) as caught:
        _send(f"https://127.0.0.1:{http_server.port}/v1", mode, http=name)
    assert f"SSLKEYLOGFILE: it names {keys!r}" in str(caught.value)
    assert "SSL_CERT_FILE" not in str(caught.value)
    assert http_server.connections == 0


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("socks5://127.0.0.1:9", "socks5://"),
        ("ftp://127.0.0.1:9", "ftp://"),
        ("https://127.0.0.1:9", "https://"),
        ("user:secret@127.0.0.1:9", "without a scheme"),
    ],
)
@pytest.mark.parametrize("variable", ["HTTP_PROXY", "ALL_PROXY"])
def test_a_proxy_variable_aiohttp_cannot_use_is_a_config_error(
    http_server: ScriptedServer,
    variable: str,
    value: str,
    shown: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiohttp takes http:// proxies only (it spoke HTTP to a SOCKS one, dropped an https://
    one and sent directly): another names the variable and its scheme when the client is
    made, as httpx's refusal does, never the value's credentials."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv(variable, value)
    with pytest.raises(
        ModelConfigError, match=f"aiohttp cannot use the proxy {variable}"
    ) as caught:
        _send(f"{http_server.url}/v1", "async", http="aiohttp")
    assert str(caught.value).endswith(shown)
    assert "secret" not in str(caught.value)
    assert http_server.connections == 0


ASYNC_OWNED = [pytest.param(name, id=name) for name in OWNED]


@pytest.mark.parametrize("name", ASYNC_OWNED)
@pytest.mark.parametrize("variable", ["HTTP_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"])
def test_every_backend_goes_through_the_same_proxy(
    http_server: ScriptedServer, name: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP_PROXY, and ALL_PROXY when the scheme has no variable, route every backend alike.

    aiohttp ignored ALL_PROXY and went direct where httpx used the proxy.
    """
    _clear_proxies(monkeypatch)
    monkeypatch.setenv(variable, http_server.url)
    http_server.add(Reply(json={"ok": 1}))
    assert _send("http://api.example.invalid/v1", "async", http=name) == [{"ok": 1}]
    assert http_server.requests[0].path == "http://api.example.invalid/v1/chat/completions"


@pytest.mark.parametrize(
    ("used", "unused"),
    [("HTTP_PROXY", "ALL_PROXY"), ("http_proxy", "HTTP_PROXY")],
    ids=["the-schemes-over-ALL_PROXY", "lower-case-over-upper-case"],
)
def test_the_variable_that_applies_wins_under_aiohttp(
    http_server: ScriptedServer, used: str, unused: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheme's variable wins over ALL_PROXY, and http_proxy over HTTP_PROXY (as in urllib
    and aiohttp's own reading): the other one, unusable, is not refused as it is not used."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv(unused, SOCKS)
    monkeypatch.setenv(used, http_server.url)
    http_server.add(Reply(json={"ok": 1}))
    assert _send("http://api.example.invalid/v1", "async", http="aiohttp") == [{"ok": 1}]
    assert http_server.requests[0].path == "http://api.example.invalid/v1/chat/completions"


@pytest.mark.parametrize(
    "environment",
    [
        {"HTTP_PROXY": SOCKS, "NO_PROXY": "127.0.0.1"},
        {"ALL_PROXY": SOCKS, "NO_PROXY": "127.0.0.1"},
        {"HTTP_PROXY": SOCKS, "NO_PROXY": "example.com, 127.0.0.1"},
        {"ALL_PROXY": SOCKS, "NO_PROXY": "*"},
        {"HTTP_PROXY": SOCKS, "NO_PROXY": "127.0.0.1:{port}"},  # a host:port entry
        {"HTTPS_PROXY": SOCKS},  # another scheme's
    ],
)
def test_a_proxy_that_does_not_apply_to_the_host_is_not_refused(
    http_server: ScriptedServer, environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unusable proxy aiohttp would not use for this host (NO_PROXY names it, by the
    stdlib's rules; it is another scheme's) is no reason to refuse: the request goes direct."""
    _clear_proxies(monkeypatch)
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value.replace("{port}", str(http_server.port)))
    http_server.add(Reply(json={"ok": 1}))
    assert _send(f"{http_server.url}/v1", "async", http="aiohttp") == [{"ok": 1}]
    assert http_server.requests[0].path == "/v1/chat/completions"


def test_aiohttp_sends_the_proxys_credentials(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user and password in the proxy variable go to the proxy as Proxy-Authorization."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", f"http://user:pw@127.0.0.1:{http_server.port}")
    http_server.add(Reply(json={"ok": 1}))
    assert _send("http://api.example.invalid/v1", "async", http="aiohttp") == [{"ok": 1}]
    assert http_server.requests[0].headers["proxy-authorization"] == "Basic dXNlcjpwdw=="


@pytest.mark.parametrize(
    "userinfo",
    ["us%3Aer:Url-Passw0rd", "user:Url-Passw0rd-%E2%82%AC"],
    ids=["a-colon-in-the-user", "not-latin-1"],
)
def test_a_proxy_user_basic_auth_cannot_carry_is_a_config_error(
    http_server: ScriptedServer, userinfo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user with ':' or a password outside Latin-1 in the proxy's URL is a ModelConfigError
    showing no password, not aiohttp's ValueError (or a UnicodeEncodeError holding it) out of
    the first call."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", f"http://{userinfo}@127.0.0.1:{http_server.port}")
    with pytest.raises(ModelConfigError, match="the proxy's URL cannot be sent") as caught:
        _send("http://api.example.invalid/v1", "async", http="aiohttp")
    shown = "".join(traceback.format_exception(caught.value)) + repr(caught.value)
    assert "Url-Passw0rd" not in shown
    assert http_server.connections == 0


# urllib's getproxies and proxy_bypass read the system's proxy settings on macOS
# (SystemConfiguration) and Windows (the registry) when no variable is set; on
# Linux they are the variables', which every other test here goes through. The
# system's reading itself cannot run here: these tests stand in for urllib's two
# functions, with what a system setting gives them, and hold aiohttp to asking them.


def test_aiohttp_takes_a_proxy_the_system_settings_name(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no variable set, the proxy urllib.request.getproxies finds (the system's on macOS
    and Windows) is used, as httpx and aiohttp's own trust_env use it; the session read the
    variables only and went direct."""
    _clear_proxies(monkeypatch)
    proxy = ScriptedServer()
    try:
        system = {"http": proxy.url, "https": proxy.url, "ftp": proxy.url}
        monkeypatch.setattr(urllib.request, "getproxies", lambda: system)
        proxy.add(Reply(json={"ok": 1}))
        target = f"http://localhost:{http_server.port}/v1"
        assert _send(target, "async", http="aiohttp") == [{"ok": 1}]
        assert proxy.requests[0].path == f"{target}/chat/completions"
    finally:
        proxy.close()
    assert http_server.requests == []


def test_aiohttp_spares_a_host_the_system_settings_spare(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """urllib.request.proxy_bypass (the system's exceptions on macOS and Windows) decides which
    hosts go direct, asked with the host and with host:port, as NO_PROXY is read."""
    _clear_proxies(monkeypatch)
    asked: list[str] = []

    def bypass(host: str) -> bool:
        asked.append(host)
        return host == f"localhost:{http_server.port}"

    monkeypatch.setattr(urllib.request, "getproxies", lambda: {"http": "http://127.0.0.1:9"})
    monkeypatch.setattr(urllib.request, "proxy_bypass", bypass)
    http_server.add(Reply(json={"ok": 1}))
    assert _send(f"http://localhost:{http_server.port}/v1", "async", http="aiohttp") == [{"ok": 1}]
    assert asked == ["localhost", f"localhost:{http_server.port}"]
    assert http_server.requests[0].path == "/v1/chat/completions"


def test_a_system_proxy_aiohttp_cannot_use_is_a_config_error(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SOCKS proxy from the system's settings (Windows gives ``socks4://`` for http and https)
    is refused when the session is made, naming the system's settings, not a variable."""
    _clear_proxies(monkeypatch)
    system = {"http": "socks4://127.0.0.1:9", "https": "socks4://127.0.0.1:9"}
    monkeypatch.setattr(urllib.request, "getproxies", lambda: system)
    with pytest.raises(ModelConfigError) as caught:
        _send(f"{http_server.url}/v1", "async", http="aiohttp")
    assert str(caught.value) == (
        "aiohttp cannot use the proxy the system's proxy settings name for http://: "
        "it takes http:// proxies only, this one is socks4://"
    )
    assert http_server.connections == 0


def _system_settings(
    monkeypatch: pytest.MonkeyPatch, proxies: dict[str, str], bypass: Any = None
) -> None:
    """Stand in for the system's proxy settings where urllib and httpx read them."""
    monkeypatch.setattr(urllib.request, "getproxies", lambda: proxies)
    for name in HTTPX:  # httpx and httpx2 bind urllib's getproxies at import
        monkeypatch.setattr(
            importlib.import_module(f"{name}._utils"), "getproxies", lambda: proxies
        )
    if bypass is not None:
        monkeypatch.setattr(urllib.request, "proxy_bypass", bypass)


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_httpx_takes_a_proxy_the_system_settings_name(
    http_server: ScriptedServer, name: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no variable set, the system's proxy carries a host its exceptions do not spare."""
    _clear_proxies(monkeypatch)
    asked: list[str] = []

    def bypass(host: str) -> bool:
        asked.append(host)
        return False

    _system_settings(monkeypatch, {"http": http_server.url}, bypass)
    http_server.add(Reply(json={"ok": 1}))
    assert _send("http://api.example.invalid:8080/v1", mode, http=name) == [{"ok": 1}]
    assert http_server.requests[0].path == "http://api.example.invalid:8080/v1/chat/completions"
    assert asked == ["api.example.invalid", "api.example.invalid:8080"]


@pytest.mark.parametrize(("name", "mode"), PAIRS)
@pytest.mark.parametrize("spared", ["host", "host:port"])
def test_httpx_spares_a_host_the_system_settings_spare(
    http_server: ScriptedServer,
    name: str,
    mode: str,
    spared: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host the system's exceptions spare (urllib.request.proxy_bypass: macOS's "Bypass proxy
    settings for these hosts", Windows' ProxyOverride) goes directly, as under aiohttp; httpx
    reads the system's proxies but not its exceptions, and sent it to the proxy (here a closed
    port: the call failed)."""
    _clear_proxies(monkeypatch)
    host = "localhost" if spared == "host" else f"localhost:{http_server.port}"
    _system_settings(monkeypatch, {"http": "http://127.0.0.1:9"}, lambda asked: asked == host)
    http_server.add(Reply(json={"ok": 1}))
    assert _send(f"http://localhost:{http_server.port}/v1", mode, http=name) == [{"ok": 1}]
    assert http_server.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize("name", HTTPX)
@pytest.mark.parametrize(
    ("url", "spared"),
    [
        ("https://example.com:443/v1", "example.com"),  # a default port given
        ("http://example.com:80/v1", "example.com:80"),
        ("http://[FE80::1]:8080/v1", "fe80::1"),  # an IPv6 address in capitals
        ("http://[::1]/v1", "::1"),
        ("http://EXAMPLE.com:8080/v1", "example.com"),
    ],
)
def test_the_system_exceptions_mount_the_host_as_the_client_reads_it(
    name: str, url: str, spared: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The direct mount names the host and port as httpx reads the requests' URLs: a default
    port given is none there (a mount with ``:443`` matched no request), and an IPv6 address
    keeps its case (the standard library's lower-cased one matched none)."""
    _clear_proxies(monkeypatch)
    proxies = {"http": "http://127.0.0.1:9", "https": "http://127.0.0.1:9"}
    _system_settings(monkeypatch, proxies, lambda host: host.lower() == spared)
    backend = make_sync(name, Timeouts(), HttpLimits(), url)
    try:
        client = backend.client
        target = importlib.import_module(name).URL(f"{url}/chat/completions")
        assert client._transport_for_url(target) is client._transport  # direct, not the proxy's
    finally:
        backend.close()


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_with_a_proxy_variable_set_the_system_exceptions_are_not_read(
    http_server: ScriptedServer, name: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any proxy variable set (NO_PROXY alone too) means the variables, not the system's settings,
    as urllib reads them: the system's exceptions are not asked, NO_PROXY decides."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", http_server.url)
    monkeypatch.setenv("NO_PROXY", "elsewhere.invalid")

    def bypass(host: str) -> bool:
        raise AssertionError(f"the system's exceptions were asked about {host}")

    monkeypatch.setattr(urllib.request, "proxy_bypass", bypass)
    http_server.add(Reply(json={"ok": 1}))
    assert _send("http://api.example.invalid/v1", mode, http=name) == [{"ok": 1}]
    assert http_server.requests[0].path == "http://api.example.invalid/v1/chat/completions"


@pytest.mark.parametrize(("name", "mode"), OWNED_MODES)
@pytest.mark.parametrize("trust_env", [True, False])
def test_trust_env_false_sends_directly_whatever_the_proxy_variables(
    http_server: ScriptedServer,
    name: str,
    mode: str,
    trust_env: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With trust_env=False the clients a transport makes read no proxy variable (the local
    model's server, on this machine's loopback, which no proxy reaches): the request goes to
    the server itself. With the default, the same variables send it to the proxy."""
    _clear_proxies(monkeypatch)
    proxy = ScriptedServer()
    try:
        for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(variable, proxy.url)
        (proxy if trust_env else http_server).add(Reply(json={"ok": 1}))
        target = f"{http_server.url}/v1"
        assert _send(target, mode, http=name, trust_env=trust_env) == [{"ok": 1}]
        if trust_env:
            assert proxy.requests[0].path == f"{target}/chat/completions"
            assert http_server.requests == []
        else:
            assert http_server.requests[0].path == "/v1/chat/completions"
            assert proxy.connections == 0
    finally:
        proxy.close()


# A one-text answer of each provider's API.
_ANSWERS: dict[str, Any] = {
    "openai": {
        "id": "c",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
    },
    "anthropic": {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    },
}


@pytest.mark.parametrize(("name", "mode"), OWNED_MODES)
@pytest.mark.parametrize("provider", sorted(_ANSWERS))
def test_a_model_made_with_trust_env_false_reads_no_proxy_variable(
    http_server: ScriptedServer,
    name: str,
    mode: str,
    provider: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``toolfold.model(..., trust_env=False)``: the proxy variables name a closed port, and the
    model's calls still reach the API directly; the same model without it goes to the proxy
    and fails to connect."""
    _clear_proxies(monkeypatch)
    for variable in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(variable, "http://127.0.0.1:9")
    http_server.add(Reply(json=_ANSWERS[provider]))

    def made(**options: Any) -> Any:
        return toolfold.model(
            f"{provider}:m",
            base_url=f"{http_server.url}/v1",
            api_key=KEY,
            http=name,
            retry=0,
            **options,
        )

    def text(model: Any) -> str:
        try:
            if mode == "sync":
                return toolfold.generate_text(model, "hi").text
            return asyncio.run(toolfold.agenerate_text(model, "hi")).text
        finally:
            model.close()

    assert text(made(trust_env=False)) == "hi"
    assert len(http_server.requests) == 1
    with pytest.raises(toolfold.ProviderConnectionError, match="cannot reach"):
        text(made())  # through the proxy's closed port
    assert len(http_server.requests) == 1


@pytest.mark.parametrize(
    "provider", ["openai", "openai-responses", "anthropic", "gemini", "ollama"]
)
def test_trust_env_must_be_a_bool(provider: str) -> None:
    """A string such as "false" would read as true: refused when the model is built."""
    with pytest.raises(ModelConfigError, match=r"trust_env must be True or False, got 'false'"):
        toolfold.model(
            f"{provider}:m", base_url="http://127.0.0.1:9/v1", api_key=KEY, trust_env="false"
        )


@pytest.mark.parametrize("name", ASYNC_OWNED)
def test_a_proxys_password_never_shows_when_the_proxy_refuses(
    http_server: ScriptedServer, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy answering CONNECT with 407: the error names no password of the proxy's.

    aiohttp writes the proxy URL it is given into its error (``url=...``): given
    with its ``user:password@`` (as the backend did once it read the proxy itself),
    the password showed in toolfold's error and its traceback.
    """
    password = "pr0xy-Passw0rd-XYZ"
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", f"http://user:{password}@127.0.0.1:{http_server.port}")
    http_server.add(Reply(status=407, headers={"proxy-authenticate": "Basic realm=x"}))
    with pytest.raises(ProviderError) as caught:
        _send("https://api.example.invalid/v1", "async", http=name, retry=0)
    assert http_server.requests[0].method == "CONNECT"
    shown = "".join(traceback.format_exception(caught.value)) + repr(caught.value)
    assert password not in shown
    assert "api.example.invalid" in str(caught.value)


def test_an_injected_aiohttp_sessions_proxy_password_never_shows_when_the_proxy_refuses(
    http_server: ScriptedServer,
) -> None:
    """An aiohttp session given its proxy with ``user:password@``, the proxy answering the
    CONNECT with 407: neither the password nor the Proxy-Authorization sent shows in the
    traceback. aiohttp's error, chained under toolfold's, held both (its ``url=...``, the
    CONNECT's headers), and the transport cannot scrub a password it was not given."""
    import base64

    import aiohttp

    password = "pr0xy-Passw0rd-XYZ"
    sent = base64.b64encode(f"user:{password}".encode()).decode()
    http_server.add(Reply(status=407, headers={"proxy-authenticate": "Basic realm=x"}))

    async def run() -> None:
        session = aiohttp.ClientSession(
            proxy=f"http://user:{password}@127.0.0.1:{http_server.port}"
        )
        try:
            transport = Transport(
                "openai", "https://api.example.invalid/v1", KEY, http_client=session, retry=0
            )
            await transport.post_json("chat/completions", {"model": "m"})
        finally:
            await session.close()

    with pytest.raises(AuthenticationError) as caught:
        asyncio.run(run())
    assert http_server.requests[0].method == "CONNECT"
    shown = "".join(traceback.format_exception(caught.value)) + repr(caught.value)
    shown += repr(caught.value.__cause__)
    assert "aiohttp.client_exceptions.ClientHttpProxyError: 407" in shown
    assert password not in shown
    assert sent not in shown


def test_a_proxy_error_of_an_older_aiohttp_is_masked_too() -> None:
    """aiohttp before 3.11 (the floor is 3.10) holds its RequestInfo as a frozen attrs class,
    not a NamedTuple: its proxy password and Proxy-Authorization are masked all the same."""
    import attrs
    import multidict
    import yarl

    from toolfold.adapters._http._http_errors import _mask_proxy_credentials

    @attrs.frozen
    class RequestInfo:  # (aiohttp 3.10's shape)
        url: yarl.URL
        method: str
        headers: multidict.CIMultiDictProxy[str]
        real_url: yarl.URL

    proxy = yarl.URL("http://user:pr0xy-Passw0rd@127.0.0.1:3128")
    held = multidict.CIMultiDictProxy(multidict.CIMultiDict({"Proxy-Authorization": "Basic c2Vj"}))
    error = Exception(RequestInfo(proxy, "CONNECT", held, proxy), ())
    error.request_info = error.args[0]  # type: ignore[attr-defined]
    _mask_proxy_credentials(error)
    shown = repr(error.args) + repr(error.request_info)  # type: ignore[attr-defined]
    assert "pr0xy-Passw0rd" not in shown
    assert "c2Vj" not in shown
    assert "127.0.0.1:3128" in shown


EVERY_BACKEND = [*PAIRS, pytest.param("aiohttp", "async", id="aiohttp")]
RETRY_ONCE = RetryPolicy(max_retries=1, initial_delay=0.0, max_delay=0.0)


@pytest.mark.parametrize(("name", "mode"), EVERY_BACKEND)
@pytest.mark.parametrize("scheme", ["https", "http"])
def test_a_proxy_asking_for_credentials_is_an_authentication_error_never_retried(
    http_server: ScriptedServer, name: str, mode: str, scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy's 407, to the CONNECT of an https:// request or as a plain http:// request's
    answer, is one AuthenticationError on every backend, naming the proxy's host and port
    (not its password), sent once. It was httpx's ProxyError retried as a lost connection
    (the bad credentials sent three times), aiohttp's bare ProviderError, and a plain
    request's "openai returned HTTP 407", blaming the provider."""
    password = "pr0xy-Passw0rd-XYZ"
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("ALL_PROXY", f"http://user:{password}@127.0.0.1:{http_server.port}")
    refusal = Reply(status=407, headers={"proxy-authenticate": "Basic realm=x"}, body=b"no")
    http_server.add(refusal, refusal)
    with pytest.raises(AuthenticationError) as caught:
        _send(f"{scheme}://api.example.invalid/v1", mode, http=name, retry=RETRY_ONCE)
    error = caught.value
    assert len(http_server.requests) == 1
    assert http_server.requests[0].method == ("CONNECT" if scheme == "https" else "POST")
    assert (error.status_code, error.retryable) == (407, False)
    assert str(error).startswith(f"the proxy 127.0.0.1:{http_server.port} refused the ")
    assert ": HTTP 407 " in str(error)
    assert f"{scheme}://api.example.invalid/v1/chat/completions" in str(error)
    assert password not in str(error) + repr(error)


@pytest.mark.parametrize(("name", "mode"), EVERY_BACKEND)
@pytest.mark.parametrize(("status", "retried"), [(503, True), (502, True), (403, False)])
def test_a_proxy_refusing_the_tunnel_is_a_connection_error_retried_on_a_5xx(
    http_server: ScriptedServer,
    name: str,
    mode: str,
    status: int,
    retried: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CONNECT the proxy answers with a 5xx is a ProviderConnectionError with its status,
    retried on every backend (nothing reached the provider); another status is not retried.
    aiohttp's was a bare ProviderError, never retried; httpx's named no status."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{http_server.port}")
    http_server.add(Reply(status=status, body=b"down"), Reply(status=status, body=b"down"))
    with pytest.raises(ProviderConnectionError) as caught:
        _send("https://api.example.invalid/v1", mode, http=name, retry=RETRY_ONCE)
    error = caught.value
    assert [r.method for r in http_server.requests] == ["CONNECT"] * (2 if retried else 1)
    assert error.status_code == status
    assert error.retryable is (None if retried else False)
    assert str(error).startswith(
        "cannot reach openai at https://api.example.invalid/v1/chat/completions: "
        f"the proxy 127.0.0.1:{http_server.port} "
    )
    assert f"its CONNECT with HTTP {status} " in str(error)


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_no_proxy_sends_directly(
    http_server: ScriptedServer, name: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host NO_PROXY names is reached directly although HTTP_PROXY names a proxy."""
    _clear_proxies(monkeypatch)
    proxy = ScriptedServer()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        http_server.add(Reply(json={"ok": 1}))
        assert _send(f"{http_server.url}/v1", mode, http=name) == [{"ok": 1}]
        assert proxy.requests == []
    finally:
        proxy.close()
    assert http_server.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize(("name", "mode"), [*PAIRS, pytest.param("aiohttp", "async", id="aiohttp")])
@pytest.mark.parametrize(
    ("no_proxy", "direct"),
    [
        (".localhost", True),  # the leading dot is no part of the name
        ("localhost", True),
        (".ocalhost", False),  # a name, not a string's end
        (".sub.localhost", False),  # the hosts under sub.localhost only
    ],
)
def test_no_proxy_with_a_leading_dot_spares_the_domain_itself_on_every_backend(
    http_server: ScriptedServer,
    name: str,
    mode: str,
    no_proxy: str,
    direct: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``NO_PROXY=.localhost`` sends requests to localhost directly, as curl and the standard
    library read it; httpx spared only the hosts under it and sent them through the proxy,
    while aiohttp (the standard library's rules) went direct."""
    _clear_proxies(monkeypatch)
    proxy = ScriptedServer()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        (http_server if direct else proxy).add(Reply(json={"ok": 1}))
        target = f"http://localhost:{http_server.port}/v1"
        assert _send(target, mode, http=name) == [{"ok": 1}]
        if direct:
            assert proxy.requests == []
            assert http_server.requests[0].path == "/v1/chat/completions"
        else:
            assert http_server.requests == []
            assert proxy.requests[0].path == f"{target}/chat/completions"
    finally:
        proxy.close()


@pytest.mark.parametrize(("name", "mode"), [*PAIRS, pytest.param("aiohttp", "async", id="aiohttp")])
@pytest.mark.parametrize(
    ("no_proxy", "direct"),
    [
        ("127.0.0.0/8", True),
        ("example.com, 127.0.0.1/32", True),
        ("127.0.0.0/8,", True),
        ("10.0.0.0/8", False),
        ("127.0.0.0/abc", False),  # no range: a name, which no host has
    ],
)
def test_a_no_proxy_address_range_spares_its_addresses_on_every_backend(
    http_server: ScriptedServer,
    name: str,
    mode: str,
    no_proxy: str,
    direct: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``NO_PROXY=127.0.0.0/8`` sends requests to 127.0.0.1 directly, as curl and httpx2 read
    it; httpx and aiohttp (the standard library's rules) took it for a host name and went
    through the proxy."""
    _clear_proxies(monkeypatch)
    proxy = ScriptedServer()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        (http_server if direct else proxy).add(Reply(json={"ok": 1}))
        target = f"http://127.0.0.1:{http_server.port}/v1"
        assert _send(target, mode, http=name) == [{"ok": 1}]
        if direct:
            assert proxy.requests == []
            assert http_server.requests[0].path == "/v1/chat/completions"
        else:
            assert http_server.requests == []
            assert proxy.requests[0].path == f"{target}/chat/completions"
    finally:
        proxy.close()


@pytest.mark.parametrize(
    ("no_proxy", "direct"),
    [
        ("[::1]/128", True),
        ("[fd00::]/8, [::1]", True),
        ("::1/128", True),
        ("[::2]/128", False),
        ("[::1/128", False),  # not closed: no range, a name
    ],
)
def test_a_no_proxy_ipv6_range_in_brackets_spares_its_addresses_under_aiohttp(
    no_proxy: str, direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``NO_PROXY=[::1]/128`` (an IPv6 range written as in a URL) spares http://[::1] under
    aiohttp, as httpx2 reads it; it went through the proxy."""
    from toolfold.adapters._http._proxies import aiohttp_proxy

    _clear_proxies(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    proxy = aiohttp_proxy("http://[::1]:8000/v1", urllib.request.getproxies())
    assert proxy == (None if direct else "http://127.0.0.1:9")


def test_a_no_proxy_address_with_a_port_is_no_range() -> None:
    """``[::1]:8080`` names an address and a port, not a range: read without its brackets it
    was ``::1:8080``, another IPv6 address, which a host of that address then matched."""
    from toolfold.adapters._http._proxies import _in_no_proxy_range

    assert not _in_no_proxy_range("::1:8080", {"no": "[::1]:8080"})
    assert _in_no_proxy_range("::1", {"no": "[::1]:8080, [::1]/128"})


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("httpx", ".xn--zz.de"),  # httpx reads it; the bare name is an IDNA error to it
        ("httpx2", ".ä_b.de"),  # httpx2 skips it; the bare name is its InvalidURL
    ],
)
def test_a_no_proxy_entry_the_client_cannot_name_is_left_out(
    http_server: ScriptedServer,
    name: str,
    entry: str,
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An entry the package itself takes whose bare domain its URL class refuses is not
    mounted: the client is made and the other entries hold. The mount of the bare domain
    stopped the client being made: a ModelConfigError blaming the proxy (httpx), or
    httpx2's own InvalidURL."""
    if name not in HTTPX:
        pytest.skip(f"{name} is not installed")
    _clear_proxies(monkeypatch)
    proxy = ScriptedServer()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", f"{entry},.localhost")
        http_server.add(Reply(json={"ok": 1}))
        assert _send(f"http://localhost:{http_server.port}/v1", mode, http=name) == [{"ok": 1}]
        assert proxy.requests == []
    finally:
        proxy.close()
    assert http_server.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("entry", [".xn--bcher-kva.de", "xn--bcher-kva.de"])
def test_a_no_proxy_domain_in_its_xn_form_is_a_config_error_naming_it_on_httpx2(
    http_server: ScriptedServer, entry: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx2 cannot make a client while NO_PROXY names a domain in its xn-- form (bücher.de),
    even one another host is sent to: a ModelConfigError naming the entry and the way out,
    nothing sent. httpx reads the same NO_PROXY, and its other entries hold."""
    if "httpx2" not in HTTPX:
        pytest.skip("httpx2 is not installed")
    _clear_proxies(monkeypatch)
    proxy = ScriptedServer()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", f"{entry},.localhost")
        target = f"http://localhost:{http_server.port}/v1"
        with pytest.raises(ModelConfigError, match=r"NO_PROXY\): Codepoint U\+002A") as caught:
            _send(target, mode, http="httpx2")
        assert str(caught.value).endswith(
            f"httpx2 cannot make a client while NO_PROXY names a domain in its xn-- form "
            f"({entry}), whatever host it sends to: use http='httpx'"
        )
        assert http_server.requests == []
        http_server.add(Reply(json={"ok": 1}))
        assert _send(target, mode, http="httpx") == [{"ok": 1}]
        assert proxy.requests == []
    finally:
        proxy.close()
    assert http_server.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_no_proxy_entry_httpx_cannot_read_is_a_config_error(
    http_server: ScriptedServer, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx itself refuses ``NO_PROXY=.ä_b.de`` (its own mount of ``*.ä_b.de``): a
    ModelConfigError naming NO_PROXY, not httpx's InvalidURL out of the transport."""
    _clear_proxies(monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", ".ä_b.de")
    with pytest.raises(ModelConfigError, match=r"NO_PROXY\): Invalid IDNA hostname"):
        _send(f"{http_server.url}/v1", mode, http="httpx")
    assert http_server.requests == []


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_httpx_logs_its_request_line(
    http_server: ScriptedServer, name: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx's INFO line for each request is logged for an owned client as for an injected one."""
    http_server.add(Reply(json={"ok": 1}), Reply(json={"ok": 1}))
    caplog.set_level(logging.INFO, logger=name)
    base = f"{http_server.url}/v1"
    _send(base, mode, http=name)
    package = PACKAGES[name]
    _send(base, mode, http_client=package.Client() if mode == "sync" else package.AsyncClient())
    lines = [r.getMessage() for r in caplog.records if r.name == name]
    target = f"{http_server.url}/v1/chat/completions"
    assert lines == [f'HTTP Request: POST {target} "HTTP/1.1 200 OK"'] * 2


@pytest.mark.parametrize("name", HTTPX)
def test_a_connection_error_holds_its_request(name: str) -> None:
    """The client error under a ProviderConnectionError holds the request, its key scrubbed."""
    server = ScriptedServer()
    server.close()  # nothing listens there now
    url = server.url
    model = toolfold.model("openai:gpt-4o-mini", base_url=url, api_key=KEY, http=name, retry=0)
    try:
        with pytest.raises(toolfold.ProviderConnectionError) as caught:
            toolfold.generate_text(model, "hi")
    finally:
        model.close()
    package = PACKAGES[name]
    chained = caught.value.__cause__
    while chained is not None and not isinstance(chained, package.ConnectError):
        chained = chained.__cause__ or chained.__context__
    assert isinstance(chained, package.ConnectError)
    assert str(chained.request.url) == f"{url}/chat/completions"
    assert KEY not in repr(dict(chained.request.headers))


@pytest.mark.parametrize("name", HTTPX)
def test_a_closed_owned_client_refuses_as_httpx_does(name: str) -> None:
    """Sending on a closed owned client raises httpx's own error, not a request on a closed pool."""
    backend = make_sync(name, Timeouts(), HttpLimits(), "http://127.0.0.1:9")
    backend.close()
    with pytest.raises(RuntimeError, match="client has been closed"):
        backend.send_sync("http://127.0.0.1:9/x", b"{}", {}, None)


@pytest.mark.parametrize(
    ("version", "install"),
    [
        ((3, 10, 14), "on Python 3.10 use http='httpx', the default"),
        ((3, 11, 7), "(a dependency of toolfold on Python 3.11+: pip install 'httpx2>=2.16')"),
    ],
)
def test_a_missing_httpx2_says_what_is_true(
    monkeypatch: pytest.MonkeyPatch, version: tuple[int, ...], install: str
) -> None:
    """Without httpx2, ``http="httpx2"`` says how to get it on this Python: on 3.10 there is
    no extra to install (it said pip install 'toolfold[httpx2]', an extra that does not exist)."""
    monkeypatch.setitem(sys.modules, "httpx2", None)  # what Python does for a missing module
    monkeypatch.setattr(sys, "version_info", version)
    with pytest.raises(ModelConfigError) as info:
        make_sync("httpx2", Timeouts(), HttpLimits(), "http://127.0.0.1:9")
    monkeypatch.undo()
    assert str(info.value).startswith("http='httpx2' needs the httpx2 package")
    assert install in str(info.value)
    assert "toolfold[httpx2]" not in str(info.value)
