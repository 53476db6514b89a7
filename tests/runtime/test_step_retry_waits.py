"""A step with ``on_error="retry"`` neither asks again what cannot pass nor asks again at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import toolfold
import toolfold.runtime._step_retry as step_retry
from toolfold import Agent, RunError, Sequence, Task, WorkflowDefinitionError
from toolfold.testing import FunctionModel

# How a workflow is run: blocking or async, plain (driven in place) or watched (the loop's).
WAYS = ["run", "arun", "run-watched", "arun-watched"]


class Waits:
    """The step's waits, recorded instead of made (no test waits)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seconds: list[float] = []
        monkeypatch.setattr(step_retry, "sleep", self.sleep)
        monkeypatch.setattr(step_retry, "sleep_sync", self.seconds.append)

    async def sleep(self, seconds: float) -> None:
        self.seconds.append(seconds)


def _failing(error: Callable[[], Exception], name: str = "writer") -> tuple[Agent, list[int]]:
    """An agent whose model raises ``error()`` on every call, and its calls counted."""
    calls: list[int] = []

    def answer(request: Any) -> str:
        calls.append(1)
        raise error()

    return Agent(FunctionModel(answer), name=name), calls


def _run(workflow: Any, way: str) -> Any:
    on_event = (lambda event: None) if way.endswith("watched") else None
    if way.startswith("arun"):
        return asyncio.run(workflow.arun("x", on_event=on_event))
    return workflow.run("x", on_event=on_event)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(
    "error",
    [
        lambda: toolfold.AuthenticationError("bad key", provider="p", status_code=401),
        lambda: toolfold.BadRequestError("bad", provider="p", status_code=400),
        # a Gemini per-day quota: its retryDelay of 1 s is no wait after which it passes
        lambda: toolfold.RateLimitError("per day", provider="gemini", retryable=False),
    ],
    ids=["401", "400", "per-day"],
)
def test_an_error_asking_again_cannot_fix_is_not_retried(
    way: str, error: Callable[[], Exception], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 401 (a 400, a per-day quota) fails the step at once: it was sent 3 times in 0.24 s."""
    waits = Waits(monkeypatch)
    agent, calls = _failing(error)
    workflow = Sequence(Task(agent, on_error="retry", retries=2), name="wf")
    with pytest.raises(RunError, match="step 'writer' of Sequence 'wf' failed") as caught:
        _run(workflow, way)
    assert len(calls) == 1
    assert waits.seconds == []
    assert isinstance(caught.value.__cause__, toolfold.ProviderError)
    state = caught.value.state
    assert state is not None
    assert state.error is not None
    assert ": asking again cannot fix it; max_retries=2); last error: " in state.error.message


@pytest.mark.parametrize("way", WAYS)
def test_a_wait_longer_than_the_transport_honours_is_not_retried(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 asking for 500 s (over max_retry_after) fails the step: it was asked again at once."""
    waits = Waits(monkeypatch)
    agent, calls = _failing(lambda: toolfold.RateLimitError("slow", provider="p", retry_after=500))
    workflow = Sequence(Task(agent, on_error="retry"), name="wf")
    with pytest.raises(RunError) as caught:
        _run(workflow, way)
    assert len(calls) == 1
    assert waits.seconds == []
    state = caught.value.state
    assert state is not None
    assert state.error is not None
    assert "a wait of 500 s, over its transport's max_retry_after=120 s" in state.error.message


def test_a_transport_honouring_longer_waits_lets_the_step_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bound is the error's transport's own: one that honours 600 s has the step wait 500 s."""
    waits = Waits(monkeypatch)

    def limited() -> Exception:
        error = toolfold.RateLimitError("slow", provider="p", retry_after=500)
        error.__dict__["_max_retry_after"] = 600.0  # (what the transport records on it)
        return error

    agent, calls = _failing(limited)
    with pytest.raises(RunError):
        Sequence(Task(agent, on_error="retry", retries=1), name="wf").run("x")
    assert len(calls) == 2
    assert waits.seconds == [500.0]


@pytest.mark.parametrize("way", WAYS)
def test_a_provider_error_is_retried_after_a_backoff(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 503 is asked again after 1 s, then 2 s (retry_delay doubled): it restarted with no wait."""
    waits = Waits(monkeypatch)
    agent, calls = _failing(lambda: toolfold.ServerError("busy", provider="p", status_code=503))
    workflow = Sequence(Task(agent, on_error="retry", retries=2), name="wf")
    with pytest.raises(RunError):
        _run(workflow, way)
    assert len(calls) == 3
    assert waits.seconds == [1.0, 2.0]  # none after the last attempt


def test_retry_delay_sets_the_first_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Task(retry_delay=0.25) waits 0.25 s, then 0.5 s."""
    waits = Waits(monkeypatch)
    agent, _ = _failing(lambda: toolfold.ServerError("busy", provider="p", status_code=503))
    with pytest.raises(RunError):
        Sequence(Task(agent, on_error="retry", retry_delay=0.25), name="wf").run("x")
    assert waits.seconds == [0.25, 0.5]


@pytest.mark.parametrize("way", WAYS)
def test_the_provider_s_retry_after_is_the_wait(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 429 (or 503) asking for 3 s is asked again after 3 s, not the backoff."""
    waits = Waits(monkeypatch)
    agent, calls = _failing(lambda: toolfold.ServerError("busy", provider="p", retry_after=3))
    with pytest.raises(RunError):
        _run(Sequence(Task(agent, on_error="retry", retries=2), name="wf"), way)
    assert len(calls) == 3
    assert waits.seconds == [3.0, 3.0]


def test_a_step_s_own_failure_is_retried_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error that is no provider's (a bug in a model of the user's own) gets no wait."""
    waits = Waits(monkeypatch)
    agent, calls = _failing(lambda: ValueError("bug"))
    with pytest.raises(RunError):
        Sequence(Task(agent, on_error="retry", retries=2), name="wf").run("x")
    assert len(calls) == 3
    assert waits.seconds == []


def test_the_wait_is_cancelled_with_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelling the run during the wait ends it there: no further attempt is made."""
    calls: list[int] = []
    waiting = asyncio.Event()

    async def forever(seconds: float) -> None:
        waiting.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(step_retry, "sleep", forever)

    def answer(request: Any) -> str:
        calls.append(1)
        raise toolfold.ServerError("busy", provider="p", status_code=503)

    workflow = Sequence(Task(Agent(FunctionModel(answer), name="w"), on_error="retry"), name="wf")

    async def main() -> None:
        run = asyncio.ensure_future(workflow.arun("x"))
        await waiting.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(main())
    assert len(calls) == 1


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), 61, "1", True])
def test_a_retry_delay_that_is_no_number_of_seconds_is_refused(bad: Any) -> None:
    """retry_delay must be seconds from 0 to 60; the error names the step and the option."""
    agent, _ = _failing(lambda: ValueError("x"))
    with pytest.raises(WorkflowDefinitionError, match="step 'writer': retry_delay must be"):
        Sequence(Task(agent, on_error="retry", retry_delay=bad), name="wf")


def test_resuming_a_step_not_retried_runs_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure is the step's, as a used-up retry is: resuming the state asks again (the key fixed)."""
    Waits(monkeypatch)
    answers: list[str] = []

    def answer(request: Any) -> str:
        answers.append("asked")
        if len(answers) == 1:
            raise toolfold.AuthenticationError("bad key", provider="p", status_code=401)
        return "written"

    workflow = Sequence(
        Task(Agent(FunctionModel(answer), name="writer"), on_error="retry"), name="wf"
    )
    with pytest.raises(RunError) as caught:
        workflow.run("x")
    assert caught.value.state is not None
    response = workflow.resume(caught.value.state)
    assert response.output == "written"
    assert len(answers) == 2


def test_a_workflow_an_older_toolfold_pickled_retries_with_the_default_delay() -> None:
    """A workflow pickled before `Task.retry_delay` existed loads, runs and waits 1 s, then
    2 s: it failed with ``'Task' object has no attribute 'retry_delay'`` (saved/README)."""
    import pathlib
    import pickle

    saved = pathlib.Path(__file__).parent / "saved" / "retried_workflow_8cae91c9.pkl"
    workflow = pickle.loads(saved.read_bytes())
    task = workflow.steps[0]
    assert task.retry_delay == 1.0
    assert workflow.run("x").output == "hi"
    busy = toolfold.ServerError("busy", provider="p", status_code=503)
    waits = [step_retry.retry_wait(task, call, busy) for call in ("c", "c#2", "c#3")]
    assert waits == [1.0, 2.0, None]


@pytest.mark.parametrize("way", ["run-watched", "arun-watched"])
def test_the_wait_is_made_between_attempts_outside_the_step_s_timeout(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's wait comes after its attempt's result, so its ``timeout`` does not cut it:
    Task(timeout=0.5) with a 503 asking for 3 s made its attempts at 0.23/0.73/1.23 s."""
    seen: list[Any] = []
    monkeypatch.setattr(step_retry, "sleep_sync", lambda seconds: seen.append(seconds))

    async def sleep(seconds: float) -> None:
        seen.append(seconds)

    monkeypatch.setattr(step_retry, "sleep", sleep)
    agent, calls = _failing(
        lambda: toolfold.ServerError("busy", provider="p", status_code=503, retry_after=3.0)
    )
    workflow = Sequence(Task(agent, on_error="retry", retries=2, timeout=0.5), name="wf")

    def on_event(event: Any) -> None:
        if event.kind == "tool_returned":
            seen.append(event.kind)

    run = (
        (lambda: asyncio.run(workflow.arun("x", on_event=on_event)))
        if way.startswith("arun")
        else (lambda: workflow.run("x", on_event=on_event))
    )
    with pytest.raises(RunError):
        run()
    assert len(calls) == 3
    assert seen == ["tool_returned", 3.0, "tool_returned", 3.0, "tool_returned"]


@pytest.mark.parametrize("way", WAYS)
def test_a_run_a_sibling_step_fails_does_not_wait(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a Parallel, a 401 that is not retried fails the run at once: it waited for its
    sibling's 503 wait (retry-after 8 s) first."""
    from toolfold import Parallel

    waits = Waits(monkeypatch)
    denied, _ = _failing(
        lambda: toolfold.AuthenticationError("no", provider="p", status_code=401), "a"
    )
    busy, _ = _failing(
        lambda: toolfold.ServerError("busy", provider="p", status_code=503, retry_after=8.0), "b"
    )
    workflow = Parallel(Task(denied, on_error="retry"), Task(busy, on_error="retry"), name="wf")
    with pytest.raises(RunError, match="step 'a' of Parallel 'wf' failed"):
        _run(workflow, way)
    assert waits.seconds == []


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("status", [401, 503])
def test_a_nested_workflow_s_provider_error_is_judged_as_its_own(
    way: str, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retried step that is a workflow whose step failed with a 401 is not asked again,
    and one that failed with a 503 waits: the outer step saw only a RunError and re-ran a
    401 at once."""
    waits = Waits(monkeypatch)
    if status == 401:
        agent, calls = _failing(
            lambda: toolfold.AuthenticationError("no", provider="p", status_code=401)
        )
    else:
        agent, calls = _failing(lambda: toolfold.ServerError("busy", provider="p", status_code=503))
    inner = Sequence(Task(agent, on_error="retry", retries=2), name="inner")
    outer = Sequence(Task(inner, on_error="retry", retries=2), name="outer")
    with pytest.raises(RunError, match="step 'inner' of Sequence 'outer' failed"):
        _run(outer, way)
    if status == 401:
        assert (len(calls), waits.seconds) == (1, [])
    else:  # 3 outer attempts of 3 inner ones, each inner round and outer round waiting
        assert len(calls) == 9
        assert sorted(waits.seconds) == [1.0] * 4 + [2.0] * 4


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("status", [401, 503])
def test_a_function_step_s_provider_error_is_judged_as_an_agent_s(
    way: str, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function step (calling a model itself) that raised a 401 is not asked again, and a
    503 asking 7 s waits it: both were asked again at once."""
    waits = Waits(monkeypatch)
    calls: list[int] = []

    def summarize(text: str) -> str:
        calls.append(1)
        if status == 401:
            raise toolfold.AuthenticationError("no", provider="p", status_code=401)
        raise toolfold.ServerError("busy", provider="p", status_code=503, retry_after=7.0)

    workflow = Sequence(Task(summarize, on_error="retry", retries=2), name="wf")
    with pytest.raises(RunError, match="step 'summarize' of Sequence 'wf' failed"):
        _run(workflow, way)
    if status == 401:
        assert (len(calls), waits.seconds) == (1, [])
    else:
        assert (len(calls), waits.seconds) == (3, [7.0, 7.0])


@pytest.mark.parametrize("way", ["run", "run-watched"])
def test_ctrl_c_during_the_wait_keeps_a_state_that_resumes(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a step waits between its attempts (now outside them, in the driver)
    stops the run with its state: resuming it runs the step again."""

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(step_retry, "sleep_sync", interrupted)
    busy = [True]
    calls: list[int] = []

    def answer(request: Any) -> str:
        calls.append(1)
        if busy[0]:
            raise toolfold.ServerError("busy", provider="p", status_code=503)
        return "done"

    workflow = Sequence(Task(Agent(FunctionModel(answer), name="w"), on_error="retry"), name="wf")
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(workflow, way)
    assert len(calls) == 1
    state = getattr(caught.value, "state", None)
    assert state is not None
    busy[0] = False
    assert workflow.resume(state).output == "done"
    assert len(calls) == 2


@pytest.mark.parametrize("way", ["stream", "astream"])
def test_a_streamed_workflow_waits_between_attempts(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed workflow's driver makes the step's wait too (blocking and async)."""
    waits = Waits(monkeypatch)
    agent, calls = _failing(
        lambda: toolfold.ServerError("busy", provider="p", status_code=503, retry_after=2.0)
    )
    workflow = Sequence(Task(agent, on_error="retry"), name="wf")

    async def read() -> None:
        async for _ in workflow.stream("x"):
            pass

    def drain() -> None:
        for _ in workflow.stream("x"):
            pass

    with pytest.raises(RunError):
        asyncio.run(read()) if way == "astream" else drain()
    assert (len(calls), waits.seconds) == (3, [2.0, 2.0])


@pytest.mark.parametrize("way", [*WAYS, "stream", "astream"])
def test_a_run_that_stops_for_an_approval_does_not_wait(
    way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a Parallel, a retried step's 503 asking 30 s while a sibling step waits for an
    approval: the run stops for it at once (watched and streamed runs slept 30 s first)."""
    from toolfold import Parallel, tool
    from toolfold.testing import ScriptedModel

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish.

        Args:
            text: The text.
        """
        return "published"

    def publishing(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return ScriptedModel.call("publish", {"text": "x"})

    waits = Waits(monkeypatch)
    busy, calls = _failing(
        lambda: toolfold.ServerError("busy", provider="p", status_code=503, retry_after=30.0), "a"
    )
    publisher = Agent(FunctionModel(publishing), name="publisher", tools=[publish])
    workflow = Parallel(Task(busy, on_error="retry"), publisher, name="wf")

    async def read() -> None:
        async for _ in workflow.stream("x"):
            pass

    if way == "astream":
        asyncio.run(read())
    elif way == "stream":
        for _ in workflow.stream("x"):
            pass
    else:
        assert _run(workflow, way).finish_reason == "approval_required"
    assert (len(calls), waits.seconds) == (1, [])


def test_ctrl_c_cuts_a_nested_workflow_s_wait_in_a_blocking_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a blocking stream, Ctrl-C (which fires the round a nested workflow runs in on a
    thread of its own) stops the nested step's wait at the next slice: the wait of 20 s
    was made whole first."""
    from toolfold.runtime.drive._kept_loop import SIGNAL_POLL, watched_interrupt

    waits: list[float] = []

    def sleep(seconds: float) -> None:  # Ctrl-C reaches the caller as the wait begins
        waits.append(seconds)
        interrupt = watched_interrupt()
        assert interrupt is not None
        interrupt.fire()

    monkeypatch.setattr(step_retry, "sleep_sync", sleep)
    agent, calls = _failing(
        lambda: toolfold.ServerError("busy", provider="p", status_code=503, retry_after=20.0)
    )
    inner = Sequence(Task(agent, on_error="retry"), name="inner")
    outer = Sequence(Task(inner), name="outer")
    with pytest.raises(KeyboardInterrupt) as caught:
        for _ in outer.stream("x"):
            pass
    assert getattr(caught.value, "state", None) is not None
    assert (len(calls), waits) == (1, [SIGNAL_POLL])
