"""Replay every recorded Gemini exchange through the public API, and rebuild every recorded request."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from cassettes import folder, load
from gemini_wire import has_ids, neutral_request, normalise, schema_form
from native_expectations import GEMINI

import toolfold
from toolfold.runtime import StreamState, finish_stream, fold_stream

FOLDER = "gemini-generate-content"
CASES = [(name, i) for name in folder(FOLDER) for i in range(len(load(name)))]
IDS = [f"{n.split('/')[1]}#{i}" for n, i in CASES]
KEY = "AIzaSyTestKey000000000000000000000000"


def model_name(uri: str) -> str:
    """The model named in a recorded URI."""
    found = re.search(r"/models/([^:]+):", uri)
    assert found is not None
    return found.group(1)


def replay(name: str, index: int) -> tuple[Any, httpx.Request, dict[str, Any]]:
    """Send the recorded request's neutral form through a Gemini model answered by the recording."""
    exchange = load(name)[index]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        content_type = exchange.response_headers.get("content-type", "application/json")
        return httpx.Response(
            exchange.status,
            headers={"content-type": content_type},
            content=exchange.response_text.encode(),
        )

    recorded = exchange.request_json
    streamed = "streamGenerateContent" in exchange.uri
    client = httpx.Client(transport=httpx.MockTransport(handler))
    model = toolfold.model(
        f"gemini:{model_name(exchange.uri)}",
        api_key=KEY,
        http_client=client,
        retry=0,
        schema_form=schema_form(recorded),
        stream_format="sse" if "alt=sse" in exchange.uri else "json",
    )
    request = neutral_request(recorded)
    result: Any
    try:
        if streamed:
            state = StreamState()
            for event in model.stream_sync(request):
                state = fold_stream(state, event)
            result = finish_stream(state, lambda i: f"missing-{i}")
        else:
            result = model.request_sync(request)
    except Exception as exc:  # the expectation checks it
        result = exc
    finally:
        client.close()
    return result, seen[0], recorded


def test_every_recorded_exchange_has_an_expectation() -> None:
    """The expectation table covers exactly the exchanges on disk."""
    assert {(n.split("/", 1)[1], i) for n, i in CASES} == set(GEMINI)
    assert len(folder(FOLDER)) == 9


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_recorded_response_parses_to_what_the_recording_shows(name: str, index: int) -> None:
    """Each recorded response or stream (SSE or JSON array) becomes the recorded calls, text, usage or error."""
    result, _, _ = replay(name, index)
    GEMINI[(name.split("/", 1)[1], index)].check(result)


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_request_rebuilt_from_neutral_messages_matches_the_recording(name: str, index: int) -> None:
    """Encoding the conversation the recording expresses gives the recorded body, semantically."""
    _, sent, recorded = replay(name, index)
    body = json.loads(sent.content)
    keep = has_ids(recorded)
    assert normalise(body, keep_ids=keep) == normalise(recorded, keep_ids=keep)


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_the_key_travels_in_the_header_and_the_path_is_the_recorded_one(
    name: str, index: int
) -> None:
    """x-goog-api-key carries the key; the URL path (and alt=sse) is the recorded one, with no key in it."""
    _, sent, _ = replay(name, index)
    recorded_uri = httpx.URL(load(name)[index].uri)
    assert sent.headers["x-goog-api-key"] == KEY
    assert sent.url.path == recorded_uri.path
    assert sent.url.query == recorded_uri.query
    assert KEY not in str(sent.url)


def test_calls_without_ids_get_the_same_ids_streamed_and_not() -> None:
    """Id-less calls get deterministic ids: replaying twice gives the same ones."""
    first, _, _ = replay(f"{FOLDER}/parallel-2-calls.yaml", 0)
    again, _, _ = replay(f"{FOLDER}/parallel-2-calls.yaml", 0)
    ids = [c.id for c in first.tool_calls]
    assert ids == [c.id for c in again.tool_calls]
    assert len(set(ids)) == 2


def test_thought_signatures_are_kept_on_the_calls() -> None:
    """A call's thoughtSignature lands in provider_data, exactly as received."""
    result, _, _ = replay(f"{FOLDER}/parallel-3-calls-multi-step.yaml", 0)
    recorded = load(f"{FOLDER}/parallel-3-calls-multi-step.yaml")[0].response_json
    parts = recorded["candidates"][0]["content"]["parts"]
    assert [c.provider_data.get("thought_signature") for c in result.tool_calls] == [
        p.get("thoughtSignature") for p in parts
    ]
