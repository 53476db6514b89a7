"""Cost of the Anthropic Messages and Ollama codecs, and their 10-step loop over 127.0.0.1.

Codec rows (median microseconds per call): building the body of a 4- and a
50-message conversation with 5 tools, parsing a response with two calls, and
the recorded Anthropic stream stream-parallel-2-calls.yaml (text and two
calls in argument fragments) through the SSE decoder, the event decoder and
the runtime's fold. Ollama's rows beside them.

Loop rows: ``generate_text`` running 10 tool steps (11 HTTP exchanges) over
127.0.0.1, blocking and streamed, against ``fake_native_server.py`` for
Anthropic and Ollama and ``fake_openai_server.py`` for Chat Completions (the
reference; target: within 1.2x of it). Both servers run in their own
processes and the providers take turns within each round; the best wall time
and the median CPU time of this (client) process are printed. On a shared
machine the wall time is mostly the scheduler handing the CPU to a server
process, so the client CPU is the steadier figure.

Run: ``.venv/bin/python bench/bench_anthropic.py [--quick] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from bench_openai_chat import TOOLS, _conversation, _per_call

import toolfold
from toolfold.adapters import anthropic, ollama
from toolfold.adapters._http._sse import SSEDecoder
from toolfold.runtime import Agent, ModelRequest, StreamState, finish_stream, fold_stream

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.child_processes import dies_with_this_process  # noqa: E402

CASSETTE = (
    ROOT
    / ".."
    / "shared"
    / "fixtures"
    / "provider-traffic"
    / "anthropic-messages"
    / "stream-parallel-2-calls.yaml"
)
ANTHROPIC_RESPONSE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "Checking both."},
        *(
            {
                "type": "tool_use",
                "id": f"toolu_{i}",
                "name": "tool_1",
                "input": {"city": "Paris", "days": 3},
            }
            for i in range(2)
        ),
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 500, "cache_read_input_tokens": 100, "output_tokens": 40},
}
OLLAMA_RESPONSE = {
    "model": "qwen3",
    "created_at": "2026-01-01T00:00:00Z",
    "message": {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "tool_1", "arguments": {"city": "Paris", "days": 3}}}]
        * 2,
    },
    "done": True,
    "done_reason": "stop",
    "prompt_eval_count": 500,
    "eval_count": 40,
}


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def codec_rows() -> None:
    small = ModelRequest(_conversation(1), TOOLS)
    large = ModelRequest(_conversation(24), TOOLS)  # 50 messages
    anthropic.build_body(large, "claude")  # warm the schema compile cache
    ollama.build_body(large, "qwen3")
    data = yaml.safe_load(CASSETTE.read_text(encoding="utf-8"))
    stream_text = str(data["interactions"][0]["response"]["body"]["string"])

    def whole_stream() -> None:
        state, folded = anthropic.DecoderState(), StreamState()
        for event in SSEDecoder().feed(stream_text):
            state, out = anthropic.decode_event(state, event.data, event.event)
            for item in out:
                folded = fold_stream(folded, item)
        anthropic.decode_end(state)
        finish_stream(folded, str)

    rows: list[tuple[str, Callable[[], Any]]] = [
        (
            "anthropic: build body, 4 messages, 5 tools",
            lambda: anthropic.build_body(small, "claude"),
        ),
        (
            "anthropic: build body, 50 messages, 5 tools",
            lambda: anthropic.build_body(large, "claude"),
        ),
        (
            "anthropic: parse response with 2 calls",
            lambda: anthropic.parse_response(ANTHROPIC_RESPONSE),
        ),
        ("anthropic: recorded stream, SSE+decode+fold", whole_stream),
        ("ollama: build body, 4 messages, 5 tools", lambda: ollama.build_body(small, "qwen3")),
        ("ollama: build body, 50 messages, 5 tools", lambda: ollama.build_body(large, "qwen3")),
        ("ollama: parse response with 2 calls", lambda: ollama.parse_response(OLLAMA_RESPONSE)),
    ]
    events = len(SSEDecoder().feed(stream_text))
    print(f"codec (median us per call; the recorded stream has {events} SSE events)")
    for label, fn in rows:
        print(f"  {label:48s} {_per_call(fn):9.1f} us")


def start(script: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / script)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=dies_with_this_process(),  # (a bench killed mid-run takes it along)
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("READY "):
        process.kill()
        raise SystemExit(f"{script} did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}"


def loop_rows(repeat: int) -> None:
    servers = [start("fake_openai_server.py"), start("fake_native_server.py")]
    try:
        openai_url, native_url = servers[0][1], servers[1][1]
        models = {
            "chat completions": toolfold.model(
                "openai-compatible:fake-10", base_url=f"{openai_url}/v1"
            ),
            "anthropic": toolfold.model("anthropic:fake-10", base_url=native_url, api_key="k" * 20),
            "ollama": toolfold.model("ollama:fake-10", base_url=native_url),
        }
        print(
            f"10-step tool loop over 127.0.0.1 (11 exchanges per run; the providers take turns; "
            f"best wall time and median client CPU of {repeat} runs; ratios to chat completions)"
        )
        for mode in ("blocking", "streamed"):
            runners = {}
            for name, made in models.items():
                agent = Agent(model=made, tools=[toolfold.tool(add)], max_steps=12)
                runners[name] = _runner(agent, mode)
                assert runners[name]() == "Finished after 10 tool calls.", name
            walls: dict[str, list[float]] = {name: [] for name in runners}
            cpus: dict[str, list[float]] = {name: [] for name in runners}
            for _ in range(repeat):
                for name, run_once in runners.items():
                    began, cpu = time.perf_counter(), time.process_time()
                    run_once()
                    walls[name].append(time.perf_counter() - began)
                    cpus[name].append(time.process_time() - cpu)
            wall_ref = min(walls["chat completions"])
            cpu_ref = statistics.median(cpus["chat completions"])
            for name in runners:
                wall, cpu = min(walls[name]), statistics.median(cpus[name])
                print(
                    f"  {mode:9s} {name:17s} wall {wall * 1e3:7.2f} ms ({wall / wall_ref:4.2f}x)"
                    f"   client CPU {cpu * 1e3:7.2f} ms ({cpu / cpu_ref:4.2f}x)"
                )
        for made in models.values():
            made.close()  # type: ignore[attr-defined]
    finally:
        for process, _ in servers:
            process.kill()
            process.wait()


def _runner(agent: Agent, mode: str) -> Callable[[], str]:
    if mode == "blocking":
        return lambda: agent.run("add things").text.strip()

    def streamed() -> str:
        run = agent.stream("add things")
        for _ in run:
            pass
        return run.response.text.strip()

    return streamed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer loop runs")
    parser.add_argument("--rounds", type=int, default=30, help="loop runs per provider and mode")
    args = parser.parse_args()
    codec_rows()
    loop_rows(5 if args.quick else args.rounds)


if __name__ == "__main__":
    main()
