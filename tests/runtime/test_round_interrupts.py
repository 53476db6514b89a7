"""A round of calls stopped midway keeps the calls that had ended.

Ctrl-C in a blocking run or stream, and an ``on_event`` observer that raises,
stop a round of parallel calls: the state they leave (the interruption's
``.state``, the `RunError`'s) has the results of the calls that had ended
committed, so resuming it runs again only what had not. Interruptions are
injected deterministically: a tool or a model that raises KeyboardInterrupt
itself once the calls it waits for have ended.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from toolfold import Agent, ModelRequest, RunError, RunState, Tool, state_of, tool
from toolfold.runtime import Event
from toolfold.testing import FunctionModel

call = FunctionModel.call


def _charger(ran: list[int], interrupt: set[int]) -> Tool[..., Any]:
    """A sync tool (run on a worker thread) that raises Ctrl-C once for the orders in ``interrupt``."""

    @tool
    def charge(order: int) -> str:
        """Charge an order (a side effect that must not run twice).

        Args:
            order: The order to charge.
        """
        if order in interrupt:
            interrupt.discard(order)
            raise KeyboardInterrupt
        ran.append(order)
        return f"charged {order}"

    return charge


def _tool_results(request: ModelRequest) -> list[str]:
    return [r.content for m in request.messages for r in m.tool_results]


def _answer(calls: list[Any]) -> Callable[[ModelRequest], Any]:
    """A model that makes ``calls`` in one step, then answers with the results it saw."""

    def reply(request: ModelRequest) -> Any:
        results = _tool_results(request)
        return "saw: " + " | ".join(results) if results else calls

    return reply


def _interrupted_state(err: BaseException) -> RunState:
    state = state_of(err)
    assert isinstance(state, RunState), f"no state on {err!r}"
    return state


def _run(agent: Agent[Any, Any], how: str, **options: Any) -> None:
    """Run ``agent``: ``run``, a blocking ``stream``, ``arun`` or an async stream (``astream``)."""
    if how == "run":
        agent.run("go", **options)
    elif how == "stream":
        for _ in agent.stream("go", **options):
            pass
    else:
        asyncio.run(_run_async(agent, how, **options))


async def _run_async(agent: Agent[Any, Any], how: str, **options: Any) -> None:
    if how == "arun":
        await agent.arun("go", **options)
    else:
        async for _ in agent.stream("go", **options):
            pass


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_in_a_blocking_round_keeps_the_calls_that_had_ended(how: str) -> None:
    """Ctrl-C in a blocking run's or stream's round of sync calls commits those that ended."""
    ran: list[int] = []
    charge = _charger(ran, interrupt={2})
    calls = [
        call("charge", {"order": 1}, id="a"),
        call("charge", {"order": "two"}, id="bad"),  # ends at once: invalid arguments
        call("charge", {"order": 2}, id="b"),
    ]
    # One call at a time: "a" has ended when "b" raises Ctrl-C.
    agent = Agent(FunctionModel(_answer(calls)), tools=[charge], max_concurrency=1)
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(agent, how)
    state = _interrupted_state(caught.value)
    assert [(c.call.id, c.status) for c in state.calls] == [
        ("a", "done"),
        ("bad", "done"),
        ("b", "to_run"),
    ]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert ran == [1, 2]  # the resume ran "b" only
    assert response.text.startswith("saw: charged 1 | Invalid arguments for tool 'charge'")
    assert response.text.endswith(" | charged 2")


def _research_beside_lookup() -> tuple[Agent[Any, Any], list[str]]:
    """A top agent whose one step calls a plain tool and a sub-agent side by side.

    The sub-agent runs one tool of its own, then its model raises Ctrl-C once
    the plain call (on a worker thread, told to go on by the sub-agent's model)
    has ended: the event loop the step runs on is busy in that model, and has
    not yet learnt that the plain call ended.
    """
    ran: list[str] = []
    reached = threading.Event()
    looked_up = threading.Event()
    interrupts = [KeyboardInterrupt()]

    @tool
    def lookup(key: str) -> str:
        """Look something up.

        Args:
            key: What to look up.
        """
        if key == "top":
            assert reached.wait(30)
        ran.append(key)
        if key == "top":
            looked_up.set()
        return f"found {key}"

    def sub_reply(request: ModelRequest) -> Any:
        results = _tool_results(request)
        if not results:
            return call("lookup", {"key": "sub"})
        if interrupts:
            reached.set()
            assert looked_up.wait(30)
            raise interrupts.pop()
        return "sub answer after " + results[0]

    sub = Agent(
        FunctionModel(sub_reply), name="research", description="Research it.", tools=[lookup]
    )
    calls = [call("lookup", {"key": "top"}, id="t1"), call("research", {"input": "x"}, id="t2")]
    return Agent(FunctionModel(_answer(calls)), tools=[lookup, sub.as_tool()]), ran


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_in_a_sub_agent_keeps_the_plain_call_beside_it(how: str) -> None:
    """Ctrl-C in a sub-agent keeps its sub-run and the plain call that ended beside it."""
    agent, ran = _research_beside_lookup()
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(agent, how)
    state = _interrupted_state(caught.value)
    assert ran == ["sub", "top"]
    lookup, research = state.calls
    assert (lookup.call.id, lookup.status) == ("t1", "done")
    assert research.status == "to_run"
    assert research.child is not None
    assert research.child.step == 1  # the sub-run, kept where it stopped
    response = agent.resume(RunState.from_json(state.to_json()))
    assert ran == ["sub", "top"]  # neither lookup ran again
    assert response.text == "saw: found top | sub answer after found sub"


def _breaks_at(call_id: str) -> Callable[[Event], None]:
    """An ``on_event`` observer that raises when it sees the result of ``call_id``."""

    def observer(event: Event) -> None:
        if event.kind == "tool_returned" and event.call_id == call_id:
            raise ValueError("observer broke")

    return observer


@pytest.mark.parametrize("how", ["run", "stream", "arun", "astream"])
def test_an_observer_that_raises_mid_round_leaves_every_call_that_ran(how: str) -> None:
    """An on_event observer raising at a round's first result leaves all its calls committed."""
    ran: list[int] = []
    calls = [call("charge", {"order": 1}, id="a"), call("charge", {"order": 2}, id="b")]
    agent = Agent(FunctionModel(_answer(calls)), tools=[_charger(ran, interrupt=set())])
    with pytest.raises(RunError, match="on_event observer raised ValueError") as caught:
        _run(agent, how, on_event=_breaks_at("a"))
    state = caught.value.state
    assert state is not None
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "done"), ("b", "done")]
    assert sorted(ran) == [1, 2]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert sorted(ran) == [1, 2]  # nothing ran again
    assert response.text == "saw: charged 1 | charged 2"
