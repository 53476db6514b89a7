"""A workflow step's error text is the same run locally and under Temporal, however many steps failed."""

from __future__ import annotations

import pytest

from toolfold import Parallel, RunError, Sequence
from toolfold.integrations.temporal._nested import SubRunTool, node
from toolfold.toolkit._results import describe_exception


def charge(text: str) -> str:
    raise ValueError("card declined")


def other(text: str) -> str:
    raise KeyError("other")


def test_a_nested_workflows_failure_reads_the_same_durably_and_locally() -> None:
    """Two failed Parallel branches in a nested workflow: the durable step error text is the local one."""
    inner = Parallel(charge, other, name="p")
    with pytest.raises(RunError) as caught:
        Sequence(inner, name="outer").run("x")
    state = caught.value.state
    assert state is not None
    (call,) = state.calls
    assert call.result is not None
    assert call.child is not None
    durable = SubRunTool(node("p", inner), inner)._failure(call.child)
    assert f"Error: {describe_exception(durable)}" == call.result.content
    assert "failed too" not in call.result.content
