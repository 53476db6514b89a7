"""Client CPU per exchange without sockets: toolfold's tool loop against the raw loop.

    .venv/bin/python bench/bench_exchange.py [--steps 10] [--batches 40] [--evict]
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python bench/bench_exchange.py --count toolfold --batches 120

The same sequential tool loop as ``bench_http.py --only loop`` (the ``add``
tool, the fake server's answers), with the HTTP exchange replaced by the
answer's bytes: toolfold's transport still builds its call (headers, the body
as JSON bytes) and parses the answer with its JSON reader, and the raw loop
still encodes its body with ``json.dumps`` and parses the answer with
``json.loads``. What is left is each side's own work per exchange: for the
raw loop, the JSON and the hand-written dicts; for toolfold, the request
built from the neutral messages, the typed parse of the answer, the state and
its events, the argument checks and the executor. The async rows run ``add``
inline (as the raw loop does) and, as an async run does by default with a
sync tool, on a worker thread. Client CPU per exchange,
the least of ``--batches`` batches of 10 runs (the machine is shared: the
least is the figure other work disturbed least).

``--evict`` copies 8 MiB before each exchange, on both sides, and leaves that
copy's CPU out of the figures: the CPU caches then hold little of the run, as
after a real exchange, where the socket calls, the client library and the
server process have run in between. It shows what the same work costs there.

``--count toolfold`` (or ``raw``) runs that side ``--batches`` times untimed:
under valgrind, the instructions of 100 runs are the count at 120 minus the
count at 20, the same on any machine load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_http  # noqa: E402
from fake_openai_server import completion  # noqa: E402

import toolfold  # noqa: E402
from toolfold.adapters._http._transport import Transport  # noqa: E402


def _tool_messages_in(body: Any) -> int:
    if type(body) is bytes:
        return body.count(b'"role":"tool"')
    return sum(1 for m in body["messages"] if m.get("role") == "tool")


class _Answer:
    status_code = 200
    headers: Mapping[str, str] = {}


def canned(steps: int) -> dict[int, bytes]:
    """The fake server's answer to a request holding n tool messages, by n."""
    tools = [{"role": "tool"}]
    return {
        n: completion({"model": f"fake-{steps}", "messages": tools * n, "tools": bench_http.TOOLS})
        for n in range(steps + 1)
    }


class Evictor:
    """Evicts the CPU caches before each exchange (when on) and counts the CPU it took."""

    def __init__(self) -> None:
        self.block: bytearray | None = None
        self.spent = 0.0

    def __call__(self) -> None:
        if self.block is not None:
            start = time.process_time()
            bytes(self.block)
            self.spent += time.process_time() - start


EVICT = Evictor()


def without_sockets(answers: dict[int, bytes]) -> None:
    """Make `Transport.post_json(_sync)` answer from ``answers`` (its call built as usual)."""

    def post_json_sync(self: Transport, path: str, body: Any, *, headers: Any = None) -> Any:
        EVICT()
        call = self._call(path, body, self._headers, headers, streaming=False)
        return self._sender.json(answers[_tool_messages_in(body)], _Answer, call.url)

    async def post_json(self: Transport, path: str, body: Any, *, headers: Any = None) -> Any:
        return post_json_sync(self, path, body, headers=headers)

    Transport.post_json_sync = post_json_sync  # type: ignore[method-assign]
    Transport.post_json = post_json  # type: ignore[method-assign]


def raw_loop(answers: dict[int, bytes], steps: int) -> str:
    """`bench_http.raw_loop_sync` with the exchange replaced by the answer's bytes."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "add things"}]
    while True:
        EVICT()
        body = {"model": f"fake-{steps}", "messages": messages, "tools": bench_http.TOOLS}
        json.dumps(body).encode()
        message = json.loads(answers[_tool_messages_in(body)])["choices"][0]["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            return str(message["content"])
        messages.extend(bench_http._tool_messages(message))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--evict", action="store_true", help="evict the caches between exchanges")
    parser.add_argument(
        "--count",
        choices=("toolfold", "raw"),
        help="run that side --batches times, untimed, and exit (for an instruction counter)",
    )
    args = parser.parse_args()
    if args.evict:
        EVICT.block = bytearray(8 * 2**20)
    steps, exchanges = args.steps, args.steps + 1
    answers = canned(steps)
    without_sockets(answers)
    model = toolfold.model(
        f"openai:fake-{steps}", base_url="http://127.0.0.1:9/v1", api_key="sk-bench"
    )
    done = f"Finished after {steps}"

    def ours_sync() -> None:
        response = toolfold.generate_text(
            model, "add things", tools=[bench_http.add], max_steps=exchanges
        )
        assert response.text.startswith(done), response.text

    if args.count is not None:
        for _ in range(args.batches):
            if args.count == "toolfold":
                ours_sync()
            else:
                raw_loop(answers, steps)
        return

    async def ours_async(tool: Any) -> None:
        response = await toolfold.agenerate_text(
            model, "add things", tools=[tool], max_steps=exchanges
        )
        assert response.text.startswith(done), response.text

    loop = asyncio.new_event_loop()

    def batch_async(tool: Any) -> Callable[[], None]:
        def batch() -> None:
            async def ten() -> None:
                for _ in range(10):
                    await ours_async(tool)

            loop.run_until_complete(ten())

        return batch

    rows: dict[str, Callable[[], object]] = {
        "raw loop (json.dumps, json.loads, dicts)": lambda: [
            raw_loop(answers, steps) for _ in range(10)
        ],
        "toolfold.generate_text": lambda: [ours_sync() for _ in range(10)],
        "toolfold.agenerate_text (tool inline)": batch_async(bench_http.add_inline),
        # The default for a sync tool in an async run: a worker thread (it may block).
        "toolfold.agenerate_text (worker thread)": batch_async(bench_http.add),
    }
    for run in rows.values():
        run()  # warm up
    best = dict.fromkeys(rows, float("inf"))
    for _ in range(args.batches):
        for label, run in rows.items():
            EVICT.spent = 0.0
            start = time.process_time()
            run()
            seconds = time.process_time() - start - EVICT.spent
            best[label] = min(best[label], seconds / 10 / exchanges)
    loop.close()
    raw = best["raw loop (json.dumps, json.loads, dicts)"]
    caches = ", caches evicted between exchanges" if args.evict else ""
    print(f"client CPU per exchange, {steps}-step loop without sockets, stdlib json{caches}")
    for label, seconds in best.items():
        print(f"  {label:44s} {seconds * 1e6:7.1f} us   {seconds / raw:5.2f}x")


if __name__ == "__main__":
    main()
