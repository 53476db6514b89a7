"""Framework CPU per model call when agents compose, against a single agent.

- ``single``: one agent making 3 model calls (2 tool steps, then an answer);
- ``as_tool``: a lead agent calling 3 sub-agents (one step each, each call
  its own tool step), each sub-agent making the same 3 model calls as
  ``single``: 13 model calls in a tree of 4 runs;
- ``as_tool x3 parallel``: the lead calls the 3 sub-agents in one step, run
  concurrently on worker threads;
- ``... (arun)``: the same two trees under ``arun``, where the sub-agents run
  as coroutines on the caller's event loop;
- ``handoff chain``: 3 agents, each handing to the next after a tool step;
- ``Sequence x3``: a workflow of 3 agents one after another, each making the
  same 3 model calls as ``single`` (9 model calls);
- ``Parallel x10``: a workflow of 10 such agents run at once (30 model calls).

All on `FunctionModel` (no HTTP), tools trivial, so the time is toolfold's own.
The figure to compare is microseconds per model call; the target is that
composition adds at most 10% per model call over ``single``. Time is the
process's CPU time (all threads), not the wall clock, so that other work on
a shared machine moves the figures less.

Run: ``.venv/bin/python bench/bench_compose.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from toolfold import Agent, ModelRequest, Parallel, Sequence, tool
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call
REPEAT = 7
RUNS = 60


@tool(blocking=False)
def lookup(key: str) -> str:
    """Look something up.

    Args:
        key: What to look up.
    """
    return f"value of {key}"


def worker(request: ModelRequest) -> Any:
    """Two tool steps, then an answer (the turn's message count tells where it is)."""
    done = sum(1 for m in request.messages if m.role == "tool")
    return call("lookup", {"key": f"k{done}"}) if done < 2 else "answer"


def leader(names: list[str], parallel: bool) -> Callable[[ModelRequest], Any]:
    def reply(request: ModelRequest) -> Any:
        done = sum(1 for m in request.messages if m.role == "tool")
        if parallel:
            return [call(n, {"input": "go"}) for n in names] if done == 0 else "all done"
        return call(names[done], {"input": "go"}) if done < len(names) else "all done"

    return reply


def handing(next_name: str | None) -> Callable[[ModelRequest], Any]:
    def reply(request: ModelRequest) -> Any:
        tools = {t.name for t in request.tools}
        done = sum(1 for m in request.messages if m.role == "tool")
        if next_name and f"transfer_to_{next_name}" in tools and done % 2 == 0:
            return (
                call("lookup", {"key": "x"}) if done % 4 == 0 else call(f"transfer_to_{next_name}")
            )
        return call(f"transfer_to_{next_name}") if next_name else "answer"

    return reply


def per_call(run: Callable[[], Any], calls: int) -> float:
    best: list[float] = []
    for _ in range(REPEAT):
        start = time.process_time()
        for _ in range(RUNS):
            run()
        best.append((time.process_time() - start) / (RUNS * calls) * 1e6)
    return statistics.median(best)


def main() -> None:
    single = Agent(FunctionModel(worker), tools=[lookup])
    subs = [Agent(FunctionModel(worker), name=f"sub{i}", tools=[lookup]) for i in range(3)]
    names = [s.name or "" for s in subs]
    seq = Agent(FunctionModel(leader(names, False)), tools=[s.as_tool() for s in subs])
    par = Agent(FunctionModel(leader(names, True)), tools=[s.as_tool() for s in subs])
    third = Agent(FunctionModel(handing(None)), name="c", tools=[lookup])
    second = Agent(FunctionModel(handing("c")), name="b", tools=[lookup], handoffs=[third])
    first = Agent(FunctionModel(handing("b")), name="a", tools=[lookup], handoffs=[second])

    workflow_seq = Sequence(
        *[Agent(FunctionModel(worker), name=f"step{i}", tools=[lookup]) for i in range(3)]
    )
    workflow_par = Parallel(
        *[Agent(FunctionModel(worker), name=f"branch{i}", tools=[lookup]) for i in range(10)]
    )

    def count(agent: Any) -> int:
        return int(agent.run("go").usage.requests)

    base = per_call(lambda: single.run("go"), count(single))
    print(f"single agent          {base:7.1f} us per model call")
    for label, agent in (
        ("as_tool x3 sequence", seq),
        ("as_tool x3 parallel", par),
        ("handoff chain", first),
        ("Sequence x3", workflow_seq),
        ("Parallel x10", workflow_par),
    ):
        n = count(agent)
        us = per_call(lambda agent=agent: agent.run("go"), n)  # type: ignore[misc]
        print(f"{label:21s} {us:7.1f} us per model call ({n} calls, {us / base - 1:+.0%})")
    abase = per_call(lambda: asyncio.run(single.arun("go")), count(single))
    print(f"single agent (arun)   {abase:7.1f} us per model call")
    for label, agent in (("as_tool x3 seq (arun)", seq), ("as_tool x3 par (arun)", par)):
        n = count(agent)
        us = per_call(lambda agent=agent: asyncio.run(agent.arun("go")), n)  # type: ignore[misc]
        print(f"{label:21s} {us:7.1f} us per model call ({n} calls, {us / abase - 1:+.0%})")


if __name__ == "__main__":
    main()
