"""Replay every recorded Anthropic Messages exchange through `AnthropicModel`.

Through ``httpx.MockTransport`` (the recorded text), and over 127.0.0.1 through
the default clients with the recorded bytes (gzip kept) cut into random
chunks, sync and async; the request each replay sends is rebuilt from neutral
messages and compared with the recorded one, and validated against the spec.
"""

from __future__ import annotations

import zlib
from typing import Any

import httpx
import pytest
from anthropic_cassettes import (
    ANTHROPIC,
    CASES,
    FOLDER,
    IDS,
    neutral_request,
    normalise_body,
    spec_problems,
)
from backends import cases
from cassettes import Recorder, folder, load, raw_response
from replay_over_http import recorded_reply, run
from scripted_http import ScriptedServer

from toolfold.adapters.anthropic import AnthropicModel, is_beta

KEY = "sk-ant-test-key-0000000000"


def _key(name: str, index: int) -> tuple[str, int]:
    return name.split("/", 1)[1], index


def replayed(model: AnthropicModel, recorded: Any, mode: str = "sync") -> Any:
    """The model's answer to the recorded request (a stream folded), or the exception raised."""
    return run(model, neutral_request(recorded), bool(recorded.get("stream")), mode)


def replay(name: str, index: int) -> tuple[Any, Any, Any]:
    """``(result, body sent, body recorded)`` through ``httpx.MockTransport``."""
    exchange = load(name)[index]
    recorder = Recorder((exchange,))
    client = httpx.Client(transport=httpx.MockTransport(recorder.handler))
    model = AnthropicModel(
        exchange.request_json["model"],
        base_url="http://127.0.0.1:9",
        api_key=KEY,
        http_client=client,
        retry=0,
    )
    try:
        result = replayed(model, exchange.request_json)
    finally:
        client.close()
    return result, recorder.sent[0], exchange.request_json


def test_every_recorded_exchange_has_an_expectation() -> None:
    """The expectation table covers exactly the 11 files and their exchanges on disk."""
    assert {_key(n, i) for n, i in CASES} == set(ANTHROPIC)
    assert len(folder(FOLDER)) == 11


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_recorded_response_parses_to_what_the_recording_shows(name: str, index: int) -> None:
    """Each recorded response or stream becomes the recorded calls, text, usage, thinking or error."""
    result, _, _ = replay(name, index)
    ANTHROPIC[_key(name, index)].check(result)


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_request_rebuilt_from_neutral_messages_matches_the_recording(name: str, index: int) -> None:
    """Encoding the conversation the recording expresses gives the recorded body, semantically."""
    _, sent, recorded = replay(name, index)
    assert normalise_body(sent) == normalise_body(recorded)


# The one recorded request the spec refuses is the one the API refused too:
# effort "xhigh" is outside the spec's enum, and the recorded answer is a 400.
SPEC_REFUSES = {
    ("error-400-invalid-option.yaml", 0): [
        "output_config/effort: 'xhigh' is not valid under any of the given schemas"
    ]
}


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_rebuilt_request_validates_against_the_spec(name: str, index: int) -> None:
    """Each rebuilt body is a valid (Beta)CreateMessageParams of Anthropic's OpenAPI document."""
    _, sent, _ = replay(name, index)
    assert spec_problems(sent, beta=is_beta(sent)) == SPEC_REFUSES.get(_key(name, index), [])


def test_thinking_block_goes_back_unchanged_with_its_signature() -> None:
    """The signed thinking block parsed from step 1 is sent in step 2 exactly as recorded."""
    name = f"{FOLDER}/thinking-single-call-result-final.yaml"
    first, _, _ = replay(name, 0)
    (thinking,) = [p for p in first.message.parts if p.kind == "reasoning"]
    _, sent, recorded = replay(name, 1)
    recorded_block = recorded["messages"][1]["content"][0]
    assert recorded_block["type"] == "thinking"
    assert sent["messages"][1]["content"][0] == recorded_block
    assert (thinking.text, thinking.signature) == (
        recorded_block["thinking"],
        recorded_block["signature"],
    )


@pytest.mark.parametrize(("backend", "mode"), cases())
@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_recorded_bytes_through_every_backend(
    http_server: ScriptedServer, name: str, index: int, backend: str, mode: str
) -> None:
    """The recorded bytes, randomly chunked over 127.0.0.1, parse to what the recording shows."""
    http_server.add(recorded_reply(name, index, seed=zlib.crc32(f"{name}#{index}#{mode}".encode())))
    recorded = load(name)[index].request_json
    model = AnthropicModel(
        recorded["model"], base_url=http_server.url, api_key=KEY, retry=0, http=backend
    )
    result = replayed(model, recorded, mode)
    ANTHROPIC[_key(name, index)].check(result)
    (sent,) = http_server.requests
    beta = is_beta(sent.json())
    assert sent.path == ("/v1/messages?beta=true" if beta else "/v1/messages")
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert ("anthropic-beta" in sent.headers) is beta
    assert "authorization" not in sent.headers


def test_some_recorded_bodies_are_gzipped() -> None:
    """The replay above meets gzipped bodies, streamed and not (else it would not test decompression)."""
    gzipped = [n for n, i in CASES if raw_response(n, i)[1].get("content-encoding") == "gzip"]
    assert any("stream" in n for n in gzipped)
    assert any("stream" not in n for n in gzipped)
