"""Where a toolfold run on httpx2 (or httpx) spends more than the raw client: steps between the two.

    .venv/bin/python bench/bench_httpx_split.py [--http httpx] [--pause 6]   # client CPU, 100 at once
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        .venv/bin/python bench/bench_httpx_split.py --count agent --rounds 3 --concurrent 100 \\
        --pause 6   # and --rounds 1

Each variant runs ``bench_http.py``'s 3-step loop (4 exchanges) against the
fake server; they differ in one thing each, from the raw loop up to toolfold:

* ``raw``: a raw ``AsyncClient.post`` loop with the pool ``bench_http.py``
  once gave its raw client: 1000 connections kept alive for httpx's 5 s;
* ``raw-limits``: the same with toolfold's pool limits (`HttpLimits`: 100
  connections kept alive for 30 s);
* ``raw-30s``: ``bench_http.py``'s raw client now: 1000 connections kept
  alive as long as toolfold's (30 s);
* ``raw-stream``: the raw client sending like toolfold, ``send(stream=True)``,
  then ``aiter_raw`` and ``aclose``;
* ``client``: toolfold's own client (``http=...``) posting like the raw loop;
* ``backend``: toolfold's backend (``OwnedHttpxBackend.send``, the client's
  transport layer) read like ``raw-stream``;
* ``transport``: the raw loop posting through ``Transport.post_json``;
* ``agenerate_text`` / ``agent``: whole toolfold runs, an agent made per call
  or once; ``agent-raw-limits``: the agent on a model with ``raw``'s pool.

Timed (the default): client CPU per run, least and median of ``--rounds``
rounds of ``--concurrent`` (100) runs at once, the variants in turns.
``--count V`` runs variant V only, untimed, for an instruction counter (one
run at a time unless ``--concurrent`` says otherwise): the instructions of a
round are the count at ``--rounds 3`` minus the count at ``--rounds 1``,
halved. ``--pause S`` leaves every pool idle S seconds before each round, as
``bench_http.py``'s other rows do: past a pool's keep-alive expiry its
connections are closed and the round rebuilds it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_aiohttp_split
import bench_http

import toolfold
from toolfold.adapters._http._retry import HttpLimits
from toolfold.adapters._http._transport import Transport

Run = Callable[[], Awaitable[object]]


async def variants(
    url: str, http: str
) -> tuple[dict[str, Run], list[Callable[[], Awaitable[None]]]]:
    package = importlib.import_module(http)
    target = f"{url}/chat/completions"
    transport = Transport("openai", url, "sk-bench", http=http)
    backend = await transport._sender.clients.get_async()
    headers = {**transport._headers, "authorization": "Bearer sk-bench"}
    wide = package.Limits(max_connections=1000, max_keepalive_connections=1000)
    ours = HttpLimits()
    narrow = package.Limits(
        max_connections=ours.max_connections,
        max_keepalive_connections=ours.max_keepalive,
        keepalive_expiry=ours.keepalive_expiry,
    )
    raw = package.AsyncClient(limits=wide)
    limited = package.AsyncClient(limits=narrow)
    factory = bench_http._httpx2_factory if http == "httpx2" else bench_http._httpx_tuned_factory
    bench_post, bench_close = await factory(target)

    def poster(client: Any, sent: dict[str, str]) -> Callable[[bytes], Awaitable[bytes]]:
        async def post(content: bytes) -> bytes:
            response = await client.post(target, content=content, headers=sent)
            return bytes(response.content)

        return post

    def streamer(
        send: Callable[[bytes], Awaitable[Any]],
    ) -> Callable[[bytes], Awaitable[bytes]]:
        async def post(content: bytes) -> bytes:
            response = await send(content)
            try:
                return b"".join([piece async for piece in response.aiter_raw()])
            finally:
                await response.aclose()

        return post

    async def raw_send(content: bytes) -> Any:
        request = raw.build_request("POST", target, content=content, headers=headers)
        return await raw.send(request, stream=True)

    async def backend_send(content: bytes) -> Any:
        return await backend.send(target, content, headers, transport._sender.timeouts)

    async def through_transport(content: bytes) -> Any:
        return await transport.post_json("chat/completions", content)

    model = toolfold.model("openai:fake-3", base_url=url, api_key="sk-bench", http=http)
    kind: dict[str, Any] = {"tools": [bench_http.add_inline], "max_steps": 4}
    agent = toolfold.Agent(model, **kind)
    # toolfold with the raw client's pool: 1000 connections kept, httpx's 5 s expiry.
    theirs = HttpLimits(max_connections=1000, max_keepalive=1000, keepalive_expiry=5.0)
    wide_model = toolfold.model(
        "openai:fake-3", base_url=url, api_key="sk-bench", http=http, limits=theirs
    )
    wide_agent = toolfold.Agent(wide_model, **kind)
    loop = bench_aiohttp_split._loop
    runs: dict[str, Run] = {
        "raw": functools.partial(loop, poster(raw, bench_http.HEADERS)),
        "raw-limits": functools.partial(loop, poster(limited, bench_http.HEADERS)),
        "raw-30s": functools.partial(loop, bench_post),
        "raw-stream": functools.partial(loop, streamer(raw_send)),
        "client": functools.partial(loop, poster(backend.client, headers)),
        "backend": functools.partial(loop, streamer(backend_send)),
        "transport": functools.partial(loop, through_transport),
        "agenerate_text": functools.partial(toolfold.agenerate_text, model, "add things", **kind),
        "agent": functools.partial(agent.arun, "add things"),
        "agent-raw-limits": functools.partial(wide_agent.arun, "add things"),
    }
    closers = [
        raw.aclose,
        limited.aclose,
        bench_close,
        transport.aclose,
        model.aclose,
        wide_model.aclose,
    ]  # type: ignore[attr-defined]
    return runs, closers


async def measure(
    url: str,
    http: str,
    names: list[str],
    rounds: int,
    concurrent: int,
    timed: bool,
    pause: float = 0.0,
) -> None:
    runs, closers = await variants(url, http)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    try:
        for name in names:  # warm the pools
            await asyncio.gather(*[runs[name]() for _ in range(concurrent)])
        for _ in range(rounds):
            for name in names:
                await asyncio.sleep(pause)
                start = time.process_time()
                await asyncio.gather(*[runs[name]() for _ in range(concurrent)])
                cpu[name].append((time.process_time() - start) / concurrent)
    finally:
        for close in closers:
            await close()
    if not timed:
        return
    print(f"http={http}: {concurrent} concurrent 3-step runs, {rounds} rounds; client CPU per run")
    for name in names:
        print(
            f"  {name:20s} least {min(cpu[name]) * 1e6:6.0f} us  median "
            f"{statistics.median(cpu[name]) * 1e6:6.0f} us"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", default="httpx2", choices=("httpx", "httpx2"))
    parser.add_argument(
        "--variants",
        default="raw,raw-limits,raw-30s,raw-stream,client,backend,transport,agenerate_text,agent",
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--concurrent", type=int, help="runs at once (default 100; --count: 1)")
    parser.add_argument(
        "--pause", type=float, default=0.0, help="seconds idle before each round (pool expiry)"
    )
    parser.add_argument("--count", help="run this variant one run at a time, untimed")
    args = parser.parse_args()
    process, url = bench_http.start_server()
    try:
        if args.count:
            args.concurrent = args.concurrent or 1
            asyncio.run(
                measure(
                    url, args.http, [args.count], args.rounds, args.concurrent, False, args.pause
                )
            )
        else:
            names = args.variants.split(",")
            args.concurrent = args.concurrent or 100
            asyncio.run(
                measure(url, args.http, names, args.rounds, args.concurrent, True, args.pause)
            )
    finally:
        process.kill()


if __name__ == "__main__":
    main()
