"""What each recorded exchange must parse into, written from the cassettes' content."""

from __future__ import annotations

from typing import Any

import attrs
from cassettes import load

from toolfold import (
    AuthenticationError,
    BadRequestError,
    ModelResponse,
    RateLimitError,
    ToolUseFailedError,
)


@attrs.frozen
class Answer:
    """A successful response: calls as (id, name, arguments), text, usage, finish."""

    calls: tuple[tuple[str | None, str, dict[str, Any]], ...] = ()
    text: str = ""
    usage: tuple[int, int, int, int] = (0, 0, 0, 0)  # input, output, cached, reasoning
    finish: str = "stop"
    raw_finish: str | None = None
    reasoning: str | None = None  # the start of the reasoning text, when there is some
    model: str | None = None

    def check(self, response: Any) -> None:
        """Assert ``response`` is this answer."""
        assert isinstance(response, ModelResponse), response
        got = [(c.id, c.name, c.arguments) for c in response.tool_calls]
        want = [
            (i if i is not None else got[n][0], name, a)
            for n, (i, name, a) in enumerate(self.calls)
        ]
        assert got == want
        assert response.text == self.text
        u = response.usage
        assert (u.input_tokens, u.output_tokens, u.cached_tokens, u.reasoning_tokens) == self.usage
        assert u.requests == 1
        assert response.finish_reason == self.finish
        assert response.raw_finish_reason == (self.raw_finish or self.finish)
        reasoning = "".join(p.text for p in response.message.parts if p.kind == "reasoning")
        if self.reasoning is None:
            assert reasoning == ""
        else:
            assert reasoning.startswith(self.reasoning)
        if self.model is not None:
            assert response.model_name == self.model


@attrs.frozen
class Failure:
    """An error recording: the exception class and words from the provider's message.

    Every recorded error reaches the caller with the provider's own words as
    ``provider_message``, quoted in the error's message.
    """

    error: type[Exception]
    words: str
    status: int | None = None
    code: str | None = None

    def check(self, result: Any) -> None:
        """Assert ``result`` is this failure."""
        assert type(result) is self.error, repr(result)
        assert self.words in str(result)
        assert result.provider_message, repr(result)
        assert result.provider_message in str(result)
        assert result.status_code == self.status
        if self.code is not None:
            assert result.code == self.code


OPENAI: dict[tuple[str, int], Answer | Failure] = {
    ("single-call-tool-choice-required.yaml", 0): Answer(
        (("call_injwxidE5XUzmiKVfOH3rxf2", "get_weather", {"city": "Paris"}),),
        usage=(130, 87, 0, 64),
        finish="tool_calls",
        model="gpt-5-mini-2025-08-07",
    ),
    ("single-call-result-final.yaml", 0): Answer(
        (("call_bhZkmIKKItNGJ41whHUHB7p9", "get_temperature", {"city": "Tokyo"}),),
        usage=(50, 15, 0, 0),
        finish="tool_calls",
    ),
    ("single-call-result-final.yaml", 1): Answer(
        text="The temperature in Tokyo is currently 20.0 degrees Celsius.", usage=(75, 15, 0, 0)
    ),
    ("parallel-2-calls-results-final.yaml", 0): Answer(
        (
            ("call_jYdIdRZHxZTn5bWCq5jlMrJi", "delete_file", {"path": ".env"}),
            ("call_TmlTVWQbzrXCZ4jNsCVNbNqu", "create_file", {"path": "test.txt"}),
        ),
        usage=(71, 46, 0, 0),
        finish="tool_calls",
    ),
    ("parallel-2-calls-results-final.yaml", 1): Answer(
        text="The file `.env` has been deleted and `test.txt` has been created successfully.",
        usage=(133, 19, 0, 0),
    ),
    ("parallel-2-calls-gzip-body.yaml", 0): Answer(
        (
            ("call_3JNWJ9wdfRsmkhKWql4HqJhR", "get_current_weather", {"location": "San Francisco"}),
            ("call_8jQ7TzSBlLV4tzrMRpq5Tg98", "get_current_weather", {"location": "Boston"}),
        ),
        usage=(70, 46, 0, 0),
        finish="tool_calls",
    ),
    ("parallel-2-calls-gzip-body.yaml", 1): Answer(
        (
            ("call_rU416PaA6UFgxje2GemBVAwt", "get_current_weather", {"location": "San Francisco"}),
            ("call_iqCZB6DkOW5TPjHK29vpiAFa", "get_current_weather", {"location": "Boston"}),
        ),
        usage=(70, 46, 0, 0),
        finish="tool_calls",
    ),
    ("history-tool-results-then-parallel-2-calls.yaml", 0): Answer(
        (
            ("call_S1xa8vawU2HXSrvSeUcqSCZm", "get_weather", {"city": "San Francisco"}),
            ("call_ZfEORmbRGEJZ4b7dAuVSPnaf", "get_population", {"city": "San Francisco"}),
        ),
        usage=(207, 46, 0, 0),
        finish="tool_calls",
    ),
    ("stream-single-call-result-final.yaml", 0): Answer(
        (("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", {"country": "UK"}),),
        usage=(53, 15, 0, 0),
        finish="tool_calls",
        model="gpt-4o-mini-2024-07-18",
    ),
    ("stream-single-call-result-final.yaml", 1): Answer(
        text="The capital of the UK is London.", usage=(78, 9, 0, 0)
    ),
    # Recorded without stream_options: no usage chunk, so no counts.
    ("stream-parallel-2-calls.yaml", 0): Answer(
        (
            ("call_cCPjAyfwTzboEKjVlqFrArNF", "get_current_weather", {"location": "San Francisco"}),
            ("call_Zi4He1Ns0mozwT6f85nW1BOW", "get_current_weather", {"location": "Boston"}),
        ),
        finish="tool_calls",
    ),
    ("stream-parallel-2-calls.yaml", 1): Answer(
        (
            ("call_u0T52evs3Y0byXDiUv5Al8dG", "get_current_weather", {"location": "San Francisco"}),
            ("call_iXfR9wmFaDTHUw5YaVxD1uFH", "get_current_weather", {"location": "Boston"}),
        ),
        finish="tool_calls",
    ),
    ("stream-single-call.yaml", 0): Answer(
        (("call_P9Ayqu3UQNYuTBVAg2sLimh9", "get_current_weather", {"location": "San Francisco"}),),
        finish="tool_calls",
    ),
    ("error-400-unsupported-option.yaml", 0): Failure(
        BadRequestError, "Web search options not supported with this model.", 400
    ),
    ("error-401-invalid-key.yaml", 0): Failure(
        AuthenticationError, "Incorrect API key provided", 401, "invalid_api_key"
    ),
    ("error-401-invalid-key-stream-request.yaml", 0): Failure(
        AuthenticationError, "Incorrect API key provided", 401, "invalid_api_key"
    ),
}

GROQ: dict[tuple[str, int], Answer | Failure] = {
    ("single-call-tool-choice-required.yaml", 0): Answer(
        (("4s8mdrtvv", "get_weather", {"city": "Paris"}),),
        usage=(723, 29, 0, 0),
        finish="tool_calls",
    ),
    ("single-call-result-final.yaml", 0): Answer(
        (("48f5r72yf", "get_weather", {"city": "Paris"}),),
        usage=(717, 29, 0, 0),
        finish="tool_calls",
    ),
    ("single-call-result-final.yaml", 1): Answer(
        text="The weather in Paris is sunny with a temperature of 22C.", usage=(774, 15, 0, 0)
    ),
    ("parallel-2-calls.yaml", 0): Answer(
        (
            ("rew01jq49", "get_weather", {"city": "Paris"}),
            ("gbpypqxpx", "final_result", {"city": "Paris", "summary": "Current weather in Paris"}),
        ),
        usage=(779, 65, 0, 0),
        finish="tool_calls",
    ),
    ("error-400-tool-use-failed-then-call-result-final.yaml", 0): Failure(
        ToolUseFailedError,
        "parameters for tool get_something_by_name did not match schema",
        400,
        "tool_use_failed",
    ),
    ("error-400-tool-use-failed-then-call-result-final.yaml", 1): Answer(
        (("fc_311ba17b-89f9-48d3-8fd9-7e74a1264855", "get_something_by_name", {"name": "test"}),),
        usage=(301, 52, 0, 22),
        finish="tool_calls",
        reasoning="We need to call with correct param: name field.",
    ),
    ("error-400-tool-use-failed-then-call-result-final.yaml", 2): Answer(
        text=(
            "The first call failed due to missing and extra parameters, as expected. "
            'The second call succeeded and returned: "Something with name: test".'
        ),
        usage=(336, 96, 256, 59),
        reasoning="We need to respond to user request.",
    ),
    # HTTP 200, reasoning and text stream, then `event: error` with tool_use_failed.
    ("stream-in-band-error-then-call.yaml", 0): Failure(
        ToolUseFailedError,
        "Tool choice is required, but model did not call a tool",
        200,
        "tool_use_failed",
    ),
    ("stream-in-band-error-then-call.yaml", 1): Answer(
        (("fc_299e8414-9e94-4d9c-bd06-c096f8919768", "final_result", {"response": "no"}),),
        usage=(343, 180, 0, 153),
        finish="tool_calls",
        reasoning="We need to comply with tool usage now.",
    ),
}

MISTRAL: dict[tuple[str, int], Answer | Failure] = {
    ("single-call-tool-choice-required.yaml", 0): Answer(
        (("pcZFHqej8", "get_weather", {"city": "Paris"}),),
        usage=(70, 12, 69, 0),
        finish="tool_calls",
    ),
    ("single-call-result-final.yaml", 0): Answer(
        (("KikbB849t", "get_weather", {"city": "Paris"}),),
        usage=(77, 12, 76, 0),
        finish="tool_calls",
    ),
    ("single-call-result-final.yaml", 1): Answer(
        text=(
            "The current weather in **Paris** is **sunny** with a temperature of **22\u00b0C**. "
            "Enjoy your day! \U0001f60a"
        ),
        usage=(100, 29, 99, 0),
    ),
    ("call-result-second-call.yaml", 0): Answer(
        (("rHU0eZiMa", "get_weather", {"city": "Paris"}),),
        usage=(152, 12, 151, 0),
        finish="tool_calls",
    ),
    ("call-result-second-call.yaml", 1): Answer(
        (
            (
                "tfn2AP3zy",
                "final_result",
                {
                    "city": "Paris",
                    "summary": "The current weather in Paris is sunny with a temperature of 22 "
                    "degrees Celsius. It's a pleasant day!",
                },
            ),
        ),
        usage=(175, 39, 174, 0),
        finish="tool_calls",
    ),
    ("stream-parallel-2-calls.yaml", 0): Answer(
        (("nqjf8Hqe1", "plus", {"a": 1, "b": 2}), ("ATcpCKul3", "minus", {"a": 2, "b": 1})),
        usage=(187, 45, 0, 0),
        finish="tool_calls",
    ),
    ("stream-single-call.yaml", 0): Answer(
        (("x2LypFllt", "plus", {"a": 1, "b": 2}),), usage=(93, 24, 0, 0), finish="tool_calls"
    ),
}

# provider, base_url per file of the openai-compatible folder
COMPATIBLE_PROVIDERS: dict[str, tuple[str, str | None]] = {
    "openrouter-error-429-rate-limited.yaml": ("openrouter", None),
    "openrouter-single-call.yaml": ("openrouter", None),
    "gemini-openai-endpoint-call-without-id-result-final.yaml": (
        "openai-compatible",
        "https://generativelanguage.googleapis.com/v1beta/openai",
    ),
    "gemini-openai-endpoint-stream-single-call.yaml": (
        "openai-compatible",
        "https://generativelanguage.googleapis.com/v1beta/openai",
    ),
    "deepseek-parallel-2-calls-results-final.yaml": ("deepseek", None),
    "huggingface-router-2-calls.yaml": (
        "openai-compatible",
        "https://router.huggingface.co/together/v1",
    ),
}


def _gemini_usage(file: str, index: int) -> tuple[int, int, int, int]:
    """The usage Gemini's recorded body implies: total minus prompt minus completion is thinking."""
    usage = load(f"openai-compatible/{file}")[index].response_json["usage"]
    prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
    thinking = usage["total_tokens"] - prompt - completion
    assert thinking > 0, "the recording shows hidden thinking in total_tokens"
    return (prompt, completion + thinking, 0, thinking)


_LIMITED = "google/gemini-2.0-flash-exp:free is temporarily rate-limited upstream"

COMPATIBLE: dict[tuple[str, int], Answer | Failure] = {
    **{
        ("openrouter-error-429-rate-limited.yaml", i): Failure(RateLimitError, _LIMITED, 429, "429")
        for i in range(3)
    },
    ("openrouter-single-call.yaml", 0): Answer(
        (
            (
                "3sniiMddS",
                "divide",
                {"numerator": 123, "denominator": 456, "on_inf": "infinity"},
            ),
        ),
        usage=(134, 43, 0, 0),
        finish="tool_calls",
        model="mistralai/mistral-small",
    ),
    # No id from the Gemini endpoint (id ""): one is made up (None = any).
    # total_tokens above prompt + completion (109 > 35 + 12): the unlisted
    # tokens are hidden thinking, counted as reasoning output.
    ("gemini-openai-endpoint-call-without-id-result-final.yaml", 0): Answer(
        ((None, "get_current_time", {}),),
        usage=_gemini_usage("gemini-openai-endpoint-call-without-id-result-final.yaml", 0),
        finish="tool_calls",
    ),
    ("gemini-openai-endpoint-call-without-id-result-final.yaml", 1): Answer(
        text="The current time is Noon.",
        usage=_gemini_usage("gemini-openai-endpoint-call-without-id-result-final.yaml", 1),
    ),
    # Whole call, id "", no index, finish_reason "stop" although a tool was called.
    ("gemini-openai-endpoint-stream-single-call.yaml", 0): Answer(
        ((None, "return_bool", {"value": True}),),
        usage=(8, 4, 0, 0),
        finish="tool_calls",
        raw_finish="stop",
    ),
    ("deepseek-parallel-2-calls-results-final.yaml", 0): Answer(
        (("call_00_sXqYgMESDht75NCLLZtt9804", "load_capability", {"id": "DICE_ROLL"}),),
        text="Let me load the dice rolling capability!",
        usage=(563, 116, 512, 60),
        finish="tool_calls",
        reasoning="The user wants to play a dice game.",
    ),
    ("deepseek-parallel-2-calls-results-final.yaml", 1): Answer(
        (
            ("call_00_6edlnw3Z1MgeMfey687g8451", "get_player_name", {}),
            ("call_01_km02sac7sHxNDPATKLZy7705", "roll_dice", {}),
        ),
        text="Let me get your name and roll the die!",
        usage=(875, 79, 0, 26),
        finish="tool_calls",
        reasoning="Great, now I have access to the dice roll tool.",
    ),
    ("deepseek-parallel-2-calls-results-final.yaml", 2): Answer(
        text=(
            "\U0001f389 **Congratulations, Anne!** You're a winner! \U0001f389\n\n"
            "The die rolled exactly **4** -- matching your guess perfectly! Lucky you! \U0001f3b2"
        ),
        usage=(976, 61, 896, 25),
        reasoning="The player's name is Anne, and the die rolled a 4.",
    ),
    ("huggingface-router-2-calls.yaml", 0): Answer(
        (
            ("call_c67bb6b901354ca19bd1b70d", "get_weather", {"city": "Paris"}),
            (
                "call_1113747bb7de47ce8bffe3e9",
                "final_result",
                {"city": "Paris", "summary": "Weather in Paris"},
            ),
        ),
        usage=(720, 65, 0, 0),
        finish="tool_calls",
    ),
}
