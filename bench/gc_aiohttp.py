"""The garbage collector's work in 100 concurrent 3-step runs on aiohttp: what it costs and what fills it.

    .venv/bin/python bench/gc_aiohttp.py                              # raw and agent, 40 rounds
    .venv/bin/python bench/gc_aiohttp.py --variants raw,raw+inflight:10,raw+run:20 --rounds 40
    .venv/bin/python bench/gc_aiohttp.py --variants agent --rounds 10 --census 40 --sites

The variants are ``bench_aiohttp_split.py``'s, run as its timed rounds run
them (rounds of 100 concurrent runs, the variants in turns), plus probes on
the raw loop that hold ``K`` extra objects (one slot each, plus their list)
so that a change's object count can be read as collections:

* ``raw+inflight:K``: ``K`` objects made per exchange and held across its await;
* ``raw+run:K``: ``K`` objects made when the run starts and held until it ends;
* ``raw+transient:K``: ``K`` objects made per exchange and dropped before its await.

For each variant: collections per 100 runs by generation (a young
collection is due each time the allocations of GC-tracked objects, less
their deallocations, pass 700; every 10th is a middle one, every 100th a full
one, which walks the whole heap), the time of one collection by generation
(median and least, wall clock: read them on a quiet machine) and, with
``--examined``, the objects each walks. ``--census N`` lists the types (with
``--sites``, the allocation sites, from `tracemalloc`) of the objects found in
the young generation when a young collection starts: per run, what a run
made that was still alive when the collector looked. The counts move by
about 0.2 collections per 100 runs between two runs of 40 rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_aiohttp_split
import bench_http

Run = Callable[[], Awaitable[object]]


class _Held:
    __slots__ = ("slot",)


def _probe(post: Callable[[bytes], Awaitable[Any]], kind: str, k: int) -> Run:
    """The raw loop holding ``k`` extra objects as ``kind`` says (see the module docstring)."""

    async def posting(content: bytes) -> Any:
        if kind == "transient":
            dropped = [_Held() for _ in range(k)]
            del dropped
        held = [_Held() for _ in range(k)] if kind == "inflight" else None
        answer = await post(content)
        del held
        return answer

    async def run() -> None:
        held = [_Held() for _ in range(k)] if kind == "run" else None
        await bench_aiohttp_split._loop(posting)
        del held

    return run


def _name(kind: type) -> str:
    return (
        kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    )


def _site(obj: object) -> str:
    trace = tracemalloc.get_object_traceback(obj)
    if trace is None:
        return "?"
    frame = trace[0]
    return f"{frame.filename.split('/site-packages/')[-1].split('/toolfold/')[-1]}:{frame.lineno}"


class Watch:
    """A `gc.callbacks` entry that counts, times and (optionally) takes a census of collections."""

    def __init__(self, names: list[str], examined: bool, census: bool, sites: bool) -> None:
        self.now: str | None = None
        self.examined, self.census, self.sites = examined, census, sites
        self.times = {name: ([], [], []) for name in names}  # type: dict[str, tuple[list[float], ...]]
        self.walked = {name: [0, 0, 0] for name in names}
        self.found = {name: collections.Counter() for name in names}  # type: dict[str, collections.Counter[str]]
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        name = self.now
        if name is None:
            return
        generation = info["generation"]
        if phase == "start":
            if self.examined:
                self.walked[name][generation] += sum(
                    len(gc.get_objects(g)) for g in range(generation + 1)
                )
            if self.census and generation == 0:
                found = self.found[name]
                for obj in gc.get_objects(0):
                    key = _name(type(obj))
                    found[f"{key:40s} {_site(obj)}" if self.sites else key] += 1
            self.started = time.perf_counter()
        else:
            self.times[name][generation].append(time.perf_counter() - self.started)


async def measure(url: str, names: list[str], rounds: int, watch: Watch, top: int) -> None:
    runs, closers = await bench_aiohttp_split.variants(url)
    raw_post = runs["raw"].args[0]  # type: ignore[attr-defined]
    for name in names:
        if "+" in name:
            kind, k = name.split("+", 1)[1].split(":")
            runs[name] = _probe(raw_post, kind, int(k))
    try:
        for name in names:  # warm the pools
            await asyncio.gather(*[runs[name]() for _ in range(100)])
        gc.callbacks.append(watch)
        for _ in range(rounds):
            for name in names:
                watch.now = name
                await asyncio.gather(*[runs[name]() for _ in range(100)])
                watch.now = None
        gc.callbacks.remove(watch)
    finally:
        for close in closers:
            await close()
        await asyncio.sleep(0.05)  # let aiohttp's transports close
    per = rounds * 100
    print(f"100 concurrent 3-step runs, {rounds} rounds; heap {len(gc.get_objects())} GC objects")
    for name in names:
        print(f"  {name}")
        for generation, times in enumerate(watch.times[name]):
            if not times:
                continue
            walked = ""
            if watch.examined:
                walked = f", walking {watch.walked[name][generation] / len(times):,.0f} objects"
            print(
                f"    gen {generation}: {len(times) * 100 / per:6.2f} per 100 runs, "
                f"{statistics.median(times) * 1e6:8.0f} us each (least {min(times) * 1e6:.0f}){walked}"
            )
        found = watch.found[name]
        if found:
            print(
                f"    young generation at its collections: {sum(found.values()) / per:.1f} objects a run"
            )
            for key, count in found.most_common(top):
                print(f"      {count / per:6.2f}  {key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="raw,agent")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--examined", action="store_true", help="count the objects each walks")
    parser.add_argument("--census", type=int, default=0, metavar="N", help="list the top N types")
    parser.add_argument("--sites", action="store_true", help="with --census: by allocation site")
    args = parser.parse_args()
    names = args.variants.split(",")
    watch = Watch(names, args.examined, args.census > 0, args.sites)
    if args.sites:
        tracemalloc.start()
    process, url = bench_http.start_server()
    try:
        asyncio.run(measure(url, names, args.rounds, watch, args.census))
    finally:
        process.kill()


if __name__ == "__main__":
    main()
