"""SSE events with nothing to decode are skipped by every codec, not reported as errors.

The SSE standard dispatches ``data:`` with nothing after it as an event whose
data is empty; Anthropic sends ``event: ping`` anywhere in a stream
(providers.md §3), and a gateway may send one with no JSON at all. Each of
them, between the events of a recorded stream, leaves what the stream
decodes to unchanged; ``event: error`` stays an error however empty.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from cassettes import raw_response
from scripted_http import Reply, ScriptedServer
from test_stream_errors_alike import REQUEST, SSE, _model

from toolfold import StreamError
from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters.anthropic import _stream as anthropic
from toolfold.adapters.gemini import _stream as gemini
from toolfold.adapters.openai_chat import _stream as chat
from toolfold.adapters.openai_responses import _stream as responses

RECORDED = {
    "openai": "openai-chat-completions/stream-single-call.yaml",
    "anthropic": "anthropic-messages/stream-single-call-result-final.yaml",
    "gemini": "gemini-generate-content/stream-sse-parallel-2-calls.yaml",
    "openai-responses": "openai-responses/stream-single-call-result-final.yaml",
}
# (data, event): empty data as the standard dispatches it, blank data, and pings.
NOTHING = [
    ("", None),
    (" ", None),
    ("", "ping"),
    ("keep-alive", "ping"),
    ('{"type": "ping"}', "ping"),
]


def _wire(data: str, event: str | None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data}\n\n".encode() if data else f"{head}data:\n\n".encode()


KEEPALIVES = b"".join(_wire(data, event) for data, event in NOTHING)


def _decode(provider: str, data: str, event: str | None) -> tuple[Any, Any]:
    """One event through ``provider``'s codec from a fresh state: (state before, (state after, events))."""
    if provider == "openai":
        state: Any = chat.DecoderState("openai")
        return state, chat.decode_chunk(state, data, event)
    if provider == "anthropic":
        state = anthropic.DecoderState()
        return state, anthropic.decode_event(state, data, event)
    if provider == "gemini":
        state = gemini.DecoderState()
        return state, gemini.decode_event(state, SSEEvent(data, event))
    state = responses.DecoderState("openai-responses")
    return state, responses.decode_event(state, SSEEvent(data, event))


@pytest.mark.parametrize(("data", "event"), NOTHING)
@pytest.mark.parametrize("provider", list(RECORDED))
def test_every_codec_skips_an_event_with_nothing_to_decode(
    provider: str, data: str, event: str | None
) -> None:
    """Empty or blank data, and a ping whatever its data: no event, the state as it was.

    Each was a StreamError ("sent a stream event that is not JSON").
    """
    before, after = _decode(provider, data, event)
    assert after == (before, [])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_empty_error_event_is_still_an_error(provider: str) -> None:
    """``event: error`` with no data is not a keep-alive: the codec raises it."""
    with pytest.raises(StreamError, match="reported an error inside the stream"):
        _decode(provider, "", "error")


@pytest.mark.parametrize("data", ["", " "])
@pytest.mark.parametrize("provider", list(RECORDED))
def test_no_codec_skips_an_empty_error_event(provider: str, data: str) -> None:
    """With the transport's in-band check off (``inband_errors=False``) the codec alone sees
    ``event: error``: the Responses and Gemini codecs skipped an empty one as a keep-alive."""
    with pytest.raises(StreamError):
        _decode(provider, data, "error")


@pytest.mark.parametrize("provider", list(RECORDED))
def test_keepalives_between_recorded_events_change_nothing(
    http_server: ScriptedServer, opened: list[Any], provider: str
) -> None:
    """A recorded stream over HTTP decodes to the same events with the keep-alives between its events."""
    _, _, body = raw_response(RECORDED[provider], 0)
    padded = KEEPALIVES + re.sub(rb"(\r\n\r\n|\n\n)", lambda m: m.group(1) + KEEPALIVES, body)
    assert padded.count(b"event: ping") > 3
    streams = []
    for sent in (body, padded):
        http_server.add(Reply(headers=SSE, chunks=[sent]))
        model = _model(provider, http_server.url)
        opened.append(model)
        streams.append(list(model.stream_sync(REQUEST)))
    plain, kept = streams
    assert len(plain) > 3
    assert kept == plain
