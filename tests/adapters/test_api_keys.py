"""API keys come from the environment and never show in a repr, an error or a log line."""

from __future__ import annotations

import asyncio
import logging
import pickle

import httpx
import pytest
from scripted_http import Reply, ScriptedServer

from toolfold import ModelConfigError, ProviderError
from toolfold.adapters._keys import (
    API_KEY_ENV_VARS,
    RedactingFilter,
    Secret,
    redact,
    resolve_api_key,
)
from toolfold.adapters._transport import Transport

KEY = "sk-proj-SECRET-abcdef0123456789"


@pytest.mark.parametrize(
    ("provider", "variable"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("groq", "GROQ_API_KEY"),
        ("mistral", "MISTRAL_API_KEY"),
        ("deepseek", "DEEPSEEK_API_KEY"),
        ("openrouter", "OPENROUTER_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
    ],
)
def test_keys_come_from_the_usual_variables(provider: str, variable: str) -> None:
    """Each provider reads its usual environment variable."""
    assert variable in API_KEY_ENV_VARS[provider]
    key = resolve_api_key(provider, None, environ={variable: KEY})
    assert key is not None
    assert key.reveal() == KEY


def test_explicit_key_wins_and_blank_is_refused() -> None:
    """api_key= wins over the environment; an empty key is a config error."""
    key = resolve_api_key("openai", "sk-given", environ={"OPENAI_API_KEY": KEY})
    assert key is not None
    assert key.reveal() == "sk-given"
    with pytest.raises(ModelConfigError, match="empty"):
        resolve_api_key("openai", "  ", environ={})


def test_missing_key_names_the_variable() -> None:
    """No key anywhere is an error that says which variable to set, unless not required."""
    with pytest.raises(ModelConfigError, match="OPENAI_API_KEY"):
        resolve_api_key("openai", None, environ={})
    assert resolve_api_key("ollama", None, environ={}, required=False) is None


def test_secret_never_prints() -> None:
    """repr, str, f-strings and %-formatting of a Secret hide the value."""
    secret = Secret(KEY)
    percent = "%s" % secret  # noqa: UP031  (the old style must be safe too)
    for text in (repr(secret), str(secret), f"{secret}", percent, f"{secret!r}"):
        assert KEY not in text
        assert "***" in text
    assert KEY not in repr([secret, {"k": secret}])
    assert secret == Secret(KEY)
    assert secret != Secret("other")


def test_secret_refuses_pickling() -> None:
    """A Secret cannot be pickled into a checkpoint by accident."""
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(Secret(KEY))


def test_transport_repr_hides_the_key() -> None:
    """A transport's repr and vars-free printing never show the key."""
    transport = Transport("openai", "https://api.openai.com/v1", KEY)
    assert KEY not in repr(transport)
    assert KEY not in str(transport)


def test_error_never_echoes_the_key(http_server: ScriptedServer) -> None:
    """A server that echoes the Authorization header back gets it scrubbed from the error."""

    def echo(request):  # type: ignore[no-untyped-def]
        auth = request.headers["authorization"]
        return Reply(status=401, json={"error": {"message": f"Incorrect API key provided: {auth}"}})

    http_server.handler = echo
    transport = Transport("openai", http_server.url, KEY, retry=None)
    with pytest.raises(ProviderError) as caught:
        transport.post_json_sync("chat/completions", {})
    transport.close()
    error = caught.value
    for text in (
        str(error),
        repr(error),
        error.body,
        error.provider_message or "",
        repr(vars(error)),
    ):
        assert KEY not in text
    assert "Incorrect API key provided" in str(error)


def test_stream_error_never_echoes_the_key(http_server: ScriptedServer) -> None:
    """An in-band stream error quoting the key is scrubbed as well."""
    http_server.add(Reply(chunks=[f'data: {{"error": {{"message": "bad {KEY}"}}}}\n\n'.encode()]))
    transport = Transport("openai", http_server.url, KEY)

    async def run() -> None:
        async with transport:
            async for _ in transport.stream("x", {}):
                pass

    with pytest.raises(ProviderError) as caught:
        asyncio.run(run())
    assert KEY not in str(caught.value)
    assert KEY not in caught.value.body


def test_logging_filter_scrubs_records(caplog: pytest.LogCaptureFixture) -> None:
    """RedactingFilter removes the key from messages and their arguments."""
    logger = logging.getLogger("toolfold.test.keys")
    logger.addFilter(RedactingFilter([Secret(KEY)]))
    try:
        with caplog.at_level(logging.DEBUG, logger="toolfold.test.keys"):
            logger.debug("headers: %s", {"authorization": f"Bearer {KEY}"})
            logger.info(f"raw {KEY}")
    finally:
        logger.filters.clear()
    assert caplog.records
    assert KEY not in caplog.text
    assert "Bearer ***" in caplog.text


def test_debug_logs_carry_no_key(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """At DEBUG, the transport's records (requests, retries) never contain the key."""
    http_server.add(Reply(status=500, json={"error": {"message": f"echo {KEY}"}}), Reply(json={}))
    transport = Transport("openai", http_server.url, KEY, sleep_sync=lambda _: None)
    with caplog.at_level(logging.DEBUG, logger="toolfold.http"):
        transport.post_json_sync("x", {})
    transport.close()
    assert any("retrying POST" in r.getMessage() for r in caplog.records)
    assert any("HTTP 200" in r.getMessage() for r in caplog.records)
    assert KEY not in caplog.text


def test_httpx_debug_logs_carry_no_key(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """With an injected httpx client and httpx/httpcore logging at DEBUG, no record has the key."""
    http_server.add(Reply(json={}))
    with httpx.Client() as client:
        transport = Transport("openai", http_server.url, KEY, http_client=client)
        with caplog.at_level(logging.DEBUG):
            transport.post_json_sync("x", {})
    assert any(r.name.startswith(("httpx", "httpcore")) for r in caplog.records)
    assert KEY not in caplog.text


def test_redact_leaves_other_text() -> None:
    """redact only touches the secret's value."""
    assert redact(f"a {KEY} b", [Secret(KEY), None]) == "a *** b"
    assert redact("nothing here", [Secret(KEY)]) == "nothing here"
