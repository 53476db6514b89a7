"""What each recorded Gemini and OpenAI Responses exchange must parse into, from the cassettes."""

from __future__ import annotations

from replay_expectations import Answer, Failure

from toolfold import AuthenticationError, BadRequestError, NotFoundError

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


def _done(*calls: tuple[str, str, dict[str, object]], usage: tuple[int, int, int, int]) -> Answer:
    return Answer(calls, usage=usage, finish="tool_calls", raw_finish="completed")


def _text(text: str, usage: tuple[int, int, int, int]) -> Answer:
    return Answer(text=text, usage=usage, raw_finish="completed")


RESPONSES: dict[tuple[str, int], Answer | Failure] = {
    # A reasoning item (encrypted, empty summary) precedes the call.
    ("error-400-after-tool-result.yaml", 0): _done(
        ("call_gFG8Zu1R4MRxNk3cCbTbucuT", "get_file", {}), usage=(47, 66, 0, 0)
    ),
    ("error-400-after-tool-result.yaml", 1): Failure(
        BadRequestError, "The file type you uploaded is not supported", 400, "unsupported_file"
    ),
    ("error-400-invalid-tool-schema.yaml", 0): _done(
        ("call_Y3kZyVbjyhkatuwQCffwwZNP", "get_current_weather", {"location": "San Francisco"}),
        usage=(65, 17, 0, 0),
    ),
    ("error-400-invalid-tool-schema.yaml", 1): Failure(
        BadRequestError,
        "'required' is required to be supplied",
        400,
        "invalid_function_parameters",
    ),
    ("error-400-invalid-tool-schema.yaml", 2): _done(
        (
            "call_zeYVaQ2jORPznoo5WcuZp6dL",
            "get_current_weather",
            {"location": "San Francisco", "unit": "fahrenheit"},
        ),
        usage=(65, 22, 0, 0),
    ),
    # A streamed request answered by a plain JSON error body.
    ("error-400-stream-request.yaml", 0): Failure(
        BadRequestError, "Invalid 'temperature'", 400, "decimal_below_min_value"
    ),
    ("error-401-invalid-key.yaml", 0): Failure(
        AuthenticationError, "Incorrect API key provided", 401, "invalid_api_key"
    ),
    ("parallel-2-calls-gzip-body.yaml", 0): _done(
        ("call_tYDv1bhtioyX33juEGDY4D6H", "get_weather", {"location": "London"}),
        ("call_lC079UhGnLJngBlPQO0FS6sv", "get_weather", {"location": "London"}),
        usage=(58, 44, 0, 0),
    ),
    ("parallel-2-calls-gzip-body.yaml", 1): _done(
        ("call_grggfsR0ccRoMcXy17gsju6I", "get_weather", {"location": "London"}),
        ("call_jQ4vl5MZL0h55SoqPmlfYYyd", "get_weather", {"location": "London"}),
        usage=(59, 45, 0, 0),
    ),
    ("parallel-2-calls-results-final.yaml", 0): _done(
        ("call_LWVp74L5HaH2KNvgVz9PJsrj", "get_location", {"loc_name": "Londos"}),
        ("call_YnRAWeTyxI91m5uNa5bxXwVO", "get_location", {"loc_name": "London"}),
        usage=(0, 0, 0, 0),  # as recorded
    ),
    ("parallel-2-calls-results-final.yaml", 1): _text(
        'It seems "Londos" might be incorrect or unknown. If you meant something else, please '
        "clarify.\n\nFor **London**, it's located at approximately latitude 51\u00b0 N and "
        "longitude 0\u00b0 W.",
        (335, 44, 0, 0),
    ),
    ("single-call-result-final.yaml", 0): _done(
        ("call_YfwRsW8sUxDKipwyhWTzOXCA", "get_capital", {"country": "PotatoLand"}),
        usage=(40, 18, 0, 0),
    ),
    ("single-call-result-final.yaml", 1): _text(
        "The capital of PotatoLand is Potato City.", (67, 11, 0, 0)
    ),
    ("single-call-tool-choice-required.yaml", 0): _done(
        ("call_1qsWTcKZwQRwKLxPFIMpbnzV", "get_weather", {"city": "Paris"}),
        usage=(48, 105, 0, 64),
    ),
    ("stream-parallel-2-calls.yaml", 0): _done(
        ("call_tVwplip8EyrgMsD2ZarNBIFJ", "secret_retrieval_tool", {"password": "mellon"}),
        ("call_MHKI6t2Q3p5qwBAm21ysBMIc", "secret_retrieval_tool", {"password": "radiance"}),
        usage=(36, 54, 0, 0),
    ),
    ("stream-parallel-2-calls.yaml", 1): _done(
        ("call_nQBHB7aQgltW1QH94YRQYyer", "secret_retrieval_tool", {"password": "mellon"}),
        ("call_rI7qIauOBe4l1rEe4enUzA2a", "secret_retrieval_tool", {"password": "radiance"}),
        usage=(36, 54, 0, 0),
    ),
    ("stream-single-call-result-final.yaml", 0): _done(
        ("call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", {"country": "France"}),
        usage=(255, 16, 0, 0),
    ),
    ("stream-single-call-result-final.yaml", 1): _text(
        "The capital of France is Paris.", (278, 9, 0, 0)
    ),
}
