"""Where a toolfold run on aiohttp spends more than the raw aiohttp loop: steps between the two.

    .venv/bin/python bench/bench_aiohttp_split.py                  # client CPU, 100 concurrent runs
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        .venv/bin/python bench/bench_aiohttp_split.py --count transport --rounds 120   # and 20

Each variant runs ``bench_http.py``'s 3-step loop (4 exchanges) against the
fake server; they differ in one thing each, from the raw loop up to toolfold:

* ``raw``: ``bench_http.py``'s raw aiohttp client (2 headers, aiohttp's
  default ``total=300`` timeout);
* ``raw-headers``: the same session sending toolfold's 5 headers;
* ``session``: toolfold's own session (``http="aiohttp"``: its timeouts,
  ``sock_read`` among them) posting like the raw loop;
* ``session-no-timeouts``: a session like it without any timeout;
* ``session-read-timeout`` / ``session-connect-timeouts``: the same with only
  toolfold's ``sock_read`` (``Timeouts.read``), or only its ``connect`` and
  ``sock_connect`` (``Timeouts.pool`` and ``connect``);
* ``transport``: the raw loop posting through ``Transport.post_json``;
* ``model``: a hand-written loop over toolfold's model (``model.request``
  with `ModelRequest`, `Message` and `ToolResultPart`): the transport and the
  Chat Completions codec, no run state;
* ``log-only``: ``model`` also making each response's `ModelResponded` and
  each result's `ToolReturned` and keeping them in a list (the records a
  run's log keeps), no reducer;
* ``deferred``: ``log-only`` with the log reduced into the run's state once,
  when the run ends (each event in turn from `initial_state`): what the
  state costs when no state is made between the exchanges;
* ``no-effect``: ``core`` below with each request built from the state's
  conversation by hand, no ``next_effect``;
* ``core``: a hand-written driver over the pure core (``next_effect``,
  ``reduce`` of `ModelResponded` and `ToolReturned` event by event), the tool
  called directly: ``model`` plus the run's state and event log;
* ``agenerate_text`` / ``agent``: whole toolfold runs, an agent made per call
  or once (``agent`` is ``core`` plus the driver: the tool's argument check
  and its call through the executor, approvals, hooks, the `Response`).

Timed (the default): client CPU per run, least and median of ``--rounds``
rounds of 100 concurrent runs, the variants in turns; and the garbage
collector's share (CPU time inside collections, collections per 100 runs).
``--count V`` runs variant V one run at a time, untimed, for an instruction
counter: the instructions of 100 runs are the count at ``--rounds 120`` minus
the count at ``--rounds 20``. ``--count V --concurrent 100`` runs rounds of 100
at a time, as the timed rounds do (then 400 runs are ``--rounds 6`` minus
``--rounds 2``). ``--concurrent N`` sets the runs at a time of the timed
rounds too (100 unless given).

``--collector both`` times each variant twice a round, once as usual and
once with the cyclic collector off (a full collection first, outside the
timing), the four in turns: how much of a gap is the collector's and how
much the rest of the client's work (``off`` times only the latter).

Each timed variant's second line splits a round's wall time per run into
the client's CPU time, the time it waited in the run queue for a core
(Linux's ``/proc/self/schedstat``: other processes, or the fake server on
the client's core) and the time it was blocked in the event loop's
``select`` with nothing to run (waiting for the server): medians of the
rounds. The wall rate can so be read apart from the machine's load: only
the blocked time is the client waiting on the exchanges themselves.

A last line per variant after the first pairs the rounds: the first
variant's CPU over this one's in the same round, median and quartiles of
the rounds, and how many rounds read at or above the target's 0.85x. The
machine's speed drifts between rounds; the variants of one round share it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_http

import toolfold
from toolfold import Message, ModelRequest, ToolResultPart
from toolfold.adapters._http._transport import Transport
from toolfold.runtime import (
    CallModel,
    ModelResponded,
    RunConfig,
    ToolReturned,
    ToolSpec,
    initial_state,
    next_effect,
    reduce,
)

Run = Callable[[], Awaitable[object]]


async def _loop(post: Callable[[bytes], Awaitable[Any]]) -> None:
    """`bench_http.raw_loop_async`, for a ``post`` answering bytes or parsed JSON."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "add things"}]
    while True:
        body = {"model": "fake-3", "messages": messages, "tools": bench_http.TOOLS}
        answer = await post(json.dumps(body).encode())
        message = (answer if isinstance(answer, dict) else json.loads(answer))["choices"][0][
            "message"
        ]
        messages.append(message)
        if not message.get("tool_calls"):
            return
        messages.extend(bench_http._tool_messages(message))


async def variants(url: str) -> tuple[dict[str, Run], list[Callable[[], Awaitable[None]]]]:
    import aiohttp

    target = f"{url}/chat/completions"
    transport = Transport("openai", url, "sk-bench", http="aiohttp")
    backend = await transport._sender.clients.get_async()
    headers = {**transport._headers, "authorization": "Bearer sk-bench"}
    raw = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000))

    def session_with(timeout: Any) -> Any:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=100), timeout=timeout, auto_decompress=False
        )

    bare = session_with(aiohttp.ClientTimeout(total=None))
    read_only = session_with(aiohttp.ClientTimeout(total=None, sock_read=600))
    connect_only = session_with(aiohttp.ClientTimeout(total=None, connect=60, sock_connect=10))

    def poster(session: Any, sent: dict[str, str]) -> Callable[[bytes], Awaitable[bytes]]:
        async def post(content: bytes) -> bytes:
            async with session.post(target, data=content, headers=sent) as response:
                body: bytes = await response.read()
                return body

        return post

    async def through_transport(content: bytes) -> Any:
        return await transport.post_json("chat/completions", content)

    model = toolfold.model("openai:fake-3", base_url=url, api_key="sk-bench", http="aiohttp")
    agent = toolfold.Agent(model, tools=[bench_http.add_inline], max_steps=4)
    config = RunConfig(tools=[ToolSpec.from_tool(bench_http.add_inline)], max_steps=4)
    add = bench_http.add_inline.function

    async def model_loop(log: list[Any] | None = None) -> None:
        # The conversation grown by hand, the tool called as the raw loop calls it;
        # with ``log``, the events a run's log holds kept in it too ("log-only").
        messages: tuple[Message, ...] = (Message.user("add things"),)
        tools = config.definitions
        while True:
            response = await model.request(ModelRequest(messages, tools))
            if log is not None:
                log.append(ModelResponded(response))
            messages = (*messages, response.message)
            calls = response.message.tool_calls
            if not calls:
                return
            results = []
            for call in calls:
                content = str(add(**call.arguments))
                if log is not None:
                    log.append(ToolReturned(call.id, content))
                results.append(ToolResultPart(call.id, call.name, content))
            messages = (*messages, Message("tool", results))

    async def log_only() -> None:
        await model_loop([])

    async def deferred() -> None:
        log: list[Any] = []
        await model_loop(log)
        state = initial_state("add things", config, run_id="bench")
        for event in log:
            state = reduce(state, event)
        if state.phase != "finished":
            raise AssertionError(f"the deferred run ended {state.phase}")

    async def no_effect() -> None:
        state = initial_state("add things", config, run_id="bench")
        tools = config.definitions
        while state.phase == "awaiting_model":
            request = ModelRequest(state.conversation.as_tuple(), tools)
            state = reduce(state, ModelResponded(await model.request(request)))
            for call in state.calls_to_run:
                state = reduce(state, ToolReturned(call.id, str(add(**call.arguments))))

    async def core_loop() -> None:
        state = initial_state("add things", config, run_id="bench")
        while True:
            effect = next_effect(state)
            if not isinstance(effect, CallModel):
                return
            state = reduce(state, ModelResponded(await model.request(effect.request)))
            for call in state.calls_to_run:
                state = reduce(state, ToolReturned(call.id, str(add(**call.arguments))))

    runs: dict[str, Run] = {
        "raw": functools.partial(_loop, poster(raw, bench_http.HEADERS)),
        "raw-headers": functools.partial(_loop, poster(raw, headers)),
        "session": functools.partial(_loop, poster(backend.session, headers)),
        "session-no-timeouts": functools.partial(_loop, poster(bare, headers)),
        "session-read-timeout": functools.partial(_loop, poster(read_only, headers)),
        "session-connect-timeouts": functools.partial(_loop, poster(connect_only, headers)),
        "transport": functools.partial(_loop, through_transport),
        "model": model_loop,
        "log-only": log_only,
        "deferred": deferred,
        "no-effect": no_effect,
        "core": core_loop,
        "agenerate_text": functools.partial(
            toolfold.agenerate_text,
            model,
            "add things",
            tools=[bench_http.add_inline],
            max_steps=4,
        ),
        "agent": functools.partial(agent.arun, "add things"),
    }
    closers = [
        raw.close,
        bare.close,
        read_only.close,
        connect_only.close,
        transport.aclose,
        model.aclose,  # type: ignore[attr-defined]
    ]
    return runs, closers


class WallSplit:
    """Where a round's wall time went: CPU, run-queue wait, blocked in ``select`` (see the module).

    Wraps the running loop's selector while entered; ``split()`` gives the
    seconds since `start` as (wall, cpu, run queue, blocked). Off (``on=False``,
    for the instruction counts), it does nothing and ``split()`` is empty.
    """

    def __init__(self, *, on: bool = True) -> None:
        self._on = on
        self._blocked = 0.0
        self._select: Any = None
        self._at = (0.0, 0.0, 0.0, 0.0)

    def __enter__(self) -> WallSplit:
        if not self._on:
            return self
        selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
        self._selector, self._select = selector, selector.select

        def select(timeout: float | None = None) -> Any:
            start = time.perf_counter()
            try:
                return self._select(timeout)
            finally:
                self._blocked += time.perf_counter() - start

        selector.select = select
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._on:
            self._selector.select = self._select

    def _now(self) -> tuple[float, float, float, float]:
        try:
            with open("/proc/self/schedstat") as stat:
                queued = int(stat.read().split()[1]) / 1e9
        except OSError:  # not Linux: no run-queue figure
            queued = float("nan")
        return time.perf_counter(), time.process_time(), queued, self._blocked

    def start(self) -> None:
        if self._on:
            self._at = self._now()

    def split(self) -> tuple[float, ...]:
        if not self._on:
            return ()
        return tuple(b - a for a, b in zip(self._at, self._now(), strict=True))


_OFF = " (collector off)"


async def measure(
    url: str, names: list[str], rounds: int, concurrent: int, timed: bool, collector: str = "on"
) -> None:
    runs, closers = await variants(url)
    unknown = [name for name in names if name not in runs]
    if unknown:
        for close in closers:
            await close()
        raise SystemExit(
            f"unknown variant(s) {', '.join(map(repr, unknown))}; variants: {', '.join(runs)}"
        )
    # A timed name is a variant, or one with the collector off (see the module).
    plain = names
    if collector != "on":
        runs.update({name + _OFF: runs[name] for name in plain})
        off = [name + _OFF for name in plain]
        names = off if collector == "off" else plain + off
    cpu: dict[str, list[float]] = {name: [] for name in names}
    splits: dict[str, list[tuple[float, ...]]] = {name: [] for name in names}
    in_gc = dict.fromkeys(names, 0.0)
    collections = {name: [0, 0, 0] for name in names}
    now: list[Any] = [None, 0.0]

    def watch(phase: str, info: dict[str, int]) -> None:
        if now[0] is None:
            return
        if phase == "start":
            now[1] = time.process_time()
        else:
            in_gc[now[0]] += time.process_time() - now[1]
            collections[now[0]][info["generation"]] += 1

    try:
        for name in plain:  # warm the pools
            await asyncio.gather(*[runs[name]() for _ in range(concurrent)])
        gc.callbacks.append(watch)
        with WallSplit(on=timed) as where:
            for _ in range(rounds):
                for name in names:
                    if name.endswith(_OFF):
                        gc.collect()  # (not timed: `now` names no variant)
                        gc.disable()
                    now[0] = name
                    start = time.process_time()
                    where.start()
                    await asyncio.gather(*[runs[name]() for _ in range(concurrent)])
                    cpu[name].append((time.process_time() - start) / concurrent)
                    splits[name].append(tuple(x / concurrent for x in where.split()))
                    now[0] = None
                    gc.enable()
        gc.callbacks.remove(watch)
    finally:
        for close in closers:
            await close()
        await asyncio.sleep(0.05)  # let aiohttp's transports close
    if not timed:
        return
    per = rounds * concurrent
    print(f"{concurrent} concurrent 3-step runs, {rounds} rounds; client CPU per run")
    for name in names:
        counts = ", ".join(f"{c * 100 / per:.1f}" for c in collections[name])
        print(
            f"  {name:36s} least {min(cpu[name]) * 1e6:6.0f} us  median "
            f"{statistics.median(cpu[name]) * 1e6:6.0f} us   in gc {in_gc[name] / per * 1e6:5.0f} us"
            f"   collections per 100 runs (gen 0, 1, 2): {counts}"
        )
        wall, used, queued, blocked = (
            statistics.median(split[i] for split in splits[name]) * 1e6 for i in range(4)
        )
        print(
            f"  {'':36s} wall median {wall:6.0f} us = CPU {used:6.0f} + run queue {queued:6.0f}"
            f" + blocked in select {blocked:5.0f} (rest {wall - used - queued - blocked:4.0f}, medians)"
        )
    # Each round's CPU against the first variant's in the same round: the machine's
    # speed drifts between rounds (the raw median alone moved from 400 to 770 us
    # between runs minutes apart), and the variants' turns in a round share it.
    first = names[0]
    for name in names[1:]:
        ratios = sorted(a / b for a, b in zip(cpu[first], cpu[name], strict=True))
        low, mid, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        print(
            f"  {name:36s} {first} / {name}, CPU of the same round: median {mid:.3f}x"
            f" (quartiles {low:.3f}-{high:.3f}x, {sum(r >= 0.85 for r in ratios)} of"
            f" {len(ratios)} rounds at or above 0.85x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variants",
        default="raw,raw-headers,session,session-no-timeouts,transport,agenerate_text,agent",
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--collector",
        choices=("on", "off", "both"),
        default="on",
        help="time the rounds with the cyclic collector on, off, or both in turns",
    )
    parser.add_argument(
        "--count", help="run this variant untimed (one run at a time unless --concurrent)"
    )
    parser.add_argument(
        "--concurrent",
        type=int,
        help="runs at a time in each round (default: 100 timed, 1 with --count)",
    )
    args = parser.parse_args()
    if args.concurrent is not None and args.concurrent < 1:
        parser.error(f"--concurrent must be at least 1, got {args.concurrent}")
    least = 0 if args.count else 1  # (a count's baseline may run no round)
    if args.rounds < least:
        parser.error(f"--rounds must be at least {least}, got {args.rounds}")
    process, url = bench_http.start_server()
    try:
        if args.count:
            concurrent = 1 if args.concurrent is None else args.concurrent
            asyncio.run(measure(url, [args.count], args.rounds, concurrent, timed=False))
        else:
            concurrent = 100 if args.concurrent is None else args.concurrent
            names = args.variants.split(",")
            asyncio.run(measure(url, names, args.rounds, concurrent, True, args.collector))
    finally:
        process.kill()


if __name__ == "__main__":
    main()
