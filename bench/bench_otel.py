"""What tracing costs the tool loop: per-step CPU with toolfold.otel off, never on, and on.

Each run is ``STEPS`` steps of one tool call on the prebuilt model of
``bench_loop.py`` (so the time is toolfold's own). Three rows, interleaved so
machine noise hits them alike:

- ``never instrumented``: the driver's tracing seam with nothing installed;
- ``uninstrumented``: after ``instrument()`` then ``uninstrument()``;
- ``instrumented``: spans to an SDK ``TracerProvider`` whose processor drops
  them (the SDK's own span cost included, no export), metrics to an in-memory reader.

Run: ``.venv/bin/python bench/bench_otel.py``. Target: off costs the same as
before (within 2%); on, the added microseconds per step are reported.
"""

from __future__ import annotations

import statistics
import time

from bench_loop import STEPS, Prebuilt, _responses, lookup
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

import toolfold.otel
from toolfold import generate_text

ROUNDS = 9


class _Drop(SpanProcessor):
    """Receives every span and keeps none."""


def _run() -> float:
    start = time.process_time()
    response = generate_text(Prebuilt(_responses(STEPS)), "go", tools=[lookup], max_steps=STEPS)
    assert response.text == "done"
    return (time.process_time() - start) / STEPS * 1e6


def main() -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(_Drop())
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    rows: dict[str, list[float]] = {
        "never instrumented": [],
        "instrumented": [],
        "uninstrumented": [],
    }
    _run()
    for _ in range(ROUNDS):
        rows["never instrumented"].append(_run())
        toolfold.otel.instrument(tracer_provider, meter_provider)
        rows["instrumented"].append(_run())
        toolfold.otel.uninstrument()
        rows["uninstrumented"].append(_run())
    base = min(rows["never instrumented"])
    print(f"{STEPS} steps per run, {ROUNDS} rounds; CPU us per step (best / median)")
    for name, samples in rows.items():
        best = min(samples)
        print(f"  {name:<20} {best:7.1f} / {statistics.median(samples):7.1f}   x{best / base:.3f}")
    added = min(rows["instrumented"]) - base
    print(f"  tracing on adds {added:.1f} us per step (one chat and one execute_tool span)")


if __name__ == "__main__":
    main()
