"""A hand-built RunConfig refuses settings its saved state could not hold, naming their path."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

import toolfold
from toolfold import RunState, UsageError
from toolfold.runtime import RunConfig, initial_state
from toolfold.testing import ScriptedModel


class _Opaque:
    """A setting value that is no JSON."""


@pytest.mark.parametrize(
    ("settings", "path", "got"),
    [
        ({"x": {1, 2}}, r"RunConfig\.settings\['x'\]", "got set"),
        ({"x": _Opaque()}, r"RunConfig\.settings\['x'\]", "got _Opaque"),
        ({"a": {"b": [1, {2}]}}, r"RunConfig\.settings\['a'\]\['b'\]\[1\]", "got set"),
        ({"a": [b"raw"]}, r"RunConfig\.settings\['a'\]\[0\]", "got bytes"),
        ({"a": {(1, 2): 3}}, r"RunConfig\.settings\['a'\]: a key must be a str", "got tuple"),
    ],
)
def test_a_non_json_setting_is_refused_at_construction_naming_its_path(
    settings: dict[str, Any], path: str, got: str
) -> None:
    """RunConfig(settings={"x": {1, 2}}) is a UsageError naming the setting's path, not a
    TypeError from state.to_json() later."""
    with pytest.raises(UsageError, match=path) as raised:
        RunConfig(settings=settings)
    assert got in str(raised.value)


def test_json_settings_still_save_and_load() -> None:
    """Nested JSON, int keys (logit_bias), a tuple and a NaN still build, save and load."""
    settings = {
        "response_format": {"type": "json_schema", "schema": {"a": [1, 2.5, None, True]}},
        "logit_bias": {50256: -100},
        "stop": ("x", "y"),
        "penalty": math.nan,
    }
    state = initial_state("hi", RunConfig(settings=settings), run_id="r1")
    loaded = RunState.from_json(state.to_json()).config.settings
    assert loaded["response_format"] == settings["response_format"]
    assert loaded["logit_bias"] == {"50256": -100}
    assert loaded["stop"] == ["x", "y"]
    assert math.isnan(loaded["penalty"])


def test_nested_non_text_keys_are_text_from_the_start() -> None:
    """A nested int, float, bool or None key is the text JSON writes for it as soon as the
    config is built, so a saved state loads back equal to the one that was saved."""
    settings = {"logit_bias": {50256: -100, 1.5: 1}, "extra": {"a": [{True: None, None: 2}]}}
    state = initial_state("hi", RunConfig(settings=settings), run_id="r1")
    assert state.config.settings["logit_bias"] == {"50256": -100, "1.5": 1}
    assert state.config.settings["extra"] == {"a": [{"true": None, "null": 2}]}
    assert RunState.from_json(state.to_json()) == state


def test_keys_written_as_the_same_text_are_refused() -> None:
    """``{1: ..., "1": ...}`` would lose one of them when the state is saved: refused,
    naming the setting and both keys."""
    with pytest.raises(UsageError, match=r"settings\['logit_bias'\]: the keys 1 and '1'"):
        RunConfig(settings={"logit_bias": {1: -100, "1": 5}})


def _nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


def test_a_setting_too_deep_to_save_is_refused_naming_it() -> None:
    """A setting nested 400 levels is a UsageError naming it (was a bare RecursionError)."""
    with pytest.raises(UsageError, match=r"^RunConfig\.settings\['extra'\]\['a'\].*nested more"):
        RunConfig(settings={"extra": _nested(400)})


@pytest.mark.parametrize(
    ("settings", "path"),
    [
        ({"seed": 10**5000}, r"\['seed'\]"),
        ({"logit_bias": {1: 10**5000}}, r"\['logit_bias'\]\['1'\]"),
    ],
)
def test_an_int_too_long_for_json_text_is_refused(settings: dict[str, Any], path: str) -> None:
    """{"seed": 10**5000} is refused at construction, not accepted to fail in to_json."""
    with pytest.raises(UsageError, match=r"^RunConfig\.settings" + path + ": an int of more than"):
        RunConfig(settings=settings)


def test_a_setting_nested_deeper_than_arguments_saves_loads_and_resumes() -> None:
    """A 100-level setting (the user's data, not a model's) builds, saves and loads equal."""
    state = initial_state("hi", RunConfig(settings={"extra": _nested(100)}), run_id="r1")
    assert RunState.from_json(state.to_json()) == state


def test_a_state_saved_with_a_deeply_nested_setting_by_old_code_loads_and_resumes() -> None:
    """A state saved before settings were checked, with a 100-level setting, loads and resumes."""
    text = (Path(__file__).parent / "saved" / "setting_nested_100_finished.json").read_text()
    state = RunState.from_json(text)
    assert state.config.settings["extra"] == _nested(100)
    resumed = toolfold.resume(state, model=ScriptedModel(["b"]), message="more")
    assert resumed.state.phase == "finished"
    assert RunState.from_json(resumed.state.to_json()) == resumed.state


@pytest.mark.parametrize("value", [10**5000, [1, 10**5000]], ids=["int", "in-a-list"])
def test_an_agent_setting_int_too_long_for_json_is_a_model_config_error(value: Any) -> None:
    """An Agent setting holding an int of 5,001 digits is a ModelConfigError naming it: its
    message's repr() raised Python's raw ValueError (Exceeds the limit...)."""
    with pytest.raises(toolfold.ModelConfigError) as caught:
        toolfold.Agent(ScriptedModel(["x"]), settings={"t": value})
    assert "model setting 't' must be JSON data" in str(caught.value)
    assert "an int of more than 4,300 digits" in str(caught.value)


def test_an_agent_file_setting_int_too_long_for_json_is_a_problem_of_the_agent() -> None:
    """A YAML setting ``0x`` + 20,000 hex digits (read by YAML as an int) is a problem of the
    agent naming the setting, not Python's raw ValueError as the agent is built."""
    from toolfold.files import loads
    from toolfold.testing import TestModel, override_models

    text = "agents:\n  a:\n    model: openai:gpt-4o-mini\n    settings:\n"
    text += "      t: 0x" + "f" * 20_000 + "\n"
    with override_models(TestModel()), pytest.raises(toolfold.AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("f.yaml:2: agents.a: cannot build the agent: model setting 't' ")
    assert "an int of more than 4,300 digits" in problem


def test_an_int_setting_past_a_lowered_digit_limit_names_that_limit() -> None:
    """With sys.set_int_max_str_digits(1000), an Agent setting of 2,001 digits is named as
    an int of more than 1,000 digits (it said 4,300 whatever the limit)."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(1000)
    try:
        with pytest.raises(toolfold.ModelConfigError) as caught:
            toolfold.Agent(ScriptedModel(["x"]), settings={"t": 10**2000})
    finally:
        sys.set_int_max_str_digits(before)
    assert "an int of more than 1,000 digits" in str(caught.value)


def test_a_setting_whose_repr_raises_value_error_is_not_called_an_int() -> None:
    """A setting whose own repr() raises ValueError is named by its type and json's error,
    not as an int of more than 4,300 digits (it holds no int)."""

    class Unshown:
        def __repr__(self) -> str:
            raise ValueError("no repr")

    with pytest.raises(toolfold.ModelConfigError) as caught:
        toolfold.Agent(ScriptedModel(["x"]), settings={"t": Unshown()})
    message = str(caught.value)
    assert "digits" not in message
    assert (
        "got a value of type Unshown (Object of type Unshown is not JSON serializable)" in message
    )
