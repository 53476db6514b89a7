"""Saved states load as they were saved: bare NaN outputs, the generic loader, signatures, usage."""

from __future__ import annotations

import math

from core_helpers import answer, start

from toolfold import Agent, RunState, Sequence, tool
from toolfold.runtime import (
    Finish,
    OutputAccepted,
    OutputSpec,
    next_effect,
    reduce,
    replay,
)
from toolfold.testing import ScriptedModel


def _nan_output_state() -> RunState:
    state = start(output=OutputSpec("out", schema={"type": "number"}))
    state = reduce(state, answer("NaN"))
    return reduce(state, OutputAccepted(math.nan))


def test_a_bare_nan_output_equals_its_replay_and_its_load() -> None:
    """A state whose output is math.nan equals its replay and its own saved and loaded copy."""
    state = _nan_output_state()
    assert state.output is math.nan
    assert OutputAccepted(math.nan) == OutputAccepted(math.nan)
    assert replay(state.events) == state
    loaded = RunState.from_json(state.to_json())
    assert loaded == state
    assert math.isnan(loaded.output)
    assert next_effect(loaded) == Finish("stop", math.nan)


def test_a_nan_held_bare_equals_any_nan_and_other_values_compare_by_eq() -> None:
    """A bare NaN output equals any NaN (a model's, numpy's); other values compare with == as before."""
    assert OutputAccepted(float("nan")) == OutputAccepted(math.nan)
    assert hash(OutputAccepted(float("nan"))) == hash(OutputAccepted(math.nan))
    assert OutputAccepted(math.nan) != OutputAccepted(None)
    assert OutputAccepted(1) == OutputAccepted(1.0)
    assert OutputAccepted({"a": [1]}) == OutputAccepted({"a": [1]})
    assert OutputAccepted(1) != OutputAccepted(2)
    assert Finish("stop", float("nan")) == Finish("stop", math.nan)


def _produce(text: str) -> float:
    """Return NaN."""
    return math.nan


@tool(requires_approval=True)
def _publish(text: str) -> str:
    """Publish.

    Args:
        text: The text.
    """
    return "published"


def test_a_workflow_suspended_after_a_nan_step_loads_and_resumes() -> None:
    """A workflow whose sub-run ended in math.nan, suspended for an approval, loads from its saved text and resumes."""
    inner = Sequence(_produce, name="inner")
    model = ScriptedModel([ScriptedModel.call("_publish", {"text": "x"}), "done"])
    flow = Sequence(inner, Agent(model, name="publisher", tools=[_publish]), name="flow")
    suspended = flow.run("go").state
    assert suspended.phase == "awaiting_approval"
    loaded = RunState.from_json(suspended.to_json())
    assert loaded == suspended
    approvals = {key: True for key, _ in loaded.keyed_pending_approvals}
    assert flow.resume(loaded, approvals=approvals).text == "done"


def test_a_finished_workflow_with_a_nan_output_replays_and_loads() -> None:
    """Sequence(step returning math.nan): replay(state.events) == state, and the saved state loads equal."""
    state = Sequence(_produce, name="wf").run("go").state
    assert math.isnan(state.output)
    assert replay(state.events) == state
    assert RunState.from_json(state.to_json()) == state


def _produce_in_a_dict(text: str) -> dict[str, float]:
    """Return NaN in an object."""
    return {"mean": math.nan}


def test_a_workflow_output_holding_nan_in_an_object_loads_equal() -> None:
    """A step's {"mean": math.nan} is kept as math.nan itself, so the saved state loads equal."""
    state = Sequence(_produce_in_a_dict, name="wf").run("go").state
    assert state.output["mean"] is math.nan
    assert RunState.from_json(state.to_json()) == state
