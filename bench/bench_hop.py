"""What one hand-off of a sync function to a worker thread costs, from an event loop.

    .venv/bin/python bench/bench_hop.py [--count N]

An async run hands each sync tool call (a plain ``def`` tool, ``blocking=True``
by default) to a worker thread so that a tool that blocks cannot stall the
other runs on the event loop. The hop is two cross-thread wake-ups (the worker
for the call, the loop for the result), and on a virtual machine each wake-up
costs tens of microseconds: as much as an exchange's own work. This prints, per
call of a trivial function, the wall time and the process's CPU time (all
threads) of:

* ``inline``: the call made on the loop (what ``blocking=False`` does);
* ``asyncio.to_thread``: the standard library's hop;
* ``run_in_executor``: the loop's default executor;
* ``toolfold hand_off``: toolfold's worker threads (``runtime/drive/_workers.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from toolfold.runtime.drive._workers import hand_off


def add(a: int, b: int) -> int:
    return a + b


async def _inline(a: int, b: int) -> int:
    return add(a, b)


async def measure(count: int) -> None:
    loop = asyncio.get_running_loop()
    ways: dict[str, Callable[[], Awaitable[Any]]] = {
        "inline": lambda: _inline(1, 2),
        "asyncio.to_thread": lambda: asyncio.to_thread(add, 1, 2),
        "run_in_executor": lambda: loop.run_in_executor(None, add, 1, 2),
        "toolfold hand_off": lambda: hand_off(add, 1, 2),
    }
    for name, way in ways.items():
        for _ in range(20):
            await way()
        wall, cpu = [], []
        for _ in range(5):
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(count):
                await way()
            wall.append((time.perf_counter() - start) / count)
            cpu.append((time.process_time() - start_cpu) / count)
        print(
            f"  {name:20s} wall {min(wall) * 1e6:7.1f} us   CPU {min(cpu) * 1e6:7.1f} us per call"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="calls per round (5 rounds)")
    args = parser.parse_args()
    print("one call of a trivial sync function from an event loop, least of 5 rounds")
    asyncio.run(measure(args.count))


if __name__ == "__main__":
    main()
