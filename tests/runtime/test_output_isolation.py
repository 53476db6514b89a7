"""A run's output: the state keeps it read-only, the response hands out the caller's own copy."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from toolfold import Agent, Parallel, RunState, Sequence, Task
from toolfold.runtime import FrozenDict, FrozenList, OutputAccepted
from toolfold.testing import ScriptedModel


def _plain(x: Any):  # type: ignore[no-untyped-def]  # no return annotation: taken as it is
    return {"wrapped": [x]}


def _any(x: str) -> Any:
    return {"wrapped": [x]}


@pytest.mark.parametrize("step", [_plain, _any])
def test_editing_a_workflow_response_output_leaves_the_state(step: Any) -> None:
    """A workflow ending in a function without a typed return: editing response.output keeps the saved state."""
    response = Sequence(Task(step, name="s")).run("q")
    saved = response.state.to_json()
    response.output["wrapped"].append("USER")
    assert response.state.to_json() == saved
    assert response.state.output == {"wrapped": ["q"]}


def test_a_lazily_made_workflow_state_ignores_earlier_edits_of_the_output() -> None:
    """The state a workflow response makes on first read is not changed by editing response.output first."""
    response = Sequence(Task(_plain, name="s")).run("q")
    response.output["wrapped"].append("BEFORE_STATE")
    assert response.state.output == {"wrapped": ["q"]}
    assert response.text == '{"wrapped": ["q"]}'


def test_parallel_branch_outputs_are_not_shared_with_the_state() -> None:
    """A Parallel of functions: editing a branch's value in response.output leaves the state's."""
    response = Parallel(Task(_plain, name="a"), Task(_any, name="b")).run("go")
    saved = response.state.to_json()
    response.output["a"]["wrapped"].append("USER")
    assert response.state.output == {"a": {"wrapped": ["go"]}, "b": {"wrapped": ["go"]}}
    assert response.state.to_json() == saved


class _Out(TypedDict):
    name: str
    tags: list[str]


def _typed_agent() -> Agent:
    return Agent(ScriptedModel(['{"name": "a", "tags": ["x"]}']), output_type=_Out)


def test_an_observer_cannot_change_the_accepted_output() -> None:
    """OutputAccepted.value is read-only: an on_event observer editing it gets TypeError, the state keeps its output."""
    refused: list[str] = []

    def observer(event: Any) -> None:
        if event.kind == "output_accepted":
            try:
                event.value["tags"].append("FROM_OBSERVER")
            except TypeError as exc:
                refused.append(str(exc))

    response = _typed_agent().run("hi", on_event=observer)
    assert len(refused) == 1
    assert "read-only" in refused[0]
    assert response.state.output == {"name": "a", "tags": ["x"]}
    assert "FROM_OBSERVER" not in response.state.to_json()


def test_the_state_output_is_read_only_and_the_response_output_the_callers() -> None:
    """state.output is frozen; response.output is a plain value the caller may change freely."""
    response = _typed_agent().run("hi")
    saved = response.state.to_json()
    assert type(response.state.output) is FrozenDict
    with pytest.raises(TypeError, match="read-only"):
        response.state.output["tags"].append("EVIL")
    response.output["tags"].append("MINE")
    assert response.output == {"name": "a", "tags": ["x", "MINE"]}
    assert response.state.to_json() == saved


def test_a_sub_runs_output_in_the_parents_state_is_read_only() -> None:
    """A sub-agent's structured output reached through response.steps[i].sub_runs cannot be changed."""

    class Numbers(TypedDict):
        v: list[int]

    sub = Agent(ScriptedModel(['{"v": [1]}']), name="sub", output_type=Numbers)
    model = ScriptedModel([ScriptedModel.call("sub", {"input": "go"}), "done"])
    response = Agent(model, tools=[sub.as_tool()]).run("hi")
    saved = response.state.to_json()
    (child,) = response.steps[0].sub_runs.values()
    with pytest.raises(TypeError, match="read-only"):
        child.output["v"].append(999)
    assert response.state.to_json() == saved


def test_a_saved_state_loads_with_a_read_only_output_equal_and_byte_identical() -> None:
    """A state's JSON loads back equal, with its output (and the event's) frozen, and writes the same bytes."""
    state = _typed_agent().run("hi").state
    text = state.to_json()
    back = RunState.from_json(text)
    assert back == state
    assert back.to_json() == text
    assert type(back.output) is FrozenDict
    (accepted,) = [event for event in back.log if event.kind == "output_accepted"]
    assert type(accepted.value["tags"]) is FrozenList
    assert OutputAccepted({"a": [1]}) == OutputAccepted(FrozenDict(a=[1]))


def _pickled_as_before(state: RunState) -> bytes:
    """``state`` pickled as a toolfold before outputs were frozen wrote it: plain dicts and lists."""
    import copyreg
    import io
    import pickle

    class OldPickler(pickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if type(obj) in (RunState, OutputAccepted):
                fields = obj.__getstate__()
                name = "output" if type(obj) is RunState else "value"
                fields[name] = fields[name].thaw() if fields[name] is not None else None
                return copyreg.__newobj__, (type(obj),), fields
            return NotImplemented

    buffer = io.BytesIO()
    OldPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
    return buffer.getvalue()


def test_a_state_pickled_with_a_plain_output_unpickles_read_only() -> None:
    """A RunState (and its OutputAccepted) pickled with mutable output, as before, comes back frozen."""
    import pickle

    model = ScriptedModel(['{"a": [1, {"b": [2]}]}'])
    state = Agent(model, output_type=dict[str, Any]).run("q").state
    old = pickle.loads(_pickled_as_before(state))
    accepted = next(e for e in old.log if e.kind == "output_accepted")
    assert type(old.output) is FrozenDict
    assert type(old.output["a"]) is FrozenList
    assert type(accepted.value) is FrozenDict
    with pytest.raises(TypeError):
        old.output["a"].append("MUT")
    assert old == state
    assert old.to_json() == state.to_json()


def test_a_state_pickled_now_round_trips_unchanged() -> None:
    """A RunState pickled by this version unpickles equal, its frozen output kept frozen."""
    import pickle

    state = Sequence(Task(_any, name="s")).run("q").state
    back = pickle.loads(pickle.dumps(state))
    assert back == state
    assert back.to_json() == state.to_json()
    assert type(back.output) is FrozenDict
    assert type(back.output["wrapped"]) is FrozenList
