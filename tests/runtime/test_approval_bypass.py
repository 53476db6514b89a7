"""Approvals cannot be bypassed: every way around one is refused with a clear error, the tool never run."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, NoReturn

import pytest

import toolfold
from toolfold import (
    Agent,
    InvalidEventError,
    ProviderError,
    RunError,
    RunState,
    SerializationError,
    UsageError,
    tool,
)
from toolfold.runtime import ApprovalGranted, ToolResultsProvided, reduce
from toolfold.runtime.core._keys import fingerprint_matches
from toolfold.runtime.core._messages import ToolResultPart
from toolfold.testing import FunctionModel, ScriptedModel

RAN: list[str] = []


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    RAN.append(path)
    return "deleted"


def _waiting(call_id: str = "a-1") -> tuple[Agent, RunState]:
    RAN.clear()
    model = ScriptedModel([ScriptedModel.call("delete", {"path": "/"}, id=call_id), "done"])
    agent = Agent(model, tools=[delete])
    first = agent.run("go")
    assert first.finish_reason == "approval_required"
    return agent, first.state


def test_an_approval_for_an_unknown_call_is_refused() -> None:
    """An approval naming a call id the run never made is an InvalidEventError; the state is untouched."""
    agent, state = _waiting()
    before = state.to_json()
    with pytest.raises(InvalidEventError, match="no tool call 'nope'") as caught:
        agent.resume(state, approvals={"nope": True})
    assert caught.value.state is not None
    assert state.to_json() == before
    assert RAN == []


def test_an_approval_for_a_call_of_another_run_is_refused() -> None:
    """Run B cannot be resumed with the id of run A's pending call."""
    _, run_a = _waiting("a-1")
    agent_b, run_b = _waiting("b-1")
    assert run_a.run_id != run_b.run_id
    with pytest.raises(InvalidEventError, match="no tool call 'a-1'"):
        agent_b.resume(run_b, approvals={run_a.calls[0].call.id: True})
    assert RAN == []


def test_an_approval_replayed_twice_is_refused() -> None:
    """Once approved and run, the same approval again is refused and the tool does not run twice."""
    agent, state = _waiting()
    done = agent.resume(state, approvals={"a-1": True})
    assert done.text == "done"
    assert RAN == ["/"]
    with pytest.raises(RunError, match="approval_granted"):
        agent.resume(done.state, approvals={"a-1": True})
    approved = reduce(state, ApprovalGranted("a-1"))
    with pytest.raises(InvalidEventError, match="a-1"):
        reduce(approved, ApprovalGranted("a-1"))
    assert RAN == ["/"]


def test_an_approval_given_again_says_the_call_was_answered() -> None:
    """An approval (or a denial) given again, by id or by bound key, to the finished run, to a
    stale state that went on (the tool ran, the model is next) or to one waiting for a later
    call, says the call was already answered and what waits, not the reducer's phase table;
    nothing runs and the state is untouched."""
    agent, state = _waiting()
    key = toolfold.approval_key(state, "a-1")
    done = agent.resume(state, approvals={key: True})
    assert RAN == ["/"]

    def down(request: object) -> NoReturn:
        raise ProviderError("the provider is down")

    with pytest.raises(ProviderError) as stopped:  # (the tool ran: the model is next)
        Agent(FunctionModel(down), tools=[delete]).resume(state, approvals={"a-1": True})
    went_on = toolfold.state_of(stopped.value)
    assert went_on is not None
    assert went_on.phase == "awaiting_model"
    RAN.clear()
    said = "approvals=: call 'a-1' (delete) was already answered; nothing waits for an approval"
    for answered, phase in ((done.state, "finished"), (went_on, "awaiting_model")):
        before = answered.to_json()
        for answer_key, decision in ((key, True), ("a-1", True), ("a-1", False)):
            with pytest.raises(InvalidEventError) as refused:
                agent.resume(answered, approvals={answer_key: decision})
            assert str(refused.value).endswith(said)
            assert refused.value.phase == phase
            assert refused.value.event == ("approval_granted" if decision else "approval_denied")
        assert answered.to_json() == before
    again = ScriptedModel.call("delete", {"path": "/tmp"}, id="a-2")
    agent = Agent(
        ScriptedModel([ScriptedModel.call("delete", {"path": "/"}, id="a-1"), again]),
        tools=[delete],
    )
    second = agent.resume(agent.run("go").state, approvals={"a-1": True}).state
    assert [c.id for c in second.pending_approvals] == ["a-2"]
    with pytest.raises(InvalidEventError) as refused:
        agent.resume(second, approvals={"a-1": True})
    assert str(refused.value).endswith(
        "approvals=: call 'a-1' (delete) was already answered; waiting for an approval: "
        "'a-2' (delete)"
    )
    assert RAN == ["/"]


def test_a_bound_key_of_another_run_given_to_an_answered_call_says_so() -> None:
    """A bound key made for another run's call of the same id, given to a run whose call was
    answered (it finished, or waits for a later call), says it was made for another call, as
    a waiting run says it, not that the call was already answered; the call's own key, made
    while it waited, is still told it was answered."""
    agent, state = _waiting()
    other = Agent(
        ScriptedModel([ScriptedModel.call("delete", {"path": "/etc"}, id="a-1")]), tools=[delete]
    ).run("go", run_id="another")
    foreign = toolfold.approval_key(other.state, "a-1")
    own = toolfold.approval_key(state, "a-1")
    done = agent.resume(state, approvals={own: True}).state
    RAN.clear()
    with pytest.raises(UsageError, match=r"was made for another call than this state's call 'a-1'"):
        agent.resume(done, approvals={foreign: True})
    with pytest.raises(InvalidEventError, match="call 'a-1' \\(delete\\) was already answered"):
        agent.resume(done, approvals={own: True})
    again = ScriptedModel.call("delete", {"path": "/tmp"}, id="a-2")
    two = Agent(
        ScriptedModel([ScriptedModel.call("delete", {"path": "/"}, id="a-1"), again]),
        tools=[delete],
    )
    second = two.resume(two.run("go").state, approvals={"a-1": True}).state
    with pytest.raises(UsageError, match=r"was made for another call than this state's call 'a-1'"):
        two.resume(second, approvals={foreign: True})
    assert RAN == ["/"]
    with pytest.raises(UsageError) as told:  # (what waits is said, not "nothing waits")
        two.resume(second, approvals={foreign: True})
    assert str(told.value).endswith("waiting for an approval: 'a-2' (delete)")
    with pytest.raises(UsageError) as told:
        agent.resume(done, approvals={foreign: True})
    assert str(told.value).endswith("nothing of this run waits for an approval")


def test_an_approval_key_without_floats_is_checked_with_one_text(monkeypatch: Any) -> None:
    """Checking a key against a call whose arguments hold no float that counts by value
    writes the arguments once, as written (its by-value text is the same), whether it
    matches or not: huge arguments cost 4x more with a by-value copy and both texts."""
    from toolfold.runtime.core import _serialize

    _, state = _waiting()
    key = toolfold.approval_key(state, "a-1")
    written: list[bool] = []
    canonical = _serialize.canonical_json

    def counted(value: Any, *, by_value: bool = True) -> bytes:
        written.append(by_value)
        return canonical(value, by_value=by_value)

    monkeypatch.setattr(_serialize, "canonical_json", counted)
    call = state.calls[0]
    assert fingerprint_matches(state, (), call, key.split("#")[1])
    assert not fingerprint_matches(state, (), call, "0" * 32)
    assert written == [False, False]  # (one text each, as written: no by-value copy)


def test_a_result_for_a_call_awaiting_approval_is_refused() -> None:
    """A caller cannot answer an approval-gated call with a result of its own."""
    agent, state = _waiting()
    with pytest.raises(InvalidEventError, match="awaits approval"):
        reduce(state, ToolResultsProvided((ToolResultPart("a-1", "delete", "deleted"),)))
    with pytest.raises(RunError):
        agent.resume(state, tool_results={"a-1": "deleted"})
    assert RAN == []


def _edit_status(data: dict[str, Any]) -> None:
    data["phase"] = "running_tools"
    data["calls"][0]["status"] = "to_run"


def _edit_result(data: dict[str, Any]) -> None:
    data["calls"][0]["status"] = "done"
    data["calls"][0]["outcome"] = "ok"
    data["calls"][0]["result"] = {
        "call_id": "a-1",
        "tool_name": "delete",
        "content": "deleted",
        "is_error": False,
        "kind": "tool_result",
    }


def _edit_log(data: dict[str, Any]) -> None:
    data["log"].append({"call_id": "a-1", "kind": "approval_granted"})


def _edit_arguments(data: dict[str, Any]) -> None:
    data["calls"][0]["call"]["arguments"] = {"path": "/etc"}
    data["calls"][0]["call"]["arguments_text"] = '{"path": "/etc"}'


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (_edit_status, r"@ \$\.calls\[0\]\.status"),
        (_edit_result, r"@ \$\.calls\[0\]\.result"),
        (_edit_log, r"@ \$\.calls\[0\]\.status"),
        (_edit_arguments, r"@ \$\.calls\[0\]\.call\.arguments"),
    ],
)
def test_a_state_edited_around_an_approval_does_not_load(
    edit: Callable[[dict[str, Any]], None], says: str
) -> None:
    """Marking a call approved, giving it a result, logging an approval alone or changing its arguments: refused."""
    _, state = _waiting()
    data = json.loads(state.to_json())
    edit(data)
    with pytest.raises(SerializationError, match=says):
        RunState.from_json(json.dumps(data))
    assert RAN == []


def test_a_sub_run_edited_around_its_approval_does_not_load() -> None:
    """A nested sub-run marked to run in both places it is stored is refused against its own log."""
    RAN.clear()
    files = Agent(
        ScriptedModel([ScriptedModel.call("delete", {"path": "/"}), "gone"]),
        name="files",
        tools=[delete],
    )
    lead = Agent(
        ScriptedModel([ScriptedModel.call("files", {"input": "rm"}), "done"]),
        tools=[files.as_tool()],
    )
    document = json.loads(lead.run("go").state.to_json())
    (where,) = [i for i, e in enumerate(document["log"]) if e.get("child")]
    for child in (document["calls"][0]["child"], document["log"][where]["child"]):
        assert child["calls"][0]["status"] == "awaiting_approval"
        child["calls"][0]["status"] = "to_run"
    with pytest.raises(SerializationError, match=rf"\$\.log\[{where}\]\.child\.calls\[0\]\.status"):
        RunState.from_json(json.dumps(document))
    assert RAN == []


def _waiting_with(path: str, call_id: str = "same-1", steps: int = 0) -> tuple[Agent, RunState]:
    """A run whose model asks to delete ``path`` with ``call_id`` after ``steps`` plain tool calls."""
    before = [ScriptedModel.call("lookup", {"path": path}, id=f"look-{i}") for i in range(steps)]
    model = ScriptedModel(
        [*before, ScriptedModel.call("delete", {"path": path}, id=call_id), "done"]
    )
    agent = Agent(model, tools=[delete, lookup])
    first = agent.run("go")
    assert first.finish_reason == "approval_required"
    return agent, first.state


@tool
def lookup(path: str) -> str:
    """Look a path up.

    Args:
        path: The path.
    """
    return "there"


def test_a_bound_approval_key_of_another_run_with_the_same_call_id_is_refused() -> None:
    """Ids alone cannot tell two runs apart whose models made the same call id (a test double,
    a synthetic id, a hostile server): `approval_key` binds the approval to its run, step,
    tool and arguments, and `resume` refuses it for any other state, running nothing."""
    RAN.clear()
    _, shown = _waiting_with("/tmp/x")
    agent, other = _waiting_with("/")
    assert shown.pending_approvals[0].id == other.pending_approvals[0].id == "same-1"
    key = toolfold.approval_key(shown, "same-1")
    assert re.fullmatch(r"same-1#[0-9a-f]{32}", key)
    before = other.to_json()
    with pytest.raises(
        UsageError, match="was made for another call than this state's call 'same-1'"
    ):
        agent.resume(other, approvals={key: True})
    assert other.to_json() == before
    assert RAN == []
    # The same arguments in another run: still another run.
    _, twin = _waiting_with("/tmp/x")
    with pytest.raises(UsageError, match="another run, another step or other arguments"):
        agent.resume(twin, approvals={key: True})
    assert RAN == []
    # The state it was made from: it approves, as the plain id does.
    done = agent.resume(shown, approvals={key: True})
    assert done.text == "done"
    assert RAN == ["/tmp/x"]


def test_a_bound_approval_key_binds_the_step() -> None:
    """The same call id at another step of a run (here another run's, as a stored state
    cannot be edited to another run's id: `from_json` replays it) refuses the key."""
    RAN.clear()
    agent, shown = _waiting_with("/tmp/x")
    key = toolfold.approval_key(shown, "same-1")
    _, other_step = _waiting_with("/tmp/x", steps=1)
    with pytest.raises(UsageError, match="was made for another call"):
        agent.resume(other_step, approvals={toolfold.approval_key(shown, "same-1"): True})
    # Rewriting the key's fingerprint for the other state is what approval_key does there:
    assert toolfold.approval_key(other_step, "same-1") != key
    assert RAN == []


def test_approval_key_refuses_a_call_that_does_not_await_approval_and_keys_are_not_mixed() -> None:
    """No key is made for a call that waits for nothing; one call answered by its plain id and
    its bound key at once is refused as answering it twice."""
    agent, state = _waiting_with("/")
    with pytest.raises(UsageError, match="no call 'nope' awaits approval"):
        toolfold.approval_key(state, "nope")
    key = toolfold.approval_key(state, "same-1")
    with pytest.raises(UsageError, match="answers call 'same-1' twice"):
        agent.resume(state, approvals={"same-1": True, key: True})


def test_a_call_named_like_a_bound_key_is_approved_by_its_own_key_only() -> None:
    """A model may name its call anything, even like a key made for another call that leaked
    through a page: a key of the bound form is always read as one, so such a key never
    approves that call (nothing runs); the call's own `approval_key` does."""
    RAN.clear()
    _, shown = _waiting_with("/tmp/x", call_id="call_1")
    leaked = toolfold.approval_key(shown, "call_1")
    agent, hostile = _waiting_with("/", call_id=leaked)
    with pytest.raises(InvalidEventError, match="no tool call 'call_1'"):
        agent.resume(hostile, approvals={leaked: True})
    assert RAN == []
    done = agent.resume(hostile, approvals={toolfold.approval_key(hostile, leaked): True})
    assert done.text == "done"
    assert RAN == ["/"]


def test_a_bound_key_binds_the_arguments_the_tool_gets() -> None:
    """A stored state edited in its call's decoded arguments only (unsigned, the argument text
    left as it was) no longer matches the key made before the edit: nothing runs."""
    RAN.clear()
    agent, shown = _waiting_with("/tmp/x")
    key = toolfold.approval_key(shown, "same-1")
    data = json.loads(shown.to_json())
    text = json.dumps(data).replace('"path": "/tmp/x"', '"path": "/"')
    edited = RunState.from_json(text)
    assert edited.pending_approvals[0].arguments == {"path": "/"}
    assert edited.pending_approvals[0].arguments_text == shown.pending_approvals[0].arguments_text
    with pytest.raises(UsageError, match="was made for another call"):
        agent.resume(edited, approvals={key: True})
    assert RAN == []


def test_a_bound_key_for_a_sub_runs_call_binds_each_step_down_to_it() -> None:
    """The lead asks its helper agent twice with the same call id, and the helper asks for the
    same deletion each time: the key given at the lead's first step does not approve the
    second (every run on the way counts with its step), so it runs once."""
    RAN.clear()
    helper = Agent(
        ScriptedModel(
            [
                ScriptedModel.call("delete", {"path": "/tmp/x"}, id="d"),
                "ok",
                ScriptedModel.call("delete", {"path": "/tmp/x"}, id="d"),
                "ok",
            ]
        ),
        tools=[delete],
        name="helper",
    )
    again = ScriptedModel.call("helper", {"input": "clean"}, id="h")
    lead = Agent(ScriptedModel([again, again, "done"]), tools=[helper.as_tool()])
    first = lead.run("go")
    key = toolfold.approval_key(first.state, "d")
    second = lead.resume(first.state, approvals={key: True})
    assert second.finish_reason == "approval_required"
    assert RAN == ["/tmp/x"]
    with pytest.raises(UsageError, match="was made for another call"):
        lead.resume(second.state, approvals={key: True})
    assert RAN == ["/tmp/x"]
    done = lead.resume(second.state, approvals={toolfold.approval_key(second.state, "d"): True})
    assert done.text == "done"
    assert RAN == ["/tmp/x", "/tmp/x"]
