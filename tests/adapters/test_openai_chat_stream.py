"""The Chat Completions stream decoder: family quirks, ends, in-band errors, fold equality."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold import (
    MalformedResponseError,
    ProviderFinishError,
    StreamError,
    ToolUseFailedError,
)
from toolfold.adapters._http._sse import SSEDecoder
from toolfold.adapters.openai_chat import DecoderState, decode_chunk, decode_end, parse_response
from toolfold.adapters.openai_chat._providers import PROVIDERS
from toolfold.adapters.openai_chat._request import build_body
from toolfold.runtime import (
    FilePart,
    Log,
    Message,
    ModelRequest,
    ModelResponse,
    ReasoningDelta,
    ReasoningPart,
    StreamState,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    finish_stream,
    fold_stream,
)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return json.dumps({"id": "chatcmpl-1", "model": "m", "choices": choices, **extra})


def decode(datas: list[str], provider: str = "p", end: bool = True) -> list[Any]:
    state = DecoderState(provider)
    events: list[Any] = []
    for data in datas:
        state, out = decode_chunk(state, data)
        events += out
    if end:
        events += decode_end(state)
    return events


def whole(message: dict[str, Any], finish: str) -> dict[str, Any]:
    """The blocking body that answers ``message`` with ``finish``, as the streams above do."""
    return {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [{"message": message, "finish_reason": finish}],
    }


def fold(events: list[Any]) -> ModelResponse:
    state = StreamState()
    for event in events:
        state = fold_stream(state, event)
    return finish_stream(state, lambda i: f"never-{i}")


def call_head(index: int, call_id: str, name: str) -> dict[str, Any]:
    return {
        "tool_calls": [
            {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        ]
    }


def fragment(index: int, text: str, **function: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": text, **function}}]}


def test_a_call_ends_only_when_the_stream_says_so() -> None:
    """Arguments that already parse as JSON do not end a call; the finish_reason chunk does."""
    before = decode([chunk(call_head(0, "c1", "f")), chunk(fragment(0, '{"a": 1}'))], end=False)
    assert not any(isinstance(e, ToolCallEnd) for e in before)
    events = decode(
        [
            chunk(call_head(0, "c1", "f")),
            chunk(fragment(0, '{"a": 1')),
            chunk(fragment(0, "}")),
            chunk({}, "tool_calls"),
            "[DONE]",
        ]
    )
    ends = [i for i, e in enumerate(events) if isinstance(e, ToolCallEnd)]
    assert len(ends) == 1
    assert all(not isinstance(e, ToolCallDelta) for e in events[ends[0] :])
    assert fold(events).tool_calls[0].arguments == {"a": 1}


def test_a_stream_cut_before_the_finish_is_an_error_not_a_half_call() -> None:
    """A body that stops mid-call raises StreamError naming the open call."""
    with pytest.raises(
        StreamError, match=r"ended before the response finished with tool calls still open \(c1\)"
    ):
        decode([chunk(call_head(0, "c1", "f")), chunk(fragment(0, '{"a": 1}'))])
    with pytest.raises(StreamError, match="ended before the response finished"):
        decode([chunk({"content": "Hel"})])


def test_done_without_a_finish_reason_ends_the_calls() -> None:
    """``[DONE]`` with no finish_reason closes the open calls (servers that skip it)."""
    response = fold(decode([chunk(call_head(0, "c1", "f")), chunk(fragment(0, "{}")), "[DONE]"]))
    assert [(c.id, c.arguments) for c in response.tool_calls] == [("c1", {})]
    assert response.finish_reason == "tool_calls"


def test_llama_cpp_repeating_the_name_in_every_delta_is_not_appended() -> None:
    """llama.cpp repeats function.name (and id) in every delta: one call, one name."""
    datas = [
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"ci'},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "function": {"name": "get_weather", "arguments": 'ty": "Pa'},
                    }
                ]
            }
        ),
        chunk(fragment(0, 'ris"}', name="get_weather")),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    events = decode(datas)
    assert sum(isinstance(e, ToolCallStart) for e in events) == 1
    response = fold(events)
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("c1", "get_weather", {"city": "Paris"})
    ]


def test_interleaved_calls_are_kept_apart_by_index() -> None:
    """Fragments of two calls interleave; each call gets its own arguments."""
    datas = [
        chunk(call_head(0, "c1", "f")),
        chunk(call_head(1, "c2", "g")),
        chunk(fragment(1, '{"b"')),
        chunk(fragment(0, '{"a"')),
        chunk(fragment(0, ": 1}")),
        chunk(fragment(1, ": 2}")),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    response = fold(decode(datas))
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("c1", "f", {"a": 1}),
        ("c2", "g", {"b": 2}),
    ]


def test_whole_calls_without_index_get_positions() -> None:
    """Mistral sends whole calls without index in the finishing chunk: indexes 0 and 1."""
    calls = [
        {"id": "nqjf8Hqe1", "function": {"name": "plus", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "ATcpCKul3", "function": {"name": "minus", "arguments": '{"a": 2, "b": 1}'}},
    ]
    events = decode(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"tool_calls": calls}, "tool_calls"),
            "[DONE]",
        ]
    )
    assert [e.index for e in events if isinstance(e, ToolCallStart)] == [0, 1]
    assert [c.name for c in fold(events).tool_calls] == ["plus", "minus"]


def test_calls_without_ids_get_deterministic_ids() -> None:
    """Gemini's endpoint sends ``id: ""``: the adapter makes an id, the same on every replay."""
    datas = [
        json.dumps(
            {
                "model": "gemini",
                "created": 1,
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "id": "",
                                    "type": "function",
                                    "function": {"name": "f", "arguments": "{}"},
                                }
                            ]
                        },
                        "finish_reason": "stop",
                    }
                ],
            }
        ),
        "[DONE]",
    ]
    first, second = fold(decode(datas)), fold(decode(datas))
    assert first.tool_calls[0].id.startswith("call_")
    assert first.tool_calls[0].id == second.tool_calls[0].id
    assert (first.finish_reason, first.raw_finish_reason) == ("tool_calls", "stop")


def test_openai_in_band_error_raises_with_the_provider_message() -> None:
    """OpenAI's ``data: {"error": ...}`` after HTTP 200 is a StreamError carrying the message."""
    error = json.dumps({"error": {"message": "The server had an error", "type": "server_error"}})
    with pytest.raises(StreamError, match="The server had an error") as caught:
        decode([chunk({"content": "Hi"}), error])
    assert caught.value.status_code == 200
    assert caught.value.provider_message == "The server had an error"


def test_groq_event_error_is_a_tool_use_failed_error() -> None:
    """Groq's ``event: error`` with tool_use_failed becomes ToolUseFailedError."""
    data = json.dumps(
        {
            "error": {
                "message": "Tool call validation failed",
                "code": "tool_use_failed",
                "failed_generation": "{bad",
            }
        }
    )
    with pytest.raises(ToolUseFailedError, match="Tool call validation failed") as caught:
        decode_chunk(DecoderState("groq"), data, "error")
    assert caught.value.failed_generation == "{bad"


def test_openrouter_comments_are_skipped_and_its_error_chunk_raises() -> None:
    """SSE comments (``: OPENROUTER PROCESSING``) are ignored; the error chunk raises with upstream words."""
    body = (
        ": OPENROUTER PROCESSING\n\n"
        f"data: {chunk({'content': 'Hel'})}\n\n"
        ": OPENROUTER PROCESSING\n\n"
        'data: {"id":"gen-1","choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}],'
        '"error":{"code":502,"message":"Provider returned error","metadata":{"raw":"upstream overloaded","provider_name":"Google"}}}\n\n'
    )
    texts: list[str] = []

    def run() -> None:
        state = DecoderState("openrouter")
        for event in SSEDecoder().feed(body.encode()):
            state, out = decode_chunk(state, event.data, event.event)
            texts.extend(e.text for e in out if hasattr(e, "text"))

    with pytest.raises(
        StreamError, match=r"Provider returned error \(Google\): upstream overloaded"
    ):
        run()
    assert texts == ["Hel"]


def test_a_choice_that_ends_in_error_raises_with_the_whole_chunk_as_body() -> None:
    """A streamed choice with finish_reason "error" and no chunk error raises with the chunk (not the choice) as body."""
    data = {
        "id": "gen-1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {},
                "finish_reason": "error",
                "error": {"code": 502, "message": "upstream died"},
            }
        ],
    }
    with pytest.raises(ProviderFinishError, match="upstream died") as caught:
        decode([chunk({"content": "Hel"}), json.dumps(data)], provider="openrouter")
    assert caught.value.body is not None
    assert json.loads(caught.value.body) == data


def test_data_that_is_not_json_is_a_stream_error() -> None:
    """A broken data line names the provider and shows the data."""
    with pytest.raises(StreamError, match="not JSON"):
        decode(["{not json"])


def test_groq_usage_from_x_groq() -> None:
    """Groq puts stream usage in ``x_groq.usage``."""
    datas = [
        chunk({"content": "Hi"}),
        chunk(
            {},
            "stop",
            x_groq={"usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}},
        ),
        "[DONE]",
    ]
    usage = fold(decode(datas)).usage
    assert (usage.input_tokens, usage.output_tokens) == (5, 2)


def test_reasoning_deltas_become_a_reasoning_part() -> None:
    """DeepSeek's reasoning_content (and Groq's reasoning) fold into one ReasoningPart before the text."""
    datas = [
        chunk({"reasoning_content": "Think "}),
        chunk({"reasoning_content": "hard."}),
        chunk({"content": "42"}),
        chunk({}, "stop"),
        "[DONE]",
    ]
    response = fold(decode(datas, "deepseek"))
    assert response.message.parts[0] == ReasoningPart("Think hard.", provider="deepseek")
    assert response.text == "42"


def or_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    """A chunk as OpenRouter streams it: every delta carries ``"reasoning": null`` and
    ``"reasoning_details": []`` unless it has some."""
    full = {"role": "assistant", "content": "", "reasoning": None, "reasoning_details": []}
    return chunk({**full, **delta}, finish, provider="Google")


def test_openrouter_reasoning_details_stream_to_the_blocks_of_the_whole_answer() -> None:
    """OpenRouter's reasoning_details come in pieces: a piece of the block at the same
    index and type extends its text; the encrypted block (Gemini 3's signature behind
    OpenRouter) comes whole. The streamed answer keeps the blocks the whole one does,
    to send them back unchanged; they reach its part once, as the reasoning ends."""
    text = {"type": "reasoning.text", "format": "google-gemini-v1", "index": 0}
    sealed = {"type": "reasoning.encrypted", "data": "U0lH", "id": "t1", "index": 0}
    call = {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    datas = [
        or_chunk({"reasoning": "I will ", "reasoning_details": [{**text, "text": "I will "}]}),
        or_chunk({"reasoning": "call.", "reasoning_details": [{**text, "text": "call."}]}),
        or_chunk({"reasoning_details": [sealed], "tool_calls": [{"index": 0, **call}]}),
        or_chunk({}, "tool_calls"),
        "[DONE]",
    ]
    events = decode(datas, "openrouter")
    streamed = fold(events)
    blocks = [{**text, "text": "I will call."}, sealed]
    answer = {"role": "assistant", "content": None, "reasoning": "I will call."}
    answer |= {"reasoning_details": blocks, "tool_calls": [call]}
    one = parse_response(whole(answer, "tool_calls"), "openrouter")
    assert streamed.message.parts == one.message.parts
    assert one.message.parts[0] == ReasoningPart(
        "I will call.", provider="openrouter", provider_data={"reasoning_details": blocks}
    )
    assert sum(1 for e in events if isinstance(e, ReasoningDelta) and e.provider_data) == 1


OR = PROVIDERS["openrouter"]


def test_a_later_streamed_reasoning_part_keeps_only_the_blocks_new_since_the_last() -> None:
    """Reasoning, text, then a call with the encrypted block (Gemini 3 behind OpenRouter):
    the second reasoning part holds the encrypted block only (round 2 stored the text
    block again in it), and the assistant message sends the whole array once, as the
    whole answer's. A block continued across two parts goes back as one."""
    text = {"type": "reasoning.text", "format": "google-gemini-v1", "index": 0}
    sealed = {"type": "reasoning.encrypted", "data": "U0lH", "id": "t1", "index": 0}
    call = {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    datas = [
        or_chunk({"reasoning": "Think", "reasoning_details": [{**text, "text": "Think"}]}),
        or_chunk({"reasoning": "ing", "reasoning_details": [{**text, "text": "ing"}]}),
        or_chunk({"content": "Let me check."}),
        or_chunk({"reasoning_details": [sealed], "tool_calls": [{"index": 0, **call}]}),
        or_chunk({}, "tool_calls"),
        "[DONE]",
    ]
    parts = fold(decode(datas, "openrouter")).message.parts
    kept = [p.provider_data.get("reasoning_details") for p in parts if p.kind == "reasoning"]
    assert kept == [[{**text, "text": "Thinking"}], [sealed]]
    body = build_body(ModelRequest((Message.user("Hi"), Message("assistant", parts))), "m", OR)
    assert body["messages"][1]["reasoning_details"] == [{**text, "text": "Thinking"}, sealed]
    datas.insert(3, or_chunk({"reasoning_details": [{**text, "text": " more"}]}))
    parts = fold(decode(datas, "openrouter")).message.parts
    kept = [p.provider_data.get("reasoning_details") for p in parts if p.kind == "reasoning"]
    assert kept == [[{**text, "text": "Thinking"}], [{**text, "text": " more"}, sealed]]
    body = build_body(ModelRequest((Message.user("Hi"), Message("assistant", parts))), "m", OR)
    assert body["messages"][1]["reasoning_details"] == [{**text, "text": "Thinking more"}, sealed]


def test_openrouter_empty_reasoning_details_in_every_chunk_leave_the_answer_one_text() -> None:
    """OpenRouter sends "reasoning": null, "reasoning_details": [] in every chunk: a plain
    answer streams to the one text part its whole body gives, with no reasoning events
    (each chunk once added an empty reasoning part, splitting the text in pieces)."""
    words = ["Salut", " tout", " le", " monde"]
    datas = [or_chunk({}), *(or_chunk({"content": w}) for w in words), or_chunk({}, "stop")]
    events = decode([*datas, "[DONE]"], "openrouter")
    assert not [e for e in events if isinstance(e, ReasoningDelta)]
    answer = {"role": "assistant", "content": "Salut tout le monde", "reasoning": None}
    one = parse_response(whole({**answer, "reasoning_details": []}, "stop"), "openrouter")
    assert fold(events).message.parts == one.message.parts == (TextPart("Salut tout le monde"),)


def test_openrouter_reasoning_then_text_in_the_real_chunk_shape_is_two_parts() -> None:
    """Reasoning pieces with their reasoning_details pieces, then many text chunks (each
    with the empty reasoning keys): one reasoning part holding one joined block, then
    the text whole, as the whole answer has them."""
    piece = {"type": "reasoning.text", "format": "google-gemini-v1", "index": 0}
    datas = [
        or_chunk({"reasoning": f"r{i} ", "reasoning_details": [{**piece, "text": f"r{i} "}]})
        for i in range(50)
    ]
    datas += [or_chunk({"content": f"w{i} "}) for i in range(50)]
    datas += [or_chunk({}, "stop"), "[DONE]"]
    parts = fold(decode(datas, "openrouter")).message.parts
    reasoning = "".join(f"r{i} " for i in range(50))
    block = {**piece, "text": reasoning}
    assert parts == (
        ReasoningPart(
            reasoning, provider="openrouter", provider_data={"reasoning_details": [block]}
        ),
        TextPart("".join(f"w{i} " for i in range(50))),
    )


def test_reasoning_details_pieces_after_the_finish_still_reach_the_answer() -> None:
    """A block that comes after the finish chunk (before [DONE], or with no [DONE]) is
    kept: the reasoning part gets it as the stream ends."""
    sealed = {"type": "reasoning.encrypted", "data": "U0lH", "index": 0}
    for done in (["[DONE]"], []):
        datas = [or_chunk({"content": "Hi"}, "stop"), or_chunk({"reasoning_details": [sealed]})]
        parts = fold(decode([*datas, *done], "openrouter")).message.parts
        assert parts[-1] == ReasoningPart(
            "", provider="openrouter", provider_data={"reasoning_details": [sealed]}
        )


@pytest.mark.parametrize(
    "details", ["summary text", {"type": "x"}, [{"type": "reasoning.text", "text": "a"}, "b"]]
)
@pytest.mark.parametrize("provider", ["openai-compatible", "openrouter"])
def test_reasoning_details_of_another_shape_are_left_alone(details: Any, provider: str) -> None:
    """reasoning_details is an optional extra: a value that is no array of objects (a
    string, an object, an array holding a string) is ignored and the answer still
    comes, whole or streamed (it was a MalformedResponseError for every Chat server)."""
    answer = {"role": "assistant", "content": "Hi", "reasoning_details": details}
    one = parse_response(whole(answer, "stop"), provider)
    datas = [chunk({"content": "Hi", "reasoning_details": details}, "stop"), "[DONE]"]
    streamed = fold(decode(datas, provider))
    assert one.message.parts == streamed.message.parts == (TextPart("Hi"),)


def test_a_character_split_between_two_deltas_as_two_escapes_comes_whole() -> None:
    """An emoji a proxy cut by UTF-16 length ("\\ud83d", then "\\ude00b") joins again, in
    text, reasoning and arguments alike; a half that nothing completes is U+FFFD."""
    datas = [
        chunk({"reasoning_content": "r\ud83d"}),
        chunk({"reasoning_content": "\ude00"}),
        chunk({"content": "a"}),
        chunk({"content": "\ud83d"}),
        chunk({"content": "\ude00b\ud83d"}),
        chunk({"content": "c\ud83d"}),
        chunk(call_head(0, "call_1", "f")),
        chunk(fragment(0, '{"q": "\ud83d')),
        chunk(fragment(0, '\ude00"}')),
        chunk({"content": "\ud83d"}),
        chunk({}, "stop"),
        "[DONE]",
    ]
    events = decode(datas)
    texts = [e.text for e in events if type(e).__name__ == "TextDelta"]
    assert texts == ["a", "\U0001f600b", "\ufffdc", "\ufffd", "\ufffd"]
    response = fold(events)
    assert response.message.parts[0] == ReasoningPart("r\U0001f600", provider="p")
    assert response.text == "a\U0001f600b\ufffdc\ufffd\ufffd"
    assert response.tool_calls[0].arguments == {"q": "\U0001f600"}
    for event in events:
        repr(event).encode()  # (every piece encodable)


def test_a_half_character_held_at_a_cut_finish_goes_out_as_a_replacement() -> None:
    """A high surrogate the text and a call's arguments end with when the answer finishes
    (a finish chunk, or [DONE] without one) is U+FFFD, before the call's end."""
    for ending in ([chunk({}, "tool_calls")], ["[DONE]"]):
        datas = [
            chunk({"content": "a\ud83d"}),
            chunk(call_head(0, "call_1", "f")),
            chunk(fragment(0, '{"q": "x\ud83d')),
            *ending,
        ]
        events = decode(datas)
        assert [e.text for e in events if type(e).__name__ == "TextDelta"] == ["a", "\ufffd"]
        pieces = [e for e in events if type(e) in (ToolCallDelta, ToolCallEnd)]
        assert pieces[-2:] == [ToolCallDelta(0, "\ufffd"), ToolCallEnd(0)]


@pytest.mark.parametrize("then", ["text", "call"])
def test_a_half_character_held_goes_out_when_another_part_comes_as_in_the_whole_answer(
    then: str,
) -> None:
    """Reasoning that ends with a high surrogate, then the text or a call: the half goes out
    (U+FFFD) before what comes next, so the parts are the whole answer's, not a stray
    third reasoning part after the text."""
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    if then == "text":
        datas = [chunk({"reasoning_content": "r\ud83d"}), chunk({"content": "a"})]
        message: dict[str, Any] = {"reasoning_content": "r\ud83d", "content": "a"}
    else:
        datas = [
            chunk({"reasoning_content": "r\ud83d"}),
            chunk(call_head(0, "call_1", "f")),
            chunk(fragment(0, "{}")),
        ]
        message = {"reasoning_content": "r\ud83d", "content": None, "tool_calls": [call]}
    finish = "stop" if then == "text" else "tool_calls"
    streamed = fold(decode([*datas, chunk({}, finish), "[DONE]"]))
    assert streamed.message.parts[0] == ReasoningPart("r\ufffd", provider="p")
    body = json.loads(json.dumps(whole({"role": "assistant", **message}, finish)))
    assert streamed.message.parts == parse_response(body, "p").message.parts


def test_stream_and_non_stream_give_the_same_response() -> None:
    """Folding the stream gives exactly the response the same answer gives without streaming."""
    usage = {
        "prompt_tokens": 9,
        "completion_tokens": 4,
        "total_tokens": 13,
        "prompt_tokens_details": {"cached_tokens": 3},
    }
    body = {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Let me look.",
                    "reasoning": "Hmm.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": '{"x": [1, 2]}'},
                        }
                    ],
                },
            }
        ],
        "usage": usage,
    }
    datas = [
        chunk({"role": "assistant", "reasoning": "Hmm."}),
        chunk({"content": "Let me "}),
        chunk({"content": "look."}),
        chunk(call_head(0, "c1", "f")),
        chunk(fragment(0, '{"x": [1')),
        chunk(fragment(0, ", 2]}")),
        chunk({}, "tool_calls"),
        chunk(None, usage=usage),
        "[DONE]",
    ]
    assert fold(decode(datas)) == parse_response(body, "p")


def test_content_after_a_call_chunk_stays_one_text_before_the_call_as_in_the_whole_answer() -> None:
    """Content streamed after a call's chunk joins the content before it, all before the call,
    as the whole message has them (``content`` and ``tool_calls`` are apart)."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    body = whole({"role": "assistant", "content": "Let me check.", "tool_calls": [call]}, "stop")
    datas = [
        chunk({"role": "assistant", "content": "Let me "}),
        chunk(call_head(0, "c1", "f")),
        chunk(fragment(0, "{}")),
        chunk({"content": "check."}),
        chunk({}, "stop"),
        "[DONE]",
    ]
    folded = fold(decode(datas))
    assert [p.kind for p in folded.message.parts] == ["text", "tool_call"]
    assert folded == parse_response(body, "p")


@settings(max_examples=60, deadline=None)
@given(
    arguments=st.dictionaries(
        st.text(max_size=5),
        st.one_of(st.integers(), st.text(max_size=8), st.booleans()),
        max_size=4,
    ),
    cuts=st.lists(st.integers(0, 200), max_size=8),
)
def test_any_fragmentation_gives_the_same_arguments(
    arguments: dict[str, Any], cuts: list[int]
) -> None:
    """However the argument text is split across chunks, the call gets the whole of it."""
    text = json.dumps(arguments)
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    datas = [chunk(call_head(0, "c1", "f"))] + [chunk(fragment(0, p)) for p in pieces if p]
    response = fold(decode([*datas, chunk({}, "tool_calls"), "[DONE]"]))
    assert response.tool_calls[0].arguments == arguments
    assert response.tool_calls[0].arguments_text == text


def test_a_call_after_the_finish_chunk_still_ends() -> None:
    """A server that sends a call after finish_reason: it ends at [DONE], or the cut is an error."""
    late = chunk({"tool_calls": [{"id": "c9", "function": {"name": "g", "arguments": "{}"}}]})
    response = fold(decode([chunk({"content": "Hi"}, "stop"), late, "[DONE]"]))
    assert [c.id for c in response.tool_calls] == ["c9"]
    with pytest.raises(StreamError, match=r"still open \(c9\)"):
        decode([chunk({"content": "Hi"}, "stop"), late])


_NAMES = st.from_regex(r"[a-z_]{1,8}", fullmatch=True)
_ARGS = st.dictionaries(
    st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=6), st.none()), max_size=3
)


@settings(max_examples=50, deadline=None)
@given(
    text=st.text(max_size=30),
    reasoning=st.text(max_size=20),
    calls=st.lists(st.tuples(_NAMES, _ARGS), max_size=3),
    sizes=st.lists(st.integers(1, 7), min_size=1, max_size=5),
    interleave=st.booleans(),
)
def test_any_streamed_answer_folds_to_its_non_streamed_twin(
    text: str,
    reasoning: str,
    calls: list[tuple[str, dict[str, Any]]],
    sizes: list[int],
    interleave: bool,
) -> None:
    """Text, reasoning and calls cut into arbitrary pieces fold to what parse_response gives."""
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    wire_calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)
    ]
    finish = "tool_calls" if calls else "stop"
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text or None,
        "reasoning_content": reasoning,
    }
    if wire_calls:
        message["tool_calls"] = wire_calls
    body = {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": usage,
    }

    def cut(value: str) -> list[str]:
        pieces, start, n = [], 0, 0
        while start < len(value):
            size = sizes[n % len(sizes)]
            pieces.append(value[start : start + size])
            start, n = start + size, n + 1
        return pieces

    datas = [chunk({"role": "assistant"})]
    datas += [chunk({"reasoning_content": p}) for p in cut(reasoning)]
    datas += [chunk({"content": p}) for p in cut(text)]
    fragments = []
    for index, call in enumerate(wire_calls):
        datas.append(chunk(call_head(index, call["id"], call["function"]["name"])))
        fragments.append([chunk(fragment(index, p)) for p in cut(call["function"]["arguments"])])
    if interleave:
        for step in range(max((len(f) for f in fragments), default=0)):
            datas += [f[step] for f in fragments if step < len(f)]
    else:
        datas += [piece for f in fragments for piece in f]
    datas += [chunk({}, finish), chunk(None, usage=usage), "[DONE]"]
    assert fold(decode(datas, "p")) == parse_response(body, "p")


def test_typed_content_chunks_stream_like_the_whole_response() -> None:
    """Mistral's typed thinking/text chunks in a delta fold into the parts a whole body gives."""
    content = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "Hmm"}]},
        {"type": "text", "text": "Sure."},
        {"type": "text", "text": ""},
        {"type": "image_url", "image_url": "skipped"},
    ]
    streamed = fold(decode([chunk({"content": content}), chunk({}, "stop")], "mistral"))
    whole = parse_response(
        {"choices": [{"message": {"role": "assistant", "content": content}}]}, "mistral"
    )
    assert streamed.message.parts == whole.message.parts
    assert [p.kind for p in streamed.message.parts] == ["reasoning", "text"]
    assert streamed.text == "Sure."


def test_a_streamed_refusal_is_the_text_a_whole_refusal_gives() -> None:
    """Refusal deltas fold to the TextPart a blocking body's refusal gives."""
    datas = [
        chunk({"role": "assistant", "content": None, "refusal": ""}),
        chunk({"refusal": "I'm sorry, "}),
        chunk({"refusal": "I can't help with that."}),
        chunk({}, "stop"),
        "[DONE]",
    ]
    message = {
        "role": "assistant",
        "content": None,
        "refusal": "I'm sorry, I can't help with that.",
    }
    body = whole(message, "stop")
    streamed = fold(decode(datas))
    assert streamed == parse_response(body, "p")
    assert streamed.text == "I'm sorry, I can't help with that."


def test_a_refusal_after_content_is_dropped_as_in_a_whole_body() -> None:
    """Content wins over a refusal, streamed or not: the refusal is not appended to the text."""
    datas = [chunk({"content": "Sure."}), chunk({"refusal": "No."}), chunk({}, "stop"), "[DONE]"]
    message = {"role": "assistant", "content": "Sure.", "refusal": "No."}
    body = whole(message, "stop")
    assert fold(decode(datas)) == parse_response(body, "p")


def test_a_legacy_function_call_streams_like_the_whole_response() -> None:
    """delta.function_call (the functions API) folds to the call a blocking body's gives."""
    datas = [
        chunk(
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "get", "arguments": ""},
            }
        ),
        chunk({"function_call": {"arguments": '{"a":'}}),
        chunk({"function_call": {"name": "get", "arguments": "1}"}}),
        chunk({}, "function_call"),
        "[DONE]",
    ]
    message = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "get", "arguments": '{"a":1}'},
    }
    body = whole(message, "function_call")
    streamed = fold(decode(datas))
    assert streamed == parse_response(body, "p")
    assert streamed.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [("get", {"a": 1})]


def test_a_new_name_at_a_reused_index_is_a_second_call_not_appended_arguments() -> None:
    """index 0 reused with another name and no id (or id "") is a second call, each with its
    own arguments, not '{"a": 1}{"b": 2}' under the first call's name."""
    for no_id in ({}, {"id": ""}):
        second = {"index": 0, **no_id, "function": {"name": "g", "arguments": '{"b": 2}'}}
        datas = [
            chunk(call_head(0, "c1", "f")),
            chunk(fragment(0, '{"a": 1}')),
            chunk({"tool_calls": [second]}),
            chunk({}, "tool_calls"),
            "[DONE]",
        ]
        calls = fold(decode(datas)).tool_calls
        assert [(c.name, c.arguments) for c in calls] == [("f", {"a": 1}), ("g", {"b": 2})]
        assert calls[0].id == "c1"
        assert calls[1].id not in ("", "c1")


def test_a_new_name_under_a_started_calls_id_is_a_malformed_response_naming_the_field() -> None:
    """index 0 and id c1 again with another name cannot be told apart from the first call:
    a MalformedResponseError at function.name, not the two calls' arguments merged."""
    datas = [
        chunk(call_head(0, "c1", "f")),
        chunk(fragment(0, '{"a": 1}')),
        chunk(call_head(0, "c1", "g")),
        chunk(fragment(0, '{"b": 2}')),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    with pytest.raises(MalformedResponseError) as raised:
        decode(datas)
    assert raised.value.path == "$.choices[0].delta.tool_calls[0].function.name"
    assert "'g' for call 'c1', which was started as 'f'" in raised.value.problem


def test_a_name_in_pieces_without_an_id_before_any_arguments_stays_one_call() -> None:
    """index 0 again without an id and with another name before the call has arguments
    ('get_' then 'weather') continues the call (it keeps its first name, as a repeated name
    is never appended), not a second call that takes the arguments."""
    datas = [
        chunk(call_head(0, "c1", "get_")),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "weather"}}]}),
        chunk(fragment(0, '{"city": "Paris"}')),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    calls = fold(decode(datas)).tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [("c1", "get_", {"city": "Paris"})]


def test_the_same_name_again_without_an_id_is_the_same_call() -> None:
    """index 0 repeated with the call's own name and no id (llama.cpp's repeated header)
    appends to that call, after its arguments started too."""
    again = {"index": 0, "function": {"name": "f", "arguments": ', "b": 2}'}}
    datas = [
        chunk(call_head(0, "c1", "f")),
        chunk(fragment(0, '{"a": 1')),
        chunk({"tool_calls": [again]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    calls = fold(decode(datas)).tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [("c1", "f", {"a": 1, "b": 2})]


def test_a_new_name_without_an_id_after_a_no_argument_call_is_a_second_call() -> None:
    """index 0 reused without ids: a no-argument call ("arguments": "") then another name with
    an arguments field (even "") is a second call, not the first call taking its arguments."""
    for arguments in ('{"city": "Paris"}', ""):
        second = {"index": 0, "function": {"name": "get_weather", "arguments": arguments}}
        datas = [
            chunk(
                {"tool_calls": [{"index": 0, "function": {"name": "get_time", "arguments": ""}}]}
            ),
            chunk({"tool_calls": [second]}),
            chunk({}, "tool_calls"),
            "[DONE]",
        ]
        calls = fold(decode(datas)).tool_calls
        assert [(c.name, c.arguments) for c in calls] == [
            ("get_time", {}),
            ("get_weather", json.loads(arguments or "{}")),
        ]
        assert calls[0].id != calls[1].id


def test_a_streamed_audio_answer_folds_like_the_whole_one() -> None:
    """delta.audio pieces: the transcript as text, the audio bytes and id as the whole answer has them."""
    first, second = b"RIFF\x00\x00\x00\x00", b"WAVEdata"
    events = decode(
        [
            chunk({"role": "assistant", "audio": {"id": "audio_1", "transcript": "Hel"}}),
            chunk({"audio": {"transcript": "lo!", "data": base64.b64encode(first).decode()}}),
            chunk({"audio": {"data": base64.b64encode(second).decode(), "expires_at": 17}}),
            chunk({}, "stop"),
        ],
        provider="openai",
    )
    audio = {
        "id": "audio_1",
        "expires_at": 17,
        "data": base64.b64encode(first + second).decode(),
        "transcript": "Hello!",
    }
    expected = parse_response(
        whole({"role": "assistant", "content": None, "audio": audio}, "stop"), "openai"
    )
    streamed = fold(events)
    assert streamed.message.parts == expected.message.parts
    assert streamed.message.text == "Hello!"
    assert any(
        isinstance(p, FilePart) and p.media_type == "audio/wav" for p in streamed.message.parts
    )


def test_a_streamed_audio_answer_with_content_takes_the_content_as_text_like_the_whole_one() -> (
    None
):
    """Audio with content: the content is the answer's text, streamed as whole (not transcript + content)."""
    data = base64.b64encode(b"RIFF\x00\x00\x00\x00WAVEdata").decode()
    events = decode(
        [
            chunk({"role": "assistant", "audio": {"id": "a1", "transcript": "Hi"}}),
            chunk({"content": "Text"}),
            chunk({"audio": {"data": data}}),
            chunk({}, "stop"),
        ],
        provider="openai",
    )
    audio = {"id": "a1", "transcript": "Hi", "data": data}
    expected = parse_response(
        whole({"role": "assistant", "content": "Text", "audio": audio}, "stop"), "openai"
    )
    streamed = fold(events)
    assert streamed.message.text == "Text"
    assert streamed.message.parts == expected.message.parts


def test_streamed_audio_pieces_are_appended_not_copied() -> None:
    """Each delta.audio piece is appended to a Log (O(1)), not copied with all before it."""
    piece = base64.b64encode(b"\x00" * 8).decode()
    state = DecoderState("openai")
    for _ in range(3):
        state, _out = decode_chunk(state, chunk({"audio": {"data": piece}}))
    assert state.audio is not None
    pieces = state.audio[2]
    assert isinstance(pieces, Log)
    assert b"".join(pieces) == b"\x00" * 24
