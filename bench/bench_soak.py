"""The soak test, printed: rounds of 1,000 concurrent faulty runs per backend.

    .venv/bin/python bench/bench_soak.py [--runs 1000] [--rounds 6] [--backends httpx2,aiohttp]

Runs ``tests/adapters/soak.py`` (as ``tests/adapters/test_soak.py`` does)
against ``soak_server.py`` in its own process and prints, per backend: the runs by fault and outcome, the requests the server
saw, every broken promise (none expected), open file descriptors and threads
before and after, the resident set size after each round, and how many of the
objects a round's runs made are still alive after it (none expected).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # (child_processes, which fault_matrix imports)
sys.path.insert(0, str(ROOT / "tests" / "adapters"))

from backends import OWNED  # noqa: E402
from soak import check, soak, soak_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description="toolfold soak test at full size")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--backends", default=",".join(OWNED))
    args = parser.parse_args()
    failures = 0
    with soak_server() as url:
        for backend in args.backends.split(","):
            start = time.perf_counter()
            report = soak(url, backend, args.runs, rounds=args.rounds)
            seconds = time.perf_counter() - start
            problems = check(report)
            failures += len(problems)
            outcomes = Counter(
                (o.plan.fault, o.error.__name__ if o.error else "answer")
                for r in report.rounds
                for o in r.outcomes
            )
            print(
                f"{backend}: {args.rounds} rounds of {args.runs} concurrent runs in {seconds:.1f} s"
            )
            for (fault, outcome), count in sorted(outcomes.items()):
                print(f"  {fault:10s} -> {outcome:24s} {count:5d}")
            mine = [
                row
                for row in report.ledger
                if row[0] in {o.plan.run for r in report.rounds for o in r.outcomes}
            ]
            print(f"  requests the server saw for these runs: {len(mine)}")
            print(f"  broken promises: {len(problems)}")
            for problem in problems[:20]:
                print("   ", problem)
            print(f"  before: {report.before}")
            print(f"  after:  {report.after}")
            print("  resident set after each round (MiB):",
                  " ".join(f"{size / 2**20:.1f}" for size in report.rss))  # fmt: skip
            print("  malloc's bytes in use after each round (MiB):",
                  " ".join(f"{size / 2**20:.2f}" for size in report.heap if size is not None))  # fmt: skip
            print("  Python's allocated blocks after each round:", report.blocks)
            print("  objects the runs made still alive after each round:", report.alive)
            failures += sum(report.alive)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
