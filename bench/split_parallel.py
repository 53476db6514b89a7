"""Where ``Parallel x10`` spends beyond ten single runs: one layer at a time.

Each row runs the same ten agents (``bench_compose.py``'s worker, 3 model
calls each) a different way:

- ``run10``: ten blocking ``Agent.run`` calls;
- ``arun10``: ten ``Agent.arun`` awaited one after another on the kept loop
  (the async agent path against the blocking one);
- ``task10``: the same, each in a task of its own, awaited one at a time;
- ``gather10``: the ten as ``asyncio.gather`` tasks (a task per branch);
- ``par``: the ``Parallel`` of the ten (the workflow's bookkeeping on top);
- ``empty``: the kept loop running an empty coroutine.

Run: ``setarch x86_64 -R valgrind --tool=cachegrind --cache-sim=no
--cachegrind-out-file=/dev/null .venv/bin/python bench/split_parallel.py ROW N``
with N runs and with none; the difference over N is the row's cost per run.
``NOGC=1`` turns the garbage collector off: a collection landing in one count
and not the other moves a 5-run figure by up to ~100k.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys

from bench_compose import bench_model, lookup, worker

from toolfold import Agent, Parallel
from toolfold.runtime.drive._kept_loop import run_kept

agents = [Agent(bench_model(worker), name=f"branch{i}", tools=[lookup]) for i in range(10)]
workflow = Parallel(*agents)


async def one_after_another() -> None:
    for agent in agents:
        await agent.arun("go")


async def in_tasks() -> None:
    for agent in agents:
        await asyncio.ensure_future(agent.arun("go"))


async def gathered() -> None:
    await asyncio.gather(*[agent.arun("go") for agent in agents])


async def empty() -> None:
    pass


def run(row: str) -> None:
    if row == "run10":
        for agent in agents:
            agent.run("go")
    elif row == "par":
        workflow.run("go")
    else:
        run_kept(_ON_A_LOOP[row])


_ROWS = ("run10", "par")
_ON_A_LOOP = {"arun10": one_after_another, "task10": in_tasks, "gather10": gathered, "empty": empty}


def main() -> None:
    row, count = sys.argv[1], int(sys.argv[2])
    if row not in _ROWS and row not in _ON_A_LOOP:
        raise SystemExit(f"unknown row {row!r}: one of {', '.join((*_ROWS, *_ON_A_LOOP))}")
    if os.environ.get("NOGC"):
        gc.disable()
    for _ in range(5):  # warm-up
        run(row)
    for _ in range(count):
        run(row)


if __name__ == "__main__":
    main()
