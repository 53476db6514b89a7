"""Where the client CPU of the concurrency rows goes: a py-spy profile split into layers.

    pip install py-spy    # a sampling profiler (not a toolfold dependency)
    py-spy record --native -r 400 -f raw -o /tmp/aio.txt -- \\
        .venv/bin/python bench/bench_http.py --only concurrency --backends aiohttp --rounds 20
    .venv/bin/python bench/spy_layers.py /tmp/aio.txt --raw-cpu 1000 --toolfold-cpu 1600

py-spy reads the process from outside, so it neither slows nor skews the
event loop the way a profiler inside it does (cProfile doubles the cost of
small functions; a sampling thread inside the process is biased to the points
where the loop releases the GIL). Each sample is given to the layer of its
innermost Python frame (``--native`` adds the C frames under it, which this
ignores: C time belongs to the Python frame that called it), and to the run it
was taken in: the raw aiohttp loop (``raw_loop_async``), a toolfold run
(``agenerate_text``), or neither (the event loop's own work and the protocol
callbacks between steps of any run, which the two rows share; half goes to
each). Given each row's client CPU per run as ``bench_http.py`` printed it,
the shares become microseconds per run.
"""

from __future__ import annotations

import argparse
import collections
import re

# Innermost frame first: the first rule a frame matches names its layer.
LAYERS = [
    ("json (stdlib)", r"\(json/"),
    ("aiohttp, asyncio, sockets", r"aiohttp/|asyncio/|selectors\.py|multidict|yarl|socket"),
    ("transport (adapters/_http)", r"toolfold/adapters/_http/"),
    ("model glue (adapters/_provider_model)", r"toolfold/adapters/_provider_model"),
    ("codec (openai_chat, dialects, wire)", r"toolfold/adapters/"),
    ("core (reducer, steps, state, log)", r"toolfold/runtime/core/|toolfold\.runtime\.core"),
    (
        "executor, tool, argument checks",
        r"toolfold/runtime/drive/_executor|toolfold/runtime/drive/_sync_calls|toolfold/toolkit",
    ),
    ("drive (run_loop, async shell)", r"toolfold/runtime/drive/"),
    ("run setup and Response (_api, _agent, _run)", r"toolfold/"),
    ("the raw loop's own dicts", r"bench_http"),
]
RUNS = {"raw": "raw_loop_async", "toolfold": "agenerate_text"}


def layer(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, pattern in LAYERS:
            if re.search(pattern, frame):
                return name
    return "other"


def split(path: str) -> dict[str, collections.Counter[str]]:
    """Samples per run kind (raw, toolfold, between) and layer."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    with open(path, encoding="utf-8") as lines:
        rows = [line.rstrip().rpartition(" ") for line in lines]
    for stack, _, n in rows:
        if "_run_once" not in stack:
            continue  # start-up, the server's launch, the pools' warm-up outside the loop
        frames = stack.split(";")
        kind = next((k for k, marker in RUNS.items() if marker in stack), "between")
        counts[kind][layer(frames)] += int(n)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", help="py-spy record -f raw output")
    parser.add_argument("--raw-cpu", type=float, required=True, help="raw row, us/run")
    parser.add_argument("--toolfold-cpu", type=float, required=True, help="toolfold row, us/run")
    args = parser.parse_args()
    counts = split(args.profile)
    between = counts.pop("between", collections.Counter())
    for kind in RUNS:
        counts[kind]["event loop, protocol callbacks (between steps)"] += sum(between.values()) // 2
    cpu = {"raw": args.raw_cpu, "toolfold": args.toolfold_cpu}
    scale = {k: cpu[k] / max(1, sum(counts[k].values())) for k in RUNS}
    names = sorted({n for c in counts.values() for n in c}, key=lambda n: -counts["toolfold"][n])
    print(f"{'layer':48s} {'raw us/run':>11s} {'toolfold us/run':>16s}")
    for name in names:
        raw, ours = counts["raw"][name] * scale["raw"], counts["toolfold"][name] * scale["toolfold"]
        print(f"{name:48s} {raw:11.0f} {ours:16.0f}")
    print(f"{'total (the rows client CPU)':48s} {cpu['raw']:11.0f} {cpu['toolfold']:16.0f}")


if __name__ == "__main__":
    main()
