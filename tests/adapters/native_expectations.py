"""What each recorded Gemini and OpenAI Responses exchange must parse into, from the cassettes."""

from __future__ import annotations

from replay_expectations import Answer, Failure

from toolfold import AuthenticationError, NotFoundError

_JOKES = [
    "What kind of car does a sheep drive? A Lamborghini!",
    "Why don't you see penguins in Great Britain? Because they're afraid of Wales!",
    "What happened when the wheel was invented? It caused a revolution!",
]


GEMINI: dict[tuple[str, int], Answer | Failure] = {
    # A bad key is HTTP 400 INVALID_ARGUMENT with reason API_KEY_INVALID.
    ("error-400-invalid-key.yaml", 0): Failure(
        AuthenticationError, "API key not valid", 400, "INVALID_ARGUMENT"
    ),
    ("error-404-unknown-model.yaml", 0): Failure(
        NotFoundError, "models/gemini-3.6-flahs is not found", 404, "NOT_FOUND"
    ),
    ("parallel-2-calls.yaml", 0): Answer(
        (
            (None, "get_weather", {"location": "Boston"}),
            (None, "get_weather", {"location": "New Delhi"}),
        ),
        usage=(64, 11, 0, 0),
        finish="tool_calls",
        raw_finish="STOP",
        model="gemini-2.0-flash",
    ),
    # Output tokens = candidates + thoughts; reasoning = thoughts.
    ("parallel-3-calls-multi-step.yaml", 0): Answer(
        ((None, "generate_topic", {}),) * 3,
        usage=(83, 220, 0, 190),
        finish="tool_calls",
        raw_finish="STOP",
        model="gemini-3-flash-preview",
    ),
    ("parallel-3-calls-multi-step.yaml", 1): Answer(
        ((None, "generate_topic", {}),),
        usage=(348, 50, 0, 40),
        finish="tool_calls",
        raw_finish="STOP",
    ),
    ("parallel-3-calls-multi-step.yaml", 2): Answer(
        ((None, "generate_topic", {}),),
        usage=(415, 115, 0, 105),
        finish="tool_calls",
        raw_finish="STOP",
    ),
    ("parallel-3-calls-multi-step.yaml", 3): Answer(
        ((None, "generate_topic", {}),),
        usage=(546, 116, 0, 106),
        finish="tool_calls",
        raw_finish="STOP",
    ),
    ("parallel-3-calls-multi-step.yaml", 4): Answer(
        ((None, "final_result", {"response": _JOKES}),),
        usage=(679, 300, 0, 235),
        finish="tool_calls",
        raw_finish="STOP",
    ),
    ("single-call-mode-any.yaml", 0): Answer(
        ((None, "get_weather", {"city": "Paris"}),),
        usage=(46, 63, 0, 48),
        finish="tool_calls",
        raw_finish="STOP",
        model="gemini-2.5-flash",
    ),
    ("single-call-result-final.yaml", 0): Answer(
        ((None, "get_weather", {"city": "Paris"}),),
        usage=(49, 63, 0, 48),
        finish="tool_calls",
        raw_finish="STOP",
    ),
    ("single-call-result-final.yaml", 1): Answer(
        text="The weather in Paris is sunny with a temperature of 22C.",
        usage=(88, 15, 0, 0),
        raw_finish="STOP",
    ),
    # The streamed JSON array: a thought part, then the call in the last element.
    ("stream-json-array-sequential-calls-results-final-gzip-body.yaml", 0): Answer(
        ((None, "pelican_name_generator", {}),),
        usage=(32, 54, 0, 42),
        finish="tool_calls",
        raw_finish="STOP",
        reasoning="**Generating Pelican Names**",
        model="gemini-2.5-flash",
    ),
    ("stream-json-array-sequential-calls-results-final-gzip-body.yaml", 1): Answer(
        ((None, "pelican_name_generator", {}),),
        usage=(105, 13, 0, 0),
        finish="tool_calls",
        raw_finish="STOP",
    ),
    ("stream-json-array-sequential-calls-results-final-gzip-body.yaml", 2): Answer(
        text="How about Charles and Sammy?", usage=(137, 6, 0, 0), raw_finish="STOP"
    ),
    ("stream-sse-parallel-2-calls-results-final.yaml", 0): Answer(
        (
            (None, "secret_retrieval_tool", {"password": "mellon"}),
            (None, "secret_retrieval_tool", {"password": "radiance"}),
        ),
        usage=(70, 101, 0, 61),
        finish="tool_calls",
        raw_finish="STOP",
    ),
    ("stream-sse-parallel-2-calls-results-final.yaml", 1): Answer(
        text='The secrets associated with the passwords "mellon" and "radiance" are '
        '"Welcome to Moria!" and "Life before Death" respectively.',
        usage=(211, 30, 0, 0),
        raw_finish="STOP",
    ),
    ("stream-sse-parallel-2-calls.yaml", 0): Answer(
        (
            (None, "get_weather", {"location": "Boston"}),
            (None, "get_weather", {"location": "New Delhi"}),
        ),
        usage=(64, 11, 0, 0),
        finish="tool_calls",
        raw_finish="STOP",
    ),
}
