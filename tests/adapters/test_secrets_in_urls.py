"""A password in the base URL (``http://bob:pw@host``) is a secret like the API key.

It is sent (as Basic auth) when the key goes in its own header or there is no
key, and never shows: not in a repr, an error or what it was raised from, a
traceback, or a log line of toolfold or of the HTTP clients. A password of a
few characters is hidden where it is written as one (``bob:pw@``, the Basic
credentials) and nowhere else: the rest of a message stays readable.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import urllib.parse
from typing import Any

import pytest
from backends import OWNED, cases, post_once
from leaks import every_text
from scripted_http import Recorded, Reply, ScriptedServer, gate

import toolfold
from toolfold import (
    ModelConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    ServerError,
    generate_text,
)
from toolfold.adapters import Timeouts, Transport
from toolfold.adapters._http._keys import (
    Secret,
    mask_url,
    mask_url_credentials,
    mask_url_password,
    redact,
    url_secrets,
)
from toolfold.adapters.ollama._provider import host_from_env

PASSWORD = "hunter2-pw-0123456789"
KEY = "sk-ant-secret-key-0123456789"
LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2", "aiohttp", "toolfold")
# Short passwords: each of their characters is common in messages ("a" in "cannot
# reach ollama at"), "%C3%A9" is long as written and one character decoded.
# Lower-case escapes, which yarl (aiohttp) writes in upper case, and ";" and "=",
# which httpx percent-encodes: the URL the clients print is not the one given.
PASSWORDS = [PASSWORD, "a", "pw", "%C3%A9", "p%c3%a9", "hunter2-%c3%a9-0123", "hunter2;=x-0123"]


def _basic(password: str = PASSWORD) -> set[str]:
    """The Basic credentials the clients send for bob and ``password`` (httpx: UTF-8, aiohttp: Latin-1)."""
    plain = f"bob:{urllib.parse.unquote(password)}"
    return {base64.b64encode(plain.encode(encoding)).decode() for encoding in ("utf-8", "latin-1")}


def _url(port: int, password: str = PASSWORD) -> str:
    return f"http://bob:{password}@127.0.0.1:{port}/api"


def _assert_hidden(text: str, password: str = PASSWORD) -> None:
    for form in _spellings(password):
        # A short one is a secret where it is written as a password only.
        assert (form if len(form) >= 4 else f"bob:{form}@") not in text
    for basic in _basic(password):
        assert basic not in text
    assert KEY not in text


def _spellings(password: str) -> set[str]:
    """The password as written, decoded, and as yarl (escapes in upper case) and httpx
    (``;`` and ``=`` encoded) write it."""
    upper = re.sub(r"%[0-9a-f]{2}", lambda found: found.group().upper(), password)
    encoded = password.replace(";", "%3B").replace("=", "%3D")
    return {password, urllib.parse.unquote(password), upper, encoded}


def _echo(*statuses: int, password: str = PASSWORD) -> Any:
    """A handler answering each request with the next status, echoing its Authorization header."""
    left = list(statuses)

    def handler(request: Recorded) -> Reply:
        auth = request.headers.get("authorization", "")
        assert auth.removeprefix("Basic ") in _basic(password)  # the credentials were sent
        body = f'{{"error": {{"message": "bad {auth}", "code": "{auth}"}}, "ok": 1}}'
        return Reply(status=left.pop(0), body=body.encode(), headers={"x-echo": auth})

    return handler


FAILURES = {
    # How the call fails: the error and the start of its message.
    "refused": (ProviderConnectionError, "cannot reach ollama at http://bob:***@127.0.0.1:"),
    "status": (ServerError, "ollama returned HTTP 500 for POST http://bob:***@127.0.0.1:"),
    "total": (ProviderTimeoutError, "the call to ollama at http://bob:***@127.0.0.1:"),
}


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize(("backend", "mode"), cases())
def test_an_error_hides_the_password(
    http_server: ScriptedServer,
    released: list[threading.Event],
    refused_port: int,
    backend: str,
    mode: str,
    failure: str,
    password: str,
) -> None:
    """A refused connection, a 500 echoing the Basic credentials, a total timeout.

    The message names the URL with the password masked, and reads as written
    whatever the password (a password ``a`` made it ``c***nnot re***ch``); no
    part of the error, the chain under it or its traceback shows the password
    or the credentials.
    """
    port = http_server.port
    total = None
    if failure == "refused":
        port = refused_port
    elif failure == "status":
        http_server.handler = _echo(500, password=password)
    else:
        http_server.add(Reply(stall=gate(released)))
        total = 0.2
    timeout = Timeouts(read=30.0, total=total)
    url = _url(port, password)
    transport = Transport("ollama", url, None, http=backend, retry=0, timeout=timeout)
    error, message = FAILURES[failure]
    with pytest.raises(error) as caught:
        post_once(transport, mode)
    assert str(caught.value).startswith(message)
    assert mask_url(url) in str(caught.value)
    if failure == "status":
        assert caught.value.headers["x-echo"] == "Basic ***"
        assert (
            caught.value.body
            == '{"error": {"message": "bad Basic ***", "code": "Basic ***"}, "ok": 1}'
        )
    _assert_hidden(every_text(caught.value), password)


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize(("backend", "mode"), cases())
def test_debug_logs_never_show_the_password(
    http_server: ScriptedServer,
    caplog: pytest.LogCaptureFixture,
    backend: str,
    mode: str,
    password: str,
) -> None:
    """With the HTTP stacks and toolfold at DEBUG, a retried call logs the URL masked."""
    http_server.handler = _echo(500, 200, password=password)
    with caplog.at_level(logging.DEBUG):
        for name in LOGGERS:
            # set_level puts the level back after the test (see test_secrets.py).
            caplog.set_level(logging.DEBUG, logger=name)
        transport = Transport(
            "ollama", _url(http_server.port, password), None, http=backend, retry=1, **_no_waits()
        )
        assert post_once(transport, mode)["ok"] == 1
    lines = [record.getMessage() for record in caplog.records]
    retried = [line for line in lines if line.startswith("retrying POST")]
    assert retried
    assert retried[0].startswith("retrying POST http://bob:***@127.0.0.1:")
    assert " (retry 1 of 1) after: ollama returned HTTP 500 for POST http://bob:***@" in retried[0]
    if backend != "aiohttp":
        assert any(line.startswith("HTTP Request: POST http://bob:***@") for line in lines)
        assert any("Basic ***" in line for line in lines)  # httpcore's response headers
    _assert_hidden("\n".join(lines), password)


def _no_waits() -> dict[str, Any]:
    async def sleep(seconds: float) -> None:
        pass

    return {"sleep": sleep, "sleep_sync": lambda seconds: None}


@pytest.mark.parametrize("spec", ["ollama:m", "anthropic:m", "gemini:m"])
def test_the_repr_of_a_model_and_its_transport_hides_the_password(spec: str) -> None:
    """``base_url='http://***@...'`` in both reprs (the user too, which may be a token); the
    URL itself is kept to send."""
    key = None if spec.startswith("ollama") else KEY  # Ollama's key goes in Authorization
    model = toolfold.model(spec, base_url=_url(9), api_key=key)
    try:
        assert "base_url='http://***@127.0.0.1:9/api'" in repr(model)
        assert "base_url='http://***@127.0.0.1:9/api'" in repr(model._transport)
        _assert_hidden(f"{model!r} {model._transport!r}")
        assert model.base_url == _url(9)
    finally:
        model.close()


def test_a_model_error_and_traceback_hide_the_password_and_key(refused_port: int) -> None:
    """Anthropic (key in x-api-key, password as Basic auth) on a refused port: neither shows."""
    model = toolfold.model("anthropic:m", base_url=_url(refused_port), api_key=KEY, retry=0)
    try:
        with pytest.raises(ProviderError) as caught:
            generate_text(model, "hi")
    finally:
        model.close()
    assert "http://bob:***@127.0.0.1:" in str(caught.value)
    _assert_hidden(every_text(caught.value))


def test_a_bad_base_url_is_refused_without_its_password() -> None:
    """The ModelConfigError of a malformed URL quotes it with the password masked."""
    with pytest.raises(ModelConfigError, match=r"'http://bob:\*\*\*@exa mple\.com/api'"):
        toolfold.model("ollama:m", base_url=f"http://bob:{PASSWORD}@exa mple.com/api")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://bob:pw@host/api", "http://bob:***@host/api"),
        ("http://bob:p@ss@host:8/api?q=a@b", "http://bob:***@host:8/api?q=a@b"),
        ("http://:pw@host", "http://:***@host"),
        ("http://bob@host/api", "http://bob@host/api"),  # no password: nothing to hide
        ("http://host/a@b", "http://host/a@b"),  # an @ in the path is not userinfo
        ("http://bob:pw@[::1/api", "http://bob:***@[::1/api"),  # urlsplit refuses it
        (
            "http://host/m:streamGenerateContent?alt=sse",
            "http://host/m:streamGenerateContent?alt=sse",
        ),
    ],
)
def test_mask_url_password(url: str, shown: str) -> None:
    """Only the password of the authority's ``user:password@`` is masked."""
    assert mask_url_password(url) == shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://bob:pw@host/api", "http://bob:***@host/api"),
        ("http://bob:p@ss@host:8/api?q=a@b", "http://bob:***@host:8/api?q=***"),
        ("http://bob@host/api", "http://bob@host/api"),  # no password: nothing to hide
        ("https://x.azure.com/v1?api-key=sk-1&v=2", "https://x.azure.com/v1?api-key=***&v=***"),
        ("https://gw.example/v1?sk-1", "https://gw.example/v1?***"),
        ("https://gw.example/v1#sk-1", "https://gw.example/v1#***"),
        ("https://gw.example/v1?", "https://gw.example/v1?"),
        ("http://bob:pw@host/v1?k=sk-1#t", "http://bob:***@host/v1?k=***#***"),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    """The password, each query value and the fragment are masked; the user and names stay."""
    assert mask_url(url) == shown


SECRET = "sk-proj-SECRETSECRETSECRET1234567890abcd"


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "anthropic:m", "gemini:m", "ollama:m"])
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://x.openai.azure.com/openai/v1?api-key={SECRET}", "?api-key=***' must not"),
        (f"https://gw.example/v1#{SECRET}", "'https://gw.example/v1#***' must not"),
        (f"https://gw.example/v1?{SECRET}", "'https://gw.example/v1?***' must not"),
        (f"https://gw.example/v 1?key={SECRET}", "'https://gw.example/v 1?key=***' has spaces"),
    ],
)
def test_a_key_in_the_base_url_query_or_fragment_is_not_shown(
    spec: str, url: str, shown: str
) -> None:
    """A base_url refused for its ?query or #fragment is quoted with their values masked."""
    with pytest.raises(ModelConfigError) as caught:
        toolfold.model(spec, api_key="sk-fake", base_url=url)
    assert shown in str(caught.value)
    assert "SECRETSECRET" not in every_text(caught.value)


def test_a_key_in_ollama_host_is_not_shown(caplog: pytest.LogCaptureFixture) -> None:
    """OLLAMA_HOST with a key in its query is refused, and its bad-port warning masks it."""
    with pytest.raises(ModelConfigError, match=r"'http://gpu:8/api\?key=\*\*\*'") as caught:
        host_from_env({"OLLAMA_HOST": f"http://gpu:8/api?key={SECRET}"})
    assert SECRET not in every_text(caught.value)
    with caplog.at_level("WARNING", logger="toolfold.http"), pytest.raises(ModelConfigError):
        host_from_env({"OLLAMA_HOST": f"http://gpu:abc/api?key={SECRET}"})
    assert "OLLAMA_HOST='http://gpu:abc/api?key=***'" in caplog.text
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://bob:pw@host/mcp", "http://***@host/mcp"),
        ("https://ghp_abc:x-oauth-basic@host/mcp", "https://***@host/mcp"),  # token and password
        ("http://sk_live_abc:@host/mcp", "http://***@host/mcp"),
        ("https://ghp_abc@host/mcp", "https://***@host/mcp"),  # a token as the user
        ("http://host/mcp?api_key=sk-1&v=2", "http://host/mcp?api_key=***&v=***"),
        ("http://host/mcp?sk-1", "http://host/mcp?***"),
        ("http://host/mcp?", "http://host/mcp?"),
        ("http://host/mcp#tok", "http://host/mcp#***"),
        ("http://[::1]:8000/mcp", "http://[::1]:8000/mcp"),
    ],
)
def test_mask_url_credentials(url: str, shown: str) -> None:
    """The whole userinfo, the query values and the fragment are masked; what names the server
    stays."""
    assert mask_url_credentials(url) == shown


def test_url_secrets() -> None:
    """The password as written and decoded, and the Basic credentials of each encoding."""
    found = {secret.reveal() for secret in url_secrets("http://b%C3%B8b:p%40%C3%A9@host/")}
    assert found == {
        "p%40%C3%A9",
        "bøb:p@é@",  # three characters decoded: only where a URL writes it
        base64.b64encode("bøb:p@é".encode()).decode(),
        base64.b64encode("bøb:p@é".encode("latin-1")).decode(),
    }
    short = {secret.reveal() for secret in url_secrets("http://bob:pw@host/")}
    assert short == {"bob:pw@", base64.b64encode(b"bob:pw").decode()}
    assert url_secrets("http://bob@host/") == ()
    assert url_secrets("http://bob:@host/") == ()
    assert url_secrets("http://host/a@b") == ()


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cannot reach http://bob:a@host/api", "cannot reach http://bob:***@host/api"),
        ("Request('POST', 'http://bob:a@h')", "Request('POST', 'http://bob:***@h')"),
        ("Authorization: Basic Ym9iOmE=", "Authorization: Basic ***"),
        ("a bare a is not a password", "a bare a is not a password"),
    ],
)
def test_a_short_password_is_hidden_where_it_is_one(text: str, shown: str) -> None:
    """A one-letter password is scrubbed in its URL and Basic forms, not letter by letter."""
    assert redact(text, url_secrets("http://bob:a@host/api")) == shown


# Secrets that overlap: (key, the URL's password, a text holding both, that text masked).
OVERLAPS = {
    # the key's end starts the password
    "key-then-password": (
        "sk-ant-key-0123-abcd",
        "0123-abcd-pw-xyz",
        "bad sk-ant-key-0123-abcd-pw-xyz!",
        "bad ***!",
    ),
    # a short key (only masked as a credential) whose end starts the password ("bc. x")
    "short-key-then-password": ("abc", "bc.%20x", "x-api-key: abc. x!", "x-api-key: ***!"),
    # a short password ("bob:pw@") that starts inside the key
    "key-then-short-password": ("key-to-bob:p", "pw", "bad key-to-bob:pw@host", "bad ***@host"),
    # a short key inside the password, and the password inside the key's header line
    "short-key-in-password": ("abc", "xabcx-pw", "x-api-key: xabcx-pw, abc", "x-api-key: ***, abc"),
}


@pytest.mark.parametrize(
    ("key", "password", "text", "shown"), OVERLAPS.values(), ids=list(OVERLAPS)
)
def test_overlapping_secrets_are_masked_as_one(
    key: str, password: str, text: str, shown: str
) -> None:
    """Two secrets that overlap in a text are masked together: no part of either shows.

    They were replaced one after the other, and the first cut the second, which then
    no longer matched: ``bad ***-pw-xyz!``, ``x-api-key: a***!``.
    """
    from toolfold.adapters._http._keys import Secret, api_key_secrets

    secrets = (
        *api_key_secrets(Secret(key), "x-api-key", ""),
        *url_secrets(f"http://bob:{password}@127.0.0.1/api"),
    )
    assert redact(text, secrets) == shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("x-api-key: abcdefg!", "x-api-key: ***!"),  # the key, then the password: one token
        ("x-api-key: abcdef!", "x-api-key: ***!"),  # the password starts inside the key
        ("Bearer abXYZW and XYZW", "Bearer *** and ***"),  # after Bearer, then a long secret
        ("x-api-key: abcd!", "x-api-key: abcd!"),  # no secret after it: another token
    ],
)
def test_a_short_key_right_before_another_secret_is_masked(text: str, shown: str) -> None:
    """A short key whose token goes on into another secret ends where that secret starts:
    both are masked. Its token going on read as another token, and the key showed in
    full before the other's mask (``x-api-key: abc***!``, ``Bearer ab***``)."""
    from toolfold.adapters._http._keys import Secret, api_key_secrets

    key = "ab" if text.startswith("Bearer") else "abc"
    secrets = (
        *api_key_secrets(Secret(key), "authorization", "Bearer"),
        *api_key_secrets(Secret(key), "x-api-key", ""),
        *url_secrets("http://bob:defg@127.0.0.1/api"),
        *url_secrets("http://bob:cdef@127.0.0.1/api"),
        Secret("XYZW"),
    )
    assert redact(text, secrets) == shown


def _masked_by_hand(text: str, value: str, head: int, tail: int) -> str:
    """``text`` with every occurrence of ``value`` (overlapping ones too) masked but for its
    first ``head`` and last ``tail`` characters, masks that overlap or touch as one."""
    covered = [False] * len(text)
    for at in range(len(text) - len(value) + 1):
        if text.startswith(value, at):
            covered[at + head : at + len(value) - tail] = [True] * (len(value) - head - tail)
    pieces, at = [], 0
    while at < len(text):
        if not covered[at]:
            pieces.append(text[at])
            at += 1
            continue
        while at < len(text) and covered[at]:
            at += 1
        pieces.append("***")
    return "".join(pieces)


@pytest.mark.parametrize("value", ["aaaa", "abab", "abaab", "aabaa", "abba", "abcd", "aab"])
def test_runs_of_overlapping_occurrences_are_masked_as_every_occurrence_would_be(
    value: str,
) -> None:
    """Each text of up to 10 letters of ``ab`` (and ``c``'s), a secret's runs of occurrences
    found whole (`_runs`) are masked as each occurrence masked by hand: none left out."""
    from itertools import product

    from toolfold.adapters._http._keys import Secret

    letters = "abc" if "c" in value else "ab"
    for size in range(11 if letters == "ab" else 8):
        for text in map("".join, product(letters, repeat=size)):
            assert redact(text, [Secret(value)]) == _masked_by_hand(text, value, 0, 0), text
    for text in map("".join, product(["b:a@", "b", ":a@", "@"], repeat=5)):  # a short password
        assert redact(text, url_secrets("http://b:a@host/")) == _masked_by_hand(text, "b:a@", 2, 1)


def test_a_long_run_of_a_secret_is_masked_in_a_few_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """``aaaa`` in four million ``a``s (a hostile error body) is one ``***`` found in one
    search, not one step per character: each overlapping occurrence was looked for with its
    own ``str.find``, 2 s for two million. The searches are counted, not timed."""
    from toolfold.adapters._http import _keys

    searches = [0]
    runs = _keys._runs

    class Counted:
        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern = pattern

        def search(self, text: str, at: int) -> re.Match[str] | None:
            searches[0] += 1
            return self.pattern.search(text, at)

    def counted(value: str, masked: int) -> Any:
        found = runs(value, masked)
        return None if found is None else Counted(found)

    monkeypatch.setattr(_keys, "_runs", counted)
    text = "x" + "a" * 4_000_000 + "y" + "a" * 5 + "z"
    assert redact(text, [_keys.Secret("aaaa")]) == "x***y***z"
    assert searches[0] <= 3  # a run, the next run, no more


@pytest.mark.parametrize("overlap", ["key-then-password", "short-key-then-password"])
@pytest.mark.parametrize(("backend", "mode"), cases())
def test_an_error_echoing_overlapping_secrets_hides_both(
    http_server: ScriptedServer, backend: str, mode: str, overlap: str
) -> None:
    """A 401 whose body and header echo the key and the URL's password run together shows
    neither in part, in any text of the error."""
    key, password, text, shown = OVERLAPS[overlap]
    body = f'{{"error": {{"message": "{text}"}}}}'
    http_server.add(Reply(status=401, body=body.encode(), headers={"x-echo": text}))
    transport = Transport(
        "anthropic",
        _url(http_server.port, password),
        key,
        auth_header="x-api-key",
        auth_scheme="",
        http=backend,
        retry=0,
    )
    with pytest.raises(toolfold.AuthenticationError) as caught:
        post_once(transport, mode)
    assert caught.value.provider_message == shown
    assert caught.value.headers["x-echo"] == shown
    seen = every_text(caught.value)
    for part in (key[:4], key[-4:], password[:4], password[-4:]):
        assert part not in seen


@pytest.mark.parametrize("backend", OWNED)
def test_the_password_is_still_sent(http_server: ScriptedServer, backend: str) -> None:
    """Masking is for what is shown: the request carries the real Basic credentials."""
    http_server.handler = _echo(200)
    transport = Transport("ollama", _url(http_server.port), None, http=backend, retry=0)
    assert post_once(transport, "async")["ok"] == 1


@pytest.mark.parametrize("password", ["p%c3%a9", "hunter2-%c3%a9-%7e-0123", "p%41"])
def test_the_password_is_hidden_as_aiohttp_writes_it(
    caplog: pytest.LogCaptureFixture, password: str
) -> None:
    """yarl, aiohttp's URL class, writes escapes in upper case and decodes unreserved ones
    (``%7e`` as ``~``): an aiohttp log line or error showing its URL is scrubbed too."""
    yarl = pytest.importorskip("yarl")
    url = _url(9, password)
    shown = str(yarl.URL(url))
    assert password not in shown  # yarl rewrote it
    transport = Transport("ollama", url, None, http="aiohttp")
    assert (
        redact(f"cannot reach {shown}", url_secrets(url))
        == f"cannot reach {mask_url_password(url)}"
    )
    with caplog.at_level(logging.DEBUG, logger="aiohttp.client"):
        logging.getLogger("aiohttp.client").debug("POST %s", shown)
    assert caplog.records[-1].getMessage() == f"POST {mask_url_password(url)}"
    transport.close()


RAW_CUTS = ["S3cr/etpw-0123", "S3cr?etpw-0123", "S3cr#etpw-0123"]


@pytest.mark.parametrize("password", RAW_CUTS)
def test_a_base_url_whose_password_holds_a_raw_cut_is_refused_without_it(password: str) -> None:
    """A password with a raw ``/``, ``?`` or ``#`` (it ends the host part) is not shown, not even as "the port"."""
    with pytest.raises(ModelConfigError) as caught:
        toolfold.model(
            "openai:m", base_url=f"https://bob:{password}@api.example.com/v1", api_key=KEY
        )
    message = str(caught.value)
    assert "'https://bob:***@api.example.com/v1'" in message
    assert "must be percent-encoded" in message
    assert "S3cr" not in message
    assert "etpw" not in message


@pytest.mark.parametrize("password", RAW_CUTS)
def test_mask_url_and_url_secrets_read_a_password_cut_by_a_raw_character(password: str) -> None:
    """`mask_url`, `mask_url_credentials` and `url_secrets` take what comes before the last ``@``."""
    url = f"https://bob:{password}@api.example.com/v1"
    assert mask_url(url) == "https://bob:***@api.example.com/v1"
    assert mask_url_credentials(url) == "https://***@api.example.com/v1"
    assert Secret(password) in url_secrets(url)
    assert (
        redact(f"failed: {url}", url_secrets(url)) == "failed: https://bob:***@api.example.com/v1"
    )


def test_a_bad_port_is_named_in_own_words() -> None:
    """A port that is no number is said so, without urllib's text that repeats it."""
    with pytest.raises(ModelConfigError, match=r"its port is not a number from 0 to 65535$"):
        toolfold.model("openai:m", base_url="https://api.example.com:8o8o/v1", api_key=KEY)


@pytest.mark.parametrize("password", RAW_CUTS)
def test_ollama_host_with_a_raw_cut_in_its_password_stays_refused_unshown(password: str) -> None:
    """OLLAMA_HOST keeps refusing an unencoded ``/?#`` in its userinfo, not showing the value."""
    with pytest.raises(ModelConfigError, match="must be percent-encoded") as caught:
        host_from_env({"OLLAMA_HOST": f"http://bob:{password}@ollama.example:11434"})
    assert "S3cr" not in str(caught.value)
    assert "etpw" not in str(caught.value)


@pytest.mark.parametrize("password", RAW_CUTS)
def test_an_mcp_http_url_with_a_raw_cut_in_its_password_is_masked(password: str) -> None:
    """An MCPServerHTTP's shown name masks the whole userinfo, scrubs the password and refuses the file."""
    from toolfold.mcp import MCPServerHTTP
    from toolfold.mcp._entry import url_held

    url = f"https://bob:{password}@mcp.example.com/mcp"
    server = MCPServerHTTP(url)
    assert server.name == "https://***@mcp.example.com/mcp"
    assert Secret(password) in server._scrub
    assert url_held(url)[0] == "a user:password@"
