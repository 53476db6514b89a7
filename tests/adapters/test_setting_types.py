"""Settings refused before sending because no provider API would take them as given.

``max_tokens`` is an integer in every provider's spec: ``300.5`` or ``True`` is a
ModelConfigError naming it on each adapter, and ``"300"`` too except on Gemini (proto3
JSON takes an int32 as a string of digits). ``top_k``, ``stop_sequences`` and
``thinking``, which Chat Completions has no field for, and a ``stop`` its spec does
not take (more than 4 sequences, no string or list of strings), are refused on
OpenAI's own host only (a compatible server such as vLLM takes them); so are
``thinking``, ``reasoning_effort``, ``stop_sequences`` and ``stop`` on the Responses
API, which has none. Each provider's own reasoning setting is refused on the others'
APIs, naming the native one (`test_a_reasoning_setting_is_refused_naming_the_native_one`).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

import toolfold
from toolfold import Agent, ModelConfigError, RunState, tool
from toolfold.runtime import Message, ModelRequest
from toolfold.testing import ScriptedModel

SPECS = (
    "openai:gpt-4o-mini",
    "groq:llama-3.3-70b",
    "anthropic:claude-sonnet-4-5",
    "gemini:gemini-2.5-flash",
    "gemini:gemini-2.0-flash",
    "openai-responses:gpt-5-mini",
    "ollama:qwen3",
)


def body(model: Any, **settings: Any) -> dict[str, Any]:
    """The body ``model`` would send for a one-message request with ``settings``."""
    return dict(model.prepare(ModelRequest((Message.user("Hi"),), settings=settings)).body)


#: Each adapter with each max_tokens it refuses: a string of digits is one on Gemini
#: (`test_gemini_takes_a_max_tokens_of_digits`).
REFUSED_TOKENS = [
    (spec, value)
    for spec in SPECS
    for value in (300.5, "300", True, [300], {"n": 300}, "300.0", "three")
    if not (value == "300" and spec.startswith("gemini:"))
]


@pytest.mark.parametrize(("spec", "value"), REFUSED_TOKENS)
def test_a_max_tokens_that_is_no_whole_number_is_refused(made: Any, spec: str, value: Any) -> None:
    """max_tokens of 300.5, True (or any non-number) is a ModelConfigError naming it, on every adapter; "300" too but on Gemini."""
    with pytest.raises(ModelConfigError, match=r"the setting max_tokens=.* is no number of tokens"):
        body(made(spec), max_tokens=value)


@pytest.mark.parametrize("spec", ["gemini:gemini-2.5-flash", "gemini:gemini-2.0-flash"])
def test_gemini_takes_a_max_tokens_of_digits(made: Any, spec: str) -> None:
    """Gemini gets max_tokens="300" as given, as before: proto3 JSON reads an int32 written as a string of digits."""
    assert body(made(spec), max_tokens="300")["generationConfig"] == {"maxOutputTokens": "300"}


@pytest.mark.parametrize("value", [300, 300.0])
@pytest.mark.parametrize("spec", SPECS)
def test_a_whole_max_tokens_goes_as_given(made: Any, spec: str, value: Any) -> None:
    """An int, or a whole float (an integer to JSON Schema), is sent unchanged."""
    assert value in _values(body(made(spec), max_tokens=value))


def test_a_max_output_tokens_setting_is_checked_too(made: Any) -> None:
    """Responses: a max_output_tokens setting given directly is checked like max_tokens."""
    with pytest.raises(ModelConfigError, match=r"max_output_tokens=True is no number"):
        body(made("openai-responses:gpt-5-mini"), max_output_tokens=True)


def _values(tree: Any) -> list[Any]:
    """Every value in a JSON tree, at any depth."""
    if isinstance(tree, dict):
        return [v for value in tree.values() for v in (value, *_values(value))]
    if isinstance(tree, list):
        return [v for value in tree for v in (value, *_values(value))]
    return []


@pytest.mark.parametrize("base_url", [None, "https://eu.api.openai.com/v1"])
def test_top_k_is_refused_for_openai_chat_completions(made: Any, base_url: str | None) -> None:
    """On api.openai.com (and its regional hosts) top_k, which Chat Completions lacks, is refused naming it."""
    model = made("openai:gpt-4o-mini", base_url=base_url)
    with pytest.raises(ModelConfigError, match="'top_k' has no equivalent in the OpenAI Chat"):
        body(model, top_k=40)
    assert "top_k" not in body(model, top_k=None)


@pytest.mark.parametrize(
    ("spec", "base_url"),
    [
        ("openai:qwen", "http://127.0.0.1:8000/v1"),
        ("openai-compatible:qwen", "http://127.0.0.1:8000/v1"),
        ("groq:llama-3.3-70b", None),
    ],
)
def test_top_k_goes_as_given_to_other_chat_servers(
    made: Any, spec: str, base_url: str | None
) -> None:
    """A compatible server (vLLM takes top_k) or another provider gets top_k as given."""
    assert body(made(spec, base_url=base_url), top_k=40)["top_k"] == 40


REFUSED_AT_OPENAI = [
    ({"top_k": 40}, "'top_k'"),
    ({"stop": ["1", "2", "3", "4", "5"]}, "'stop' holds 5 sequences"),
    ({"stop": 7}, "'stop' must be"),
    ({"stop_sequences": ["END"]}, "'stop_sequences'"),
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "'thinking'"),
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("settings", "match"), REFUSED_AT_OPENAI)
def test_settings_openai_refuses_fail_before_anything_is_sent(
    settings: dict[str, Any], match: str, stream: bool
) -> None:
    """A run (blocking or streamed) with such a setting on OpenAI's host fails before any request leaves (the sending path checks too)."""
    refused, sent = run_at_openai("openai:gpt-4o-mini", settings, stream)
    assert re.search(match, str(refused))
    assert sent == []


def run_at_openai(
    name: str, settings: dict[str, Any], stream: bool
) -> tuple[ModelConfigError, list[httpx.Request]]:
    """The error of a run of ``name`` at OpenAI's host with ``settings``, and the requests sent."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        model = toolfold.model(name, api_key="k" * 20, http_client=client)
        agent = Agent(model, settings=settings)
        run = (lambda: list(agent.stream("Hi"))) if stream else (lambda: agent.run("Hi"))
        with pytest.raises(ModelConfigError) as caught:
            run()
        model.close()
    return caught.value, sent


@pytest.mark.parametrize("base_url", [None, "https://eu.api.openai.com/v1"])
@pytest.mark.parametrize(
    "stop", [["1", "2", "3", "4", "5"], ["a", "b", "c", "d", "e", "f", "g", "h"]]
)
def test_more_than_4_stop_sequences_are_refused_for_openai(
    made: Any, base_url: str | None, stop: list[str]
) -> None:
    """OpenAI's StopConfiguration takes at most 4 sequences: more is refused naming the setting, the limit and what was given."""
    model = made("openai:gpt-4o-mini", base_url=base_url)
    with pytest.raises(ModelConfigError) as caught:
        body(model, stop=stop)
    said = str(caught.value)
    assert said.startswith(f"the setting 'stop' holds {len(stop)} sequences")
    assert "takes at most 4" in said
    assert repr(stop[:4])[:-1] in said


@pytest.mark.parametrize("stop", [7, 1.5, True, {"a": "b"}, ["a", 1], [None], [["a"]]])
def test_a_stop_that_is_no_string_nor_list_of_strings_is_refused_for_openai(
    made: Any, stop: Any
) -> None:
    """A stop that is neither a string nor a list of strings is refused on OpenAI's host, naming it and what was given."""
    with pytest.raises(ModelConfigError, match=r"^the setting 'stop' must be a string or a list "):
        body(made("openai:gpt-4o-mini"), stop=stop)


def test_an_empty_stop_list_is_refused_for_openai(made: Any) -> None:
    """stop=[] (minItems 1 in OpenAI's spec) is refused, pointing at stop=None."""
    with pytest.raises(ModelConfigError, match=r"'stop' is an empty list.*stop=None"):
        body(made("openai:gpt-4o-mini"), stop=[])


@pytest.mark.parametrize("stop", ["END", ["END"], ["1", "2", "3", "4"], ("1", "2")])
def test_a_stop_openai_takes_goes_as_given(made: Any, stop: Any) -> None:
    """A string or 1 to 4 strings go to OpenAI unchanged."""
    assert body(made("openai:gpt-4o-mini"), stop=stop)["stop"] == stop


@pytest.mark.parametrize(
    ("key", "value", "instead"),
    [
        ("stop_sequences", ["END"], "the setting 'stop'"),
        ("thinking", {"type": "enabled", "budget_tokens": 1024}, "the setting 'reasoning_effort'"),
    ],
)
@pytest.mark.parametrize(
    "base_url", [None, "https://eu.api.openai.com/v1", "https://API.openai.com.:443/v1"]
)
def test_anthropic_settings_are_refused_for_openai_naming_the_equivalent(
    made: Any, base_url: str | None, key: str, value: Any, instead: str
) -> None:
    """stop_sequences and thinking, which Chat Completions lacks, are refused on OpenAI's host naming what to use."""
    model = made("openai:gpt-4o-mini", base_url=base_url)
    with pytest.raises(ModelConfigError) as caught:
        body(model, **{key: value})
    assert str(caught.value).startswith(
        f"the setting {key!r} is not a field of the OpenAI Chat Completions API: use {instead}"
    )
    assert key not in body(model, **{key: None})


@pytest.mark.parametrize(
    ("spec", "base_url"),
    [
        ("openai:qwen", "http://127.0.0.1:8000/v1"),
        ("openai-compatible:qwen", "http://127.0.0.1:8000/v1"),
        ("groq:llama-3.3-70b", None),
    ],
)
def test_other_chat_servers_get_stop_and_anthropic_settings_as_given(
    made: Any, spec: str, base_url: str | None
) -> None:
    """A compatible server or another provider gets 5 stop sequences, stop_sequences and thinking as given."""
    settings = {
        "stop": ["1", "2", "3", "4", "5"],
        "stop_sequences": ["END"],
        "thinking": {"type": "enabled"},
    }
    sent = body(made(spec, base_url=base_url), **settings)
    assert {key: sent[key] for key in settings} == settings


#: Settings ``CreateResponse`` has no field for, refused on OpenAI's host with what to
#: use instead: ``reasoning`` for thinking; no stop sequence at all (stop, stop_sequences).
RESPONSES_REFUSED = [
    pytest.param(
        "thinking",
        {"type": "enabled", "budget_tokens": 1024},
        "is not a field of the OpenAI Responses API: use the setting 'reasoning' "
        "(reasoning={'effort': 'low'}",
        id="thinking",
    ),
    pytest.param(
        "reasoning_effort",
        "high",
        "is not a field of the OpenAI Responses API: use the setting 'reasoning' "
        "(reasoning={'effort': 'high'}",
        id="reasoning_effort",
    ),
    pytest.param(
        "stop_sequences",
        ["END"],
        "has no equivalent in the OpenAI Responses API",
        id="stop_sequences",
    ),
    pytest.param("stop", ["END"], "has no equivalent in the OpenAI Responses API", id="stop-list"),
    pytest.param("stop", "END", "has no equivalent in the OpenAI Responses API", id="stop-text"),
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("key", "value", "said"), RESPONSES_REFUSED)
def test_responses_settings_openai_lacks_fail_before_anything_is_sent(
    key: str, value: Any, said: str, stream: bool
) -> None:
    """A Responses run (blocking or streamed) with thinking, stop_sequences or stop on OpenAI's host fails before any request leaves, naming the setting."""
    refused, sent = run_at_openai("openai-responses:gpt-5-mini", {key: value}, stream)
    assert str(refused).startswith(f"the setting {key!r} {said}")
    assert sent == []


@pytest.mark.parametrize(("key", "value", "said"), RESPONSES_REFUSED)
@pytest.mark.parametrize("base_url", [None, "https://eu.api.openai.com/v1"])
def test_responses_refuses_them_on_openai_s_hosts_and_skips_none(
    made: Any, base_url: str | None, key: str, value: Any, said: str
) -> None:
    """On api.openai.com and its regional hosts the Responses body refuses them naming the equivalent; None sends nothing."""
    model = made("openai-responses:gpt-5-mini", base_url=base_url)
    with pytest.raises(ModelConfigError, match=f"^the setting {key!r} {re.escape(said)}"):
        body(model, **{key: value})
    assert key not in body(model, **{key: None})


def test_the_reasoning_named_instead_of_thinking_goes_to_openai(made: Any) -> None:
    """reasoning={'effort': 'low'}, the equivalent the refusal of thinking names, is sent as given."""
    sent = body(made("openai-responses:gpt-5-mini"), reasoning={"effort": "low"})
    assert sent["reasoning"] == {"effort": "low"}


def test_other_responses_servers_get_them_as_given(made: Any) -> None:
    """A Responses-compatible server (vLLM, a gateway) gets thinking, stop_sequences and stop as given."""
    settings = {"thinking": {"type": "enabled"}, "stop_sequences": ["END"], "stop": ["END"]}
    model = made("openai-responses:qwen", base_url="http://127.0.0.1:8000/v1")
    sent = body(model, **settings)
    assert {key: sent[key] for key in settings} == settings


@pytest.mark.parametrize(
    ("spec", "key", "native"),
    [
        ("anthropic:claude-sonnet-4-5", "reasoning_effort", "'thinking'"),
        ("gemini:gemini-2.5-flash", "reasoning_effort", "'generation_config'"),
        ("gemini:gemini-3-pro-preview", "thinking", "'generation_config'"),
        ("ollama:qwen3", "thinking", "'think'"),
        ("ollama:qwen3", "reasoning_effort", "'think'"),
    ],
)
def test_a_reasoning_setting_is_refused_naming_the_native_one(
    made: Any, spec: str, key: str, native: str
) -> None:
    """OpenAI's reasoning_effort and Anthropic's thinking were sent to APIs that have no
    such field (Anthropic's and Gemini's bodies refuse unknown keys: a 400; Ollama put
    them in options, where they do nothing): refused before the request, naming the
    provider's own setting; None sends nothing."""
    model = made(spec)
    with pytest.raises(ModelConfigError, match=f"^the setting {key!r} is not a field of") as caught:
        body(model, **{key: "high"})
    assert f"use the setting {native}" in str(caught.value)
    assert key not in body(model, **{key: None})


def test_a_resume_that_never_asks_the_model_is_not_refused_for_its_settings() -> None:
    """A run saved with Anthropic's thinking, resumed on Ollama where no model request
    follows (at max_steps, or with a call still waiting): the approved call runs and the
    run ends or waits again, as on main (the setting is refused only when a request is
    built)."""
    ran: list[str] = []

    @tool(requires_approval=True)
    def get_weather(city: str) -> str:
        """Weather.

        Args:
            city: The city.
        """
        ran.append(city)
        return f"Sunny in {city}"

    thinking = {"type": "enabled", "budget_tokens": 2048}
    ollama = toolfold.model("ollama:qwen3", base_url="http://127.0.0.1:9")  # never asked
    paris = ScriptedModel.call("get_weather", {"city": "Paris"})
    rome = ScriptedModel.call("get_weather", {"city": "Rome"})
    last = Agent(ScriptedModel([paris]), tools=[get_weather], thinking=thinking, max_steps=1)
    waiting = last.run("Weather?").state
    done = toolfold.resume(
        RunState.from_json(waiting.to_json()),
        model=ollama,
        tools=[get_weather],
        approvals={waiting.calls[0].call.id: True},
    )
    assert (done.state.phase, ran) == ("finished", ["Paris"])
    ran.clear()
    two = Agent(ScriptedModel([[paris, rome]]), tools=[get_weather], thinking=thinking)
    waiting = two.run("Weather?").state
    again = toolfold.resume(
        RunState.from_json(waiting.to_json()),
        model=ollama,
        tools=[get_weather],
        approvals={waiting.calls[0].call.id: True},
    )
    assert (again.state.phase, ran) == ("awaiting_approval", ["Paris"])
