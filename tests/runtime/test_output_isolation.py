"""A run's output: the state keeps it read-only, the response hands out the caller's own copy."""

from __future__ import annotations

from typing import Any

import pytest

from toolfold import Parallel, Sequence, Task


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
