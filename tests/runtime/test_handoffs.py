"""Handoffs: transfer_to_<name> tools move the run to another agent on the same conversation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import pytest

from toolfold import (
    Agent,
    Denied,
    Handoff,
    InvalidEventError,
    Message,
    Response,
    RunError,
    SerializationError,
    Tool,
    ToolDefinitionError,
    UsageError,
    tool,
)
from toolfold.files import from_dict
from toolfold.runtime import (
    HandedOff,
    ModelRequest,
    ModelResponded,
    ModelResponse,
    ReasoningPart,
    RunEndEvent,
    RunState,
    ToolCallPart,
    ToolResultPart,
    ToolReturned,
    Usage,
    drop_tool_calls,
    reduce,
    replay,
)
from toolfold.testing import FunctionModel, ScriptedModel, TestModel, override_models

call = ScriptedModel.call


def _seen_by(model_log: list[tuple[str, ...]]) -> FunctionModel:
    def reply(request):  # type: ignore[no-untyped-def]
        model_log.append(tuple(t.name for t in request.tools))
        return "refund issued"

    return FunctionModel(reply)


def test_handoff_chain_continues_with_the_target() -> None:
    """triage -> billing -> refunds: each takes over with its own instructions and tools."""
    tools_seen: list[tuple[str, ...]] = []
    refunds = Agent(_seen_by(tools_seen), name="refunds", instructions="Refund things.")
    billing = Agent(
        ScriptedModel([call("transfer_to_refunds")]),
        name="billing",
        instructions="Bill things.",
        handoffs=[refunds],
    )
    triage = Agent(ScriptedModel([call("transfer_to_billing")]), name="triage", handoffs=[billing])
    response = triage.run("I want my money back")
    assert response.text == "refund issued"
    assert response.agent == "refunds"
    assert response.state.config.instructions == "Refund things."
    assert tools_seen == [()]
    results = [r.content for m in response.messages for r in m.tool_results]
    assert results == ["Transferred to billing.", "Transferred to refunds."]
    assert replay(response.state.log) == response.state
    assert RunState.from_json(response.state.to_json()) == response.state


def _two_transfers(first_arguments: dict[str, Any] | None = None) -> Agent:
    """triage, whose model calls transfer_to_refunds then transfer_to_billing in one answer."""
    refunds = Agent(ScriptedModel(["refunded"]), name="refunds")
    billing = Agent(ScriptedModel(["billed"]), name="billing")
    both = [call("transfer_to_refunds", first_arguments or {}), call("transfer_to_billing")]
    return Agent(ScriptedModel([both]), name="triage", handoffs=[refunds, billing])


def _ran(agent: Agent, how: str) -> Response:
    if how == "run":
        return agent.run("help")
    if how == "arun":
        return asyncio.run(agent.arun("help"))
    end = list(agent.stream("help"))[-1]
    assert isinstance(end, RunEndEvent)
    return end.response


def _results(response: Response) -> list[str]:
    return [r.content for m in response.messages for r in m.tool_results]


def _consistent(state: RunState) -> None:
    assert replay(state.log) == state
    assert RunState.from_json(state.to_json()) == state


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
def test_two_handoffs_in_one_answer_go_to_the_first_and_say_so_for_the_other(how: str) -> None:
    """The first transfer of a step wins; the other call's result says it did not transfer."""
    response = _ran(_two_transfers(), how)
    assert (response.agent, response.text) == ("refunds", "refunded")
    results = _results(response)
    assert results[0] == "Transferred to refunds."
    assert results[1].startswith("Not transferred: the conversation went to refunds")
    _consistent(response.state)


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
def test_a_failed_first_transfer_leaves_the_run_to_the_second(how: str) -> None:
    """A first transfer call that fails (bad arguments) hands nothing over: the second's goes through and says so."""
    response = _ran(_two_transfers({"bogus": 1}), how)
    assert (response.agent, response.text) == ("billing", "billed")
    results = _results(response)
    assert results[0].startswith("Invalid arguments for tool 'transfer_to_refunds'")
    assert results[1] == "Transferred to billing."
    _consistent(response.state)


def _awaiting_first_transfer(triage: Agent) -> RunState:
    """triage's run with transfer_to_refunds awaiting approval and transfer_to_billing to run.

    No transfer tool asks for approval today; a state saved under one that did
    holds such a step, and a resume denying the first call must hand off once.
    """
    failing = triage.evolve(model=FunctionModel(lambda request: 1 / 0))
    with pytest.raises(RunError) as failed:
        failing.run("help")
    answer = ModelResponse(
        Message.assistant(
            "",
            (ToolCallPart("t1", "transfer_to_refunds"), ToolCallPart("t2", "transfer_to_billing")),
        ),
        Usage(1, 1, requests=1),
        "tool_calls",
    )
    return reduce(failed.value.state, ModelResponded(answer, ("approve", "execute")))


@pytest.mark.parametrize("how", ["resume", "aresume", "resume_stream"])
def test_a_denied_first_transfer_leaves_the_run_to_the_second(how: str) -> None:
    """A first transfer call denied on resume hands nothing over: the second's goes through and says so."""
    triage = _two_transfers()
    state = RunState.from_json(_awaiting_first_transfer(triage).to_json())
    approvals = {"t1": Denied("not refunds")}
    if how == "resume":
        response = triage.resume(state, approvals=approvals)
    elif how == "aresume":
        response = asyncio.run(triage.aresume(state, approvals=approvals))
    else:
        end = list(triage.resume_stream(state, approvals=approvals))[-1]
        assert isinstance(end, RunEndEvent)
        response = end.response
    assert response.agent == "billing"
    results = _results(response)
    assert "not refunds" in results[0]
    assert results[1] == "Transferred to billing."
    _consistent(response.state)


def test_no_handoff_names_the_first_agent() -> None:
    """A run that never hands off was answered by the agent that started it."""
    agent = Agent(ScriptedModel(["hi"]), name="solo")
    assert agent.run("hello").agent == "solo"


def test_input_filter_rewrites_the_conversation() -> None:
    """An input filter decides what the target sees (here: only the user's messages)."""
    seen: list[int] = []

    def reply(request):  # type: ignore[no-untyped-def]
        seen.append(len(request.messages))
        return "ok"

    def users_only(messages: tuple[Message, ...]) -> list[Message]:
        return [m for m in messages if m.role == "user"]

    target = Agent(FunctionModel(reply), name="target")
    source = Agent(
        ScriptedModel([call("move", {})]),
        name="source",
        handoffs=[Handoff(target, name="move", input_filter=users_only)],
    )
    response = source.run("question")
    assert seen == [1]
    assert response.agent == "target"
    assert [m.role for m in response.messages] == ["user", "assistant"]


def test_drop_tool_calls_keeps_what_was_said() -> None:
    """Tool messages go, assistant messages lose their calls (and go when only reasoning
    is left), everything else stays in order."""
    lookup = ToolCallPart("c1", "lookup", '{"order": "A17"}')
    conversation = (
        Message.system("Be brief."),
        Message.user("refund A17"),
        Message("assistant", (ReasoningPart("look it up"), lookup)),
        Message.tool(ToolResultPart("c1", "lookup", "shipped")),
        Message.assistant("It shipped; passing you on.", [ToolCallPart("c2", "transfer", "{}")]),
        Message.tool(ToolResultPart("c2", "transfer", "Transferred to refunds.")),
    )
    assert drop_tool_calls(conversation) == [
        Message.system("Be brief."),
        Message.user("refund A17"),
        Message.assistant("It shipped; passing you on."),
    ]
    assert drop_tool_calls(conversation[:2]) == list(conversation[:2])
    assert drop_tool_calls([]) == []


def test_a_handoff_can_drop_tool_calls_and_write_it_to_a_file() -> None:
    """The built-in filter in a handoff: the target reads no calls; the agent file
    names it by its public import path, and loads it back."""
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> str:
        seen.append(request)
        return "refunded"

    @tool
    def lookup(order: str) -> str:
        """Look an order up.

        Args:
            order: The order's id.
        """
        return "shipped"

    refunds = Agent(FunctionModel(reply), name="refunds")
    triage = Agent(
        ScriptedModel([call("lookup", {"order": "A17"}), call("transfer_to_refunds")]),
        name="triage",
        tools=[lookup],
        handoffs=[Handoff(refunds, input_filter=drop_tool_calls)],
    )
    response = triage.run("refund A17")
    assert response.text == "refunded"
    assert [m.role for m in seen[0].messages] == ["user"]
    assert all(not m.tool_calls and not m.tool_results for m in seen[0].messages)
    assert replay(response.state.log) == response.state
    with override_models(TestModel()):
        lead = Agent(
            "openai:gpt-4o-mini",
            name="lead",
            handoffs=[
                Handoff(Agent("openai:gpt-4o-mini", name="refunds"), input_filter=drop_tool_calls)
            ],
        )
        document = lead.to_dict()
        assert document["agents"]["lead"]["handoffs"] == [
            {"agent": "refunds", "input_filter": "toolfold:drop_tool_calls"}
        ]
        loaded = from_dict(document).agent()
    assert loaded.handoffs[0].input_filter is drop_tool_calls


def test_an_input_filter_that_empties_the_conversation_is_a_clear_error() -> None:
    """A filter that keeps nothing would hand the target a request every provider refuses:
    the run stops before the handoff, naming the filter, and keeps its state."""
    target = Agent(ScriptedModel(["never asked"]), name="target")
    source = Agent(
        ScriptedModel([call("move", {})]),
        name="source",
        handoffs=[Handoff(target, name="move", input_filter=lambda messages: [])],
    )
    with pytest.raises(
        RunError, match=r"input_filter of the handoff to 'target' returned no messages"
    ) as caught:
        source.run("question")
    state = caught.value.state
    assert state is not None
    assert [m.role for m in state.messages] == ["user", "assistant", "tool"]
    _consistent(state)


@pytest.mark.parametrize(
    ("returned", "got"),
    [(None, "got None"), ("hello", "got str"), (["hello"], "got a list holding str")],
)
def test_an_input_filter_that_returns_no_messages_is_not_said_to_raise(
    returned: Any, got: str
) -> None:
    """A filter that forgot `return` (None), or gave text, is named for what it returned,
    not as having raised TypeError: 'NoneType' object is not iterable."""
    target = Agent(ScriptedModel(["never asked"]), name="target")
    source = Agent(
        ScriptedModel([call("move", {})]),
        name="source",
        handoffs=[Handoff(target, name="move", input_filter=lambda messages: returned)],
    )
    with pytest.raises(RunError) as caught:
        source.run("question")
    said = str(caught.value)
    assert said.startswith(
        "the input_filter of the handoff to 'target' returned no list of messages "
        f"(an input filter returns messages, {got}); the error's state is the run before "
        "the handoff"
    ), said
    assert "raised" not in said
    assert caught.value.state is not None
    assert caught.value.state.phase == "awaiting_model"


def test_an_input_filter_that_raises_says_resuming_calls_it_again() -> None:
    """A raising input_filter's error says its state is the run before the handoff and that
    resuming calls the filter again; so it does, and an agent with another filter goes on."""

    def lost(messages: Any) -> Any:
        raise LookupError("no such message")

    target = Agent(ScriptedModel(["target answers"]), name="target")
    source = Agent(
        ScriptedModel([call("move", {})]),
        name="source",
        handoffs=[Handoff(target, name="move", input_filter=lost)],
    )
    with pytest.raises(RunError) as caught:
        source.run("question")
    assert str(caught.value) == (
        "the input_filter of the handoff to 'target' raised LookupError: no such message; "
        "the error's state is the run before the handoff, and resuming it hands off again, "
        "calling this input_filter again: fix the function, or resume with an agent whose "
        "Handoff has another input_filter"
    )
    state = caught.value.state
    assert state is not None
    with pytest.raises(RunError) as again:
        source.resume(state)
    assert str(again.value) == str(caught.value)
    mended = source.evolve(handoffs=[Handoff(target, name="move", input_filter=list)])
    response = mended.resume(state)
    assert (response.agent, response.text) == ("target", "target answers")


def test_a_tool_named_like_a_transfer_tool_is_told_apart_from_the_handoff() -> None:
    """The duplicate-name error names a handoff's transfer tool by its handoff, not by
    the function toolfold made for it (``toolfold.runtime._agent:Handoff.tool.<locals>.transfer``)."""

    @tool(name="transfer_to_b")
    def impostor() -> str:
        """Pretend to transfer."""
        return "no"

    with pytest.raises(ToolDefinitionError) as raised:
        Agent(ScriptedModel([]), tools=[impostor], handoffs=[Agent(ScriptedModel([]), name="b")])
    assert raised.value.problems == (
        "tool name 'transfer_to_b' is used by 2 tools (made from "
        f"{__name__}:test_a_tool_named_like_a_transfer_tool_is_told_apart_from_the_handoff"
        ".<locals>.impostor, the handoff to agent 'b'); give each a distinct name=...",
    )


def test_an_input_filter_that_is_not_a_function_is_refused_when_the_agent_is_built() -> None:
    """Handoff(input_filter=...) that cannot be called fails at Agent(...), not at the first handoff."""
    target = Agent(ScriptedModel(["ok"]), name="target")
    with pytest.raises(UsageError, match=r"input_filter of the handoff to 'target'.*got str"):
        Agent(ScriptedModel(["x"]), handoffs=[Handoff(target, input_filter="users_only")])  # type: ignore[arg-type]


def test_tools_that_share_a_name_with_a_transfer_tool_are_refused_when_the_agent_is_built() -> None:
    """An agent whose tools repeat a name, its transfer tools' included, fails at Agent(...)
    with a ToolDefinitionError naming the agent and the name, before any run hands off to it."""
    ledger = Tool(name="ledger")
    impostor = Tool(name="transfer_to_billing")
    billing = Agent(ScriptedModel(["billed"]), name="billing")
    with pytest.raises(
        ToolDefinitionError,
        match=r"(?s)^duplicate tool names in the tools of agent 'triage': .*"
        r"tool name 'transfer_to_billing' is used by 2 tools",
    ):
        Agent(ScriptedModel([]), name="triage", tools=[impostor], handoffs=[billing])
    with pytest.raises(
        ToolDefinitionError,
        match=r"(?s)^duplicate tool names in the tools of agent 'billing': .*"
        r"tool name 'ledger' is used by 2 tools",
    ):
        Agent(ScriptedModel([]), name="billing", tools=[ledger, ledger], handoffs=["triage"])
    with pytest.raises(ToolDefinitionError, match=r"^duplicate tool names: every tool"):
        Agent(ScriptedModel([]), tools=[ledger, ledger])  # no name to give


def _handed_to_billing() -> tuple[Response, int]:
    """A finished run triage -> billing (which has a tool and a handoff), and its handoff's index in the log."""

    @tool
    def ledger() -> str:
        """Read the ledger."""
        return "balanced"

    refunds = Agent(ScriptedModel(["refunded"]), name="refunds")
    billing = Agent(ScriptedModel(["billed"]), name="billing", tools=[ledger], handoffs=[refunds])
    triage = Agent(ScriptedModel([call("transfer_to_billing")]), name="triage", handoffs=[billing])
    response = triage.run("help")
    (index,) = [i for i, e in enumerate(response.state.log) if e.kind == "handed_off"]
    return response, index


def test_a_handoff_whose_tools_repeat_a_name_is_refused_and_the_state_is_kept() -> None:
    """A HandedOff whose config repeats tool names (its own, or its transfer tools) is refused as a
    run start with them is, naming the agent and each name; the state it was given is unchanged."""
    response, index = _handed_to_billing()
    handed = response.state.log[index]
    assert isinstance(handed, HandedOff)
    before = replay(response.state.log[:index])
    kept = before.to_json()
    tools = handed.config.tools
    clashing = attrs.evolve(handed.config, tools=(*tools, *tools))
    with pytest.raises(InvalidEventError) as caught:
        reduce(before, HandedOff("billing", clashing))
    assert caught.value.reason == (
        "duplicate tool names in the configuration of agent 'billing': ledger, transfer_to_refunds"
    )
    assert caught.value.state is before
    assert before.to_json() == kept
    assert len(before.log) == index
    # The handoff the run made is still accepted, and the run replays as it did.
    assert reduce(before, handed) == replay(response.state.log[: index + 1])
    assert replay(response.state.log) == response.state
    assert RunState.from_json(response.state.to_json()) == response.state


def test_a_stored_run_whose_handoff_repeats_a_tool_name_does_not_load() -> None:
    """A state document whose HandedOff event was edited to repeat a tool is refused on load,
    with the reducer's reason; the document as written loads unchanged."""
    response, index = _handed_to_billing()
    document = json.loads(response.state.to_json())
    tools = document["log"][index]["config"]["tools"]
    assert [t["definition"]["name"] for t in tools] == ["ledger", "transfer_to_refunds"]
    tools.append(tools[0])
    with pytest.raises(
        SerializationError,
        match=r"duplicate tool names in the configuration of agent 'billing': ledger @ \$\.log",
    ):
        RunState.from_json(json.dumps(document))
    loaded = RunState.from_json(response.state.to_json())
    assert loaded == response.state
    assert loaded.agent == "billing"


def test_a_handoff_tools_name_and_description_are_overridable() -> None:
    """Handoff(name=, description=) is what the model is offered, and the call still transfers."""
    offered: list[tuple[str, str]] = []

    def reply(request):  # type: ignore[no-untyped-def]
        offered.extend((t.name, t.description) for t in request.tools)
        return call("escalate", {}) if len(offered) == 1 else "never reached"

    target = Agent(FunctionModel(lambda r: "handled"), name="senior", instructions="Be senior.")
    source = Agent(
        FunctionModel(reply),
        name="junior",
        handoffs=[Handoff(target, name="escalate", description="Pass hard cases up.")],
    )
    response = source.run("hard case")
    assert offered == [("escalate", "Pass hard cases up.")]
    assert response.agent == "senior"
    assert response.text == "handled"


def test_handoff_cycle_is_bounded_by_max_steps() -> None:
    """Two agents handing to each other forever stop at max_steps."""
    pong = Agent(
        FunctionModel(lambda r: call("transfer_to_ping")),
        name="pong",
        handoffs=["ping"],
        max_steps=4,
    )
    ping = Agent(
        FunctionModel(lambda r: call("transfer_to_pong")), name="ping", handoffs=[pong], max_steps=4
    )
    response = ping.run("go")
    assert response.finish_reason == "max_steps"
    assert response.state.step == 4


def test_approval_after_a_handoff_resumes_with_the_target() -> None:
    """A run handed to an agent whose tool needs approval resumes with that agent."""
    done: list[str] = []

    @tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refund money.

        Args:
            amount: How much.
        """
        done.append(f"refund {amount}")
        return "refunded"

    refunds = Agent(
        ScriptedModel([call("refund", {"amount": 5}), "Your 5 are back."]),
        name="refunds",
        tools=[refund],
    )
    triage = Agent(ScriptedModel([call("transfer_to_refunds")]), name="triage", handoffs=[refunds])
    suspended = triage.run("refund me")
    assert suspended.finish_reason == "approval_required"
    loaded = RunState.from_json(suspended.state.to_json())
    response = triage.resume(loaded, approvals={suspended.pending_approvals[0].id: True})
    assert response.text == "Your 5 are back."
    assert done == ["refund 5"]
    assert response.agent == "refunds"


def test_handoff_target_needs_a_name() -> None:
    """An unnamed handoff target is refused when the agent is built."""
    with pytest.raises(UsageError, match="needs a name"):
        Agent(ScriptedModel(["x"]), handoffs=[Agent(ScriptedModel(["y"]))])


_LOST = "Not transferred: the conversation went to refunds"


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
def test_every_surface_says_the_second_transfer_did_not_transfer(how: str) -> None:
    """The losing transfer's result reads "Not transferred" in the stream, on_event, the log and on_step alike."""
    seen: list[Any] = []
    steps: list[Any] = []
    triage = _two_transfers()
    watch: dict[str, Any] = {"on_event": seen.append, "on_step": steps.append}
    streamed: list[Any] = []
    if how == "stream":
        streamed = list(triage.stream("help", **watch))
        end = streamed[-1]
        assert isinstance(end, RunEndEvent)
        response = end.response
    elif how == "arun":
        response = asyncio.run(triage.arun("help", **watch))
    else:
        response = triage.run("help", **watch)
    state = response.state
    returned = [e for e in state.events if e.kind == "tool_returned"]
    assert returned[0].content == "Transferred to refunds."
    assert returned[1].content.startswith(_LOST)
    observed = [e for e in seen if e.kind == "tool_returned"]
    assert observed == returned
    assert steps[0].tool_results[1].content.startswith(_LOST)
    if how == "stream":
        results = [e.result.content for e in streamed if e.kind == "tool_result"]
        assert results[0] == "Transferred to refunds."
        assert results[1].startswith(_LOST)
    # the results said it already: the handoff keeps the conversation as it is
    (handed,) = [e for e in state.events if e.kind == "handed_off"]
    assert handed.messages is None
    assert _results(response)[1] == returned[1].content
    _consistent(state)
    assert replay(RunState.from_json(state.to_json()).log) == state


def test_a_transfer_approved_on_resume_settles_the_later_one_in_the_same_round() -> None:
    """A first transfer approved on resume runs in one round with the later one, which says at once it did not transfer."""
    triage = _two_transfers()
    state = RunState.from_json(_awaiting_first_transfer(triage).to_json())
    response = triage.resume(state, approvals={"t1": True})
    assert response.agent == "refunds"
    returned = [e for e in response.state.events if e.kind == "tool_returned"]
    assert [e.call_id for e in returned] == ["t1", "t2"]
    assert returned[1].content.startswith(_LOST)
    (handed,) = [e for e in response.state.events if e.kind == "handed_off"]
    assert handed.messages is None
    _consistent(response.state)


def _later_transfer_ran(triage: Agent) -> RunState:
    """`_awaiting_first_transfer`, with the later transfer already run (it said it transferred)."""
    state = _awaiting_first_transfer(triage)
    return reduce(state, ToolReturned("t2", "Transferred to billing."))


def test_a_transfer_approved_after_a_later_one_ran_answers_that_one_at_the_handoff() -> None:
    """A first transfer approved on resume wins over a later one that already said it transferred: the handoff's conversation says it did not."""
    triage = _two_transfers()
    state = RunState.from_json(_later_transfer_ran(triage).to_json())
    response = triage.resume(state, approvals={"t1": True})
    assert response.agent == "refunds"
    results = _results(response)
    assert results[0] == "Transferred to refunds."
    assert results[1].startswith(_LOST)
    (handed,) = [e for e in response.state.events if e.kind == "handed_off"]
    assert handed.messages is not None  # the log's result said "Transferred" then
    _consistent(response.state)


def test_the_trace_view_does_not_take_answered_transfers_for_an_input_filter() -> None:
    """The view labels a handoff's rewritten transfer results as such, and only a filter's conversation as "messages kept"."""
    from toolfold.runtime._view import to_html

    page = to_html(_two_transfers().run("help").state)
    assert "to refunds<" in page.replace("</span>", "<")
    assert "messages kept" not in page
    triage = _two_transfers()
    late = triage.resume(_later_transfer_ran(triage), approvals={"t1": True})
    page = to_html(late.state)
    assert "to refunds (1 other transfer not taken)" in page
    assert "messages kept" not in page
    assert page.count("Not transferred: the conversation went to refunds") == 1

    def users_only(messages: tuple[Message, ...]) -> list[Message]:
        return [m for m in messages if m.role == "user"]

    target = Agent(ScriptedModel(["ok"]), name="target")
    source = Agent(
        ScriptedModel([call("move", {})]),
        name="source",
        handoffs=[Handoff(target, name="move", input_filter=users_only)],
    )
    assert "to target (1 messages kept)" in to_html(source.run("question").state)


def test_a_cancelled_round_keeps_the_transfers_that_ended_settled() -> None:
    """Cancelled while a third call runs, the run's state already says the second transfer did not transfer, and resuming hands off once."""
    reached = asyncio.Event()
    release = {"hold": True}

    @tool
    async def slow() -> str:
        """A tool that waits until cancelled."""
        if release["hold"]:
            reached.set()
            await asyncio.Event().wait()
        return "slow done"

    refunds = Agent(ScriptedModel(["refunded"]), name="refunds")
    billing = Agent(ScriptedModel(["billed"]), name="billing")
    calls = [call("transfer_to_refunds"), call("transfer_to_billing"), call("slow")]
    triage = Agent(ScriptedModel([calls]), name="triage", tools=[slow], handoffs=[refunds, billing])

    async def cancelled() -> BaseException:
        task = asyncio.ensure_future(triage.arun("help"))
        await reached.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        return caught.value

    from toolfold import state_of

    state = state_of(asyncio.run(cancelled()))
    assert isinstance(state, RunState)
    returned = [e for e in state.events if e.kind == "tool_returned"]
    assert [e.content[:16] for e in returned] == ["Transferred to r", "Not transferred:"]
    release["hold"] = False
    response = asyncio.run(triage.aresume(RunState.from_json(state.to_json())))
    assert (response.agent, response.text) == ("refunds", "refunded")
    (handed,) = [e for e in response.state.events if e.kind == "handed_off"]
    assert handed.messages is None
    _consistent(response.state)


def test_three_transfers_with_the_first_awaiting_approval_name_no_agent_before_it_is_decided() -> (
    None
):
    """Three transfers, the first awaiting approval: the third's logged result does not name the second's agent, and the handoff answers both later ones with the first's."""
    refunds = Agent(ScriptedModel(["refunded"]), name="refunds")
    billing = Agent(ScriptedModel(["billed"]), name="billing")
    sales = Agent(ScriptedModel(["sold"]), name="sales")
    triage = Agent(ScriptedModel([]), name="triage", handoffs=[refunds, billing, sales])
    failing = triage.evolve(model=FunctionModel(lambda request: 1 / 0))
    with pytest.raises(RunError) as failed:
        failing.run("help")
    names = ("transfer_to_refunds", "transfer_to_billing", "transfer_to_sales")
    answer = ModelResponse(
        Message.assistant("", tuple(ToolCallPart(f"t{i}", n) for i, n in enumerate(names, 1))),
        Usage(1, 1, requests=1),
        "tool_calls",
    )
    state = reduce(failed.value.state, ModelResponded(answer, ("approve", "execute", "execute")))
    waiting = triage.resume(RunState.from_json(state.to_json()))
    assert waiting.state.phase == "awaiting_approval"
    response = triage.resume(waiting.state, approvals={"t1": True})
    assert (response.agent, response.text) == ("refunds", "refunded")
    logged = [e.content for e in response.state.events if e.kind == "tool_returned"]
    assert not [c for c in logged if "went to billing" in c]
    assert _results(response)[1:] == [_LOST + _LOST_TAIL] * 2
    _consistent(response.state)


_LOST_TAIL = " (an earlier transfer in the same answer); one handoff per answer."


def test_resuming_another_agents_run_is_refused_naming_both() -> None:
    """An agent that neither started the run nor reaches its agent is refused naming both, and
    whether the run was handed off (then the agent that started it is named too)."""

    @tool(requires_approval=True)
    def act() -> str:
        """Act."""
        return "acted"

    alpha = Agent(ScriptedModel([call("act", {}), "done"]), name="alpha", tools=[act])
    beta = Agent(ScriptedModel(["done"]), name="beta", tools=[act])
    waiting = alpha.run("go")
    approvals = {c.id: True for c in waiting.pending_approvals}
    with pytest.raises(UsageError) as refused:
        beta.resume(waiting.state, approvals=approvals)
    assert str(refused.value) == (
        "the run belongs to agent 'alpha', not to this agent ('beta'), and 'alpha' is not "
        "among its handoffs (any depth): resume it with agent 'alpha'"
    )
    refunds = Agent(ScriptedModel([call("act", {}), "done"]), name="refunds", tools=[act])
    triage = Agent(
        ScriptedModel([call("transfer_to_refunds", {})]), name="triage", handoffs=[refunds]
    )
    handed = triage.run("go")
    assert handed.agent == "refunds"
    with pytest.raises(UsageError) as refused:
        beta.resume(handed.state, approvals={c.id: True for c in handed.pending_approvals})
    assert str(refused.value) == (
        "the run was handed to agent 'refunds', which is not among the handoffs (any depth) "
        "of this agent ('beta'): resume it with the agent that started it ('triage')"
    )
