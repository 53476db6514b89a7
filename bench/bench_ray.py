"""Batch fan-out on Ray against plain ``asyncio.gather`` in one process.

Each run is 3 steps on a `FunctionModel` that waits ``LATENCY`` (a simulated
50 ms model call) before answering: two steps call a tool, the third answers.
Rows, all with the same number of runs in flight:

- ``asyncio.gather``: one process, one event loop, a semaphore of ``CONCURRENCY``;
- ``ray run_batch``: 2 async actors on a local Ray (``ray.init(num_cpus=2)``),
  actor start-up included (it is part of every batch);
- the same two with no latency (what each costs per run on its own), from which
  Ray's per-run overhead is the difference;
- the same two with a tool that burns ``CPU_MS`` of CPU per call: the case
  where one process is bound to one core and Ray's actors use both.

Run: ``.venv/bin/python bench/bench_ray.py [RUNS]`` (default 2,000).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only

import ray

import toolfold
from toolfold.integrations.ray import run_batch
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
        end = time.process_time() + cpu_ms / 1000
        while time.process_time() < end:
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


def on_ray(agent: toolfold.Agent, runs: int) -> float:
    """Seconds for ``runs`` runs with `run_batch` on ``ACTORS`` actors, start-up included."""
    start = time.perf_counter()
    results = run_batch(
        agent,
        [str(i) for i in range(runs)],
        concurrency=CONCURRENCY,
        num_actors=ACTORS,
        progress=False,
    )
    elapsed = time.perf_counter() - start
    assert all(r.text == f"done at {STEPS - 1}" for r in results)
    return elapsed


def row(name: str, runs: int, measure: Callable[[], float]) -> float:
    seconds = measure()
    print(f"{name:<44} {runs:>6} runs {seconds:7.2f} s {runs / seconds:8.0f} runs/s", flush=True)
    return seconds


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"{STEPS} steps per run, {CONCURRENCY} runs in flight, {ACTORS} Ray actors\n")
    slow, bare = make_agent(LATENCY), make_agent(0.0)
    row(f"asyncio.gather, {LATENCY * 1000:.0f} ms model", runs, lambda: local(slow, runs))
    row(f"ray run_batch, {LATENCY * 1000:.0f} ms model", runs, lambda: on_ray(slow, runs))
    startup = on_ray(bare, ACTORS)
    print(f"{'ray: actor start-up (a batch of 2 bare runs)':<44} {startup:20.2f} s")
    mine = row("asyncio.gather, no latency", runs, lambda: local(bare, runs))
    theirs = row("ray run_batch, no latency", runs, lambda: on_ray(bare, runs))
    overhead = (theirs - startup - mine) / runs * 1e6
    print(f"{'ray: added per run (start-up excluded)':<44} {overhead:17.0f} µs\n")
    cpu_runs = max(runs // 5, 20)
    heavy = make_agent(LATENCY, CPU_MS)
    label = f"{CPU_MS:.0f} ms CPU per tool call"
    row(f"asyncio.gather, {label}", cpu_runs, lambda: local(heavy, cpu_runs))
    row(f"ray run_batch, {label}", cpu_runs, lambda: on_ray(heavy, cpu_runs))
    ray.shutdown()


if __name__ == "__main__":
    main()
