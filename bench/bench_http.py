"""HTTP benchmarks: toolfold's provider path against the same raw HTTP clients, on a local fake server.

    .venv/bin/python bench/bench_http.py [--quick] [--only loop,stream,concurrency,latency]

Starts ``bench/fake_openai_server.py`` as a separate process and measures:

* loop: a 10-step sequential tool loop (11 HTTP exchanges) through
  ``toolfold.generate_text`` / ``agenerate_text`` with the OpenAI Chat model on
  each backend (``http="httpx"``, ``"httpx2"``), next to the same 11 exchanges
  made by that raw client with hand-written JSON, wall time and the client
  process's CPU time per run (the steadier figure on a shared machine). Target: <= 1.1x.
  The async loop is measured twice, like for like: the tool inline on the event
  loop (raw, and toolfold with ``blocking=False``), and the tool in a worker
  thread (raw with ``asyncio.to_thread``, and toolfold's default for a sync tool).
* stream: the same loop streamed (SSE) on httpx, toolfold ``Agent.stream``
  against raw httpx reading the SSE lines and joining the argument fragments
  by hand. Target: <= 1.2x.
* concurrency: 100 concurrent 3-step runs (4 exchanges each), runs per
  second, for toolfold on each backend (``http="httpx"``, ``"httpx2"``,
  ``"aiohttp"``, the ``add`` tool ``blocking=False`` -- inline on the loop, as
  the raw clients compute it) next to the same raw client, and the default
  backend with the tool in a worker thread; the clients take turns within
  each round, with the client process's CPU time per run beside each rate.
  Target: aiohttp backend >= 0.85x raw aiohttp. The ``Agent.arun`` rows run
  the same from one `Agent` made beforehand (``agenerate_text`` makes its
  agent on every call).
  The raw httpx/httpx2 clients keep idle connections as long as toolfold's
  (``HttpLimits().keepalive_expiry``), so both sides' pools are alike.
  ``--backends aiohttp`` keeps only that backend's two rows, ``--rounds N``
  sets the rounds (``bench/spy_layers.py`` splits a sampled profile of such a
  run into layers).
* latency: one request at a time on httpx, per request, to show per-call overhead.

Figures are best-of-N wall-clock times, with the median of the per-pair (loop)
or per-round (concurrency) ratios beside them; the machine is shared, so compare the
ratios printed side by side rather than the absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import toolfold  # noqa: E402
from tests.child_processes import dies_with_this_process  # noqa: E402
from toolfold.adapters import HttpLimits  # noqa: E402
from toolfold.adapters._http._transport import Transport  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        },
    }
]
HEADERS = {"authorization": "Bearer sk-bench", "content-type": "application/json"}


@toolfold.tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


# What the raw clients do: they compute add(a, b) inline on the event loop. The
# default tool above is the safe one (a sync tool may block, so async runs hand
# it to a worker thread); this one opts into running inline.
add_inline = add.replace(blocking=False)


# --- the fake server process -----------------------------------------------------


def start_server() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "fake_openai_server.py")],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=dies_with_this_process(),  # (a bench killed mid-run takes it along)
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("READY "):
        process.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}/v1"


# --- raw clients, hand-written JSON ----------------------------------------------


def _tool_messages(message: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for call in message.get("tool_calls") or ():
        args = json.loads(call["function"]["arguments"])
        out.append({"role": "tool", "tool_call_id": call["id"], "content": str(add(**args))})
    return out


def raw_loop_sync(client: httpx.Client, url: str, steps: int) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "add things"}]
    while True:
        body = {"model": f"fake-{steps}", "messages": messages, "tools": TOOLS}
        response = client.post(url, content=json.dumps(body).encode(), headers=HEADERS)
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            return str(message["content"])
        messages.extend(_tool_messages(message))


async def raw_loop_async(
    post: Callable[[bytes], Awaitable[bytes]], steps: int, in_thread: bool = False
) -> str:
    """The raw async loop; ``in_thread`` computes the tool calls in a worker thread
    (``asyncio.to_thread``), as a careful program does with a function that may block."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "add things"}]
    while True:
        body = {"model": f"fake-{steps}", "messages": messages, "tools": TOOLS}
        message = json.loads(await post(json.dumps(body).encode()))["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            return str(message["content"])
        if in_thread:
            messages.extend(await asyncio.to_thread(_tool_messages, message))
        else:
            messages.extend(_tool_messages(message))


class _Accumulator:
    """Joins a streamed Chat Completions answer by hand, as a raw client must."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.done = False

    def line(self, line: str) -> None:
        if not line.startswith("data: "):
            return
        data = line[6:]
        if data == "[DONE]":
            self.done = True
            return
        for choice in json.loads(data)["choices"]:
            delta = choice["delta"]
            if delta.get("content"):
                self.text.append(delta["content"])
            for piece in delta.get("tool_calls") or ():
                call = self.calls.setdefault(
                    piece["index"], {"id": "", "name": "", "arguments": ""}
                )
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function") or {}
                call["name"] = function.get("name") or call["name"]
                call["arguments"] += function.get("arguments") or ""

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in self.calls.values()
            ]
        return message


def raw_stream_loop_sync(client: httpx.Client, url: str, steps: int) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "add things"}]
    while True:
        body = {"model": f"fake-{steps}", "messages": messages, "tools": TOOLS, "stream": True}
        answer = _Accumulator()
        with client.stream("POST", url, content=json.dumps(body).encode(), headers=HEADERS) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                answer.line(line)
                if answer.done:
                    break
        message = answer.message()
        if not answer.calls:
            return str(message["content"])
        messages.append(message)
        messages.extend(_tool_messages(message))


async def raw_stream_loop_async(client: httpx.AsyncClient, url: str, steps: int) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "add things"}]
    while True:
        body = {"model": f"fake-{steps}", "messages": messages, "tools": TOOLS, "stream": True}
        answer = _Accumulator()
        content = json.dumps(body).encode()
        async with client.stream("POST", url, content=content, headers=HEADERS) as r:
            r.raise_for_status()
            async for line in r.aiter_lines():
                answer.line(line)
                if answer.done:
                    break
        message = answer.message()
        if not answer.calls:
            return str(message["content"])
        messages.append(message)
        messages.extend(_tool_messages(message))


# --- measuring ---------------------------------------------------------------------


def best_of(
    repeats: int, run: Callable[[], object], clock: Callable[[], float] = time.perf_counter
) -> float:
    times = []
    for _ in range(repeats):
        start = clock()
        run()
        times.append(clock() - start)
    return min(times)


def report(label: str, seconds: float, baseline: float, unit: str = "ms") -> None:
    ratio = seconds / baseline
    print(f"  {label:44s} {seconds * 1e3:9.2f} {unit}   {ratio:5.2f}x")


def report_pairs(label: str, raw: list[float], ours: list[float]) -> None:
    """The ratio of each interleaved pair (ours / raw): its median and range."""
    ratios = sorted(o / r for r, o in zip(raw, ours, strict=True))
    print(
        f"  {label:44s} pairwise ratio median {statistics.median(ratios):5.2f}x "
        f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}, {len(ratios)} pairs)"
    )


def bench_loop(url: str, repeats: int, backend: str) -> None:
    print(f"loop on {backend}: 10 tool steps + final answer = 11 HTTP exchanges, best of", repeats)
    package = __import__(backend)
    model = toolfold.model("openai:fake-10", base_url=url, api_key="sk-bench", http=backend)

    def toolfold_sync() -> None:
        response = toolfold.generate_text(model, "add things", tools=[add], max_steps=11)
        assert response.text.startswith("Finished after 10"), response.text

    with package.Client() as client:
        target = f"{url}/chat/completions"
        raw_loop_sync(client, target, 10)
        toolfold_sync()
        raw_times, our_times = timed_pairs(
            repeats, lambda: raw_loop_sync(client, target, 10), toolfold_sync
        )
        raw_cpu, our_cpu = timed_pairs(
            repeats, lambda: raw_loop_sync(client, target, 10), toolfold_sync, time.process_time
        )
    raw, ours = min(raw_times), min(our_times)
    report(f"raw {backend}.Client (sync)", raw, raw)
    report(f"toolfold.generate_text (sync, http={backend!r})", ours, raw)
    report_pairs("  sync, each pair", raw_times, our_times)
    report_cpu("  sync", raw_cpu, our_cpu)

    # Two like-for-like async pairs: the tool computed inline on the event loop
    # (raw, and toolfold with the tool declared ``blocking=False``), and the tool
    # handed to a worker thread (raw with ``asyncio.to_thread``, and toolfold's
    # default for a sync tool in an async run). A thread hop costs about as much
    # as an exchange's own work on a VM (``bench/bench_hop.py``), so comparing a
    # hop against no hop says nothing about toolfold.
    pairs = {
        "tool inline": (False, add_inline),
        "tool in a thread": (True, add),
    }

    async def measure_async() -> dict[str, tuple[list[float], ...]]:
        async with package.AsyncClient() as client:
            target = f"{url}/chat/completions"

            async def post(content: bytes) -> bytes:
                response = await client.post(target, content=content, headers=HEADERS)
                response.raise_for_status()
                return bytes(response.content)

            found: dict[str, tuple[list[float], ...]] = {}
            for label, (in_thread, tool) in pairs.items():

                async def toolfold_async(tool: toolfold.Tool = tool) -> None:
                    response = await toolfold.agenerate_text(
                        model, "add things", tools=[tool], max_steps=11
                    )
                    assert response.text.startswith("Finished after 10")

                await raw_loop_async(post, 10, in_thread)
                await toolfold_async()
                samples: tuple[list[float], ...] = ([], [], [], [])
                for clock, (raw_times, our_times) in (
                    (time.perf_counter, samples[:2]),
                    (time.process_time, samples[2:]),
                ):
                    for _ in range(repeats):
                        start = clock()
                        await raw_loop_async(post, 10, in_thread)
                        raw_times.append(clock() - start)
                        start = clock()
                        await toolfold_async()
                        our_times.append(clock() - start)
                found[label] = samples
            await model.aclose()  # type: ignore[attr-defined]
            return found

    for label, (raw_times, our_times, raw_cpu, our_cpu) in asyncio.run(measure_async()).items():
        raw_a, ours_a = min(raw_times), min(our_times)
        report(f"raw {backend}.AsyncClient (async, {label})", raw_a, raw_a)
        report(f"toolfold.agenerate_text (async, {label})", ours_a, raw_a)
        report_pairs(f"  async {label}, each pair", raw_times, our_times)
        report_cpu(f"  async {label}", raw_cpu, our_cpu)


def timed_pairs(
    repeats: int,
    raw: Callable[[], object],
    ours: Callable[[], object],
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[list[float], list[float]]:
    """Times of two runs measured in turns, so each pair meets the same machine load."""
    raw_times, our_times = [], []
    for _ in range(repeats):
        raw_times.append(best_of(1, raw, clock))
        our_times.append(best_of(1, ours, clock))
    return raw_times, our_times


def report_cpu(label: str, raw: list[float], ours: list[float]) -> None:
    """The client process's CPU time per run (least of the runs): steadier than wall time
    on a shared machine, where the wall time also waits for the server process."""
    print(
        f"  {label + ', client CPU per run':44s} raw {min(raw) * 1e3:.2f} ms, "
        f"toolfold {min(ours) * 1e3:.2f} ms   {min(ours) / min(raw):5.2f}x"
    )


def bench_stream(url: str, repeats: int) -> None:
    print("stream (httpx): the same 11 exchanges streamed (SSE), best of", repeats)
    model = toolfold.model("openai:fake-10", base_url=url, api_key="sk-bench", http="httpx")
    agent = toolfold.Agent(model, tools=[add], max_steps=11)

    def toolfold_sync() -> None:
        run = agent.stream("add things")
        for _ in run:
            pass
        assert run.response.text.startswith("Finished after 10"), run.response.text

    with httpx.Client() as client:
        target = f"{url}/chat/completions"
        raw_stream_loop_sync(client, target, 10)
        toolfold_sync()
        raw = best_of(repeats, lambda: raw_stream_loop_sync(client, target, 10))
        ours = best_of(repeats, toolfold_sync)
    report("raw httpx.Client stream + hand-parsed SSE", raw, raw)
    report("toolfold Agent.stream (sync)", ours, raw)

    async def toolfold_async() -> None:
        run = agent.stream("add things")
        async for _ in run:
            pass
        assert run.response.text.startswith("Finished after 10")

    async def measure_async() -> tuple[float, float]:
        async with httpx.AsyncClient() as client:
            target = f"{url}/chat/completions"
            await raw_stream_loop_async(client, target, 10)
            await toolfold_async()
            raw_times, our_times = [], []
            for _ in range(repeats):
                start = time.perf_counter()
                await raw_stream_loop_async(client, target, 10)
                raw_times.append(time.perf_counter() - start)
                start = time.perf_counter()
                await toolfold_async()
                our_times.append(time.perf_counter() - start)
            return min(raw_times), min(our_times)

    raw_a, ours_a = asyncio.run(measure_async())
    report("raw httpx.AsyncClient stream + hand-parsed SSE", raw_a, raw_a)
    report("toolfold Agent.stream (async)", ours_a, raw_a)


# --- concurrency -------------------------------------------------------------------

PostFactory = Callable[[str], Awaitable[tuple[Callable[[bytes], Awaitable[bytes]], Any]]]

# The raw httpx/httpx2 pools keep idle connections as long as toolfold's own
# (not httpx's 5 s): one round of all the rows takes longer than 5 s, so with
# 5 s the raw pool was rebuilt every round, and httpcore2 scans a rebuilt pool
# (fewer idle connections) for less; that, not toolfold, was the 10 % between
# the httpx2 rows (bench/README.md, bench_httpx_split.py).
_EXPIRY = HttpLimits().keepalive_expiry


async def _httpx_tuned_factory(target: str) -> tuple[Callable[[bytes], Awaitable[bytes]], Any]:
    limits = httpx.Limits(
        max_connections=1000, max_keepalive_connections=1000, keepalive_expiry=_EXPIRY
    )
    client = httpx.AsyncClient(limits=limits)

    async def post(content: bytes) -> bytes:
        response = await client.post(target, content=content, headers=HEADERS)
        return response.content

    return post, client.aclose


async def _httpx2_factory(target: str) -> tuple[Callable[[bytes], Awaitable[bytes]], Any]:
    import httpx2

    limits = httpx2.Limits(
        max_connections=1000, max_keepalive_connections=1000, keepalive_expiry=_EXPIRY
    )
    client = httpx2.AsyncClient(limits=limits)

    async def post(content: bytes) -> bytes:
        response = await client.post(target, content=content, headers=HEADERS)
        return bytes(response.content)

    return post, client.aclose


async def _aiohttp_factory(target: str) -> tuple[Callable[[bytes], Awaitable[bytes]], Any]:
    import aiohttp

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000))

    async def post(content: bytes) -> bytes:
        async with session.post(target, data=content, headers=HEADERS) as response:
            return await response.read()

    return post, session.close


def _installed(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


async def one_round(run_once: Callable[[], Awaitable[object]], runs: int) -> tuple[float, float]:
    """Runs per second (wall clock) and client-process CPU seconds per run, for one round."""
    cpu = time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*[run_once() for _ in range(runs)])
    wall = time.perf_counter() - start
    return runs / wall, (time.process_time() - cpu) / runs


def bench_concurrency(
    url: str, runs: int, rounds: int, backends: frozenset[str] | None = None
) -> None:
    print(
        f"concurrency: {runs} concurrent 3-step runs (4 exchanges each), best of {rounds} "
        "rounds; the clients take turns each round, so they share the machine's load;\n"
        "  CPU = the client process's CPU time per run, median of the rounds"
    )
    target = f"{url}/chat/completions"
    # Each toolfold backend next to the same client used raw.
    factories: dict[str, PostFactory] = {"httpx": _httpx_tuned_factory}
    if _installed("httpx2"):
        factories["httpx2"] = _httpx2_factory
    if _installed("aiohttp"):
        factories["aiohttp"] = _aiohttp_factory
    if backends is not None:
        factories = {name: made for name, made in factories.items() if name in backends}

    async def measure() -> dict[str, list[tuple[float, float]]]:
        runners: dict[str, Callable[[], Awaitable[object]]] = {}
        closers = []
        models = []
        for backend, factory in factories.items():
            post, close = await factory(target)
            runners[f"raw {backend}"] = functools.partial(raw_loop_async, post, 3)
            closers.append(close)
            model = toolfold.model("openai:fake-3", base_url=url, api_key="sk-bench", http=backend)
            models.append(model)
            runners[f"toolfold http={backend} (tool inline)"] = functools.partial(
                toolfold.agenerate_text, model, "add things", tools=[add_inline], max_steps=4
            )
            # The same runs from one Agent made beforehand, as a service running many
            # does: agenerate_text builds its agent (tools, config) on every call.
            agent = toolfold.Agent(model, tools=[add_inline], max_steps=4)
            runners[f"toolfold http={backend} Agent.arun"] = functools.partial(
                agent.arun, "add things"
            )
        if backends is None:
            default = toolfold.model("openai:fake-3", base_url=url, api_key="sk-bench")
            models.append(default)
            runners["toolfold default (tool in thread)"] = functools.partial(
                toolfold.agenerate_text, default, "add things", tools=[add], max_steps=4
            )
        samples: dict[str, list[tuple[float, float]]] = {label: [] for label in runners}
        try:
            for run_once in runners.values():
                await one_round(run_once, runs)  # warm the pools
            for _ in range(rounds):
                for label, run_once in runners.items():
                    samples[label].append(await one_round(run_once, runs))
        finally:
            for close in closers:
                await close()
            for model in models:
                await model.aclose()  # type: ignore[attr-defined]
        return samples

    samples = asyncio.run(measure())
    results = {label: max(rate for rate, _ in pairs) for label, pairs in samples.items()}
    for label, rate in results.items():
        cpu = statistics.median(c for _, c in samples[label])
        backend = label.split("http=")[1].split()[0] if "http=" in label else None
        versus = ""
        if backend:
            # Each round's rate against the raw client's in the same round.
            raw_rates = [r for r, _ in samples[f"raw {backend}"]]
            rounds = [r / raw for (r, _), raw in zip(samples[label], raw_rates, strict=True)]
            # All rounds together: the runs over the time they took (every collection counted).
            overall = statistics.harmonic_mean(r for r, _ in samples[label])
            versus = (
                f"{rate / results[f'raw {backend}']:5.2f}x raw {backend} "
                f"(per round: median {statistics.median(rounds):.2f}x, "
                f"{min(rounds):.2f}-{max(rounds):.2f}; all rounds: "
                f"{overall / statistics.harmonic_mean(raw_rates):.2f}x)"
            )
        print(f"  {label:44s} {rate:9.0f} runs/s   CPU {cpu * 1e6:6.0f} us/run   {versus}")


def bench_latency(url: str, count: int) -> None:
    print(f"latency (httpx): one request at a time, median of {count}")
    body = {"model": "fake-3", "messages": [{"role": "user", "content": "x"}], "tools": TOOLS}
    content = json.dumps(body).encode()
    target = f"{url}/chat/completions"

    def median(samples: list[float]) -> float:
        return statistics.median(samples)

    with httpx.Client() as client:
        samples = []
        for _ in range(count):
            start = time.perf_counter()
            client.post(target, content=content, headers=HEADERS).json()
            samples.append(time.perf_counter() - start)
    raw_sync = median(samples)
    transport = Transport("openai", url, "sk-bench", http="httpx")
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        transport.post_json_sync("chat/completions", body)
        samples.append(time.perf_counter() - start)
    transport.close()
    report("raw httpx.Client", raw_sync, raw_sync)
    report("toolfold Transport.post_json_sync", median(samples), raw_sync)

    async def measure() -> tuple[float, float]:
        async with httpx.AsyncClient() as client:
            raw_samples = []
            for _ in range(count):
                start = time.perf_counter()
                (await client.post(target, content=content, headers=HEADERS)).json()
                raw_samples.append(time.perf_counter() - start)
        transport = Transport("openai", url, "sk-bench", http="httpx")
        our_samples = []
        for _ in range(count):
            start = time.perf_counter()
            await transport.post_json("chat/completions", body)
            our_samples.append(time.perf_counter() - start)
        await transport.aclose()
        return median(raw_samples), median(our_samples)

    raw_async, ours_async = asyncio.run(measure())
    report("raw httpx.AsyncClient", raw_async, raw_async)
    report("toolfold Transport.post_json", ours_async, raw_async)


def main() -> None:
    parser = argparse.ArgumentParser(description="toolfold HTTP benchmarks")
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--only", default="loop,stream,concurrency,latency")
    parser.add_argument(
        "--backends", help="concurrency: only these backends' rows (e.g. aiohttp), raw and toolfold"
    )
    parser.add_argument("--rounds", type=int, help="concurrency: rounds (default 5, --quick 3)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    repeats = 5 if args.quick else 20
    process, url = start_server()
    try:
        print(f"python {sys.version.split()[0]}, httpx {httpx.__version__}, fake server at {url}")
        if "latency" in only:
            bench_latency(url, 50 if args.quick else 300)
        if "loop" in only:
            for backend in ("httpx", "httpx2") if _installed("httpx2") else ("httpx",):
                bench_loop(url, repeats, backend)
        if "stream" in only:
            bench_stream(url, repeats)
        if "concurrency" in only:
            rounds = args.rounds or (3 if args.quick else 5)
            backends = frozenset(args.backends.split(",")) if args.backends else None
            bench_concurrency(url, 100, rounds, backends)
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
