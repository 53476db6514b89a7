"""Settings asking a provider for more than one answer are refused before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold import Agent, Message, ModelConfigError, ModelRequest, generate_text

_CHAT = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "A"}}
    ],
}


@pytest.mark.parametrize(
    ("name", "settings", "named"),
    [
        ("openai:gpt-4o-mini", {"n": 2}, "n=2"),
        ("groq:llama", {"n": 3}, "n=3"),
        ("gemini:gemini-2.5-flash", {"candidate_count": 2}, "candidate_count=2"),
        (
            "gemini:gemini-2.5-flash",
            {"generation_config": {"candidateCount": 4}},
            "generation_config.candidateCount=4",
        ),
    ],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "stream"])
def test_more_than_one_answer_is_refused_before_sending(
    http_server: ScriptedServer,
    opened: list[Any],
    name: str,
    settings: dict[str, Any],
    named: str,
    streamed: bool,
) -> None:
    """n / candidate_count above 1 is a ModelConfigError naming the setting, and no request goes out (the extra answers were paid for and dropped)."""
    model = toolfold.model(name, base_url=http_server.url + "/v1", api_key="k" * 20)
    opened.append(model)
    with pytest.raises(ModelConfigError, match=f"the setting {named} asks .* answers") as caught:
        _answer(model, settings, streamed)
    assert "would be paid for and dropped" in str(caught.value)
    assert http_server.requests == []


def _answer(model: Any, settings: dict[str, Any], streamed: bool) -> Any:
    if not streamed:
        return generate_text(model, "hi", **settings)
    run = Agent(model=model, settings=settings).stream("hi")
    for _ in run:
        pass
    return run.response


def test_one_answer_asked_for_is_sent(http_server: ScriptedServer, opened: list[Any]) -> None:
    """n=1 is a request for one answer: sent as given."""
    http_server.add(Reply(json=_CHAT))
    model = toolfold.model("openai:gpt-4o-mini", base_url=http_server.url + "/v1", api_key="k" * 20)
    opened.append(model)
    assert _answer(model, {"n": 1}, streamed=False).text == "A"
    assert http_server.requests[0].json()["n"] == 1


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"candidate_count": 1, "generation_config": {"candidateCount": 3}}, "candidateCount=3"),
        ({"generation_config": {"candidate_count": 3}}, "candidate_count=3"),
        ({"generationConfig": {"candidate_count": 3}}, "candidate_count=3"),
    ],
    ids=["camel-over-one", "snake-inside", "snake-inside-camel-key"],
)
def test_a_candidate_count_inside_generation_config_is_refused_under_its_own_name(
    settings: dict[str, Any], named: str
) -> None:
    """A candidate count above 1 in generation_config, spelt either way, is refused naming the key it came from."""
    model = toolfold.model("gemini:gemini-2.5-flash", api_key="k" * 20)
    config = "generationConfig" if "generationConfig" in settings else "generation_config"
    with pytest.raises(ModelConfigError) as caught:
        model.body(ModelRequest(messages=(Message.user("hi"),), settings=settings))
    assert f"the setting {config}.{named} asks gemini for 3 answers" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "key"), [("openai:gpt-4o-mini", "n"), ("gemini:gemini-2.5-flash", "candidate_count")]
)
@pytest.mark.parametrize("value", [2.0, "2", " 3 "])
def test_a_count_spelt_as_a_float_or_a_string_is_read_as_its_count(
    name: str, key: str, value: Any
) -> None:
    """n / candidate_count of 2.0 or "2" asks for that many answers: refused like 2, not sent."""
    model = toolfold.model(name, api_key="k" * 20)
    with pytest.raises(ModelConfigError, match=f"the setting {key}=.* asks .* answers"):
        model.body(ModelRequest(messages=(Message.user("hi"),), settings={key: value}))


@pytest.mark.parametrize(
    ("name", "key"), [("openai:gpt-4o-mini", "n"), ("gemini:gemini-2.5-flash", "candidate_count")]
)
@pytest.mark.parametrize("value", [True, False])
def test_a_bool_count_is_refused_as_no_count(name: str, key: str, value: bool) -> None:
    """n / candidate_count given a bool is refused, naming the setting: True is no count."""
    model = toolfold.model(name, api_key="k" * 20)
    with pytest.raises(ModelConfigError, match=f"the setting {key}={value} is no count of answers"):
        model.body(ModelRequest(messages=(Message.user("hi"),), settings={key: value}))


@pytest.mark.parametrize("value", [1.0, "1"])
def test_one_answer_spelt_as_a_float_or_a_string_passes(value: Any) -> None:
    """n of 1.0 or "1" asks for one answer: it passes the check."""
    model = toolfold.model("openai:gpt-4o-mini", api_key="k" * 20)
    body = model.body(ModelRequest(messages=(Message.user("hi"),), settings={"n": value}))
    assert body["n"] == value


@pytest.mark.parametrize(
    "value", ["9" * 5000, "0" * 5000 + "2", 10**5000], ids=["many-digits", "zeros", "huge-int"]
)
def test_a_count_of_thousands_of_digits_is_refused_as_a_count(value: Any) -> None:
    """n spelt with thousands of digits is a ModelConfigError naming n, not Python's bare digit-limit ValueError."""
    model = toolfold.model("openai:gpt-4o-mini", api_key="k" * 20)
    with pytest.raises(
        ModelConfigError, match=r"the setting n=.* asks openai for .*answers"
    ) as caught:
        model.body(ModelRequest(messages=(Message.user("hi"),), settings={"n": value}))
    assert len(str(caught.value)) < 500


@pytest.mark.parametrize("value", ["0" * 5000 + "1", "0" * 5000])
def test_one_answer_spelt_with_thousands_of_zeros_passes(value: str) -> None:
    """n of "000…1" or "000…0" is no more than one answer: it passes the check."""
    model = toolfold.model("openai:gpt-4o-mini", api_key="k" * 20)
    body = model.body(ModelRequest(messages=(Message.user("hi"),), settings={"n": value}))
    assert body["n"] == value
