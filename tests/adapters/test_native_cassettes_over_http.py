"""Gemini and Responses recordings replayed over 127.0.0.1 through every backend, bytes as recorded.

The server sends each recorded body as it was stored (gzip kept, with its
``content-encoding``), cut at random points into HTTP chunks, so the clients'
decompression, the SSE decoder and Gemini's streamed-JSON-array reader all
meet real answers split where a network would split them.
"""

from __future__ import annotations

import zlib
from typing import Any

import gemini_wire
import httpx
import pytest
import responses_wire
from backends import cases
from cassettes import folder, load, raw_response
from native_expectations import GEMINI, RESPONSES
from replay_over_http import recorded_reply, run
from scripted_http import ScriptedServer
from test_gemini_cassettes import model_name

import toolfold
from toolfold.runtime import ModelRequest

TABLES = {"gemini-generate-content": GEMINI, "openai-responses": RESPONSES}
CASES = [(name, i) for f in TABLES for name in folder(f) for i in range(len(load(name)))]
IDS = [f"{n}#{i}" for n, i in CASES]


def model_and_request(
    name: str, index: int, server: ScriptedServer, http: str | None = None
) -> tuple[Any, ModelRequest, bool]:
    """The model the recording talked to (pointed at ``server``), the neutral request, streamed or not."""
    exchange = load(name)[index]
    recorded = exchange.request_json
    if name.startswith("gemini"):
        model = toolfold.model(
            f"gemini:{model_name(exchange.uri)}",
            base_url=server.url,
            api_key="AIzaTestKey0000000000",
            retry=0,
            http=http,
            schema_form=gemini_wire.schema_form(recorded),
            stream_format="sse" if "alt=sse" in exchange.uri else "json",
        )
        return model, gemini_wire.neutral_request(recorded), "streamGenerateContent" in exchange.uri
    try:
        request = responses_wire.neutral_request(recorded)
    except responses_wire.NotNeutral:
        request = responses_wire.neutral_request({**recorded, "input": recorded["input"][:-1]})
    model = toolfold.model(
        f"openai-responses:{recorded['model']}",
        base_url=f"{server.url}/v1",
        api_key="sk-test-key-0000",
        retry=0,
        http=http,
    )
    return model, request, bool(recorded.get("stream"))


@pytest.mark.parametrize(("backend", "mode"), cases())
@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_recorded_bytes_through_every_backend(
    http_server: ScriptedServer, name: str, index: int, backend: str, mode: str
) -> None:
    """The recorded bytes, randomly chunked, parse to what the recording shows, on each backend."""
    http_server.add(recorded_reply(name, index, seed=zlib.crc32(f"{name}#{index}#{mode}".encode())))
    model, request, streamed = model_and_request(name, index, http_server, backend)
    result = run(model, request, streamed, mode)
    folder_name, file = name.split("/", 1)
    TABLES[folder_name][(file, index)].check(result)
    (sent,) = http_server.requests
    assert sent.path == httpx.URL(load(name)[index].uri).raw_path.decode()


def test_gzipped_recordings_are_among_them() -> None:
    """The replay meets gzipped bodies, both Gemini's streamed JSON array and a Responses answer."""
    gzipped = [n for n, i in CASES if raw_response(n, i)[1].get("content-encoding") == "gzip"]
    assert any(n.startswith("gemini") and "json-array" in n for n in gzipped)
    assert any(n.startswith("openai-responses") for n in gzipped)
