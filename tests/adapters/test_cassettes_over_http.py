"""Every recorded exchange replayed over 127.0.0.1 through every backend, bytes as recorded.

The other cassette tests hand the recorded text to ``httpx.MockTransport``;
here the server sends the recorded bytes (gzip kept, with its
``content-encoding``) as a chunked body cut at random points, so each
client's HTTP parsing, the transport's decompression and SSE decoding meet
real answers, on httpx, httpx2 (where installed) and aiohttp.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from backends import cases
from cassettes import folder, load, neutral_request, raw_response
from replay_expectations import (
    COMPATIBLE,
    COMPATIBLE_PROVIDERS,
    GROQ,
    MISTRAL,
    OPENAI,
    Answer,
    Failure,
)
from replay_over_http import recorded_reply, run
from scripted_http import ScriptedServer

from toolfold import RateLimitError
from toolfold.adapters.openai_chat import OpenAIChatModel

TABLES: dict[str, dict[tuple[str, int], Answer | Failure]] = {
    "openai-chat-completions": OPENAI,
    "groq-chat-completions": GROQ,
    "mistral-chat-completions": MISTRAL,
    "openai-compatible": COMPATIBLE,
}
FOLDER_PROVIDERS = {
    "openai-chat-completions": "openai",
    "groq-chat-completions": "groq",
    "mistral-chat-completions": "mistral",
}
CASES = [
    (name, i)
    for folder_name in TABLES
    for name in folder(folder_name)
    for i in range(len(load(name)))
]
IDS = [f"{n}#{i}" for n, i in CASES]


def model_for(name: str, server: ScriptedServer, **options: Any) -> OpenAIChatModel:
    folder_name, file = name.split("/", 1)
    provider = FOLDER_PROVIDERS.get(folder_name) or COMPATIBLE_PROVIDERS[file][0]
    options.setdefault("retry", 0)
    if "gemini-openai-endpoint" in file:
        options["server"] = "gemini"  # chosen by the base URL, which is 127.0.0.1 here
    return OpenAIChatModel(
        load(name)[0].request_json["model"],
        provider=provider,
        base_url=f"{server.url}/v1",
        api_key="sk-test-key-0000",
        **options,
    )


def replayed(model: OpenAIChatModel, recorded: Any, mode: str) -> Any:
    """The model's answer to the recorded request (a stream folded), or the exception raised."""
    return run(model, neutral_request(recorded), bool(recorded.get("stream")), mode)


@pytest.mark.parametrize(("backend", "mode"), cases())
@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_recorded_bytes_through_every_backend(
    http_server: ScriptedServer, name: str, index: int, backend: str, mode: str
) -> None:
    """The recorded bytes, randomly chunked, parse to what the recording shows, on each backend."""
    http_server.add(recorded_reply(name, index, seed=zlib.crc32(f"{name}#{index}#{mode}".encode())))
    exchange = load(name)[index]
    result = replayed(model_for(name, http_server, http=backend), exchange.request_json, mode)
    folder_name, file = name.split("/", 1)
    TABLES[folder_name][(file, index)].check(result)
    (sent,) = http_server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["accept-encoding"] == "gzip, deflate"


def test_some_recorded_bodies_are_gzipped() -> None:
    """The replay above does meet gzipped bodies (else it would not test decompression)."""
    encodings = [raw_response(n, i)[1].get("content-encoding") for n, i in CASES]
    assert encodings.count("gzip") >= 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_openrouter_three_429s_with_retries(http_server: ScriptedServer, mode: str) -> None:
    """The three recorded OpenRouter 429s, retries on: three attempts, two backoffs, then the error."""
    name = "openai-compatible/openrouter-error-429-rate-limited.yaml"
    for index in range(3):
        http_server.add(recorded_reply(name, index, seed=index))
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    model = model_for(name, http_server, retry=2)
    sender = model._transport._sender  # type: ignore[attr-defined]
    sender.sleep, sender.sleep_sync, sender.random = sleep, waits.append, lambda: 0.0
    result = replayed(model, load(name)[0].request_json, mode)
    assert isinstance(result, RateLimitError)
    assert "temporarily rate-limited upstream" in str(result)
    assert len(http_server.requests) == 3
    assert waits == [0.5, 1.0]  # no retry-after recorded: exponential backoff
