"""The blocking API called inside a running event loop (a notebook cell, async code).

Such a call runs its coroutine on another thread (`run_blocking`): it must see
the caller's context variables, and Ctrl-C landing in the caller's wait must
stop what it runs there, as it does in a plain script.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import signal
import threading
from typing import Any

import pytest
from child_processes import in_forked_child
from interrupt_helpers import ctrl_c, state_on

from toolfold import Agent, ModelRequest, tool
from toolfold.testing import FunctionModel

call = FunctionModel.call

tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="<unset>")


def _calling(*names: str) -> Any:
    """A model calling ``names`` once, then answering with what they returned."""

    def reply(request: ModelRequest) -> Any:
        results = sorted(str(r.content) for m in request.messages for r in m.tool_results)
        if results:
            return " | ".join(results)
        return [call(name, {}, id=name) for name in names]

    return reply


def test_blocking_calls_inside_a_running_loop_see_the_callers_context_variables() -> None:
    """run() and stream() in async code: tools and an async model see the caller's contextvars."""
    seen: list[str] = []

    @tool
    def sync_tool() -> str:
        """Sync."""
        return "sync:" + tenant.get()

    @tool
    async def async_tool() -> str:
        """Async."""
        return "async:" + tenant.get()

    async def model(request: ModelRequest) -> Any:
        seen.append(tenant.get())
        return _calling("async_tool", "sync_tool")(request)

    agent = Agent(FunctionModel(model), tools=[sync_tool, async_tool])

    async def handler() -> tuple[str, list[Any]]:
        tenant.set("acme")
        ran = agent.run("go").text
        streamed = [event for event in agent.stream("go") if event.kind == "tool_result"]
        return ran, streamed

    ran, streamed = asyncio.run(handler())
    assert ran == "async:acme | sync:acme"
    assert sorted(event.result.content for event in streamed) == ["async:acme", "sync:acme"]
    assert seen == ["acme"] * 4


def test_ctrl_c_in_a_blocking_run_inside_a_running_loop_cancels_its_async_tool() -> None:
    """Ctrl-C as a notebook cell's blocking run waits: its async tool is cancelled before it is raised."""
    log: list[str] = []
    held: dict[str, Any] = {}
    ended = threading.Event()

    @tool
    async def charge_card() -> str:
        """Charge the card (must not run twice)."""
        loop = asyncio.get_running_loop()
        held["loop"], held["release"] = loop, loop.create_future()
        try:
            ctrl_c()  # lands in the caller's wait, on the main thread
            await held["release"]
        except asyncio.CancelledError:
            log.append("cancelled")
            raise
        finally:
            ended.set()
        log.append("CHARGED")
        return "charged"

    agent = Agent(FunctionModel(_calling("charge_card")), tools=[charge_card])

    async def cell() -> BaseException:
        # ipykernel's SIGINT handler raises KeyboardInterrupt where the cell's code is
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            agent.run("pay")
        except KeyboardInterrupt as exc:
            return exc
        raise AssertionError("the run was not interrupted")

    error = asyncio.run(cell())
    try:
        assert log == ["cancelled"]  # ended before the interruption was raised
        state = state_on(error)
        assert state.phase == "running_tools"
    finally:  # (the old behaviour: the tool still waits on the pool's thread; let it end)
        release = held.get("release")
        if release is not None:
            with contextlib.suppress(RuntimeError):
                held["loop"].call_soon_threadsafe(
                    lambda: release.done() or release.set_result(None)
                )
        assert ended.wait(10)


def test_a_forked_child_runs_blocking_calls_on_its_own_threads_and_loop() -> None:
    """After os.fork(), blocking runs in and out of a running loop work, on the child's own loop."""
    from toolfold.runtime.drive import _kept_loop

    @tool
    async def lookup() -> str:
        """Look up."""
        return "found"

    agent = Agent(FunctionModel(_calling("lookup")), tools=[lookup])

    async def cell() -> str:
        return agent.run("go").text  # on a pool thread: a loop runs here

    assert asyncio.run(cell()) == "found"  # the parent's pool has a thread, idle
    assert agent.run("go").text == "found"  # the parent's kept loop
    parents = _kept_loop._KeptLoop.loop
    assert parents is not None

    def child() -> list[Any]:
        return [asyncio.run(cell()), agent.run("go").text, _kept_loop._KeptLoop.loop is parents]

    assert in_forked_child(child) == {"value": ["found", "found", False]}
    assert agent.run("go").text == "found"  # the parent's go on


def test_asking_whether_a_loop_runs_imports_nothing_and_answers_in_and_out_of_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`_in_running_loop`, asked on every blocking call, runs no import statement, and is right in a loop and out."""
    import builtins

    from toolfold.runtime.drive._kept_loop import _in_running_loop

    imported: list[str] = []
    real_import = builtins.__import__

    def counting_import(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return real_import(name, *args, **kwargs)

    async def inside() -> bool:
        return _in_running_loop()

    monkeypatch.setattr(builtins, "__import__", counting_import)
    outside = _in_running_loop()
    assert imported == []
    monkeypatch.undo()
    assert outside is False
    assert asyncio.run(inside()) is True


def test_a_lone_sync_tool_of_a_blocking_run_inside_a_running_loop_runs_on_the_callers_thread() -> (
    None
):
    """run() in async code: a lone sync tool, a sync model function and on_step run where the loop runs."""
    seen: list[tuple[str, str]] = []

    def here(what: str) -> None:
        seen.append((what, threading.current_thread().name))

    @tool
    def fetch() -> str:
        """A sync tool wrapping an async library with asyncio.run."""
        here("tool")

        async def fetched() -> str:
            return "fetched"

        coroutine = fetched()
        try:
            return asyncio.run(coroutine)  # the caller's loop runs on this thread
        finally:
            coroutine.close()

    def reply(request: ModelRequest) -> Any:
        here("model")
        return _calling("fetch")(request)

    async def cell() -> list[str]:
        here("cell")
        response = Agent(FunctionModel(reply), tools=[fetch]).run(
            "go", on_step=lambda step: here("on_step")
        )
        return [str(r.content) for step in response.steps for r in step.tool_results]

    results = asyncio.run(cell())
    assert "asyncio.run() cannot be called from a running event loop" in results[0]
    assert {where for _, where in seen} == {threading.current_thread().name}
    assert [what for what, _ in seen] == ["cell", "model", "tool", "on_step", "model", "on_step"]
