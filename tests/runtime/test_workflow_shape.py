"""A run records its workflow's shape: a resume by a workflow of another kind is refused."""

from __future__ import annotations

import re
from typing import Any

import pytest
from workflow_helpers import echo

from toolfold import Agent, Loop, Parallel, Route, RunState, Sequence, UsageError, tool
from toolfold.testing import FunctionModel, ScriptedModel

PUBLISHED: list[str] = []


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish a text.

    Args:
        text: What to publish.
    """
    PUBLISHED.append(text)
    return "published"


def _publisher(request: Any) -> Any:
    last = request.messages[-1]
    if last.role == "tool":
        return "Done: " + request.messages[0].text
    return ScriptedModel.call("publish", {"text": last.text})


PUB = Agent(FunctionModel(_publisher), name="pub", tools=[publish])


def _router(text: str) -> str:
    return "a"


def _waiting(workflow: Any) -> tuple[str, dict[str, bool]]:
    """The workflow run until it waits, as stored JSON, and the approvals that answer it."""
    response = workflow.run("x")
    assert response.finish_reason == "approval_required"
    return response.state.to_json(), {c.id: True for c in response.pending_approvals}


@pytest.mark.parametrize(
    ("started", "resuming", "message"),
    [
        (
            Sequence(echo("a"), PUB, echo("z"), name="flow"),
            Parallel(echo("a"), PUB, echo("z"), name="flow"),
            "the resuming Parallel 'flow' is a Parallel, but the run was started by a Sequence",
        ),
        (
            Parallel(echo("a"), PUB, name="w"),
            Sequence(echo("a"), PUB, name="w"),
            "the resuming Sequence 'w' is a Sequence, but the run was started by a Parallel",
        ),
        (
            Sequence(PUB, name="w"),
            Loop(PUB, name="w", max_iterations=3),
            "the resuming Loop 'w' is a Loop, but the run was started by a Sequence",
        ),
        (
            Route(_router, {"a": PUB, "b": echo("e")}, name="r"),
            Route(_router, {"b": PUB, "a": echo("e")}, name="r"),
            "is a Route (a router function; 'b' -> 'pub', 'a' -> 'e'), but the run was started "
            "by a Route (a router function; 'a' -> 'pub', 'b' -> 'e')",
        ),
        (
            Sequence(echo("s"), Sequence(echo("a"), PUB, echo("z"), name="in"), name="w"),
            Sequence(echo("s"), Parallel(echo("a"), PUB, echo("z"), name="in"), name="w"),
            "cannot resume the sub-run of call 'in' (tool 'in'), so nothing was run: the "
            "resuming Parallel 'in' is a Parallel, but the run was started by a Sequence",
        ),
    ],
)
def test_a_workflow_of_another_shape_is_refused_before_anything_runs(
    started: Any, resuming: Any, message: str
) -> None:
    """The same steps in another kind of workflow (or a Route with its labels swapped), at any
    depth, are refused and nothing runs (they used to run on inputs the run was not started
    with)."""
    text, approvals = _waiting(started)
    PUBLISHED.clear()
    with pytest.raises(UsageError, match=re.escape(message)):
        resuming.resume(RunState.from_json(text), approvals=approvals)
    assert PUBLISHED == []
    done = started.resume(RunState.from_json(text), approvals=approvals)
    assert done.finish_reason == "stop"
    assert len(PUBLISHED) == 1


def _without_shapes(text: str) -> str:
    """A state's JSON as stored before runs recorded their workflow's shape (empty settings)."""
    old, count = re.subn(
        r'"settings":\{"toolfold\.workflow":"(?:[^"\\]|\\.)*"\}', '"settings":{}', text
    )
    assert count > 0
    assert "toolfold.workflow" not in old
    return old


def test_a_state_stored_before_shapes_were_recorded_is_checked_by_its_step_names() -> None:
    """An old state (no shape in its settings, at any depth) resumes with the workflow that
    started it, and one with other step names is still refused; its kind cannot be checked."""
    started = Sequence(echo("s"), Sequence(echo("a"), PUB, name="in"), name="w")
    text, approvals = _waiting(started)
    old = _without_shapes(text)
    with pytest.raises(UsageError, match=re.escape("(s, other) differ from the run's (s, in)")):
        Sequence(echo("s"), Sequence(echo("a"), PUB, name="other"), name="w").resume(
            RunState.from_json(old), approvals=approvals
        )
    done = started.resume(RunState.from_json(old), approvals=approvals)
    assert (done.finish_reason, done.output) == ("stop", "Done: a(s(x))")
    kinds = Sequence(echo("s"), Parallel(echo("a"), PUB, name="in"), name="w")
    assert kinds.resume(RunState.from_json(old), approvals=approvals).finish_reason == "stop"
