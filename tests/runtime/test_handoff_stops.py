"""A run's stop conditions bound it across handoffs, as its max_steps does."""

from __future__ import annotations

from typing import Any

from toolfold import Agent, Message, ModelResponse, Usage, token_budget, tool
from toolfold.runtime import RunState, TokenBudget
from toolfold.testing import FunctionModel, ScriptedModel

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


def test_a_handoff_back_to_the_first_agent_drops_the_targets_conditions() -> None:
    """On a cycle triage -> refunds -> triage, refunds' budget and callable do not bound triage."""
    seen: list[str | None] = []

    def refunds_enough(state: RunState) -> bool:
        seen.append(state.agent)
        return state.usage.total_tokens >= 2500

    back = _big(Message.assistant("", [call("transfer_to_triage")]))
    refunds = Agent(
        ScriptedModel([_big(Message.assistant("", [call("work")])), back]),
        name="refunds",
        tools=[work],
        handoffs=["triage"],
        stop_when=[token_budget(2000), refunds_enough],
    )
    works = [_big(Message.assistant("", [call("work")]))] * 10
    first = _big(Message.assistant("", [call("transfer_to_refunds")]))
    triage = Agent(
        ScriptedModel([first, *works, _big(Message.assistant("Done."))]),
        name="triage",
        tools=[work],
        handoffs=[refunds],
        stop_when=[token_budget(10000)],
        max_steps=30,
    )
    response = triage.run("refund please")
    assert (response.finish_reason, response.agent, response.usage.requests) == (
        "stop",
        "triage",
        14,
    )
    assert response.state.config.stop_when == (TokenBudget(10000),)
    assert seen == ["refunds", "refunds"]


def _chain(a_seen: list[int], b_seen: list[int]) -> Agent:
    """a -> b -> c: a and b have a callable (a's never stops, b's stops c) and a token budget."""

    def a_pred(state: RunState) -> bool:
        a_seen.append(state.usage.requests)
        return False

    def b_pred(state: RunState) -> bool:
        b_seen.append(state.usage.requests)
        return state.agent == "c"

    c = Agent(
        ScriptedModel(
            [_big(Message.assistant("", [call("work")]))] * 4 + [_big(Message.assistant("C done."))]
        ),
        name="c",
        tools=[work],
    )
    b = Agent(
        ScriptedModel([_big(Message.assistant("", [call("transfer_to_c")]))]),
        name="b",
        handoffs=[c],
        stop_when=[token_budget(1200), b_pred],
    )
    return Agent(
        ScriptedModel([_big(Message.assistant("", [call("transfer_to_b")]))]),
        name="a",
        handoffs=[b],
        stop_when=[token_budget(100000), a_pred],
        max_steps=4,
    )


def test_an_intermediate_agents_conditions_do_not_follow_the_run() -> None:
    """On a chain a -> b -> c, c runs under a's conditions and its own, not b's; so does a resume."""
    a_seen: list[int] = []
    b_seen: list[int] = []
    a = _chain(a_seen, b_seen)
    stopped = a.run("go")
    assert (stopped.finish_reason, stopped.agent, stopped.usage.requests) == ("max_steps", "c", 4)
    assert stopped.state.config.stop_when == (TokenBudget(100000),)
    assert (b_seen, a_seen) == ([1], [1, 2, 3])  # b's only while b ran
    done = a.resume(stopped.state, max_steps=10)
    assert (done.finish_reason, done.output) == ("stop", "C done.")
    assert (b_seen, a_seen) == ([1], [1, 2, 3, 4, 5, 6])


def test_a_resume_with_the_target_drops_its_conditions_once_it_hands_back() -> None:
    """Resuming a handed-off run with the target: its callable stops nothing after it hands back."""
    seen: list[str | None] = []

    def refunds_enough(state: RunState) -> bool:
        seen.append(state.agent)
        return state.agent == "triage"

    def triage(script: list[ModelResponse], refunds: Agent | str) -> Agent:
        return Agent(
            ScriptedModel(script),
            name="triage",
            tools=[work],
            handoffs=[refunds],
            stop_when=[token_budget(10000)],
            max_steps=3,
        )

    def refunds(script: list[ModelResponse], triage: Agent | str) -> Agent:
        return Agent(
            ScriptedModel(script),
            name="refunds",
            tools=[work],
            handoffs=[triage],
            stop_when=[token_budget(3000), refunds_enough],
        )

    works = [_big(Message.assistant("", [call("work")]))]
    first = _big(Message.assistant("", [call("transfer_to_refunds")]))
    stopped = triage([first], refunds(works * 2, "triage")).run("refund please").state
    assert (stopped.agent, stopped.finish_reason, stopped.usage.requests) == (
        "refunds",
        "max_steps",
        3,
    )
    seen.clear()
    back = _big(Message.assistant("", [call("transfer_to_triage")]))
    done_script = [*works * 3, _big(Message.assistant("Done."))]
    done = refunds([back], triage(done_script, "refunds")).resume(stopped, max_steps=10)
    assert (done.finish_reason, done.agent, done.output) == ("stop", "triage", "Done.")
    assert done.usage.requests == 8
    assert seen == ["refunds"]  # called before refunds' request, never while triage ran


def test_a_middle_agents_tree_budget_stays_with_it_after_it_hands_on() -> None:
    """On a -> b -> c, b's token_budget(tree=True) does not stop c; a's conditions alone are stored."""
    c = Agent(
        ScriptedModel(
            [_big(Message.assistant("", [call("work")]))] * 4 + [_big(Message.assistant("C done."))]
        ),
        name="c",
        tools=[work],
    )
    b = Agent(
        ScriptedModel([_big(Message.assistant("", [call("transfer_to_c")]))]),
        name="b",
        handoffs=[c],
        stop_when=[token_budget(1200, tree=True)],
    )
    a = Agent(
        ScriptedModel([_big(Message.assistant("", [call("transfer_to_b")]))]),
        name="a",
        handoffs=[b],
        stop_when=[token_budget(100000)],
    )
    response = a.run("go")
    assert (response.finish_reason, response.output, response.usage.requests) == (
        "stop",
        "C done.",
        7,
    )
    assert response.state.config.stop_when == (TokenBudget(100000),)


def _three_calls(state: RunState) -> bool:
    return state.usage.requests >= 3


def _never(state: RunState) -> bool:
    return False


def test_a_sub_agent_stopped_after_a_handoff_by_its_first_agents_callable_names_it() -> None:
    """triage (stop_when=_three_calls) as a tool hands to refunds, which that callable stops: the
    call's error names _three_calls, or both callables when refunds has one of its own (the
    state does not say which held), never refunds' alone."""
    said: list[str] = []

    def lead_reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            said.append(request.messages[-1].tool_results[0].content)
            return "ok"
        return call("ask", {"input": "refund please"})

    for own in ([], [_never]):
        triage = _triage(_refunds().evolve(stop_when=own), _three_calls)
        Agent(FunctionModel(lead_reply), tools=[triage.as_tool(name="ask")]).run("go")
    head = (
        "Error: the run of agent 'triage' (tool 'ask'), handed to agent 'refunds', "
        "was stopped by a stop_when condition "
    )
    assert said == [
        f"{head}(test_handoff_stops:_three_calls) after 3 model calls without answering",
        f"{head}(one of test_handoff_stops:_never, test_handoff_stops:_three_calls) after 3 "
        "model calls without answering",
    ]
