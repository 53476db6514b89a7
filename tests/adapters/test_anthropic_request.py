"""The Anthropic request builder: wire rules, refusals before any request, and the spec over a matrix."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from anthropic_cassettes import spec_problems

import toolfold
from toolfold import Agent, ModelConfigError, RunState, SchemaCompileError
from toolfold.adapters.anthropic import (
    DEFAULT_MAX_TOKENS,
    STRICT_BETA,
    AnthropicModel,
    anthropic_id,
    build_body,
    is_beta,
)
from toolfold.runtime import (
    FilePart,
    ImagePart,
    Message,
    ModelRequest,
    OutputSpec,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)

WEATHER = ToolDefinition(
    "get_weather",
    "Get the weather.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city."},
            "unit": {"enum": ["C", "F"]},
        },
        "required": ["city"],
    },
)
NESTED = ToolDefinition(
    "plan",
    "Plan stops.",
    {
        "type": "object",
        "$defs": {"Stop": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "properties": {
            "stops": {"type": "array", "items": {"$ref": "#/$defs/Stop"}},
            "budget": {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]},
        },
    },
)
NO_PARAMS = ToolDefinition("now", "", {"type": "object", "properties": {}})
CALL = ToolCallPart("toolu_1", "get_weather", '{"city": "Paris"}', {"city": "Paris"})
CALL2 = ToolCallPart("toolu_2", "get_weather", '{"city": "Oslo"}', {"city": "Oslo"})
THINKING = ReasoningPart("Let me check.", "sig-abc", "anthropic")
REDACTED = ReasoningPart("", "ENCRYPTED==", "anthropic", {"type": "redacted_thinking"})
PNG = b"\x89PNG\r\n\x1a\n0000"
#: States saved by earlier toolfolds (how each was made: the ``.md`` files there).
SAVED = Path(__file__).parents[1] / "runtime" / "saved"


def body(*messages: Message, **options: Any) -> dict[str, Any]:
    """The body for a request made of ``messages`` and ``options``."""
    return build_body(ModelRequest(messages, **options), "claude-test")


# --- the conversation ---------------------------------------------------------


def test_system_messages_become_the_top_level_field() -> None:
    """System messages leave ``messages`` and join, in order, into ``system``."""
    sent = body(Message.system("Be brief."), Message.user("Hi"), Message.system("Use tools."))
    assert sent["system"] == "Be brief.\n\nUse tools."
    assert sent["messages"] == [{"role": "user", "content": "Hi"}]


def test_consecutive_results_and_text_make_one_user_turn_results_first() -> None:
    """Two tool messages and a user message after a turn with two calls become one user turn, results first."""
    sent = body(
        Message.user("Weather?"),
        Message.assistant("Checking.", [CALL, CALL2]),
        Message.tool(ToolResultPart("toolu_1", "get_weather", "sunny")),
        Message(
            "user", (TextPart("Also Rome?"), ToolResultPart("toolu_2", "get_weather", "boom", True))
        ),
    )
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    turn = sent["messages"][2]["content"]
    assert turn == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": True},
        {"type": "text", "text": "Also Rome?"},
    ]
    assistant = sent["messages"][1]["content"]
    assert assistant[0] == {"type": "text", "text": "Checking."}
    assert assistant[1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }


def test_thinking_goes_back_unchanged_and_foreign_reasoning_is_left_out() -> None:
    """Signed and redacted Anthropic thinking go back as blocks; unsigned or foreign reasoning does not."""
    parts = (
        THINKING,
        REDACTED,
        ReasoningPart("gemini thoughts", "gsig", "gemini"),
        ReasoningPart("unsigned", None, "anthropic"),
        CALL,
    )
    sent = body(
        Message.user("Weather?"),
        Message("assistant", parts),
        Message.tool(ToolResultPart("toolu_1", "get_weather", "sunny")),
    )
    assert sent["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": "Let me check.", "signature": "sig-abc"},
        {"type": "redacted_thinking", "data": "ENCRYPTED=="},
    ]
    assert len(sent["messages"][1]["content"]) == 3


@pytest.mark.parametrize("blank", ["\n\n", " ", " \n\t"])
def test_a_blank_answer_is_left_out_and_the_prompts_around_it_merge(blank: str) -> None:
    """An assistant answer of only whitespace is not sent back (the API refuses it); the user turns around it become one."""
    sent = body(Message.user("Say nothing."), Message.assistant(blank), Message.user("Now say hi."))
    assert sent["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Say nothing."},
                {"type": "text", "text": "Now say hi."},
            ],
        }
    ]


def test_blank_text_beside_calls_and_in_a_user_message_is_left_out() -> None:
    """Whitespace-only text beside tool calls, or beside an image in a user message, is dropped; the rest goes."""
    sent = body(
        Message.user(TextPart(" "), ImagePart(data=PNG, media_type="image/png")),
        Message.assistant("\n\n", [CALL]),
        Message.tool(ToolResultPart("toolu_1", "get_weather", "sunny")),
    )
    assert [b["type"] for b in sent["messages"][0]["content"]] == ["image"]
    assert [b["type"] for b in sent["messages"][1]["content"]] == ["tool_use"]


@pytest.mark.parametrize("prompt", ["", " ", "\n"])
@pytest.mark.parametrize("instructions", [False, True], ids=["alone", "with-instructions"])
def test_an_empty_or_blank_prompt_is_refused_before_sending(
    prompt: str, instructions: bool
) -> None:
    """A prompt of no text or only whitespace, with nothing else to send, is a ModelConfigError (the API answers 400), not `"messages": []`."""
    system = (Message.system("Tell a joke."),) if instructions else ()
    with pytest.raises(ModelConfigError, match="the prompt is empty or only whitespace"):
        body(*system, Message.user(prompt))


RESULT = ToolResultPart("toolu_1", "get_weather", "sunny")


@pytest.mark.parametrize("prompt", ["", " "])
@pytest.mark.parametrize(
    ("history", "sent"),
    [
        (
            (Message.user("Weather?"), Message.assistant("", [CALL]), Message.tool(RESULT)),
            [
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
                    ],
                },
            ],
        ),
        ((Message.user("hi"),), [{"role": "user", "content": "hi"}]),
    ],
    ids=["after-tool-results", "after-a-user-message"],
)
def test_a_blank_prompt_after_other_turns_is_left_out_and_the_rest_goes(
    history: tuple[Message, ...], sent: list[dict[str, Any]], prompt: str
) -> None:
    """run("" or " ", history=...) sends the history alone after tool results (as in a tool loop) or a user message."""
    assert body(Message.system("Be terse."), *history, Message.user(prompt))["messages"] == sent


@pytest.mark.parametrize("prompt", ["", " ", "\n"])
@pytest.mark.parametrize("answer", ["Autumn moon", "Autumn moon\n"])
def test_a_blank_prompt_after_an_answer_is_refused_not_sent_as_a_prefill(
    prompt: str, answer: str
) -> None:
    """run(" ", history=[user, answer]) is a ModelConfigError showing the explicit prefill, not a request ending with the answer for Claude to continue."""
    history = (Message.user("Write a haiku"), Message.assistant(answer))
    with pytest.raises(ModelConfigError, match="Claude would continue as a prefill") as caught:
        body(Message.system("Be terse."), *history, Message.user(prompt))
    assert 'run([Message.user("..."), Message.assistant("...")])' in str(caught.value)


def test_an_explicit_prefill_still_goes() -> None:
    """Messages ending with an assistant message (a prefill on purpose) go as given, ending with it."""
    sent = body(Message.user("Write a haiku"), Message.assistant("Autumn"))
    assert sent["messages"] == [
        {"role": "user", "content": "Write a haiku"},
        {"role": "assistant", "content": [{"type": "text", "text": "Autumn"}]},
    ]


def test_a_saved_state_holding_a_blank_answer_resumes() -> None:
    """A state saved by c17b8818 whose answer was "\n\n" loads and resumes; the request leaves the blank answer out and merges the prompts."""
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=claude_answer("Hi."))

    state = RunState.from_json((SAVED / "anthropic_blank_answer_finished.json").read_text())
    assert state.messages[-1] == Message.assistant("\n\n")
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        model = toolfold.model("anthropic:claude-sonnet-4-5", api_key="k" * 40, http_client=client)
        result = Agent(model).resume(state, message="Now say hi.")
    assert result.output == "Hi."
    assert [body["messages"] for body in sent] == [
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Say nothing."},
                    {"type": "text", "text": "Now say hi."},
                ],
            }
        ]
    ]


def claude_answer(text: str) -> dict[str, Any]:
    """A Messages API answer of ``text``."""
    return {
        "id": "msg_02",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


def test_a_blank_system_prompt_is_not_sent() -> None:
    """A system message of only whitespace sends no ``system`` field (a blank text the API refuses)."""
    assert "system" not in body(Message.system("  \n"), Message.user("Hi"))


CACHED = {"type": "text", "text": "Long context", "cache_control": {"type": "ephemeral"}}


@pytest.mark.parametrize(
    ("setting", "instructions", "sent"),
    [
        (" ", None, None),
        ("\n", "Be brief.", "Be brief."),
        ([{"type": "text", "text": "  "}], None, None),
        ([{"type": "text", "text": " "}, CACHED], None, [CACHED]),
        (
            [{"type": "text", "text": "\t", "cache_control": {"type": "ephemeral"}}, CACHED],
            "Be brief.",
            [CACHED, {"type": "text", "text": "Be brief."}],
        ),
    ],
)
def test_blank_text_in_the_system_setting_is_not_sent(
    setting: Any, instructions: str | None, sent: Any
) -> None:
    """The ``system`` setting's blank text (the whole string, or a block) is left out; what is left goes as before."""
    system = (Message.system(instructions),) if instructions else ()
    built = body(*system, Message.user("Hi"), settings={"system": setting})
    assert built.get("system") == sent


def test_images_and_documents() -> None:
    """Images inline or by URL; PDFs inline or by URL; plain text inline; each as its block type."""
    sent = body(
        Message.user(
            "Look",
            ImagePart(PNG, media_type="image/png"),
            ImagePart(url="https://example.com/a.jpg"),
            FilePart(b"%PDF-1.4", media_type="application/pdf", filename="a.pdf"),
            FilePart(url="https://example.com/b.pdf", media_type="application/pdf"),
            FilePart(b"plain words", media_type="text/plain"),
        )
    )
    blocks = sent["messages"][0]["content"]
    assert [b["type"] for b in blocks] == [
        "text",
        "image",
        "image",
        "document",
        "document",
        "document",
    ]
    assert blocks[1]["source"]["type"] == "base64"
    assert blocks[2]["source"] == {"type": "url", "url": "https://example.com/a.jpg"}
    assert blocks[3]["title"] == "a.pdf"
    assert blocks[5]["source"] == {
        "type": "text",
        "media_type": "text/plain",
        "data": "plain words",
    }


@pytest.mark.parametrize(
    ("part", "words"),
    [
        (ImagePart(b"x", media_type="image/tiff"), "image/tiff"),
        (FilePart(url="https://example.com/a.txt", media_type="text/plain"), "by URL"),
        (FilePart(b"x", media_type="audio/wav"), "audio/wav"),
    ],
)
def test_parts_anthropic_cannot_take_are_refused(part: Any, words: str) -> None:
    """An image type or file the API cannot take is a ModelConfigError naming it."""
    with pytest.raises(ModelConfigError, match=words):
        body(Message.user("x", part))


def test_a_text_file_not_in_utf8_is_refused_naming_it() -> None:
    """A text/plain file whose bytes are not UTF-8 is a ModelConfigError naming it, not a UnicodeDecodeError."""
    menu = FilePart("café".encode("latin-1"), media_type="text/plain", filename="menu.txt")
    with pytest.raises(ModelConfigError, match=r"'menu.txt' is not UTF-8 .*at byte 3 of 4"):
        body(Message.user("x", menu))


def test_a_tool_result_text_file_not_in_utf8_is_described() -> None:
    """A tool's text/plain file that is not UTF-8 goes as its description, not failing the request."""
    menu = FilePart("café".encode("latin-1"), media_type="text/plain", filename="menu.txt")
    result = ToolResultPart("toolu_1", "get_weather", "menu", parts=(TextPart("menu:"), menu))
    sent = body(Message.user("x"), Message.assistant("", [CALL]), Message.tool(result))
    content = sent["messages"][2]["content"][0]["content"]
    assert content == [
        {"type": "text", "text": "menu:"},
        {"type": "text", "text": "[file menu.txt: text/plain, 4 bytes]"},
    ]


@pytest.mark.parametrize(
    "part",
    [ImagePart(PNG, media_type="image/png"), FilePart(b"%PDF-1.4", media_type="application/pdf")],
)
def test_an_image_or_file_in_a_system_message_is_refused(part: Any) -> None:
    """A system message holding an image or file is a ModelConfigError, as on the other providers, not dropped."""
    with pytest.raises(ModelConfigError, match=f"system message can only hold text.*{part.kind!r}"):
        body(Message("system", [TextPart("Answer in this style:"), part]), Message.user("hi"))


# --- tools, choice, settings --------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "parallel", "wire"),
    [
        (None, None, None),
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        ("get_weather", None, {"type": "tool", "name": "get_weather"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        ("none", False, {"type": "none"}),
    ],
)
def test_tool_choice_on_the_wire(choice: str | None, parallel: bool | None, wire: Any) -> None:
    """Each neutral tool choice (and the parallel switch) becomes Anthropic's tool_choice object."""
    settings = {} if parallel is None else {"parallel_tool_calls": parallel}
    sent = body(Message.user("x"), tools=[WEATHER], tool_choice=choice, settings=settings)
    assert sent.get("tool_choice") == wire
    assert sent["tools"][0]["name"] == "get_weather"


def test_a_named_choice_for_an_unknown_tool_is_refused() -> None:
    """tool_choice naming no tool of the request is a ModelConfigError listing the tools."""
    with pytest.raises(ModelConfigError, match="get_weather"):
        body(Message.user("x"), tools=[WEATHER], tool_choice="nope")


def test_forcing_a_tool_with_thinking_on_is_refused_before_any_request() -> None:
    """Anthropic rejects a forced tool while thinking is enabled: refused up front, with the reason."""
    thinking = {"type": "enabled", "budget_tokens": 2048}
    with pytest.raises(ModelConfigError, match="extended thinking"):
        body(
            Message.user("x"),
            tools=[WEATHER],
            tool_choice="required",
            settings={"thinking": thinking},
        )


def test_max_tokens_default_and_settings() -> None:
    """max_tokens defaults to the documented 4096; stop becomes stop_sequences; the rest pass through."""
    assert body(Message.user("x"))["max_tokens"] == DEFAULT_MAX_TOKENS == 4096
    sent = body(
        Message.user("x"),
        settings={"max_tokens": 100, "stop": "END", "temperature": 0.2, "top_k": 5},
    )
    assert (sent["max_tokens"], sent["stop_sequences"], sent["temperature"], sent["top_k"]) == (
        100,
        ["END"],
        0.2,
        5,
    )


def test_a_thinking_budget_raises_the_default_max_tokens_above_it() -> None:
    """The API wants budget_tokens below max_tokens: the default makes room; a given max_tokens is kept."""

    def sent(thinking: dict[str, Any], **more: Any) -> Any:
        return body(Message.user("x"), settings={"thinking": thinking, **more})["max_tokens"]

    assert sent({"type": "enabled", "budget_tokens": 1024}) == 4096
    assert sent({"type": "enabled", "budget_tokens": 4096}) == 8192
    assert sent({"type": "enabled", "budget_tokens": 10_000}) == 14_096
    assert sent({"type": "disabled", "budget_tokens": 10_000}) == 4096
    # interleaved thinking lets the budget exceed max_tokens: a given one is sent as it is
    assert sent({"type": "enabled", "budget_tokens": 10_000}, max_tokens=2048) == 2048


FOREIGN_CALLS = (
    ToolCallPart("functions.get_weather:0", "get_weather", '{"city": "Paris"}'),
    ToolCallPart("call 2/é", "get_weather", '{"city": "Oslo"}'),
    ToolCallPart("", "get_weather", '{"city": "Rome"}'),
)


def test_call_ids_from_other_providers_are_rewritten_to_fit_and_still_match() -> None:
    """Ids outside ^[a-zA-Z0-9_-]+$ are rewritten the same way in the call and its result."""
    sent = body(
        Message.user("Weather?"),
        Message.assistant("", FOREIGN_CALLS),
        Message.tool(*(ToolResultPart(c.id, c.name, "sunny") for c in FOREIGN_CALLS)),
    )
    uses = [b["id"] for b in sent["messages"][1]["content"]]
    results = [b["tool_use_id"] for b in sent["messages"][2]["content"]]
    assert uses == results
    assert uses[0].startswith("functions_get_weather_0_")
    assert uses[1].startswith("call_2__")
    assert len(set(uses)) == 3
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", u) for u in uses)
    assert spec_problems(sent, beta=False) == []
    # ids that fit go back unchanged; the rewrite is deterministic and keeps near ids apart
    assert anthropic_id("toolu_01A-b") == "toolu_01A-b"
    assert anthropic_id("a.b") == anthropic_id("a.b") != anthropic_id("a:b")


@pytest.mark.parametrize("setting", ["seed", "frequency_penalty", "presence_penalty"])
def test_settings_the_api_has_no_field_for_are_refused(setting: str) -> None:
    """A neutral setting Anthropic lacks (the body allows no extra fields) is a ModelConfigError naming it."""
    with pytest.raises(ModelConfigError, match=setting):
        body(Message.user("x"), settings={setting: 1})


def test_a_setting_anthropic_lacks_says_where_it_comes_from_and_how_to_drop_it() -> None:
    """The error names the agent's settings (evolve(seed=None)) and a resumed run's stored ones."""
    with pytest.raises(ModelConfigError) as caught:
        body(Message.user("x"), settings={"seed": 7})
    text = str(caught.value)
    assert "no equivalent in the Anthropic Messages API" in text
    assert "agent.evolve(seed=None)" in text
    assert "settings={} changes nothing" in text
    assert "a resume keeps" in text
    assert "remove it" not in text


def test_a_setting_given_as_none_is_not_sent() -> None:
    """A None setting (how evolve(seed=None) leaves it) is left out of the body, not refused."""
    assert "seed" not in body(Message.user("x"), settings={"seed": None})


def test_strict_tools_and_output_use_the_beta_endpoint_with_its_header() -> None:
    """A strict tool or an output schema marks the body beta; the model adds the recorded beta header."""
    strict = ToolDefinition("get_weather", "Weather.", dict(WEATHER.parameters), strict=True)
    sent = body(Message.user("x"), tools=[strict])
    assert sent["tools"][0]["strict"] is True
    assert sent["tools"][0]["input_schema"]["additionalProperties"] is False
    assert is_beta(sent)
    assert not is_beta(body(Message.user("x"), tools=[WEATHER]))
    out = body(Message.user("x"), output=OutputSpec("answer", {"type": "object", "properties": {}}))
    assert out["output_format"]["type"] == "json_schema"
    assert is_beta(out)
    model = AnthropicModel(
        "claude-test", api_key="k" * 20, headers={"anthropic-beta": "files-api-2025-04-14"}
    )
    strict_request = ModelRequest(messages=(Message.user("x"),), tools=(strict,))
    prepared = model.prepare(strict_request)
    assert model._path(prepared, False) == "v1/messages?beta=true"
    assert prepared.headers == {"anthropic-beta": f"files-api-2025-04-14,{STRICT_BETA}"}
    plain = model.prepare(ModelRequest(messages=(Message.user("x"),)))
    assert plain.headers is None
    assert model._path(plain, False) == "v1/messages"


def test_a_strict_tool_outside_the_subset_is_a_schema_error() -> None:
    """strict=True on a schema with a numeric bound (not in Anthropic's strict subset) fails before sending."""
    bounded = ToolDefinition("plan", "Plan.", dict(NESTED.parameters), strict=True)
    with pytest.raises(SchemaCompileError, match="minimum"):
        body(Message.user("x"), tools=[bounded])


# --- the spec, over a matrix --------------------------------------------------

CONVERSATIONS = {
    "prompt": (Message.user("Hi"),),
    "system+images": (
        Message.system("Be brief."),
        Message.user("Look", ImagePart(PNG), ImagePart(url="https://example.com/a.png")),
    ),
    "documents": (
        Message.user(
            FilePart(b"%PDF", media_type="application/pdf"),
            FilePart(url="https://e.com/a.pdf", media_type="application/pdf"),
            FilePart(b"words", media_type="text/plain", filename="notes.txt"),
            "Summarise",
        ),
    ),
    "tool round trip": (
        Message.user("Weather?"),
        Message.assistant("", [CALL, CALL2]),
        Message.tool(ToolResultPart("toolu_1", "get_weather", "sunny")),
        Message.tool(ToolResultPart("toolu_2", "get_weather", "no station", True)),
    ),
    "ids from another provider": (
        Message.user("Weather?"),
        Message.assistant("", FOREIGN_CALLS),
        Message.tool(*(ToolResultPart(c.id, c.name, "sunny") for c in FOREIGN_CALLS)),
    ),
    "thinking round trip": (
        Message.user("Weather?"),
        Message("assistant", (THINKING, REDACTED, TextPart("Checking."), CALL)),
        Message("tool", (ToolResultPart("toolu_1", "get_weather", "sunny"),)),
        Message.user("And tomorrow?"),
    ),
}
TOOLSETS = {"none": (), "one": (WEATHER,), "three": (WEATHER, NESTED, NO_PARAMS)}
CHOICES = [None, "auto", "required", "none", "get_weather"]
SETTINGS = {
    "plain": {},
    "sampling": {"temperature": 0.5, "top_p": 0.9, "top_k": 10, "stop": ["END"], "max_tokens": 512},
    "serial": {"parallel_tool_calls": False, "metadata": {"user_id": "u-1"}},
    "thinking": {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 4096},
}


def _matrix() -> list[tuple[str, ModelRequest, bool]]:
    cases = []
    for (conv, messages), (tools_name, tools), choice, (
        set_name,
        settings,
    ), stream in itertools.product(
        CONVERSATIONS.items(), TOOLSETS.items(), CHOICES, SETTINGS.items(), (False, True)
    ):
        if choice is not None and not tools:
            continue
        if choice == "get_weather" and WEATHER not in tools:
            continue
        if set_name == "thinking" and choice in ("required", "get_weather"):
            continue  # refused before any request (tested above)
        name = f"{conv}/{tools_name}/{choice}/{set_name}/{'stream' if stream else 'whole'}"
        cases.append((name, ModelRequest(messages, tools, choice, None, settings), stream))
    strict = ToolDefinition("get_weather", "Weather.", dict(WEATHER.parameters), strict=True)
    for stream in (False, True):
        cases.append(
            (f"strict tool/{stream}", ModelRequest(CONVERSATIONS["prompt"], (strict,)), stream)
        )
        output = OutputSpec("answer", {"type": "object", "properties": {"x": {"type": "integer"}}})
        cases.append(
            (f"output/{stream}", ModelRequest(CONVERSATIONS["prompt"], (), output=output), stream)
        )
    return cases


MATRIX = _matrix()


def test_the_matrix_is_large() -> None:
    """The spec check below covers hundreds of distinct request bodies."""
    assert len(MATRIX) >= 300


@pytest.mark.parametrize(("name", "request_", "stream"), MATRIX, ids=[m[0] for m in MATRIX])
def test_every_body_validates_against_the_spec(
    name: str, request_: ModelRequest, stream: bool
) -> None:
    """Each body is a valid CreateMessageParams (BetaCreateMessageParams when it uses a beta feature)."""
    sent = build_body(request_, "claude-sonnet-4-5", stream=stream)
    assert spec_problems(sent, beta=is_beta(sent)) == []


BOUNDED = {
    "type": "object",
    "properties": {
        "m": {"type": "integer", "exclusiveMinimum": 0},
        "s": {"type": "string", "minLength": 2},
        "l": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
    },
    "required": ["m", "s", "l"],
    "additionalProperties": False,
}
RECURSIVE = {
    "type": "object",
    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
    "required": ["kids"],
    "additionalProperties": False,
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            "required": ["kids"],
            "additionalProperties": False,
        }
    },
}


def test_output_format_bounds_go_into_descriptions() -> None:
    """output_format has no loose mode: bounds Anthropic's structured output refuses are
    sent as descriptions (the strict subset), not as schema keywords."""
    schema = body(Message.user("x"), output=OutputSpec("P", BOUNDED))["output_format"]["schema"]
    assert schema["properties"] == {
        "m": {"type": "integer", "description": "exclusiveMinimum: 0"},
        "s": {"type": "string", "description": "minLength: 2"},
        "l": {"type": "array", "items": {"type": "integer"}, "description": "maxItems: 3"},
    }
    with pytest.raises(SchemaCompileError, match=r"output type 'P'(.|\n)*exclusiveMinimum"):
        body(Message.user("x"), output=OutputSpec("P", BOUNDED, strict=True))


def test_a_recursive_output_schema_is_refused_before_the_request() -> None:
    """A recursive output schema, which Anthropic's structured output does not take, is a
    SchemaCompileError about the output type (no tool)."""
    with pytest.raises(SchemaCompileError) as caught:
        body(Message.user("x"), output=OutputSpec("Node", RECURSIVE))
    message = str(caught.value)
    assert message.startswith("cannot send the output type 'Node' as anthropic structured output")
    assert "recursive" in message
    assert "tool" not in message.split("\n")[0]


def test_an_open_object_output_schema_is_refused_not_closed() -> None:
    """dict[str, Any]'s schema ({"type": "object"}) or additionalProperties: true is refused
    for output_format (no loose mode): closed, it would allow only {}."""
    for schema in (
        {"type": "object"},
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True},
    ):
        with pytest.raises(SchemaCompileError, match=r"output type 'Any'(.|\n)*\(root\)"):
            body(Message.user("x"), output=OutputSpec("Any", schema))


def test_output_problems_name_the_structured_output_not_tool_use() -> None:
    """Each problem line of an output schema names Anthropic's structured output, not its
    strict tool use (no tool is involved)."""
    mapping = {"type": "object", "additionalProperties": {"type": "integer"}}
    with pytest.raises(SchemaCompileError) as caught:
        body(Message.user("x"), output=OutputSpec("Tally", mapping))
    message = str(caught.value)
    assert "(root): additionalProperties refused [lossy]: Anthropic structured output" in message
    assert "tool" not in message


def test_a_request_without_tools_names_the_tools_its_history_calls() -> None:
    """A handoff target without tools gets the triage agent's tool_use and tool_result
    blocks: the API answers 400 for such blocks in a request that defines no tools
    (anthropics/anthropic-sdk-python#494). The tools the history names go as stand-in
    definitions the model cannot call (tool_choice none), noted; the body fits the spec."""
    history = (
        Message.user("refund my order"),
        Message("assistant", (THINKING, ToolCallPart("toolu_h", "transfer_to_refunds", "{}", {}))),
        Message.tool(ToolResultPart("toolu_h", "transfer_to_refunds", "Transferred.")),
    )
    request = ModelRequest(
        history, settings={"thinking": {"type": "enabled", "budget_tokens": 2048}}
    )
    prepared = AnthropicModel("claude-sonnet-4-5", api_key="k" * 20).prepare(request)
    sent = dict(prepared.body)
    assert [tool["name"] for tool in sent["tools"]] == ["transfer_to_refunds"]
    assert sent["tool_choice"] == {"type": "none"}
    assert spec_problems(sent, beta=False) == []
    (note,) = prepared.report.notes
    assert "transfer_to_refunds sent as stand-in definitions" in note
    # A request with tools of its own, or no call in its history, is sent as it was.
    assert [t["name"] for t in body(*history, tools=(WEATHER,))["tools"]] == ["get_weather"]
    assert "tools" not in body(Message.user("Hi"))


def test_stand_in_tools_are_named_as_the_history_sends_its_calls() -> None:
    """A tool-less request with a Gemini history (``default_api.get_weather``, a name the
    model made up): the stand-ins are named as the tool_use blocks are sent, by a name
    ``Tool.name`` takes (``^[a-zA-Z0-9_-]{1,128}$``); main copied the dotted name (400)."""
    history = (
        Message.user("weather?"),
        Message("assistant", (ToolCallPart("c1", "default_api.get_weather", "{}", {}),)),
        Message.tool(ToolResultPart("c1", "default_api.get_weather", "Unknown tool", True)),
        Message.user("again"),
    )
    sent = body(*history)
    (call,) = [b for b in sent["messages"][1]["content"] if b["type"] == "tool_use"]
    assert call["name"].startswith("default_api_get_weather_")
    assert [tool["name"] for tool in sent["tools"]] == [call["name"]]
    assert sent["tool_choice"] == {"type": "none"}
    assert spec_problems(sent, beta=False) == []


@pytest.mark.parametrize(
    "settings",
    [
        {"tool_choice": {"type": "any"}},
        {"tool_choice": {"type": "auto"}},
        {"parallel_tool_calls": False},
    ],
)
def test_stand_in_tools_stay_uncallable_whatever_tool_choice_a_setting_asks(
    settings: dict[str, Any],
) -> None:
    """An agent without tools sharing another's settings (a tool_choice, parallel calls off):
    the stand-ins still go with tool_choice none, the asked choice left out and noted. Round 1
    kept {"type": "any"} next to them, so the model could call a tool that is not there."""
    history = (
        Message.user("refund my order"),
        Message("assistant", (ToolCallPart("toolu_h", "transfer_to_refunds", "{}", {}),)),
        Message.tool(ToolResultPart("toolu_h", "transfer_to_refunds", "Transferred.")),
    )
    prepared = AnthropicModel("claude-sonnet-4-5", api_key="k" * 20).prepare(
        ModelRequest(history, settings=settings)
    )
    assert prepared.body["tool_choice"] == {"type": "none"}
    assert spec_problems(dict(prepared.body), beta=False) == []
    (note,) = prepared.report.notes
    assert "stand-in definitions with tool_choice none" in note
    if "tool_choice" in settings:
        assert f"tool_choice {settings['tool_choice']} not sent" in note


def test_the_advice_for_reasoning_effort_is_a_request_the_spec_takes() -> None:
    """reasoning_effort is refused naming thinking or output_config={'effort': ...}: each
    gives a body its endpoint's spec takes (output_config, only in BetaCreateMessageParams,
    sends the request to the beta endpoint)."""
    model = AnthropicModel("claude-opus-4-5", api_key="k" * 20)
    with pytest.raises(ModelConfigError, match=re.escape("output_config={'effort': 'high'}")):
        model.prepare(ModelRequest((Message.user("Hi"),), settings={"reasoning_effort": "high"}))
    effort = dict(
        model.prepare(
            ModelRequest((Message.user("Hi"),), settings={"output_config": {"effort": "high"}})
        ).body
    )
    assert is_beta(effort)
    assert spec_problems(effort, beta=True) == []
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    sent = dict(model.prepare(ModelRequest((Message.user("Hi"),), settings=thinking)).body)
    assert not is_beta(sent)
    assert spec_problems(sent, beta=False) == []
