"""`toolfold.model`'s options (``api_key=``...) given where model settings go are refused.

A key given as ``Agent(model, api_key=...)`` was taken as a model setting: sent
in every request body, stored in plain text in the run's state, the agent's
repr and its agent file.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

import toolfold
from toolfold import Agent, AgentFileError, RunState, UsageError, agenerate_text, generate_text
from toolfold.files import loads
from toolfold.runtime._misplaced import _KEYWORD_OPTIONS
from toolfold.runtime._model import (
    CLIENT_OPTIONS,
    MODEL_OPTIONS,
    OTHER_CLIENTS_OPTIONS,
    QUERY_HINT,
    other_clients_option,
)
from toolfold.testing import ScriptedModel, TestModel, override_models

SECRET = "sk-SECRET-value-123"


@pytest.mark.parametrize("option", sorted(MODEL_OPTIONS))
def test_agent_refuses_each_model_option_given_as_a_setting(option: str) -> None:
    """Agent("openai:...", <option>=...) is a UsageError that says to give it to toolfold.model."""
    with override_models(TestModel()), pytest.raises(UsageError) as raised:
        Agent("openai:gpt-4o-mini", **{option: SECRET})
    message = str(raised.value)
    assert message.startswith(f"Agent() got {option}=: an option of the model, not a model setting")
    assert f"Agent(toolfold.model('openai:gpt-4o-mini', {option}=...), ...)" in message
    assert SECRET not in message


@pytest.mark.parametrize("option", sorted(_KEYWORD_OPTIONS - MODEL_OPTIONS))
def test_agent_refuses_other_clients_names_for_a_model_option(option: str) -> None:
    """Agent(model, extra_headers=/max_retries=/organization=/api_version=...) (the OpenAI
    SDK's, LiteLLM's names) is refused with the option of toolfold.model it stands for."""
    with override_models(TestModel()), pytest.raises(UsageError) as raised:
        Agent("openai:gpt-4o-mini", **{option: SECRET})
    message = str(raised.value)
    assert message.startswith(f"Agent() got {option}=: an option of the model, not a model setting")
    form = other_clients_option(option, "openai:gpt-4o-mini")
    if form:
        assert f"Agent(toolfold.model('openai:gpt-4o-mini', {form}), ...)" in message
    else:
        assert QUERY_HINT in message
    assert SECRET not in message


def test_other_clients_options_name_their_toolfold_option() -> None:
    """Each name says which option of toolfold.model to give instead."""
    spec = "openai:gpt-4o"
    assert other_clients_option("extra_headers", spec) == "headers=..."
    assert other_clients_option("default_headers", spec) == "headers=..."
    assert other_clients_option("max_retries", spec) == "retry=..."
    assert other_clients_option("api_base", spec) == "base_url=..."
    assert other_clients_option("azure_ad_token", spec) == "api_key=..."
    assert other_clients_option("organization", spec) == "headers={'OpenAI-Organization': ...}"
    assert other_clients_option("project", "openai-responses:gpt-5") == (
        "headers={'OpenAI-Project': ...}"
    )
    assert other_clients_option("api_version", spec) == ""
    assert other_clients_option("temperature", spec) is None
    # OpenAI's headers, for OpenAI's models only
    assert other_clients_option("organization", "anthropic:claude-sonnet-4-5") is None
    assert other_clients_option("project", None) is None
    # pydantic-ai's retries= is an agent's: refused as output_retries=, not as retry=
    assert "retries" not in _KEYWORD_OPTIONS
    with pytest.raises(UsageError, match="did you mean output_retries="):
        Agent(TestModel(), retries=2)


def test_a_header_given_to_generate_text_is_neither_sent_nor_stored() -> None:
    """generate_text(..., extra_headers={"Helicone-Auth": secret}) was a body field, sent and
    stored in the state's JSON: it is refused, pointing at the model's headers=."""
    model = TestModel()
    with pytest.raises(UsageError) as raised:
        generate_text(model, "hi", extra_headers={"Helicone-Auth": f"Bearer {SECRET}"})
    message = str(raised.value)
    assert message.startswith("generate_text() got extra_headers=: an option of the model")
    assert "(extra_headers= as headers=)" in message
    assert SECRET not in message
    assert model.requests == []
    with pytest.raises(UsageError, match=r"^agenerate_text\(\) got azure_ad_token="):
        asyncio.run(agenerate_text(model, "hi", azure_ad_token=SECRET))
    with pytest.raises(UsageError, match=r"^evolve\(\) got max_retries=") as raised:
        Agent(model).evolve(max_retries=3)
    assert "agent.evolve(model=toolfold.model('provider:model', retry=...))" in str(raised.value)


def test_another_clients_name_is_pointed_at_settings_too() -> None:
    """api_base= / azure_ad_token= name toolfold's option, and settings= for a body field of
    that name (LiteLLM's proxy reads api_base from the body); api_key= itself gets no such
    advice, as on main."""
    with pytest.raises(UsageError) as raised:
        Agent(TestModel(), api_base="http://x", azure_ad_token=SECRET)
    message = str(raised.value)
    assert "(api_base= as base_url=, azure_ad_token= as api_key=)" in message
    assert message.endswith(
        "if they are fields of the provider's request body, give them in "
        "settings={'api_base': ..., 'azure_ad_token': ...}"
    )
    with pytest.raises(UsageError) as raised:
        Agent(TestModel(), api_key=SECRET)
    assert "settings=" not in str(raised.value)


def test_generic_names_are_model_settings_as_on_main() -> None:
    """url=, key=, base= (other libraries' names for base_url=/api_key=) are too generic to
    refuse: a user's own model may read them as settings, as main let it."""
    settings = {"url": "u", "key": "k", "base": "b"}
    agent = Agent(TestModel(), **settings)
    assert agent.run("hi").state.config.settings == settings


@pytest.mark.parametrize("option", ["organization", "project"])
def test_openais_header_options_are_refused_for_openais_models_only(option: str) -> None:
    """project=/organization= are the OpenAI SDK's headers: refused for an openai: or
    openai-responses: model with the header named; another provider's model takes them as
    settings, as on main (it was told to give OpenAI's header to Anthropic, whose model()
    sent it back to Agent)."""
    for spec in ("openai:gpt-4o-mini", "openai-responses:gpt-5-mini"):
        with override_models(TestModel()), pytest.raises(UsageError) as raised:
            Agent(spec, **{option: "p-1"})
        assert f"headers={{'OpenAI-{option.title()}': ...}}" in str(raised.value)
    with override_models(TestModel()):
        agent = Agent("anthropic:claude-sonnet-4-5", **{option: "p-1"})
    assert agent.run("hi").state.config.settings == {option: "p-1"}
    assert generate_text(TestModel(), "hi", **{option: "p-1"}).state.config.settings == {
        option: "p-1"
    }


def test_other_clients_names_are_body_fields_in_settings() -> None:
    """settings={"extra_headers": ...} stays the explicit way to send a body field of that name."""
    settings = {name: {"x": "1"} for name in sorted(OTHER_CLIENTS_OPTIONS)}
    agent = Agent(TestModel(), settings=settings)
    assert agent.run("hi").state.config.settings == settings


def test_a_key_given_to_agent_never_reaches_its_state_or_repr() -> None:
    """Agent(..., api_key=...) fails before a run could store or send the key; the error hides it."""
    with override_models(TestModel()), pytest.raises(UsageError) as raised:
        Agent("openai:gpt-4o-mini", api_key=SECRET, temperature=0)
    assert SECRET not in str(raised.value)
    assert SECRET not in repr(raised.value)


def test_a_model_option_in_settings_is_refused_too() -> None:
    """Agent(model, settings={"api_key": ...}) is refused, showing the key's name, not its value."""
    with pytest.raises(UsageError) as raised:
        Agent(TestModel(), settings={"temperature": 0, "api_key": SECRET, "base_url": "x"})
    message = str(raised.value)
    assert message.startswith(
        "Agent() got settings={'api_key': ..., 'base_url': ...}: options of the model"
    )
    assert "toolfold.model('provider:model', api_key=..., base_url=...)" in message
    assert SECRET not in message


def test_evolve_refuses_a_model_option_naming_evolve() -> None:
    """agent.evolve(api_key=...) is refused, with a hint that gives evolve a model instead."""
    with pytest.raises(UsageError, match=r"^evolve\(\) got api_key=") as raised:
        Agent(TestModel()).evolve(api_key=SECRET)
    assert "agent.evolve(model=toolfold.model('provider:model', api_key=...))" in str(raised.value)
    with pytest.raises(UsageError, match=r"^evolve\(\) got settings=\{'api_key': \.\.\.\}"):
        Agent(TestModel()).evolve(settings={"api_key": SECRET})


@pytest.mark.parametrize("option", ["api_key", "base_url", "timeout", "headers"])
def test_generate_text_refuses_a_model_option(option: str) -> None:
    """generate_text(..., api_key=...) is a UsageError naming generate_text, not a setting sent."""
    with override_models(TestModel()), pytest.raises(UsageError) as raised:
        generate_text("openai:gpt-4o-mini", "hi", **{option: SECRET})
    message = str(raised.value)
    assert message.startswith(f"generate_text() got {option}=: an option of the model")
    assert f"generate_text(toolfold.model('openai:gpt-4o-mini', {option}=...), ...)" in message
    assert SECRET not in message


def test_agenerate_text_refuses_a_model_option_naming_itself() -> None:
    """agenerate_text(..., api_key=...) is refused as generate_text's is."""
    with pytest.raises(UsageError, match=r"^agenerate_text\(\) got api_key="):
        asyncio.run(agenerate_text(TestModel(), "hi", api_key=SECRET))


def test_an_agent_file_with_a_key_in_its_settings_does_not_load() -> None:
    """An agent file's settings holding api_key are refused at load, without the key's value."""
    text = f'[agents.main]\nmodel = "openai:gpt-4o-mini"\nsettings = {{api_key = "{SECRET}"}}\n'
    with override_models(TestModel()), pytest.raises(AgentFileError) as raised:
        loads(text)
    assert "settings={'api_key': ...}: an option of the model" in str(raised.value)
    assert SECRET not in str(raised.value)


def test_ordinary_settings_are_still_model_settings() -> None:
    """Settings that are no model option (temperature, a provider's own) still reach the state."""
    with override_models(TestModel()):
        response = generate_text("openai:gpt-4o-mini", "hi", temperature=0, provider={"x": 1})
    assert response.state.config.settings == {"temperature": 0, "provider": {"x": 1}}


def test_model_options_are_exactly_the_built_in_model_classes_options() -> None:
    """MODEL_OPTIONS (which the runtime refuses as settings) is every model class's own keyword."""
    from toolfold.adapters._provider_model import ProviderModel
    from toolfold.local import LocalModel

    toolfold_model_classes: list[type[Any]] = [LocalModel]
    todo: list[type[Any]] = [ProviderModel]
    while todo:
        cls = todo.pop()
        toolfold_model_classes.append(cls)
        # toolfold's own: subclasses the tests define (test_model_pickling's) take theirs.
        todo.extend(c for c in cls.__subclasses__() if c.__module__.startswith("toolfold."))
    names: set[str] = set()
    for cls in toolfold_model_classes:
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
                names.add(name)
    # provider= is set by the model string's prefix: toolfold.model takes none.
    assert names - {"provider"} == MODEL_OPTIONS


@pytest.mark.parametrize("option", sorted(MODEL_OPTIONS - CLIENT_OPTIONS))
def test_a_generic_model_option_name_is_a_body_field_in_settings(option: str) -> None:
    """settings={"timeout": ...} (orq.ai's body field) is taken; only the bare keyword is refused."""
    agent = Agent(TestModel(), settings={option: {"call_timeout": 30000}})
    assert agent.settings == {option: {"call_timeout": 30000}}
    assert agent.run("hi").state.config.settings == {option: {"call_timeout": 30000}}
    with pytest.raises(UsageError) as raised:
        Agent(TestModel(), **{option: 1})
    assert f"give it in settings={{{option!r}: ...}}" in str(raised.value)


def test_generate_text_says_a_body_field_goes_in_an_agents_settings() -> None:
    """generate_text(..., timeout=...) points a body field to Agent(model, settings={...})."""
    with pytest.raises(UsageError) as raised:
        generate_text(TestModel(), "hi", timeout=1)
    assert "give it in Agent(model, settings={'timeout': ...})" in str(raised.value)


@pytest.mark.parametrize("option", sorted(CLIENT_OPTIONS))
def test_a_client_option_is_refused_in_settings_too(option: str) -> None:
    """A credential or client option in settings={...} is still refused, naming no value."""
    with pytest.raises(UsageError) as raised:
        Agent(TestModel(), settings={option: SECRET})
    assert str(raised.value).startswith(f"Agent() got settings={{{option!r}: ...}}: an option")
    assert SECRET not in str(raised.value)


def test_evolve_refuses_a_key_in_settings_naming_evolve() -> None:
    """agent.evolve(settings={"api_key": ...}) names evolve(), not Agent(), and takes body fields."""
    agent = Agent(TestModel())
    with pytest.raises(UsageError, match=r"^evolve\(\) got settings=\{'base_url': \.\.\.\}"):
        agent.evolve(settings={"base_url": SECRET})
    assert agent.evolve(settings={"headers": {"x": "1"}}).settings == {"headers": {"x": "1"}}


def test_an_agent_file_is_told_to_give_load_a_model() -> None:
    """An agent file's key in settings gets the file's advice (load(path, model=...)), not Python's."""
    text = f'[agents.main]\nmodel = "openai:gpt-4o-mini"\nsettings = {{api_key = "{SECRET}"}}\n'
    with override_models(TestModel()), pytest.raises(AgentFileError) as raised:
        loads(text)
    message = str(raised.value)
    assert "agents.main.settings: settings={'api_key': ...}" in message
    assert "give load(path, model=...) a model made with it" in message
    assert "Agent(" not in message
    assert SECRET not in message


def test_an_agent_file_takes_a_body_field_named_timeout() -> None:
    """An agent file's settings = {timeout = {...}} is a model setting, as in Python."""
    text = '[agents.main]\nmodel = "openai:gpt-4o-mini"\nsettings = {timeout = {ms = 3}}\n'
    with override_models(TestModel()):
        agent = loads(text).agent("main")
    assert agent.settings == {"timeout": {"ms": 3}}


@toolfold.tool(name="f", requires_approval=True)
def _gated(x: int) -> str:
    """A tool that waits for approval."""
    return "ok"


# Saved by the code that took settings={"api_key": ...} (and timeout) as settings:
# awaiting approval of call c1.
_OLD_STATE = Path(__file__).parent / "saved" / "key_in_settings_awaiting_approval.json"


def test_a_state_saved_with_a_key_in_its_settings_resumes() -> None:
    """A state whose settings hold api_key (saved before it was refused) resumes without it."""
    state = RunState.from_json(_OLD_STATE.read_text())
    assert state.config.settings["api_key"] == "sk-old"
    agent = Agent(
        ScriptedModel(["done"]),
        tools=[_gated],
        settings={"timeout": {"call_timeout": 30000}, "temperature": 0},
    )
    response = agent.resume(state, approvals={"c1": True})
    assert response.state.phase == "finished"
    resumed = toolfold.resume(
        state, model=ScriptedModel(["done"]), tools=[_gated], approvals={"c1": True}
    )
    assert resumed.state.phase == "finished"
    # a setting the state does not have still differs
    with pytest.raises(UsageError, match="settings differ"):
        agent.evolve(settings={"temperature": 1}).resume(state, approvals={"c1": True})
