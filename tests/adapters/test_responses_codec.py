"""The Responses codec's rules that the recordings do not show, one by one."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from test_native_request_specs import problems as responses_problems

from toolfold import ModelConfigError, StreamError
from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters.openai_responses import (
    DecoderState,
    OpenAIResponsesModel,
    decode_end,
    decode_event,
    parse_response,
)
from toolfold.runtime import (
    FilePart,
    ImagePart,
    Message,
    ModelRequest,
    OutputSpec,
    ReasoningDelta,
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
LOOSE = ToolDefinition(
    "g", "G", {"type": "object", "properties": {"x": {"type": "string", "minLength": 2}}}
)


def body(request: ModelRequest, model: str = "gpt-4o", **kwargs: Any) -> dict[str, Any]:
    """The body a Responses model sends for ``request``."""
    return OpenAIResponsesModel(model, api_key="k" * 20).body(request, **kwargs)


def test_the_conversation_goes_as_input_items_in_order() -> None:
    """System, user media, reasoning, text, calls and results, each as its item; no previous_response_id."""
    request = ModelRequest(
        [
            Message.system("Be brief."),
            Message.user(
                "See",
                ImagePart(url="https://x/a.png"),
                FilePart(data=b"%PDF", media_type="application/pdf", filename="a.pdf"),
            ),
            Message(
                "assistant",
                [
                    ReasoningPart("why", "enc", "openai-responses", {"item_id": "rs_1"}),
                    TextPart("Looking."),
                    ToolCallPart("call_1", "f", '{"x":"a"}', {"x": "a"}, {"item_id": "fc_1"}),
                ],
            ),
            Message.tool(ToolResultPart("call_1", "f", "done")),
        ]
    )
    sent = body(request)
    assert "previous_response_id" not in sent
    assert sent["input"] == [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "See"},
                {"type": "input_image", "image_url": "https://x/a.png", "detail": "auto"},
                {
                    "type": "input_file",
                    "file_data": "data:application/pdf;base64,JVBERg==",
                    "filename": "a.pdf",
                },
            ],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "why"}],
            "encrypted_content": "enc",
        },
        {"role": "assistant", "content": "Looking."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "f",
            "arguments": '{"x":"a"}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "done"},
    ]


def test_foreign_reasoning_is_dropped_with_a_note() -> None:
    """Reasoning from elsewhere (or without an item id) is left out, and the report says so."""
    request = ModelRequest(
        [
            Message.user("x"),
            Message("assistant", [ReasoningPart("hmm", "sig", "gemini"), TextPart("ok")]),
        ]
    )
    prepared = OpenAIResponsesModel("gpt-4o", api_key="k" * 20).prepare(request)
    assert [i.get("type") for i in prepared.body["input"]] == [None, None]
    (note,) = prepared.report.notes
    assert "reasoning from gemini dropped" in note


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("f", {"type": "function", "name": "f"}),
    ],
)
def test_tool_choice(choice: str, wire: Any) -> None:
    """Neutral choices map to the flat forms."""
    assert body(ModelRequest([Message.user("x")], [TOOL], choice))["tool_choice"] == wire


def test_tools_are_flat_and_strict_when_the_schema_allows() -> None:
    """strict is always sent; true for a schema that fits strict mode, false otherwise."""
    tools = body(ModelRequest([Message.user("x")], [TOOL, LOOSE]))["tools"]
    assert [(t["type"], t["name"], t["strict"]) for t in tools] == [
        ("function", "f", True),
        ("function", "g", False),
    ]


def test_settings_output_and_reasoning_include() -> None:
    """max_tokens is max_output_tokens; output is text.format; reasoning models ask for encrypted reasoning."""
    output = OutputSpec(
        "answer", {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    )
    request = ModelRequest(
        [Message.user("x")], output=output, settings={"max_tokens": 50, "temperature": 0}
    )
    sent = body(request, "gpt-5-mini", stream=True)
    assert sent["max_output_tokens"] == 50
    assert sent["temperature"] == 0
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["stream"] is True
    assert sent["text"]["format"]["type"] == "json_schema"
    assert sent["text"]["format"]["strict"] is True
    assert "include" not in body(request, "gpt-4o")


@pytest.mark.parametrize(
    "model",
    ["ft:o4-mini-2025-04-16:acme::abc123", "GPT-5", "O3-mini", "ft:gpt-5-mini:acme::x1"],
)
def test_fine_tuned_reasoning_models_and_any_case_ask_for_encrypted_reasoning(model: str) -> None:
    """A fine-tune of a reasoning model (ft:o4-mini-...) and a reasoning model named in another
    case ask for the encrypted reasoning, which goes back on the next step (without it, the item
    goes back by id only, which OpenAI cannot find when it stored nothing)."""
    assert body(ModelRequest([Message.user("x")]), model)["include"] == [
        "reasoning.encrypted_content"
    ]
    assert "include" not in body(ModelRequest([Message.user("x")]), "ft:gpt-4o:acme::x1")


def _with_reasoning(part: ReasoningPart, **settings: Any) -> Any:
    """What a Responses model sends for a conversation whose answer holds ``part``."""
    request = ModelRequest(
        [
            Message.user("x"),
            Message("assistant", [part, TextPart("ok")]),
            Message.user("more"),
        ],
        settings=settings,
    )
    return OpenAIResponsesModel("gpt-5-mini", api_key="k" * 20).prepare(request)


def test_with_store_false_a_reasoning_item_by_id_only_is_dropped_with_a_note() -> None:
    """store=False: a reasoning item without encrypted content or reasoning text (its id alone,
    which OpenAI could only find in what it stored: 404 "Item with id 'rs_...' not found") is
    left out and the report says so; one with encrypted content or reasoning text goes back."""
    data = {"item_id": "rs_1", "message_id": "msg_1"}
    bare = ReasoningPart("Plan.", None, "openai-responses", data)
    prepared = _with_reasoning(bare, store=False, include=[])
    assert [i.get("type", i.get("role")) for i in prepared.body["input"]] == [
        "user",
        "assistant",
        "user",
    ]
    assert prepared.body["input"][1] == {"role": "assistant", "content": "ok"}
    (note,) = prepared.report.notes
    assert "messages[1]: reasoning item rs_1 dropped" in note
    assert "store=False" in note
    signed = attrs.evolve(bare, signature="enc")
    raw = attrs.evolve(bare, provider_data={**data, "content": ["Plan."]})
    for kept in (signed, raw):
        prepared = _with_reasoning(kept, store=False)
        assert prepared.body["input"][1]["id"] == "rs_1"
        assert prepared.report.notes == ()
    # OpenAI keeps the responses by default (store): there the id finds the item.
    for settings in ({}, {"store": True}):
        prepared = _with_reasoning(bare, **settings)
        assert prepared.body["input"][1] == {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Plan."}],
        }
        assert prepared.report.notes == ()


def test_with_store_false_the_calls_of_a_dropped_reasoning_item_go_without_their_item_ids() -> None:
    """store=False: the function calls a dropped reasoning item led to go back without their
    item ids (OpenAI refuses an fc_ item without its reasoning item: 400 "Item 'fc_...' of type
    'function_call' was provided without its required 'reasoning' item"), keeping call_id; the
    calls after a reasoning item that goes back keep theirs."""
    bare = ReasoningPart("Plan.", None, "openai-responses", {"item_id": "rs_1"})
    kept = ReasoningPart("More.", "enc", "openai-responses", {"item_id": "rs_2"})
    answer = [
        bare,
        ToolCallPart("call_1", "f", "{}", {}, {"item_id": "fc_1"}),
        ToolCallPart("call_2", "f", "{}", {}, {"item_id": "fc_2"}),
        kept,
        ToolCallPart("call_3", "f", "{}", {}, {"item_id": "fc_3"}),
    ]
    results = [ToolResultPart(f"call_{n}", "f", "ok") for n in (1, 2, 3)]
    request = ModelRequest(
        [Message.user("x"), Message("assistant", answer), Message.tool(*results)],
        settings={"store": False},
    )
    prepared = OpenAIResponsesModel("gpt-5-mini", api_key="k" * 20).prepare(request)
    sent = [i for i in prepared.body["input"] if i.get("type") in ("function_call", "reasoning")]
    assert [(i["type"], i.get("id"), i.get("call_id")) for i in sent] == [
        ("function_call", None, "call_1"),
        ("function_call", None, "call_2"),
        ("reasoning", "rs_2", None),
        ("function_call", "fc_3", "call_3"),
    ]
    (note,) = prepared.report.notes
    assert "reasoning item rs_1 dropped" in note


@pytest.mark.parametrize(
    "setting",
    [
        "stop",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "n",
        "response_format",
        "top_k",
    ],
)
def test_settings_the_api_has_no_field_for_are_refused(setting: str) -> None:
    """A neutral setting CreateResponse lacks is a ModelConfigError naming it, not a 400 from OpenAI."""
    with pytest.raises(ModelConfigError, match=repr(setting)):
        body(ModelRequest([Message.user("x")], settings={setting: 1}))


@pytest.mark.parametrize("key", ["max_tokens", "max_output_tokens"])
def test_fewer_output_tokens_than_the_api_takes_are_refused(key: str) -> None:
    """max_tokens (or max_output_tokens) below CreateResponse's minimum of 16 is a ModelConfigError naming it, not a 400; 16 is sent."""
    with pytest.raises(ModelConfigError, match=f"the setting {key}=15 .* at least 16"):
        body(ModelRequest([Message.user("x")], settings={key: 15}))
    assert body(ModelRequest([Message.user("x")], settings={key: 16}))["max_output_tokens"] == 16


def test_another_responses_server_gets_every_setting_as_given() -> None:
    """A Responses-compatible server given as base_url may define more fields: nothing is refused."""
    settings = {"stop": ["END"], "seed": 7, "max_tokens": 8}
    request = ModelRequest([Message.user("x")], settings=settings)
    model = OpenAIResponsesModel("m", api_key="k" * 20, base_url="http://localhost:8000/v1")
    sent = model.body(request)
    assert (sent["stop"], sent["seed"], sent["max_output_tokens"]) == (["END"], 7, 8)


def test_refusals_and_incomplete_responses() -> None:
    """A refusal is text; an incomplete response for max_output_tokens is 'length'."""
    response = parse_response(
        {
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [
                {"type": "message", "content": [{"type": "refusal", "refusal": "I can't."}]}
            ],
        },
        "openai-responses",
    )
    assert (response.text, response.finish_reason, response.raw_finish_reason) == (
        "I can't.",
        "length",
        "max_output_tokens",
    )


def _fold(*events: tuple[str, dict[str, Any]]) -> Any:
    state, folded = DecoderState("openai-responses"), StreamState()
    for kind, data in events:
        state, out = decode_event(
            state, SSEEvent(data=json.dumps({"type": kind, **data}), event=kind)
        )
        for event in out:
            folded = fold_stream(folded, event)
    for event in decode_end(state):
        folded = fold_stream(folded, event)
    return finish_stream(folded, str)


COMPLETED = (
    "response.completed",
    {"response": {"status": "completed", "usage": {"input_tokens": 3, "output_tokens": 2}}},
)


def test_a_streamed_call_without_fragments_takes_the_done_text() -> None:
    """No argument deltas: the arguments come from ...arguments.done, once."""
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "f",
        "arguments": "",
    }
    response = _fold(
        ("response.output_item.added", {"output_index": 0, "item": item}),
        (
            "response.function_call_arguments.done",
            {"item_id": "fc_1", "output_index": 0, "arguments": '{"x":"a"}'},
        ),
        (
            "response.output_item.done",
            {"output_index": 0, "item": {**item, "arguments": '{"x":"a"}'}},
        ),
        COMPLETED,
    )
    ((call_id, arguments),) = [(c.id, c.arguments) for c in response.tool_calls]
    assert (call_id, arguments) == ("call_1", {"x": "a"})
    assert response.finish_reason == "tool_calls"


def test_a_character_split_between_two_deltas_comes_whole_in_text_and_arguments() -> None:
    """An emoji a proxy cut by UTF-16 length ("\\ud83d", then "\\ude00") joins again in the
    answer's text and a call's arguments; a half nothing completes is U+FFFD, at the
    message's end, before the call's end."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f"}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}

    def text(delta: str) -> tuple[str, dict[str, Any]]:
        return (
            "response.output_text.delta",
            {"item_id": "msg_1", "output_index": 0, "delta": delta},
        )

    def arguments(delta: str) -> tuple[str, dict[str, Any]]:
        event = {"item_id": "fc_1", "output_index": 1, "delta": delta}
        return ("response.function_call_arguments.delta", event)

    response = _fold(
        ("response.output_item.added", {"output_index": 0, "item": message}),
        text("a\ud83d"),
        text("\ude00b\ud83d"),
        ("response.output_item.done", {"output_index": 0, "item": message}),
        ("response.output_item.added", {"output_index": 1, "item": {**item, "arguments": ""}}),
        arguments('{"q": "\ud83d'),
        arguments("\ude00 \ud83d"),
        arguments('"}'),
        ("response.output_item.done", {"output_index": 1, "item": item}),
        COMPLETED,
    )
    assert response.text == "a\U0001f600b\ufffd"
    assert response.tool_calls[0].arguments == {"q": "\U0001f600 \ufffd"}


def test_a_half_character_the_text_holds_goes_out_before_a_call_that_follows() -> None:
    """Text that ends with a high surrogate, then a call, with no ``output_item.done`` for
    the message: the half (U+FFFD) stays in the text, before the call, as in the whole
    answer, not a stray text part after it."""
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f"}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    response = _fold(
        ("response.output_item.added", {"output_index": 0, "item": message}),
        ("response.output_text.delta", {"item_id": "msg_1", "output_index": 0, "delta": "a\ud83d"}),
        ("response.output_item.added", {"output_index": 1, "item": {**item, "arguments": ""}}),
        (
            "response.function_call_arguments.delta",
            {"item_id": "fc_1", "output_index": 1, "delta": "{}"},
        ),
        ("response.output_item.done", {"output_index": 1, "item": {**item, "arguments": "{}"}}),
        COMPLETED,
    )
    assert [p.kind for p in response.message.parts] == ["text", "tool_call"]
    assert response.text == "a\ufffd"


def test_a_call_finished_without_being_announced_still_arrives_whole() -> None:
    """output_item.done for a call never added: started, filled and ended at once."""
    item = {
        "type": "function_call",
        "id": "fc_9",
        "call_id": "call_9",
        "name": "f",
        "arguments": '{"x":"b"}',
    }
    response = _fold(("response.output_item.done", {"output_index": 0, "item": item}), COMPLETED)
    assert [(c.id, c.arguments) for c in response.tool_calls] == [("call_9", {"x": "b"})]


@pytest.mark.parametrize("announced", [True, False])
def test_a_streamed_call_item_done_incomplete_is_dropped_as_in_the_whole_response(
    announced: bool,
) -> None:
    """A function_call item done 'incomplete' is dropped streamed as whole: the other call stays, the finish agrees."""
    cut = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "send"}
    cut_done = {**cut, "arguments": '{"to": "ceo"}', "status": "incomplete"}
    kept = {**cut, "id": "fc_2", "call_id": "call_2", "arguments": '{"to": "me"}'}
    kept_done = {**kept, "status": "completed"}
    added = [
        ("response.output_item.added", {"output_index": 0, "item": {**cut, "arguments": ""}}),
        (
            "response.function_call_arguments.delta",
            {"item_id": "fc_1", "output_index": 0, "delta": '{"to": "ceo"}'},
        ),
    ]
    late = (
        "response.function_call_arguments.done",
        {"item_id": "fc_1", "output_index": 0, "arguments": '{"to": "ceo"}'},
    )
    cut_events = [
        *(added if announced else []),
        ("response.output_item.done", {"output_index": 0, "item": cut_done}),
        late,
    ]
    kept_event = ("response.output_item.done", {"output_index": 1, "item": kept_done})
    status = {"status": "completed", "usage": {"input_tokens": 3, "output_tokens": 2}}
    for items, events in (
        ([cut_done], cut_events),
        ([cut_done, kept_done], [*cut_events, kept_event]),
    ):
        whole = parse_response({**status, "output": items}, "openai-responses")
        streamed = _fold(*events, ("response.completed", {"response": status}))
        assert [c.id for c in streamed.tool_calls] == [c.id for c in whole.tool_calls]
        assert streamed.finish_reason == whole.finish_reason
    assert [c.id for c in streamed.tool_calls] == ["call_2"]
    assert _fold(*cut_events, COMPLETED).finish_reason == "stop"


def test_streamed_reasoning_keeps_its_summary_id_and_encrypted_content() -> None:
    """Summary deltas and the finished item fold into one part that goes back as the same item
    (keeping the id of the message whose text follows it)."""
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Plan."}],
        "encrypted_content": "enc",
    }
    response = _fold(
        ("response.output_item.added", {"output_index": 0, "item": {**item, "summary": []}}),
        ("response.reasoning_summary_text.delta", {"item_id": "rs_1", "delta": "Pl"}),
        ("response.reasoning_summary_text.delta", {"item_id": "rs_1", "delta": "an."}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.output_text.delta", {"item_id": "msg", "delta": "Hi"}),
        COMPLETED,
    )
    (reasoning,) = [p for p in response.message.parts if p.kind == "reasoning"]
    assert (reasoning.text, reasoning.signature, dict(reasoning.provider_data)) == (
        "Plan.",
        "enc",
        {"item_id": "rs_1", "message_id": "msg"},
    )
    assert response.text == "Hi"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 2)


def test_cache_writes_are_counted_apart_streamed_or_not() -> None:
    """input_tokens_details.cache_write_tokens (required by ResponseUsage) is cache_write_tokens."""
    usage = {
        "input_tokens": 2000,
        "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 1800},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 2005,
    }
    whole = parse_response({"status": "completed", "output": [], "usage": usage}, "p").usage
    streamed = _fold(("response.completed", {"response": {"status": "completed", "usage": usage}}))
    assert whole == streamed.usage
    assert (whole.input_tokens, whole.cached_tokens, whole.cache_write_tokens) == (2000, 100, 1800)


def test_streamed_summary_parts_are_joined_like_the_whole_item() -> None:
    """Deltas of two summary_index parts fold to the text a whole item gives (a blank line between)."""
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "**Plan**\n\nFirst part."},
            {"type": "summary_text", "text": "**Check**\n\nSecond part."},
        ],
        "encrypted_content": "enc",
    }

    def delta(index: int, text: str) -> tuple[str, dict[str, Any]]:
        data = {"item_id": "rs_1", "output_index": 0, "summary_index": index, "delta": text}
        return ("response.reasoning_summary_text.delta", data)

    streamed = _fold(
        ("response.output_item.added", {"output_index": 0, "item": {**item, "summary": []}}),
        delta(0, "**Plan**\n\nFirst"),
        delta(0, " part."),
        delta(1, "**Check**\n\n"),
        delta(1, "Second part."),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        COMPLETED,
    )
    whole = parse_response({"status": "completed", "output": [item]}, "p")
    assert streamed.message.parts == whole.message.parts
    assert whole.message.parts[0].text == "**Plan**\n\nFirst part.\n\n**Check**\n\nSecond part."


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_summary_of_several_parts_goes_back_part_for_part(streamed: bool) -> None:
    """A reasoning item whose summary has two parts goes back with the same two parts, streamed
    or whole (they went back merged into one part, its text "Think 1\n\nThink 2")."""
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "Think 1"},
            {"type": "summary_text", "text": "Think 2"},
        ],
        "encrypted_content": "enc",
    }
    if streamed:

        def delta(index: int, text: str) -> tuple[str, dict[str, Any]]:
            data = {"item_id": "rs_1", "output_index": 0, "summary_index": index, "delta": text}
            return ("response.reasoning_summary_text.delta", data)

        added = {"output_index": 0, "item": {**item, "summary": []}}
        response = _fold(
            ("response.output_item.added", added),
            delta(0, "Think 1"),
            delta(1, "Think 2"),
            ("response.output_item.done", {"output_index": 0, "item": item}),
            COMPLETED,
        )
    else:
        response = parse_response({"status": "completed", "output": [item]}, "p")
    assert response.message.parts[0].text == "Think 1\n\nThink 2"
    request = ModelRequest([Message.user("x?"), response.message, Message.user("more")])
    assert body(request, model="gpt-5-mini")["input"][1] == item


def test_a_part_recorded_without_its_summary_parts_sends_its_text_as_one() -> None:
    """A part saved before the summary parts were kept (no provider_data "summary") still goes
    back, its text the one summary part; a one-part summary keeps no copy of its text."""
    old = ReasoningPart("Think 1\n\nThink 2", "enc", "openai-responses", {"item_id": "rs_1"})
    request = ModelRequest([Message.user("x?"), Message("assistant", [old]), Message.user("m")])
    assert body(request, model="gpt-5-mini")["input"][1]["summary"] == [
        {"type": "summary_text", "text": "Think 1\n\nThink 2"}
    ]
    one = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "T"}]}
    (part,) = parse_response({"status": "completed", "output": [one]}, "p").message.parts
    assert dict(part.provider_data) == {"item_id": "rs_1"}


#: A reasoning item as open-weight models behind Responses-compatible servers send it:
#: the raw reasoning as ``reasoning_text`` content, no summary, no encrypted content.
THOUGHTS = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [],
    "content": [
        {"type": "reasoning_text", "text": "The user asks 2+2."},
        {"type": "reasoning_text", "text": "That is 4."},
    ],
}


def test_reasoning_text_content_is_reasoning_and_goes_back_as_it_came() -> None:
    """A reasoning item's reasoning_text parts are the part's text and go back as the same
    parts; with a summary too, the reasoning text is still the text and both go back."""
    whole = parse_response({"status": "completed", "output": [THOUGHTS]}, "p")
    (reasoning,) = whole.message.parts
    assert reasoning.text == "The user asks 2+2.\n\nThat is 4."
    summarised = {**THOUGHTS, "summary": [{"type": "summary_text", "text": "Adds."}]}
    (with_summary,) = parse_response(
        {"status": "completed", "output": [summarised]}, "p"
    ).message.parts
    assert with_summary.text == "The user asks 2+2.\n\nThat is 4."
    assert with_summary.provider_data["summary"] == ["Adds."]
    for part, item in ((reasoning, THOUGHTS), (with_summary, summarised)):
        request = ModelRequest([Message.user("2+2?"), Message("assistant", [part, TextPart("4")])])
        assert body(request, model="gpt-oss-120b")["input"][1] == item


def test_streamed_reasoning_text_folds_like_the_whole_item() -> None:
    """reasoning_text deltas (two content parts) and, with no delta, the .done events alone fold
    to the part the whole item gives."""

    def part(index: int, kind: str, text: str) -> tuple[str, dict[str, Any]]:
        data = {"item_id": "rs_1", "output_index": 0, "content_index": index}
        key = "delta" if kind == "delta" else "text"
        return (f"response.reasoning_text.{kind}", {**data, key: text})

    added = ("response.output_item.added", {"output_index": 0, "item": {**THOUGHTS, "content": []}})
    done = ("response.output_item.done", {"output_index": 0, "item": THOUGHTS})
    deltas = _fold(
        added,
        part(0, "delta", "The user "),
        part(0, "delta", "asks 2+2."),
        part(0, "done", "The user asks 2+2."),
        part(1, "delta", "That is 4."),
        part(1, "done", "That is 4."),
        done,
        COMPLETED,
    )
    dones = _fold(
        added, part(0, "done", "The user asks 2+2."), part(1, "done", "That is 4."), done, COMPLETED
    )
    whole = parse_response({"status": "completed", "output": [THOUGHTS]}, "p")
    assert deltas.message.parts == dones.message.parts == whole.message.parts
    assert whole.message.parts[0].text == "The user asks 2+2.\n\nThat is 4."


def _reasoning_event(kind: str, index: int, text: str) -> tuple[str, dict[str, Any]]:
    """A reasoning_text (``kind`` "delta"/"done") or summary ("summary") event of item rs_1."""
    data = {"item_id": "rs_1", "output_index": 0}
    if kind == "summary":
        return (
            "response.reasoning_summary_text.delta",
            {**data, "summary_index": index, "delta": text},
        )
    key = "delta" if kind == "delta" else "text"
    return (f"response.reasoning_text.{kind}", {**data, "content_index": index, key: text})


def test_an_item_with_summary_and_reasoning_text_streams_as_the_whole_item() -> None:
    """An item with both a summary and reasoning_text content, both streamed (reasoning first),
    folds to the part the whole item gives, and both go back as the item had them."""
    item = {
        **THOUGHTS,
        "summary": [
            {"type": "summary_text", "text": "Adds."},
            {"type": "summary_text", "text": "4."},
        ],
    }
    streamed = _fold(
        (
            "response.output_item.added",
            {"output_index": 0, "item": {**item, "summary": [], "content": []}},
        ),
        _reasoning_event("delta", 0, "The user asks 2+2."),
        _reasoning_event("delta", 1, "That is 4."),
        _reasoning_event("summary", 0, "Adds."),
        _reasoning_event("summary", 1, "4."),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        COMPLETED,
    )
    whole = parse_response({"status": "completed", "output": [item]}, "p")
    assert streamed.message.parts == whole.message.parts
    assert whole.message.parts[0].text == "The user asks 2+2.\n\nThat is 4."
    request = ModelRequest(
        [Message.user("2+2?"), Message("assistant", [*streamed.message.parts, TextPart("4")])]
    )
    assert body(request, model="gpt-oss-120b")["input"][1] == item


def test_late_done_events_of_streamed_reasoning_text_parts_add_nothing() -> None:
    """.done events of reasoning_text parts arriving after the deltas of several parts are not
    streamed again: the part is the whole item's, its text once."""
    streamed = _fold(
        ("response.output_item.added", {"output_index": 0, "item": {**THOUGHTS, "content": []}}),
        _reasoning_event("delta", 0, "The user asks 2+2."),
        _reasoning_event("delta", 1, "That is 4."),
        _reasoning_event("done", 0, "The user asks 2+2."),
        _reasoning_event("done", 1, "That is 4."),
        ("response.output_item.done", {"output_index": 0, "item": THOUGHTS}),
        COMPLETED,
    )
    whole = parse_response({"status": "completed", "output": [THOUGHTS]}, "p")
    assert streamed.message.parts == whole.message.parts
    assert streamed.message.parts[0].text == "The user asks 2+2.\n\nThat is 4."


def test_two_unsigned_reasoning_items_stream_as_two_parts() -> None:
    """Two reasoning items in a row without encrypted_content stream as the two parts the whole
    response gives (they merged into one, the first item's id lost)."""
    items = [
        {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": text}]}
        for n, text in ((1, "One."), (2, "Two."))
    ]
    events: list[tuple[str, dict[str, Any]]] = []
    for index, item in enumerate(items):
        delta = {"item_id": item["id"], "output_index": index, "summary_index": 0}
        events += [
            (
                "response.output_item.added",
                {"output_index": index, "item": {**item, "summary": []}},
            ),
            (
                "response.reasoning_summary_text.delta",
                {**delta, "delta": item["summary"][0]["text"]},
            ),
            ("response.output_item.done", {"output_index": index, "item": item}),
        ]
    streamed = _fold(*events, COMPLETED)
    whole = parse_response({"status": "completed", "output": items}, "p")
    assert streamed.message.parts == whole.message.parts
    assert [p.provider_data["item_id"] for p in streamed.message.parts] == ["rs_1", "rs_2"]


def test_reasoning_recorded_without_a_kept_summary_sends_its_text_as_the_summary() -> None:
    """A part recorded before the summary was kept (provider_data "content" only, the text the
    summary) goes back with its text as the summary; one whose text is its content, with none."""
    old = ReasoningPart("Adds.", None, "openai-responses", {"item_id": "rs_1", "content": ["C1"]})
    raw = ReasoningPart("C1", None, "openai-responses", {"item_id": "rs_1", "content": ["C1"]})
    sent = []
    for part in (old, raw):
        request = ModelRequest([Message.user("2+2?"), Message("assistant", [part, TextPart("4")])])
        sent.append(body(request, model="gpt-oss-120b")["input"][1])
    content = [{"type": "reasoning_text", "text": "C1"}]
    assert sent == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Adds."}],
            "content": content,
        },
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": content},
    ]


def _summary_and_reasoning_events(
    summary_first: bool,
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """A reasoning item with a summary and reasoning_text content, and its stream events
    (every event the spec names for both), the summary's before or after the reasoning's."""
    item = {
        **THOUGHTS,
        "summary": [
            {"type": "summary_text", "text": "Adds."},
            {"type": "summary_text", "text": "4."},
        ],
        "encrypted_content": "enc",
    }
    at = {"item_id": "rs_1", "output_index": 0}
    summary: list[tuple[str, dict[str, Any]]] = []
    for index, text in enumerate(("Adds.", "4.")):
        part = {"type": "summary_text", "text": text}
        summary += [
            (
                "response.reasoning_summary_part.added",
                {**at, "summary_index": index, "part": {**part, "text": ""}},
            ),
            (
                "response.reasoning_summary_text.delta",
                {**at, "summary_index": index, "delta": text},
            ),
            ("response.reasoning_summary_text.done", {**at, "summary_index": index, "text": text}),
            ("response.reasoning_summary_part.done", {**at, "summary_index": index, "part": part}),
        ]
    content: list[tuple[str, dict[str, Any]]] = []
    for index, text in enumerate(("The user asks 2+2.", "That is 4.")):
        content += [
            ("response.reasoning_text.delta", {**at, "content_index": index, "delta": text}),
            ("response.reasoning_text.done", {**at, "content_index": index, "text": text}),
        ]
    added = (
        "response.output_item.added",
        {"output_index": 0, "item": {**item, "summary": [], "content": []}},
    )
    done = ("response.output_item.done", {"output_index": 0, "item": item})
    middle = [*summary, *content] if summary_first else [*content, *summary]
    return item, [added, *middle, done]


@pytest.mark.parametrize("summary_first", [True, False], ids=["summary-first", "reasoning-first"])
def test_summary_and_reasoning_text_stream_as_the_whole_item_in_either_order(
    summary_first: bool,
) -> None:
    """An item with a summary and reasoning_text folds to the whole item's part (its reasoning
    text) whichever of the two streams first, and goes back as the same item."""
    item, events = _summary_and_reasoning_events(summary_first)
    streamed = _fold(*events, ("response.output_text.delta", {"delta": "4"}), COMPLETED)
    whole = parse_response(
        {
            "status": "completed",
            "output": [
                item,
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "4"}],
                },
            ],
        },
        "p",
    )
    assert streamed.message.parts == whole.message.parts
    assert streamed.message.parts[0].text == "The user asks 2+2.\n\nThat is 4."
    request = ModelRequest([Message.user("2+2?"), Message("assistant", streamed.message.parts)])
    assert body(request, model="gpt-oss-120b")["input"][1] == item


def test_the_finished_reasoning_item_replaces_a_streamed_text_it_does_not_give() -> None:
    """Only the summary streamed, but the finished item has reasoning_text content: the part
    takes the finished item's text (the reasoning text), as the whole response gives it."""
    item, events = _summary_and_reasoning_events(summary_first=True)
    summary_only = [e for e in events if not e[0].startswith("response.reasoning_text.")]
    streamed = _fold(*summary_only, COMPLETED)
    whole = parse_response({"status": "completed", "output": [item]}, "p")
    assert streamed.message.parts == whole.message.parts
    assert streamed.message.parts[0].text == "The user asks 2+2.\n\nThat is 4."


#: A reasoning item and the assistant message that follows it, as OpenAI's output has them.
REASONED = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}
ANSWER = {
    "type": "message",
    "id": "msg_1",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "4", "annotations": [], "logprobs": []}],
}


def _answer_events() -> list[tuple[str, dict[str, Any]]]:
    """The stream of REASONED then ANSWER, as OpenAI sends them."""
    at = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    return [
        ("response.output_item.added", {"output_index": 0, "item": REASONED}),
        ("response.output_item.done", {"output_index": 0, "item": REASONED}),
        (
            "response.output_item.added",
            {"output_index": 1, "item": {**ANSWER, "status": "in_progress", "content": []}},
        ),
        ("response.output_text.delta", {**at, "delta": "4"}),
        ("response.output_text.done", {**at, "text": "4"}),
        ("response.output_item.done", {"output_index": 1, "item": ANSWER}),
        COMPLETED,
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_message_after_a_reasoning_item_goes_back_with_its_item_id(streamed: bool) -> None:
    """The assistant message that followed a reasoning item goes back as that message item,
    its id (msg_...) kept, right after the reasoning item: OpenAI refuses a reasoning item
    sent without the item that followed it ("provided without its required following item")."""
    if streamed:
        response = _fold(*_answer_events())
    else:
        response = parse_response({"status": "completed", "output": [REASONED, ANSWER]}, "p")
    request = ModelRequest([Message.user("2+2?"), response.message, Message.user("Sure?")])
    sent = body(request, model="gpt-5-mini")["input"]
    assert sent[1:3] == [REASONED, ANSWER]
    assert sent[3] == {"role": "user", "content": "Sure?"}


def _decoded(
    *events: tuple[str, dict[str, Any]], end: bool = True
) -> tuple[list[Any], Exception | None]:
    """The neutral events decoded from ``events`` (and the body's end), up to the error the
    stream raised, and that error (None when none)."""
    state, out = DecoderState("openai-responses"), []
    try:
        for kind, data in events:
            state, decoded = decode_event(
                state, SSEEvent(data=json.dumps({"type": kind, **data}), event=kind)
            )
            out += decoded
        if end:
            out += decode_end(state)
    except StreamError as exc:
        return out, exc
    return out, None


FAILED = (
    "response.failed",
    {"response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}}},
)


@pytest.mark.parametrize("after", ["failed", "error", "cut"])
def test_a_finished_reasoning_items_text_comes_out_before_the_stream_fails(after: str) -> None:
    """A reasoning item finished just before the stream fails (response.failed, an error
    event) or is cut has its whole text out before the error: only its closing piece waits."""
    item = {**REASONED, "summary": [{"type": "summary_text", "text": "Adds 2 and 2."}]}
    at = {"item_id": "rs_1", "output_index": 0, "summary_index": 0}
    events = [
        ("response.output_item.added", {"output_index": 0, "item": REASONED}),
        ("response.reasoning_summary_text.delta", {**at, "delta": "Adds"}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
    ]
    if after == "failed":
        events.append(FAILED)
    elif after == "error":
        events.append(("error", {"code": "server_error", "message": "boom"}))
    out, error = _decoded(*events)
    assert isinstance(error, StreamError)
    assert "".join(e.text for e in out if isinstance(e, ReasoningDelta)) == "Adds 2 and 2."


@pytest.mark.parametrize("after", ["failed", "cut"])
def test_a_reasoning_item_that_streamed_nothing_has_its_text_out_before_the_stream_fails(
    after: str,
) -> None:
    """A finished reasoning item whose text did not stream gives its text before a failure
    or a cut that follows it."""
    item = {**REASONED, "summary": [{"type": "summary_text", "text": "Adds."}]}
    events = [
        ("response.output_item.added", {"output_index": 0, "item": REASONED}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
    ]
    out, error = _decoded(*events, *([FAILED] if after == "failed" else []))
    assert isinstance(error, StreamError)
    assert [e.text for e in out if isinstance(e, ReasoningDelta)] == ["Adds."]


def _reasoning_streamed(item: dict[str, Any], *deltas: str) -> list[tuple[str, dict[str, Any]]]:
    """``item``'s stream: its reasoning_text deltas (content part 0) then the finished item."""
    at = {"item_id": "rs_1", "output_index": 0, "content_index": 0}
    return [
        (
            "response.output_item.added",
            {"output_index": 0, "item": {**item, "summary": [], "content": []}},
        ),
        *(("response.reasoning_text.delta", {**at, "delta": d}) for d in deltas),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        COMPLETED,
    ]


def test_the_finished_reasoning_item_adds_the_parts_that_did_not_stream() -> None:
    """Only the first reasoning_text part streamed: the finished item adds the rest (no
    replacing piece), and the part is the whole item's."""
    events = _reasoning_streamed(THOUGHTS, "The user ", "asks 2+2.")
    out, _ = _decoded(*events)
    pieces = [e for e in out if isinstance(e, ReasoningDelta)]
    assert not any(e.replaces for e in pieces)
    assert "".join(e.text for e in pieces) == "The user asks 2+2.\n\nThat is 4."
    whole = parse_response({"status": "completed", "output": [THOUGHTS]}, "p")
    assert _fold(*events).message.parts == whole.message.parts


def test_the_finished_reasoning_item_replaces_a_streamed_reasoning_text_it_does_not_give() -> None:
    """Reasoning text streamed that the finished item gives otherwise is replaced by the item's
    text, as the whole response gives it."""
    events = _reasoning_streamed(THOUGHTS, "Something else.")
    out, _ = _decoded(*events)
    assert [(e.text, e.replaces) for e in out if isinstance(e, ReasoningDelta)][1:] == [
        ("The user asks 2+2.\n\nThat is 4.", True),
        ("", False),
    ]
    whole = parse_response({"status": "completed", "output": [THOUGHTS]}, "p")
    assert _fold(*events).message.parts == whole.message.parts


def test_a_finished_reasoning_item_without_text_leaves_the_text_that_streamed() -> None:
    """A finished reasoning item that gives no text at all (a server not repeating it) leaves
    the reasoning text that streamed as the part's text."""
    empty = {**THOUGHTS, "content": []}
    streamed = _fold(*_reasoning_streamed(empty, "The user asks 2+2."))
    assert streamed.message.parts == (
        ReasoningPart("The user asks 2+2.", None, "openai-responses", {"item_id": "rs_1"}),
    )


@pytest.mark.parametrize("announced", [True, False], ids=["added-without-id", "not-added"])
def test_a_message_after_reasoning_keeps_its_id_from_its_first_text_delta(
    announced: bool,
) -> None:
    """A server that leaves the id out of the message's output_item.added (or sends none) still
    gives the id on its text deltas: the reasoning part keeps it as a whole response's does."""
    events = _answer_events()
    added = events[2]
    events.remove(added)
    if announced:
        item = {k: v for k, v in added[1]["item"].items() if k != "id"}
        events.insert(2, ("response.output_item.added", {**added[1], "item": item}))
    response = _fold(*events)
    whole = parse_response({"status": "completed", "output": [REASONED, ANSWER]}, "p")
    assert response.message.parts == whole.message.parts
    assert response.message.parts[0].provider_data["message_id"] == "msg_1"


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_the_message_after_a_reasoning_item_goes_back_with_its_phase(streamed: bool) -> None:
    """The message item that followed a reasoning item goes back with the phase it came with
    (commentary or final_answer), which newer models want resent."""
    answer = {**ANSWER, "phase": "final_answer"}
    if streamed:
        events = _answer_events()
        events[2] = (
            events[2][0],
            {**events[2][1], "item": {**events[2][1]["item"], "phase": "final_answer"}},
        )
        response = _fold(*events)
    else:
        response = parse_response({"status": "completed", "output": [REASONED, answer]}, "p")
    request = ModelRequest([Message.user("2+2?"), response.message])
    assert body(request, model="gpt-5-mini")["input"][1:3] == [REASONED, answer]


def test_reasoning_between_calls_streams_back_in_the_order_it_came() -> None:
    """reasoning, call, reasoning, call go back in that order streamed as whole: OpenAI refuses a
    reasoning item whose following call was moved after the next reasoning item (400 "provided
    without its required following item")."""
    first = {**REASONED, "id": "rs_A"}
    second = {**REASONED, "id": "rs_B", "encrypted_content": "enc2"}
    calls = [
        {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": "f",
            "arguments": '{"x":"a"}',
            "status": "completed",
        }
        for n in (1, 2)
    ]
    output = [first, calls[0], second, calls[1]]
    events = []
    for index, item in enumerate(output):
        events.append(("response.output_item.added", {"output_index": index, "item": item}))
        events.append(("response.output_item.done", {"output_index": index, "item": item}))
    streamed = _fold(*events, COMPLETED)
    whole = parse_response({"status": "completed", "output": output}, "p")
    sent = []
    for response in (streamed, whole):
        request = ModelRequest([Message.user("x?"), response.message])
        sent.append([item.get("id") for item in body(request, model="gpt-5-mini")["input"][1:]])
    assert sent[0] == sent[1] == ["rs_A", "fc_1", "rs_B", "fc_2"]


def test_a_generated_image_is_kept_and_goes_back_as_its_item() -> None:
    """An image_generation_call item is an ImagePart, sent back next turn as the same item."""
    item = {
        "type": "image_generation_call",
        "id": "ig_1",
        "status": "completed",
        "result": "iVBORw0KGgo=",
    }
    said = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Here it is.", "annotations": []}],
    }
    parsed = parse_response({"id": "r", "status": "completed", "output": [item, said]}, "openai")
    (image,) = [p for p in parsed.message.parts if isinstance(p, ImagePart)]
    assert (image.data, image.media_type) == (b"\x89PNG\r\n\x1a\n", "image/png")
    assert parsed.message.text == "Here it is."
    request = ModelRequest([Message.user("draw"), parsed.message, Message.user("bluer")])
    sent = body(request)
    assert sent["input"][1:3] == [item, {"role": "assistant", "content": "Here it is."}]
    assert responses_problems("CreateResponse", sent) == []


def test_an_output_item_toolfold_does_not_read_is_noted_on_the_next_request() -> None:
    """An unknown output item (a built-in tool's call) is no silent drop: the next report names it."""
    item = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    parsed = parse_response({"id": "r", "status": "completed", "output": [item]}, "openai")
    request = ModelRequest([Message.user("look"), parsed.message, Message.user("more")])
    prepared = OpenAIResponsesModel("gpt-4o", api_key="k" * 20).prepare(request)
    (note,) = prepared.report.notes
    assert "web_search_call output item ws_1 not sent back" in note


def test_streamed_image_and_unknown_items_fold_like_the_whole_response() -> None:
    """Streamed, an image_generation_call and an unknown item make the parts the whole response makes."""
    image = {
        "type": "image_generation_call",
        "id": "ig_1",
        "status": "completed",
        "result": "iVBORw0KGgo=",
    }
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    said = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Here.", "annotations": []}],
    }
    streamed = _fold(
        ("response.created", {"response": {"id": "r", "model": "gpt-4o"}}),
        ("response.output_item.done", {"output_index": 0, "item": search}),
        ("response.output_item.done", {"output_index": 1, "item": image}),
        ("response.output_item.added", {"output_index": 2, "item": {**said, "content": []}}),
        ("response.output_text.delta", {"output_index": 2, "item_id": "msg_1", "delta": "Here."}),
        ("response.output_item.done", {"output_index": 2, "item": said}),
        COMPLETED,
    )
    whole = parse_response(
        {"id": "r", "status": "completed", "output": [search, image, said]}, "openai"
    )
    assert streamed.message.parts == whole.message.parts
    assert [type(p).__name__ for p in whole.message.parts] == [
        "ReasoningPart",
        "ImagePart",
        "ReasoningPart",
        "TextPart",
    ]
