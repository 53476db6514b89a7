"""The Gemini codec's rules that the recordings do not show, one by one."""

from __future__ import annotations

import functools
import json
import logging
import re
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from cassettes import FIXTURES
from hypothesis import given
from hypothesis import strategies as st

import toolfold
from toolfold import (
    Agent,
    ModelConfigError,
    ProviderFinishError,
    RunState,
    SchemaCompileError,
    tool,
)
from toolfold.adapters.gemini import (
    DecoderState,
    GeminiModel,
    JSONArrayDecoder,
    decode_chunk,
    parse_response,
    parse_usage,
)
from toolfold.adapters.gemini._providers import FINISH_REASONS
from toolfold.runtime import (
    FilePart,
    ImagePart,
    Message,
    ModelRequest,
    OutputSpec,
    Prepared,
    ReasoningPart,
    StreamState,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    finish_stream,
    fold_stream,
)

TOOL = ToolDefinition("f", "F", {"type": "object", "properties": {"x": {"type": "string"}}})
STRICT = ToolDefinition("g", "G", {"type": "object", "properties": {"x": {"type": "string"}}}, True)
TREE = ToolDefinition(
    "walk",
    "Walk",
    {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},
)


def body(request: ModelRequest, model: str = "gemini-2.5-flash", **options: Any) -> dict[str, Any]:
    """The body a Gemini model sends for ``request``."""
    return GeminiModel(model, api_key="k" * 20, **options).body(request)


def turn(*parts: Any) -> ModelRequest:
    """A request whose history has one assistant turn made of ``parts``."""
    return ModelRequest([Message.user("hi"), Message("assistant", parts), Message.user("more")])


def model_parts(request: ModelRequest, model: str = "gemini-2.5-flash") -> list[dict[str, Any]]:
    """The parts of the model content in ``request``'s body."""
    (content,) = [c for c in body(request, model)["contents"] if c["role"] == "model"]
    return content["parts"]


def test_a_signed_text_part_goes_back_signed() -> None:
    """A signature parsed from a text part returns on that same part."""
    wire = {"text": "Hello", "thoughtSignature": "c2ln"}
    parsed = parse_response(
        {"candidates": [{"content": {"parts": [wire]}, "finishReason": "STOP"}]}
    )
    assert model_parts(turn(*parsed.message.parts)) == [wire]


@pytest.mark.parametrize(
    "wire",
    [
        [{"text": "Here is the plan:\n"}, {"text": "1. do X", "thoughtSignature": "U0lH"}],
        [
            {"text": "A", "thoughtSignature": "UzE="},
            {"text": "B"},
            {"text": "C", "thoughtSignature": "UzI="},
        ],
    ],
)
def test_text_parts_of_a_whole_answer_go_back_as_they_came(wire: list[dict[str, Any]]) -> None:
    """Google: a part with a signature is not merged with one without ("breaks the correct
    positioning of the thought"). A whole answer's text parts go back as received, each
    signature on its own part (round 1 joined them, the signature on the joined text)."""
    parsed = parse_response({"candidates": [{"content": {"parts": wire}, "finishReason": "STOP"}]})
    assert model_parts(turn(*parsed.message.parts), "gemini-3-pro-preview") == wire


def test_thoughts_go_back_only_when_signed() -> None:
    """A signed thought part goes back as it came; an unsigned thought summary is not sent."""
    parts = model_parts(
        turn(
            ReasoningPart("summary only", provider="gemini"),
            ReasoningPart("signed thought", "c2ln", "gemini"),
            TextPart("answer"),
        )
    )
    assert parts == [
        {"text": "signed thought", "thoughtSignature": "c2ln", "thought": True},
        {"text": "answer"},
    ]


def test_foreign_reasoning_is_dropped_with_a_note() -> None:
    """Another provider's reasoning never reaches Gemini, and the report says so."""
    request = turn(ReasoningPart("mine", "sig", "anthropic"), TextPart("answer"))
    prepared = GeminiModel("gemini-2.5-flash", api_key="k" * 20).prepare(request)
    assert "mine" not in json.dumps(prepared.body)
    (note,) = prepared.report.notes
    assert note.startswith("messages[1]: signed reasoning from anthropic dropped")


@pytest.mark.parametrize(
    ("model", "signature"),
    [("gemini-3-pro-preview", "skip_thought_signature_validator"), ("gemini-2.5-flash", None)],
)
def test_unsigned_calls_get_the_placeholder_on_gemini_3_only(
    model: str, signature: str | None
) -> None:
    """Gemini 3 needs a signature on a turn's first call; other models get none added."""
    calls = (ToolCallPart("a", "f", "{}", {}), ToolCallPart("b", "f", "{}", {}))
    parts = model_parts(turn(*calls), model)
    assert [p.get("thoughtSignature") for p in parts] == [signature, None]


def test_a_call_made_on_geminis_openai_endpoint_keeps_its_signature_natively() -> None:
    """A call from Gemini's OpenAI-compatible endpoint keeps its thought signature as
    extra_content.google.thought_signature: sent back natively as its thoughtSignature
    (noted), not replaced by the placeholder, which made Gemini 3 think afresh."""
    extra = {"extra_content": {"google": {"thought_signature": "U0lH"}}}
    request = turn(ToolCallPart("a", "f", "{}", {}, extra))
    prepared = GeminiModel("gemini-3-pro-preview", api_key="k" * 20).prepare(request)
    (part,) = prepared.body["contents"][1]["parts"]
    assert part["thoughtSignature"] == "U0lH"
    (note,) = prepared.report.notes
    assert "extra_content.google.thought_signature" in note


@pytest.mark.parametrize("setting", ["thinking", "reasoning_effort"])
def test_another_providers_reasoning_setting_is_refused_naming_thinking_config(
    setting: str,
) -> None:
    """Anthropic's thinking and OpenAI's reasoning_effort are no fields of
    GenerateContentRequest (Gemini answers 400): refused before the request, naming
    generationConfig's thinking_config, as every adapter refuses a setting it lacks."""
    request = ModelRequest([Message.user("x")], settings={setting: "high"})
    with pytest.raises(ModelConfigError, match=f"'{setting}' is not a field of the Gemini API"):
        GeminiModel("gemini-2.5-flash", api_key="k" * 20).prepare(request)
    with pytest.raises(ModelConfigError, match="thinking_config"):
        GeminiModel("gemini-2.5-flash", api_key="k" * 20).prepare(request)


@pytest.mark.parametrize(
    ("choice", "tools", "config"),
    [
        (None, [TOOL], None),
        ("auto", [TOOL], {"mode": "AUTO"}),
        ("none", [TOOL], {"mode": "NONE"}),
        ("required", [TOOL], {"mode": "ANY"}),
        ("f", [TOOL, STRICT], {"mode": "ANY", "allowedFunctionNames": ["f"]}),
        (None, [STRICT], {"mode": "VALIDATED"}),
        ("auto", [TOOL, STRICT], {"mode": "VALIDATED"}),
    ],
)
def test_tool_choice_and_strict_tools_on_the_wire(
    choice: str | None, tools: list[Any], config: Any
) -> None:
    """tool_choice maps to functionCallingConfig; strict tools ask for VALIDATED."""
    sent = body(ModelRequest([Message.user("x")], tools, choice))
    assert sent.get("toolConfig", {}).get("functionCallingConfig") == config


def test_tool_results_and_errors_as_function_responses() -> None:
    """A result is response.output, a failure response.error, both with the call's id and name."""
    request = ModelRequest(
        [
            Message.user("x"),
            Message.assistant(
                tool_calls=[ToolCallPart("c1", "f", "{}", {}), ToolCallPart("c2", "f", "{}", {})]
            ),
            Message.tool(
                ToolResultPart("c1", "f", "ok"), ToolResultPart("c2", "f", "boom", is_error=True)
            ),
        ]
    )
    user = body(request)["contents"][2]
    assert user == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "f", "response": {"output": "ok"}, "id": "c1"}},
            {"functionResponse": {"name": "f", "response": {"error": "boom"}, "id": "c2"}},
        ],
    }


def test_settings_output_and_system_instruction() -> None:
    """Sampling settings go to generationConfig, structured output as JSON schema, systems hoisted."""
    output = OutputSpec("answer", {"type": "object", "properties": {"n": {"type": "integer"}}})
    request = ModelRequest(
        [Message.system("one"), Message.user("x"), Message.system("two")],
        output=output,
        settings={
            "temperature": 0,
            "max_tokens": 9,
            "stop": "END",
            "safetySettings": [],
            "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}},
        },
    )
    sent = body(request)
    assert sent["systemInstruction"] == {"parts": [{"text": "one"}, {"text": "two"}]}
    assert sent["generationConfig"] == {
        "temperature": 0,
        "maxOutputTokens": 9,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 0},
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    }
    assert sent["safetySettings"] == []


def test_the_schema_form_follows_the_model_and_is_reported() -> None:
    """Older models get OpenAPI parameters; compiled_tools says which form each tool took."""
    request = ModelRequest([Message.user("x")], [TOOL])
    (new,) = GeminiModel("gemini-2.5-flash", api_key="k" * 20).compiled_tools(request)
    (old,) = GeminiModel("gemini-2.0-flash", api_key="k" * 20).compiled_tools(request)
    assert (new.dialect, old.dialect) == ("gemini", "gemini-openapi")
    assert "parametersJsonSchema" in new.payload
    assert old.payload["parameters"]["properties"]["x"] == {"type": "STRING"}
    forced = GeminiModel("gemini-2.5-flash", api_key="k" * 20, schema_form="openapi")
    assert "parameters" in forced.body(request)["tools"][0]["functionDeclarations"][0]


def test_a_recursive_tool_is_refused_in_the_openapi_form_only() -> None:
    """The OpenAPI form cannot say recursion: SchemaCompileError; the JSON Schema form sends it."""
    request = ModelRequest([Message.user("x")], [TREE])
    with pytest.raises(SchemaCompileError, match="recursive"):
        body(request, "gemini-2.0-flash")
    assert body(request)["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]


def test_bad_options_are_refused() -> None:
    """An unknown schema form or stream format is a ModelConfigError at construction."""
    with pytest.raises(ModelConfigError, match="schema_form"):
        GeminiModel("gemini-2.5-flash", api_key="k" * 20, schema_form="yaml")
    with pytest.raises(ModelConfigError, match="stream_format"):
        GeminiModel("gemini-2.5-flash", api_key="k" * 20, stream_format="ndjson")


@pytest.mark.parametrize(
    ("raw", "calls", "finish"),
    [
        ("STOP", True, "tool_calls"),
        ("STOP", False, "stop"),
        ("MAX_TOKENS", False, "length"),
        ("SAFETY", False, "content_filter"),
        ("LANGUAGE", False, "other"),
        ("SOMETHING_NEW", False, "other"),
        ("IMAGE_RECITATION", False, "content_filter"),
        ("IMAGE_RECITATION", True, "content_filter"),
        ("IMAGE_OTHER", False, "other"),
        ("NO_IMAGE", False, "other"),
    ],
)
def test_finish_reasons(raw: str, calls: bool, finish: str) -> None:
    """Gemini's finish words map to the neutral reasons; the raw word is kept."""
    parts = [{"functionCall": {"name": "f", "args": {}}}] if calls else [{"text": "t"}]
    response = parse_response({"candidates": [{"content": {"parts": parts}, "finishReason": raw}]})
    assert (response.finish_reason, response.raw_finish_reason) == (finish, raw)


@pytest.mark.parametrize("raw", ["MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"])
def test_a_failed_call_finish_raises_with_its_finish_message(raw: str) -> None:
    """A finish that says the function call failed is a ProviderFinishError with Gemini's finishMessage, not an empty answer."""
    candidate = {"content": {"role": "model"}, "finishReason": raw, "finishMessage": "bad call"}
    with pytest.raises(ProviderFinishError, match=f"finish reason '{raw}': bad call") as caught:
        parse_response({"candidates": [candidate]})
    assert (caught.value.finish_reason, caught.value.provider_message) == (raw, "bad call")


def test_every_finish_reason_of_the_spec_is_mapped() -> None:
    """Each value of the REST reference's Candidate.finishReason enum has a row of its own
    (IMAGE_RECITATION, MISSING_THOUGHT_SIGNATURE... were "other" by default before), and
    docs/gemini.md names each."""
    spec = json.loads(
        (FIXTURES / "specs/gemini-generativelanguage-v1beta-openapi.json").read_text()
    )
    values = spec["components"]["schemas"]["Candidate"]["properties"]["finishReason"]["enum"]
    docs = (Path(__file__).parents[2] / "docs/gemini.md").read_text()
    assert set(values) == set(FINISH_REASONS)
    assert [v for v in values if f"`{v}`" not in docs] == []


@pytest.mark.parametrize("streamed", [False, True])
def test_a_missing_thought_signature_finish_raises_and_its_call_never_runs(streamed: bool) -> None:
    """MISSING_THOUGHT_SIGNATURE with a functionCall is a ProviderFinishError saying what is
    missing, whole or streamed: before, it read as "other" and the call ran."""
    chunk = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "f", "args": {}}}],
                },
                "finishReason": "MISSING_THOUGHT_SIGNATURE",
            }
        ]
    }
    read: Any = functools.partial(decode_chunk, DecoderState()) if streamed else parse_response
    with pytest.raises(ProviderFinishError, match="lacks a thought signature") as caught:
        read(chunk)
    assert caught.value.finish_reason == "MISSING_THOUGHT_SIGNATURE"


def test_a_blocked_prompt_is_an_empty_content_filter_answer() -> None:
    """No candidate but promptFeedback.blockReason: content_filter, with the reason kept."""
    response = parse_response({"promptFeedback": {"blockReason": "SAFETY"}})
    assert (response.finish_reason, response.raw_finish_reason, response.message.parts) == (
        "content_filter",
        "SAFETY",
        (),
    )


@pytest.mark.parametrize(
    ("part", "read"),
    [
        ({"text": "lone[\ud800]"}, "lone[\ufffd]"),
        ({"functionCall": {"name": "f", "args": {"q\ud800": "x"}}}, '{"q\ufffd": "x"}'),
    ],
)
def test_a_lone_surrogate_in_an_answer_without_ids_is_a_replacement_not_an_error(
    part: dict[str, Any], read: str
) -> None:
    """A lone surrogate in a whole answer whose calls have no id (nor a responseId) reads as
    U+FFFD, as everywhere else, not as a MalformedResponseError from making the ids."""
    call = {"functionCall": {"name": "f", "args": {"q": "x"}}}
    body = {"candidates": [{"content": {"role": "model", "parts": [part, call]}}]}
    response = parse_response(body)
    ids = [c.id for c in response.tool_calls]
    assert all(re.fullmatch("call_[0-9a-f]{24}", i) for i in ids)
    assert len(set(ids)) == len(ids)
    first = response.message.parts[0]
    assert (first.text if type(first) is TextPart else first.arguments_text) == read  # type: ignore[union-attr]
    assert parse_response(body).tool_calls == response.tool_calls  # the same ids on every read


def test_synthetic_ids_of_an_ordinary_answer_stay_what_they_were() -> None:
    """The ids made for calls without one stay those stored states and replays hold."""
    parts = [{"text": "été 😀"}, {"functionCall": {"name": "f", "args": {"q": "x"}}}]
    body = {"candidates": [{"content": {"role": "model", "parts": parts}}]}
    assert parse_response(body).tool_calls[0].id == "call_39f9cad1e2f94c648ddfb302"


def test_usage_counts_tool_prompts_thoughts_and_cache() -> None:
    """Input adds the tool-use prompt; output adds thoughts; cached and reasoning are kept."""
    usage = parse_usage(
        {
            "promptTokenCount": 100,
            "toolUsePromptTokenCount": 7,
            "candidatesTokenCount": 20,
            "thoughtsTokenCount": 30,
            "cachedContentTokenCount": 40,
        }
    )
    assert (
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_tokens,
        usage.reasoning_tokens,
    ) == (
        107,
        50,
        40,
        30,
    )


ELEMENTS = [
    *({"candidates": [{"content": {"parts": [{"text": "é" * n}]}}]} for n in range(1, 4)),
    # Brackets, quotes and backslashes inside strings; a string, a number, a literal.
    {"text": 'a]}"\\\\[{\\"', "n": [1, [2, {"b": "}"}]], "e": "\\"},
    "x]\\",
    -1.5e3,
    None,
]
ARRAY = (
    "[" + ",\r\n".join(json.dumps(e, indent=2, ensure_ascii=False) for e in ELEMENTS) + "]\n"
).encode()


@given(st.lists(st.integers(min_value=0, max_value=len(ARRAY)), max_size=12))
def test_the_json_array_decoder_splits_anywhere(cuts: list[int]) -> None:
    """However the bytes are cut (inside a UTF-8 character too), the elements come out whole, in order."""
    decoder = JSONArrayDecoder()
    found: list[Any] = []
    at = 0
    for cut in [*sorted(cuts), len(ARRAY)]:
        found += decoder.feed(ARRAY[at:cut])
        at = cut
    found += decoder.close()
    assert found == ELEMENTS


def test_the_json_array_decoder_refuses_what_is_not_an_array() -> None:
    """A body that is not a JSON array is a StreamError naming what came."""
    from toolfold import StreamError

    with pytest.raises(StreamError, match="not a JSON array"):
        JSONArrayDecoder().feed(b'{"error": 1}')
    decoder = JSONArrayDecoder()
    decoder.feed(b'[{"a": 1}, {"b":')
    with pytest.raises(StreamError, match="not a JSON array"):
        decoder.close()


def test_an_element_with_nan_is_a_stream_error() -> None:
    """Like any other stream event: a StreamError."""
    from toolfold import StreamError

    with pytest.raises(StreamError, match="stream element that is not JSON"):
        JSONArrayDecoder().feed(b'[{"a": NaN}]')


@pytest.mark.parametrize(
    "element",
    # (deeper than any interpreter's limit: 3.13's JSON decoder takes 5,000 levels)
    ["[" * 100_000 + "]" * 100_000, '{"a": ' * 100_000 + "1" + "}" * 100_000],
    ids=["deep-array", "deep-object"],
)
def test_an_element_nested_too_deep_is_read_cut_not_a_recursion_error(element: str) -> None:
    """Like any other stream event: read with what lies deeper than 200 levels dropped (the
    codec then reads it as any other element), never a RecursionError out of the decoder."""
    from toolfold.adapters._http._json import SHALLOW_DEPTH

    (decoded,) = JSONArrayDecoder().feed(f"[{element}]".encode())
    levels = 0
    while isinstance(decoded, (list, dict)):
        decoded = decoded[0] if isinstance(decoded, list) else decoded["a"]
        levels += 1
    assert (levels, decoded) == (SHALLOW_DEPTH, None)


def test_an_element_nested_too_deep_past_the_cuts_limit_is_a_stream_error() -> None:
    """Past 1 MiB the element is not walked: a StreamError as before."""
    from toolfold import StreamError
    from toolfold.adapters._http._json import SHALLOW_LIMIT

    deep = "[" * SHALLOW_LIMIT + "]" * SHALLOW_LIMIT
    with pytest.raises(StreamError, match="stream element that is not JSON"):
        JSONArrayDecoder().feed(f"[{deep}]".encode())


def test_an_element_arriving_in_many_pieces_is_decoded_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each piece is scanned, not decoded: decoding the text so far per piece was quadratic."""
    from toolfold.adapters import _json_array

    decoded: list[str] = []

    def counting(provider: str, data: str, what: str) -> Any:
        decoded.append(data)
        return json.loads(data)

    monkeypatch.setattr(_json_array, "event_json", counting)
    element = {"text": 'x\\"]' * 50_000, "n": [[1], {"a": "}"}]}
    body = ("[" + json.dumps(element) + "]").encode()
    decoder = JSONArrayDecoder()
    found = [
        item for at in range(0, len(body), 1000) for item in decoder.feed(body[at : at + 1000])
    ]
    assert found + decoder.close() == [element]
    assert len(decoded) == 1


def test_a_long_string_in_one_piece_is_scanned_in_little_memory() -> None:
    """A 2 MiB string arriving whole: the scan keeps no state per character (the
    pattern it used before held ~95 bytes a character, ~200 MB here; a gzipped
    piece can inflate to the body cap)."""
    import tracemalloc

    text = "ab\\n" * (2**19)  # 2 MiB of characters, escapes among them
    body = ('[{"t": "' + text + '"}]').encode()
    decoder = JSONArrayDecoder()
    tracemalloc.start()
    try:
        found = decoder.feed(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found == [{"t": json.loads('"' + text + '"')}]
    assert peak < 20 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_many_elements_in_one_piece_come_out_whole() -> None:
    """A piece holding thousands of elements, literals, strings and objects among them,
    with every kind of space between (the scan keeps an offset into the piece: slicing
    what was left after each element made it quadratic, 16 s for a 1 MiB piece)."""
    elements: list[Any] = [1, "", {"a": [1, "x\\"]}, None, -2.5e3, [], "]"] * 2000
    body = ("[" + " ,\n\t".join(json.dumps(e) for e in elements) + " ]").encode()
    decoder = JSONArrayDecoder()
    assert decoder.feed(body) + decoder.close() == elements


def test_bytes_that_are_not_utf8_are_a_stream_error() -> None:
    """A piece or a body end that is not UTF-8: a StreamError, not a bare UnicodeDecodeError."""
    from toolfold import StreamError

    with pytest.raises(StreamError, match="not UTF-8"):
        JSONArrayDecoder().feed(b"[\xff]")
    decoder = JSONArrayDecoder()
    decoder.feed(b'[{"a": "\xc3')  # the first byte of a two-byte character
    with pytest.raises(StreamError, match="not UTF-8"):
        decoder.close()


def test_the_key_comes_from_gemini_api_key_else_google_api_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GEMINI_API_KEY wins; GOOGLE_API_KEY is the fallback; neither is a ModelConfigError naming both."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiModel("gemini-2.5-flash")
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key-0000000000")
    assert GeminiModel("gemini-2.5-flash")._transport._key.reveal() == "google-key-0000000000"
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key-0000000000")
    model = GeminiModel("gemini-2.5-flash")
    assert model._transport._key.reveal() == "gemini-key-0000000000"
    assert "gemini-key" not in repr(model)


def test_text_between_calls_streams_back_in_the_order_it_came() -> None:
    """Parts streamed one chunk each (signed text, a call, text, a call) go back in that order,
    as the whole answer's do: the text after the first call is not moved before it."""
    parts = [
        {"text": "Planning...", "thought": True, "thoughtSignature": "TSIG0"},
        {"text": "Looking up", "thoughtSignature": "TSIG_TEXT"},
        {"functionCall": {"id": "c1", "name": "f", "args": {"x": "a"}}, "thoughtSignature": "F1"},
        {"text": "and also"},
        {"functionCall": {"id": "c2", "name": "f", "args": {"x": "b"}}},
    ]
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]}
        for part in parts
    ]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    state, folded = DecoderState(), StreamState()
    for chunk in chunks:
        state, events = decode_chunk(state, {**chunk, "responseId": "r1"})
        for event in events:
            folded = fold_stream(folded, event)
    streamed = finish_stream(folded, str)
    whole = parse_response({**chunks[0], "candidates": [{"content": {"parts": parts}}]})
    sent = [
        model_parts(turn(*r.message.parts), "gemini-3-flash-preview") for r in (streamed, whole)
    ]
    assert sent[0] == sent[1] == parts


def test_a_character_split_between_two_chunks_comes_whole_in_text_and_thought() -> None:
    """An emoji a proxy cut by UTF-16 length ("\\ud83d", then "\\ude00") joins again in a
    thought and in text; a half nothing completes (the thought signed, the answer
    finished) is U+FFFD."""
    parts = [
        {"text": "t\ud83d", "thought": True},
        {"text": "\ude00 u\ud83d", "thought": True, "thoughtSignature": "TSIG"},
        {"text": "a\ud83d"},
        {"text": "\ude00b\ud83d"},
    ]
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]}
        for part in parts
    ]
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    state, folded = DecoderState(), StreamState()
    for chunk in chunks:
        state, events = decode_chunk(state, {**chunk, "responseId": "r1"})
        for event in events:
            folded = fold_stream(folded, event)
    thought, text = finish_stream(folded, str).message.parts
    assert (thought.text, thought.signature) == ("t\U0001f600 u\ufffd", "TSIG")  # type: ignore[union-attr]
    assert text.text == "a\U0001f600b\ufffd"  # type: ignore[union-attr]


def test_a_recursive_output_type_on_the_openapi_form_names_the_form_that_takes_it() -> None:
    """A recursive output schema for a gemini-2.0 model is an error about the output type
    that says which schema form carries it."""
    node = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    request = ModelRequest([Message.user("x")], output=OutputSpec("Node", node))
    with pytest.raises(SchemaCompileError) as caught:
        body(request, "gemini-2.0-flash")
    message = str(caught.value)
    assert message.startswith("cannot send the output type 'Node' as gemini-openapi")
    assert "schema_form='json-schema'" in message
    assert "Gemini responseSchema (OpenAPI Schema) has no references" in message
    assert "parameters" not in message  # (the tools' form, named for a tool's schema)
    assert body(request)["generationConfig"]["responseJsonSchema"]["properties"]


PNG_B64 = "iVBORw0KGgo="


def test_an_image_the_model_makes_is_kept_and_goes_back_as_it_came() -> None:
    """An inlineData part of an answer (responseModalities IMAGE) is an ImagePart, returned signed."""
    text = {"text": "Here is your cat:"}
    image = {"inlineData": {"mimeType": "image/png", "data": PNG_B64}, "thoughtSignature": "SIG"}
    parsed = parse_response(
        {"candidates": [{"content": {"parts": [text, image]}, "finishReason": "STOP"}]}
    )
    (picture,) = [p for p in parsed.message.parts if isinstance(p, ImagePart)]
    assert (picture.data, picture.media_type) == (b"\x89PNG\r\n\x1a\n", "image/png")
    assert model_parts(turn(*parsed.message.parts)) == [text, image]


def test_a_file_the_model_gives_by_uri_is_kept_and_goes_back_as_it_came() -> None:
    """A fileData part of an answer is a FilePart by URL, sent back as fileData."""
    wire = {"fileData": {"mimeType": "application/pdf", "fileUri": "https://x/a.pdf"}}
    parsed = parse_response(
        {"candidates": [{"content": {"parts": [wire]}, "finishReason": "STOP"}]}
    )
    assert parsed.message.parts == (FilePart(url="https://x/a.pdf", media_type="application/pdf"),)
    assert model_parts(turn(*parsed.message.parts)) == [wire]


def test_a_streamed_image_folds_into_the_parts_of_the_whole_answer() -> None:
    """Streamed, an image (and its signature) makes the parts the whole response makes."""
    text = {"text": "Here is your cat:"}
    image = {"inlineData": {"mimeType": "image/png", "data": PNG_B64}, "thoughtSignature": "SIG"}
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [text]}}], "responseId": "r"},
        {"candidates": [{"content": {"role": "model", "parts": [image]}, "finishReason": "STOP"}]},
    ]
    state, folded = DecoderState(), StreamState()
    for chunk in chunks:
        state, events = decode_chunk(state, chunk)
        for event in events:
            folded = fold_stream(folded, event)
    streamed = finish_stream(folded, str)
    whole = parse_response(
        {"candidates": [{"content": {"parts": [text, image]}, "finishReason": "STOP"}]}
    )
    assert streamed.message.parts == whole.message.parts
    assert model_parts(turn(*streamed.message.parts)) == [text, image]


def test_a_thought_image_is_left_out_of_the_answer_streamed_and_whole() -> None:
    """An inlineData part with thought: true (a draft) is left out with its signature, streamed and whole."""
    draft = {
        "inlineData": {"mimeType": "image/png", "data": PNG_B64},
        "thought": True,
        "thoughtSignature": "DRAFT",
    }
    final = {"inlineData": {"mimeType": "image/png", "data": PNG_B64}, "thoughtSignature": "SIG"}
    parts = [{"text": "planning", "thought": True}, draft, final]
    whole = parse_response({"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]})
    assert whole.message.parts == (
        ReasoningPart("planning", provider="gemini"),
        ImagePart(b"\x89PNG\r\n\x1a\n", media_type="image/png"),
        ReasoningPart("", "SIG", "gemini"),
    )
    state, folded = DecoderState(), StreamState()
    state, events = decode_chunk(
        state, {"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]}
    )
    for event in events:
        folded = fold_stream(folded, event)
    assert finish_stream(folded, str).message.parts == whole.message.parts


# --- settings that say what the run says ----------------------------------------

OUTPUT = OutputSpec("answer", {"type": "object", "properties": {"x": {"type": "integer"}}})
#: States saved by earlier toolfolds (how each was made: the ``.md`` files there).
SAVED = Path(__file__).parents[1] / "runtime" / "saved"


def prepared(request: ModelRequest, model: str = "gemini-2.5-flash") -> Prepared:
    """What a Gemini model prepares for ``request``: its body and report."""
    return GeminiModel(model, api_key="k" * 20).prepare(request)


@pytest.mark.parametrize(
    ("settings", "left_out", "field"),
    [
        (
            {"generationConfig": {"responseMimeType": "text/x.enum"}},
            "generationConfig.responseMimeType",
            "responseMimeType",
        ),
        (
            {"generationConfig": {"responseJsonSchema": {"type": "object"}}},
            "generationConfig.responseJsonSchema",
            "responseJsonSchema",
        ),
        (
            {"generation_config": {"response_mime_type": "text/plain"}},
            "generation_config.response_mime_type",
            "responseMimeType",
        ),
        (
            {"generation_config": {"response_json_schema": {}}},
            "generation_config.response_json_schema",
            "responseJsonSchema",
        ),
    ],
)
def test_the_output_type_wins_the_fields_it_sets_over_a_generation_config_setting(
    settings: dict[str, Any], left_out: str, field: str
) -> None:
    """responseMimeType / responseJsonSchema in generationConfig, either spelling, beside an output type: the output type's go (as before), the setting's is left out and noted."""
    made = prepared(ModelRequest([Message.user("hi")], output=OUTPUT, settings=settings))
    config = made.body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["properties"] == {"x": {"type": "integer"}}
    assert sorted(config) == ["responseJsonSchema", "responseMimeType"]
    assert made.report.notes == (
        f"the setting {left_out} is not sent: the run's output type sets generationConfig.{field}",
    )


@pytest.mark.parametrize(
    ("settings", "model", "sent"),
    [
        (
            {"generationConfig": {"responseSchema": {"type": "OBJECT"}}},
            "gemini-2.5-flash",
            "responseJsonSchema",
        ),
        ({"generation_config": {"response_schema": {}}}, "gemini-2.5-flash", "responseJsonSchema"),
        (
            {"generationConfig": {"responseJsonSchema": {"type": "object"}}},
            "gemini-2.0-flash",
            "responseSchema",
        ),
    ],
)
def test_a_second_response_schema_beside_an_output_type_is_refused(
    settings: dict[str, Any], model: str, sent: str
) -> None:
    """A generationConfig schema in the other form than the output type's would go beside it (two schemas, which the API refuses): refused naming both."""
    (named,) = [f"{key}.{inner}" for key, config in settings.items() for inner in config]
    with pytest.raises(ModelConfigError, match=f"the setting {named} and the run's output type"):
        body(ModelRequest([Message.user("hi")], output=OUTPUT, settings=settings), model)
    with pytest.raises(ModelConfigError, match=f"the output type sends {sent}"):
        body(ModelRequest([Message.user("hi")], output=OUTPUT, settings=settings), model)


@pytest.mark.parametrize(
    ("settings", "model", "sent"),
    [
        (
            {"generationConfig": {"responseSchema": None}},
            "gemini-2.5-flash",
            {
                "responseSchema": None,
                "responseMimeType": "application/json",
                "responseJsonSchema": OUTPUT.schema,
            },
        ),
        (
            {"generation_config": {"response_json_schema": None}},
            "gemini-2.0-flash",
            {
                "response_json_schema": None,
                "responseMimeType": "application/json",
                "responseSchema": {"type": "OBJECT", "properties": {"x": {"type": "INTEGER"}}},
            },
        ),
    ],
)
def test_a_null_response_schema_in_the_other_form_goes_as_before(
    settings: dict[str, Any], model: str, sent: dict[str, Any]
) -> None:
    """A None schema setting in the form the output type does not send is no second schema: it goes as null beside the output type's, as c17b8818 sent it, not refused."""
    request = ModelRequest([Message.user("hi")], output=OUTPUT, settings=settings)
    assert body(request, model)["generationConfig"] == sent


def test_a_structured_output_setting_without_an_output_type_goes_as_given() -> None:
    """With no output type, a generationConfig response schema is the user's to send."""
    config = {"responseMimeType": "application/json", "responseSchema": {"type": "OBJECT"}}
    sent = body(ModelRequest([Message.user("hi")], settings={"generationConfig": config}))
    assert sent["generationConfig"] == config


@pytest.mark.parametrize(
    ("settings", "sent", "note"),
    [
        (
            {"max_tokens": 10, "generationConfig": {"maxOutputTokens": 5}},
            {"maxOutputTokens": 5},
            "the setting max_tokens is not sent: the setting generationConfig.maxOutputTokens "
            "sets generationConfig.maxOutputTokens too, and wins",
        ),
        (
            {"temperature": 0.5, "top_p": 0.9, "generation_config": {"temperature": 0.1}},
            {"topP": 0.9, "temperature": 0.1},
            "the setting temperature is not sent: the setting generation_config.temperature "
            "sets generationConfig.temperature too, and wins",
        ),
        (
            {
                "generation_config": {"max_output_tokens": 5},
                "generationConfig": {"maxOutputTokens": 9},
            },
            {"maxOutputTokens": 9},
            "the setting generation_config.max_output_tokens is not sent: the setting "
            "generationConfig.maxOutputTokens sets generationConfig.maxOutputTokens too, and wins",
        ),
        (
            {"stop": "END", "generationConfig": {"stop_sequences": ["X"]}},
            {"stop_sequences": ["X"]},
            "the setting stop is not sent: the setting generationConfig.stop_sequences "
            "sets generationConfig.stopSequences too, and wins",
        ),
    ],
)
def test_a_generation_config_key_wins_over_a_setting_for_its_field(
    settings: dict[str, Any], sent: dict[str, Any], note: str
) -> None:
    """A neutral setting and a generationConfig key for one field: the key goes (generationConfig over generation_config, either spelling, as before), the other is noted."""
    made = prepared(ModelRequest([Message.user("hi")], settings=settings))
    assert made.body["generationConfig"] == sent
    assert made.report.notes == (note,)


def _gemini_answering(
    *parts: dict[str, Any],
) -> tuple[httpx.Client, list[dict[str, Any]]]:
    """A client whose Gemini answers are ``parts``, one a request, and the bodies it was sent."""
    sent: list[dict[str, Any]] = []
    answers = list(parts)

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        candidate = {
            "content": {"role": "model", "parts": [answers.pop(0)]},
            "finishReason": "STOP",
        }
        return httpx.Response(200, json={"candidates": [candidate]})

    return httpx.Client(transport=httpx.MockTransport(answer)), sent


@tool(requires_approval=True)
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return "sunny"


class City(TypedDict):
    """A city."""

    city: str


def test_a_waiting_run_saved_with_overlapping_generation_settings_resumes() -> None:
    """A run c17b8818 saved with max_tokens=10 and generationConfig={"maxOutputTokens": 5}, awaiting approval, resumes sending maxOutputTokens 5 as it did."""
    state = RunState.from_json((SAVED / "gemini_overlap_awaiting_approval.json").read_text())
    (call,) = state.messages[-1].parts
    client, sent = _gemini_answering({"text": "Sunny in Paris."})
    with client:
        model = toolfold.model("gemini:gemini-2.5-flash", api_key="k" * 39, http_client=client)
        agent = Agent(
            model, tools=[get_weather], max_tokens=10, generationConfig={"maxOutputTokens": 5}
        )
        result = agent.resume(state, approvals={call.id: True})
    assert result.output == "Sunny in Paris."
    (request,) = sent
    assert request["generationConfig"] == {"maxOutputTokens": 5}
    assert request["contents"][-1]["parts"][0]["functionResponse"]["response"] == {
        "output": "sunny"
    }


@tool
def get_time(city: str) -> str:
    """The time in a city.

    Args:
        city: The city.
    """
    return "noon"


def test_a_setting_note_is_logged_at_info_once_then_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A setting left out is logged at INFO the first time the model notes it, then at DEBUG on each later request (of that run or another)."""
    call = {"functionCall": {"name": "get_time", "args": {"city": "Paris"}}}
    client, sent = _gemini_answering(call, call, {"text": "Noon."}, {"text": "Noon again."})
    with client, caplog.at_level(logging.DEBUG, logger="toolfold.adapters"):
        model = toolfold.model("gemini:gemini-2.5-flash", api_key="k" * 39, http_client=client)
        agent = Agent(
            model, tools=[get_time], max_tokens=10, generationConfig={"maxOutputTokens": 5}
        )
        assert agent.run("Time?").output == "Noon."
        assert agent.run("Time again?").output == "Noon again."
    assert len(sent) == 4
    line = (
        "gemini:gemini-2.5-flash request: the setting max_tokens is not sent: the setting "
        "generationConfig.maxOutputTokens sets generationConfig.maxOutputTokens too, and wins"
    )
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, line),
        *[(logging.DEBUG, line)] * 3,
    ]


def test_a_run_saved_with_a_response_mime_type_beside_its_output_type_resumes() -> None:
    """A finished run c17b8818 saved with an output type and generationConfig responseMimeType / responseJsonSchema resumes with the output type's, as it sent them."""
    state = RunState.from_json((SAVED / "gemini_output_over_mime_finished.json").read_text())
    client, sent = _gemini_answering({"text": '{"city": "Rome"}'})
    with client:
        model = toolfold.model("gemini:gemini-2.5-flash", api_key="k" * 39, http_client=client)
        agent = Agent(
            model,
            output_type=City,
            generationConfig={
                "responseMimeType": "text/plain",
                "responseJsonSchema": {"type": "string"},
            },
        )
        result = agent.resume(state, message="And another?")
    assert result.output == {"city": "Rome"}
    (request,) = sent
    assert request["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": state.config.output.schema,
    }
