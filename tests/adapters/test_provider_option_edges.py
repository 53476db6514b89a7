"""Provider options' edges: errors that name what was wrong without a wrong suggestion."""

from __future__ import annotations

import inspect

import pytest

import toolfold
from toolfold import ModelConfigError
from toolfold.adapters._provider_model import ProviderModel
from toolfold.adapters.openai_chat._model import OpenAIChatModel
from toolfold.runtime._model import _OPTION_ALIASES, CONNECTION_OPTIONS

# --- 5. options given to toolfold.model ---------------------------------------------


@pytest.mark.parametrize(
    ("given", "meant"),
    [("base_ulr", "base_url"), ("max_retries", "retry"), ("timout", "timeout")],
)
def test_a_misspelt_model_option_is_told_its_name_not_sent_to_the_run(
    given: str, meant: str
) -> None:
    """``model(spec, base_ulr=...)`` suggests base_url=, and gives no advice to pass it to the run."""
    with pytest.raises(ModelConfigError) as caught:
        toolfold.model("openai:gpt-4o-mini", api_key="k", **{given: 1})
    message = str(caught.value)
    assert f"did you mean {meant}=?" in message
    assert "Agent(" not in message


def test_settings_given_to_model_are_pointed_at_the_runs_settings() -> None:
    """``model(spec, settings=...)`` points at Agent(model, settings={...}), not at a setting named 'settings'."""
    with pytest.raises(ModelConfigError) as caught:
        toolfold.model("openai:gpt-4o-mini", api_key="k", settings={"temperature": 0})
    message = str(caught.value)
    assert "Agent(model, settings={...})" in message
    assert "'settings': " not in message


def test_the_options_model_suggests_are_options_of_the_models() -> None:
    """Every option name model() may suggest is a keyword a built-in provider's model takes."""
    taken = set(inspect.signature(ProviderModel.__init__).parameters)
    taken |= set(inspect.signature(OpenAIChatModel.__init__).parameters)
    assert set(CONNECTION_OPTIONS) <= taken
    assert set(_OPTION_ALIASES.values()) <= set(CONNECTION_OPTIONS)
