"""token_budget(n, tree=True): the whole tree's tokens, bounded at every level it reaches."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import pytest

import toolfold
from toolfold import Agent, RunContext, UsageError, token_budget
from toolfold.files import loads
from toolfold.runtime import RunState, TokenBudget, replay
from toolfold.runtime._task import Task, _run_runner, _run_runner_sync
from toolfold.runtime.core._reducer import OpenStep, initial_state, open_step, reduce
from toolfold.runtime.core._stop import step_start_tokens, stop_answer
from toolfold.testing import FunctionModel

# Every model call of these tests costs 50 + 50 tokens.
_SPEND = toolfold.Usage(50, 50, requests=1)


@toolfold.tool
def t() -> str:
    """T."""
    return "t"


@toolfold.tool(requires_approval=True)
def act() -> str:
    """Act once approved."""
    return "acted"


def _worker(calls: int, tool: str = "t") -> FunctionModel:
    """Calls ``tool`` ``calls`` times, one a step, then answers ``worked``."""

    def reply(request: Any) -> Any:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < calls:
            part = toolfold.ToolCallPart(f"w{done}", tool, "{}")
            return toolfold.ModelResponse(toolfold.Message.assistant("", [part]), _SPEND)
        return toolfold.ModelResponse(toolfold.Message.assistant("worked"), _SPEND)

    return FunctionModel(reply)


def _boss(
    parallel: int = 1, tool: str = "sub", arguments: str = '{"input": "go"}'
) -> FunctionModel:
    """Calls ``tool`` ``parallel`` times in every step, never answering."""

    def reply(request: Any) -> Any:
        step = sum(1 for m in request.messages if m.role == "assistant")
        parts = [toolfold.ToolCallPart(f"b{step}_{i}", tool, arguments) for i in range(parallel)]
        return toolfold.ModelResponse(toolfold.Message.assistant("", parts), _SPEND)

    return FunctionModel(reply)


def _lead(budget: TokenBudget, sub_calls: int, parallel: int = 1) -> Agent:
    sub = Agent(_worker(sub_calls), name="sub", tools=[t])
    return Agent(
        _boss(parallel), name="lead", tools=[sub.as_tool()], stop_when=[budget], max_steps=8
    )


def _results(response: Any) -> list[str]:
    return [p.content for m in response.messages for p in m.tool_results]


def _exact(state: RunState) -> None:
    assert replay(state.log) == state
    assert RunState.from_json(state.to_json()) == state


def test_a_caller_stops_once_its_sub_runs_spend_the_tree_budget() -> None:
    """The sub-run's 400 tokens plus the lead's 100 pass 450: the lead stops after its first step."""
    response = _lead(token_budget(450, tree=True), sub_calls=3).run("go")
    state = response.state
    assert (state.finish_reason, state.step) == ("token_budget", 1)
    assert (state.usage.total_tokens, state.tree_usage.total_tokens) == (100, 500)
    assert _results(response) == ["worked"]  # the sub-run answered within its 350
    assert stop_answer(state, "agent 'lead'") == (
        "Error: agent 'lead' stopped at its limit token_budget=450, tree=True (500 tokens "
        "used, 400 of them by its sub-runs) after 1 model call without answering"
    )
    _exact(state)


def test_without_tree_the_budget_counts_the_runs_own_calls_as_before() -> None:
    """token_budget(450) lets the lead run on to 500 tokens of its own; its sub-runs get no budget."""
    response = _lead(token_budget(450), sub_calls=3).run("go")
    state = response.state
    assert (state.finish_reason, state.step) == ("token_budget", 5)
    assert state.usage.total_tokens == 500
    assert state.tree_usage.total_tokens == 500 + 5 * 400
    assert all(s.config.stop_when == () for s in state.sub_runs.values())
    assert json.loads(state.to_json())["config"]["stop_when"] == [
        {"tokens": 450, "kind": "token_budget"}  # no "tree" key: what it always wrote
    ]


def test_a_sub_agent_stops_mid_run_at_what_is_left_of_the_budget() -> None:
    """The sub-agent starts with 450 - 100 left, stores it, and stops once its own tree passes it."""
    response = _lead(token_budget(450, tree=True), sub_calls=10).run("go")
    state = response.state
    (sub,) = state.sub_runs.values()
    assert sub.config.stop_when == (TokenBudget(350, tree=True),)
    assert (sub.finish_reason, sub.step, sub.usage.total_tokens) == ("token_budget", 4, 400)
    assert _results(response)[-1] == (
        "Error: agent 'sub' stopped at its limit token_budget=350, tree=True (400 tokens used, "
        "0 of them by its sub-runs) after 4 model calls without answering"
    )
    assert (state.finish_reason, state.tree_usage.total_tokens) == ("token_budget", 500)
    _exact(state)


def test_the_budget_goes_down_every_level() -> None:
    """A sub-agent's own sub-agent gets what is left of the handed budget when its step began."""
    inner = Agent(_worker(10), name="inner", tools=[t])
    middle = Agent(_boss(tool="inner"), name="middle", tools=[inner.as_tool()])
    lead = Agent(
        _boss(tool="middle"),
        tools=[middle.as_tool()],
        stop_when=[token_budget(600, tree=True)],
    )
    state = lead.run("go").state
    (mid,) = state.sub_runs.values()
    (low,) = mid.sub_runs.values()
    assert mid.config.stop_when == (TokenBudget(500, tree=True),)
    assert low.config.stop_when == (TokenBudget(400, tree=True),)
    assert [s.finish_reason for s in (low, mid, state)] == ["token_budget"] * 3
    assert state.tree_usage.total_tokens == 100 + 100 + 400


def test_parallel_sub_agents_each_get_what_was_left_when_the_step_began() -> None:
    """Two sub-agents of one step both get 350: together they may spend up to twice that."""
    response = _lead(token_budget(450, tree=True), sub_calls=10, parallel=2).run("go")
    state = response.state
    subs = list(state.sub_runs.values())
    assert [s.config.stop_when for s in subs] == [(TokenBudget(350, tree=True),)] * 2
    assert [s.usage.total_tokens for s in subs] == [400, 400]
    assert (state.finish_reason, state.tree_usage.total_tokens) == ("token_budget", 900)
    _exact(state)


@pytest.mark.parametrize("tokens", [90, 100], ids=["over", "exactly"])
def test_a_step_whose_own_model_call_spent_the_budget_starts_no_sub_run(tokens: int) -> None:
    """Nothing is left when the call is made: the error result names the caller, its budget and the tokens used."""
    response = _lead(token_budget(tokens, tree=True), sub_calls=3).run("go")
    state = response.state
    assert _results(response) == [
        "Error: agent 'sub' was not started: its caller, agent 'lead', has spent its "
        f"token_budget={tokens}, tree=True (100 tokens used when this step began)"
    ]
    assert state.sub_runs == {}
    assert (state.finish_reason, state.tree_usage.total_tokens) == ("token_budget", 100)
    _exact(state)


def test_an_async_run_hands_the_budget_down_too() -> None:
    """arun's sub-runs start with the same budget as run's."""
    state = asyncio.run(_lead(token_budget(450, tree=True), sub_calls=10).arun("go")).state
    (sub,) = state.sub_runs.values()
    assert (sub.config.stop_when, sub.finish_reason) == (
        (TokenBudget(350, tree=True),),
        "token_budget",
    )


def test_a_suspended_sub_run_resumes_with_the_budget_it_stored() -> None:
    """Across two approvals (and JSON in between) the sub-run keeps its 150 and stops there."""
    sub = Agent(_worker(10, tool="act"), name="sub", tools=[act])
    lead = Agent(_boss(), tools=[sub.as_tool()], stop_when=[token_budget(250, tree=True)])
    response = lead.run("go")
    while response.pending_approvals:
        state = RunState.from_json(response.state.to_json())
        response = lead.resume(state, approvals={c.id: True for c in state.pending_approvals})
    state = response.state
    (child,) = state.sub_runs.values()
    assert child.config.stop_when == (TokenBudget(150, tree=True),)
    assert (child.finish_reason, child.usage.total_tokens) == ("token_budget", 200)
    assert (state.finish_reason, state.tree_usage.total_tokens) == ("token_budget", 300)
    _exact(state)


def test_a_tool_reads_what_is_left_in_its_run_context() -> None:
    """ctx.token_budget is the budget a sub-run started there would get; None without a tree budget."""
    seen: list[Any] = []

    @toolfold.tool
    def look(ctx: RunContext[None]) -> str:
        """Look."""
        seen.append(ctx.token_budget)
        return "ok"

    for budget in (token_budget(1000, tree=True), token_budget(1000)):
        Agent(
            _boss(tool="look", arguments="{}"), tools=[look], stop_when=[budget], max_steps=2
        ).run("go")
    assert seen == [TokenBudget(900, tree=True), TokenBudget(800, tree=True), None, None]


def test_a_handoff_target_keeps_the_tree_budget() -> None:
    """The budget bounds the run whichever agent it is handed to; the target's config holds it."""
    billing = Agent(_worker(10), name="billing", tools=[t])
    triage = Agent(
        FunctionModel(
            lambda request: toolfold.ModelResponse(
                toolfold.Message.assistant(
                    "", [toolfold.ToolCallPart("h", "transfer_to_billing", "{}")]
                ),
                _SPEND,
            )
        ),
        name="triage",
        handoffs=[billing],
        stop_when=[token_budget(350, tree=True)],
    )
    state = triage.run("go").state
    assert state.agent == "billing"
    assert state.config.stop_when == (TokenBudget(350, tree=True),)
    assert (state.finish_reason, state.usage.total_tokens) == ("token_budget", 400)
    _exact(state)


def test_a_tree_budget_reads_every_step_from_its_state() -> None:
    """handed_budget and open_step: a run with a tree budget builds its step's state; others do not."""
    from toolfold.runtime.core._stop import handed_budget

    response = toolfold.ModelResponse(
        toolfold.Message.assistant("", [toolfold.ToolCallPart("c", "t", "{}")]), _SPEND
    )
    event = toolfold.runtime.ModelResponded(response)
    for budget, fast in ((token_budget(500), True), (token_budget(500, tree=True), False)):
        config = toolfold.runtime.RunConfig(
            tools=[toolfold.runtime.ToolSpec.from_tool(t)], stop_when=[budget]
        )
        start = initial_state("go", config, run_id="r")
        assert isinstance(open_step(start, event), OpenStep) is fast
        left = handed_budget(reduce(start, event))
        assert left == (None if fast else TokenBudget(400, tree=True))


def test_a_tree_budget_round_trips_through_json_and_old_states_load_unchanged() -> None:
    """tree is written only when set; a state written before it loads with tree=False."""
    config = toolfold.runtime.RunConfig(stop_when=[token_budget(5, tree=True), token_budget(7)])
    state = initial_state("go", config, run_id="r")
    data = json.loads(state.to_json())
    assert data["config"]["stop_when"] == [
        {"tokens": 5, "kind": "token_budget", "tree": True},
        {"tokens": 7, "kind": "token_budget"},
    ]
    assert RunState.from_json(state.to_json()) == state
    data["config"]["stop_when"][0]["tree"] = "yes"
    with pytest.raises(toolfold.SerializationError, match="expected true or false, got 'yes'"):
        RunState.from_json(json.dumps(data))


def test_a_tree_budget_refuses_what_is_not_a_flag() -> None:
    """token_budget(n, tree=...) takes True or False, and names the field otherwise."""
    from toolfold.runtime.core._stop import describe_condition

    with pytest.raises(UsageError, match=r"TokenBudget.tree: expected True or False, got 'yes'"):
        token_budget(5, tree="yes")  # type: ignore[arg-type]
    assert describe_condition(token_budget(5, tree=True)) == "token_budget=5, tree=True"


def test_an_agent_file_declares_a_tree_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """{token_budget = n, tree = true} loads as token_budget(n, tree=True) and writes back so."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # (the model is built, never called)
    text = """
[agents.main]
model = "openai:gpt-4o-mini"
stop_when = [{ token_budget = 5000, tree = true }, { token_budget = 90 }]
"""
    agent = loads(text).agent()
    assert agent.stop_when == (token_budget(5000, tree=True), token_budget(90))
    assert agent.to_dict()["agents"]["main"]["stop_when"] == [
        {"token_budget": 5000, "tree": True},
        {"token_budget": 90},
    ]
    bad = text.replace("{ token_budget = 90 }", "{ max_steps = 3, tree = true }")
    with pytest.raises(toolfold.AgentFileError, match=r"stop_when\[1\]\.tree: tree goes with"):
        loads(bad)


def test_a_run_stopped_at_its_tree_budget_resumes_with_it_spent() -> None:
    """A new turn after the stop makes one model call, starts no sub-run, and stops again."""
    lead = _lead(token_budget(450, tree=True), sub_calls=10)
    stopped = RunState.from_json(lead.run("go").state.to_json())
    response = lead.resume(stopped, message="more")
    state = response.state
    assert (state.finish_reason, state.step) == ("token_budget", 2)
    assert len(state.sub_runs) == 1  # the first step's only
    assert _results(response)[-1].startswith("Error: agent 'sub' was not started")
    assert state.tree_usage.total_tokens == 600
    _exact(state)


# `pickle.dumps(TokenBudget(5), protocol=4)` made by toolfold before `tree` existed.
_OLD_PICKLE = (
    b"\x80\x04\x95M\x00\x00\x00\x00\x00\x00\x00\x8c\x10toolfold.runtime\x94\x8c\x0bTokenBudget"
    b"\x94\x93\x94)\x81\x94}\x94(\x8c\x06tokens\x94K\x05\x8c\x04kind\x94\x8c\x0ctoken_budget\x94ub."
)


def test_a_budget_pickled_before_tree_existed_loads_as_the_runs_own() -> None:
    """An old pickle (a Ray object, a cached agent) loads with tree=False; a new one round-trips."""
    import pickle

    old = pickle.loads(_OLD_PICKLE)
    assert (old, old.tree) == (TokenBudget(5), False)
    assert old(initial_state("go", run_id="r")) is False
    budget = token_budget(7, tree=True)
    assert pickle.loads(pickle.dumps(budget)) == budget


def test_a_streamed_run_hands_the_budget_down_too() -> None:
    """A stream's sub-runs (run beside the iteration) start with the same budget as run's."""
    stream = _lead(token_budget(450, tree=True), sub_calls=10).stream("go")
    for _ in stream:
        pass
    state = stream.response.state
    (sub,) = state.sub_runs.values()
    assert (sub.config.stop_when, sub.finish_reason) == (
        (TokenBudget(350, tree=True),),
        "token_budget",
    )
    assert (
        state
        == _lead(token_budget(450, tree=True), sub_calls=10).run("go", run_id=state.run_id).state
    )


def test_a_sub_agent_under_a_tree_budget_keeps_the_model_it_resolved() -> None:
    """Three sub-agent calls with a handed budget resolve the sub-agent's model string once, not per call."""
    from toolfold.testing import override_models

    made: list[str] = []

    def factory(spec: str) -> FunctionModel:
        made.append(spec)
        return _worker(0)

    with override_models(factory):
        sub = Agent("openai:gpt-4o-mini", name="sub")
        lead = Agent(
            _boss(), tools=[sub.as_tool()], stop_when=[token_budget(1000, tree=True)], max_steps=3
        )
        state = lead.run("go").state
    assert made == ["openai:gpt-4o-mini"]
    assert [s.config.stop_when for s in state.sub_runs.values()] == [
        (TokenBudget(900, tree=True),),
        (TokenBudget(700, tree=True),),
        (TokenBudget(500, tree=True),),
    ]


@pytest.mark.parametrize(("tokens", "sub_calls"), [(90, 3), (450, 10)], ids=["spent", "mid-run"])
def test_under_on_tool_error_raise_the_tree_budget_stops_the_run_instead_of_raising(
    tokens: int, sub_calls: int
) -> None:
    """A sub-agent not started, or stopped by the handed budget, is the budget's stop, not a tool failure."""
    sub = Agent(_worker(sub_calls), name="sub", tools=[t])
    lead = Agent(
        _boss(),
        name="lead",
        tools=[sub.as_tool()],
        stop_when=[token_budget(tokens, tree=True)],
        on_tool_error="raise",
    )
    state = lead.run("go").state
    assert state.finish_reason == "token_budget"
    assert [m.tool_results[0].is_error for m in state.messages if m.tool_results] == [True]
    again = lead.resume(state, message="more").state  # one model call, and it stops again
    assert (again.finish_reason, again.usage.requests) == ("token_budget", state.usage.requests + 1)
    _exact(again)


def test_under_on_tool_error_raise_a_sub_agents_own_limit_still_raises() -> None:
    """A sub-agent that stops at its own max_steps under a tree budget is a tool failure, as ever."""
    sub = Agent(_worker(10), name="sub", tools=[t], max_steps=2)
    lead = Agent(
        _boss(),
        tools=[sub.as_tool()],
        stop_when=[token_budget(10_000, tree=True)],
        on_tool_error="raise",
    )
    with pytest.raises(toolfold.ToolExecutionError, match="stopped at its limit max_steps=2"):
        lead.run("go")


@toolfold.tool
def deploy() -> str:
    """Deploy."""
    raise RuntimeError("service 'db' was not started: missing DATABASE_URL")


@pytest.mark.parametrize("tokens", [90, 1000], ids=["spent", "left"])
def test_under_on_tool_error_raise_a_plain_tool_failing_in_a_spent_step_still_raises(
    tokens: int,
) -> None:
    """A plain tool's error that reads like a sub-agent not started is a tool failure, spent budget or not."""
    lead = Agent(
        _boss(tool="deploy", arguments="{}"),
        name="lead",
        tools=[deploy],
        stop_when=[token_budget(tokens, tree=True)],
        on_tool_error="raise",
    )
    with pytest.raises(toolfold.ToolExecutionError, match=r"tool 'deploy' failed.*was not started"):
        lead.run("go")


def test_under_on_tool_error_raise_a_failing_output_function_on_a_budget_stop_raises() -> None:
    """An as_tool(output=...) function that fails on a sub-agent stopped at the handed budget is a tool failure."""

    def summary(response: Any) -> str:
        return str(response.output["summary"])  # no output: the sub-agent stopped

    sub = Agent(_worker(10), name="sub", tools=[t])
    lead = Agent(
        _boss(),
        name="lead",
        tools=[sub.as_tool(output=summary)],
        stop_when=[token_budget(450, tree=True)],
        on_tool_error="raise",
    )
    with pytest.raises(toolfold.ToolExecutionError, match="output= function of tool 'sub' failed"):
        lead.run("go")


def test_a_long_run_under_a_tree_budget_reads_each_sub_run_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """40 steps of one sub-agent call each read the sub-runs' usage O(steps) times, not once per step each."""
    reads: list[str | None] = []
    tree_usage = RunState.tree_usage

    def counted(state: RunState) -> toolfold.Usage:
        reads.append(state.agent)
        return tree_usage.fget(state)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(RunState, "tree_usage", property(counted))
    lead = _lead(token_budget(10**9, tree=True), sub_calls=0)
    state = lead.evolve(max_steps=40).run("go").state
    assert (state.finish_reason, len(state.sub_runs)) == ("max_steps", 40)
    assert reads.count("sub") <= 3 * 40  # (a rescan of the log at every step read 1600)


def test_a_log_fold_resumes_from_the_version_it_was_appended_to() -> None:
    """Log.folded folds each item once across appended versions, and a fork folds its own items."""
    from toolfold.runtime.core._log import Log

    seen: list[int] = []

    def add(total: int, item: int) -> int:
        seen.append(item)
        return total + item

    base = Log([1, 2])
    assert base.folded(add, 0) == 3
    grown = base.append(3).append(4)
    assert (grown.folded(add, 0), grown.folded(add, 0)) == (10, 10)
    fork = base.append(30)  # (a fork of base after grown took its buffer)
    assert fork.folded(add, 0) == 33
    assert seen == [1, 2, 3, 4, 30]


def _scanned_step_start(state: RunState) -> float:
    """`step_start_tokens` as a scan of the whole log sums it, step by step in log order."""
    done = since_answer = 0.0
    for event in state.log:
        if event.kind in ("model_responded", "handed_off"):
            done, since_answer = done + since_answer, 0.0
        elif event.kind == "tool_returned" and event.child is not None:
            since_answer += event.child.tree_usage.total_tokens
        elif event.kind == "attempt_dropped":
            done += event.sub_run_usage.total_tokens
    return state.usage.total_tokens + done


def test_float_counts_give_the_step_start_tokens_a_scan_of_the_log_gives() -> None:
    """A custom model's float counts sum, in the fold, in the order a scan of the log sums them."""
    spends = [
        toolfold.Usage(0.1, 0.2, requests=1),
        toolfold.Usage(0.7, 0.3, requests=1),
        toolfold.Usage(1e16, 1.0, requests=1),
        toolfold.Usage(0.3, 0.6, requests=1),
    ]

    def worker(request: Any) -> Any:
        return toolfold.ModelResponse(toolfold.Message.assistant("worked"), spends[1])

    def boss(request: Any) -> Any:
        step = sum(1 for m in request.messages if m.role == "assistant")
        parts = [toolfold.ToolCallPart(f"b{step}_{i}", "sub", '{"input": "go"}') for i in range(3)]
        return toolfold.ModelResponse(toolfold.Message.assistant("", parts), spends[step % 4])

    seen: list[RunState] = []
    sub = Agent(FunctionModel(worker), name="sub")
    lead = Agent(
        FunctionModel(boss),
        name="lead",
        tools=[sub.as_tool()],
        stop_when=[token_budget(10**17, tree=True), lambda s: seen.append(s) or False],
        max_steps=5,
    )
    lead.run("go")
    assert [step_start_tokens(s) for s in seen] == [_scanned_step_start(s) for s in seen]
    assert len(seen) == 4


# --- a workflow used as a tool ------------------------------------------------


def _flow_lead(flow: Any, tokens: int = 450, **options: Any) -> Agent:
    """A lead that calls the workflow ``flow`` (as tool 'flow') every step, under a tree budget."""
    return Agent(
        _boss(tool="flow"),
        name="lead",
        tools=[flow.as_tool(name="flow")],
        stop_when=[token_budget(tokens, tree=True)],
        max_steps=8,
        **options,
    )


def _ran(lead: Agent, how: str) -> Any:
    if how == "run":
        return lead.run("go")
    if how == "arun":
        return asyncio.run(lead.arun("go"))
    stream = lead.stream("go")
    for _ in stream:
        pass
    return stream.response


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
def test_a_workflow_used_as_a_tool_hands_the_budget_to_its_step(how: str) -> None:
    """The workflow and its step agent start with 450 - 100; the step stops there, and so does the workflow."""
    flow = toolfold.Sequence(Agent(_worker(10), name="a", tools=[t]), name="flow")
    response = _ran(_flow_lead(flow), how)
    state = response.state
    (run,) = state.sub_runs.values()
    (step,) = run.sub_runs.values()
    assert run.config.stop_when == step.config.stop_when == (TokenBudget(350, tree=True),)
    assert (step.finish_reason, step.step, step.usage.total_tokens) == ("token_budget", 4, 400)
    assert (run.phase, run.finish_reason) == ("finished", "token_budget")
    assert _results(response) == [
        "Error: workflow 'flow' stopped at its limit token_budget=350, tree=True (400 tokens "
        "used, 400 of them by its sub-runs) after 1 model call without answering"
    ]
    assert (state.finish_reason, state.step, state.tree_usage.total_tokens) == (
        "token_budget",
        1,
        500,
    )
    _exact(state)


def test_each_step_of_a_sequence_gets_what_is_left_when_it_begins() -> None:
    """The first step answers within its 350 (300 spent); the second starts with 50 and stops there."""
    first = Agent(_worker(2), name="a", tools=[t])
    flow = toolfold.Sequence(first, Agent(_worker(10), name="b", tools=[t]), name="flow")
    state = _flow_lead(flow).run("go").state
    (run,) = state.sub_runs.values()
    steps = list(run.sub_runs.values())
    assert [s.config.stop_when for s in steps] == [
        (TokenBudget(350, tree=True),),
        (TokenBudget(50, tree=True),),
    ]
    assert [(s.finish_reason, s.usage.total_tokens) for s in steps] == [
        ("stop", 300),
        ("token_budget", 100),
    ]
    assert (run.finish_reason, state.finish_reason) == ("token_budget", "token_budget")
    _exact(state)


def test_parallel_branches_each_get_what_was_left_when_their_step_began() -> None:
    """Both branches of a Parallel start with 350 and stop there: the documented bound of k times it."""
    branches = [Agent(_worker(10), name=n, tools=[t]) for n in ("a", "b")]
    state = _flow_lead(toolfold.Parallel(*branches, name="flow")).run("go").state
    (run,) = state.sub_runs.values()
    steps = list(run.sub_runs.values())
    assert [s.config.stop_when for s in steps] == [(TokenBudget(350, tree=True),)] * 2
    assert [(s.finish_reason, s.usage.total_tokens) for s in steps] == [("token_budget", 400)] * 2
    assert (run.finish_reason, state.tree_usage.total_tokens) == ("token_budget", 900)
    _exact(state)


def test_the_budget_goes_down_a_workflow_inside_a_workflow() -> None:
    """A workflow step of the workflow gets the budget too, and hands it to its own step."""
    inner = toolfold.Sequence(Agent(_worker(10), name="a", tools=[t]), name="inner")
    state = _flow_lead(toolfold.Sequence(inner, name="flow")).run("go").state
    (run,) = state.sub_runs.values()
    (nested,) = run.sub_runs.values()
    (step,) = nested.sub_runs.values()
    assert nested.config.stop_when == step.config.stop_when == (TokenBudget(350, tree=True),)
    finished = [s.finish_reason for s in (step, nested, run, state)]
    assert finished == ["token_budget"] * 4
    _exact(state)


def test_a_workflow_stopped_at_the_handed_budget_is_no_failure_under_raise() -> None:
    """on_tool_error="raise": the lead stops at its budget instead of raising ToolExecutionError."""
    flow = toolfold.Sequence(Agent(_worker(10), name="a", tools=[t]), name="flow")
    state = _flow_lead(flow, on_tool_error="raise").run("go").state
    (run,) = state.sub_runs.values()
    assert (run.finish_reason, state.finish_reason) == ("token_budget", "token_budget")


def test_a_workflow_suspended_in_a_step_resumes_with_the_budget_it_stored() -> None:
    """After an approval (and JSON), the workflow keeps its 700; its next step gets 700 - 200."""
    asks = Agent(_worker(1, tool="act"), name="asks", tools=[act])
    flow = toolfold.Sequence(asks, Agent(_worker(10), name="b", tools=[t]), name="flow")
    lead = _flow_lead(flow, tokens=800)
    response = lead.run("go")
    assert response.state.phase == "awaiting_approval"
    state = RunState.from_json(response.state.to_json())
    response = lead.resume(state, approvals={c.id: True for c in state.pending_approvals})
    state = response.state
    (run,) = state.sub_runs.values()
    steps = list(run.sub_runs.values())
    assert run.config.stop_when == (TokenBudget(700, tree=True),)
    assert [s.config.stop_when for s in steps] == [
        (TokenBudget(700, tree=True),),
        (TokenBudget(500, tree=True),),
    ]
    assert [(s.finish_reason, s.usage.total_tokens) for s in steps] == [
        ("stop", 200),
        ("token_budget", 500),
    ]
    _exact(state)


def test_a_workflow_run_on_its_own_gives_its_steps_no_budget() -> None:
    """Without a caller's tree budget a workflow's steps run as they always did."""
    flow = toolfold.Sequence(Agent(_worker(2), name="a", tools=[t]), name="flow")
    state = flow.run("go").state
    (step,) = state.sub_runs.values()
    assert state.config.stop_when == step.config.stop_when == ()
    assert (state.finish_reason, step.usage.total_tokens) == ("stop", 300)


def test_an_agents_sub_agent_stopped_at_the_budget_still_counts_as_its_tools_failure() -> None:
    """max_retries=0 on the sub-agent's tool: the lead fails as before (recorded runs replay unchanged)."""
    sub = Agent(_worker(10), name="sub", tools=[t])
    tool = sub.as_tool().replace(max_retries=0)
    lead = Agent(_boss(), tools=[tool], stop_when=[token_budget(450, tree=True)], max_steps=8)
    with pytest.raises(toolfold.ToolRetriesExceededError) as caught:
        lead.run("go")
    state = caught.value.state
    assert state.error is not None
    assert (state.phase, state.error.kind) == ("failed", "tool_retries_exceeded")
    _exact(state)


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
@pytest.mark.parametrize(("tokens", "calls"), [(450, 3), (200, 0)])
def test_a_workflow_hands_back_the_answer_of_a_step_that_spent_its_budget(
    how: str, tokens: int, calls: int
) -> None:
    """A step that answers past (or exactly at) the budget it was handed: the workflow answers with it."""
    flow = toolfold.Sequence(Agent(_worker(calls), name="a", tools=[t]), name="flow")
    response = _ran(_flow_lead(flow, tokens=tokens), how)
    state = response.state
    (run,) = state.sub_runs.values()
    (step,) = run.sub_runs.values()
    assert step.finish_reason == "stop"
    assert (run.finish_reason, run.output) == ("stop", "worked")
    assert _results(response) == ["worked"]
    assert state.finish_reason == "token_budget"
    _exact(state)


def _route() -> toolfold.Route:
    """A Route whose router answers the label 'worked' past the 350 it is handed."""
    router = Agent(_worker(3), name="router", tools=[t])
    return toolfold.Route(router, {"worked": Agent(_worker(0), name="b")}, name="flow")


@pytest.mark.parametrize("how", ["run", "stream"])
def test_a_workflow_starts_no_step_once_its_budget_is_spent(how: str) -> None:
    """A Route's router answers past the 350 it was handed: its branch never starts, the workflow stops."""
    response = _ran(_flow_lead(_route()), how)
    state = response.state
    (run,) = state.sub_runs.values()
    assert [s.agent for s in run.sub_runs.values()] == ["router"]
    assert (run.phase, run.finish_reason, run.step, run.output) == (
        "finished",
        "token_budget",
        1,
        None,
    )
    assert _results(response) == [
        "Error: workflow 'flow' stopped at its limit token_budget=350, tree=True (400 tokens "
        "used, 400 of them by its sub-runs) after 1 model call without answering"
    ]
    _exact(state)


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
def test_a_sequence_stopped_by_its_budget_answers_with_its_last_steps_output(how: str) -> None:
    """Sequence(a, b): 'a' answers past the 350 it was handed, so 'b' never starts and the sequence answers with a's output."""
    first = Agent(_worker(3), name="a", tools=[t])
    flow = toolfold.Sequence(first, Agent(_worker(0), name="b"), name="flow")
    response = _ran(_flow_lead(flow), how)
    state = response.state
    (run,) = state.sub_runs.values()
    assert [s.agent for s in run.sub_runs.values()] == ["a"]
    assert (run.phase, run.finish_reason, run.step, run.output) == ("finished", "stop", 2, "worked")
    assert _results(response)[0] == "worked"
    assert state.finish_reason == "token_budget"
    _exact(state)


def test_a_sequence_with_no_step_answered_has_no_answer_to_give_at_its_budget() -> None:
    """Sequence.spent_answer: None before any step answered or when each was skipped, else the last output."""
    from toolfold.runtime._planner import Attempt, Final, first_plan

    skips = toolfold.Task(Agent(_worker(0), name="a"), on_error="skip")
    flow = toolfold.Sequence(
        skips, Agent(_worker(0), name="b"), Agent(_worker(0), name="c"), name="flow"
    )
    plan = first_plan("go", {})
    assert flow.spent_answer(plan) is None
    failed = plan.extended([Attempt("a", "a", False, "boom")])
    assert flow.spent_answer(failed) is None
    answered = failed.extended([Attempt("b", "b", True, {"done": False})])
    assert flow.spent_answer(answered) == Final({"done": False})


@toolfold.tool
def boom() -> str:
    """Boom."""
    raise RuntimeError("b's tool broke")


def _fails(request: Any) -> Any:
    """Calls 'boom' in every step, each call costing 150 + 150 tokens."""
    part = toolfold.ToolCallPart("x0", "boom", "{}")
    usage = toolfold.Usage(150, 150, requests=1)
    return toolfold.ModelResponse(toolfold.Message.assistant("", [part]), usage)


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
def test_a_sequence_whose_step_waits_for_its_retry_at_its_budget_stops_without_answering(
    how: str,
) -> None:
    """Sequence(a, Task(b, retry)): b fails past the budget, its retry never starts, and a's output is no answer."""
    b = Agent(FunctionModel(_fails), name="b", tools=[boom], on_tool_error="raise")
    flow = toolfold.Sequence(
        Agent(_worker(0), name="a"), toolfold.Task(b, on_error="retry", retries=2), name="flow"
    )
    response = _ran(_flow_lead(flow), how)
    state = response.state
    (run,) = state.sub_runs.values()
    assert [s.agent for s in run.sub_runs.values()] == ["a", "b"]
    assert (run.phase, run.finish_reason, run.output) == ("finished", "token_budget", None)
    assert _results(response)[0].startswith("Error: workflow 'flow' stopped at its limit")
    _exact(state)


def test_a_sequence_has_no_answer_at_its_budget_while_a_step_waits_for_its_retry() -> None:
    """Sequence.spent_answer: None once the step after an answered one failed and is to be retried."""
    from toolfold.runtime._planner import Attempt, Final, first_plan

    retried = toolfold.Task(Agent(_worker(0), name="b"), on_error="retry", retries=2)
    flow = toolfold.Sequence(Agent(_worker(0), name="a"), retried, name="flow")
    answered = first_plan("go", {}).extended([Attempt("a", "a", True, "from a")])
    assert flow.spent_answer(answered) == Final("from a")
    assert flow.spent_answer(answered.extended([Attempt("b", "b", False, "boom")])) is None


@attrs.frozen
class _Report:
    title: str
    score: int


def test_a_sequence_answers_at_its_budget_only_with_an_output_of_its_own_type() -> None:
    """Sequence(a: str, b: Report) stopped before b: no str answer where a Report is declared, the run stops."""
    seen: list[tuple[str | None, Any]] = []

    def out(response: Any) -> str:
        seen.append((response.finish_reason, response.output))
        return "read"

    first = Agent(_worker(3), name="a", tools=[t])
    flow = toolfold.Sequence(first, Agent(_worker(0), name="b", output_type=_Report), name="flow")
    lead = Agent(
        _boss(tool="flow"),
        name="lead",
        tools=[flow.as_tool(name="flow", output=out)],
        stop_when=[token_budget(450, tree=True)],
        max_steps=8,
    )
    state = lead.run("go").state
    (run,) = state.sub_runs.values()
    assert (run.phase, run.finish_reason, run.output) == ("finished", "token_budget", None)
    assert seen == [("token_budget", None)]
    _exact(state)


def test_a_sequence_answers_at_its_budget_with_an_earlier_step_of_its_own_type() -> None:
    """Sequence.spent_answer: an earlier step giving the sequence's output type answers, another type does not."""
    from toolfold.runtime._planner import Attempt, Final, first_plan

    answered = first_plan("go", {}).extended([Attempt("a", "a", True, "from a")])
    same = toolfold.Sequence(Agent(_worker(0), name="a"), Agent(_worker(0), name="b"))
    assert same.spent_answer(answered) == Final("from a")
    typed = toolfold.Sequence(
        Agent(_worker(0), name="a"), Agent(_worker(0), name="b", output_type=_Report)
    )
    assert typed.spent_answer(answered) is None


@pytest.mark.parametrize("mode", ["return", "raise"])
def test_a_parallel_branch_stopped_at_its_budget_keeps_its_siblings_approval(mode: str) -> None:
    """Parallel(asks, b): 'asks' waits for an approval, 'b' stops at its 700: the approval waits, no failure."""
    asks = Agent(_worker(1, tool="act"), name="asks", tools=[act])
    flow = toolfold.Parallel(asks, Agent(_worker(10), name="b", tools=[t]), name="flow")
    lead = _flow_lead(flow, tokens=800, on_tool_error=mode)
    response = lead.run("go")
    state = response.state
    (run,) = state.sub_runs.values()
    assert (state.phase, run.phase, run.error) == ("awaiting_approval", "awaiting_approval", None)
    assert len(state.pending_approvals) == 1
    _exact(state)
    approvals = {c.id: True for c in state.pending_approvals}
    state = lead.resume(RunState.from_json(state.to_json()), approvals=approvals).state
    (run,) = state.sub_runs.values()
    assert (run.phase, run.finish_reason, run.error) == ("finished", "token_budget", None)
    assert state.finish_reason == "token_budget"
    _exact(state)


def test_a_streamed_workflow_stopped_before_a_step_shows_no_step_it_never_took() -> None:
    """Streamed: the workflow's steps started are the steps it ended (no start for the decision it stopped)."""
    from toolfold import StepEndEvent, StepStartEvent, SubRunEvent

    stream = _flow_lead(_route()).stream("go")
    seen = [e.event for e in stream if isinstance(e, SubRunEvent) and len(e.path) == 2]
    starts = [e.step for e in seen if isinstance(e, StepStartEvent)]
    ends = [e.step.index for e in seen if isinstance(e, StepEndEvent)]
    assert starts == ends == [1]
    (run,) = stream.response.state.sub_runs.values()
    assert (run.finish_reason, run.step) == ("token_budget", 1)


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
@pytest.mark.parametrize(("until", "reason"), [(None, "stop"), (lambda _: False, "max_iterations")])
def test_a_loop_stopped_by_its_budget_answers_with_its_last_output(
    how: str, until: Any, reason: str
) -> None:
    """A Loop whose next iteration would start past its budget answers with its last iteration's output."""
    flow = toolfold.Loop(
        Agent(_worker(0), name="body"), until=until, max_iterations=10, name="flow"
    )
    response = _ran(_flow_lead(flow), how)
    state = response.state
    (run,) = state.sub_runs.values()
    assert [s.output for s in run.sub_runs.values()] == ["worked"] * 4
    assert (run.phase, run.finish_reason, run.output) == ("finished", reason, "worked")
    assert _results(response)[0] == "worked"
    _exact(state)


def test_a_loop_with_no_iteration_answered_has_no_answer_to_give_at_its_budget() -> None:
    """Loop.spent_answer: None before any iteration answered or when each was skipped, else the last output."""
    from toolfold.runtime._planner import Attempt, Final, first_plan

    body = toolfold.Task(Agent(_worker(0), name="body"), on_error="skip")
    flow = toolfold.Loop(body, until=lambda _: False, max_iterations=10, name="flow")
    plan = first_plan("go", {})
    assert flow.spent_answer(plan) is None
    failed = plan.extended([Attempt("body.1", "body", False, "boom")])
    assert flow.spent_answer(failed) is None
    answered = failed.extended([Attempt("body.2", "body", True, {"done": False})])
    assert flow.spent_answer(answered) == Final({"done": False}, reason="max_iterations")


def test_a_loop_has_no_answer_at_its_budget_while_an_iteration_waits_for_its_retry() -> None:
    """Loop.spent_answer: None once the iteration after an answered one failed and is to be retried."""
    from toolfold.runtime._planner import Attempt, Final, first_plan

    body = toolfold.Task(Agent(_worker(0), name="body"), on_error="retry", retries=2)
    flow = toolfold.Loop(body, max_iterations=10, name="flow")
    answered = first_plan("go", {}).extended([Attempt("body.1", "body", True, "first")])
    assert flow.spent_answer(answered) == Final("first")
    assert flow.spent_answer(answered.extended([Attempt("body.2", "body", False, "boom")])) is None


@pytest.mark.parametrize("kind", ["agent", "workflow"])
@pytest.mark.parametrize("blocking", [True, False])
@pytest.mark.parametrize("tokens", [0, -5])
def test_a_workflow_step_handed_a_spent_budget_is_not_started(
    kind: str, blocking: bool, tokens: int
) -> None:
    """A workflow step's tool (blocking or async) called with none of the tree budget left
    answers that its agent or workflow was not started, asking no model."""
    asked: list[Any] = []
    agent = Agent(FunctionModel(lambda request: asked.append(request) or "x"), name="sub")
    target = agent if kind == "agent" else toolfold.Sequence(agent, name="flow")
    task = Task(target, name="step")
    ctx: RunContext[Any] = RunContext(
        deps=None,
        run_id="r",
        step=1,
        call_id="c",
        tool_name="step",
        token_budget=TokenBudget(tokens, tree=True),
        _spent="the workflow spent it",
    )
    if blocking:
        result = _run_runner_sync(task)(ctx, "go")
    else:
        result = asyncio.run(_run_runner(task)(ctx, "go"))
    who = "agent 'sub'" if kind == "agent" else "workflow 'flow'"
    assert (result.state, result.is_error, result.content) == (
        None,
        True,
        f"Error: {who} (tool 'step') was not started: the workflow spent it",
    )
    assert asked == []


def _handing(tools: Any = ()) -> Agent:
    """``research``, which hands every run to ``writer`` (a worker that never answers in time)."""
    writer = Agent(_worker(10), name="writer", tools=[t])
    transfer = toolfold.ToolCallPart("h", "transfer_to_writer", "{}")
    return Agent(
        FunctionModel(
            lambda request: toolfold.ModelResponse(
                toolfold.Message.assistant("", [transfer]), _SPEND
            )
        ),
        name="research",
        handoffs=[writer],
        max_steps=20,
    )


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
@pytest.mark.parametrize("on_tool_error", ["return", "raise"])
def test_a_sub_run_handed_on_names_the_agent_that_ran_over_the_budget(
    how: str, on_tool_error: Any
) -> None:
    """A sub-agent that hands its run to another agent, which spends the tree budget: the
    call's error names the run the call started and the agent it was handed to, the calls
    and tokens being the whole run's, and the caller stops there."""
    lead = Agent(
        _boss(tool="ask"),
        name="lead",
        tools=[_handing().as_tool(name="ask")],
        stop_when=[token_budget(450, tree=True)],
        max_steps=8,
        on_tool_error=on_tool_error,
    )
    if how == "run":
        response = lead.run("go")
    elif how == "arun":
        response = asyncio.run(lead.arun("go"))
    else:
        stream = lead.stream("go")
        for _ in stream:
            pass
        response = stream.response
    state = response.state
    (sub,) = state.sub_runs.values()
    assert (sub.agent, sub.finish_reason) == ("writer", "token_budget")
    assert _results(response) == [
        "Error: the run of agent 'research' (tool 'ask'), handed to agent 'writer', stopped at "
        "its limit token_budget=350, tree=True (400 tokens used, 0 of them by its sub-runs) "
        "after 4 model calls without answering"
    ]
    assert (state.finish_reason, state.tree_usage.total_tokens) == ("token_budget", 500)
    _exact(state)


def test_a_result_naming_the_agent_a_handed_sub_run_started_with_is_still_the_budgets_stop() -> (
    None
):
    """A result recorded before the handed agent was named (a durable run's replay) still reads
    as the tree budget's stop under on_tool_error="raise", not as a tool failure."""
    from toolfold.runtime.drive._failures import budget_stopped, stopped_content

    lead = Agent(
        _boss(tool="ask"),
        name="lead",
        tools=[_handing().as_tool(name="ask")],
        stop_when=[token_budget(450, tree=True)],
        max_steps=8,
    )
    state = lead.run("go").state
    (sub,) = state.sub_runs.values()
    before = replay(state.log[:-1])  # the step before its result
    who = "agent 'research' (tool 'ask')"
    old = stopped_content(sub, who, names_handed=lambda: False)[0]
    assert old.startswith("Error: agent 'research' (tool 'ask') stopped at its limit")
    assert budget_stopped(before, sub, old, who=who)
    assert budget_stopped(before, sub, stopped_content(sub, who)[0], who=who)
    assert not budget_stopped(before, sub, "Error: something else", who=who)
