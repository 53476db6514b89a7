"""Batch fan-out on Ray against plain ``asyncio.gather`` in one process.

Each run is 3 steps on a `FunctionModel` that waits ``LATENCY`` (a simulated
50 ms model call) before answering: two steps call a tool, the third answers.
Rows, all with the same number of runs in flight:

- ``asyncio.gather``: one process, one event loop, a semaphore of ``CONCURRENCY``;
- ``ray run_batch``: 2 async actors on a local Ray (``ray.init(num_cpus=2)``),
  actor start-up included (it is part of every batch);
- the same two with no latency (what each costs per run on its own); Ray's
  per-run overhead is the difference, with Ray timed from the moment its
  actors are up (start-up is reported apart: it varies by seconds on a loaded
  machine);
- the same two with a tool that burns ``CPU_MS`` of CPU per call: the case
  where one process is bound to one core and Ray's actors use both.

Run: ``.venv/bin/python bench/bench_ray.py [RUNS]`` (default 2,000).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only

import ray

import toolfold
from toolfold.integrations.ray import run_batch
from toolfold.integrations.ray._batch import _Batch
from toolfold.runtime import ModelRequest
from toolfold.testing import FunctionModel, Reply

LATENCY = 0.05
STEPS = 3
CONCURRENCY = 200
ACTORS = 2
CPU_MS = 5.0


def make_agent(latency: float, cpu_ms: float = 0.0) -> toolfold.Agent:
    """A 3-step agent: two tool calls, then the answer; each model call waits ``latency``."""

    def bump(n: int) -> int:
        """Add one.

        Args:
            n: The number.
        """
        end = time.thread_time() + cpu_ms / 1000
        while time.thread_time() < end:
            pass
        return n + 1

    async def reply(request: ModelRequest) -> Reply:
        if latency:
            await asyncio.sleep(latency)
        last = request.messages[-1]
        done = sum(1 for m in request.messages if m.role == "tool")
        if done < STEPS - 1:
            n = int(last.tool_results[0].content) if last.role == "tool" else 0
            return FunctionModel.call("bump", {"n": n})
        return f"done at {last.tool_results[0].content}"

    return toolfold.Agent(FunctionModel(reply), tools=[bump])


def local(agent: toolfold.Agent, runs: int) -> float:
    """Seconds for ``runs`` runs with ``asyncio.gather`` under a semaphore."""

    async def main() -> None:
        gate = asyncio.Semaphore(CONCURRENCY)

        async def one(i: int) -> str:
            async with gate:
                return (await agent.arun(str(i))).text

        texts = await asyncio.gather(*(one(i) for i in range(runs)))
        assert all(t == f"done at {STEPS - 1}" for t in texts)

    start = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - start


def on_ray(agent: toolfold.Agent, runs: int) -> tuple[float, float]:
    """Seconds for ``runs`` runs with `run_batch` on ``ACTORS`` actors: in all, and once started.

    The second figure starts when the actors are up and the first input is
    handed over (the driver enters its dispatch loop), so it leaves out the
    actors' start-up, which on a loaded machine varies by seconds.
    """
    started: list[float] = []
    drive = _Batch._drive

    def timed(self: _Batch, *args: Any) -> None:
        started.append(time.perf_counter())
        drive(self, *args)

    _Batch._drive = timed  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        results = run_batch(
            agent,
            [str(i) for i in range(runs)],
            concurrency=CONCURRENCY,
            num_actors=ACTORS,
            progress=False,
        )
        end = time.perf_counter()
    finally:
        _Batch._drive = drive  # type: ignore[method-assign]
    assert all(r.text == f"done at {STEPS - 1}" for r in results)
    return end - start, end - started[0]


def row(name: str, runs: int, seconds: float) -> None:
    print(f"{name:<52} {runs:>6} runs {seconds:7.2f} s {runs / seconds:8.0f} runs/s", flush=True)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"{STEPS} steps per run, {CONCURRENCY} runs in flight, {ACTORS} Ray actors\n")
    slow, bare = make_agent(LATENCY), make_agent(0.0)
    ms = f"{LATENCY * 1000:.0f} ms model"
    row(f"asyncio.gather, {ms}", runs, local(slow, runs))
    total, running = on_ray(slow, runs)
    row(f"ray run_batch, {ms}", runs, total)
    row(f"ray run_batch, {ms}, once the actors are up", runs, running)
    print(f"{'ray: start-up of that batch':<52} {total - running:20.2f} s\n")
    mine = local(bare, runs)
    total, running = on_ray(bare, runs)
    row("asyncio.gather, no latency", runs, mine)
    row("ray run_batch, no latency", runs, total)
    row("ray run_batch, no latency, once the actors are up", runs, running)
    added = (running - mine) / runs * 1e6
    print(f"{'ray: added per run (start-up left out)':<52} {added:17.0f} µs\n")
    cpu_runs = max(runs // 5, 20)
    heavy = make_agent(LATENCY, CPU_MS)
    label = f"{CPU_MS:.0f} ms CPU per tool call"
    row(f"asyncio.gather, {label}", cpu_runs, local(heavy, cpu_runs))
    total, running = on_ray(heavy, cpu_runs)
    row(f"ray run_batch, {label}", cpu_runs, total)
    row(f"ray run_batch, {label}, once up", cpu_runs, running)
    ray.shutdown()


if __name__ == "__main__":
    main()
