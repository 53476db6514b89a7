"""``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL`` give the API root when no ``base_url`` is given,
as the official SDKs read them (a team's gateway: prompts and its key went to the public API)."""

from __future__ import annotations

import pickle

import httpx
import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold import ModelConfigError

KEY = "sk-gateway-virtual-key-0123456789"
CHAT = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
RESPONSES = {
    "id": "r1",
    "object": "response",
    "status": "completed",
    "model": "m",
    "output": [
        {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "hi", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
}
MESSAGES = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
# (model string, the variable it reads, what the gateway answers, the path it is asked)
READERS = [
    ("openai:gpt-4o-mini", "OPENAI_BASE_URL", CHAT, "/gw/v1/chat/completions"),
    ("openai-responses:gpt-4o-mini", "OPENAI_BASE_URL", RESPONSES, "/gw/v1/responses"),
    ("anthropic:claude-sonnet-4-5", "ANTHROPIC_BASE_URL", MESSAGES, "/gw/v1/messages"),
]


@pytest.mark.parametrize(("spec", "variable", "answer", "path"), READERS)
def test_the_sdks_base_url_variable_sends_to_the_gateway(
    spec: str,
    variable: str,
    answer: dict[str, object],
    path: str,
    http_server: ScriptedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the variable set and no base_url=, requests go to the gateway, with the env key."""
    root = f"{http_server.url}/gw/v1" if variable == "OPENAI_BASE_URL" else f"{http_server.url}/gw"
    monkeypatch.setenv(variable, root)
    monkeypatch.setenv(variable.replace("BASE_URL", "API_KEY"), KEY)
    http_server.add(Reply(json=answer))
    model = toolfold.model(spec)
    try:
        assert model.base_url == root
        assert toolfold.generate_text(model, "hello").text == "hi"
    finally:
        model.close()
    (request,) = http_server.requests
    assert request.path == path
    assert KEY in (request.headers.get("authorization", "") + request.headers.get("x-api-key", ""))


@pytest.mark.parametrize(("spec", "variable", "answer", "path"), READERS)
def test_a_given_base_url_wins_over_the_variable(
    spec: str, variable: str, answer: dict[str, object], path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """base_url= given wins; an empty variable is no URL (the provider's own applies)."""
    monkeypatch.setenv(variable, "http://127.0.0.1:9/elsewhere")
    given = toolfold.model(spec, api_key=KEY, base_url="http://127.0.0.1:8/mine")
    assert given.base_url == "http://127.0.0.1:8/mine"
    given.close()
    monkeypatch.setenv(variable, "")
    own = toolfold.model(spec, api_key=KEY)
    assert own.base_url.startswith("https://api.")
    own.close()


@pytest.mark.parametrize("variable", ["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"])
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("api.example.com/v1", "must start with http:// or https://"),
        ("http://gw:4000/v1?api-version=1", "must not have a ?query"),
        ("http://gw:4000/v1 ", "has spaces"),
    ],
)
def test_a_bad_variable_is_refused_naming_it(
    variable: str, value: str, problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value that is no base URL is a ModelConfigError naming the variable, as base_url= gets."""
    monkeypatch.setenv(variable, value)
    spec = "openai:m" if variable.startswith("OPENAI") else "anthropic:m"
    with pytest.raises(ModelConfigError, match=f"^{variable} ") as raised:
        toolfold.model(spec, api_key=KEY)
    assert problem in str(raised.value)
    toolfold.model(spec, api_key=KEY, base_url="http://127.0.0.1:8/v1").close()  # not read


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "openai-responses:gpt-4o-mini"])
def test_a_password_in_the_variable_is_refused_naming_it(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_BASE_URL=https://user:pw@gw/v1 with a bearer key: the error names the variable
    (it said base_url=, which was never given), and not the password."""
    monkeypatch.setenv("OPENAI_BASE_URL", "https://team:pw-0123456789@gw.example/v1")
    with pytest.raises(ModelConfigError, match=r"^OPENAI_BASE_URL carries user:password@") as e:
        toolfold.model(spec, api_key=KEY)
    assert "pw-0123456789" not in str(e.value)
    with pytest.raises(ModelConfigError, match=r"^base_url carries user:password@"):
        toolfold.model(spec, api_key=KEY, base_url="https://team:pw-0123456789@gw.example/v1")


def test_other_providers_do_not_read_openai_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groq, Mistral... (OpenAI-compatible rows) keep their own URL: the variable is OpenAI's."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    for spec in ("groq:m", "mistral:m", "gemini:m"):
        model = toolfold.model(spec, api_key=KEY)
        assert "127.0.0.1" not in model.base_url
        model.close()


def test_an_injected_client_sends_to_the_variables_url(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's httpx client (its params= kept) is used with the URL the variable gives."""
    monkeypatch.setenv("OPENAI_BASE_URL", f"{http_server.url}/gw/v1")
    http_server.add(Reply(json=CHAT))
    with httpx.Client(params={"tenant": "a"}) as client:
        model = toolfold.model("openai:gpt-4o-mini", api_key=KEY, http_client=client)
        assert model.base_url == f"{http_server.url}/gw/v1"  # (else it would reach OpenAI)
        assert toolfold.generate_text(model, "hello").text == "hi"
    assert http_server.requests[0].path == "/gw/v1/chat/completions?tenant=a"


def test_a_url_read_from_the_variable_is_not_pickled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pickle carries no URL read from OPENAI_BASE_URL: the loading process reads its own."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = toolfold.model("openai:gpt-4o-mini")
    data = pickle.dumps(model)
    assert b"127.0.0.1:9" not in data
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    twin = pickle.loads(data)
    assert twin.base_url == "http://127.0.0.1:8/v1"
    twin.close()
    model.close()
