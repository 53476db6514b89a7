"""A fresh workflow run nobody watches (`_conduct.Fresh`) reaches what the agent loop reaches, every kind and course."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from workflow_helpers import broken, echo, steady, worker

from toolfold import (
    Agent,
    Loop,
    Parallel,
    Route,
    RunError,
    RunState,
    Sequence,
    Task,
    Workflow,
    tool,
)
from toolfold.runtime import replay
from toolfold.runtime._conduct import Deferred, Fresh
from toolfold.runtime._workflow import _STATE_SLOT
from toolfold.testing import FunctionModel, ScriptedModel


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    return f"deleted {path}"


def flaky(name: str, failures: int) -> Agent:
    """An agent whose model raises its first ``failures`` times, then answers."""
    calls: list[int] = []

    def reply(request: Any) -> Any:
        calls.append(1)
        if len(calls) <= failures:
            raise ValueError(f"attempt {len(calls)} failed")
        return f"{name}({request.messages[-1].text})"

    return Agent(FunctionModel(reply), name=name)


def cleaner(name: str) -> Agent:
    """An agent that calls a tool needing approval, then answers with its result."""

    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return f"{name}: {last.tool_results[0].content}"
        return ScriptedModel.call("delete", {"path": "old.log"})

    return Agent(FunctionModel(reply), name=name, tools=[delete])


def _route(text: str) -> str:
    return "b" if "a(" in text else "c"


# Each makes a new workflow (agents with state of their own, as `flaky`'s, start afresh).
SHAPES: dict[str, Callable[[], Workflow]] = {
    "sequence": lambda: Sequence(worker("a"), echo("b"), echo("c")),
    "parallel": lambda: Parallel(worker("a"), echo("b"), echo("c"), name="p"),
    "route": lambda: Sequence(echo("a"), Route(_route, {"b": echo("b"), "c": echo("c")}, name="r")),
    "loop": lambda: Loop(echo("e"), until=lambda out: len(out) > 12, max_iterations=4, name="l"),
    "nested": lambda: Sequence(
        echo("a"), Sequence(echo("b"), Parallel(echo("c"), echo("d"), name="cd"), name="in")
    ),
    "skip": lambda: Sequence(echo("a"), Task(broken("b"), on_error="skip"), echo("c")),
    "retry": lambda: Sequence(echo("a"), Task(flaky("b", 2), on_error="retry"), echo("c")),
    "values": lambda: Sequence(echo("a"), Task(echo("b"), prompt="B {a} / {input}"), echo("c")),
    "function": lambda: Sequence(echo("a"), Task(len, name="size"), echo("c")),
}
INPUTS: dict[str, Any] = {"text": "x", "data": {"k": [1, "two"]}}


def _ran(make: Callable[[], Workflow], prompt: Any, driver: str, **kwargs: Any) -> Any:
    if driver == "run":
        return make().run(prompt, run_id="wf", **kwargs)
    return asyncio.run(make().arun(prompt, run_id="wf", **kwargs))


@pytest.mark.parametrize("driver", ["run", "arun"])
@pytest.mark.parametrize("given", sorted(INPUTS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_fresh_run_reaches_the_loops_response_and_state(
    shape: str, given: str, driver: str
) -> None:
    """Each kind of workflow, plain or not, run fresh and unwatched, gives the loop's response, state and log."""
    make, prompt = SHAPES[shape], INPUTS[given]
    looped = _ran(make, prompt, driver, on_event=lambda event: None)
    lean = _ran(make, prompt, driver)
    held = _STATE_SLOT.__get__(lean)
    if shape != "function" and shape != "skip" and shape != "retry":  # plain to the answer
        assert type(held) is Deferred
        assert type(held.start) is Fresh  # no start state made on the way
    shown = (lean.output, lean.text, lean.finish_reason, lean.usage, lean.run_id, lean.agent)
    assert shown == (
        looped.output,
        looped.text,
        looped.finish_reason,
        looped.usage,
        looped.run_id,
        looped.agent,
    )
    assert repr(lean) == repr(looped)
    assert steady(lean.state) == steady(looped.state)
    assert lean.state.phase == "finished"
    assert (lean.outputs, lean.errors) == (looped.outputs, looped.errors)
    assert replay(lean.state.log) == lean.state
    assert RunState.from_json(lean.state.to_json()) == lean.state
    copied = pickle.loads(pickle.dumps(_ran(make, prompt, driver)))
    assert steady(copied.state) == steady(lean.state)
    unread = _ran(make, prompt, driver)
    assert unread == pickle.loads(pickle.dumps(unread))


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_fresh_run_whose_step_waits_for_approval_suspends_and_resumes_as_the_loop(
    driver: str,
) -> None:
    """A step whose agent asks for an approval suspends a fresh run as the loop does; resumed, both end alike."""

    def make() -> Workflow:
        return Sequence(echo("a"), cleaner("b"), echo("c"))

    looped = _ran(make, "x", driver, on_event=lambda event: None)
    lean = _ran(make, "x", driver)
    assert lean.finish_reason == looped.finish_reason == "approval_required"
    assert lean.pending_approvals == looped.pending_approvals
    assert steady(lean.state) == steady(looped.state)
    call_id = lean.pending_approvals[0].id
    done = make().resume(lean.state, approvals={call_id: True})
    done_looped = make().resume(looped.state, approvals={call_id: True})
    assert done.output == done_looped.output == "c(b: deleted old.log)"
    assert steady(done.state) == steady(done_looped.state)
    assert replay(done.state.log) == done.state


def test_a_fresh_run_whose_step_fails_it_raises_as_the_loop() -> None:
    """A step failing with on_error='fail' after plain rounds raises the loop's error, with its state."""

    def make() -> Workflow:
        return Sequence(echo("a"), echo("b"), Task(broken("c"), on_error="fail"))

    with pytest.raises(RunError) as lean:
        make().run("x", run_id="wf")
    with pytest.raises(RunError) as looped:
        make().run("x", run_id="wf", on_event=lambda event: None)
    assert str(lean.value) == str(looped.value)
    assert lean.value.state is not None
    assert looped.value.state is not None
    assert steady(lean.value.state) == steady(looped.value.state)


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_an_interrupted_fresh_run_carries_the_loops_state(driver: str) -> None:
    """Ctrl-C in a step after plain rounds gives the error the state the loop gives it, to resume from."""

    def make() -> Workflow:
        def reply(request: Any) -> Any:
            raise KeyboardInterrupt

        return Sequence(echo("a"), Agent(FunctionModel(reply), name="b"), echo("c"))

    states: list[str] = []
    for kwargs in ({}, {"on_event": lambda event: None}):
        with pytest.raises(KeyboardInterrupt) as stopped:
            _ran(make, "x", driver, **kwargs)
        state = stopped.value.state  # type: ignore[attr-defined]
        assert isinstance(state, RunState)
        states.append(steady(state))
    assert states[0] == states[1]
    assert '"a(x)"' in states[0]
