"""The 10-step tool loop over 127.0.0.1 for a native provider, next to Chat Completions.

Used by ``bench_gemini.py`` and ``bench_responses.py``: starts
``fake_gemini_responses_server.py`` in its own process, runs ``generate_text`` for 10 tool
steps (11 HTTP exchanges) with the Chat Completions model and with the given
one, and prints both best-of-N wall times, the median CPU time of this (client)
process, and their ratios (target: within 1.2x). On a shared machine the wall
time is mostly the scheduler handing the CPU to the server process, so the
client CPU is the steadier figure.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench_http import add

import toolfold
from tests.child_processes import dies_with_this_process  # (bench_http put the checkout first)
from toolfold import generate_text
from toolfold.runtime import ModelResponse, StreamState, finish_stream, fold_stream

STEPS = 10


def rounds(description: str, default: int = 20) -> int:
    """The ``--rounds`` a bench script was given (loop runs per provider)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--rounds", type=int, default=default, help="loop runs per provider")
    return int(parser.parse_args().rounds)


def _timed(repeats: int, runs: dict[str, Callable[[], object]]) -> dict[str, tuple[float, float]]:
    """Best wall time and median client CPU time of each run, the runs taking turns (a shared machine drifts)."""
    walls: dict[str, list[float]] = {label: [] for label in runs}
    cpus: dict[str, list[float]] = {label: [] for label in runs}
    for run in runs.values():
        run()  # warm: connections, compile caches
    for _ in range(repeats):
        for label, run in runs.items():
            start, cpu = time.perf_counter(), time.process_time()
            run()
            walls[label].append(time.perf_counter() - start)
            cpus[label].append(time.process_time() - cpu)
    return {label: (min(walls[label]), statistics.median(cpus[label])) for label in runs}


def fold_all(
    items: Iterable[Any],
    state: Any,
    step: Callable[[Any, Any], tuple[Any, list[Any]]],
    end: Callable[[Any], list[Any]],
) -> ModelResponse:
    """Decode ``items`` with a pure stream decoder and fold the events into the response."""
    folded = StreamState()
    for item in items:
        state, out = step(state, item)
        for event in out:
            folded = fold_stream(folded, event)
    for event in end(state):
        folded = fold_stream(folded, event)
    return finish_stream(folded, str)


def compare(prefix: str, repeats: int = 20) -> None:
    """Print the 10-step loop time for ``prefix`` models and for ``openai`` Chat Completions."""
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("fake_gemini_responses_server.py"))],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=dies_with_this_process(),  # (a bench killed mid-run takes it along)
    )
    try:
        line = server.stdout.readline() if server.stdout else ""
        port = int(line.split()[1])
        url = f"http://127.0.0.1:{port}"
        base = url if prefix == "gemini" else f"{url}/v1"
        chat = toolfold.model(f"openai:fake-{STEPS}", base_url=f"{url}/v1", api_key="sk-bench-key")
        native = toolfold.model(f"{prefix}:fake-{STEPS}", base_url=base, api_key="bench-key-0000")
        runs: dict[str, Callable[[], object]] = {}
        for label, model in (("openai (Chat Completions)", chat), (prefix, native)):

            def run(model: object = model) -> None:
                response = generate_text(model, "go", tools=[add], max_steps=STEPS + 1)
                assert response.text == f"Finished after {STEPS} tool calls.", response.text

            runs[label] = run
        figures = _timed(repeats, runs)
        chat.close()
        native.close()  # type: ignore[attr-defined]
        wall_ref, cpu_ref = figures["openai (Chat Completions)"]
        print(
            f"{STEPS}-step tool loop over 127.0.0.1, blocking "
            f"(best wall time and median client CPU of {repeats} runs):"
        )
        for label, (wall, cpu) in figures.items():
            print(
                f"  {label:28s} wall {wall * 1e3:8.2f} ms {wall / wall_ref:5.2f}x"
                f"   client CPU {cpu * 1e3:8.2f} ms {cpu / cpu_ref:5.2f}x"
            )
    finally:
        server.terminate()
        server.wait()
