"""Approvals, calls returned to the caller, and dispositions, at reducer level."""

from __future__ import annotations

import pytest
from core_helpers import call, responded, spec, start

from toolfold import InvalidEventError
from toolfold.runtime import (
    ApprovalDenied,
    ApprovalGranted,
    AwaitApproval,
    AwaitToolResults,
    CallModel,
    RunTools,
    ToolResultPart,
    ToolResultsProvided,
    ToolReturned,
    next_effect,
    reduce,
)


def test_approval_required_suspends_with_pending_approvals() -> None:
    """A call to a tool that always needs approval waits in awaiting_approval."""
    state = reduce(start(spec("rm", approval="always")), responded(call("c1", "rm")))
    assert state.phase == "awaiting_approval"
    assert [c.id for c in state.pending_approvals] == ["c1"]
    effect = next_effect(state)
    assert isinstance(effect, AwaitApproval)
    assert [c.id for c in effect.calls] == ["c1"]


def test_a_call_awaiting_approval_can_never_execute() -> None:
    """A ToolReturned for a call awaiting approval is refused: no execution without approval."""
    state = reduce(start(spec("rm", approval="always")), responded(call("c1", "rm")))
    with pytest.raises(InvalidEventError) as info:
        reduce(state, ToolReturned("c1", "deleted"))
    assert (info.value.phase, info.value.event) == ("awaiting_approval", "tool_returned")
    assert "call 'c1' to 'rm' awaits approval and cannot run without it" in str(info.value)
    assert state.calls[0].status == "awaiting_approval"


def test_a_call_awaiting_approval_cannot_execute_while_others_run() -> None:
    """Even while other calls run, a result for an unapproved call is refused."""
    tools = (spec("rm", approval="always"), spec("ls"))
    state = reduce(start(*tools), responded(call("c1", "rm"), call("c2", "ls")))
    assert state.phase == "running_tools"
    effect = next_effect(state)
    assert isinstance(effect, RunTools)
    assert [i.call.id for i in effect.calls] == ["c2"]
    with pytest.raises(InvalidEventError, match="awaits approval"):
        reduce(state, ToolReturned("c1", "deleted"))


def test_a_model_cannot_skip_approval_by_disposition() -> None:
    """An 'execute' disposition for a tool that always needs approval is refused."""
    state = start(spec("rm", approval="always"))
    with pytest.raises(InvalidEventError, match="requires approval"):
        reduce(state, responded(call("c1", "rm"), dispositions=("execute",)))


def test_approval_granted_runs_the_call() -> None:
    """After ApprovalGranted the call is run and its result committed."""
    state = reduce(start(spec("rm", approval="always")), responded(call("c1", "rm")))
    state = reduce(state, ApprovalGranted("c1"))
    effect = next_effect(state)
    assert isinstance(effect, RunTools)
    assert [i.key for i in effect.calls] == ["run:1:0"]
    state = reduce(state, ToolReturned("c1", "deleted"))
    assert state.phase == "awaiting_model"
    assert state.messages[-1].tool_results[0].content == "deleted"


def test_approval_denied_gives_the_model_an_error_result() -> None:
    """A denied call gets an error result with the reason, and is not a tool failure."""
    state = reduce(start(spec("rm", approval="always")), responded(call("c1", "rm")))
    state = reduce(state, ApprovalDenied("c1", "not on prod"))
    assert state.phase == "awaiting_model"
    (result,) = state.messages[-1].tool_results
    assert result.is_error
    assert result.content == "The user denied this tool call: not on prod"
    assert state.calls[0].outcome == "denied"
    assert state.failures == {}
    effect = next_effect(state)
    assert isinstance(effect, CallModel)
    assert effect.request.messages[-1].tool_results == (result,)


def test_approval_denied_without_reason() -> None:
    """A denial without a reason still says the call was denied."""
    state = reduce(start(spec("rm", approval="always")), responded(call("c1", "rm")))
    state = reduce(state, ApprovalDenied("c1"))
    assert state.messages[-1].tool_results[0].content == "The user denied this tool call."


def test_approval_for_a_call_not_awaiting_one_is_refused() -> None:
    """Approving a call that needs no approval is refused."""
    state = reduce(start(spec("ls")), responded(call("c1", "ls")))
    with pytest.raises(InvalidEventError, match="is to be executed"):
        reduce(state, ApprovalGranted("c1"))


def test_predicate_tools_need_dispositions() -> None:
    """A tool whose approval is a live predicate needs the driver's dispositions."""
    state = start(spec("pay", approval="predicate"))
    with pytest.raises(InvalidEventError, match="must carry dispositions"):
        reduce(state, responded(call("c1", "pay")))
    approve = reduce(state, responded(call("c1", "pay"), dispositions=("approve",)))
    assert approve.phase == "awaiting_approval"
    execute = reduce(state, responded(call("c1", "pay"), dispositions=("execute",)))
    assert execute.phase == "running_tools"


@pytest.mark.parametrize(
    ("tool", "disposition", "message"),
    [
        (spec("m", has_function=False), "execute", "without a function cannot be 'execute'"),
        (spec("m", has_function=False), "approve", "without a function cannot be 'approve'"),
        (spec("f"), "return", "a tool with a function is not returned"),
    ],
)
def test_dispositions_the_config_forbids_are_refused(tool, disposition, message) -> None:  # type: ignore[no-untyped-def]
    """The reducer checks each disposition against the tool's static flags."""
    with pytest.raises(InvalidEventError, match=message):
        reduce(start(tool), responded(call("c1", tool.name), dispositions=(disposition,)))


def test_dispositions_must_match_the_calls() -> None:
    """One disposition per call, or the event is refused."""
    state = start(spec("a"))
    with pytest.raises(InvalidEventError, match="1 dispositions for 2 tool calls"):
        reduce(state, responded(call("c1", "a"), call("c2", "a"), dispositions=("execute",)))


def test_tool_without_function_comes_back() -> None:
    """Calls to a tool without a function suspend the run in awaiting_tool_results."""
    state = reduce(start(spec("ask", has_function=False)), responded(call("c1", "ask")))
    assert state.phase == "awaiting_tool_results"
    assert [c.id for c in state.tool_calls] == ["c1"]
    assert next_effect(state) == AwaitToolResults(state.tool_calls)
    state = reduce(state, ToolResultsProvided([ToolResultPart("c1", "ask", "blue")]))
    assert state.phase == "awaiting_model"
    assert state.messages[-1].tool_results == (ToolResultPart("c1", "ask", "blue"),)


def test_mixed_step_runs_automatic_calls_first() -> None:
    """Automatic calls run, manual ones come back, and all results commit in call order."""
    tools = (spec("ask", has_function=False), spec("add"))
    state = reduce(start(*tools), responded(call("m1", "ask"), call("a1", "add")))
    effect = next_effect(state)
    assert isinstance(effect, RunTools)
    assert [i.call.id for i in effect.calls] == ["a1"]
    state = reduce(state, ToolReturned("a1", "3"))
    effect = next_effect(state)
    assert isinstance(effect, AwaitToolResults)
    assert [c.id for c in effect.calls] == ["m1"]
    state = reduce(state, ToolResultsProvided([ToolResultPart("m1", "whatever", "yes")]))
    results = state.messages[-1].tool_results
    assert [(r.call_id, r.tool_name) for r in results] == [("m1", "ask"), ("a1", "add")]


def test_partial_manual_results_wait_for_the_rest() -> None:
    """The caller may answer some returned calls now and the others later."""
    state = start(spec("ask", has_function=False))
    state = reduce(state, responded(call("c1", "ask"), call("c2", "ask")))
    state = reduce(state, ToolResultsProvided([ToolResultPart("c2", "ask", "two", is_error=True)]))
    assert state.phase == "awaiting_tool_results"
    assert [c.id for c in state.tool_calls] == ["c1"]
    state = reduce(state, ToolResultsProvided([ToolResultPart("c1", "ask", "one")]))
    assert [r.content for r in state.messages[-1].tool_results] == ["one", "two"]
    assert state.calls[1].outcome == "error"


def test_approvals_and_manual_results_in_one_resume() -> None:
    """While approvals are pending, the caller can also answer returned calls."""
    tools = (spec("rm", approval="always"), spec("ask", has_function=False))
    state = reduce(start(*tools), responded(call("c1", "rm"), call("c2", "ask")))
    effect = next_effect(state)
    assert isinstance(effect, AwaitApproval)
    assert [c.id for c in effect.tool_calls] == ["c2"]
    state = reduce(state, ToolResultsProvided([ToolResultPart("c2", "ask", "ok")]))
    state = reduce(state, ApprovalDenied("c1"))
    assert state.phase == "awaiting_model"


def test_manual_results_for_other_calls_are_refused() -> None:
    """ToolResultsProvided may only answer calls returned to the caller, once each."""
    tools = (spec("ask", has_function=False), spec("rm", approval="always"))
    state = reduce(start(*tools), responded(call("c1", "ask"), call("c2", "rm")))
    with pytest.raises(InvalidEventError, match="awaits approval"):
        reduce(state, ToolResultsProvided([ToolResultPart("c2", "rm", "done")]))
    with pytest.raises(InvalidEventError, match="repeat a call id"):
        reduce(
            state,
            ToolResultsProvided(
                [ToolResultPart("c1", "ask", "a"), ToolResultPart("c1", "ask", "b")]
            ),
        )
    with pytest.raises(InvalidEventError, match="no tool call 'zz'"):
        reduce(state, ToolResultsProvided([ToolResultPart("zz", "ask", "a")]))


def test_auto_execute_off_returns_every_call() -> None:
    """With auto_execute_tools=False every call, even an unknown one, comes back unexecuted."""
    state = start(spec("add"), spec("rm", approval="always"), auto_execute_tools=False)
    state = reduce(state, responded(call("c1", "add"), call("c2", "rm"), call("c3", "ghost")))
    assert state.phase == "awaiting_tool_results"
    assert [c.id for c in state.tool_calls] == ["c1", "c2", "c3"]
    with pytest.raises(InvalidEventError, match="must be 'return'"):
        reduce(
            start(spec("add"), auto_execute_tools=False),
            responded(call("c1", "add"), dispositions=("execute",)),
        )


def test_broken_arguments_of_a_returned_call_go_to_the_caller() -> None:
    """A returned call keeps its raw argument text; the caller decides what to do."""
    state = reduce(
        start(spec("ask", has_function=False)), responded(call("c1", "ask", text="{oops"))
    )
    assert state.phase == "awaiting_tool_results"
    assert state.tool_calls[0].arguments_text == "{oops"


def test_approval_tool_with_broken_arguments_is_not_asked() -> None:
    """Broken argument text gets an error result at once instead of an approval request."""
    state = start(spec("rm", approval="always"))
    state = reduce(state, responded(call("c1", "rm", text="{oops")))
    assert state.phase == "awaiting_model"
    assert state.messages[-1].tool_results[0].is_error
