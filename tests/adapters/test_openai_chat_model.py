"""The model class: model strings, keys, base URLs, error bodies of the family, response edges."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

import toolfold
from toolfold import (
    ArgumentJSONError,
    ArgumentValidationError,
    AuthenticationError,
    BadRequestError,
    ModelConfigError,
    RateLimitError,
    ServerError,
    ToolUseFailedError,
)
from toolfold.adapters.openai_chat import OpenAIChatModel, error_from_response, parse_response
from toolfold.runtime import Message, ModelRequest, ToolCallPart, ToolDefinition
from toolfold.testing import ScriptedModel

PREFIXES = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "mistral": ("https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
    "deepseek": ("https://api.deepseek.com", "DEEPSEEK_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
}
SECRET = "sk-live-0123456789abcdef"


def _answer(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = {
            "id": "x",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "ok"},
                }
            ],
        }
        return httpx.Response(200, json=body)

    return httpx.MockTransport(handler)


@pytest.mark.parametrize("prefix", sorted(PREFIXES))
def test_model_strings_resolve_with_the_key_from_the_environment(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each prefix gets its base URL and reads its own key variable, sent as a bearer token."""
    base_url, variable = PREFIXES[prefix]
    monkeypatch.setenv(variable, SECRET)
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_answer(seen)) as client:
        made = toolfold.model(f"{prefix}:some-model", http_client=client)
        assert isinstance(made, OpenAIChatModel)
        assert made.name == f"{prefix}:some-model"
        assert made.request_sync(ModelRequest((Message.user("hi"),))).text == "ok"
    assert str(seen[0].url) == f"{base_url}/chat/completions"
    assert seen[0].headers["authorization"] == f"Bearer {SECRET}"
    assert json.loads(seen[0].content)["model"] == "some-model"


@pytest.mark.parametrize("prefix", sorted(PREFIXES))
def test_a_missing_key_names_the_variable(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without api_key and without the variable, the error says which variable to set."""
    monkeypatch.delenv(PREFIXES[prefix][1], raising=False)
    with pytest.raises(ModelConfigError, match=PREFIXES[prefix][1]):
        toolfold.model(f"{prefix}:m")


def test_the_key_never_shows_in_reprs() -> None:
    """repr and str of the model and its transport mask the key."""
    made = OpenAIChatModel("gpt-4o", api_key=SECRET)
    for text in (repr(made), str(made), repr(made._transport)):
        assert SECRET not in text


def test_openai_compatible_needs_a_base_url_and_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local servers: base_url is required, a key is optional (no auth header without one)."""
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="needs base_url"):
        toolfold.model("openai-compatible:llama3")
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_answer(seen)) as client:
        made = toolfold.model(
            "openai-compatible:llama3", base_url="http://localhost:8080/v1/", http_client=client
        )
        made.request_sync(ModelRequest((Message.user("hi"),)))
    assert str(seen[0].url) == "http://localhost:8080/v1/chat/completions"
    assert "authorization" not in seen[0].headers


def test_server_presets_and_unknown_names() -> None:
    """``server=`` picks a preset for openai-compatible only; unknown names are listed."""
    made = OpenAIChatModel(
        "m", provider="openai-compatible", base_url="http://x/v1", server="llama.cpp"
    )
    assert made.provider.named_tool_choice is False
    with pytest.raises(
        ModelConfigError, match=r"known: gemini, llama\.cpp, lmstudio, ollama, vllm"
    ):
        OpenAIChatModel("m", provider="openai-compatible", base_url="http://x/v1", server="tgi")
    with pytest.raises(ModelConfigError, match="only applies to openai-compatible"):
        OpenAIChatModel("m", provider="groq", api_key="k" * 12, server="vllm")
    with pytest.raises(ModelConfigError, match="unknown OpenAI-compatible provider 'nope'"):
        OpenAIChatModel("m", provider="nope")


def _error(status: int, body: Any, headers: dict[str, str] | None = None) -> Exception:
    text = body if isinstance(body, str) else json.dumps(body)
    return error_from_response("p", status, text, headers or {})


def test_family_error_bodies_map_to_the_tree_with_the_provider_message() -> None:
    """OpenAI, Mistral's flat shape, vLLM's int code, Gemini's list, OpenRouter's metadata, Groq's failed_generation."""
    openai = _error(
        401,
        {
            "error": {
                "message": "Incorrect API key",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
    )
    assert isinstance(openai, AuthenticationError)
    assert "Incorrect API key" in str(openai)
    mistral = _error(
        422,
        {
            "object": "error",
            "message": "Tool call id was call_0fypS1hVX but must be a-z, A-Z, 0-9, with a length of 9.",
            "type": "invalid_request_error",
            "param": None,
            "code": "3280",
        },
    )
    assert isinstance(mistral, BadRequestError)
    assert "with a length of 9" in str(mistral)
    assert mistral.code == "3280"
    vllm = _error(
        400,
        {
            "error": {
                "message": "max_tokens is too large",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
    )
    assert isinstance(vllm, BadRequestError)
    assert vllm.provider_message == "max_tokens is too large"
    gemini = _error(
        400,
        [{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}],
    )
    assert "API key not valid." in str(gemini)
    openrouter = _error(
        429,
        {
            "error": {
                "code": 429,
                "message": "Provider returned error",
                "metadata": {"provider_name": "Google", "raw": "rate-limited upstream"},
            }
        },
        {"retry-after": "3"},
    )
    assert isinstance(openrouter, RateLimitError)
    assert openrouter.retry_after == 3.0
    assert "Provider returned error (Google): rate-limited upstream" in str(openrouter)
    # No message: the upstream's words alone, not a quote of the body before them
    silent = _error(
        502,
        {"error": {"code": 502, "metadata": {"provider_name": "Fireworks", "raw": "timed out"}}},
    )
    assert silent.provider_message == "upstream error (Fireworks): timed out"
    unnamed = {
        "error": {
            "message": None,
            "code": 400,
            "metadata": {"provider_name": None, "raw": "bad tool"},
        }
    }
    assert _error(400, unnamed).provider_message == "upstream error: bad tool"
    groq = _error(
        400,
        {
            "error": {
                "message": "Tool call validation failed",
                "type": "invalid_request_error",
                "code": "tool_use_failed",
                "failed_generation": '{"foo": 1}',
            }
        },
    )
    assert isinstance(groq, ToolUseFailedError)
    assert groq.failed_generation == '{"foo": 1}'
    html = _error(502, "<html>Bad gateway</html>")
    assert isinstance(html, ServerError)
    assert "Bad gateway" in str(html)


def test_response_edges() -> None:
    """Object arguments, Mistral content chunks with thinking, a refusal, a legacy function_call."""
    body = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": [{"type": "text", "text": "Hmm"}]},
                        {"type": "text", "text": "Sure."},
                    ],
                    "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}],
                },
            }
        ]
    }
    response = parse_response(body, "mistral")
    assert [p.kind for p in response.message.parts] == ["reasoning", "text", "tool_call"]
    assert response.tool_calls[0].arguments == {"x": 1}
    assert json.loads(response.tool_calls[0].arguments_text) == {"x": 1}
    refusal = parse_response(
        {
            "choices": [
                {
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "refusal": "I can't help with that.",
                    },
                }
            ]
        },
        "openai",
    )
    assert refusal.text == "I can't help with that."
    legacy = parse_response(
        {
            "id": "r",
            "choices": [
                {
                    "finish_reason": "function_call",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "function_call": {"name": "f", "arguments": "{}"},
                    },
                }
            ],
        },
        "openai",
    )
    assert [(c.name, c.arguments) for c in legacy.tool_calls] == [("f", {})]
    assert legacy.finish_reason == "tool_calls"
    bad = parse_response(
        {
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "tool_calls": [{"id": "b", "function": {"name": "f", "arguments": "{oops"}}]
                    },
                }
            ]
        },
        "openai",
    )
    assert bad.tool_calls[0].arguments is None
    assert bad.tool_calls[0].arguments_text == "{oops"
    with pytest.raises(toolfold.ProviderError, match="without choices"):
        parse_response({"choices": []}, "openai")


def test_arguments_are_checked_against_the_schema_sent() -> None:
    """Strict-mode nulls come back as absent keys; arguments that break the sent schema say where."""
    tool = ToolDefinition(
        "f",
        "",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a"],
        },
    )
    request = ModelRequest((Message.user("x"),), (tool,))
    made = OpenAIChatModel("gpt-4o", api_key=SECRET)
    sent = made.body(request)["tools"][0]["function"]
    assert sent["strict"] is True
    ok = ToolCallPart("c", "f", '{"a": 1, "b": null}', {"a": 1, "b": None})
    assert made.check_arguments(request, ok) == {"a": 1}
    with pytest.raises(ArgumentValidationError, match=r"\$\.a: 'x' is not of type 'integer'"):
        made.check_arguments(
            request, ToolCallPart("c", "f", '{"a": "x", "b": null}', {"a": "x", "b": None})
        )
    with pytest.raises(ArgumentJSONError):
        made.check_arguments(request, ToolCallPart("c", "f", "{oops", None))
    with pytest.raises(ArgumentValidationError, match="no tool 'g' in the request; tools: f"):
        made.check_arguments(request, ToolCallPart("c", "g", "{}", {}))


def test_an_error_object_in_a_200_body_raises() -> None:
    """OpenRouter's 200 with an error and an HTTP-like code maps like that status; others stay ProviderError."""
    limited = {
        "error": {"code": 429, "message": "Rate limit exceeded", "metadata": {"raw": "slow down"}}
    }
    with pytest.raises(RateLimitError, match="Rate limit exceeded: slow down"):
        parse_response(limited, "openrouter")
    with pytest.raises(toolfold.ProviderError, match="returned an error with HTTP 200: odd"):
        parse_response({"error": {"message": "odd", "code": "weird"}}, "x")


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}, (9, 2, 0, 0)),
        ({"prompt_tokens": 9, "completion_tokens": 2, "prompt_cache_hit_tokens": 4}, (9, 2, 4, 0)),
        ({"prompt_tokens": 9, "completion_tokens": 2, "num_cached_tokens": 3}, (9, 2, 3, 0)),
        (
            {
                "prompt_tokens": 9,
                "completion_tokens": 2,
                "total_tokens": 11,
                "prompt_tokens_details": {"cached_tokens": 5},
                "completion_tokens_details": {"reasoning_tokens": 1},
            },
            (9, 2, 5, 1),
        ),
        # A total above prompt + completion is not reasoning, except on Gemini (below).
        ({"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 15}, (9, 2, 0, 0)),
        ({"prompt_tokens": 9.0, "completion_tokens": 2, "total_tokens": None}, (9, 2, 0, 0)),
    ],
)
def test_usage_counts_from_every_family(usage: dict[str, Any], expected: tuple[int, ...]) -> None:
    """Usage reads cached and reasoning counts wherever a family puts them (whole floats as ints)."""
    body = {"id": "r1", "choices": [{"message": {"content": "hi"}}], "usage": usage}
    got = parse_response(body, "openai").usage
    assert (
        got.input_tokens,
        got.output_tokens,
        got.cached_tokens,
        got.reasoning_tokens,
    ) == expected


def test_cache_writes_are_counted_apart() -> None:
    """prompt_tokens_details.cache_write_tokens (CompletionUsage) is cache_write_tokens; input counts it."""
    usage = {
        "prompt_tokens": 2000,
        "completion_tokens": 5,
        "total_tokens": 2005,
        "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 1800},
    }
    body = {"id": "r1", "choices": [{"message": {"content": "hi"}}], "usage": usage}
    got = parse_response(body, "openai").usage
    assert (got.input_tokens, got.cached_tokens, got.cache_write_tokens) == (2000, 100, 1800)


def test_calls_without_ids_get_stable_synthetic_ids() -> None:
    """A call without an id gets one derived from the answer, the same on every parse."""
    message = {
        "content": None,
        "tool_calls": [
            {"id": "call_a", "function": {"name": "f", "arguments": "{}"}},
            {"function": {"name": "f", "arguments": "{}"}},
        ],
    }
    first = parse_response({"choices": [{"message": message}]}, "openai")
    again = parse_response({"choices": [{"message": json.loads(json.dumps(message))}]}, "openai")
    ids = [c.id for c in first.tool_calls]
    assert ids[0] == "call_a"
    assert ids[1].startswith("call_")
    assert ids[1] != "call_a"
    assert ids == [c.id for c in again.tool_calls]


@pytest.mark.parametrize(
    ("options", "thinking"),
    [
        ({"base_url": "https://generativelanguage.googleapis.com/v1beta/openai"}, True),
        ({"base_url": "http://127.0.0.1:9/v1", "server": "gemini"}, True),
        ({"base_url": "http://127.0.0.1:9/v1"}, False),
        ({"base_url": "http://127.0.0.1:9/v1", "server": "vllm"}, False),
    ],
)
def test_hidden_thinking_in_the_total_only_on_gemini(
    options: dict[str, str], thinking: bool
) -> None:
    """The gap between total_tokens and prompt + completion is reasoning only on Gemini's endpoint."""
    model = OpenAIChatModel("m", provider="openai-compatible", api_key="k", **options)
    assert model.provider.thinking_in_total is thinking
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 15}
    body = {"id": "r1", "choices": [{"message": {"content": "hi"}}], "usage": usage}
    got = parse_response(body, "p", thinking_in_total=model.provider.thinking_in_total).usage
    assert (got.output_tokens, got.reasoning_tokens) == ((6, 4) if thinking else (2, 0))
    assert OpenAIChatModel("m", provider="openai", api_key="k").provider.thinking_in_total is False


def test_a_transport_subclass_s_post_json_still_answers_async_requests() -> None:
    """The async request spells `Transport.post_json` out for the transport itself only."""
    from toolfold.adapters._http._transport import Transport

    posted: list[Any] = []

    class Recording(Transport):
        async def post_json(
            self, path: str, body: Any, *, headers: Any = None
        ) -> Any:  # a subclass's own post
            posted.append((path, json.loads(body)))
            return {
                "id": "r1",
                "model": "m",
                "choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
            }

    model = OpenAIChatModel("gpt-4o-mini", api_key="sk-sub-0123456789")
    model._transport = Recording("openai", "http://127.0.0.1:9", "sk-sub-0123456789")
    response = asyncio.run(model.request(ModelRequest([Message.user("hello")])))
    assert response.text == "hi"
    assert [path for path, _ in posted] == ["chat/completions"]
    assert posted[0][1]["messages"] == [{"role": "user", "content": "hello"}]


# --- OpenAI's 128 tools -----------------------------------------------------------


def _tools(count: int) -> list[toolfold.Tool[..., Any]]:
    """``count`` tools without a function (their calls would come back to the caller)."""
    return [toolfold.Tool(f"t{i}", "", {"type": "object", "properties": {}}) for i in range(count)]


def _run(base_url: str | None, tools: list[Any], **options: Any) -> list[httpx.Request]:
    """The requests a one-step run with ``tools`` sends from an ``openai`` model at ``base_url``."""
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_answer(seen)) as client:
        model = toolfold.model(
            "openai:gpt-4o-mini", api_key=SECRET, base_url=base_url, http_client=client
        )
        toolfold.Agent(model, tools=tools, **options).run("Hi")
    return seen


@pytest.mark.parametrize("base_url", [None, "https://eu.api.openai.com/v1"])
@pytest.mark.parametrize("stream", [False, True])
def test_more_tools_than_openai_takes_are_refused_before_sending(
    base_url: str | None, stream: bool
) -> None:
    """OpenAI's Chat Completions takes at most 128 tools ("A max of 128 functions are
    supported"): a run offering more, handoffs counted, fails before any request, naming
    the count, the limit and how to offer fewer (main sent 200 and OpenAI answered 400)."""
    helper = toolfold.Agent(ScriptedModel(["ok"]), name="helper")
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_answer(seen)) as client:
        model = toolfold.model(
            "openai:gpt-4o-mini", api_key=SECRET, base_url=base_url, http_client=client
        )
        agent = toolfold.Agent(model, tools=_tools(128), handoffs=[helper])
        with pytest.raises(ModelConfigError) as caught:
            list(agent.stream("Hi")) if stream else agent.run("Hi")
    assert seen == []
    said = str(caught.value)
    assert said.startswith("the request offers 129 tools; the OpenAI Chat Completions API")
    assert "at most 128" in said
    assert "split the tools between agents" in said


def test_a_tools_setting_counts_towards_openai_s_128() -> None:
    """Built-in tools given as the ``tools`` setting go in the same array: counted too."""
    request = ModelRequest(
        (Message.user("Hi"),),
        tools=tuple(ToolDefinition(t.name, "", t.parameters) for t in _tools(128)),
        settings={"tools": [{"type": "function", "function": {"name": "x"}}]},
    )
    model = OpenAIChatModel("gpt-4o-mini", api_key=SECRET)
    with pytest.raises(ModelConfigError, match=r"129 tools \(128 of the run's and 1 of the"):
        model.prepare(request)


def test_128_tools_go_to_openai_and_more_to_a_compatible_server() -> None:
    """128 tools are OpenAI's limit, not over it; a server at another URL (vLLM, a gateway)
    may take more, so it gets all 200."""
    (sent,) = _run(None, _tools(128))
    assert len(json.loads(sent.content)["tools"]) == 128
    (sent,) = _run("http://127.0.0.1:8000/v1", _tools(200))
    assert len(json.loads(sent.content)["tools"]) == 200
