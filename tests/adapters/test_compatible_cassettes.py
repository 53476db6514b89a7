"""Replay every recorded Groq, Mistral and OpenAI-compatible exchange through a real model."""

from __future__ import annotations

import pytest
from cassettes import folder, load, normalise_body, replay
from replay_expectations import (
    COMPATIBLE,
    COMPATIBLE_PROVIDERS,
    GROQ,
    MISTRAL,
    Answer,
    Failure,
)

TABLES: dict[str, dict[tuple[str, int], Answer | Failure]] = {
    "groq-chat-completions": GROQ,
    "mistral-chat-completions": MISTRAL,
    "openai-compatible": COMPATIBLE,
}
CASES = [
    (name, i)
    for folder_name in TABLES
    for name in folder(folder_name)
    for i in range(len(load(name)))
]
IDS = [f"{n}#{i}" for n, i in CASES]


def _provider(name: str) -> tuple[str, dict[str, str]]:
    folder_name, file = name.split("/", 1)
    if folder_name == "groq-chat-completions":
        return "groq", {}
    if folder_name == "mistral-chat-completions":
        return "mistral", {}
    provider, base_url = COMPATIBLE_PROVIDERS[file]
    return provider, ({"base_url": base_url} if base_url else {})


@pytest.mark.parametrize("folder_name", sorted(TABLES))
def test_every_recorded_exchange_has_an_expectation(folder_name: str) -> None:
    """Each folder's expectation table covers exactly the exchanges on disk."""
    on_disk = {(n.split("/", 1)[1], i) for n, i in CASES if n.startswith(folder_name + "/")}
    assert on_disk == set(TABLES[folder_name])


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_recorded_response_parses_to_what_the_recording_shows(name: str, index: int) -> None:
    """Each recorded response or stream becomes the recorded calls, text, usage or error."""
    provider, options = _provider(name)
    result, _, _ = replay(name, index, provider, **options)
    folder_name, file = name.split("/", 1)
    TABLES[folder_name][(file, index)].check(result)


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_request_rebuilt_from_neutral_messages_matches_the_recording(name: str, index: int) -> None:
    """Encoding the conversation the recording expresses gives the recorded body, semantically."""
    provider, options = _provider(name)
    _, sent, recorded = replay(name, index, provider, **options)
    assert normalise_body(sent, recorded=recorded) == normalise_body(recorded)


def test_deepseek_conversation_written_by_hand_rebuilds_the_recorded_request() -> None:
    """The DeepSeek tool turn, with its thinking sent back, is the recorded second request."""
    from toolfold.adapters.openai_chat import PROVIDERS, build_body
    from toolfold.runtime import (
        Message,
        ModelRequest,
        ReasoningPart,
        TextPart,
        ToolCallPart,
        ToolDefinition,
        ToolResultPart,
    )

    recorded = load("openai-compatible/deepseek-parallel-2-calls-results-final.yaml")[
        1
    ].request_json
    tools = tuple(
        ToolDefinition(
            t["function"]["name"],
            t["function"]["description"],
            t["function"]["parameters"],
            t["function"].get("strict", False),
        )
        for t in recorded["tools"]
    )
    thinking = (
        "The user wants to play a dice game. I need to roll a die and compare it to the user's "
        "guess of 4. But the DICE_ROLL capability is deferred - I need to load it first using the "
        "`load_capability` tool.\n\nLet me load the capability first."
    )
    messages = (
        Message.system(recorded["messages"][0]["content"]),
        Message.system(recorded["messages"][1]["content"]),
        Message.user("My guess is 4"),
        Message(
            "assistant",
            (
                ReasoningPart(thinking, provider="deepseek"),
                TextPart("Let me load the dice rolling capability!"),
                ToolCallPart(
                    "call_00_sXqYgMESDht75NCLLZtt9804",
                    "load_capability",
                    '{"id": "DICE_ROLL"}',
                    {"id": "DICE_ROLL"},
                ),
            ),
        ),
        Message.tool(ToolResultPart("call_00_sXqYgMESDht75NCLLZtt9804", "load_capability", "{}")),
        Message(
            "assistant",
            (
                ToolCallPart(
                    "auto_load_eb5fc31bb581b4e7",
                    "search_tools",
                    '{"queries":["DICE_ROLL"]}',
                    {"queries": ["DICE_ROLL"]},
                ),
            ),
        ),
        Message.tool(
            ToolResultPart(
                "auto_load_eb5fc31bb581b4e7", "search_tools", recorded["messages"][6]["content"]
            )
        ),
    )
    request = ModelRequest(messages, tools, "auto")
    body = build_body(request, "deepseek-reasoner", PROVIDERS["deepseek"])
    assert body["messages"][5]["reasoning_content"] == ""
    assert normalise_body(body) == normalise_body(recorded)


def test_mistral_conversation_written_by_hand_rebuilds_the_recorded_request() -> None:
    """The Mistral call, its result and tool_choice "any" are the recorded second request."""
    from toolfold.adapters.openai_chat import PROVIDERS, build_body
    from toolfold.runtime import Message, ModelRequest, ToolCallPart, ToolDefinition, ToolResultPart

    recorded = load("mistral-chat-completions/call-result-second-call.yaml")[1].request_json
    weather = ToolDefinition(
        "get_weather",
        "Get the current weather for a city.",
        {
            "additionalProperties": False,
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "type": "object",
        },
    )
    final = ToolDefinition(
        "final_result",
        "The final response which ends this conversation",
        {
            "properties": {"city": {"type": "string"}, "summary": {"type": "string"}},
            "required": ["city", "summary"],
            "title": "CityInfo",
            "type": "object",
        },
    )
    call = ToolCallPart("rHU0eZiMa", "get_weather", '{"city": "Paris"}', {"city": "Paris"})
    messages = (
        Message.user("Get weather for Paris and summarize"),
        Message.assistant(tool_calls=[call]),
        Message.tool(ToolResultPart("rHU0eZiMa", "get_weather", "Sunny, 22C in Paris")),
    )
    request = ModelRequest(messages, (weather, final), "required", None, {"top_p": 1.0})
    body = build_body(request, "mistral-large-latest", PROVIDERS["mistral"])
    assert body["tool_choice"] == "any"
    assert normalise_body(body) == normalise_body(recorded)
