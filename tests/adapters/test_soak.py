"""The soak test (reliability suite): a thousand concurrent runs against a server that injects faults.

Bounded in count and time: two rounds of 1,000 async runs, each meeting a fault
drawn from a seeded generator (or none), against ``fault_server.py`` on
127.0.0.1 in its own process. Every run must end with the answer or with the
documented error carrying a resumable state; afterwards the client process has
the file descriptors and threads it started with, and its memory has settled
(the second round grows it by little next to the first).
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import threading
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from fault_matrix import FAULTS, KEY, expected, fault_server

import toolfold
from toolfold import ProviderError
from toolfold.adapters import Timeouts

RUNS = 1000
#: Faults that end quickly enough to soak with: the slow timeouts are in the fault matrix.
SOAK_FAULTS = tuple(f for f in FAULTS if f not in ("read-timeout", "total-timeout")) + ("none",) * 4


@pytest.fixture(scope="module")
def fault_url() -> Iterator[str]:
    """The fault server's base URL, one process for the module."""
    with fault_server() as url:
        yield url


@toolfold.tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


async def _one(url: str, fault: str) -> str:
    model = toolfold.model(
        "openai:m",
        base_url=url,
        api_key=KEY,
        retry=0,
        timeout=Timeouts(connect=20.0, read=20.0, write=20.0, pool=20.0, total=60.0),
        headers={"x-fault": fault, "x-run": uuid.uuid4().hex},
    )
    try:
        response = await toolfold.agenerate_text(model, "add 2 and 3", tools=[add])
        return "answer" if response.text == "The sum is 5." else f"wrong answer {response.text!r}"
    except ProviderError as err:
        if fault == "none" or not isinstance(err, expected(fault, "async")):
            return f"{fault}: undocumented {type(err).__name__}: {err}"
        if getattr(err, "state", None) is None:
            return f"{fault}: no state"
        return "documented"
    finally:
        await model.aclose()  # type: ignore[attr-defined]


async def _round(url: str, seed: int, runs: int = RUNS) -> Counter[str]:
    draw = random.Random(seed)
    faults = [draw.choice(SOAK_FAULTS) for _ in range(runs)]
    return Counter(await asyncio.gather(*(_one(url, fault) for fault in faults)))


def _resources() -> tuple[int, int]:
    gc.collect()
    return len(os.listdir("/proc/self/fd")), threading.active_count()


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.timeout(900)  # a bound, not a measure: two rounds take well under it on 2 cores
def test_a_thousand_concurrent_runs_with_faults_end_well_and_leak_nothing(fault_url: str) -> None:
    """Every run answers or raises its documented error; fds and threads return; RSS settles."""
    asyncio.run(_round(fault_url, 0, runs=100))  # warm up what lives for the process
    before = _resources()
    first = asyncio.run(_round(fault_url, 1))
    after_first = _rss_kib()
    second = asyncio.run(_round(fault_url, 2))
    after_second = _rss_kib()
    for outcomes in (first, second):
        assert set(outcomes) <= {"answer", "documented"}, outcomes
        assert outcomes["answer"] > 0
        assert outcomes["documented"] > 0
    assert _resources() == before
    assert after_second - after_first < 30 * 1024, (after_first, after_second)
