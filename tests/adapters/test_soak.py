"""The soak test of the reliability suite: hundreds of concurrent faulty runs per backend, all accounted for.

``soak.py`` has the runs and the accounting; ``bench/bench_soak.py`` runs the
issue's 1,000 concurrent runs per backend (a few minutes on a shared 2-core
machine), these tests a few hundred, in two rounds each, against
``soak_server.py`` (aiohttp.web on one event loop) in its own process.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from backends import OWNED
from soak import FAULTS, soak, soak_server
from soak import check as check_soak

from toolfold.runtime.drive._workers import MAX_WORKERS

#: Runs per round (the pool has 50 connections): httpx costs about three times
#: httpx2's CPU per run, and its pool slows down with many waiting requests.
RUNS = {"httpx": 80, "httpx2": 200, "aiohttp": 200}


@pytest.fixture(scope="module")
def soak_url() -> Iterator[str]:
    """The soak server's base URL, one process for the module."""
    with soak_server() as url:
        yield url


@pytest.mark.timeout(300)  # 15-50 s each on a loaded 2-core machine
@pytest.mark.parametrize("backend", OWNED)
def test_concurrent_faulty_runs_are_all_accounted_for(soak_url: str, backend: str) -> None:
    """Concurrent faulty runs: documented errors, exact request ledger, nothing leaked, memory bounded."""
    runs = RUNS[backend]
    report = soak(soak_url, backend, runs)
    assert check_soak(report) == []
    faults = Counter(o.plan.fault for r in report.rounds for o in r.outcomes)
    print(
        f"soak {backend}: {2 * runs} runs in 2 rounds of {runs}, faults {dict(sorted(faults.items()))}"
    )
    assert set(faults) == set(FAULTS)
    assert sum(faults.values()) == 2 * runs
    assert report.fds[1] == report.fds[0]
    assert report.threads[1] == report.threads[0]
    assert report.workers <= MAX_WORKERS
    assert report.retained < 4 * 2**20
    assert report.peak < 16 * 2**20 + runs * 2**18


def test_the_soak_check_finds_a_duplicate_request() -> None:
    """The accounting is not vacuous: a 2nd step seen twice, a stray row and a wrong error are reported."""
    from soak import ANSWER, POOL, Outcome, Plan, Report, Round

    plan = Plan("t-r1", "reset", 1, streamed=False)
    outcome = Outcome(plan, error=ConnectionError, resumed=ANSWER, tool_runs=1)
    rows = [["t-r1", "main", 1, "a", "tool-call"], ["t-r1", "main", 2, "b", "reset"],
            ["t-r1", "main", 2, "b", "answer"], ["t-r1", "resume", 2, "b", "answer"],
            ["t-stray", "main", 1, "c", "tool-call"], ["other-r1", "main", 1, "e", "tool-call"]]  # fmt: skip
    rows += [[f"pool-t-{n}", "main", 1, "d", f"barrier-{POOL}"] for n in range(POOL)]
    report = Report("t", [Round([outcome], [ANSWER] * POOL)], rows, (0, 0), (0, 0), 0, 0, 0)
    problems = check_soak(report)
    assert len(problems) == 3, problems
    assert "instead of ProviderConnectionError" in problems[0]
    assert "the server saw" in problems[1]
    assert "stray" in problems[2]
