"""Replay every recorded OpenAI Responses exchange through the public API, and rebuild every request."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from cassettes import answer, folder, load
from native_expectations import RESPONSES
from responses_wire import NotNeutral, neutral_request, normalise

import toolfold

FOLDER = "openai-responses"
CASES = [(name, i) for name in folder(FOLDER) for i in range(len(load(name)))]
IDS = [f"{n.split('/')[1]}#{i}" for n, i in CASES]
KEY = "sk-test-key-0000000000"
# The only request neutral messages cannot express: its tool output is a file by URL
# with no media type (an audio file, which the API refused; toolfold would describe it).
NOT_NEUTRAL = {("error-400-after-tool-result.yaml", 1)}
# The recording sent strict: true with an optional property and got HTTP 400
# ("'required' ... Missing 'unit'"); toolfold's strict compilation makes every
# property required (optional ones nullable), so its request differs there, as it should.
STRICT_FIXED = {("error-400-invalid-tool-schema.yaml", 1)}


def replay(name: str, index: int) -> tuple[Any, httpx.Request, dict[str, Any]]:
    """Send the recorded request's neutral form through a Responses model answered by the recording."""
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
    try:
        request = neutral_request(recorded)
    except NotNeutral:
        # Send what can be said neutrally: the same conversation without the file output.
        request = neutral_request({**recorded, "input": recorded["input"][:-1]})
    client = httpx.Client(transport=httpx.MockTransport(handler))
    model = toolfold.model(
        f"openai-responses:{recorded['model']}", api_key=KEY, http_client=client, retry=0
    )
    result: Any
    try:
        result = answer(model, request, bool(recorded.get("stream")))
    except Exception as exc:  # the expectation checks it
        result = exc
    finally:
        client.close()
    return result, seen[0], recorded


def test_every_recorded_exchange_has_an_expectation() -> None:
    """The expectation table covers exactly the exchanges on disk."""
    assert {(n.split("/", 1)[1], i) for n, i in CASES} == set(RESPONSES)
    assert len(folder(FOLDER)) == 10


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_recorded_response_parses_to_what_the_recording_shows(name: str, index: int) -> None:
    """Each recorded response or event stream becomes the recorded calls, text, usage or error."""
    result, _, _ = replay(name, index)
    RESPONSES[(name.split("/", 1)[1], index)].check(result)


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_request_rebuilt_from_neutral_messages_matches_the_recording(name: str, index: int) -> None:
    """Encoding the conversation the recording expresses gives the recorded body, semantically."""
    _, sent, recorded = replay(name, index)
    body = json.loads(sent.content)
    if (name.split("/", 1)[1], index) in NOT_NEUTRAL:
        with pytest.raises(NotNeutral):
            neutral_request(recorded)
        recorded = {**recorded, "input": recorded["input"][:-1]}
    assert sent.url.path == "/v1/responses"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    if (name.split("/", 1)[1], index) in STRICT_FIXED:
        (tool,) = body.pop("tools")
        recorded = {k: v for k, v in recorded.items() if k != "tools"}
        schema = tool["parameters"]
        assert tool["strict"] is True
        assert sorted(schema["required"]) == sorted(schema["properties"]) == ["location", "unit"]
        assert schema["properties"]["unit"]["type"] == ["string", "null"]
    assert normalise(body) == normalise(recorded)


def test_reasoning_items_are_kept_and_sent_back_unchanged() -> None:
    """A reasoning item (id, encrypted content) parsed from a response goes back as the same item."""
    name = f"{FOLDER}/single-call-tool-choice-required.yaml"
    result, _, _ = replay(name, 0)
    (reasoning,) = [p for p in result.message.parts if p.kind == "reasoning"]
    recorded = load(name)[0].response_json["output"][0]
    from toolfold.adapters.openai_responses import reasoning_item

    assert reasoning_item(reasoning) == {
        "type": "reasoning",
        "id": recorded["id"],
        "summary": [],
        "encrypted_content": recorded["encrypted_content"],
    }
    assert result.tool_calls[0].provider_data == {
        "item_id": load(name)[0].response_json["output"][1]["id"]
    }
