"""An agent resuming its own failed run retries what failed, as a workflow step is retried."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import attrs
import pytest

import toolfold
from toolfold import Agent, Message, ModelResponse, RunState, UsageError, tool
from toolfold.runtime import fork
from toolfold.testing import FunctionModel


@dataclass
class Out:
    n: int


def _failing(kind: str) -> tuple[Agent, dict[str, Any]]:
    """An agent whose run fails the ``kind`` way while ``counts["fail"]``, and its counts."""
    counts: dict[str, Any] = {"model": 0, "tool": 0, "fail": True}

    def work(x: int) -> str:
        """Do work.

        Args:
            x: Any number.
        """
        counts["tool"] += 1
        if kind == "tool_retries" and counts["fail"]:
            raise ValueError("tool boom")
        return f"ok{x}"

    def respond(request: Any) -> Any:
        counts["model"] += 1
        if not any(m.role == "tool" for m in request.messages):
            return FunctionModel.call("work", {"x": 1})
        if kind == "tool_retries" and counts["fail"]:
            return FunctionModel.call("work", {"x": 1})
        if kind == "length" and counts["fail"]:
            return ModelResponse(Message.assistant("x"), finish_reason="length")
        if kind == "output" and counts["fail"]:
            return "not json"
        return '{"n": 3}'

    worker = tool(work, max_retries=1) if kind == "tool_retries" else tool(work)
    return Agent(FunctionModel(respond), tools=[worker], output_type=Out, name="a"), counts


def _failed_state(agent: Agent, counts: dict[str, Any]) -> RunState:
    """The failed run's state, through JSON, the failure then fixed."""
    with pytest.raises(toolfold.ToolfoldError) as caught:
        agent.run("go")
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.phase == "failed"
    counts["fail"] = False
    return RunState.from_json(state.to_json())


# (kind, model calls and tool runs the resume makes)
_AGAIN = [("output", 1, 0), ("length", 1, 0), ("tool_retries", 1, 1)]


@pytest.mark.parametrize(("kind", "models", "tools"), _AGAIN)
def test_resume_retries_only_what_failed(kind: str, models: int, tools: int) -> None:
    """Agent.resume of a failed state asks again / re-runs the failed calls, nothing else."""
    agent, counts = _failing(kind)
    state = _failed_state(agent, counts)
    before = (counts["model"], counts["tool"])
    response = agent.resume(state)
    assert response.output == Out(3)
    assert (counts["model"] - before[0], counts["tool"] - before[1]) == (models, tools)


@pytest.mark.parametrize(("kind", "models", "tools"), _AGAIN)
def test_every_resume_entry_point_retries(kind: str, models: int, tools: int) -> None:
    """aresume, resume_stream and functional resume retry a failed state as resume does."""
    for how in ("aresume", "stream", "functional"):
        agent, counts = _failing(kind)
        state = _failed_state(agent, counts)
        before = (counts["model"], counts["tool"])
        if how == "aresume":
            response = asyncio.run(agent.aresume(state))
        elif how == "stream":
            response = list(agent.resume_stream(state))[-1].response
        else:
            response = toolfold.resume(state, model=agent.model, tools=agent.tools, output_type=Out)
        assert response.output == Out(3), how
        assert (counts["model"] - before[0], counts["tool"] - before[1]) == (models, tools), how


def test_dropped_answer_usage_stays_counted() -> None:
    """The rejected answer a retry leaves out is still in the run's usage (AttemptDropped)."""
    agent, counts = _failing("output")
    state = _failed_state(agent, counts)
    response = agent.resume(state)
    assert response.state.usage.requests == counts["model"]


def test_changed_settings_on_a_failed_state_advise_what_works() -> None:
    """Resuming a failed state with changed settings names err.state and a run(prompt, ...)."""
    agent, counts = _failing("length")
    state = _failed_state(agent, counts)
    changed = attrs.evolve(agent, settings={"max_tokens": 500})
    with pytest.raises(UsageError) as caught:
        changed.resume(state)
    message = str(caught.value)
    assert "err.state" in message
    assert "agent.run(prompt, history=err.state.messages)" in message
    assert "response" not in message
    # the advice given works: a new run from the failed run's messages
    assert changed.run("again", history=state.messages).output == Out(3)


def test_changed_settings_on_a_finished_run_advise_a_run_with_a_prompt() -> None:
    """Resuming a finished run with changed settings gives a run(prompt, history=...) form."""
    agent, counts = _failing("output")
    counts["fail"] = False
    response = agent.run("go")
    changed = attrs.evolve(agent, settings={"max_tokens": 500})
    with pytest.raises(UsageError, match=re.escape("agent.run(prompt, history=response.messages)")):
        changed.resume(response.state, message="more")


def test_a_fork_before_run_failed_keeps_the_rejected_answer() -> None:
    """fork(events=len-1) of an output failure still fails; resuming the failed state answers."""
    agent, counts = _failing("length")
    state = _failed_state(agent, counts)
    with pytest.raises(toolfold.OutputValidationError):
        agent.resume(fork(state, events=len(state.events) - 1, run_id="again"))
    assert agent.resume(state).output == Out(3)
