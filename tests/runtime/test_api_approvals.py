"""Approvals: suspend, approve, deny; a model can never execute an approval tool unapproved."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolfold
from toolfold import (
    Agent,
    Denied,
    InvalidTransitionError,
    Message,
    ModelResponse,
    RunError,
    ToolCallPart,
    ToolRetriesExceededError,
    UsageError,
    tool,
)
from toolfold.runtime import ModelResponded, initial_state, reduce
from toolfold.runtime._run import make_options
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


def _make_tools(ran: list[str]) -> list[Any]:
    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file to delete.
        """
        ran.append(path)
        return f"deleted {path}"

    @tool(requires_approval=lambda c, state: c.arguments.get("amount", 0) > 100)
    def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: How much.
        """
        ran.append(f"pay {amount}")
        return "paid"

    @tool
    def read(path: str) -> str:
        """Read a file.

        Args:
            path: The file.
        """
        ran.append(f"read {path}")
        return "contents"

    return [delete_file, pay, read]


def test_run_suspends_and_approval_runs_the_call() -> None:
    """An approval tool suspends the run; approving it runs the call and the loop goes on."""
    ran: list[str] = []
    model = ScriptedModel([call("delete_file", {"path": "a.txt"}), "Deleted."])
    agent = Agent(model, tools=_make_tools(ran))
    first = agent.run("delete a.txt")
    assert first.finish_reason == "approval_required"
    (pending,) = first.pending_approvals
    assert pending.arguments == {"path": "a.txt"}
    assert ran == []
    done = agent.resume(first.state, approvals={pending.id: True})
    assert ran == ["a.txt"]
    assert done.text == "Deleted."


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (False, "The user denied this tool call."),
        (Denied("not today"), "denied this tool call: not today"),
    ],
)
def test_denied_call_gets_an_error_result_the_model_sees(decision: Any, expected: str) -> None:
    """A denied call never runs; the model sees an error result with the reason."""
    ran: list[str] = []
    model = ScriptedModel([call("delete_file", {"path": "a.txt"}), "OK, I won't."])
    agent = Agent(model, tools=_make_tools(ran))
    first = agent.run("delete a.txt")
    done = agent.resume(first.state, approvals={first.pending_approvals[0].id: decision})
    assert ran == []
    (result,) = [r for m in model.requests[1].messages for r in m.tool_results]
    assert result.is_error
    assert expected in result.content
    assert done.text == "OK, I won't."


def test_predicate_decides_per_call() -> None:
    """A predicate over the call asks for approval only when it holds."""
    ran: list[str] = []
    model = ScriptedModel([[call("pay", {"amount": 5}), call("pay", {"amount": 500})], "paid"])
    agent = Agent(model, tools=_make_tools(ran))
    first = agent.run("pay")
    assert ran == ["pay 5"]  # calls that need no approval run first; the step then waits
    assert [c.arguments for c in first.pending_approvals] == [{"amount": 500}]
    agent.resume(first.state, approvals={first.pending_approvals[0].id: True})
    assert ran == ["pay 5", "pay 500"]


def test_failing_predicate_asks_for_approval() -> None:
    """A predicate that raises cannot vouch for the call: it waits for an approval."""

    def broken(c: Any, state: Any) -> bool:
        raise RuntimeError("bug")

    @tool(requires_approval=broken)
    def act() -> str:
        """Acts."""
        return "done"

    response = Agent(ScriptedModel([call("act")]), tools=[act]).run("go")
    assert response.finish_reason == "approval_required"


def test_approval_for_unknown_call_is_a_clear_error() -> None:
    """Approving a call id the run does not wait for names the problem."""
    agent = Agent(ScriptedModel([call("delete_file", {"path": "a"})]), tools=_make_tools([]))
    first = agent.run("go")
    with pytest.raises(RunError, match="no tool call 'nope'"):
        agent.resume(first.state, approvals={"nope": True})
    with pytest.raises(UsageError, match="must be True, False or Denied"):
        agent.resume(first.state, approvals={first.pending_approvals[0].id: "yes"})  # type: ignore[dict-item]
    bound = toolfold.approval_key(first.state, first.pending_approvals[0].id)
    for wrong in ("yes", Denied(5)):  # (named by the key given: another call may share its id)
        with pytest.raises(UsageError, match=f"approval for call {bound!r}"):
            agent.resume(first.state, approvals={bound: wrong})  # type: ignore[dict-item]


def test_answers_that_are_not_a_mapping_of_call_ids_are_a_clear_error() -> None:
    """A list of ids, or a key that is not an id, is a UsageError (it was AttributeError/TypeError)."""
    ran: list[str] = []
    agent = Agent(ScriptedModel([call("delete_file", {"path": "a"})]), tools=_make_tools(ran))
    first = agent.run("go")
    waiting = first.pending_approvals[0].id
    with pytest.raises(UsageError, match="approvals= maps call ids to answers, got list"):
        agent.resume(first.state, approvals=[waiting])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="tool_results= is keyed by call ids"):
        agent.resume(first.state, tool_results={1: "x"})  # type: ignore[dict-item]
    assert ran == []


def test_resuming_without_answers_keeps_waiting() -> None:
    """Resuming with no approval leaves the run suspended; the tool never runs."""
    ran: list[str] = []
    agent = Agent(ScriptedModel([call("delete_file", {"path": "a"})]), tools=_make_tools(ran))
    first = agent.run("go")
    again = agent.resume(first.state)
    assert again.finish_reason == "approval_required"
    assert ran == []


def test_core_refuses_execute_for_an_approval_tool() -> None:
    """Even a forged event cannot make an always-approve tool execute without approval."""
    options = make_options(ScriptedModel([]), tools=_make_tools([]))
    state = initial_state("go", options.config, run_id="r")
    forged = ModelResponded(
        ModelResponse(
            Message.assistant(
                "", [ToolCallPart("c1", "delete_file", '{"path": "x"}', {"path": "x"})]
            )
        ),
        ("execute",),
    )
    with pytest.raises(InvalidTransitionError, match="requires approval"):
        reduce(state, forged)


_calls = st.lists(
    st.tuples(
        st.sampled_from(["delete_file", "pay", "read", "unknown"]),
        st.integers(min_value=0, max_value=300),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_calls, min_size=1, max_size=4), st.lists(st.booleans(), min_size=12, max_size=12))
def test_no_execution_without_an_approval_event(
    script: list[list[tuple[str, int]]], decisions: list[bool]
) -> None:
    """Whatever the model calls and the user decides, an approval tool runs only after ApprovalGranted."""
    ran: list[str] = []
    entries: list[Any] = []
    for step in script:
        entries.append(
            [call(name, {"amount": n} if name == "pay" else {"path": f"p{n}"}) for name, n in step]
        )
    entries.append("end")
    agent = Agent(ScriptedModel(entries), tools=_make_tools(ran), max_steps=10)
    answers = iter(decisions)
    try:
        response = agent.run("go")
        while response.finish_reason == "approval_required":
            approvals = {c.id: next(answers, False) for c in response.pending_approvals}
            response = agent.resume(response.state, approvals=approvals)
        state = response.state
    except ToolRetriesExceededError as exc:  # repeated unknown-tool calls
        state = exc.state
    granted = {e.call_id for e in state.events if e.kind == "approval_granted"}
    for event in state.events:
        if event.kind != "model_responded":
            continue
        for c in event.response.tool_calls:
            needs = c.name == "delete_file" or (c.name == "pay" and c.arguments["amount"] > 100)
            executed = any(e.kind == "tool_returned" and e.call_id == c.id for e in state.events)
            if needs and executed:
                assert c.id in granted
    deletes = [r for r in ran if not r.startswith(("read", "pay"))]
    assert len(deletes) <= len(granted)


def test_observer_sees_the_approval_events_of_a_resume() -> None:
    """on_event passed to resume sees the approval decision and what follows."""
    agent = Agent(ScriptedModel([call("delete_file", {"path": "a"}), "ok"]), tools=_make_tools([]))
    first = agent.run("go")
    kinds: list[str] = []
    agent.resume(
        first.state,
        approvals={first.pending_approvals[0].id: True},
        on_event=lambda e: kinds.append(e.kind),
    )
    assert kinds == ["approval_granted", "tool_returned", "model_responded"]
