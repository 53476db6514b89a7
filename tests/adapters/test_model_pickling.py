"""Provider models pickle as their name and options (no key, no client); one given a credential refuses."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold.adapters._http._keys import Secret
from toolfold.adapters._http._retry import HttpLimits, RetryPolicy
from toolfold.adapters._provider_model import Endpoint
from toolfold.adapters.openai_chat import ChatProvider, OpenAIChatModel

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
    with pytest.raises(toolfold.ModelConfigError) as missing:
        pickle.loads(data)  # no key where it lands: set it there (api_key= would not pickle)
    assert str(missing.value) == (
        "no API key for provider 'openai': the model was pickled without its key and built "
        "again in this process, which reads it from its own environment: set OPENAI_API_KEY there"
    )
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
        ({"base_url": f"http://user:{KEY}@127.0.0.1:9/v1"}, "base URL holds credentials"),
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


@pytest.mark.parametrize(
    "model",
    [
        lambda: toolfold.model("ollama:qwen3", base_url=f"http://{KEY}@127.0.0.1:9"),
        lambda: toolfold.model("ollama:qwen3", base_url=f"http://{KEY}:@127.0.0.1:9"),
        lambda: toolfold.model("anthropic:claude-sonnet-4-5", base_url=f"https://{KEY}@gw.test"),
        lambda: OpenAIChatModel(
            "m",
            provider=ChatProvider(
                name="corp", base_url=f"https://svc:{KEY}@gw.test/v1", key_required=False
            ),
        ),
    ],
    ids=["token-as-user", "empty-password", "anthropic-token", "provider-row-password"],
)
def test_a_model_whose_url_carries_a_user_refuses_to_pickle(
    model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Any user in the base URL (a token as the user, or a password in a ChatProvider row's
    URL rather than base_url=) is a credential: the model refuses to pickle, not the key in
    the bytes."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    built = model()
    with pytest.raises(TypeError, match="its base URL holds credentials before its host") as no:
        pickle.dumps(built)
    assert KEY not in str(no.value)
    built.close()


def test_a_url_read_from_the_environment_is_not_pickled(monkeypatch: pytest.MonkeyPatch) -> None:
    """OLLAMA_HOST (a password in it too) stays out of the pickle: the loading process reads its own."""
    monkeypatch.setenv("OLLAMA_HOST", f"http://u:{KEY}@127.0.0.1:9")
    model = toolfold.model("ollama:qwen3")
    data = pickle.dumps(model)
    assert KEY.encode() not in data
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:8")
    twin = pickle.loads(data)
    assert twin.base_url == "http://127.0.0.1:8"
    twin.close()
    model.close()


class _Tagged(OpenAIChatModel):
    """A subclass with an option of its own, given back by `_own_options`."""

    def __init__(self, model_name: str, *, tag: str = "default", **options: Any) -> None:
        self.tag = tag
        super().__init__(model_name, **options)

    def _own_options(self) -> dict[str, Any]:
        return {**super()._own_options(), "tag": self.tag}


class _Untold(OpenAIChatModel):
    """The same without `_own_options`: ``tag`` would come back as its default."""

    def __init__(self, model_name: str, *, tag: str = "default", **options: Any) -> None:
        self.tag = tag
        super().__init__(model_name, **options)


class _Fixed(OpenAIChatModel):
    """A preset taking no arguments: it cannot be built again from a name and options."""

    def __init__(self) -> None:
        super().__init__("m", provider="openai-compatible", base_url="http://127.0.0.1:9/v1")

    def _own_options(self) -> dict[str, Any]:
        return {}


class _FixedUntold(OpenAIChatModel):
    """The same preset without `_own_options`."""

    def __init__(self) -> None:
        super().__init__("m", provider="openai-compatible", base_url="http://127.0.0.1:9/v1")


class _NeedsRegion(OpenAIChatModel):
    """A required argument of its own and no `_own_options`."""

    def __init__(self, model_name: str, region: str, **options: Any) -> None:
        self.region = region
        super().__init__(model_name, base_url=f"http://{region}.127.0.0.1:9/v1", **options)


class _Direct(OpenAIChatModel):
    """No constructor of its own (as `toolfold.local`'s loopback model): the base's options do."""

    def _endpoint(self, base_url: str | None) -> Endpoint:
        return attrs.evolve(super()._endpoint(base_url), trust_env=False)


def test_a_subclass_pickles_with_its_own_options_or_refuses_where_it_is_pickled() -> None:
    """A subclass's own options come back through `_own_options`; one with a constructor of
    its own and no `_own_options`, or one that cannot take its options, refuses on pickling
    naming the class and the hook, not with a wrong model or a TypeError where it lands."""
    compat: dict[str, Any] = {"provider": "openai-compatible", "base_url": "http://127.0.0.1:9/v1"}
    tagged = _Tagged("m", tag="eu", timeout=3, **compat)
    twin = pickle.loads(pickle.dumps(tagged))
    assert (type(twin), twin.tag, twin.base_url) == (_Tagged, "eu", tagged.base_url)
    assert twin._transport.timeouts == tagged._transport.timeouts
    direct = pickle.loads(pickle.dumps(_Direct("m", **compat)))
    assert type(direct) is _Direct
    untold = _Untold("m", tag="eu", **compat)
    with pytest.raises(toolfold.Unpicklable) as refused:
        pickle.dumps(toolfold.Agent(untold))
    assert str(refused.value).startswith(
        "the model 'openai-compatible:m' cannot be pickled: its class _Untold has a "
        "constructor of its own (_Untold.__init__) but no _own_options giving its options "
        "back, which would be lost: define _Untold._own_options returning them by keyword. "
        "Or build it where it runs (for Ray: from an import path"
    )
    # A constructor that cannot take the options is said first: `_own_options` alone
    # would not make it picklable (a preset without arguments, with or without one).
    unfit = (
        (_NeedsRegion("m", "eu", provider="openai-compatible"), "_NeedsRegion", "missing a"),
        (_Fixed(), "_Fixed", "too many positional"),
        (_FixedUntold(), "_FixedUntold", "too many positional"),
    )
    for model, name, why in unfit:
        with pytest.raises(toolfold.Unpicklable) as refused:
            pickle.dumps(model)
        message = str(refused.value)
        assert message.startswith(
            f"the model 'openai-compatible:m' cannot be pickled: {name}(model_name, **options) "
            "does not take the options it is built again with ("
        ), message
        assert f"): {why}" in message
        assert "make its constructor take them, or have _own_options give its own" in message
        assert "define" not in message
    for model in (tagged, direct, twin, untold, *(m for m, _, _ in unfit)):
        model.close()


def test_a_refusal_is_a_public_toolfold_error_and_a_type_error() -> None:
    """`Unpicklable` is in the one error tree, under its public name; `except TypeError` (as
    for pickle's own refusals) catches it too."""
    model = toolfold.model("openai:m", api_key=KEY)
    with pytest.raises(toolfold.ToolfoldError) as refused:
        pickle.dumps(model)
    assert type(refused.value) is toolfold.Unpicklable
    assert isinstance(refused.value, TypeError)
    assert toolfold.Unpicklable.__module__ == "toolfold"
    model.close()


@pytest.mark.parametrize("userinfo", [KEY, f"user:{KEY}", f"{KEY}:"], ids=["user", "both", "empty"])
def test_a_repr_hides_a_token_given_as_the_urls_user(userinfo: str) -> None:
    """What refuses to pickle is hidden in reprs too: a token as the URL's user included."""
    url = f"http://{userinfo}@h.example:1/v1"
    model = toolfold.model("openai-compatible:m", base_url=url)
    shown = f"{model!r} {model._transport!r}"
    assert KEY not in shown
    assert "base_url='http://***@h.example:1/v1'" in repr(model)
    assert model.base_url == url  # (the URL itself is kept to send)
    model.close()


def test_copies_of_a_model_share_its_transport_as_before() -> None:
    """copy.copy and copy.deepcopy of a model (a keyed one too) share its clients, not rebuild it."""
    model = toolfold.model("openai:gpt-4o-mini", api_key=KEY)
    for twin in (copy.copy(model), copy.deepcopy(model)):
        assert twin is not model
        assert twin._transport is model._transport
        assert twin.name == model.name
    model.close()


_SAVED = Path(__file__).parent / "saved"


def test_a_model_an_older_toolfold_pickled_is_refused_where_it_loads() -> None:
    """An Ollama model pickled by toolfold 1711365d (its attributes, not its options) is
    refused as it is unpickled, saying why and what to do.

    Before, it loaded, and its first request failed with a bare AttributeError
    ('Transport' object has no attribute '_refusal') wrapped in a RunError.
    """
    data = (_SAVED / "ollama_model_1711365d.pkl").read_bytes()
    with pytest.raises(toolfold.Unpicklable) as refused:
        pickle.loads(data)
    assert str(refused.value) == (
        "cannot unpickle this 'ollama' model: it was pickled by an older toolfold, and its "
        "transport has no _hidden, _quoted, _refusal, _unechoed; build the model again "
        "(toolfold.model(...)) rather than unpickle it (a model this toolfold pickles is "
        "built again from its options where it loads)"
    )


def test_a_model_state_without_todays_attributes_is_refused_naming_the_model() -> None:
    """A model's own pickled attributes (as pickle sets them, with no `__reduce__`) that lack
    one it needs now are refused naming the model."""
    model = toolfold.model("ollama:qwen3", base_url="http://127.0.0.1:9")
    old = {"model_name": "qwen3", "provider_name": "ollama", "_transport": model._transport}
    with pytest.raises(
        toolfold.Unpicklable,
        match=r"cannot unpickle the model 'ollama:qwen3': it was pickled by an older toolfold "
        r"and has no _built_with, _logged_notes, _stays_with; build the model again",
    ):
        object.__new__(type(model)).__setstate__(old)
    twin = object.__new__(type(model))
    twin.__setstate__(dict(vars(model)))  # (today's attributes: taken as they are)
    assert twin.name == model.name
    model.close()


def test_the_attributes_an_unpickled_model_needs_are_those_its_constructor_sets() -> None:
    """The lists `__setstate__` checks are what Transport and ProviderModel set, so a new
    attribute is not forgotten there."""
    from toolfold.adapters._http import _transport
    from toolfold.adapters._provider_model import _ATTRIBUTES

    transport = _transport.Transport("ollama", "http://127.0.0.1:9")
    assert set(vars(transport)) == _transport._ATTRIBUTES
    model = toolfold.model("ollama:qwen3", base_url="http://127.0.0.1:9")
    assert set(vars(model)) == _ATTRIBUTES
    model.close()
    transport.close()
