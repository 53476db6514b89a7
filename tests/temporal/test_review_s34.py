"""What a user review of the durable docs found: bad settings, names and answers refused clearly."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from temporal_runs import _worker
from temporal_servers import DevServer
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from toolfold import Agent, UsageError, tool
from toolfold.integrations.temporal import (
    ActivitySettings,
    AgentHandle,
    TemporalAgent,
    ToolfoldPlugin,
)
from toolfold.runtime import (
    ApprovalDenied,
    ApprovalGranted,
    ModelRequest,
    ToolResultPart,
    ToolResultsProvided,
)
from toolfold.testing import FunctionModel


@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("model_timeout", 0, "datetime.timedelta greater than zero, got 0"),
        ("tool_timeout", "5m", "datetime.timedelta greater than zero, got '5m'"),
        ("heartbeat_timeout", timedelta(seconds=-1), "greater than zero"),
        ("model_timeout", timedelta(0), "greater than zero"),
        ("continue_as_new_steps", 0, "integer >= 1, or None, got 0"),
        ("continue_as_new_steps", -1, "integer >= 1, or None, got -1"),
        ("continue_as_new_steps", True, "integer >= 1, or None, got True"),
        ("max_result_bytes", 0, "integer >= 1, or None, got 0"),
        ("max_result_bytes", -5, "integer >= 1, or None, got -5"),
        ("retry_policy", None, "RetryPolicy, got None"),
    ],
)
def test_activity_settings_refuse_values_that_make_runs_retry_forever(
    setting: str, value: Any, expected: str
) -> None:
    """A setting that would fail every workflow task is a UsageError naming it and its value."""
    with pytest.raises(UsageError, match=f"ActivitySettings.{setting} must be") as raised:
        ActivitySettings(**{setting: value})
    assert expected in str(raised.value)


def test_activity_settings_accept_none_where_documented() -> None:
    """None stays allowed for continue_as_new_steps and max_result_bytes, 1 for both."""
    settings = ActivitySettings(continue_as_new_steps=None, max_result_bytes=None)
    assert settings.continue_as_new_steps is None
    assert settings.max_result_bytes is None
    assert ActivitySettings(continue_as_new_steps=1, max_result_bytes=1).max_result_bytes == 1


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: How much.
    """
    return f"paid {amount}"


def _pay_then_answer(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if last.role == "tool":
        return "done: " + last.tool_results[0].content
    return FunctionModel.call("pay", {"amount": 5})


payer = TemporalAgent(Agent(FunctionModel(_pay_then_answer), tools=[pay], name="s34payer"))
echo = TemporalAgent(
    Agent(
        FunctionModel(lambda request: f"{request.messages[-1].role}: {request.messages[-1].text}")
    ),
    name="s34echo",
)


def test_answering_a_run_that_is_over_raises_the_documented_update_error(
    server: DevServer,
) -> None:
    """approve() on a finished run raises WorkflowUpdateFailedError saying the run is over."""

    async def go() -> tuple[BaseException, BaseException, str]:
        async with _worker(server, [payer]) as (client, queue):
            handle = await payer.start(
                client, "pay", id=f"s34-over-{uuid.uuid4().hex}", task_queue=queue
            )
            state = await handle.suspended()
            await handle.approve(*(call.id for call in state.pending_approvals))
            text = (await handle.result()).text
            with pytest.raises(WorkflowUpdateFailedError) as over:
                await handle.approve("call_1_0")
            with pytest.raises(UsageError) as unknown:  # no such workflow
                await payer.handle(client, "s34-none").approve("call_1_0")
            return over.value, unknown.value, text

    over, unknown, text = asyncio.run(go())
    assert text == "done: paid 5"
    assert isinstance(over, WorkflowUpdateFailedError)
    assert isinstance(over.cause, ApplicationError)
    assert "is over (its workflow is completed): it waits for no answers" in str(over.cause)
    assert str(unknown).startswith("AgentHandle.approve(): no workflow has the id 's34-none' ")
    assert isinstance(unknown.__cause__, RPCError)
    assert unknown.__cause__.status == RPCStatusCode.NOT_FOUND


@pytest.mark.parametrize("method", ["state", "suspended", "result", "answer", "provide"])
def test_a_handle_of_an_id_no_workflow_has_says_so_naming_the_id(
    server: DevServer, method: str
) -> None:
    """state(), suspended(), result() and the answers on an unknown id raise a UsageError naming it, not an RPCError."""
    calls: dict[str, Callable[[AgentHandle], Awaitable[Any]]] = {
        "state": lambda h: h.state(),
        "suspended": lambda h: h.suspended(),
        "result": lambda h: h.result(),
        "answer": lambda h: h.answer(ApprovalGranted("call_1_0")),
        "provide": lambda h: h.provide([ToolResultPart("call_1_0", "pay", "paid")]),
    }

    async def go() -> UsageError:
        async with _worker(server, [payer]) as (client, _):
            with pytest.raises(UsageError) as unknown:
                await calls[method](payer.handle(client, "s35-never-started"))
            return unknown.value

    unknown = asyncio.run(go())
    assert str(unknown) == (
        f"AgentHandle.{method}(): no workflow has the id 's35-never-started' on this client's "
        "namespace (no run was started with this id, or its history was deleted after the "
        "namespace's retention period)"
    )
    assert isinstance(unknown.__cause__, RPCError)
    assert unknown.__cause__.status == RPCStatusCode.NOT_FOUND


@pytest.mark.parametrize("method", ["state", "suspended", "result", "answer", "provide"])
def test_a_handle_on_a_namespace_the_server_lacks_says_the_namespace_is_not_found(
    server: DevServer, method: str
) -> None:
    """A client connected to a namespace that does not exist gets Temporal's error naming it, not 'no workflow has the id'."""
    calls: dict[str, Callable[[AgentHandle], Awaitable[Any]]] = {
        "state": lambda h: h.state(),
        "suspended": lambda h: h.suspended(),
        "result": lambda h: h.result(),
        "answer": lambda h: h.answer(ApprovalGranted("call_1_0")),
        "provide": lambda h: h.provide([ToolResultPart("call_1_0", "pay", "paid")]),
    }

    async def go() -> RPCError:
        client = await Client.connect(
            server.address, namespace="s35-no-such-namespace", plugins=[ToolfoldPlugin([payer])]
        )
        with pytest.raises(RPCError) as missing:
            await calls[method](payer.handle(client, "s35-never-started"))
        return missing.value

    missing = asyncio.run(go())
    assert missing.status == RPCStatusCode.NOT_FOUND
    assert missing.message == "Namespace s35-no-such-namespace is not found."


def test_a_not_found_without_details_is_the_namespaces_only_when_its_message_says_so() -> None:
    """With no error details, a NOT_FOUND is the namespace's by its message, the workflow id's otherwise."""
    from toolfold.integrations.temporal._agent import _namespace_missing

    missing = RPCError("Namespace nowhere is not found.", RPCStatusCode.NOT_FOUND, b"")
    unknown = RPCError("workflow not found for ID: namespace-1", RPCStatusCode.NOT_FOUND, b"")
    assert (_namespace_missing(missing), _namespace_missing(unknown)) == (True, False)


def test_approve_refuses_no_call_a_call_twice_or_approved_and_denied(server: DevServer) -> None:
    """approve() with no ids, an id twice, or one id approved and denied is a UsageError naming it."""

    async def go() -> tuple[list[str], str]:
        refused: list[str] = []
        async with _worker(server, [payer]) as (client, queue):
            handle = await payer.start(
                client, "pay", id=f"s34-twice-{uuid.uuid4().hex}", task_queue=queue
            )
            state = await handle.suspended()
            call = state.pending_approvals[0].id
            for args, deny in [((), None), ((call, call), None), ((call,), {call: "no"})]:
                with pytest.raises(UsageError) as raised:
                    await handle.approve(*args, deny=deny)
                refused.append(str(raised.value))
            assert (await handle.state()).phase == "awaiting_approval"  # nothing was sent
            await handle.approve(call)
            return refused, (await handle.result()).text

    refused, text = asyncio.run(go())
    assert refused == [
        "approve() got no call id: name the calls to approve, approve('call_1'), or to deny, "
        "approve(deny={'call_1': 'reason'})",
        "approve() got call 'call_1_0' twice",
        "approve() got call 'call_1_0' approved and denied at once",
    ]
    assert text == "done: paid 5"


def test_answer_refuses_a_call_answered_twice_before_sending(server: DevServer) -> None:
    """answer(*events) naming one call twice, or approved and denied, is a UsageError naming it; nothing is sent."""

    async def go() -> tuple[list[str], str]:
        refused: list[str] = []
        async with _worker(server, [payer]) as (client, queue):
            handle = await payer.start(
                client, "pay", id=f"s35-twice-{uuid.uuid4().hex}", task_queue=queue
            )
            state = await handle.suspended()
            call = state.pending_approvals[0].id
            for events in [
                (ApprovalGranted(call), ApprovalGranted(call)),
                (ApprovalGranted(call), ApprovalDenied(call, "no")),
            ]:
                with pytest.raises(UsageError) as raised:
                    await handle.answer(*events)
                refused.append(str(raised.value))
            assert (await handle.state()).phase == "awaiting_approval"  # nothing was sent
            await handle.answer(ApprovalGranted(call))
            return refused, (await handle.result()).text

    refused, text = asyncio.run(go())
    assert refused == [
        "answer() got call 'call_1_0' twice",
        "answer() got call 'call_1_0' approved and denied at once",
    ]
    assert text == "done: paid 5"


@pytest.mark.parametrize(
    ("send", "expected"),
    [
        (
            lambda h: h.answer(
                ToolResultsProvided(
                    (ToolResultPart("c1", "pay", "a"), ToolResultPart("c1", "pay", "b"))
                )
            ),
            "answer() got call 'c1' twice",
        ),
        (
            lambda h: h.answer(
                ApprovalGranted("c2"), ToolResultsProvided((ToolResultPart("c2", "pay", "a"),))
            ),
            "answer() got call 'c2' approved and given a result at once",
        ),
        (
            lambda h: h.provide(
                [ToolResultPart("c1", "pay", "a"), ToolResultPart("c1", "pay", "b")]
            ),
            "provide() got call 'c1' twice",
        ),
    ],
)
def test_answer_and_provide_refuse_two_answers_to_one_call_with_no_server(
    send: Callable[[AgentHandle], Awaitable[Any]], expected: str
) -> None:
    """Two results for one call, or a result beside its approval, is refused on the client, naming the call."""
    workflow = _NoServer()
    handle = AgentHandle(payer, workflow)  # type: ignore[arg-type]
    with pytest.raises(UsageError) as raised:
        asyncio.run(send(handle))
    assert str(raised.value) == expected
    assert workflow.sent == []


def test_a_durable_run_takes_one_role_content_dict_as_its_prompt(server: DevServer) -> None:
    """TemporalAgent.start takes a lone role/content dict as one message, and refuses 42."""

    async def go() -> str:
        async with _worker(server, [echo]) as (client, queue):
            with pytest.raises(UsageError, match=r"a prompt must be a str, .* got int"):
                await echo.start(client, 42, id=f"s34-int-{uuid.uuid4().hex}", task_queue=queue)  # type: ignore[arg-type]
            prompt = {"role": "user", "content": "hi"}
            run_id = f"s34-dict-{uuid.uuid4().hex}"
            return (await echo.run(client, prompt, id=run_id, task_queue=queue)).text

    assert asyncio.run(go()) == "user: hi"


def test_agents_whose_activity_names_clash_are_refused_naming_both() -> None:
    """An agent named 'desk.ask' beside agent 'desk' with sub-agent 'ask' is refused by the plugin."""
    ask = Agent(FunctionModel(lambda request: "y"), name="ask")
    desk = TemporalAgent(
        Agent(FunctionModel(lambda request: "x"), tools=[ask.as_tool()], name="desk")
    )
    dotted = TemporalAgent(Agent(FunctionModel(lambda request: "z"), name="desk.ask"))
    with pytest.raises(UsageError) as raised:
        ToolfoldPlugin([desk, dotted])
    assert str(raised.value).startswith(
        "agents 'desk' and 'desk.ask' both make the activity 'desk.ask__model_request'"
    )
    assert ToolfoldPlugin([dotted]) is not None  # a dotted name alone still runs


class _NoServer:
    """A workflow handle that records what would be sent: none of these calls may get that far."""

    id = "s34-no-server"

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def execute_update(self, update: Any, arg: Any) -> Any:
        self.sent.append(arg)
        raise AssertionError("the handle sent an update it should have refused")


_EXAMPLE = " (provide([ToolResultPart('call_1', 'ask_user', 'Paris')]))"


@pytest.mark.parametrize(
    ("send", "expected"),
    [
        (
            lambda h: h.provide([{"call_id": "c1", "content": "x"}]),
            "provide(): results[0] must be a ToolResultPart, got dict {'call_id': 'c1', "
            "'content': 'x'}"
            f"{_EXAMPLE}",
        ),
        (
            lambda h: h.provide([ToolResultPart("c1", "pay", "a"), ("c2", "x")]),
            f"provide(): results[1] must be a ToolResultPart, got tuple ('c2', 'x'){_EXAMPLE}",
        ),
        (
            lambda h: h.answer(ApprovalGranted(["c1"])),
            "answer() event 0 (ApprovalGranted): call_id must be a str, got list ['c1']",
        ),
        (
            lambda h: h.answer(ApprovalGranted("c1"), ApprovalDenied(7, "no")),
            "answer() event 1 (ApprovalDenied): call_id must be a str, got int 7",
        ),
    ],
)
def test_answer_and_provide_refuse_wrong_shapes_naming_where_with_no_server(
    send: Callable[[AgentHandle], Awaitable[Any]], expected: str
) -> None:
    """A result that is no ToolResultPart or a call id that is no str is a UsageError naming its index and type."""
    workflow = _NoServer()
    handle = AgentHandle(payer, workflow)  # type: ignore[arg-type]
    with pytest.raises(UsageError) as raised:
        asyncio.run(send(handle))
    assert str(raised.value) == expected
    assert workflow.sent == []


def test_answer_reports_every_problem_at_once_with_no_server() -> None:
    """Wrong shapes, calls answered twice and calls answered two ways are all named in one UsageError."""
    workflow = _NoServer()
    handle = AgentHandle(payer, workflow)  # type: ignore[arg-type]
    events = (
        ApprovalGranted("a"),
        ApprovalGranted("a"),
        ApprovalGranted("b"),
        ApprovalDenied("b"),
        ApprovalGranted("c"),
        ToolResultsProvided((ToolResultPart("c", "pay", "x"), {"call_id": "d"})),  # type: ignore[arg-type]
    )
    with pytest.raises(UsageError) as raised:
        asyncio.run(handle.answer(*events))
    assert str(raised.value) == (
        "answer() event 5 (ToolResultsProvided): result 1: expected a ToolResultPart, got dict; "
        "got call 'a' twice; got call 'b' approved and denied at once; "
        "got call 'c' approved and given a result at once"
    )
    assert workflow.sent == []


@pytest.mark.parametrize(
    ("args", "deny", "expected"),
    [
        (
            (["call_1", "call_2"],),
            None,
            "approve() takes call ids (str) as separate arguments, approve(*ids); "
            "got list ['call_1', 'call_2']",
        ),
        (
            (7,),
            None,
            "approve() takes call ids (str) as separate arguments, approve(*ids); got int 7",
        ),
        (
            ("call_1",),
            ["call_2"],
            "approve(deny=) takes a mapping of call id to reason, deny={'call_1': 'reason'}; "
            "got list ['call_2']",
        ),
        (
            (),
            {"call_2": None},
            "approve(deny=) maps call ids (str) to reasons (str), got 'call_2': None",
        ),
    ],
)
def test_approve_refuses_ids_that_are_not_str_and_a_deny_that_is_no_mapping(
    args: tuple[Any, ...], deny: Any, expected: str
) -> None:
    """approve([ids]) or deny=[ids] is a UsageError saying how to pass them, before anything is sent."""
    workflow = _NoServer()
    handle = AgentHandle(payer, workflow)  # type: ignore[arg-type]
    with pytest.raises(UsageError) as raised:
        asyncio.run(handle.approve(*args, deny=deny))
    assert str(raised.value) == expected
    assert workflow.sent == []
