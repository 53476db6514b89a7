"""Agents as tools: the sub-run nests in the caller's state, and suspends, resumes and replays with it."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import toolfold
from toolfold import Agent, Denied, RunContext, UsageError
from toolfold.runtime import RunState, replay
from toolfold.testing import FunctionModel, ScriptedModel


class Unit(enum.Enum):
    """A unit, sent as its value."""

    CELSIUS = "celsius"


@dataclasses.dataclass
class TimedQuery:
    """An input with an enum, a datetime and a set."""

    unit: Unit
    at: datetime.datetime
    cities: frozenset[str]


TREE_MODULE = textwrap.dedent(
    '''
    """Three agents, each calling the next as a tool; the bottom one needs an approval."""
    from toolfold import Agent, tool
    from toolfold.testing import FunctionModel, ScriptedModel

    LOG = []

    @tool
    def lookup(path: str) -> str:
        """Look a file up.

        Args:
            path: The file.
        """
        LOG.append(("lookup", path))
        return f"{path} is 3 kB"

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        LOG.append(("delete", path))
        return f"deleted {path}"

    def delegate(name, **arguments):
        def reply(request):
            last = request.messages[-1]
            if last.role == "tool":
                return f"{name} said: " + " / ".join(r.content for r in last.tool_results)
            if name == "files":
                return [ScriptedModel.call("lookup", {"path": "a.txt"}),
                        ScriptedModel.call("delete", {"path": "a.txt"})]
            return ScriptedModel.call(name, {"input": "clean " + last.text})
        return FunctionModel(reply)

    def make_top():
        bottom = Agent(delegate("files"), name="bottom", tools=[lookup, delete])
        mid = Agent(delegate("bottom"), name="mid", tools=[bottom.as_tool()])
        return Agent(delegate("mid"), name="top", tools=[mid.as_tool()])
    '''
)

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from tree_agents import LOG, make_top
    from toolfold import Denied
    from toolfold.runtime import RunState

    payload = json.loads(sys.stdin.read())
    state = RunState.from_json(payload["state"])
    decision = True if payload["decision"] == "yes" else Denied(payload["decision"])
    response = make_top().resume(state, approvals={payload["call_id"]: decision})
    print(json.dumps({"text": response.text, "log": LOG, "reason": response.finish_reason,
                      "requests": response.usage.requests, "state": response.state.to_json()}))
    """
)


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Any]:
    (tmp_path / "tree_agents.py").write_text(TREE_MODULE, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    import tree_agents  # type: ignore[import-not-found]

    yield tree_agents
    sys.path.remove(str(tmp_path))
    sys.modules.pop("tree_agents", None)


def _resume_elsewhere(tree: Any, state: RunState, call_id: str, decision: str) -> dict[str, Any]:
    folder = str(Path(tree.__file__).parent)
    payload = {"state": state.to_json(), "call_id": call_id, "decision": decision}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, folder],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_nested_approval_three_deep_suspends_the_top_run(tree: Any) -> None:
    """An approval asked two agents down suspends the top run and is listed at the top."""
    response = tree.make_top().run("the disk")
    assert response.finish_reason == "approval_required"
    assert [c.name for c in response.pending_approvals] == ["delete"]
    assert tree.LOG == [("lookup", "a.txt")]
    mid_run = response.state.calls[0].child
    assert mid_run is not None
    assert mid_run.calls[0].status == "suspended"
    assert mid_run.calls[0].child.phase == "awaiting_approval"
    assert response.usage.requests == 3  # one model call per level so far


def test_nested_approval_resumed_from_json_in_another_process(tree: Any) -> None:
    """The suspended tree travels as JSON; another process approves and finishes it, running nothing twice."""
    response = tree.make_top().run("the disk")
    call_id = response.pending_approvals[0].id
    out = _resume_elsewhere(tree, response.state, call_id, "yes")
    assert out["log"] == [["delete", "a.txt"]]  # lookup ran in the first process only
    assert out["reason"] == "stop"
    assert out["text"] == ("mid said: bottom said: files said: a.txt is 3 kB / deleted a.txt")
    assert out["requests"] == 6
    final = RunState.from_json(out["state"])
    assert replay(final.log) == final
    (mid_run,) = final.sub_runs.values()
    (bottom_run,) = mid_run.sub_runs.values()
    assert bottom_run.phase == "finished"
    assert bottom_run.usage.requests == 2


def test_nested_denial_reaches_the_bottom_model(tree: Any) -> None:
    """A denial given at the top is the bottom model's error result; the tool never runs."""
    top = tree.make_top()
    suspended = top.run("the disk")
    call_id = suspended.pending_approvals[0].id
    done = top.resume(suspended.state, approvals={call_id: Denied("keep it")})
    assert done.finish_reason == "stop"
    assert ("delete", "a.txt") not in tree.LOG
    assert "denied this tool call: keep it" in done.text


def test_tree_round_trips_and_replays(tree: Any) -> None:
    """A suspended and a finished tree both survive JSON exactly and replay from their logs."""
    top = tree.make_top()
    suspended = top.run("the disk")
    assert RunState.from_json(suspended.state.to_json()) == suspended.state
    assert replay(suspended.state.log) == suspended.state
    done = top.resume(suspended.state, approvals={suspended.pending_approvals[0].id: True})
    assert RunState.from_json(done.state.to_json()) == done.state
    assert replay(done.state.log) == done.state


def test_sub_agent_result_is_its_text_and_its_run_is_on_the_record() -> None:
    """The caller's model sees the sub-agent's answer; the sub-run is on the step's call record."""
    helper = Agent(ScriptedModel(["forty-two"]), name="helper")
    lead = Agent(
        ScriptedModel([ScriptedModel.call("helper", {"input": "the answer?"}), "It is 42."]),
        tools=[helper.as_tool(description="Knows answers.")],
    )
    response = lead.run("ask the helper")
    assert response.text == "It is 42."
    assert response.messages[-2].tool_results[0].content == "forty-two"
    ((call_id, child),) = response.state.sub_runs.items()
    assert call_id == response.steps[0].tool_calls[0].id
    assert child.messages[0].text == "the answer?"
    assert child.run_id == f"{response.run_id}/{call_id}"
    assert response.usage.requests == 3
    assert response.state.usage.requests == 2


def test_structured_sub_agent_answers_json() -> None:
    """A sub-agent with an output type hands its caller the structured value as JSON."""

    @attrs.frozen
    class Verdict:
        ok: bool
        reason: str

    judge = Agent(
        ScriptedModel(['{"ok": true, "reason": "fine"}']), name="judge", output_type=Verdict
    )
    lead = Agent(
        ScriptedModel([ScriptedModel.call("judge", {"input": "is it fine?"}), "done"]),
        tools=[judge.as_tool()],
    )
    response = lead.run("judge it")
    assert json.loads(response.messages[-2].tool_results[0].content) == {
        "ok": True,
        "reason": "fine",
    }


def test_object_input_reaches_the_sub_agent_as_json() -> None:
    """An attrs input_type gives the tool that object's schema and the sub-agent JSON text."""

    @attrs.frozen
    class Query:
        city: str
        days: int

    seen: list[str] = []

    def reply(request: Any) -> str:
        seen.append(request.messages[-1].text)
        return "sunny"

    forecaster = Agent(FunctionModel(reply), name="forecast")
    as_tool = forecaster.as_tool(input_type=Query)
    schema = json.dumps(as_tool.parameters)
    assert "city" in schema
    assert "days" in schema
    lead = Agent(
        ScriptedModel(
            [ScriptedModel.call("forecast", {"input": {"city": "Oslo", "days": 2}}), "ok"]
        ),
        tools=[as_tool],
    )
    lead.run("weather?")
    assert json.loads(seen[0]) == {"city": "Oslo", "days": 2}


def test_object_input_reaches_the_sub_agent_as_the_json_the_model_wrote() -> None:
    """Enums, datetimes and sets in an input_type are JSON as in its schema, not Python reprs."""
    seen: list[str] = []
    forecaster = Agent(FunctionModel(lambda r: seen.append(r.messages[-1].text) or "ok"), name="fc")
    arguments = {"unit": "celsius", "at": "2024-05-01T10:00:00", "cities": ["Oslo"]}
    lead = Agent(
        ScriptedModel([ScriptedModel.call("fc", {"input": arguments}), "ok"]),
        tools=[forecaster.as_tool(input_type=TimedQuery)],
    )
    lead.run("weather?")
    assert json.loads(seen[0]) == arguments


def test_manual_call_two_deep_is_answered_at_the_top() -> None:
    """A call a sub-agent returns to its caller is answered by id at the top, and the tree goes on."""
    inner = Agent(
        ScriptedModel([ScriptedModel.call("ask_human", {"question": "ok?"}), "human said yes"]),
        name="inner",
        auto_execute_tools=False,
    )
    top = Agent(
        ScriptedModel([ScriptedModel.call("inner", {"input": "check"}), "all good"]),
        tools=[inner.as_tool()],
    )
    suspended = top.run("go")
    assert suspended.finish_reason == "tool_calls"
    (manual,) = suspended.tool_calls
    assert manual.name == "ask_human"
    loaded = RunState.from_json(suspended.state.to_json())
    done = top.resume(loaded, tool_results={manual.id: "yes"})
    assert done.text == "all good"
    assert done.messages[-2].tool_results[0].content == "human said yes"


def test_arun_drives_the_tree_too(tree: Any) -> None:
    """The async API suspends and resumes the same tree."""
    top = tree.make_top()

    async def main() -> str:
        suspended = await top.arun("the disk")
        approvals = {c.id: True for c in suspended.pending_approvals}
        return (await top.aresume(suspended.state, approvals=approvals)).text

    assert asyncio.run(main()).endswith("deleted a.txt")


def test_as_tool_needs_a_name() -> None:
    """An unnamed agent cannot become a tool without name=."""
    with pytest.raises(UsageError, match="needs a name"):
        Agent(ScriptedModel(["x"])).as_tool()


def test_an_empty_tool_name_is_refused_not_replaced() -> None:
    """as_tool(name="") and Handoff(name="") are invalid tool names, not 'use the default'."""
    from toolfold import Handoff, ToolDefinitionError

    helper = Agent(ScriptedModel(["hi"]), name="helper")
    with pytest.raises(ToolDefinitionError, match="tool name '' is invalid"):
        helper.as_tool(name="")
    with pytest.raises(ToolDefinitionError, match="tool name '' is invalid"):
        Agent(ScriptedModel(["x"]), name="lead", handoffs=[Handoff(helper, name="")])


def test_a_bad_as_tool_or_handoff_option_names_the_agent_or_workflow() -> None:
    """The error names what as_tool() or Handoff was given, not a function made inside."""
    from toolfold import Handoff, Sequence, ToolDefinitionError

    helper = Agent(ScriptedModel(["hi"]), name="helper")
    with pytest.raises(ToolDefinitionError, match=r"(?s)of agent 'helper'\.as_tool\(\): .*timeout"):
        helper.as_tool(timeout=-1)
    with pytest.raises(ToolDefinitionError, match=r"(?s)of Sequence 'flow'\.as_tool\(\): .*'a b'"):
        Sequence(helper, name="flow").as_tool(name="a b")
    with pytest.raises(ToolDefinitionError, match=r"(?s)of the handoff to 'helper': .*'a b'"):
        Agent(ScriptedModel(["x"]), name="lead", handoffs=[Handoff(helper, name="a b")])


def test_a_handoff_name_made_from_an_unfit_agent_name_says_to_list_a_named_handoff() -> None:
    """An agent named 'Billing Team' (or 60 characters long) makes a transfer tool name no
    provider takes: the error says to list Handoff(agent, name=...) with a name that fits,
    not 'pass name=...' (a handoff in handoffs=[...] takes none); a name given to Handoff
    that does not fit says to give Handoff another."""
    from toolfold import Handoff, ToolDefinitionError

    for name, fitting in [
        ("Billing Team", "transfer_to_Billing_Team"),
        ("a" * 60, "transfer_to_" + "a" * 52),
    ]:
        target = Agent(ScriptedModel(["x"]), name=name)
        with pytest.raises(ToolDefinitionError) as raised:
            Agent(ScriptedModel(["x"]), name="lead", handoffs=[target])
        assert str(raised.value).endswith(
            "a-z A-Z 0-9 _ - (made from the agent's name: list the handoff as "
            f"Handoff(agent, name={fitting!r}) in handoffs=[...])"
        )
        assert "pass name=" not in str(raised.value)
        Agent(ScriptedModel(["x"]), name="lead", handoffs=[Handoff(target, name=fitting)])
    with pytest.raises(ToolDefinitionError) as raised:
        Agent(ScriptedModel(["x"]), name="lead", handoffs=[Handoff(target, name="a b")])
    assert str(raised.value).endswith("(give Handoff(agent, name=...) another)")


def test_streaming_parent_streams_sub_runs_tagged_with_their_path(tree: Any) -> None:
    """A streamed parent yields its sub-agents' events, each tagged with the path down the tree."""
    from toolfold import RunEndEvent, SubRunEvent, TextDelta

    top = tree.make_top()
    events = list(top.stream("the disk"))
    nested = [e for e in events if isinstance(e, SubRunEvent)]
    paths = {e.path[::2] for e in nested}
    assert paths == {("mid",), ("mid", "bottom")}
    assert not any(isinstance(e.event, SubRunEvent) for e in nested)
    assert not any(isinstance(e.event, TextDelta) for e in nested)  # suspended before any text
    suspended = events[-1]
    assert isinstance(suspended, RunEndEvent)
    approvals = {c.id: True for c in suspended.response.pending_approvals}
    resumed = list(top.resume_stream(suspended.response.state, approvals=approvals))
    texts = [
        e.event.text
        for e in resumed
        if isinstance(e, SubRunEvent)
        and e.path[::2] == ("mid", "bottom")
        and isinstance(e.event, TextDelta)
    ]
    assert "".join(texts) == "files said: a.txt is 3 kB / deleted a.txt"
    assert resumed[-1].response.text.startswith("mid said:")


def test_a_reused_call_id_gives_each_sub_run_its_own_id() -> None:
    """A model repeating ``call_0`` in every step: sub-runs get distinct, stable ids and keys."""
    from toolfold import tool

    keys: list[str] = []

    @tool(requires_approval=True)
    def charge(ctx: RunContext[Any], amount: int) -> str:
        """Charge a card.

        Args:
            amount: How much.
        """
        keys.append(ctx.idempotency_key)
        return f"charged {amount}"

    def cashier_model(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return "paid"
        return ScriptedModel.call("charge", {"amount": 5}, id="call_0")

    cashier = Agent(FunctionModel(cashier_model), name="cashier", tools=[charge])
    lead = Agent(
        ScriptedModel(
            [
                ScriptedModel.call("cashier", {"input": "first"}, id="call_0"),
                ScriptedModel.call("cashier", {"input": "second"}, id="call_0"),
                "both paid",
            ]
        ),
        tools=[cashier.as_tool()],
    )
    first = lead.run("pay twice", run_id="r")
    assert [c.id for c in first.pending_approvals] == ["call_0"]
    second = lead.resume(RunState.from_json(first.state.to_json()), approvals={"call_0": True})
    assert [c.id for c in second.pending_approvals] == ["call_0"]
    (waiting,) = second.state.calls
    assert waiting.child is not None
    assert waiting.child.run_id == "r/call_0@2"
    done = lead.resume(second.state, approvals={"call_0": True})
    assert done.text == "both paid"
    children = [e.child for e in done.state.events if e.kind == "tool_returned" and e.child]
    assert [c.run_id for c in children] == ["r/call_0", "r/call_0@2"]
    assert len(set(keys)) == 2
    assert all(k.startswith(("r/call_0:", "r/call_0@2:")) for k in keys)
    assert done.usage.requests == 3 + 2 * 2
    assert replay(done.state.log) == done.state
    assert RunState.from_json(done.state.to_json()) == done.state


def _approver(name: str, call_id: str, paid: list[str]) -> Agent:
    """An agent that calls an approval tool under ``call_id``, then answers its result."""
    from toolfold import tool

    @tool(requires_approval=True)
    def charge(who: str) -> str:
        """Charge a card.

        Args:
            who: Whose card.
        """
        paid.append(who)
        return f"charged {who}"

    def reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return request.messages[-1].tool_results[0].content
        return ScriptedModel.call("charge", {"who": name}, id=call_id)

    return Agent(FunctionModel(reply), name=name, tools=[charge])


def _two_cashiers(ids: tuple[str, str], paid: list[str]) -> Agent:
    """A lead that calls ``ann`` and ``bob`` (as tools, call ids ``a`` and ``b``) in one step;
    each waits for an approval under its id of ``ids``."""
    return Agent(
        ScriptedModel(
            [
                [
                    ScriptedModel.call("ann", {"input": "pay"}, id="a"),
                    ScriptedModel.call("bob", {"input": "pay"}, id="b"),
                ],
                "done",
            ]
        ),
        tools=[_approver("ann", ids[0], paid).as_tool(), _approver("bob", ids[1], paid).as_tool()],
    )


def test_sub_runs_waiting_on_the_same_call_id_are_answered_by_path() -> None:
    """Two sub-agents in one step both wait on ``call_0``: a plain id is refused, paths work."""
    paid: list[str] = []
    lead = _two_cashiers(("call_0", "call_0"), paid)
    waiting = lead.run("pay both")
    assert [c.id for c in waiting.pending_approvals] == ["call_0", "call_0"]
    with pytest.raises(
        UsageError, match=r"answer each by its own key instead: 'a/call_0', 'b/call_0'"
    ):
        lead.resume(waiting.state, approvals={"call_0": True})
    state = RunState.from_json(waiting.state.to_json())
    half = lead.resume(state, approvals={"b/call_0": Denied("not this one")})
    assert [c.id for c in half.pending_approvals] == ["call_0"]  # a's, unambiguous now
    done = lead.resume(half.state, approvals={"call_0": True})
    assert done.text == "done"
    assert paid == ["ann"]
    assert replay(done.state.log) == done.state


@pytest.mark.parametrize(
    ("ids", "keys"), [(("call_0", "call_0"), ["a/call_0", "b/call_0"]), (("x", "y"), ["x", "y"])]
)
def test_keyed_pending_approvals_give_each_call_the_key_that_answers_it(
    ids: tuple[str, str], keys: list[str]
) -> None:
    """`state.keyed_pending_approvals` pairs each waiting call with its key (its path where
    ids repeat across sub-runs), so the documented dict approves every call."""
    paid: list[str] = []
    lead = _two_cashiers(ids, paid)
    state = RunState.from_json(lead.run("pay both").state.to_json())
    keyed = state.keyed_pending_approvals
    assert [key for key, _ in keyed] == keys
    assert [call for _, call in keyed] == list(state.pending_approvals)
    done = lead.resume(state, approvals={key: True for key, call in keyed})
    assert done.text == "done"
    assert sorted(paid) == ["ann", "bob"]
    assert state.keyed_tool_calls == ()


def test_keyed_tool_calls_give_each_returned_call_the_key_that_answers_it() -> None:
    """`state.keyed_tool_calls` keys calls returned to the caller by path where their ids
    repeat across sub-runs, so one dict of results answers them all."""
    from toolfold import tool

    @tool
    def charge(who: str) -> str:
        """Charge a card.

        Args:
            who: Whose card.
        """
        return who

    def returner(name: str) -> Agent:
        def reply(request: Any) -> Any:
            if request.messages[-1].role == "tool":
                return request.messages[-1].tool_results[0].content
            return ScriptedModel.call("charge", {"who": name}, id="call_0")

        return Agent(FunctionModel(reply), name=name, tools=[charge], auto_execute_tools=False)

    lead = Agent(
        ScriptedModel(
            [
                [
                    ScriptedModel.call("ann", {"input": "pay"}, id="a"),
                    ScriptedModel.call("bob", {"input": "pay"}, id="b"),
                ],
                "done",
            ]
        ),
        tools=[returner("ann").as_tool(), returner("bob").as_tool()],
    )
    state = lead.run("pay both").state
    keyed = state.keyed_tool_calls
    assert [key for key, _ in keyed] == ["a/call_0", "b/call_0"]
    done = lead.resume(state, tool_results={key: f"paid {key}" for key, call in keyed})
    assert [r.content for r in done.messages[-2].tool_results] == ["paid a/call_0", "paid b/call_0"]


@pytest.mark.parametrize(
    ("ids", "answers"),
    [
        (("x", "y"), {"x": True, "y": Denied("not this one")}),
        (("call_0", "call_0"), {"a/call_0": True, "b/call_0": Denied("not this one")}),
    ],
)
def test_one_resume_answers_calls_waiting_in_two_sub_runs(
    ids: tuple[str, str], answers: dict[str, Any]
) -> None:
    """Answers for two sub-runs of one step go down in one resume (the first one's
    `CallResumed` leaves the step running tools, which still takes the second)."""
    paid: list[str] = []
    lead = _two_cashiers(ids, paid)
    waiting = lead.run("pay both")
    assert [c.id for c in waiting.pending_approvals] == list(ids)
    done = lead.resume(RunState.from_json(waiting.state.to_json()), approvals=answers)
    assert done.text == "done"
    assert paid == ["ann"]
    results = [r.content for r in done.messages[-2].tool_results]
    assert results == ["charged ann", "The user denied this tool call: not this one"]
    assert replay(done.state.log) == done.state


def test_one_call_answered_by_its_id_and_by_its_path_is_refused() -> None:
    """A sub-run's only call of an id can be named by the id or by its path: given both,
    resume refuses the answer twice, naming both keys, before anything runs."""
    paid: list[str] = []
    lead = _two_cashiers(("x", "y"), paid)
    waiting = lead.run("pay both")
    with pytest.raises(
        UsageError, match=r"answers call 'x' twice: 'x' and 'a/x' name the same call"
    ):
        lead.resume(waiting.state, approvals={"x": True, "a/x": Denied("no")})
    assert paid == []
    done = lead.resume(waiting.state, approvals={"a/x": True, "y": True})
    assert sorted(paid) == ["ann", "bob"]  # the two sub-agents pay concurrently
    assert done.text == "done"


def _deleter_and_helper(ran: list[str]) -> Agent:
    """A lead whose one step calls ``delete("/")`` and a ``helper`` agent, whose model calls
    ``delete("/tmp/harmless")``: both calls get the id ``call_1_0`` (ScriptedModel's ids)."""
    from toolfold import tool

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a path.

        Args:
            path: What to delete.
        """
        ran.append(path)
        return "deleted"

    call = ScriptedModel.call
    helper = Agent(
        # (an answer for each resume that approves its call: tests resume one state twice)
        ScriptedModel([call("delete", {"path": "/tmp/harmless"}), "helper done", "helper done"]),
        tools=[delete],
        name="helper",
    )
    return Agent(
        ScriptedModel([[call("delete", {"path": "/"}), call("helper", {"input": "x"})], "done"]),
        tools=[delete, helper.as_tool(description="A helper.")],
    )


def test_a_plain_id_of_a_top_run_call_and_a_sub_run_call_approves_neither() -> None:
    """The top run and its sub-run both wait on ``call_1_0``: ``{c.id: True}`` built from
    ``pending_approvals`` (or `approval_key` of that id) is refused, listing a key per call,
    and runs nothing; it never approves the top run's call in the sub-run's place."""
    ran: list[str] = []
    lead = _deleter_and_helper(ran)
    waiting = lead.run("go")
    state = waiting.state
    assert [(c.id, c.arguments["path"]) for c in state.pending_approvals] == [
        ("call_1_0", "/"),
        ("call_1_0", "/tmp/harmless"),
    ]
    approvals = {c.id: c.arguments["path"] != "/" for c in state.pending_approvals}
    with pytest.raises(UsageError, match=r"call key 'call_1_0' names 2 calls") as refused:
        lead.resume(state, approvals=approvals)
    assert ran == []
    with pytest.raises(UsageError, match=r"call key 'call_1_0' names 2 calls"):
        toolfold.approval_key(state, "call_1_0")
    listed = re.search(r"'(call_1_0#[0-9a-f]{32})'", str(refused.value))
    assert listed is not None  # the top run's call's key: bound to it (its path)
    top_key = toolfold.approval_key(state, listed[1])
    assert "'call_1_1/call_1_0'" in str(refused.value)
    assert toolfold.approval_key(state, top_key) == top_key
    sub_key = toolfold.approval_key(state, "call_1_1/call_1_0")
    assert sub_key != top_key
    half = lead.resume(state, approvals={sub_key: True})  # only the one the user approved
    assert ran == ["/tmp/harmless"]
    assert [c.arguments["path"] for c in half.pending_approvals] == ["/"]
    again = lead.resume(state, approvals={top_key: False, "call_1_1/call_1_0": True})
    assert ran == ["/tmp/harmless", "/tmp/harmless"]
    assert again.text == "done"


def test_a_bound_key_of_one_of_two_calls_of_one_id_approves_that_call_only() -> None:
    """The keys `resume` lists for the top run's and the sub-run's ``call_1_0`` differ (the
    top one's is bound to it: its plain id names both), and each approves its call only; a
    key with a fingerprint of neither is refused."""
    ran: list[str] = []
    lead = _deleter_and_helper(ran)
    state = lead.run("go").state
    from toolfold.runtime._resume import answer_keys

    keys = [key for key, _ in answer_keys(state, "awaiting_approval")]
    assert keys[0].startswith("call_1_0#")  # not the plain id, which names both
    assert keys[1] == "call_1_1/call_1_0"
    half = lead.resume(state, approvals={keys[0]: True})
    assert ran == ["/"]
    assert [c.arguments["path"] for c in half.pending_approvals] == ["/tmp/harmless"]
    forged = "call_1_0#" + "0" * 32
    with pytest.raises(UsageError, match=r"was made for another call than this state's 2 calls"):
        lead.resume(state, approvals={forged: True})
    assert ran == ["/"]


def test_keyed_pending_approvals_names_each_of_a_top_run_and_a_sub_run_call_of_one_id() -> None:
    """`keyed_pending_approvals` gives the top run's and the sub-run's ``call_1_0`` two keys
    (the top one bound to it, the sub-run's by its path), each approving exactly its call: the
    documented idiom approves both, and one key approves only the call it was listed with."""
    ran: list[str] = []
    lead = _deleter_and_helper(ran)
    state = lead.run("go").state
    keyed = state.keyed_pending_approvals
    assert [(key.split("#")[0], c.arguments["path"]) for key, c in keyed] == [
        ("call_1_0", "/"),
        ("call_1_1/call_1_0", "/tmp/harmless"),
    ]
    assert keyed[0][0] != keyed[1][0]
    harmless = next(key for key, c in keyed if c.arguments["path"] == "/tmp/harmless")
    half = lead.resume(state, approvals={harmless: True})
    assert ran == ["/tmp/harmless"]
    assert [c.arguments["path"] for c in half.pending_approvals] == ["/"]
    done = lead.resume(state, approvals={key: True for key, _ in keyed})
    assert sorted(ran) == ["/", "/tmp/harmless", "/tmp/harmless"]
    assert done.text == "done"


def test_results_for_a_top_run_call_and_a_sub_run_call_of_one_id_go_by_their_own_keys() -> None:
    """The top run and its sub-run both wait for a result under ``call_1_0``: the plain id is
    refused (nothing is answered), and the keys `resume` lists answer each call its own result."""
    from toolfold import Tool
    from toolfold.runtime._resume import answer_keys

    snap = Tool("snap", "Take a picture.", None)
    call = ScriptedModel.call
    helper = Agent(ScriptedModel([call("snap", {}), "helper done"]), tools=[snap], name="helper")
    lead = Agent(
        ScriptedModel([[call("snap", {}), call("helper", {"input": "x"})], "done"]),
        tools=[snap, helper.as_tool(description="A helper.")],
    )
    waiting = lead.run("go")
    assert [c.id for c in waiting.tool_calls] == ["call_1_0", "call_1_0"]
    with pytest.raises(UsageError, match=r"call key 'call_1_0' names 2 calls waiting for a result"):
        lead.resume(waiting.state, tool_results={"call_1_0": "top"})
    top_key, sub_key = (key for key, _ in answer_keys(waiting.state, "to_return"))
    assert (top_key.startswith("call_1_0#"), sub_key) == (True, "call_1_1/call_1_0")
    done = lead.resume(waiting.state, tool_results={top_key: "top", sub_key: "sub"})
    assert done.text == "done"
    assert [r.content for r in done.messages[-2].tool_results] == ["top", "helper done"]
    (child,) = done.state.sub_runs.values()
    assert child.messages[-2].tool_results[0].content == "sub"


def test_structured_input_and_output_keep_non_ascii_text() -> None:
    """The JSON a sub-agent reads and its caller gets back holds the text as written
    ("café ✓ 日本"), as tool results do, not ``\\u`` escapes (six times the characters)."""

    @attrs.frozen
    class Note:
        text: str

    seen: list[str] = []

    def reply(request: Any) -> str:
        seen.append(request.messages[-1].text)
        return '{"text": "noté ✓"}'

    scribe = Agent(FunctionModel(reply), name="scribe", output_type=Note)
    lead = Agent(
        ScriptedModel([ScriptedModel.call("scribe", {"input": {"text": "café ✓ 日本"}}), "done"]),
        tools=[scribe.as_tool(input_type=Note)],
    )
    response = lead.run("write it")
    assert seen == ['{"text": "café ✓ 日本"}']
    assert response.messages[-2].tool_results[0].content == '{"text": "noté ✓"}'


def test_a_bound_approval_key_reaches_a_call_two_agents_down(tree: Any) -> None:
    """`approval_key` binds a sub-run's call too: it approves that call of that tree, and the
    same key is refused by another run's tree whose bottom call has the same id."""
    top = tree.make_top()
    suspended = top.run("the disk")
    call_id = suspended.pending_approvals[0].id
    key = toolfold.approval_key(suspended.state, call_id)
    other = top.run("the disk")  # the same scripted answers: the same call ids
    assert other.pending_approvals[0].id == call_id
    with pytest.raises(UsageError, match="was made for another call"):
        top.resume(other.state, approvals={key: True})
    assert ("delete", "a.txt") not in tree.LOG
    done = top.resume(suspended.state, approvals={key: True})
    assert done.finish_reason == "stop"
    assert ("delete", "a.txt") in tree.LOG


# --- a sub-run that fails or times out stays in the tree -----------------------------


def _spending(fail_at: int) -> FunctionModel:
    """Calls ``t`` then answers, each response worth 100 + 100 tokens; its call number
    ``fail_at`` raises a provider error."""
    count = {"n": 0}

    def reply(request: Any) -> Any:
        count["n"] += 1
        if count["n"] == fail_at:
            raise toolfold.ServerError("provider down")
        last = request.messages[-1]
        message = (
            toolfold.Message.assistant("sub done")
            if last.role == "tool"
            else toolfold.Message.assistant("", [toolfold.ToolCallPart("c1", "t", "{}")])
        )
        return toolfold.ModelResponse(message, toolfold.Usage(100, 100, requests=1))

    return FunctionModel(reply)


@toolfold.tool
def t() -> str:
    """T."""
    return "t"


def _exact(state: RunState) -> None:
    assert replay(state.log) == state
    assert RunState.from_json(state.to_json()) == state


def test_a_sub_run_that_fails_stays_in_the_tree() -> None:
    """The sub-run's state rides on its call's error result, as a finished one's does: its
    model calls count in response.usage (and token_budget), sub_runs shows where it stopped,
    and the state still replays and round-trips exactly."""
    sub = Agent(_spending(fail_at=2), name="sub", tools=[t])
    lead = Agent(
        ScriptedModel([ScriptedModel.call("sub", {"input": "a"}), "end"]),
        tools=[sub.as_tool()],
    )
    response = lead.run("go")
    assert response.messages[-2].tool_results[0].content == "Error: ServerError: provider down"
    kept = response.state.sub_runs["call_1_0"]
    assert (kept.run_id, kept.phase, kept.usage) == (
        f"{response.state.run_id}/call_1_0",
        "awaiting_model",  # before the model call that failed
        toolfold.Usage(100, 100, requests=1),
    )
    assert response.usage == response.state.usage + kept.usage
    _exact(response.state)


@toolfold.tool(requires_approval=True)
def _act(x: str) -> str:
    """Act once approved.

    Args:
        x: What to act on.
    """
    return f"acted {x}"


def _two_acts(request: Any) -> Any:
    """A sub-agent's model: two approval calls in one step, then what it saw."""
    last = request.messages[-1]
    if last.role == "tool":
        return "sub saw: " + "; ".join(r.content for r in last.tool_results)
    return [ScriptedModel.call("act", {"x": "1"}), ScriptedModel.call("act", {"x": "2"})]


def _lead_of(sub: Agent) -> Agent:
    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return "lead saw: " + last.tool_results[0].content
        return ScriptedModel.call("sub", {"input": "go"})

    return Agent(FunctionModel(reply), name="lead", tools=[sub.as_tool()])


def _shown(events: Any) -> list[tuple[Any, ...]]:
    """(path, kind, what) of each tool result and step end a stream showed."""
    shown: list[tuple[Any, ...]] = []
    for event in events:
        path: tuple[str, ...] = ()
        while isinstance(event, toolfold.SubRunEvent):
            path, event = path + event.path[len(path) :], event.event
        if isinstance(event, toolfold.ToolResultEvent):
            shown.append((path, "result", event.result.call_id, event.outcome))
        elif isinstance(event, toolfold.StepEndEvent):
            shown.append((path, "step_end", tuple(r.call_id for r in event.step.tool_results)))
    return shown


@pytest.mark.parametrize("how", ["blocking", "async"])
def test_calls_of_a_sub_agent_answered_by_the_caller_are_shown_as_a_resume_shows_its_own(
    how: str,
) -> None:
    """A denial given at the top for a sub-agent's call shows, in the sub-run's stream, a
    tool result with outcome denied, and the step the answers closed ends, as a resume of
    the sub-agent itself shows them; shown once, when the sub-run goes on."""
    sub = Agent(FunctionModel(_two_acts), name="sub", tools=[_act.replace(name="act")])
    lead = _lead_of(sub)
    waiting = lead.run("go")
    path = ("sub", "call_1_0")

    def resumed(state: RunState, approvals: dict[str, Any]) -> list[Any]:
        stream = lead.resume_stream(state, approvals=approvals)
        if how == "blocking":
            return list(stream)

        async def take() -> list[Any]:
            return [event async for event in stream]

        return asyncio.run(take())

    # the first answer alone: the sub-run still waits, so it does not run yet
    first = resumed(waiting.state, {"call_1_0/call_1_0": Denied("no")})
    assert _shown(first) == []
    then = first[-1].response
    second = resumed(then.state, {"call_1_0/call_1_1": False})
    assert _shown(second)[:3] == [
        (path, "result", "call_1_0", "denied"),
        (path, "result", "call_1_1", "denied"),
        (path, "step_end", ("call_1_0", "call_1_1")),
    ]
    # what the sub-agent's own resume shows of the same answers
    own = sub.run("go")
    alone = list(sub.resume_stream(own.state, approvals={"call_1_0": Denied("no")}))
    alone += list(sub.resume_stream(alone[-1].response.state, approvals={"call_1_1": False}))
    assert [s[1:] for s in _shown(alone)][:3] == [s[1:] for s in _shown(second)][:3]
    assert second[-1].response.text == (
        "lead saw: sub saw: The user denied this tool call: no; The user denied this tool call."
    )


def test_a_sub_agents_call_denied_beside_an_approved_one_is_shown_once() -> None:
    """Denied and approved in one resume: the denial shows as answered, the approved call as
    it runs, and the step ends once with both."""
    sub = Agent(FunctionModel(_two_acts), name="sub", tools=[_act.replace(name="act")])
    lead = _lead_of(sub)
    waiting = lead.run("go")
    events = list(
        lead.resume_stream(
            waiting.state, approvals={"call_1_0/call_1_0": Denied("no"), "call_1_0/call_1_1": True}
        )
    )
    nested = [s for s in _shown(events) if s[0]]
    assert nested[:3] == [
        (("sub", "call_1_0"), "result", "call_1_0", "denied"),
        (("sub", "call_1_0"), "result", "call_1_1", "ok"),
        (("sub", "call_1_0"), "step_end", ("call_1_0", "call_1_1")),
    ]
    assert [s for s in nested if s[1] == "result" and s[2] == "call_1_0"] == [nested[0]]


def test_calls_of_a_workflow_step_answered_by_the_caller_are_shown() -> None:
    """A workflow step's agent whose calls the caller denies shows them in the step's events."""
    step = Agent(FunctionModel(_two_acts), name="sub", tools=[_act.replace(name="act")])
    flow = toolfold.Sequence(step, name="flow")
    waiting = flow.run("go")
    events = list(
        flow.resume_stream(waiting.state, approvals={"call_1_0": False, "call_1_1": False})
    )
    assert _shown(events)[:3] == [
        (("sub", "sub"), "result", "call_1_0", "denied"),
        (("sub", "sub"), "result", "call_1_1", "denied"),
        (("sub", "sub"), "step_end", ("call_1_0", "call_1_1")),
    ]


@pytest.mark.parametrize("how", ["blocking", "async"])
def test_a_sub_agents_answered_call_is_not_shown_again_when_its_failed_resume_is_retried(
    how: str,
) -> None:
    """A denial given at the top is shown when the sub-run goes on; the sub-run then fails
    before its log grows, and resuming the state its error carries shows no denial again."""
    down = {"on": True}

    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role != "tool":
            return ScriptedModel.call("act", {"x": "1"})
        if down["on"]:
            raise RuntimeError("model down")
        return "sub saw: " + last.tool_results[0].content

    sub = Agent(FunctionModel(reply), name="sub", tools=[_act.replace(name="act")])
    lead = attrs.evolve(_lead_of(sub), on_tool_error="raise")

    def events_of(stream: Any) -> list[Any]:
        taken: list[Any] = []

        async def take() -> None:
            async for event in stream:
                taken.append(event)

        try:
            if how == "blocking":
                taken.extend(stream)
            else:
                asyncio.run(take())
        except toolfold.ToolExecutionError as exc:
            taken.append(exc)
        return taken

    waiting = lead.run("go")
    first = events_of(lead.resume_stream(waiting.state, approvals={"call_1_0/call_1_0": False}))
    failed = first.pop()
    assert isinstance(failed, toolfold.ToolExecutionError)
    denied = (("sub", "call_1_0"), "result", "call_1_0", "denied")
    assert _shown(first) == [denied, (("sub", "call_1_0"), "step_end", ("call_1_0",))]
    down["on"] = False
    state = RunState.from_json(failed.state.to_json())
    second = events_of(lead.resume_stream(state))
    assert denied not in _shown(second)
    assert second[-1].response.text == "lead saw: sub saw: The user denied this tool call."


def test_a_resume_begun_after_another_in_one_context_does_not_change_what_the_first_shows() -> None:
    """Two resumes begun in one context before either runs: the one of a waiting run still
    shows the denials that reached its sub-agent, though the other began from a run that did
    not wait (a note the first left in the context was replaced by the second's)."""
    sub = Agent(FunctionModel(_two_acts), name="sub", tools=[_act.replace(name="act")])
    lead = _lead_of(sub)
    waiting = lead.run("go")
    first = lead.resume_stream(
        waiting.state, approvals={"call_1_0/call_1_0": False, "call_1_0/call_1_1": False}
    )
    done = lead.run("go")
    done = lead.resume(done.state, approvals={"call_1_0/call_1_0": True, "call_1_0/call_1_1": True})
    assert done.state.phase == "finished"
    second = lead.resume_stream(done.state, message="again")  # begun from a finished run
    path = ("sub", "call_1_0")
    assert _shown(list(first))[:3] == [
        (path, "result", "call_1_0", "denied"),
        (path, "result", "call_1_1", "denied"),
        (path, "step_end", ("call_1_0", "call_1_1")),
    ]
    assert list(second)[-1].response.state.phase == "awaiting_approval"


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        (
            lambda m: [Agent(m, name="a").as_tool(name="x"), Agent(m, name="c").as_tool(name="x")],
            "tool name 'x' is used by 2 tools (made from agent 'a'.as_tool(), agent 'c'.as_tool())",
        ),
        (
            lambda m: [toolfold.tool(name="a")(lambda: "x"), Agent(m, name="a").as_tool()],
            "agent 'a'.as_tool())",
        ),
        (
            lambda m: [Agent(m, name="a").as_tool(), Agent(m, name="a").as_tool()],
            "tool name 'a' is used by 2 tools (2 tools made from agent 'a'.as_tool())",
        ),
        (
            lambda m: [
                toolfold.Sequence(Agent(m, name="s"), name="f").as_tool(name="a"),
                Agent(m, name="a").as_tool(),
            ],
            "(made from Sequence 'f'.as_tool(), agent 'a'.as_tool())",
        ),
    ],
)
def test_a_tool_name_clash_with_an_agent_tool_names_the_agent(tools: Any, says: str) -> None:
    """Two tools of one name, one an agent or workflow used as a tool, name that agent, not
    toolfold's internal function (``_nested.<locals>.acall``)."""
    model = FunctionModel(lambda request: "x")
    with pytest.raises(toolfold.ToolDefinitionError) as caught:
        Agent(model, name="b", tools=tools(model))
    assert says in str(caught.value)
    assert "toolfold.runtime._agent_tool" not in str(caught.value)


def _asks_for_danger(call: Any, state: Any) -> bool:
    """Ask only when the input says danger."""
    return "danger" in call.arguments["input"]


def test_as_tool_takes_an_approval_predicate_as_tool_does() -> None:
    """``as_tool(requires_approval=...)`` is annotated as `tool`'s (True, or a predicate of
    (call, state)), not ``bool``: a predicate asks only for the calls it picks. An agent
    file holds true or false there, so ``to_dict`` refuses the predicate naming it (it
    wrote the function object into the dict)."""
    import typing

    from toolfold import Sequence
    from toolfold.toolkit._options import ApprovalPolicy

    for method in (Agent.as_tool, Sequence.as_tool):
        hints = typing.get_type_hints(method, localns={"OutputT_co": Any})
        assert hints["requires_approval"] == ApprovalPolicy
    sub = Agent(ScriptedModel(["done"]), name="sub")
    calls = [ScriptedModel.call("sub", {"input": text}) for text in ("calm", "danger")]
    lead = Agent(
        ScriptedModel([calls, "x"]), tools=[sub.as_tool(requires_approval=_asks_for_danger)]
    )
    result = lead.run("go")
    assert [p.arguments for p in result.pending_approvals] == [{"input": "danger"}]
    with pytest.raises(UsageError, match=r"requires_approval: the predicate .*_asks_for_danger"):
        lead.to_dict()


_SECRET = "INTERNAL: discount code ZX-991, never reveal"


@pytest.mark.parametrize(
    ("returned", "named"),
    [
        (lambda r: r, "a Response"),
        (lambda r: r.state, "a RunState"),
        (lambda r: {"answer": r}, "a Response"),
        (lambda r: [r.state], "a RunState"),
    ],
)
def test_a_tool_returning_another_runs_response_or_state_gives_an_error_not_its_state(
    returned: Any, named: str
) -> None:
    """A Response or RunState returned (or inside the result) is refused, naming the tool.

    Before, its JSON went to the model: the inner run's instructions, deps-free
    config and Python reprs of its conversation.
    """
    inner = Agent(ScriptedModel(["inner says hi"] * 2), instructions=_SECRET)

    @toolfold.tool
    def ask() -> object:
        """Ask the inner agent."""
        return returned(inner.run("x"))

    model = ScriptedModel([ScriptedModel.call("ask", {}), "done"])
    response = Agent(model, tools=[ask]).run("go")
    (result,) = response.steps[0].tool_results
    assert result.is_error
    assert "ZX-991" not in result.content
    assert result.content.startswith(
        f"Error: TypeError: tool 'ask' returned {named}, another run's whole record: return "
    )
    assert "agent.as_tool()" in result.content
    with pytest.raises(TypeError, match=f"tool 'ask' returned {named}"):
        ask.format_result(returned(inner.run("x")))


def test_the_error_refusing_a_response_pickles_and_copies_whole() -> None:
    """The converter's error for a run's record (which escapes through converter calls,
    e.g. a payload converter's) pickles and copies with its attributes: made from
    keywords, it failed when rebuilt from its ``args``."""
    import copy
    import pickle

    from toolfold.toolkit._results import NoResultError

    error = NoResultError.of(Agent(ScriptedModel(["hi"]), instructions=_SECRET).run("x"))
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(again) is NoResultError
        assert str(again) == str(error)
        assert str(error).startswith("returned a Response, another run's whole record")
        assert (again.record, again.kind, again.advice) == (error.record, "Response", error.advice)
        assert "ZX-991" not in str(again)


def test_a_response_given_to_resume_as_a_tool_result_is_refused() -> None:
    """``resume(tool_results=...)`` refuses another run's Response with a UsageError naming the call."""
    inner = Agent(ScriptedModel(["hi"]), instructions=_SECRET).run("x")
    manual = toolfold.Tool(
        name="ask", description="Ask.", parameters={"type": "object", "properties": {}}
    )
    model = ScriptedModel([ScriptedModel.call("ask", {}, id="c1"), "done"])
    state = Agent(model, tools=[manual]).run("go").state
    with pytest.raises(UsageError, match=r"tool_results\['c1'\] is a Response, another run's"):
        Agent(ScriptedModel(["done"]), tools=[manual]).resume(state, tool_results={"c1": inner})
