"""What a response reads from its state once: its steps, a workflow's outputs and errors."""

from __future__ import annotations

import contextlib
import copy
import pickle
from typing import Any

import attrs
import pytest

import toolfold
from toolfold import Sequence, Task
from toolfold.runtime import _response, _workflow
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@toolfold.tool
def square(n: int) -> int:
    """Square a number.

    Args:
        n: The number.
    """
    return n * n


def _run(steps: int) -> toolfold.Response:
    script = [call("square", {"n": i}) for i in range(steps)] + ["done"]
    return toolfold.generate_text(ScriptedModel(script), "go", tools=[square], run_id="r1")


def test_a_responses_steps_are_read_from_its_state_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading ``steps`` again (a loop over ``r.steps[i]``) does not rebuild them from the log."""
    response = _run(8)
    reads = 0
    steps_of = _response.steps_of

    def counted(state: toolfold.RunState) -> tuple[toolfold.Step, ...]:
        nonlocal reads
        reads += 1
        return steps_of(state)

    monkeypatch.setattr(_response, "steps_of", counted)
    seen = [response.steps[i].index for i in range(len(response.steps))]
    assert seen == list(range(1, 10))
    assert reads == 1
    assert response.steps is response.steps


def test_a_response_that_read_its_steps_compares_prints_and_pickles_as_before() -> None:
    """What a response keeps is no field: equality, repr, pickling and evolve are unchanged."""
    response = _run(3)
    fresh = _run(3)
    pickled = pickle.dumps(response)
    before = repr(response)
    assert len(response.steps) == 4
    assert pickle.dumps(response) == pickled
    assert repr(response) == before
    assert response == fresh
    assert [f.name for f in attrs.fields(type(response))] == ["state", "output"]
    evolved = attrs.evolve(response)
    assert evolved == response
    assert evolved.steps == response.steps
    assert copy.copy(response).steps == response.steps
    assert pickle.loads(pickled).steps == response.steps


def _words(text: str) -> str:
    return text + "!"


def _broken(text: str) -> str:
    raise ValueError("no")


def test_a_workflow_responses_outputs_and_errors_are_read_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``outputs`` and ``errors`` read the run's conversation once; each read gives its own dict."""
    response = Sequence(
        Task(_words, name="a"), Task(_broken, name="b", on_error="skip"), Task(_words, name="c")
    ).run("hi")
    reads = 0
    read_plan = _workflow.read_plan

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal reads
        reads += 1
        return read_plan(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_workflow, "read_plan", counted)
    for _ in range(5):
        assert response.outputs == {"a": "hi!", "c": "hi!!"}
        assert list(response.errors) == ["b"]
    assert reads == 2
    response.outputs["a"] = "changed"
    assert response.outputs["a"] == "hi!"


def test_changing_a_read_of_a_workflows_outputs_changes_no_later_read() -> None:
    """Each read of `outputs` hands out values of its own, nested lists and dicts too."""

    def listy(text: str) -> list[Any]:
        return [text, {"k": 1}]

    def mapping(items: list[Any]) -> dict[str, Any]:
        return {"n": [1, 2]}

    response = Sequence(Task(listy, name="a"), Task(mapping, name="b")).run("hi")
    first = response.outputs
    first["a"].append("changed")
    first["a"][1]["k"] = 2
    first["b"]["n"].append(99)
    assert response.outputs == {"a": ["hi", {"k": 1}], "b": {"n": [1, 2]}}


def test_changing_a_steps_sub_runs_changes_no_later_read() -> None:
    """A step's ``sub_runs`` cannot be changed under a later read of `steps` (it is read-only)."""
    sub = toolfold.Agent(ScriptedModel(["sub done"]), name="sub")
    top = toolfold.Agent(
        ScriptedModel([call("sub", {"input": "go"}), "top done"]),
        name="top",
        tools=[sub.as_tool()],
    )
    response = top.run("go")
    with contextlib.suppress(TypeError):
        response.steps[0].sub_runs.clear()  # type: ignore[attr-defined]
    assert len(response.steps[0].sub_runs) == 1
