"""Where the client CPU of the 10-step loop over 127.0.0.1 goes: the transport or the rest.

    .venv/bin/python bench/bench_loop_split.py [--runs 30]

The blocking loop of ``bench_http.py --only loop`` on each installed default
backend (httpx, httpx2), raw client and toolfold in turns, each exchange's
client CPU split in two for toolfold: the time inside
`Transport.post_json_sync` (the request on the wire and its answer read, what
the raw client's ``client.post(...)`` and ``response.json()`` do) and the time
outside it (the request built, the answer parsed into core types, the state,
the events, the argument checks, the tool). Least per run over ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_http  # noqa: E402

import toolfold  # noqa: E402
from toolfold.adapters._http._transport import Transport  # noqa: E402

_inside = [0.0]
_post_json_sync = Transport.post_json_sync


def _timed_post(self: Transport, *args: Any, **kwargs: Any) -> Any:
    start = time.process_time()
    try:
        return _post_json_sync(self, *args, **kwargs)
    finally:
        _inside[0] += time.process_time() - start


def split(url: str, backend: str, runs: int) -> None:
    package = __import__(backend)
    model = toolfold.model("openai:fake-10", base_url=url, api_key="sk-bench", http=backend)

    def ours() -> None:
        response = toolfold.generate_text(model, "add things", tools=[bench_http.add], max_steps=11)
        assert response.text.startswith("Finished after 10"), response.text

    with package.Client() as client:
        target = f"{url}/chat/completions"
        best_raw = best_ours = float("inf")
        inside = 0.0
        for _ in range(runs):
            start = time.process_time()
            bench_http.raw_loop_sync(client, target, 10)
            best_raw = min(best_raw, time.process_time() - start)
            _inside[0] = 0.0
            start = time.process_time()
            ours()
            spent = time.process_time() - start
            if spent < best_ours:
                best_ours, inside = spent, _inside[0]
    model.close()  # type: ignore[attr-defined]
    per = 1e6 / 11
    print(
        f"  {backend:7s} raw {best_raw * per:5.0f} us   toolfold {best_ours * per:5.0f} us "
        f"({best_ours / best_raw:.2f}x) = transport {inside * per:5.0f} + "
        f"the rest {(best_ours - inside) * per:4.0f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    Transport.post_json_sync = _timed_post  # type: ignore[method-assign]
    process, url = bench_http.start_server()
    try:
        print("client CPU per exchange of the blocking 10-step loop over 127.0.0.1")
        for backend in ("httpx", "httpx2") if bench_http._installed("httpx2") else ("httpx",):
            split(url, backend, args.runs)
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
