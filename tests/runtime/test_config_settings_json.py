"""A hand-built RunConfig refuses settings its saved state could not hold, naming their path."""

from __future__ import annotations

import math
from typing import Any

import pytest

from toolfold import RunState, UsageError
from toolfold.runtime import RunConfig, initial_state


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
