"""CPU to fold a long stream: `fold_stream` over n small fragments, text and tool arguments.

Each fragment should cost the same however long the stream has been: CPU per
fragment stays flat as n doubles. (Until the tenth session each fragment
copied the text so far: 20k/40k/80k fragments of 10 characters took
0.33/2.4/9.5 s of CPU for text, so a hostile 64 MiB stream held the event
loop for minutes.)

Run: ``.venv/bin/python bench/bench_fold_stream.py``.
"""

from __future__ import annotations

import time

from toolfold.runtime import StreamState, finish_stream, fold_stream
from toolfold.runtime.core._stream import TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart


def text(n: int) -> float:
    started = time.process_time()
    state = StreamState()
    for _ in range(n):
        state = fold_stream(state, TextDelta("0123456789"))
    finish_stream(state, str)
    return time.process_time() - started


def arguments(n: int) -> float:
    started = time.process_time()
    state = fold_stream(StreamState(), ToolCallStart(0, "c1", "f"))
    state = fold_stream(state, ToolCallDelta(0, '{"a": "'))
    for _ in range(n):
        state = fold_stream(state, ToolCallDelta(0, "0123456789"))
    state = fold_stream(state, ToolCallDelta(0, '"}'))
    finish_stream(fold_stream(state, ToolCallEnd(0)), str)
    return time.process_time() - started


def main() -> None:
    print("fragments   text: CPU s (us/fragment)   arguments: CPU s (us/fragment)")
    for n in (20_000, 40_000, 80_000, 160_000):
        t, a = text(n), arguments(n)
        print(f"{n:9,d}   {t:6.2f} ({t / n * 1e6:5.2f})            {a:6.2f} ({a / n * 1e6:5.2f})")


if __name__ == "__main__":
    main()
