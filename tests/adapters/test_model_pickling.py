"""Provider models pickle as their name and options (no key, no client); one given a credential refuses."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import httpx
import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold.adapters._http._keys import Secret
from toolfold.adapters._http._retry import HttpLimits, RetryPolicy

KEY = "sk-proj-SECRET-pickle-0123456789"
ENV_KEY = "sk-proj-FROMENV-pickle-0123456789"
OTHER_KEY = "sk-proj-ELSEWHERE-pickle-012345"


def _answer(request: Any) -> Reply:
    return Reply(
        json={"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
    )


def test_a_keyless_compatible_model_pickles_with_its_options(http_server: ScriptedServer) -> None:
    """An openai-compatible model (base_url, timeout, retry, limits, headers) comes back built
    the same, with a client of its own, and its agent runs."""
    http_server.handler = _answer
    model = toolfold.model(
        "openai-compatible:m",
        base_url=f"{http_server.url}/v1",
        timeout=7,
        retry=RetryPolicy(max_retries=1),
        limits=HttpLimits(max_connections=3),
        headers={"x-team": "a"},
        trust_env=False,
    )
    twin = pickle.loads(pickle.dumps(model))
    assert type(twin) is type(model)
    assert (twin.name, twin.base_url) == ("openai-compatible:m", f"{http_server.url}/v1")
    assert twin._transport is not model._transport
    assert twin._transport.timeouts == model._transport.timeouts
    assert twin._transport.retry == RetryPolicy(max_retries=1)
    unlimited = toolfold.model("ollama:qwen3", timeout=None, retry=None)
    loaded = pickle.loads(pickle.dumps(unlimited))  # None is an option: no limits, no retries
    assert loaded._transport.timeouts == unlimited._transport.timeouts
    assert loaded._transport.timeouts is not None
    assert loaded._transport.timeouts.total is None
    assert loaded._transport.retry.max_retries == 0
    loaded.close()
    unlimited.close()
    agent = pickle.loads(pickle.dumps(toolfold.Agent(model)))
    assert agent.run("hello").text == "hi"
    assert http_server.requests[-1].headers["x-team"] == "a"
    agent.model.close()
    twin.close()
    model.close()


def test_a_model_reads_its_key_from_the_environment_where_it_is_unpickled(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model whose key came from the environment pickles without it and reads the key
    of the process that loads it, as a model string does."""
    http_server.handler = _answer
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    model = toolfold.model("openai:gpt-4o-mini", base_url=f"{http_server.url}/v1")
    data = pickle.dumps(model)
    assert ENV_KEY.encode() not in data
    monkeypatch.setenv("OPENAI_API_KEY", OTHER_KEY)
    twin = pickle.loads(data)
    assert toolfold.Agent(twin).run("hello").text == "hi"
    assert http_server.requests[-1].headers["authorization"] == f"Bearer {OTHER_KEY}"
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(toolfold.ModelConfigError, match="OPENAI_API_KEY"):
        pickle.loads(data)  # no key where it lands: the error a model string gives
    twin.close()
    model.close()


def test_every_provider_model_pickles_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ollama, Anthropic, Gemini (its own options), OpenAI Responses and a server preset pickle."""
    for name in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, ENV_KEY)
    models = [
        toolfold.model("ollama:qwen3"),
        toolfold.model("anthropic:claude-sonnet-4-5"),
        toolfold.model("gemini:gemini-2.0-flash", schema_form="openapi", stream_format="json"),
        toolfold.model("openai-responses:gpt-4o-mini"),
        toolfold.model("openai-compatible:q", base_url="http://127.0.0.1:9/v1", server="vllm"),
    ]
    for model in models:
        data = pickle.dumps(model)
        assert ENV_KEY.encode() not in data
        twin = pickle.loads(data)
        assert (type(twin), twin.name, twin.base_url) == (type(model), model.name, model.base_url)
        assert vars(twin).keys() == vars(model).keys()
        model.close()
    gemini = pickle.loads(pickle.dumps(models[2]))
    assert (gemini.schema_form, gemini.stream_format) == ("openapi", "json")
    vllm = pickle.loads(pickle.dumps(models[4]))
    assert vllm.provider == models[4].provider


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"api_key": KEY}, r"built with api_key=\.\.\., and a key never leaves its process"),
        ({"api_key": Secret(KEY)}, r"built with api_key=\.\.\."),
        ({"headers": {"Authorization": f"Bearer {KEY}"}}, r"credential \('Authorization'\)"),
        ({"headers": {"x-team": Secret(KEY)}}, r"credential \('x-team'\)"),
        ({"base_url": f"http://user:{KEY}@127.0.0.1:9/v1"}, "base_url holds a password"),
        ({"http_client": httpx.Client()}, "an HTTP client of your own"),
    ],
)
def test_a_model_given_a_credential_or_a_client_refuses_to_pickle(
    options: dict[str, Any], why: str
) -> None:
    """A key, credential header, URL password or client given in code never travels: the
    error names the model and what to do, never the key."""
    options = {"base_url": "http://127.0.0.1:9/v1", **options}
    model = toolfold.model("openai-compatible:m", **options)
    for dumps in (pickle.dumps, lambda m: pickle.dumps(toolfold.Agent(m))):
        with pytest.raises(TypeError, match=why) as refused:
            dumps(model)
        message = str(refused.value)
        assert message.startswith("the model 'openai-compatible:m' cannot be pickled: ")
        assert "OPENAI_COMPATIBLE_API_KEY" in message
        assert "import path" in message
        assert KEY not in message
    assert KEY not in repr(vars(model))
    client = options.get("http_client")
    if client is not None:
        client.close()
    model.close()


def test_copies_of_a_model_share_its_transport_as_before() -> None:
    """copy.copy and copy.deepcopy of a model (a keyed one too) share its clients, not rebuild it."""
    model = toolfold.model("openai:gpt-4o-mini", api_key=KEY)
    for twin in (copy.copy(model), copy.deepcopy(model)):
        assert twin is not model
        assert twin._transport is model._transport
        assert twin.name == model.name
    model.close()
