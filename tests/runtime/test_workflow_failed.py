"""A failed workflow resumes from just before what failed it; its error says so once."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import attrs
import pytest

from toolfold import Agent, Parallel, Route, RunError, RunState, Sequence, Task, UsageError, tool
from toolfold.runtime import replay
from toolfold.runtime.core._state import RunFailure
from toolfold.testing import FunctionModel


class Counted:
    """Steps that count their runs; the flaky one fails while ``down``."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.down = True

    def agent(self, name: str) -> Agent:
        def answer(request: Any) -> str:
            self.calls[name] = self.calls.get(name, 0) + 1
            return f"{name}({request.messages[-1].text})"

        return Agent(FunctionModel(answer), name=name)

    def flaky(self, text: str) -> str:
        self.calls["flaky"] = self.calls.get("flaky", 0) + 1
        if self.down:
            raise ValueError("service down")
        return "flaky-ok"


def _failed(workflow: Any) -> RunState:
    with pytest.raises(RunError) as caught:
        workflow.run("x")
    state = caught.value.state
    assert state is not None
    assert state.phase == "failed"
    return RunState.from_json(state.to_json())


@pytest.mark.parametrize("flaky_first", [False, True], ids=["flaky-last", "flaky-first"])
def test_a_failed_parallel_resumes_running_only_the_failed_branch(flaky_first: bool) -> None:
    """Resuming a workflow failed in a Parallel branch runs that branch again, not the ended ones."""
    steps = Counted()
    flaky = Parallel(
        *((steps.flaky, steps.agent("b")) if flaky_first else (steps.agent("b"), steps.flaky)),
        name="views",
    )
    workflow = Sequence(steps.agent("a"), flaky, name="top")
    state = _failed(workflow)
    assert steps.calls == {"a": 1, "b": 1, "flaky": 1}
    steps.down = False
    response = workflow.resume(state)
    assert response.output == {"b": "b(a(x))", "flaky": "flaky-ok"}
    assert steps.calls == {"a": 1, "b": 1, "flaky": 2}
    assert replay(response.state.log) == response.state
    assert RunState.from_json(response.state.to_json()) == response.state


def test_an_async_resume_of_a_failed_parallel_keeps_the_ended_branch() -> None:
    """aresume retries the failed branch only, as resume does."""
    steps = Counted()
    workflow = Sequence(Parallel(steps.agent("b"), steps.flaky, name="views"), name="top")
    state = _failed(workflow)
    steps.down = False
    response = asyncio.run(workflow.aresume(state))
    assert response.output == {"b": "b(x)", "flaky": "flaky-ok"}
    assert steps.calls == {"b": 1, "flaky": 2}


def test_a_failed_agent_step_goes_on_from_its_failed_model_call() -> None:
    """An agent step whose model failed after a tool step resumes there: the tool does not run again."""
    calls = {"model": 0, "lookup": 0}
    down = [True]

    @tool
    def lookup(q: str) -> str:
        """Look something up.

        Args:
            q: What to look up.
        """
        calls["lookup"] += 1
        return "found " + q

    def model(request: Any) -> Any:
        calls["model"] += 1
        if not any(m.role == "tool" for m in request.messages):
            return FunctionModel.call("lookup", {"q": "x"})
        if down[0]:
            raise ConnectionError("down")
        return "answer"

    workflow = Sequence(Agent(FunctionModel(model), name="ag", tools=[lookup]), name="top")
    state = _failed(workflow)
    down[0] = False
    assert workflow.resume(state).output == "answer"
    assert calls == {"model": 3, "lookup": 1}


def test_a_route_whose_router_failed_asks_the_router_again() -> None:
    """A Route step failed by its router resumes by routing again; the step before keeps its output."""
    steps = Counted()

    def pick(text: str) -> str:
        steps.calls["pick"] = steps.calls.get("pick", 0) + 1
        if steps.down:
            raise KeyError("no route")
        return "one"

    workflow = Sequence(steps.agent("a"), Route(pick, {"one": steps.agent("one")}, name="r"))
    state = _failed(workflow)
    steps.down = False
    assert workflow.resume(state).output == "one(a(x))"
    assert steps.calls == {"a": 1, "pick": 2, "one": 1}


def test_a_step_that_fails_again_fails_the_resume_and_can_be_resumed_again() -> None:
    """A retried step that fails again raises the step's RunError; its state resumes in turn."""
    steps = Counted()
    workflow = Sequence(steps.agent("a"), Parallel(steps.agent("b"), steps.flaky, name="p"))
    state = _failed(workflow)
    with pytest.raises(RunError, match=r"step 'p' of Sequence .* service down") as caught:
        workflow.resume(state)
    again = caught.value.state
    assert again is not None
    assert again.phase == "failed"
    steps.down = False
    workflow.resume(again)
    assert steps.calls == {"a": 1, "b": 1, "flaky": 3}


def test_a_failure_no_step_can_run_again_from_is_a_usage_error_saying_how_to_fork() -> None:
    """A failed state whose failure names no failed call of its last step is refused, naming
    the failure and pointing at fork."""
    steps = Counted()
    workflow = Sequence(steps.agent("a"), steps.flaky, name="top")
    state = _failed(workflow)
    odd = attrs.evolve(state, error=RunFailure("tool_retries_exceeded", "it broke", "elsewhere"))
    with pytest.raises(UsageError, match=r"failed \(tool_retries_exceeded: it broke\).*fork\("):
        workflow.resume(odd)


def test_a_nested_step_failure_says_where_its_state_is_once() -> None:
    """A failure three workflows deep names each step, and the note on the state comes once."""

    def ok(t: str) -> str:
        return t

    def boom(t: str) -> str:
        raise KeyError("kaboom")

    inner = Sequence(ok, boom, name="inner")
    with pytest.raises(RunError) as caught:
        Sequence(ok, Parallel(ok, inner, name="par"), name="outer").run("x")
    message = str(caught.value)
    assert message.count("the error's state is the workflow's") == 1
    assert message.endswith(
        "KeyError: 'kaboom'; the error's state is the workflow's, with the failure recorded"
    )
    assert "step 'inner' of Parallel 'par' failed" in message


def _service(calls: dict[str, int], down: list[bool], name: str) -> Any:
    """A step counting its runs in ``calls``; it fails while ``down[0]`` (but ``ok`` never does)."""

    def step(text: str) -> str:
        calls[name] = calls.get(name, 0) + 1
        if down[0] and name != "ok":
            raise ValueError(f"{name} down")
        return name

    step.__name__ = name
    return step


@pytest.mark.parametrize("nested", [False, True], ids=["branches", "nested-branches"])
def test_a_parallel_with_two_failed_branches_runs_both_again(nested: bool) -> None:
    """Resuming a Parallel whose two branches failed runs both again, once, and succeeds."""
    calls: dict[str, int] = {}
    down = [True]
    fa, fb, ok = (_service(calls, down, n) for n in ("fa", "fb", "ok"))
    if nested:
        branches: tuple[Any, ...] = (Sequence(ok, fa, name="i1"), Sequence(ok, fb, name="i2"))
    else:
        branches = (fa, fb, ok)
    workflow = Sequence(Parallel(*branches, name="p"), name="top")
    state = _failed(workflow)
    before = dict(calls)
    down[0] = False
    response = workflow.resume(state)
    assert {k: calls[k] - before[k] for k in calls} == {"fa": 1, "fb": 1, "ok": 0}
    expected = {"i1": "fa", "i2": "fb"} if nested else {"fa": "fa", "fb": "fb", "ok": "ok"}
    assert response.output == expected
    assert replay(response.state.log) == response.state


def test_a_skipped_branch_beside_a_failed_one_keeps_its_error_on_resume() -> None:
    """A branch with on_error="skip" that failed beside the failing one is not run again."""
    calls: dict[str, int] = {}
    down = [True]
    fa, fs = _service(calls, down, "fa"), _service(calls, down, "fs")
    workflow = Parallel(fa, Task(fs, on_error="skip"), name="p")
    state = _failed(workflow)
    down[0] = False
    response = workflow.resume(state)
    assert calls == {"fa": 2, "fs": 1}
    assert response.output == {"fa": "fa"}
    assert response.errors == {"fs": "Error: ValueError: fs down"}


def test_an_agent_step_whose_answer_failed_validation_asks_its_model_again() -> None:
    """An agent step failed by an answer that does not fit its output type resumes before that
    answer: its tool does not run again, the model is asked with the kept conversation."""
    calls = {"model": 0, "charge": 0}
    down = [True]
    asked: list[list[str]] = []

    @tool
    def charge(amount: str) -> str:
        """Charge the card.

        Args:
            amount: How much.
        """
        calls["charge"] += 1
        return "charged"

    def model(request: Any) -> Any:
        calls["model"] += 1
        if not any(m.role == "tool" for m in request.messages):
            return FunctionModel.call("charge", {"amount": "1"}, id="c1")
        asked.append([m.role for m in request.messages])
        return '{"result": "nope"}' if down[0] else '{"result": "a"}'

    agent = Agent(
        FunctionModel(model),
        name="ag",
        tools=[charge],
        output_type=Literal["a", "b"],
        output_retries=0,
    )
    workflow = Sequence(agent, name="top")
    state = _failed(workflow)
    assert state.error is not None
    assert "did not fit the output type" in state.error.message
    down[0] = False
    response = workflow.resume(state)
    assert response.output == "a"
    assert calls == {"model": 3, "charge": 1}
    assert asked[-1] == asked[0]  # the same conversation: the rejected answer is not in it
    # every model call stays counted: the tool step's, the rejected answer's and the new one's
    assert response.usage.requests == calls["model"] == 3
    assert replay(response.state.log) == response.state
