"""A run's stop conditions bound it across handoffs, as its max_steps does."""

from __future__ import annotations

from typing import Any

from toolfold import Agent, Message, ModelResponse, Usage, token_budget, tool
from toolfold.runtime import RunState, TokenBudget
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@tool
def work() -> str:
    """Work."""
    return "done some"


def _big(message: Message) -> ModelResponse:
    return ModelResponse(message, usage=Usage(input_tokens=400, output_tokens=100))


def _refunds() -> Agent:
    steps = [_big(Message.assistant("", [call("work")]))] * 6
    return Agent(
        ScriptedModel([*steps, _big(Message.assistant("Refunded."))]),
        name="refunds",
        tools=[work],
    )


def _triage(refunds: Agent, *stop_when: Any) -> Agent:
    return Agent(
        ScriptedModel([_big(Message.assistant("", [call("transfer_to_refunds")]))]),
        name="triage",
        handoffs=[refunds],
        stop_when=list(stop_when),
    )


def test_the_first_agents_token_budget_bounds_the_run_after_a_handoff() -> None:
    """A plain token_budget of the first agent stops the target too, and its state stores it."""
    response = _triage(_refunds(), token_budget(1000)).run("refund please")
    assert (response.finish_reason, response.agent) == ("token_budget", "refunds")
    assert response.usage.requests == 2
    assert response.state.config.stop_when == (TokenBudget(1000),)


def test_the_first_agents_stop_callable_is_called_after_a_handoff() -> None:
    """A stop_when callable of the first agent is called while the target runs, and stops it."""
    seen: list[int] = []

    def enough(state: RunState) -> bool:
        seen.append(state.usage.requests)
        return state.usage.requests >= 3

    response = _triage(_refunds(), enough).run("refund please")
    assert (response.finish_reason, response.agent) == ("stop_condition", "refunds")
    assert seen == [1, 2, 3]


def test_the_targets_own_conditions_still_apply_beside_the_first_agents() -> None:
    """The target keeps its own stop conditions; the first agent's join them once."""
    refunds = _refunds().evolve(stop_when=[token_budget(1500)])
    response = _triage(refunds, token_budget(1500), token_budget(5000)).run("go")
    assert response.state.config.stop_when == (TokenBudget(1500), TokenBudget(5000))
    assert (response.finish_reason, response.usage.requests) == ("token_budget", 3)


def test_a_resume_with_the_first_agent_checks_its_callables_after_the_handoff() -> None:
    """Resuming a handed-off run with the agent that started it checks that agent's callables."""
    seen: list[int] = []

    def enough(state: RunState) -> bool:
        seen.append(state.usage.requests)
        return state.usage.requests >= 4

    refunds = _refunds()
    stopped = _triage(refunds).evolve(max_steps=3).run("refund please").state
    assert (stopped.agent, stopped.finish_reason, stopped.usage.requests) == (
        "refunds",
        "max_steps",
        3,
    )
    again = _triage(refunds, enough).resume(stopped, max_steps=10)
    assert (again.finish_reason, again.usage.requests) == ("stop_condition", 4)
    assert seen == [3, 4]
