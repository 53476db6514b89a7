"""The effect's identity reaches the tool: `RunContext.idempotency_key` and friends."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from toolfold import (
    Agent,
    RunContext,
    RunState,
    Sequence,
    UsageError,
    agenerate_text,
    generate_text,
    tool,
)
from toolfold.runtime import (
    Event,
    Message,
    RunTools,
    ToolReturned,
    UserMessageAdded,
    fork,
    initial_state,
    next_effect,
    reduce,
    replay,
)
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


class Crash(BaseException):
    """Stands for the process dying in the middle of a tool call."""


def _charge_tool(seen: list[RunContext[Any]], crash_first: bool = False, **options: Any) -> Any:
    @tool(**options)
    def charge(ctx: RunContext[Any], amount: int) -> str:
        """Charge an amount.

        Args:
            amount: How much.
        """
        seen.append(ctx)
        if crash_first and len(seen) == 1:
            raise Crash
        return "charged"

    return charge


def test_each_call_gets_its_own_key_and_identity() -> None:
    """Two calls of a step and a call of the next step see distinct keys, ``run:step:index``."""
    seen: list[RunContext[Any]] = []
    model = ScriptedModel(
        [
            [call("charge", {"amount": 1}), call("charge", {"amount": 2})],
            call("charge", {"amount": 3}),
            "done",
        ]
    )
    response = Agent(model, tools=[_charge_tool(seen)]).run("go", run_id="run7")
    assert response.text == "done"
    identities = [(c.idempotency_key, c.run_id, c.step, c.tool_name) for c in seen]
    assert sorted(identities) == [
        ("run7:1:0", "run7", 1, "charge"),
        ("run7:1:1", "run7", 1, "charge"),
        ("run7:2:0", "run7", 2, "charge"),
    ]
    calls = {c.id: c for step in response.steps for c in step.tool_calls}
    assert sorted(calls) == sorted(c.call_id for c in seen)


def test_a_call_run_again_after_a_crash_sees_the_same_key() -> None:
    """A run rebuilt from its event log after a crash re-runs the call under the same key."""
    seen: list[RunContext[Any]] = []
    log: list[Event] = []  # what a durable store keeps: every event, as it happens
    agent = Agent(
        ScriptedModel([call("charge", {"amount": 5}), "done"]),
        tools=[_charge_tool(seen, crash_first=True)],
    )
    with pytest.raises(Crash):
        agent.run("go", run_id="r1", on_event=log.append)
    stored = RunState.from_json(replay(log).to_json())  # another process loads it
    effect = next_effect(stored)
    assert isinstance(effect, RunTools)
    assert agent.resume(stored).text == "done"
    assert [c.idempotency_key for c in seen] == ["r1:1:0", "r1:1:0"] == [effect.calls[0].key] * 2
    assert seen[0] == seen[1]


def test_a_resumed_approval_sees_the_key_of_its_call() -> None:
    """Resuming the same suspended state twice runs the approved call under one key."""
    seen: list[RunContext[Any]] = []
    agent = Agent(
        ScriptedModel([call("charge", {"amount": 5}), "done", "done"]),
        tools=[_charge_tool(seen, requires_approval=True)],
    )
    suspended = agent.run("go", run_id="r2").state
    (pending,) = suspended.pending_approvals
    for _ in range(2):
        agent.resume(suspended, approvals={pending.id: True})
    assert [(c.idempotency_key, c.call_id) for c in seen] == [("r2:1:0", pending.id)] * 2


_SAVED = Path(__file__).parent / "saved"


def _refund_tool(seen: list[RunContext[Any]]) -> Any:
    @tool
    def refund(ctx: RunContext[Any], amount: int) -> str:
        """Refund an amount.

        Args:
            amount: How much.
        """
        seen.append(ctx)
        return "refunded"

    return refund


def test_a_conversation_continued_with_history_gets_new_keys() -> None:
    """Runs continued with ``history=`` under one run id count on, as ``resume(message=)`` does.

    Before, every run's first call was ``conv-1:1:0``: a payment API keyed by it
    dropped the second and third charges.
    """
    seen: list[RunContext[Any]] = []
    charge = _charge_tool(seen)
    first = generate_text(
        ScriptedModel([call("charge", {"amount": 5}), "Done."]),
        "charge 5",
        tools=[charge],
        run_id="conv-1",
    )
    second = generate_text(
        ScriptedModel([[call("charge", {"amount": 7}), call("charge", {"amount": 8})], "Done."]),
        [*first.messages, {"role": "user", "content": "charge 7 and 8"}],
        tools=[charge],
        run_id="conv-1",
    )
    agent = Agent(ScriptedModel([call("charge", {"amount": 9}), "Done."]), tools=[charge])
    agent.run("charge 9", history=second.messages, run_id="conv-1")
    # (sorted: the two calls of one step run concurrently, in threads)
    assert sorted((c.idempotency_key, c.step) for c in seen) == [
        ("conv-1:1:0", 1),  # a first run: the key it always had
        ("conv-1:3:0", 1),  # two model responses in its history
        ("conv-1:3:1", 1),
        ("conv-1:5:0", 1),
    ]
    # The same keys as one run resumed with each message.
    resumed: list[RunContext[Any]] = []
    script = [call("charge", {"amount": 5}), "Done."]
    script += [[call("charge", {"amount": 7}), call("charge", {"amount": 8})], "Done."]
    agent = Agent(ScriptedModel([*script, call("charge", {"amount": 9}), "Done."]))
    agent = agent.evolve(tools=[_charge_tool(resumed)])
    state = agent.run("charge 5", run_id="conv-1").state
    state = agent.resume(state, message="charge 7 and 8").state
    agent.resume(state, message="charge 9")
    assert sorted(c.idempotency_key for c in resumed) == sorted(c.idempotency_key for c in seen)


def test_a_first_run_and_a_history_without_answers_keep_their_keys() -> None:
    """No model response in the history (a system message, a prompt): ``run:step:index``."""
    seen: list[RunContext[Any]] = []
    model = ScriptedModel([call("charge", {"amount": 1}), call("charge", {"amount": 2}), "done"])
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    state = Agent(model, tools=[_charge_tool(seen)]).run("go", history=history, run_id="r").state
    assert [c.idempotency_key for c in seen] == ["r:1:0", "r:2:0"]
    assert '"earlier_steps"' not in state.to_json()  # its log reads as it always did


def test_a_continued_run_keeps_its_keys_when_saved_and_resumed() -> None:
    """A continued run's count is in its log: loaded elsewhere, its calls keep their keys."""
    seen: list[RunContext[Any]] = []
    agent = Agent(
        ScriptedModel(["Hello.", call("charge", {"amount": 7}), "done"]),
        tools=[_charge_tool(seen, requires_approval=True)],
    )
    history = agent.run("hi", run_id="conv-1").messages
    suspended = agent.run("charge 7", history=history, run_id="conv-1").state
    stored = RunState.from_json(suspended.to_json())
    (pending,) = stored.pending_approvals
    agent.resume(stored, approvals={pending.id: True})
    assert [c.idempotency_key for c in seen] == ["conv-1:2:0"]


def test_a_state_saved_before_keys_counted_on_keeps_its_approved_calls_key() -> None:
    """A continued run saved waiting for approval by a toolfold that keyed it ``conv-1:1:0`` keeps it.

    Made by saved/history_keys.md: the key is what the caller may already hold.
    """
    seen: list[RunContext[Any]] = []
    agent = Agent(ScriptedModel(["done"]), tools=[_charge_tool(seen, requires_approval=True)])
    text = (_SAVED / "history_awaiting_approval_a118ac55.json").read_text()
    stored = RunState.from_json(text)
    (pending,) = stored.pending_approvals
    assert agent.resume(stored, approvals={pending.id: True}).text == "done"
    assert [c.idempotency_key for c in seen] == ["conv-1:1:0"]
    assert RunState.from_json(stored.to_json()).to_json() == stored.to_json()


def test_a_state_saved_before_keys_counted_on_runs_its_cut_call_again_under_its_key() -> None:
    """A continued run saved by that toolfold while its tool ran runs it again as ``conv-1:1:0``."""
    stored = RunState.from_json((_SAVED / "history_crashed_mid_step_a118ac55.json").read_text())
    effect = next_effect(stored)
    assert isinstance(effect, RunTools)
    assert [c.key for c in effect.calls] == ["conv-1:1:0"]
    seen: list[RunContext[Any]] = []
    agent = Agent(ScriptedModel(["done"]), tools=[_refund_tool(seen)])
    assert agent.resume(stored).text == "done"
    assert [c.idempotency_key for c in seen] == ["conv-1:1:0"]


def test_a_continued_runs_model_requests_get_new_keys_too() -> None:
    """A continued run's model request key (Temporal's `StreamContext.key`) counts on as its calls' do.

    Before, its first request was keyed ``conv-1:1:model`` again, the first
    run's: a stream subscriber dropping what an earlier attempt of a key sent
    dropped the new answer.
    """
    agent = Agent(ScriptedModel(["Hello.", "Again."]))
    first = agent.run("hi", run_id="conv-1")
    assert next_effect(initial_state("hi", run_id="conv-1")).key == "conv-1:1:model"
    messages = [*first.messages, Message.user("more")]
    continued = initial_state(messages, run_id="conv-1")
    assert next_effect(continued).key == "conv-1:2:model"  # as resume(message="more") keys it
    stored = RunState.from_json(first.state.to_json())
    resumed = reduce(stored, UserMessageAdded(Message.user("more")))
    assert next_effect(resumed).key == "conv-1:2:model"


def test_a_state_saved_before_keys_counted_on_keeps_its_model_request_keys() -> None:
    """A continued run saved by a toolfold that did not count asks the model as ``conv-1:2:model``."""
    stored = RunState.from_json((_SAVED / "history_crashed_mid_step_a118ac55.json").read_text())
    (cut,) = stored.calls
    answered = reduce(stored, ToolReturned(cut.call.id, "refunded"))
    assert next_effect(answered).key == "conv-1:2:model"


def test_tool_call_id_names_the_call_like_call_id() -> None:
    """`ctx.tool_call_id` is the model's call id, as `ctx.call_id` is."""
    from toolfold import generate_text, tool
    from toolfold.testing import ScriptedModel

    seen: list[tuple[str, str]] = []

    @tool
    def note(ctx: RunContext, text: str) -> str:
        """Note a text.

        Args:
            text: The text.
        """
        seen.append((ctx.tool_call_id, ctx.call_id))
        return text

    model = ScriptedModel([ScriptedModel.call("note", {"text": "x"}, id="call_9"), "ok"])
    generate_text(model, "go", tools=[note])
    assert seen == [("call_9", "call_9")]


def _empty_run_id_calls(model: ScriptedModel, charge: Any) -> list[Any]:
    """Every way a run is started with ``run_id=""``."""
    agent = Agent(model, tools=[charge])
    flow = Sequence(Agent(model, name="step", tools=[charge]), name="flow")
    return [
        lambda: agent.run("go", run_id=""),
        lambda: asyncio.run(agent.arun("go", run_id="")),
        lambda: list(agent.stream("go", run_id="")),
        lambda: generate_text(model, "go", tools=[charge], run_id=""),
        lambda: asyncio.run(agenerate_text(model, "go", tools=[charge], run_id="")),
        lambda: flow.run("go", run_id=""),
        lambda: asyncio.run(flow.arun("go", run_id="")),
        lambda: list(flow.stream("go", run_id="")),
    ]


def test_an_empty_run_id_is_refused_not_replaced_by_a_random_one() -> None:
    """run_id="" (an id built from an empty key) is a UsageError, not a random id and keys."""
    seen: list[RunContext[Any]] = []
    model = ScriptedModel([call("charge", {"amount": 5}), "done"])
    for attempt in _empty_run_id_calls(model, _charge_tool(seen)):
        with pytest.raises(UsageError, match=r"^run_id='' is empty: .*idempotency keys"):
            attempt()
    assert (seen, model.requests) == ([], [])


def test_fork_refuses_an_empty_run_id() -> None:
    """fork(state, run_id="") is refused: every such fork's keys would be ``:<step>:<index>``."""
    seen: list[RunContext[Any]] = []
    state = Agent(ScriptedModel(["done"]), tools=[_charge_tool(seen)]).run("go").state
    with pytest.raises(UsageError) as raised:
        fork(state, step=0, run_id="")
    # (one wording with a run's, `empty_run_id`: it said the keys' shape only for a run)
    assert str(raised.value) == (
        "fork(): run_id='' is empty: the fork's id begins its tool calls' idempotency keys "
        "(<run id>:<step>:<index>); give a non-empty id, or leave run_id out (None) to keep "
        "the run's"
    )


@pytest.mark.parametrize("run_id", [0, False, 12])
def test_a_run_id_that_is_no_text_is_named_where_it_was_given(run_id: object) -> None:
    """run_id=0 reads "run_id must be a str", naming no function the caller never called."""
    model = ScriptedModel(["done"])
    with pytest.raises(UsageError, match=rf"^run_id must be a str, got \w+ {run_id!r}$"):
        Agent(model).run("go", run_id=run_id)  # type: ignore[arg-type]
    assert model.requests == []


@pytest.mark.parametrize("earlier", [-1, 1.5, "2", True])
def test_a_run_started_with_a_count_that_is_no_count_is_refused(earlier: object) -> None:
    """``RunStarted.earlier_steps`` must be an int >= 0: anything else is refused, named."""
    from toolfold import InvalidEventError
    from toolfold.runtime import RunConfig, RunStarted, reduce
    from toolfold.runtime.core._reducer import blank_state

    event = RunStarted("r", RunConfig(), (), earlier_steps=earlier)  # type: ignore[arg-type]
    with pytest.raises(InvalidEventError, match=r"earlier_steps must be an int >= 0, got "):
        reduce(blank_state(), event)
