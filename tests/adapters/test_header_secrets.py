"""Credentials given in headers= (an Azure api-key, an Authorization) are kept secret like the key."""

from __future__ import annotations

import asyncio
import json
import logging
import traceback

import pytest
from backends import OWNED
from scripted_http import Recorded, Reply, ScriptedServer

import toolfold
from toolfold import ModelConfigError, ProviderError
from toolfold.adapters import Secret
from toolfold.adapters._http._transport import Transport
from toolfold.runtime import Message, ModelRequest

TOKEN = "AZURESECRETVALUE123"
REQUEST = ModelRequest(messages=(Message.user("hi"),))


@pytest.mark.parametrize(
    "headers",
    [
        {"api-key": TOKEN + "\n"},  # open("key.txt").read()
        {"Authorization": f"Bearer {TOKEN}\n"},
        {"x-team": TOKEN + "\r\nx-b: 1"},
        {"x-team": f" {TOKEN}"},
        {"x-team": TOKEN + "\x7f"},
        {"api-key": Secret(TOKEN + "\n")},
    ],
)
def test_a_refused_header_value_is_never_quoted(headers: dict[str, object]) -> None:
    """The ModelConfigError names the header and the problem, and says "the value", not the value."""
    with pytest.raises(ModelConfigError, match=r"headers\['[\w-]+'\]: the value ") as caught:
        toolfold.model("openai-compatible:m", base_url="http://127.0.0.1:9/v1", headers=headers)
    assert TOKEN not in str(caught.value)


def test_a_header_value_of_the_wrong_type_is_named_by_its_type() -> None:
    """A value neither a string nor a Secret is refused by its type only."""
    with pytest.raises(ModelConfigError, match=r"the value must be a string or a Secret, not int"):
        toolfold.model("openai:m", base_url="http://127.0.0.1:9/v1", api_key="k", headers={"a": 5})


def _echo_headers(request: Recorded) -> Reply:
    """A 400 that writes every header it was sent into its body and its own headers."""
    sent = dict(request.headers)
    message = {"error": {"message": f"bad request, you sent {json.dumps(sent)}"}}
    echoed = {f"x-echo-{name}": value for name, value in sent.items() if name != "content-length"}
    return Reply(status=400, json=message, headers=echoed)


@pytest.mark.parametrize("backend", OWNED)
@pytest.mark.parametrize(
    ("headers", "shown"),
    [
        ({"api-key": TOKEN}, TOKEN),
        ({"api-key": Secret(TOKEN)}, TOKEN),
        ({"Ocp-Apim-Subscription-Key": TOKEN}, TOKEN),
        ({"X-Custom-Token": TOKEN}, TOKEN),
        # a server may echo the credential after the scheme alone
        ({"Authorization": f"Bearer {TOKEN}"}, TOKEN),
    ],
)
def test_an_echoed_header_credential_is_scrubbed_from_errors_tracebacks_and_logs(
    http_server: ScriptedServer,
    caplog: pytest.LogCaptureFixture,
    backend: str,
    headers: dict[str, object],
    shown: str,
) -> None:
    """A headers= credential echoed by a server is masked in the error, its headers, the whole
    traceback and the HTTP stack's DEBUG lines, as the key is; other headers stay readable."""
    http_server.handler = _echo_headers
    model = toolfold.model(
        "openai:m",
        base_url=http_server.url,
        # (an Authorization header is the key's own: it stands in for one, refused with one)
        api_key=None if "Authorization" in headers else "sk-realkey-abcdef",
        headers={**headers, "x-team": "research"},
        http=backend,
        retry=0,
    )

    async def call() -> None:
        try:
            await model.request(REQUEST)
        finally:
            await model.aclose()

    with caplog.at_level(logging.DEBUG), pytest.raises(ProviderError) as caught:
        asyncio.run(call())
    sent = http_server.requests[0].headers
    assert any(value.endswith(shown) for value in sent.values())  # the credential was sent
    text = "".join(traceback.format_exception(caught.value))
    assert "research" in text  # a plain header is shown...
    assert shown not in text  # ...the credential never
    assert shown not in repr(caught.value.headers)
    assert "***" in text
    assert shown not in caplog.text


def test_header_credentials_are_held_as_secrets_and_sent_at_send_time(
    http_server: ScriptedServer,
) -> None:
    """No attribute of a transport shows a headers= credential; it reaches the wire unchanged,
    and a per-request header of the same name still wins."""
    http_server.add(Reply(json={}), Reply(json={}))
    transport = Transport(
        "openai", http_server.url, None, headers={"api-key": TOKEN, "x-b": Secret("b-value-1")}
    )
    assert TOKEN not in repr(vars(transport))
    assert "b-value-1" not in repr(vars(transport))
    transport.post_json_sync("x", {})
    transport.post_json_sync("x", {}, headers={"API-Key": "other"})
    transport.close()
    first, second = http_server.requests
    assert first.headers["api-key"] == TOKEN
    assert first.headers["x-b"] == "b-value-1"
    assert second.headers["api-key"] == "other"


def test_a_secret_anthropic_beta_header_joins_the_strict_beta() -> None:
    """Anthropic reads the user's anthropic-beta header even when it is given as a Secret."""
    model = toolfold.model(
        "anthropic:claude-x",
        base_url="http://127.0.0.1:9",
        api_key="k",
        headers={"anthropic-beta": Secret("files-api-2025-04-14")},
    )
    assert model._beta_headers["anthropic-beta"].startswith("files-api-2025-04-14,")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "credential"),
    [
        ("Authorization", True),
        ("proxy-authorization", True),
        ("api-key", True),
        ("x-api-key", True),
        ("x-goog-api-key", True),
        ("X-Goog-Api-Key", True),
        ("cf-aig-authorization", True),
        ("x-portkey-api-key", True),
        ("x_portkey_api_key", True),
        ("x-portkey-virtual-key", True),
        ("Helicone-Auth", True),
        ("x-amz-security-token", True),
        ("cookie", True),
        ("X-Cookie", True),
        ("Ocp-Apim-Subscription-Key", True),
        ("x-functions-key", True),
        ("xi-api-key", True),
        ("apikey", True),
        ("x-apikey", True),
        ("AccessKey", True),
        ("X-RapidAPI-Key", True),
        ("key", True),
        ("x-key", True),
        ("x-auth-token", True),
        ("X-Auth-Email", True),
        ("X-AuthToken", True),
        ("X-AccessToken", True),
        ("PRIVATE-TOKEN", True),
        ("X-Subscription-Token", True),
        ("X-Shopify-Access-Token", True),
        ("DD-API-KEY", True),
        ("DD-APPLICATION-KEY", True),
        ("X-Insert-Key", True),
        ("X-License-Key", True),
        ("X-Application-Key", True),
        ("Modal-Key", True),
        ("Modal-Secret", True),
        ("x-secret", True),
        ("X-Api-Secret", True),
        ("CF-Access-Client-Secret", True),
        ("x-credentials", True),
        ("x-hub-signature", True),
        ("X-Goog-Iap-Jwt-Assertion", True),
        ("x-session-id", True),
        ("x-password", True),
        ("X-Honeycomb-Team", True),
        ("x-deployment-key", True),
        ("x-tokenizer", True),
        ("x-author", True),
        ("x-amz-date", False),
        ("X-Goog-User-Project", False),
        ("openai-organization", False),
        ("OpenAI-Project", False),
        ("anthropic-version", False),
        ("anthropic-beta", False),
        ("idempotency-key", False),
        ("x-idempotency-key", False),
        ("X-Cache-Key", False),
        ("x-keyword", False),
        ("x-team", False),
        ("X-Amz-Content-Sha256", False),
        ("HTTP-Referer", False),
        ("X-Title", False),
        ("x-request-id", False),
    ],
)
def test_a_header_is_a_credential_unless_its_name_is_known_to_hold_none(
    name: str, credential: bool
) -> None:
    """Every name with a word ending in key or holding token/auth/secret/cookie/... is secret, save known request/cache keys."""
    from toolfold.adapters._http._keys import is_credential_header

    assert is_credential_header(name) is credential


@pytest.mark.parametrize("name", ["x-portkey-virtual-key", "DD-APPLICATION-KEY", "X-Insert-Key"])
def test_a_key_header_value_a_server_quotes_is_hidden(
    http_server: ScriptedServer, name: str
) -> None:
    """A gateway's or vendor's own key header (not api-key) given as a plain str is hidden in an error that quotes it."""
    body = {"error": {"message": "invalid key vk-prod-9f8e7d6c5b4a"}}
    http_server.add(Reply(status=401, json=body))
    transport = Transport(
        "openai", http_server.url, "sk-abcdef123456", headers={name: "vk-prod-9f8e7d6c5b4a"}
    )
    with pytest.raises(ProviderError) as caught:
        transport.post_json_sync("chat", {})
    transport.close()
    assert "vk-prod-9f8e7d6c5b4a" not in str(caught.value)
    assert "invalid key ***" in str(caught.value)


def test_a_header_naming_no_credential_is_shown_in_errors(http_server: ScriptedServer) -> None:
    """x-idempotency-key is no credential: its value stays readable in an error that quotes it; a Secret value of it is still hidden."""
    body = {"error": {"message": "request gpt-4o-mini-0001 for idempotency was reused"}}
    http_server.add(Reply(status=400, json=body), Reply(status=400, json=body))
    for value, shown in (("gpt-4o-mini-0001", True), (Secret("gpt-4o-mini-0001"), False)):
        transport = Transport(
            "openai", http_server.url, "sk-abcdef123456", headers={"x-idempotency-key": value}
        )
        with pytest.raises(ProviderError) as caught:
            transport.post_json_sync("chat", {})
        transport.close()
        assert ("request gpt-4o-mini-0001 for" in str(caught.value)) is shown
