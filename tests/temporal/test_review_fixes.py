"""Durable runs end as local ones where a review found they did not (on a real dev server)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any

import attrs
import pytest
import temporal_app
from temporal_runs import _decoded, _worker
from temporal_servers import DevServer
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Replayer

import toolfold.integrations.temporal._agent as agent_module
import toolfold.integrations.temporal._workflow as workflow_module
from toolfold import (
    Agent,
    OutputValidationError,
    RunContext,
    RunError,
    Sequence,
    Task,
    Tool,
    ToolDefinitionError,
    ToolExecutionError,
    tool,
)
from toolfold.files import loads
from toolfold.integrations.temporal import ActivitySettings, TemporalAgent, ToolfoldPlugin
from toolfold.integrations.temporal._activities import (
    SourceCallInput,
    SourceHost,
    ToolCallInput,
    source_call_activity,
)
from toolfold.integrations.temporal._agent import _raised
from toolfold.integrations.temporal._converter import data_converter
from toolfold.runtime import Message, TokenBudget, Usage
from toolfold.runtime.core._effects import ToolInvocation
from toolfold.runtime.core._events import ToolReturned
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.testing import FunctionModel

# A sub-agent whose first step is cut short after one of its calls ended (another call
# raised with on_tool_error="raise", or outlived its timeout), called twice with the same
# call id: the second call's tool must run again, as locally.
_KEYS: list[str] = []  # the idempotency key of each call of `fresh` that really ran


@tool
def fresh(ctx: RunContext[Any]) -> str:
    """A new value each time it really runs."""
    _KEYS.append(ctx.idempotency_key)
    return f"fresh result #{len(_KEYS)}"


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("broken failed")


@tool
async def hung() -> str:
    """Never returns: waits until cancelled."""
    await asyncio.Event().wait()
    return "never"


def _cut_short(beside: str) -> Callable[[ModelRequest], Any]:
    """A sub-agent's model: `fresh` and ``beside`` first, then `fresh` alone, each as call_0."""

    def model(request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "user":
            again = FunctionModel.call("fresh", {}, id="call_0")
            return [again, FunctionModel.call(beside, {})] if "first" in last.text else again
        return "sub saw: " + last.tool_results[0].content

    return model


def _calling_twice(sub: str) -> Callable[[ModelRequest], Any]:
    """A top agent's model: calls ``sub`` twice, reusing its call id (as some models do)."""

    def model(request: ModelRequest) -> Any:
        results = [m for m in request.messages if m.role == "tool"]
        if len(results) < 2:
            text = "first" if not results else "second"
            return FunctionModel.call(sub, {"input": text}, id="call_0")
        return "top saw: " + results[-1].tool_results[0].content

    return model


_raiser = Agent(
    FunctionModel(_cut_short("broken")),
    name="raiser",
    tools=[fresh, broken],
    on_tool_error="raise",
)
_timed = Agent(FunctionModel(_cut_short("hung")), name="timed", tools=[fresh, hung])
reusing = TemporalAgent(
    Agent(FunctionModel(_calling_twice("raiser")), name="reusing", tools=[_raiser.as_tool()]),
    settings=attrs.evolve(temporal_app.SETTINGS, continue_as_new_steps=2),
)
reusing_timed = TemporalAgent(
    Agent(
        FunctionModel(_calling_twice("timed")),
        name="reusing_timed",
        tools=[_timed.as_tool(timeout=temporal_app.TIMEOUT)],
    ),
    settings=attrs.evolve(temporal_app.SETTINGS, continue_as_new_steps=2),
)


@pytest.mark.parametrize("agent", [reusing, reusing_timed], ids=["raised", "timed-out"])
def test_a_reused_call_id_after_a_sub_run_cut_short_runs_its_tool_again(
    agent: TemporalAgent, server: DevServer
) -> None:
    """A sub-run that raised or timed out leaves nothing behind: a later call reusing its path runs afresh, with a local run's sub-run ids."""

    async def go() -> Any:
        async with _worker(server, [agent]) as (client, queue):
            return await agent.run(client, "go", id=f"{agent.name}-1", task_queue=queue)

    _KEYS.clear()
    durable = asyncio.run(go())
    durable_keys = list(_KEYS)
    _KEYS.clear()
    local = agent.agent.run("go", run_id=f"{agent.name}-1")
    assert durable.text == local.text == "top saw: sub saw: fresh result #2"
    assert durable_keys == _KEYS  # the second sub-run is "<run id>/call_0@<step>", as locally
    assert len(set(durable_keys)) == 2
    assert durable.state == local.state


def _first_then_answer(*calls: Any) -> Callable[[ModelRequest], Any]:
    """A model that makes ``calls`` (one step) first, then answers with the results it saw."""

    def model(request: ModelRequest) -> Any:
        results = [r.content for m in request.messages for r in m.tool_results]
        return f"saw {results}" if results else list(calls)

    return model


# lead -> mid (as_tool(timeout=)) -> fresh and bottom side by side; bottom calls `hung`.
_bottom = Agent(
    FunctionModel(_first_then_answer(FunctionModel.call("hung", {}))), name="bottom", tools=[hung]
)
_mid = Agent(
    FunctionModel(
        _first_then_answer(
            FunctionModel.call("fresh", {}), FunctionModel.call("bottom", {"input": "go"})
        )
    ),
    name="mid",
    tools=[fresh, _bottom.as_tool()],
)
timed_tree = TemporalAgent(
    Agent(
        FunctionModel(_first_then_answer(FunctionModel.call("mid", {"input": "go"}))),
        name="timed_tree",
        tools=[_mid.as_tool(timeout=temporal_app.TIMEOUT)],
    ),
    settings=temporal_app.SETTINGS,
)


def test_a_timed_out_sub_run_is_kept_where_it_stopped_as_locally(server: DevServer) -> None:
    """A sub-run stopped by its as_tool() timeout stays on the call's result, with its ended call and its own sub-run where they stopped, as locally."""

    async def go() -> Any:
        async with _worker(server, [timed_tree]) as (client, queue):
            return await timed_tree.run(client, "go", id="timed_tree-1", task_queue=queue)

    _KEYS.clear()  # (`fresh` numbers its results)
    durable = asyncio.run(go())
    _KEYS.clear()
    local = timed_tree.agent.run("go", run_id="timed_tree-1")
    message = f"Error: tool 'mid' timed out after {temporal_app.TIMEOUT:g} s."
    assert durable.text == local.text == f"saw [{message!r}]"
    assert durable.state == local.state
    mid = durable.state.sub_runs["call_1_0"]
    assert [(c.call.name, c.status) for c in mid.calls] == [("fresh", "done"), ("bottom", "to_run")]
    bottom = mid.calls[1].child
    assert bottom is not None
    assert [(c.call.name, c.status) for c in bottom.calls] == [("hung", "to_run")]
    assert durable.usage.requests == 4  # lead's two, mid's and bottom's one each


# A step whose prompt names the value of a step that was skipped: rendering it fails.
def _research(text: str) -> str:
    raise RuntimeError("down")


skipped = TemporalAgent(
    Sequence(
        Task(_research, name="research", on_error="skip"),
        Task(Agent(FunctionModel(lambda r: "ok"), name="writer"), prompt="Write up {research}."),
        name="skipped",
    )
)


def test_a_step_that_cannot_start_fails_the_run_as_locally(server: DevServer) -> None:
    """A step's prompt that cannot be rendered fails the durable run with the local run's error (it does not hang)."""

    async def go() -> BaseException:
        async with _worker(server, [skipped]) as (client, queue):
            handle = await skipped.start(client, "x", id="skipped-1", task_queue=queue)
            try:
                with pytest.raises(RunError) as raised:
                    await asyncio.wait_for(handle.result(), timeout=120)
            except BaseException:  # hung: its workflow task fails again and again
                await handle.workflow.terminate()  # (else the worker never shuts down)
                raise
            return raised.value

    durable = asyncio.run(go())
    with pytest.raises(RunError) as local:
        skipped.agent.run("x", run_id="skipped-1")
    assert type(durable) is type(local.value)
    assert str(durable) == str(local.value)
    assert "TemplateError: {research}: no value named 'research'" in str(durable)
    assert durable.state == local.value.state


@pytest.mark.parametrize(
    ("failure", "raised"),
    [
        ("ToolExecutionError", ToolExecutionError),
        ("OutputValidationError", OutputValidationError),
        ("InvalidTransitionError", RunError),
        ("InvalidEventError", RunError),
        ("RunError", RunError),
    ],
)
def test_a_failed_run_raises_its_error_class_when_it_can_be_rebuilt(
    failure: str, raised: type[RunError]
) -> None:
    """A run that failed with a RunError comes back as its class when (message, state) builds it, else as a RunError."""
    made = _raised(ApplicationError("boom", type=f"toolfold.{failure}"))
    assert made is raised
    error = made("boom", None)  # as AgentHandle.result() builds it
    assert (type(error), str(error), error.state) == (raised, "boom", None)


# Agents of one file handing over to each other: the file builds one of the two handoffs
# by name (the step's agent's here), which a run describes as its target.
_DESK = """
entry = "desk_flow"

[agents.front]
model = "openai:gpt-4o-mini"
instructions = "Greets."
handoffs = ["accounts"]

[agents.accounts]
model = "openai:gpt-4o-mini"
instructions = "Handles invoices and refunds."
handoffs = ["front"]

[workflows.desk_flow]
kind = "sequence"
steps = ["accounts"]
"""
_SEEN: list[dict[str, str]] = []  # the tool descriptions of each model request


def _front_model(request: ModelRequest) -> Any:
    _SEEN.append({t.name: t.description for t in request.tools})
    return "hello"


def test_a_step_agent_describes_its_handoffs_by_name_as_locally(server: DevServer) -> None:
    """A workflow step's agent handing over by name shows the model the transfer tool a local run shows."""
    flow = loads(_DESK, model=FunctionModel(_front_model)).workflows["desk_flow"]
    durable_flow = TemporalAgent(flow)

    async def go() -> Any:
        async with _worker(server, [durable_flow]) as (client, queue):
            return await durable_flow.run(client, "hi", id="desk-flow-1", task_queue=queue)

    _SEEN.clear()
    durable = asyncio.run(go())
    durable_seen = list(_SEEN)
    _SEEN.clear()
    local = flow.run("hi", run_id="desk-flow-1")
    assert durable_seen == _SEEN
    assert durable_seen[-1]["transfer_to_front"].endswith("It: Greets.")
    assert durable.state == local.state


class _SlowSource:
    """A tool source whose `open` blocks until released (a stdio MCP server starting), counting holds."""

    def __init__(self) -> None:
        self.holders = 0
        self.opening = threading.Event()
        self.release = threading.Event()

    def listing(self) -> list[dict[str, Any]]:
        return [{"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}]

    def tools_from(self, listed: Seq[Mapping[str, Any]]) -> tuple[Tool[..., Any], ...]:
        @tool(name="echo")
        def echo() -> str:
            """Echo."""
            return "hi"

        return (echo,)

    def open(self) -> None:
        self.opening.set()
        assert self.release.wait(timeout=60)
        self.holders += 1

    def close(self) -> None:
        self.holders -= 1


def _calling_echo(source: _SlowSource) -> tuple[ActivityEnvironment, asyncio.Future[Any]]:
    """The source call activity calling ``source``'s echo, running in an activity environment."""
    call = source_call_activity({"node": SourceHost((source,), None, 0.1, None)})
    invocation = ToolInvocation(ToolCallPart("c1", "echo", "{}", {}), 0, 1, "r:1:0")
    given = SourceCallInput("node", 0, source.listing()[0], ToolCallInput(invocation, "r"))
    (payload,) = data_converter.payload_converter.to_payloads([given])
    env = ActivityEnvironment()
    env.payload_converter = data_converter.payload_converter
    return env, asyncio.ensure_future(env.run(call, [RawValue(payload)]))


def test_an_activity_cancelled_while_its_source_opens_closes_it() -> None:
    """A source call cancelled while its source opens closes the source once open: no hold is left."""
    source = _SlowSource()

    async def go() -> None:
        env, running = _calling_echo(source)
        assert await asyncio.to_thread(source.opening.wait, 60)
        env.cancel()  # (a timed sub-run's deadline, a worker shutting down...)
        source.release.set()  # the thread opens the source all the same
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(go())
    assert source.holders == 0


class _StuckSource(_SlowSource):
    """A source whose tool waits until cancelled and whose close fails."""

    def __init__(self) -> None:
        super().__init__()
        self.release.set()
        self.calling = threading.Event()

    def tools_from(self, listed: Seq[Mapping[str, Any]]) -> tuple[Tool[..., Any], ...]:
        calling = self.calling

        @tool(name="echo")
        async def echo() -> str:
            """Echo."""
            calling.set()
            await asyncio.Event().wait()
            return "never"

        return (echo,)

    def close(self) -> None:
        super().close()
        raise OSError("the server would not stop")


def test_an_activity_cancelled_during_its_call_stays_cancelled_when_the_close_fails() -> None:
    """A source call cancelled mid-call raises CancelledError (close error attached), not the close's error."""
    source = _StuckSource()

    async def go() -> BaseException:
        env, running = _calling_echo(source)
        assert await asyncio.to_thread(source.calling.wait, 60)
        env.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await running
        return caught.value

    cancelled = asyncio.run(go())
    while sys.version_info < (3, 11) and not hasattr(cancelled, "close_errors"):
        # 3.10: each task awaiting a cancelled one gets a new CancelledError whose
        # __context__ is the one it awaited (the activity runs in nested tasks)
        assert isinstance(cancelled.__context__, asyncio.CancelledError)
        cancelled = cancelled.__context__
    assert [str(e) for e in cancelled.close_errors] == ["the server would not stop"]  # type: ignore[attr-defined]
    assert source.holders == 0


class _ClosingBadly(_SlowSource):
    """A source whose tool answers and whose close fails."""

    def __init__(self) -> None:
        super().__init__()
        self.release.set()

    def close(self) -> None:
        super().close()
        raise OSError("the server would not stop")


def test_a_source_call_that_returned_keeps_its_result_when_the_close_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The tool ran: a failing close is logged, not raised, as Temporal would retry and run it again."""
    source = _ClosingBadly()

    async def go() -> Any:
        _, running = _calling_echo(source)
        return await running

    with caplog.at_level(logging.WARNING):
        returned = _decoded(asyncio.run(go()), ToolReturned)
    assert returned.content == "hi"
    assert not returned.is_error
    assert source.holders == 0
    (record,) = [r for r in caplog.records if "closing tool source" in r.getMessage()]
    assert "OSError: the server would not stop" in record.getMessage()
    assert "'echo' returned" in record.getMessage()


# A run that continues as new after its first step, then waits for an approval.
_HOLD = threading.Event()


@tool
def held() -> str:
    """Returns once `_HOLD` is set."""
    assert _HOLD.wait(timeout=60), "_HOLD was never set"
    return "held"


@tool(requires_approval=True)
def gated() -> str:
    """Needs an approval."""
    return "gated"


def _hold_then_gate(request: ModelRequest) -> Any:
    steps = sum(m.role == "tool" for m in request.messages)
    return FunctionModel.call("held" if steps == 0 else "gated", {}) if steps < 2 else "done"


handing = TemporalAgent(
    Agent(FunctionModel(_hold_then_gate), tools=[held, gated], name="handing"),
    settings=ActivitySettings(continue_as_new_steps=1),
)


_UPDATE_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED


def test_suspended_waits_before_asking_a_run_handing_over_again(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AgentHandle.suspended() answered early by a run continuing as new pauses before it asks the next one."""
    pauses: list[float] = []
    pause = agent_module._pause

    async def counted(seconds: float) -> None:
        pauses.append(seconds)
        await pause(seconds)

    monkeypatch.setattr(agent_module, "_pause", counted)

    async def accepted(handle: Any) -> bool:
        history = await handle.workflow.fetch_history()
        return any(e.event_type == _UPDATE_ACCEPTED for e in history.events)

    async def go() -> Any:
        _HOLD.clear()
        async with _worker(server, [handing]) as (client, queue):
            handle = await handing.start(client, "go", id="handing-1", task_queue=queue)
            asking = asyncio.ensure_future(handle.suspended())
            while not await accepted(handle):  # the update waits in the first history
                pass
            _HOLD.set()  # the step ends: the run continues as new, answering the update early
            state = await asyncio.wait_for(asking, timeout=120)
            await handle.workflow.cancel()
            return state

    state = asyncio.run(go())
    assert state.phase == "awaiting_approval"
    assert [call.name for call in state.pending_approvals] == ["gated"]
    assert pauses[:1] == [agent_module._BACKOFF[0]]


quick = TemporalAgent(Agent(FunctionModel(lambda request: "hi"), name="quick"))


def test_suspended_on_a_run_that_is_over_returns_its_final_state(server: DevServer) -> None:
    """AgentHandle.suspended() on a run that ended (maybe while it handed over) returns its final state."""

    async def go() -> Any:
        async with _worker(server, [quick]) as (client, queue):
            handle = await quick.start(client, "go", id="quick-1", task_queue=queue)
            response = await handle.result()
            return response, await handle.suspended()

    response, state = asyncio.run(go())
    assert state.phase == "finished"
    assert state == response.state


def test_a_listed_tool_clashing_with_an_agent_s_own_is_refused_naming_the_agent() -> None:
    """A durable run builds an agent's tools from its sources' recorded listing: a listed
    tool that takes a name the agent already has is refused naming the agent, as a local
    run's handoff names it."""
    from toolfold.integrations.temporal._nested import listed, node

    @tool(name="echo")
    def own() -> str:
        """Echo."""
        return "mine"

    class Listed(_SlowSource):
        def tools(self) -> tuple[Tool[..., Any], ...]:
            return self.tools_from(self.listing())

    source = Listed()
    billing = Agent(
        FunctionModel(lambda messages, info: "done"), tools=[own, source], name="billing"
    )
    top = node("billing", billing)
    with pytest.raises(
        ToolDefinitionError, match=r"^duplicate tool names in the tools of agent 'billing': "
    ):
        listed(top, ((source.listing()[0],),))


# --- a custom model's fractional counts: exact in new runs, truncated in recorded ones ---


@tool
def noop() -> str:
    """Does nothing."""
    return "ok"


def _fractional_counts(request: ModelRequest) -> ModelResponse:
    """Calls `noop` every step, reporting 1.5 input and 1.5 output tokens a call."""
    call = ToolCallPart(f"call_{len(request.messages)}", "noop", "{}", {})
    usage = Usage(1.5, 1.5, requests=1)  # type: ignore[arg-type]
    return ModelResponse(Message.assistant("", [call]), usage, "tool_calls")


fractional = TemporalAgent(
    Agent(
        FunctionModel(_fractional_counts),
        name="fractional",
        tools=[noop],
        stop_when=[TokenBudget(3)],
    ),
    settings=temporal_app.SETTINGS,
)


def test_fractional_counts_decide_as_recorded_and_exactly_in_new_runs(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run recorded when counts loaded truncated (1+1 < 3: two calls) replays; a new run
    counts 1.5+1.5 and its TokenBudget(3) stops after one call."""

    async def run(id: str) -> tuple[Any, WorkflowHistory]:
        async with _worker(server, [fractional]) as (client, queue):
            response = await fractional.run(client, "go", id=id, task_queue=queue)
            return response, await fractional.handle(client, id).workflow.fetch_history()

    patched = workflow_module.workflow.patched
    with monkeypatch.context() as before:  # a worker from before: no marker, counts truncated
        before.setattr(
            workflow_module.workflow,
            "patched",
            lambda patch_id: patch_id != "toolfold-exact-counts" and patched(patch_id),
        )
        recorded, history = asyncio.run(run("fractional-recorded"))
    new, _ = asyncio.run(run("fractional-new"))
    assert (recorded.state.usage.requests, recorded.state.usage.total_tokens) == (2, 4)
    assert (new.state.usage.requests, new.state.usage.total_tokens) == (1, 3.0)
    assert new.state == fractional.agent.run("go", run_id="fractional-new").state
    replayer = Replayer(workflows=[], plugins=[ToolfoldPlugin([fractional])])
    asyncio.run(replayer.replay_workflow(history))  # decides as recorded: no NondeterminismError


def python_threads() -> set[threading.Thread]:
    """The threads Python started and that are still alive.

    Not threading.active_count(): it also counts each foreign thread that has called into
    Python (a `_DummyThread`, kept from then on). The suite's earlier tests leave native
    runtimes running (Ray's, Temporal's core) whose threads can first call into Python at
    any time; a test that starts only Python threads is judged by those alone, and a
    failure names them.
    """
    return {
        thread for thread in threading.enumerate() if not isinstance(thread, threading._DummyThread)
    }


def test_a_list_activity_cancelled_while_its_server_lists_stops_the_listing(
    tmp_path: Path,
) -> None:
    """The list activity, cancelled while its MCP server has not answered tools/list, cancels
    the request and closes the server, as a local run does: its worker thread ends, so
    asyncio.run returns without waiting for `timeout`, and no process is left."""
    from tests.ecosystem.conftest import ROOT, children
    from toolfold.integrations.temporal._activities import list_activity_name
    from toolfold.mcp import MCPServerStdio
    from toolfold.testing import ScriptedModel

    before, threads = children(), python_threads()
    asked = tmp_path / "asked"
    os.mkfifo(asked)
    script = str(ROOT / "tests/ecosystem/hanging_list_server.py")
    # timeout is past the join below: a listing left to time out keeps asyncio.run going
    server = MCPServerStdio(sys.executable, [script, str(asked)], name="hanging", timeout=60)
    agent = TemporalAgent(Agent(ScriptedModel(["done"]), tools=[server], name="lister"))
    (list_tools,) = [
        made
        for made in agent.activities
        if getattr(made, "__temporal_activity_definition").name == list_activity_name("lister")
    ]
    environment = ActivityEnvironment()

    async def main() -> None:
        listing = asyncio.ensure_future(environment.run(list_tools))
        await asyncio.to_thread(lambda: asked.open().close())  # the server has tools/list
        environment.cancel()
        with pytest.raises(asyncio.CancelledError):
            await listing

    runner = threading.Thread(target=asyncio.run, args=(main(),))
    runner.start()
    runner.join(timeout=30)  # bounds a hang, well under the listing's timeout
    assert not runner.is_alive()  # the listing's worker thread ended, so asyncio.run returned
    assert [thread.name for thread in python_threads() - threads] == []
    assert not server.is_open
    assert children() == before


def test_a_durable_run_cancelled_while_its_server_lists_stops_the_listing(
    server: DevServer, tmp_path: Path
) -> None:
    """A durable run cancelled while its MCP server has not answered the list activity's
    tools/list (on a real dev server) stops the listing: the worker shuts down, asyncio.run
    returns without waiting for the server's `timeout`, and no process is left."""
    from temporalio.client import WorkflowFailureError

    from tests.ecosystem.conftest import ROOT, children
    from toolfold.mcp import MCPServerStdio
    from toolfold.testing import ScriptedModel

    before = children()
    asked = tmp_path / "asked"
    os.mkfifo(asked)
    script = str(ROOT / "tests/ecosystem/hanging_list_server.py")
    # timeout is past the join below: a listing left to time out keeps asyncio.run going
    mcp = MCPServerStdio(sys.executable, [script, str(asked)], name="hanging", timeout=60)
    agent = TemporalAgent(Agent(ScriptedModel(["done"]), tools=[mcp], name="durable-lister"))

    async def go() -> None:
        async with _worker(server, [agent]) as (client, queue):
            handle = await agent.start(client, "go", id="durable-lister-1", task_queue=queue)
            await asyncio.to_thread(lambda: asked.open().close())  # the server has tools/list
            await handle.workflow.cancel()
            with pytest.raises(WorkflowFailureError):
                await handle.workflow.result()

    runner = threading.Thread(target=asyncio.run, args=(go(),))
    runner.start()
    runner.join(timeout=45)  # bounds a hang, under the listing's timeout
    assert not runner.is_alive()  # the listing's worker thread ended, so asyncio.run returned
    assert not mcp.is_open
    assert children() == before


def test_the_app_logs_into_a_temporary_folder_when_no_log_dir_is_given(tmp_path: Path) -> None:
    """Without ``TOOLFOLD_TEMPORAL_LOG_DIR`` the app's tools log into a temporary folder, not
    the current one (a test run left a stray tools.log at the repository's root)."""
    import subprocess

    here = Path(temporal_app.__file__).parent
    env = {k: v for k, v in os.environ.items() if k != "TOOLFOLD_TEMPORAL_LOG_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(here), str(here.parents[1])])
    code = (
        "import temporal_app; print(temporal_app.LOG_DIR.resolve(), temporal_app.LOG_DIR.is_dir())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    folder, made = proc.stdout.split()
    assert (Path(folder) != tmp_path.resolve(), made) == (True, "True")
    assert not Path(folder).exists()  # removed when the process ended
