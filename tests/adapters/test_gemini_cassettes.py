"""Replay every recorded Gemini exchange through the public API, and rebuild every recorded request."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from cassettes import answer, folder, load
from gemini_wire import has_ids, neutral_request, normalise, schema_form
from native_expectations import GEMINI

import toolfold
from toolfold.adapters.gemini import GeminiModel

FOLDER = "gemini-generate-content"
CASES = [(name, i) for name in folder(FOLDER) for i in range(len(load(name)))]
IDS = [f"{n.split('/')[1]}#{i}" for n, i in CASES]
KEY = "AIzaSyTestKey000000000000000000000000"


def model_name(uri: str) -> str:
    """The model named in a recorded URI."""
    found = re.search(r"/models/([^:]+):", uri)
    assert found is not None
    return found.group(1)


def _recast(exchange: Any, streamed: bool) -> tuple[str, str]:
    """The recorded answer (content type, text) in the other form: one SSE event <-> one whole body."""
    if streamed:
        return "text/event-stream", f"data: {json.dumps(exchange.response_json)}\n\n"
    events = [line for line in exchange.response_text.splitlines() if line.startswith("data:")]
    assert len(events) == 1, "only a one-event stream is one whole response"
    return "application/json", events[0].removeprefix("data:").strip()


def replay(
    name: str, index: int, *, streamed: bool | None = None
) -> tuple[Any, httpx.Request, dict[str, Any]]:
    """Send the recorded request's neutral form through a Gemini model answered by the recording.

    ``streamed`` asks for the other form than the recorded one: the recorded
    answer is served as one SSE event, or a one-event SSE recording as a whole body.
    """
    exchange = load(name)[index]
    seen: list[httpx.Request] = []
    recorded_stream = "streamGenerateContent" in exchange.uri
    if streamed is None or streamed == recorded_stream:
        streamed = recorded_stream
        content_type = exchange.response_headers.get("content-type", "application/json")
        text = exchange.response_text
        sse = "alt=sse" in exchange.uri
    else:
        content_type, text = _recast(exchange, streamed)
        sse = True

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            exchange.status, headers={"content-type": content_type}, content=text.encode()
        )

    recorded = exchange.request_json
    client = httpx.Client(transport=httpx.MockTransport(handler))
    model = toolfold.model(
        f"gemini:{model_name(exchange.uri)}",
        api_key=KEY,
        http_client=client,
        retry=0,
        schema_form=schema_form(recorded),
        stream_format="sse" if sse else "json",
    )
    request = neutral_request(recorded)
    result: Any
    try:
        result = answer(model, request, streamed)
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


@pytest.mark.parametrize("name", ["parallel-2-calls.yaml", "stream-sse-parallel-2-calls.yaml"])
def test_calls_without_ids_get_the_same_ids_streamed_and_not(name: str) -> None:
    """Id-less calls get deterministic ids: a recorded answer gives the same ones streamed, whole, and on every replay."""
    whole, whole_sent, _ = replay(f"{FOLDER}/{name}", 0, streamed=False)
    streamed, streamed_sent, _ = replay(f"{FOLDER}/{name}", 0, streamed=True)
    again, _, _ = replay(f"{FOLDER}/{name}", 0)
    assert whole_sent.url.path.endswith(":generateContent")
    assert streamed_sent.url.path.endswith(":streamGenerateContent")
    ids = [c.id for c in whole.tool_calls]
    assert len(set(ids)) == 2
    assert not any(i.startswith("missing-") for i in ids)
    assert [c.id for c in streamed.tool_calls] == ids
    assert [c.id for c in again.tool_calls] == ids
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in whole.tool_calls
    ]


def test_the_two_recordings_of_one_question_differ_only_in_their_ids() -> None:
    """The streamed and whole recordings of the same two calls give the same calls, ids seeded by their own response ids."""
    whole, _, _ = replay(f"{FOLDER}/parallel-2-calls.yaml", 0)
    streamed, _, _ = replay(f"{FOLDER}/stream-sse-parallel-2-calls.yaml", 0)
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in whole.tool_calls
    ]
    assert {c.id for c in streamed.tool_calls}.isdisjoint(c.id for c in whole.tool_calls)


@pytest.mark.parametrize("env", ["GEMINI_API_KEY", "GOOGLE_API_KEY"])
def test_the_google_prefix_is_the_gemini_api(env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``google:<model>`` is named google, takes GEMINI_API_KEY else GOOGLE_API_KEY, and sends Gemini's request."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv(env, KEY)
    if env == "GOOGLE_API_KEY":
        monkeypatch.setenv("GEMINI_API_KEY", "")  # empty: not a key, the next name is used
    exchange = load(f"{FOLDER}/parallel-2-calls.yaml")[0]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=exchange.response_json)

    client = httpx.Client(transport=httpx.MockTransport(handler))
    model = toolfold.model("google:gemini-2.0-flash", http_client=client)
    assert isinstance(model, GeminiModel)
    assert model.name == "google:gemini-2.0-flash"
    assert model.base_url == "https://generativelanguage.googleapis.com"
    response = model.request_sync(neutral_request(exchange.request_json))
    client.close()
    assert [c.name for c in response.tool_calls] == ["get_weather", "get_weather"]
    (sent,) = seen
    assert str(sent.url) == exchange.uri
    assert sent.headers["x-goog-api-key"] == KEY
    assert KEY not in repr(model)


@pytest.mark.parametrize(
    ("base_url", "path"),
    [
        ("https://gw.example/google-ai-studio/v1beta", "/google-ai-studio/v1beta/models/"),
        ("https://gw.example/google-ai-studio/v1beta/", "/google-ai-studio/v1beta/models/"),
        ("https://gw.example/google-ai-studio", "/google-ai-studio/v1beta/models/"),
        ("https://gw.example/v1beta/x", "/v1beta/x/v1beta/models/"),  # not its last segment
    ],
)
def test_a_base_url_ending_in_the_api_version_is_not_doubled(base_url: str, path: str) -> None:
    """A base URL ending in /v1beta, as gateways give Gemini's, is the API root without it:
    the request went to .../v1beta/v1beta/models/..., a 404 with no hint."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        text = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}}]}
        return httpx.Response(200, json=text)

    client = httpx.Client(transport=httpx.MockTransport(handler))
    model = toolfold.model(
        "gemini:gemini-2.5-flash", base_url=base_url, api_key=KEY, http_client=client
    )
    assert toolfold.generate_text(model, "hello").text == "hi"
    client.close()
    assert seen[0].url.path == f"{path}gemini-2.5-flash:generateContent"


def test_the_google_prefix_without_a_key_names_both_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No key for ``google:`` is an error naming GEMINI_API_KEY and GOOGLE_API_KEY."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(toolfold.ModelConfigError, match=r"GEMINI_API_KEY.*GOOGLE_API_KEY"):
        toolfold.model("google:gemini-2.0-flash")


def test_thought_signatures_are_kept_on_the_calls() -> None:
    """A call's thoughtSignature lands in provider_data, exactly as received."""
    result, _, _ = replay(f"{FOLDER}/parallel-3-calls-multi-step.yaml", 0)
    recorded = load(f"{FOLDER}/parallel-3-calls-multi-step.yaml")[0].response_json
    parts = recorded["candidates"][0]["content"]["parts"]
    assert [c.provider_data.get("thought_signature") for c in result.tool_calls] == [
        p.get("thoughtSignature") for p in parts
    ]
