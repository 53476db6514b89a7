"""The log guard's cost per record as a service makes a model per tenant's key and drops it.

Twenty models stay alive (their keys must be scrubbed); between rounds,
thousands more are made on keys of their own and dropped. With one DEBUG
handler on ``httpx``, one record's cost is measured each round, with the
number of keys the guard holds: it should follow the live models, not every
model the process ever made. No server is needed (no model is called).

    .venv/bin/python bench/bench_log_guard.py
"""

from __future__ import annotations

import gc
import io
import logging
import time
import warnings

import toolfold
from toolfold.adapters._http import _logs

LIVE = 20
RECORDS = 2_000


def _model(key: str) -> toolfold.Model:
    return toolfold.model(
        "openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key=key, trust_env=False
    )


def _per_record(log: logging.Logger) -> float:
    """Microseconds one httpx DEBUG record costs, the best of five batches."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(RECORDS):
            log.debug("HTTP Request: POST http://x/v1/chat/completions 200 OK")
        best = min(best, (time.perf_counter() - start) / RECORDS * 1e6)
    return best


def main() -> None:
    warnings.simplefilter("ignore")
    log = logging.getLogger("httpx")
    log.addHandler(logging.StreamHandler(io.StringIO()))
    log.setLevel(logging.DEBUG)
    live = [_model(f"sk-live-{n:04d}-abcdefghijklmnop") for n in range(LIVE)]
    made = 0
    print(f"{'models dropped':>15} {'keys held':>10} {'one record (us)':>16}")
    for target in (0, 1_000, 3_000, 6_000):
        while made < target:
            _model(f"sk-tenant-{made:06d}-abcdefghijklmnop")  # made and dropped at once
            made += 1
        gc.collect()
        print(f"{made:>15,} {len(_logs._FILTER.keys):>10,} {_per_record(log):>16.1f}")
    del live


if __name__ == "__main__":
    main()
