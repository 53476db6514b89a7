"""What a little more work a step costs the raw aiohttp loop: objects kept, objects dropped, calls.

    .venv/bin/python bench/bench_aiohttp_calibrate.py [--rounds 30] [--count 30] [--calls 300]

A yardstick for the aiohttp row (100 concurrent 3-step runs, 4 exchanges a
run; see ``bench_aiohttp_split.py``): the raw loop of ``bench_http.py``
(``raw_loop_async`` itself, its post wrapped in one coroutine that does
the extra work, none for ``raw``) and the same loop doing one more kind of
work after each exchange, the variants in turns each round:

* ``keep``: makes ``--count`` small slotted objects (five fields, each
  pointing at other objects, as toolfold's records do) and keeps them until
  the run ends, as a run keeps its events and messages;
* ``drop``: makes as many and drops each at once, as a step's intermediate
  records are dropped;
* ``calls``: makes ``--calls`` calls of a one-line Python function.

Each line gives a variant's median client CPU a run and the median of its
rounds' extra CPU over the raw loop's in the same round: ``keep`` less
``drop`` is what the collector and the caches charge for objects a run holds
across its awaits, ``calls`` the price of Python calls at this concurrency.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_http

Post = Callable[[bytes], Awaitable[bytes]]


class Record:
    """A small record like toolfold's: five slots, pointing at other objects."""

    __slots__ = ("a", "b", "c", "d", "e")

    def __init__(self, a: Any, b: Any, c: Any, d: Any, e: Any) -> None:
        self.a, self.b, self.c, self.d, self.e = a, b, c, d, e


def _one(x: int) -> int:
    return x + 1


def _run(post: Post, keep: int, drop: int, calls: int) -> Awaitable[str]:
    """One run of `bench_http.raw_loop_async`, the variant's extra work after each answer."""
    held: list[Record] = []  # kept until the run ends, with the run's own messages

    async def posting(content: bytes) -> bytes:
        answer = await post(content)
        for i in range(keep):
            held.append(Record(held, answer, i, None, ()))
        for i in range(drop):
            Record(answer, held, i, None, ())
        for i in range(calls):
            _one(i)
        return answer

    return bench_http.raw_loop_async(posting, 3)


async def measure(url: str, rounds: int, count: int, calls: int) -> None:
    import aiohttp

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000))
    target = f"{url}/chat/completions"

    async def post(content: bytes) -> bytes:
        async with session.post(target, data=content, headers=bench_http.HEADERS) as response:
            body: bytes = await response.read()
            return body

    variants = {
        "raw": (0, 0, 0),
        f"keep {count} a step": (count, 0, 0),
        f"drop {count} a step": (0, count, 0),
        f"calls {calls} a step": (0, 0, calls),
    }
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for extra in variants.values():  # warm the pool
            await asyncio.gather(*[_run(post, *extra) for _ in range(100)])
        for _ in range(rounds):
            for name, extra in variants.items():
                start = time.process_time()
                await asyncio.gather(*[_run(post, *extra) for _ in range(100)])
                cpu[name].append((time.process_time() - start) / 100)
    finally:
        await session.close()
    print(f"100 concurrent 3-step runs (4 exchanges), {rounds} rounds; client CPU a run")
    for name, times in cpu.items():
        extra = statistics.median(b - a for a, b in zip(cpu["raw"], times, strict=True))
        print(
            f"  {name:20s} median {statistics.median(times) * 1e6:6.0f} us"
            f"   over raw in the same round: {extra * 1e6:6.1f} us a run"
            f" ({extra * 1e9 / 4 / max(sum(variants[name]), 1):5.0f} ns a unit)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--count", type=int, default=30, help="objects a step (keep, drop)")
    parser.add_argument("--calls", type=int, default=300, help="calls a step")
    args = parser.parse_args()
    for option in ("rounds", "count", "calls"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be at least 1, got {getattr(args, option)}")
    process, url = bench_http.start_server()
    try:
        asyncio.run(measure(url, args.rounds, args.count, args.calls))
    finally:
        process.kill()


if __name__ == "__main__":
    main()
