"""The incremental SSE decoder and the NDJSON line decoder."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.adapters._http._http_errors import inband_error
from toolfold.adapters._http._sse import LineDecoder, SSEDecoder, SSEEvent

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "provider-traffic"


def decode_all(chunks: list[bytes] | list[str]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events


def _body_text(value: Any) -> str | None:
    if isinstance(value, bytes):
        if value[:2] == b"\x1f\x8b":
            value = gzip.decompress(value)
        return value.decode("utf-8")
    return value if isinstance(value, str) else None


def recorded_streams() -> list[tuple[str, str]]:
    """Every SSE body in the shared cassettes, as (file name, body text)."""
    found = []
    for path in sorted(FIXTURES.glob("*/*.yaml")):
        data = yaml.safe_load(path.read_text())
        for number, interaction in enumerate(data.get("interactions", [])):
            body = interaction["response"].get("body")
            text = _body_text(body.get("string")) if isinstance(body, dict) else None
            if text and "data:" in text and not text.lstrip().startswith(("{", "[")):
                found.append((f"{path.parent.name}/{path.name}#{number}", text))
    return found


STREAMS = recorded_streams()


def test_recorded_streams_were_found() -> None:
    """The shared fixtures hold SSE bodies from several providers to test against."""
    providers = {name.split("/")[0] for name, _ in STREAMS}
    assert {"openai-chat-completions", "anthropic-messages", "gemini-generate-content"} <= providers


@pytest.mark.parametrize(("name", "text"), STREAMS, ids=[name for name, _ in STREAMS])
def test_recorded_stream_events_are_json(name: str, text: str) -> None:
    """Every event of a recorded stream is JSON or [DONE], and names match their payload type."""
    events = decode_all([text.encode()])
    assert events, name
    for event in events:
        if event.is_done:
            continue
        payload = event.json()
        if event.event and isinstance(payload, dict) and "type" in payload:
            assert payload["type"] == event.event
    assert len(events) == text.count("data:")


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_recorded_streams_survive_any_chunking(data: st.DataObject) -> None:
    """Splitting a recorded stream's bytes anywhere (even inside a UTF-8 character) changes nothing."""
    _, text = data.draw(st.sampled_from(STREAMS))
    raw = text.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=30)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    assert decode_all(chunks) == decode_all([raw])


@settings(max_examples=60, deadline=None)
@given(
    payloads=st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",))), min_size=1),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(0, 10_000), max_size=10),
)
def test_any_line_ending_and_chunking(payloads: list[str], newline: str, cuts: list[int]) -> None:
    """LF, CRLF and CR line endings, split anywhere, give back the multi-line data sent."""
    lines = []
    for payload in payloads:
        parts = payload.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        lines.extend(f"data: {part}" for part in parts)
        lines.append("")
    text = newline.join(lines) + newline
    points = sorted(c % (len(text) + 1) for c in cuts)
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    expected = [p.replace("\r\n", "\n").replace("\r", "\n") for p in payloads]
    assert [e.data for e in decode_all(chunks)] == expected


def test_multi_line_data_is_joined_with_newlines() -> None:
    """Several data: lines in one event join with a newline, without a trailing one."""
    assert decode_all(["data: a\ndata:b\ndata:  c\n\n"]) == [SSEEvent("a\nb\n c")]


def test_comments_and_keep_alives_are_skipped() -> None:
    """Comment lines (keep-alives, OpenRouter's processing notes) never make events."""
    text = ": keep-alive\n\n: OPENROUTER PROCESSING\n\ndata: {}\n\n:\n\n"
    assert decode_all([text]) == [SSEEvent("{}")]


def test_event_names_ids_and_retry_are_kept() -> None:
    """event:, id: and retry: fields are read; the name resets after each event but the id stays."""
    text = "event: ping\nid: 7\nretry: 3000\ndata: 1\n\ndata: 2\n\n"
    assert decode_all([text]) == [SSEEvent("1", "ping", "7", 3000), SSEEvent("2", None, "7", 3000)]


def test_event_without_data_is_not_dispatched() -> None:
    """An event: line followed by a blank line and no data makes no event, and its name is dropped."""
    assert decode_all(["event: x\n\ndata: y\n\n"]) == [SSEEvent("y")]


def test_field_without_colon_and_unknown_fields() -> None:
    """A bare 'data' line is empty data; unknown fields and a bad retry are ignored."""
    assert decode_all(["data\nfoo: bar\nretry: soon\n\n"]) == [SSEEvent("")]


def test_crlf_split_between_chunks_is_one_line_break() -> None:
    """A CR at the end of one chunk and LF at the start of the next end one line, not two."""
    assert decode_all(["data: a\r", "\n\r", "\ndata: b\r\n\r\n"]) == [SSEEvent("a"), SSEEvent("b")]


def test_byte_order_mark_is_dropped_at_start_only() -> None:
    """A UTF-8 BOM at the start of the stream is not part of the first field name."""
    assert decode_all(["\ufeffdata: x\n\n"]) == [SSEEvent("x")]
    assert decode_all([b"\xef\xbb", b"\xbfdata: x\n\n"]) == [SSEEvent("x")]


def test_last_event_without_blank_line_is_flushed_on_close() -> None:
    """A body that ends right after its last data line still yields that event on close."""
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"a": 1}') == []
    assert decoder.close() == [SSEEvent('{"a": 1}')]


def test_done_sentinel_and_json() -> None:
    """[DONE] is recognised; json() parses the data."""
    done, chunk = decode_all(['data: {"x": [1]}\n\ndata: [DONE]\n\n'])[::-1]
    assert done.is_done
    assert not chunk.is_done
    assert chunk.json() == {"x": [1]}


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    """Bytes that are not UTF-8 become replacement characters instead of killing the stream."""
    assert decode_all([b"data: \xff\n\n"]) == [SSEEvent("\ufffd")]


def test_groq_in_band_error_is_detected() -> None:
    """Groq's recorded in-band error (event: error after HTTP 200) is seen as a stream error."""
    text = next(t for n, t in STREAMS if "in-band-error" in n)
    errors = [inband_error("groq", e.event, e.data) for e in decode_all([text])]
    found = [e for e in errors if e is not None]
    assert len(found) == 1
    assert found[0].provider_message
    assert found[0].status_code == 200


@pytest.mark.parametrize(
    ("event", "data", "is_error"),
    [
        (None, '{"choices": [{"delta": {"content": "say \\"error\\""}}]}', False),
        (None, '{"error": {"message": "overloaded", "type": "server_error"}}', True),
        ("error", '{"type": "error", "error": {"type": "overloaded_error", "message": "x"}}', True),
        (None, '{"type": "error", "error": {"message": "x"}}', True),
        ("error", "not json", True),
        (None, '{"finish_reason": "error"}', False),
        (None, "[DONE]", False),
    ],
)
def test_inband_error_classification(event: str | None, data: str, is_error: bool) -> None:
    """Only payloads that really are errors are reported, text mentioning 'error' is not."""
    assert (inband_error("p", event, data) is not None) is is_error


def test_line_decoder_splits_ndjson_across_chunks() -> None:
    """NDJSON lines split across chunks come back whole; blank lines and CRLF are handled."""
    decoder = LineDecoder()
    lines = decoder.feed(b'{"a":1}\r\n\n{"b"') + decoder.feed(b":2}\n{") + decoder.feed(b'"c":3}')
    lines += decoder.close()
    assert [json.loads(line) for line in lines] == [{"a": 1}, {"b": 2}, {"c": 3}]


@pytest.mark.parametrize("decoder", [SSEDecoder, LineDecoder])
def test_a_long_line_in_small_chunks_is_decoded_in_linear_time(decoder: Any) -> None:
    """A 16 MiB line in 4 KiB chunks is never rescanned per chunk (that took ~40 s of CPU).

    Under the 64 MiB body cap, a server sending one endless line held the event
    loop for minutes. CPU time, not wall time, with a margin of over 20x.
    """
    import time

    made = decoder()
    started = time.process_time()
    assert made.feed(b"data: ") == []
    for _ in range(4096):
        assert made.feed(b"a" * 4096) == []
    out = made.feed(b"\n\n")
    assert time.process_time() - started < 2.0
    if decoder is LineDecoder:
        assert out == ["data: " + "a" * 2**24]
    else:
        assert [event.data for event in out] == ["a" * 2**24]


@pytest.mark.parametrize(("name", "text"), STREAMS, ids=[name for name, _ in STREAMS])
def test_a_recorded_stream_is_never_taken_for_something_else(name: str, text: str) -> None:
    """No recorded stream, whatever its content type, reads as a body that was no event stream."""
    decoder = SSEDecoder()
    for piece in (text[i : i + 7] for i in range(0, len(text), 7)):
        decoder.feed(piece.encode())
    decoder.close()
    assert decoder.unread() is None, name


@pytest.mark.parametrize(
    ("body", "unread"),
    [
        ('{"id": "c1", "choices": []}', '{"id": "c1", "choices": []}'),
        ("<html>\n<body>log in</body>\n</html>\n", "<html>\n<body>log in</body>\n</html>\n"),
        ("\ufeff{}", "{}"),  # the byte-order mark dropped, as the stream's
        (": keep-alive\n\n: keep-alive\n\n", None),  # comments alone: a stream that told nothing
        ("event: ping\n\nid: 3\nretry: 10\n\n", None),  # fields without data: no event, a stream
        ("", None),
        ('data: {"a": 1}\n\n<html>', None),  # an event came: a stream, cut or not
        ("x" * 5000, "x" * 2000),  # kept to its first 2,000 characters
    ],
    ids=["json", "html", "bom", "comments", "no-data", "empty", "event-first", "long"],
)
def test_unread_names_a_body_that_was_no_event_stream(body: str, unread: str | None) -> None:
    """`SSEDecoder.unread` gives the start of a body with no event and a line no SSE line, else None."""
    decoder = SSEDecoder()
    for i in range(0, len(body), 3):
        decoder.feed(body[i : i + 3].encode())
    decoder.close()
    assert decoder.unread() == unread


def test_a_decoder_used_again_forgets_the_stream_before() -> None:
    """A second stream through the same decoder is judged on its own."""
    decoder = SSEDecoder()
    decoder.feed(b'data: {"a": 1}\n\n')
    decoder.close()
    decoder.feed(b"<html>")
    decoder.close()
    assert decoder.unread() == "<html>"
