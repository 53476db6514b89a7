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
composition adds at most 10% per model call over ``single``. Each row also
says what composing costs per step (a sub-agent, a workflow step, a handoff):
the time beyond the same model calls made by single agents, divided by the steps. Time is the
process's CPU time (all threads), not the wall clock, and each construct is
measured in turns with ``single`` (the ``(arun)`` ones with ``single`` under
``asyncio.run``), 21 samples of about 600 model calls each (so that each row's
sample holds its share of the collector's work), taking the best of each, so
that load from elsewhere on a shared machine moves the ratio less; each row also gives the median (and
range) of the ratios of the pairs measured one right after the other, the
figure to read on a machine whose speed moves.

Run: ``.venv/bin/python bench/bench_compose.py``.

For instruction counts, which the machine's load does not move:
``bench_compose.py --only "Sequence x3" N [--state]`` runs one construct N times (after
a warm-up) and prints nothing; under ``valgrind --tool=cachegrind
--cache-sim=no``, the count with N runs minus the count with none, divided
by N, is the construct's cost per run (``single`` is the single agent);
``--state`` also reads each response's state (a workflow makes it when first read).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from toolfold import Agent, ModelRequest, Parallel, Sequence, tool
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call
REPEAT = 21
# Model calls a sample makes, whatever the row: a sample of 20 single runs (60 calls)
# often holds no collection at all where one of 20 Parallel runs (600 calls)
# holds several, and the best of such samples favoured the smaller row.
CALLS = 600


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


def bench_model(reply: Callable[[ModelRequest], Any]) -> FunctionModel:
    """The test model answering with ``reply``, keeping no request.

    A test model keeps every request it gets for assertions, and with it the
    conversation: over thousands of runs the heap grows, and the collector's
    full collections walk it all, more often the more a row keeps alive at
    once, so the rows would be timed against a heap no real provider leaves.
    """
    return FunctionModel(reply, keep_requests=False)


def once(run: Callable[[], Any], calls: int) -> float:
    """CPU microseconds per model call over about `CALLS` model calls of ``run``."""
    runs = max(1, round(CALLS / calls))
    start = time.process_time()
    for _ in range(runs):
        run()
    return (time.process_time() - start) / (runs * calls) * 1e6


def paired(
    base: Callable[[], Any], base_calls: int, run: Callable[[], Any], calls: int
) -> tuple[list[float], list[float]]:
    """Both measured in turns, so that load from elsewhere hits both alike: the pairs' figures."""
    bases: list[float] = []
    figures: list[float] = []
    for _ in range(REPEAT):
        bases.append(once(base, base_calls))
        figures.append(once(run, calls))
    return bases, figures


def main() -> None:
    single = Agent(bench_model(worker), tools=[lookup])
    subs = [Agent(bench_model(worker), name=f"sub{i}", tools=[lookup]) for i in range(3)]
    names = [s.name or "" for s in subs]
    seq = Agent(bench_model(leader(names, False)), tools=[s.as_tool() for s in subs])
    par = Agent(bench_model(leader(names, True)), tools=[s.as_tool() for s in subs])
    third = Agent(bench_model(handing(None)), name="c", tools=[lookup])
    second = Agent(bench_model(handing("c")), name="b", tools=[lookup], handoffs=[third])
    first = Agent(bench_model(handing("b")), name="a", tools=[lookup], handoffs=[second])

    workflow_seq = Sequence(
        *[Agent(bench_model(worker), name=f"step{i}", tools=[lookup]) for i in range(3)]
    )
    workflow_par = Parallel(
        *[Agent(bench_model(worker), name=f"branch{i}", tools=[lookup]) for i in range(10)]
    )

    if sys.argv[1:2] == ["--only"]:
        constructs = {
            "single": single,
            "as_tool x3 sequence": seq,
            "as_tool x3 parallel": par,
            "handoff chain": first,
            "Sequence x3": workflow_seq,
            "Parallel x10": workflow_par,
        }
        construct = constructs[sys.argv[2]]
        # --state: read each response's state too (a workflow's is made when first read)
        read_state = "--state" in sys.argv[4:]
        for _ in range(10):  # warm-up: caches, compiled checkers
            response = construct.run("go")
            if read_state:
                response.state  # noqa: B018
        for _ in range(int(sys.argv[3])):
            response = construct.run("go")
            if read_state:
                response.state  # noqa: B018
        return

    def count(agent: Any) -> int:
        return int(agent.run("go").usage.requests)

    def single_run() -> Any:
        return single.run("go")

    def report(
        label: str, base: Callable[[], Any], run: Callable[[], Any], calls: int, steps: int
    ) -> None:
        bases, figures = paired(base, 3, run, calls)
        single_us, us = min(bases), min(figures)
        # Each pair's ratio too: on a machine whose speed moves from one moment
        # to the next, the two best figures may come from different moments.
        ratios = sorted(f / b for b, f in zip(bases, figures, strict=True))
        # What composing costs per step (sub-agent, handoff), on top of the model calls.
        per_step = (us - single_us) * calls / steps
        print(
            f"{label:21s} {us:7.1f} us per model call ({calls} calls; single agent "
            f"{single_us:5.1f} us: {us / single_us - 1:+.0%}; {per_step:+5.0f} us per step; "
            f"pairs: median {statistics.median(ratios) - 1:+.0%}, "
            f"{ratios[0] - 1:+.0%} to {ratios[-1] - 1:+.0%})"
        )

    print(
        f"single agent          {statistics.median(once(single_run, 3) for _ in range(3)):7.1f} us per model call"
    )
    for label, agent, steps in (
        ("as_tool x3 sequence", seq, 3),
        ("as_tool x3 parallel", par, 3),
        ("handoff chain", first, 2),
        ("Sequence x3", workflow_seq, 3),
        ("Parallel x10", workflow_par, 10),
    ):
        run = lambda agent=agent: agent.run("go")  # noqa: E731
        report(label, single_run, run, count(agent), steps)
    for label, agent in (("as_tool x3 seq (arun)", seq), ("as_tool x3 par (arun)", par)):
        report(
            label,
            lambda: asyncio.run(single.arun("go")),
            lambda agent=agent: asyncio.run(agent.arun("go")),  # type: ignore[misc]
            count(agent),
            3,
        )


if __name__ == "__main__":
    main()
