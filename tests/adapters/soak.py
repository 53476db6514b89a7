"""The soak test of the reliability suite: many concurrent faulty runs, every request accounted for.

Shared by ``test_soak.py`` (the test command's: rounds of 1,000 concurrent runs
per backend) and ``bench/bench_soak.py`` (the same, printed). Each round of
`soak` starts ``runs`` runs at once on one event loop against ``soak_server.py``
(aiohttp.web, in its own process), each with a fault drawn from a seeded
random generator, half of them streamed. Every run ends with the answer or
the documented error of its fault; an error's state is resumed (through a
model that marks its requests ``x-phase: resume``) to the answer. Then the
server's ledger is read and every row accounted for: see `check`. Around the
rounds it counts what a soak must give back (`resources`: file descriptors and
every thread), and after each round the resident set size (`rss`), the memory
the objects hold (`in_use`), and how many
of the objects the round's runs made are still alive (`Outcome.made`: a run's
tool, response or stream, failed state and resumed response; none may be).

The runs go through three models per backend: ``main`` (generous timeouts, so
load cannot turn an answer into a timeout; retries for 429 and 5xx only, 1 ms
apart), ``timeouts`` (a 1 s read and 2 s total timeout, for the ``hang`` and
``drip`` faults) and ``resume``. ``main`` has a pool of `POOL` connections for
all its runs; after the runs, `POOL` requests that the server holds until
`POOL` of them are held at once must all get through (a leaked pool slot
would leave them waiting until the pool timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import os
import random
import sys
import threading
import uuid
import weakref
from collections import Counter
from typing import Any

import attrs
import httpx
from fault_matrix import server_process

import toolfold
from toolfold import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamError,
)
from toolfold.adapters import HttpLimits, RetryPolicy, Timeouts
from toolfold.runtime.drive import _workers

KEY = "sk-soak-0123456789"
ANSWER = "The sum is 5."
POOL = 50

#: The faults a run can meet, as ``soak_server`` names them.
FAULTS = (
    "none",
    "429",
    "500",
    "reset",
    "cut",
    "inband",
    "malformed",
    "big",
    "bomb",
    "hang",
    "drip",
)
RETRYABLE = frozenset({"429", "500"})
TIMED = frozenset({"hang", "drip"})
POLICY = RetryPolicy(
    max_retries=2,
    initial_delay=0.001,
    max_delay=0.001,
    retry_connection_errors=False,
    retry_timeouts=False,
)
LIMITS = HttpLimits(max_connections=POOL, max_keepalive=POOL, max_body_bytes=2**18,
                    max_decoded_bytes=2**20)  # fmt: skip
# The pool timeout is long: with 1,000 runs on 50 connections of a loaded
# machine a request can wait its turn for over a minute (httpx2 did). A leaked
# slot still shows: the pool check after each round cannot complete.
GENEROUS = Timeouts(connect=60.0, read=60.0, write=60.0, pool=600.0)
SHORT = Timeouts(connect=60.0, read=1.0, write=60.0, pool=60.0, total=2.0)


def soak_server() -> contextlib.AbstractContextManager[str]:
    """Start ``soak_server.py`` in its own process; yield its base URL."""
    return server_process("soak_server.py")


@attrs.frozen
class Plan:
    """One run: its id, fault, how many sightings get the fault, and whether it streams."""

    run: str
    fault: str
    times: int
    streamed: bool

    @property
    def prompt(self) -> str:
        """The first user message, which tells the server what to do."""
        return f"add 2 and 3 #run={self.run} fault={self.fault} times={self.times}"

    @property
    def expected(self) -> type[ProviderError] | None:
        """The documented error of this run (None: it answers)."""
        if self.fault == "none" or (self.fault in RETRYABLE and self.times <= POLICY.max_retries):
            return None
        if self.fault == "429":
            return RateLimitError
        if self.fault == "500":
            return ServerError
        if self.fault == "reset":
            return ProviderConnectionError
        if self.fault == "cut":
            return StreamError if self.streamed else ProviderConnectionError
        if self.fault == "inband":
            return StreamError if self.streamed else ProviderError
        if self.fault in TIMED:
            return ProviderTimeoutError
        return ProviderError  # malformed, big, bomb

    @property
    def sightings(self) -> int:
        """How often the server must see the 2nd step's body: again only after a retryable answer."""
        if self.fault in RETRYABLE:
            return min(self.times + 1, POLICY.max_retries + 1)
        return 1


@attrs.define
class Outcome:
    """What one run gave, before and after its resume."""

    plan: Plan
    error: type[BaseException] | None = None
    text: str | None = None
    resumed: str | None = None
    tool_runs: int = 0
    #: Weak references to what the run made (its tool, response or stream, failed state and
    #: resumed response): none may outlive its round (emptied once counted).
    made: list[weakref.ref[Any]] = attrs.field(factory=list, eq=False, repr=False)


def plans(runs: int, seed: int, tag: str) -> list[Plan]:
    """``runs`` runs named ``<tag>-...``, faults drawn from ``random.Random(seed)``, each at least once."""
    rng = random.Random(seed)
    made = []
    for index in range(runs):
        fault = FAULTS[index] if index < len(FAULTS) else rng.choice(FAULTS)
        times = rng.choice((1, POLICY.max_retries + 1)) if fault in RETRYABLE else 1
        made.append(
            Plan(f"{tag}-{uuid.uuid4().hex[:12]}", fault, times, streamed=rng.random() < 0.5)
        )
    return made


@attrs.frozen
class Models:
    """The three models of one backend (see the module)."""

    main: Any
    timeouts: Any
    resume: Any

    @classmethod
    def make(cls, url: str, backend: str) -> Models:
        """The models, sharing no connection pool."""

        def model(timeout: Timeouts, phase: str) -> Any:
            return toolfold.model(
                "openai:m",
                base_url=url,
                api_key=KEY,
                http=backend,
                retry=POLICY,
                timeout=timeout,
                limits=LIMITS,
                headers={"x-phase": phase},
            )

        return cls(model(GENEROUS, "main"), model(SHORT, "main"), model(GENEROUS, "resume"))

    async def aclose(self) -> None:
        """Close the three models' clients."""
        for model in (self.main, self.timeouts, self.resume):
            await model.aclose()


async def one_run(models: Models, plan: Plan) -> Outcome:
    """Run ``plan`` to its end, resuming an error's state; record what happened."""
    outcome = Outcome(plan)

    @toolfold.tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        outcome.tool_runs += 1
        return a + b

    made = outcome.made
    made.append(weakref.ref(add))
    model = models.timeouts if plan.fault in TIMED else models.main
    try:
        if plan.streamed:
            stream = toolfold.Agent(model, tools=[add]).stream(plan.prompt)
            made.append(weakref.ref(stream))
            async for _ in stream:
                pass
            outcome.text = stream.response.text
            made.append(weakref.ref(stream.response))
        else:
            response = await toolfold.agenerate_text(model, plan.prompt, tools=[add])
            outcome.text = response.text
            made.append(weakref.ref(response))
    except ProviderError as err:
        outcome.error = type(err)
        state = err.state  # type: ignore[attr-defined]
        made.extend((weakref.ref(err), weakref.ref(state)))
        del err  # the run keeps only what a user would keep: the state
        resumed = await toolfold.aresume(state, model=models.resume, tools=[add])
        outcome.resumed = resumed.text
        made.append(weakref.ref(resumed))
    return outcome


async def through_the_pool(models: Models, tag: str) -> list[str]:
    """`POOL` concurrent calls the server holds until all `POOL` are held: every slot must be free."""
    name = f"barrier-{POOL}"

    async def call() -> str:
        prompt = f"add 2 and 3 #run=pool-{tag}-{uuid.uuid4().hex[:8]} fault={name} times=1"
        return (await toolfold.agenerate_text(models.main, prompt)).text

    return list(await asyncio.gather(*[call() for _ in range(POOL)]))


@attrs.frozen
class Round:
    """One round of a soak: the outcomes and what the pool check gave."""

    outcomes: list[Outcome]
    pool: list[str]


@attrs.frozen
class Report:
    """A soak: its rounds, the ledger, and the resources and memory around it.

    Attributes:
        tag: What the names of this soak's runs start with.
        rounds: What each round gave.
        ledger: The server's ledger (see ``soak_server``).
        before: Resources before the models were made.
        after: Resources after the runs ended and the models were closed.
        rss: This process's resident set size after each round (and a collection), in bytes.
        alive: After each round (and a collection), how many of the objects its runs made
            are still alive (see `Outcome.made`): any is a leak.
        blocks: Python's allocated blocks after each round (see `in_use`).
        heap: The bytes malloc has handed out and not got back after each round (see `in_use`).
    """

    tag: str
    rounds: list[Round]
    ledger: list[list[Any]]
    before: Resources
    after: Resources
    rss: list[int]
    alive: list[int] = attrs.field(factory=list)
    blocks: list[int] = attrs.field(factory=list)
    heap: list[int | None] = attrs.field(factory=list)


@attrs.frozen
class Resources:
    """What a soak must give back, counted after a collection.

    Attributes:
        fds: Open file descriptors of this process.
        threads: All of its threads, as the kernel counts them (``/proc/self/task``:
            toolfold's tool workers and threads no Python code made included).
        workers: The live threads of toolfold's tool worker pool (see `tool_pool`).
        idle: How many of them wait for a call, and none abandoned (see `tool_pool`).
    """

    fds: int
    threads: int
    workers: int
    idle: bool


def resources() -> Resources:
    """This process's open file descriptors and threads, after a collection."""
    gc.collect()
    workers, idle = tool_pool()
    return Resources(
        len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task")), workers, idle
    )


def tool_pool() -> tuple[int, bool]:
    """The live threads of the async runs' tool worker pool, and whether all of them are idle.

    The pool (``toolfold.runtime.drive._workers``) is one per process: daemon threads
    made on demand when no worker is idle, at most `_workers.MAX_WORKERS` (32) serving
    calls, each waiting on the pool's queue for the next call once its call is done,
    for the life of the process. Closing a model does not end them, by design (a
    thread per tool call cost more than the tool): so a soak may leave up to 32 more
    threads than it found, all of them idle. A worker whose call timed out is
    abandoned and ends when its call does; "idle" also means there is none.
    """
    pool = _workers._WORKERS
    if pool is None:
        return 0, True
    with pool._lock:
        count, idle, abandoned = pool._count, pool._idle, len(pool._abandoned)
    # A live thread keeps its target (threading.Thread._target): the pool's bound method.
    live = sum(
        getattr(getattr(t, "_target", None), "__self__", None) is pool
        for t in threading.enumerate()
    )
    return live, live == count == idle and abandoned == 0


def rss() -> int:
    """This process's resident set size in bytes (``/proc/self/statm``), after a collection."""
    gc.collect()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                     "uordblks", "fordblks", "keepcost")
    ]  # fmt: skip


def in_use() -> tuple[int, int | None]:
    """The memory this process's objects hold, after a collection: Python's allocated
    blocks (``sys.getallocatedblocks()``), and the bytes malloc has handed out and not
    got back (glibc's ``mallinfo2``: ``uordblks + hblkhd``; None without glibc 2.33+).

    Unlike the resident set, neither counts memory freed but kept by the allocators
    (malloc's free lists, pymalloc's partly used arenas; but for glibc's small per-thread
    caches, which count as in use), which makes the resident set swing by tens of MiB from
    round to round while these stay flat. Small objects are pymalloc's (mapped apart from
    malloc) and show only in the blocks; an object over 512 bytes shows in both.
    """
    gc.collect()
    blocks = sys.getallocatedblocks()
    mallinfo2 = getattr(ctypes.CDLL(None), "mallinfo2", None)
    if mallinfo2 is None:
        return blocks, None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return blocks, info.uordblks + info.hblkhd


def soak(url: str, backend: str, runs: int, rounds: int = 3, seed: int = 8) -> Report:
    """``rounds`` rounds of ``runs`` concurrent runs on ``backend``, one after the other; see the module.

    After each round the resident set size, the memory in use (`in_use`) and the
    objects the round's runs left alive are read: the first rounds warm caches, pools
    and the allocators up, the later ones should leave the memory in use where it was.
    """
    before = resources()
    sizes: list[int] = []
    alive: list[int] = []
    blocks: list[int] = []
    heap: list[int | None] = []
    tag = uuid.uuid4().hex[:8]

    async def main() -> list[Round]:
        models = Models.make(url, backend)
        done = []
        try:
            for number in range(rounds):
                work = plans(runs, seed + number, tag)
                outcomes = await asyncio.gather(*[one_run(models, plan) for plan in work])
                pool = await through_the_pool(models, tag)
                done.append(Round(list(outcomes), pool))
                del work, outcomes, pool
                sizes.append(rss())
                held = in_use()
                blocks.append(held[0])
                heap.append(held[1])
                made = [ref for outcome in done[-1].outcomes for ref in outcome.made]
                alive.append(sum(ref() is not None for ref in made))
                for outcome in done[-1].outcomes:
                    outcome.made.clear()  # (the references are the test's, not the runs')
                del made
        finally:
            # A close cut at its grace (2 s: a TimeoutError from an explicit close) is the
            # machine's load, not the soak's subject: on a CI running beside itself a
            # loaded loop closes a thousand connections slower than that. The cut drops the
            # connections still open, so `after` counts the same descriptors either way.
            with contextlib.suppress(TimeoutError):
                await models.aclose()
        return done

    done = asyncio.run(main())
    after = resources()
    ledger = httpx.get(url.removesuffix("/v1") + "/ledger").json()
    return Report(tag, done, ledger, before, after, sizes, alive, blocks, heap)


def check(report: Report) -> list[str]:
    """Every way ``report`` breaks the soak's promises (empty: none). See the module.

    For each run: its error is the documented one for its fault (or it
    answered); resuming gave the answer; the tool ran exactly once. For each
    run whose requests all got an answer (every fault but ``hang`` and
    ``drip``), the ledger holds exactly: its 1st step once, its 2nd step as
    many times as the retry policy allows for its fault (a body is sent again
    only after a 429 or 5xx), and one resumed 2nd step if it failed. For a
    ``hang`` or ``drip`` run (whose requests may be abandoned by a timeout
    before or while the server reads them) each step at most once. Nothing
    in the ledger belongs to no run. Each pool check answered every call.
    """
    problems = []
    rows: dict[str, Counter[tuple[str, int]]] = {}
    for run, phase, step, _digest, _action in report.ledger:
        if not run.startswith((f"{report.tag}-", f"pool-{report.tag}-")):
            continue  # another soak's, on the same server
        rows.setdefault(run, Counter())[(phase, step)] += 1
    known = set()
    for number, round_ in enumerate(report.rounds):
        if round_.pool != [ANSWER] * POOL:
            problems.append(f"round {number}: the pool check gave {Counter(round_.pool)}")
        for outcome in round_.outcomes:
            plan = outcome.plan
            known.add(plan.run)
            problems.extend(_check_run(outcome, rows.get(plan.run, Counter())))
    pool_runs = {run for run in rows if run.startswith("pool-")}
    if len(pool_runs) != POOL * len(report.rounds):
        problems.append(f"the server saw {len(pool_runs)} pool-check calls")
    strays = set(rows) - known - pool_runs
    if strays:
        problems.append(f"the ledger has requests of no run: {sorted(strays)[:5]}")
    return problems


def _check_run(outcome: Outcome, seen: Counter[tuple[str, int]]) -> list[str]:
    plan = outcome.plan
    where = (
        f"run {plan.run} ({plan.fault} x{plan.times}, {'streamed' if plan.streamed else 'async'})"
    )
    problems = []
    want = plan.expected
    if plan.fault in TIMED:
        if outcome.error is None or not issubclass(outcome.error, ProviderTimeoutError):
            problems.append(f"{where}: {outcome.error} instead of a timeout")
        if any(count > 1 for count in seen.values()):
            problems.append(f"{where}: a request was seen twice: {dict(seen)}")
    else:
        if want is None and outcome.error is not None:
            problems.append(f"{where}: {outcome.error.__name__} instead of the answer")
        elif want is not None and (outcome.error is None or not issubclass(outcome.error, want)):
            problems.append(f"{where}: {outcome.error} instead of {want.__name__}")
        expected = Counter({("main", 1): 1, ("main", 2): plan.sightings})
        if want is not None:
            expected[("resume", 2)] = 1
        if seen != expected:
            problems.append(f"{where}: the server saw {dict(seen)}, expected {dict(expected)}")
    final = outcome.resumed if outcome.error is not None else outcome.text
    if final != ANSWER:
        problems.append(f"{where}: ended with {final!r}")
    if outcome.tool_runs != 1:
        problems.append(f"{where}: the tool ran {outcome.tool_runs} times")
    return problems
