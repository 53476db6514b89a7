"""An API key of a few characters is hidden where it is a credential, never letter by letter.

A key ``ab`` scrubbed as a bare substring turned every ``ab`` of a message into
``***`` (``c***le``); like a short URL password (test_secrets_in_urls.py), it
is scrubbed where it is written as one: after its scheme (``Bearer ab``) or its
header's name (``x-api-key: ab``, ``'x-api-key': 'ab'``, ``(b'x-api-key', b'ab')``),
the way each provider sends it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from backends import cases, post_once
from leaks import every_text
from scripted_http import Recorded, Reply, ScriptedServer

import toolfold
from toolfold import ProviderConnectionError, ProviderError
from toolfold.adapters import Transport
from toolfold.adapters._http._keys import QUOTED_BARE, Secret, api_key_secrets, redact

KEYS = ["k", "ab", "xyz"]
# How each provider sends its key: (header, scheme). OpenAI and the compatible
# ones in Authorization after Bearer, Anthropic and Gemini bare in their own header.
SENT = {
    "openai": ("authorization", "Bearer"),
    "anthropic": ("x-api-key", ""),
    "gemini": ("x-goog-api-key", ""),
}
LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2", "aiohttp", "toolfold")
# A provider message holding every short key as (part of) a word.
SAID = "bad key: ask xyz about a cab, keep kk (k)"


def _credentials(key: str, header: str, scheme: str) -> list[str]:
    """The forms the key must never show in: each way a header is printed."""
    value = f"{scheme} {key}" if scheme else key
    return [
        f"{header}: {value}",
        f"'{header}': '{value}'",
        f"b'{header}', b'{value}'",
        f'"{header}": "{value}"',
        *([f"{scheme} {key}"] if scheme else []),
    ]


def _assert_hidden(text: str, key: str, header: str, scheme: str) -> None:
    for form in _credentials(key, header, scheme):
        assert form not in text


def _assert_retry_logged(
    caplog: pytest.LogCaptureFixture, url: str, backend: str, key: str, header: str, scheme: str
) -> None:
    """The retried call's log lines: the retry and the provider's message as logged, the
    echoed header masked (httpcore's response headers too), the key nowhere else."""
    lines = "\n".join(record.getMessage() for record in caplog.records)
    assert f"retrying POST {url}/chat in " in lines
    assert f"{SAID} (sent {header}: " in lines  # the provider's message, unmangled
    if backend != "aiohttp":
        masked = f"{scheme} ***" if scheme else "***"
        assert f"(b'{header}', b'{masked}')" in lines  # httpcore's response headers
    _assert_hidden(lines, key, header, scheme)


def _echo(header: str, *statuses: int) -> Any:
    """Answers each request with the next status, echoing the key's header in a header and the body."""
    left = list(statuses)

    def handler(request: Recorded) -> Reply:
        value = request.headers[header]
        body = f'{{"error": {{"message": "{SAID} (sent {header}: {value})"}}, "ok": 1}}'
        return Reply(status=left.pop(0), body=body.encode(), headers={header: value})

    return handler


def _transport(url: str, provider: str, key: str, backend: str, retry: int = 0) -> Transport:
    header, scheme = SENT[provider]
    return Transport(
        provider,
        url,
        key,
        auth_header=header,
        auth_scheme=scheme,
        http=backend,
        retry=retry,
        sleep=_no_sleep,
        sleep_sync=lambda seconds: None,
    )


async def _no_sleep(seconds: float) -> None:
    pass


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("provider", list(SENT))
@pytest.mark.parametrize(("backend", "mode"), cases())
def test_an_echoed_short_key_is_masked_and_the_message_kept(
    http_server: ScriptedServer, backend: str, mode: str, provider: str, key: str
) -> None:
    """A 401 echoing the key's header: masked there, the provider's words around it untouched."""
    header, scheme = SENT[provider]
    http_server.handler = _echo(header, 401)
    with pytest.raises(ProviderError) as caught:
        post_once(_transport(http_server.url, provider, key, backend), mode)
    masked = f"{scheme} ***" if scheme else "***"
    assert caught.value.provider_message == f"{SAID} (sent {header}: {masked})"
    assert f"{SAID} (sent {header}: {masked})" in str(caught.value)
    echoed = {name.lower(): value for name, value in caught.value.headers.items()}
    assert echoed[header] == masked
    _assert_hidden(every_text(caught.value), key, header, scheme)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("provider", list(SENT))
@pytest.mark.parametrize(("backend", "mode"), cases())
def test_a_refused_call_with_a_short_key_reads_as_written(
    refused_port: int, backend: str, mode: str, provider: str, key: str
) -> None:
    """The message names the URL intact; the request the chain holds shows the key masked."""
    header, scheme = SENT[provider]
    url = f"http://127.0.0.1:{refused_port}/api"
    with pytest.raises(ProviderConnectionError) as caught:
        post_once(_transport(url, provider, key, backend), mode)
    assert str(caught.value).startswith(f"cannot reach {provider} at {url}/chat")
    _assert_hidden(every_text(caught.value), key, header, scheme)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("provider", list(SENT))
@pytest.mark.parametrize(("backend", "mode"), cases())
def test_debug_logs_mask_a_short_key_only_as_a_credential(
    http_server: ScriptedServer,
    caplog: pytest.LogCaptureFixture,
    backend: str,
    mode: str,
    provider: str,
    key: str,
) -> None:
    """With the HTTP stacks at DEBUG, a retried call: the echoed header masked, the rest as logged."""
    header, scheme = SENT[provider]
    http_server.handler = _echo(header, 500, 200)
    with caplog.at_level(logging.DEBUG):
        for name in LOGGERS:
            caplog.set_level(logging.DEBUG, logger=name)
        assert (
            post_once(_transport(http_server.url, provider, key, backend, retry=1), mode)["ok"] == 1
        )
    _assert_retry_logged(caplog, http_server.url, backend, key, header, scheme)


@pytest.fixture
def installed() -> Iterator[list[toolfold.adapters.RedactingFilter]]:
    """Filters a test installs with `redact_logs`, taken off every logger and handler after it."""
    filters: list[toolfold.adapters.RedactingFilter] = []
    yield filters
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for owner in [*loggers, *(h for lg in loggers for h in getattr(lg, "handlers", []))]:
        for found in filters:
            if isinstance(owner, logging.Filterer) and found in owner.filters:
                owner.removeFilter(found)


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("provider", list(SENT))
@pytest.mark.parametrize(("backend", "mode"), cases())
def test_redact_logs_masks_a_short_key_only_as_a_credential(
    http_server: ScriptedServer,
    caplog: pytest.LogCaptureFixture,
    installed: list[toolfold.adapters.RedactingFilter],
    backend: str,
    mode: str,
    provider: str,
    key: str,
) -> None:
    """`redact_logs` given a short key masks it as the transport does: in the echoed header,
    not in the provider's message the retry's log line quotes.

    It scrubbed the key everywhere: ``ask xyz about a cab`` read ``ask xyz ***out a c***``
    for the key ``ab`` in every log line.
    """
    header, scheme = SENT[provider]
    http_server.handler = _echo(header, 500, 200)
    with caplog.at_level(logging.DEBUG):
        for name in LOGGERS:
            caplog.set_level(logging.DEBUG, logger=name)
        installed.append(toolfold.adapters.redact_logs([key], handlers=[caplog.handler]))
        transport = _transport(http_server.url, provider, key, backend, retry=1)
        assert post_once(transport, mode)["ok"] == 1
    _assert_retry_logged(caplog, http_server.url, backend, key, header, scheme)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Authorization: Bearer ab", "Authorization: Bearer ***"),
        ("{'x-api-key': 'ab'}", "{'x-api-key': '***'}"),
        ("(b'x-goog-api-key', b'ab')", "(b'x-goog-api-key', b'***')"),
        ("api-key: ab", "api-key: ***"),  # a header named in key_headers
        ("ask about a cab (ab)", "ask about a cab (ab)"),
        ("x-api-key: bab", "x-api-key: bab"),
        ("the key sk-long-0123 is scrubbed anywhere", "the key *** is scrubbed anywhere"),
    ],
)
def test_redact_logs_keeps_the_transports_rule_for_short_keys(
    installed: list[toolfold.adapters.RedactingFilter], text: str, shown: str
) -> None:
    """A short key given to `redact_logs` is masked after ``Bearer`` and after the name of one of
    ``key_headers``; a key of 4 characters or more everywhere, as before."""
    headers = (*toolfold.adapters._http._keys.KEY_HEADERS, "api-key")
    found = toolfold.adapters.redact_logs(["ab", "sk-long-0123"], handlers=[], key_headers=headers)
    installed.append(found)
    record = logging.LogRecord("app", logging.INFO, __file__, 1, "%s", (text,), None)
    assert found.filter(record)
    assert record.getMessage() == shown


def _filtered(found: logging.Filter, text: str) -> str:
    record = logging.LogRecord("app", logging.INFO, __file__, 1, "%s", (text,), None)
    assert found.filter(record)
    return record.getMessage()


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Authorization: Token ab", "Authorization: Token ***"),
        ("{'authorization': 'Key ab'}", "{'authorization': 'Key ***'}"),
        ("(b'authorization', b'Basic ab')", "(b'authorization', b'Basic ***')"),
        ("Authorization: Token abc", "Authorization: Token abc"),  # another token
        ("a Token ab", "a Token ab"),  # a scheme word alone names no key
    ],
)
def test_a_log_filter_masks_a_short_key_after_any_auth_scheme(text: str, shown: str) -> None:
    """A short key sent with a scheme other than Bearer (``auth_scheme="Token"``) is masked
    after ``Authorization:`` and that scheme. Only ``Bearer ab`` was: the key showed."""
    assert _filtered(toolfold.adapters.RedactingFilter(["ab"]), text) == shown


def test_key_headers_given_as_one_string_name_one_header() -> None:
    """``key_headers="api-key"`` is that header, not the headers ``a``, ``p``, ``i``..."""
    found = toolfold.adapters.RedactingFilter(["ab"], key_headers="api-key")
    assert _filtered(found, "api-key: ab, a: ab, p=ab") == "api-key: ***, a: ab, p=ab"


def test_a_short_key_in_a_secret_subclass_follows_the_short_key_rule() -> None:
    """A short key given as a subclass of `Secret` is masked as a credential, as a `Secret` is,
    not in every word: ``ask about a cab`` was ``ask ***out a c***``."""

    class Key(Secret):
        __slots__ = ()

    found = toolfold.adapters.RedactingFilter([Key("ab")])
    assert _filtered(found, "ask about a cab, Bearer ab") == "ask about a cab, Bearer ***"


@pytest.mark.parametrize(
    ("spec", "provider"),
    [("openai:m", "openai"), ("anthropic:m", "anthropic"), ("gemini:m", "gemini")],
)
def test_each_provider_model_scrubs_its_short_key_as_it_sends_it(spec: str, provider: str) -> None:
    """The models hand their transport the header and scheme they send the key with."""
    model = toolfold.model(spec, api_key="ab", base_url="http://127.0.0.1:9/v1")
    try:
        secrets = model._transport._sender.secrets
    finally:
        model.close()
    header, scheme = SENT[provider]
    assert secrets == api_key_secrets(toolfold.adapters.Secret("ab"), header, scheme)
    text = f"a cab; {header}: {scheme} ab".replace(":  ", ": ")
    assert redact(text, secrets) == text.replace(" ab", " ***")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Bearer ab", "Bearer ***"),
        ("the token Bearer ab.", "the token Bearer ***."),
        ("{'authorization': 'bearer ab'}", "{'authorization': 'bearer ***'}"),
        (
            "Bearer abc and Bearer ab.cd are other tokens",
            "Bearer abc and Bearer ab.cd are other tokens",
        ),
        ("a cab, an abbey", "a cab, an abbey"),
    ],
)
def test_a_short_bearer_key_is_masked_where_it_is_one(text: str, shown: str) -> None:
    """``Bearer ab`` (any case of the scheme) is masked, up to where the token ends; a bare ab is not."""
    assert (
        redact(text, api_key_secrets(toolfold.adapters.Secret("ab"), "authorization", "Bearer"))
        == shown
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("x-api-key: bab", "x-api-key: bab"),  # another value ending in the key
        ("(b'x-api-key', b'ab')", "(b'x-api-key', b'***')"),  # httpcore's bytes
        ("x-api-key: b'ab'", "x-api-key: b'***'"),
        ("x-api-key: ab", "x-api-key: ***"),
    ],
)
def test_a_short_header_key_is_masked_only_as_the_whole_value(text: str, shown: str) -> None:
    """The ``b`` of a bytes literal is taken before a quote only: ``x-api-key: bab`` held
    the key ``ab`` after an optional ``b`` and showed as ``x-api-key: b***``."""
    assert redact(text, api_key_secrets(Secret("ab"), "x-api-key", "")) == shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("EMPTY " * 50 + "Bearer EMPTY", "EMPTY " * 50 + "Bearer ***"),
        ("Bearer x EMPTY, Bearer EMPTY", "Bearer x EMPTY, Bearer ***"),
        ("EMPTY Bearer EMPTYEMPTY Bearer EMPTY", "EMPTY Bearer EMPTYEMPTY Bearer ***"),
        ("x-apİ-key: EMPTY and X-API-KEY:EMPTY", "x-apİ-key: *** and X-API-KEY:***"),
        ("BEARER\tEMPTY (\u017f é) bearer  EMPTY", "BEARER\t*** (\u017f é) bearer  ***"),
        ("a-Bearer EMPTY, xBearer EMPTY", "a-Bearer EMPTY, xBearer EMPTY"),
        ("Bearer " + " " * 100 + "EMPTY", "Bearer " + " " * 100 + "EMPTY"),
    ],
)
def test_a_short_key_is_found_after_what_names_it_from_each_place_it_is_written(
    text: str, shown: str
) -> None:
    """A short key is found with ``str.find`` and what names it looked for just before each
    place: the same masks as a pattern starting with what names it, tried at every
    character of the text (which took 30 ms for a megabyte holding ``EMPTY``), but
    for what names it written over more than 96 characters."""
    secrets = (
        *api_key_secrets(Secret("EMPTY"), "authorization", "Bearer", bare=QUOTED_BARE),
        *api_key_secrets(Secret("EMPTY"), "x-api-key", "", bare=QUOTED_BARE),
    )
    assert redact(text, secrets) == shown


@pytest.mark.parametrize(
    ("key", "text", "shown"),
    [
        ("b", "(b'x-api-key', b'b')", "(b'x-api-key', b'***')"),
        ("'k1", "'x-api-key': ''k1'", "'x-api-key': '***'"),
        (" k", "x-api-key:  k", "x-api-key: ***"),
    ],
)
def test_a_short_key_like_what_names_it_is_masked_where_the_key_is(
    key: str, text: str, shown: str
) -> None:
    """A key that starts like the end of what names it (``b`` after ``b'``, a quote, a
    space) is masked where the key is written, not where what names it could end first:
    ``(b'x-api-key', b'b')`` showed as ``(b'x-api-key', ***'b')``."""
    secrets = api_key_secrets(Secret(key), "x-api-key", "", bare=QUOTED_BARE)
    assert redact(text, secrets) == shown


def test_two_short_keys_alike_in_different_headers_are_both_guarded() -> None:
    """The log guard keeps a key ``ab`` sent as Bearer and one sent as x-api-key apart."""
    from toolfold.adapters._http import _logs

    guard = _logs._KeyFilter()
    for header, scheme in (("authorization", "Bearer"), ("x-api-key", "")):
        for secret in api_key_secrets(toolfold.adapters.Secret("ab"), header, scheme):
            guard.add(secret)
    record = logging.LogRecord(
        "httpx", logging.DEBUG, __file__, 1, "%s", ("Bearer ab; x-api-key: ab; a cab",), None
    )
    assert guard.filter(record)
    assert record.getMessage() == "Bearer ***; x-api-key: ***; a cab"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("bad header x-api-key: a", "bad header x-api-key: ***"),  # "ab" cut after "a"
        ('{"x-api-key": "a', '{"x-api-key": "***'),
        ("bad header x-api-key: ", "bad header x-api-key: "),  # nothing of the key arrived
        ("ask a", "ask a"),  # "a" not after the header's name: a word
        ("the URL bob:p", "the URL bob:***"),  # the password "pw" cut after "p"
        ("the URL bob:", "the URL bob:"),
        ("provided: sk-proj-SECR", "provided: ***"),  # a long key's start
        ("provided: sk-proj-SECR\ufffd", "provided: ***"),  # with a character cut in two
        ("provided: sk", "provided: sk"),  # shorter than MIN_CUT_PREFIX
    ],
)
def test_a_cut_text_ending_in_a_secrets_start_masks_it(text: str, shown: str) -> None:
    """A body cut inside an echoed secret: the start of it that arrived is masked, a short key's
    only after what names it, a short password's only after its user."""
    from toolfold.adapters._http._keys import Secret, mask_cut_tail, url_secrets

    secrets = (
        *api_key_secrets(Secret("ab"), "x-api-key", ""),
        *url_secrets("http://bob:pw@127.0.0.1/"),
        Secret("sk-proj-SECRETKEY0123456789abcdef"),
    )
    assert mask_cut_tail(redact(text, secrets), secrets) == shown


@pytest.mark.parametrize("logger", ["httpx", "httpcore", "httpx2", "httpcore2", "aiohttp"])
def test_redact_logs_filters_each_http_clients_own_logger(
    installed: list[toolfold.adapters.RedactingFilter], logger: str
) -> None:
    """A handler attached to a client's own logger (not the root's) sees records scrubbed:
    httpx2's core logs as ``httpcore2``, which the filter missed."""
    key = "sk-" + "q" * 24
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    own = logging.getLogger(logger)
    handler, level, propagate = Keep(), own.level, own.propagate
    own.addHandler(handler)
    own.setLevel(logging.DEBUG)
    own.propagate = False
    try:
        installed.append(toolfold.adapters.redact_logs([key], handlers=[]))
        own.debug("send_request_headers.started headers=[(b'Authorization', b'Bearer %s')]", key)
    finally:
        own.removeHandler(handler)
        own.setLevel(level)
        own.propagate = propagate
    assert seen == ["send_request_headers.started headers=[(b'Authorization', b'Bearer ***')]"]
