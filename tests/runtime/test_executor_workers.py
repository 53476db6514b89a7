"""Sync tool workers: timeouts count from the start, stuck tools do not starve later calls."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from core_helpers import private_pool

from toolfold import agenerate_text, generate_text, tool
from toolfold.runtime.drive import _executor, _sync_calls, _workers
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


def _tools(release: threading.Event) -> list[object]:
    @tool(timeout=0.05)
    def stuck() -> str:
        """Never returns in time."""
        release.wait()
        return "late"

    @tool(timeout=30)
    def quick() -> str:
        """Returns at once."""
        return "quick"

    return [stuck, quick]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stuck_tool_does_not_starve_later_calls(one_worker: threading.Event, mode: str) -> None:
    """After a sync tool times out on the only worker, later calls still run (a replacement worker)."""
    script = [[call("stuck", {}), call("quick", {})], call("quick", {}), "done"]
    tools = _tools(one_worker)
    if mode == "sync":
        response = generate_text(ScriptedModel(script), "go", tools=tools)
    else:
        response = asyncio.run(agenerate_text(ScriptedModel(script), "go", tools=tools))
    first, second = response.steps[0].tool_results, response.steps[1].tool_results
    assert "timed out after 0.05 s" in first[0].content
    assert (first[1].content, first[1].is_error) == ("quick", False)
    assert (second[0].content, second[0].is_error) == ("quick", False)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_timeout_counts_from_the_start_not_the_queue(
    one_worker: threading.Event, mode: str
) -> None:
    """A call queued behind a busy worker longer than its timeout still runs and succeeds."""
    started = threading.Event()

    @tool
    def busy() -> str:
        """Holds the only worker until the timed call has waited past its timeout."""
        started.set()
        one_worker.wait(1.0)
        return "busy"

    # Once it starts, the timed call must be seen to end within its timeout: 0.5 s
    # leaves a loaded machine room to wake the caller (0.1 s was the margin before).
    @tool(timeout=0.5)
    def timed() -> str:
        """Fast once it runs."""
        return "timed"

    script = [[call("busy", {}), call("timed", {})], "done"]
    if mode == "sync":
        response = generate_text(ScriptedModel(script), "go", tools=[busy, timed])
    else:
        response = asyncio.run(agenerate_text(ScriptedModel(script), "go", tools=[busy, timed]))
    results = response.steps[0].tool_results
    assert started.is_set()
    assert [(r.content, r.is_error) for r in results] == [("busy", False), ("timed", False)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_max_concurrency_limits_calls_of_one_step(mode: str) -> None:
    """generate_text/agenerate_text never run more than max_concurrency calls of a step at once."""
    lock = threading.Lock()
    running = [0]
    peak = [0]

    @tool(timeout=30)
    def work(n: int) -> int:
        """Counts how many calls overlap."""
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            threading.Event().wait(0.02)  # long enough for the calls to overlap if allowed
            return n
        finally:
            with lock:
                running[0] -= 1

    script = [[call("work", {"n": i}) for i in range(6)], "done"]
    if mode == "sync":
        response = generate_text(ScriptedModel(script), "go", tools=[work], max_concurrency=2)
    else:
        response = asyncio.run(
            agenerate_text(ScriptedModel(script), "go", tools=[work], max_concurrency=2)
        )
    assert [r.content for r in response.steps[0].tool_results] == [str(i) for i in range(6)]
    assert 1 <= peak[0] <= 2


def test_cancelling_a_run_cancels_every_parallel_call() -> None:
    """Cancelling agenerate_text cancels all running async calls of the step; queued ones never start."""
    cancelled: list[int] = []
    began: list[int] = []

    async def main() -> None:
        both = asyncio.Event()

        @tool
        async def wait(n: int) -> str:
            """Waits until cancelled."""
            began.append(n)
            if len(began) == 2:
                both.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(n)
                raise
            return "never"

        script = [[call("wait", {"n": i}) for i in range(3)], "x"]
        task = asyncio.ensure_future(
            agenerate_text(ScriptedModel(script), "go", tools=[wait], max_concurrency=2)
        )
        await both.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert sorted(cancelled) == [0, 1]
    assert sorted(began) == [0, 1]


def _ended_before_abandon(
    monkeypatch: pytest.MonkeyPatch, go: threading.Event, answers: list[object]
) -> None:
    """Make `abandon` meet a call that ended on its worker (back in service) unreported.

    The wrapper releases the call, then waits (the caller's thread blocked, so the
    loop settles nothing) until a probe call ran on the only worker, which it does
    only once the call's worker cleared it; then the real `abandon` decides.
    """
    real = _executor.abandon

    def abandon(token: object) -> object:
        go.set()
        inbox, ticket = _workers.SyncInbox(), _workers.Ticket(0)
        _workers.submit_sync(inbox, ticket, lambda: "probe")
        assert inbox.get(10)[1] is None  # its start
        assert inbox.get(10)[1:] == (True, "probe")
        answer = real(token)
        answers.append(answer)
        return answer

    for module in (_executor, _sync_calls):  # (the async and the blocking path time out calls)
        monkeypatch.setattr(module, "abandon", abandon)


def _pool_state() -> tuple[int, int, int, int]:
    pool = _workers._workers()
    return pool._count, pool._idle, pool._backlog, len(pool._abandoned)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_timeout_leaves_a_call_that_ended_unreported_its_worker(
    one_worker: threading.Event, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A timed-out call that ended on its worker before `abandon` keeps the worker counted."""
    answers: list[object] = []
    _ended_before_abandon(monkeypatch, one_worker, answers)

    @tool(timeout=0.05)
    def late() -> str:
        """Returns once released, after its timeout."""
        one_worker.wait(10)
        return "late"

    script = [call("late", {}), "done"]
    if mode == "sync":
        response = generate_text(ScriptedModel(script), "go", tools=[late])
    else:
        response = asyncio.run(agenerate_text(ScriptedModel(script), "go", tools=[late]))
    assert "timed out after 0.05 s" in response.steps[0].tool_results[0].content
    # One worker, counted and idle: none given away for a call no longer running.
    assert _pool_state() == (1, 1, 0, 0)
    assert answers == [False]


def test_a_cancel_leaves_a_lone_timed_call_that_ended_unreported_its_worker(
    one_worker: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelling a run whose lone timed call ended on its worker, unreported, keeps the worker counted."""
    answers: list[object] = []
    _ended_before_abandon(monkeypatch, one_worker, answers)
    entered = threading.Event()

    @tool(timeout=30)
    def quick() -> str:
        """Returns once released."""
        entered.set()
        one_worker.wait(10)
        return "quick"

    async def main() -> None:
        task = asyncio.ensure_future(
            agenerate_text(ScriptedModel([call("quick", {}), "done"]), "go", tools=[quick])
        )
        # (The call's start notice is settled on the loop before this wait returns.)
        await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _pool_state() == (1, 1, 0, 0)
    assert answers == [False]


@pytest.mark.parametrize(
    ("state", "after"),
    [((0, 0, 0), (1, 1, 0)), ((1, 1, 0), (1, 1, 0)), ((1, 0, 0), (1, 0, 0))],
)
def test_ctrl_c_in_submit_before_the_call_is_queued_gives_back_its_reservation(
    monkeypatch: pytest.MonkeyPatch, state: tuple[int, int, int], after: tuple[int, int, int]
) -> None:
    """Interrupted before queueing a call, submit leaves the worker counts as they were, but
    for a worker it started for the call, which waits idle."""
    monkeypatch.setattr(_workers, "MAX_WORKERS", 1)
    pool = _workers._Workers()
    pool._count, pool._idle, pool._backlog = state
    jobs = pool._jobs

    class Interrupting:
        def put(self, job: object) -> None:
            raise KeyboardInterrupt

        def get(self) -> object:
            return jobs.get()

    monkeypatch.setattr(pool, "_jobs", Interrupting())
    job = (None, None, None, None, ())
    with pytest.raises(KeyboardInterrupt):
        pool.submit(job)  # type: ignore[arg-type]
    assert (pool._count, pool._idle, pool._backlog) == after


class _Told:
    """The pool's queue, telling when a worker started after now first waits on it
    (it then began serving: it reads the queue once it did)."""

    def __init__(self, jobs: Any) -> None:
        self._jobs = jobs
        self.waited = threading.Event()

    def put(self, job: Any) -> None:
        self._jobs.put(job)

    def get(self) -> Any:
        self.waited.set()
        return self._jobs.get()


def _ctrl_c_at_next_start(monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """The next worker thread's start raises Ctrl-C: before the thread is made ("lost"),
    or once it began serving ("begun")."""
    real = threading.Thread.start
    armed = [True]
    pool = _workers._workers()
    told = _Told(pool._jobs)
    monkeypatch.setattr(pool, "_jobs", told)

    def start(thread: threading.Thread) -> None:
        if armed and thread.name.startswith("toolfold-tool-"):
            armed.clear()
            if when == "begun":
                real(thread)
                assert told.waited.wait(10)
            raise KeyboardInterrupt
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)


@pytest.mark.parametrize("when", ["lost", "begun"])
def test_ctrl_c_while_a_worker_starts_keeps_the_pool_exact(
    monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Ctrl-C while submit starts a worker: the call never runs, and the pool still runs
    exactly MAX_WORKERS calls at once and gets every slot back."""
    private_pool(monkeypatch, 2)
    _ctrl_c_at_next_start(monkeypatch, when)
    ghost: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        _workers.submit_sync(_workers.SyncInbox(), _workers.Ticket(9), ghost.append, "ran")
    release = threading.Event()
    inbox = _workers.SyncInbox()
    try:
        for index in range(3):
            _workers.submit_sync(inbox, _workers.Ticket(index), release.wait, 10)
        starts = [inbox.get(5) for _ in range(2)]
        assert [ok for _, ok, _ in starts] == [None, None]
        assert _pool_state() == (2, 0, 1, 0)  # two running, the third waiting for one
    finally:
        release.set()
    reports = [inbox.get(10) for _ in range(4)]  # the third's start, then three results
    assert sorted(ok is True for _, ok, _ in reports) == [False, True, True, True]
    assert _pool_state() == (2, 2, 0, 0)
    assert ghost == []


@pytest.mark.parametrize("when", ["lost", "begun"])
def test_ctrl_c_while_abandon_starts_a_worker_keeps_the_pool_exact(
    monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Ctrl-C while abandoning a stuck call starts its replacement: the queued call still
    runs, and every slot comes back."""
    private_pool(monkeypatch, 1)
    release = threading.Event()
    inbox = _workers.SyncInbox()
    stuck, queued = _workers.Ticket(0), _workers.Ticket(1)
    try:
        _workers.submit_sync(inbox, stuck, release.wait, 10)
        assert inbox.get(5)[:2] == (stuck, None)  # it runs on the only worker
        _workers.submit_sync(inbox, queued, lambda: "queued")
        assert _pool_state() == (1, 0, 1, 0)
        _ctrl_c_at_next_start(monkeypatch, when)
        with pytest.raises(KeyboardInterrupt):
            _workers.abandon(stuck)
    finally:
        release.set()
    reports = [
        inbox.get(5) for _ in range(3)
    ]  # the stuck call's end, the queued one's start and end
    assert (queued, True, "queued") in reports
    assert (stuck, True, True) in reports
    assert _pool_state() == (1, 1, 0, 0)


class _Queue:
    """The pool's queue; ``interrupt`` (a call's ticket) makes the put of that call raise
    Ctrl-C once it queued it, as a signal handler run once the put returned would: at once
    (a worker gets the call only after ``hold`` is set), or once a worker marked it taken."""

    def __init__(self, jobs: Any, marks: _Marks) -> None:
        self._jobs = jobs
        self._marks = marks
        self.interrupt: object = None
        self.taken = False
        self.hold = threading.Event()
        self.waited = threading.Event()  # set as a worker waits on the queue

    def put(self, job: Any) -> None:
        self._jobs.put(job)
        if self.interrupt is not None and job[1] is self.interrupt:
            self.interrupt = None
            if self.taken:
                assert self._marks.marked.wait(10)
            raise KeyboardInterrupt

    def get(self) -> Any:
        self.waited.set()
        job = self._jobs.get()
        if not self.taken and job[1] is self._marks.watch:
            assert self.hold.wait(10)
        return job


class _Marks(set[Any]):
    """The pool's marks of calls a worker took, telling when ``watch``'s call is marked."""

    def __init__(self) -> None:
        super().__init__()
        self.watch: object = None
        self.marked = threading.Event()

    def add(self, item: Any) -> None:
        super().add(item)
        if item is self.watch:
            self.marked.set()


class _LockExit:
    """The pool's lock, raising Ctrl-C in the test's thread just after its ``at``-th release
    there (Python runs a signal handler once the lock's exit returned)."""

    def __init__(self, lock: Any, at: int) -> None:
        self._lock = lock
        self._thread = threading.current_thread()
        self._left = at

    def __enter__(self) -> bool:
        return bool(self._lock.acquire())

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        if threading.current_thread() is self._thread:
            self._left -= 1
            if self._left == 0:
                raise KeyboardInterrupt


def _watched_pool(monkeypatch: pytest.MonkeyPatch) -> _Queue:
    """A private pool of one worker whose queue and marks are watched (see `_Queue`)."""
    private_pool(monkeypatch, 1)
    pool = _workers._workers()
    marks = _Marks()
    jobs = _Queue(pool._jobs, marks)
    monkeypatch.setattr(pool, "_jobs", jobs)
    monkeypatch.setattr(pool, "_running", marks)
    return jobs


def _lock_exit(monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    """Ctrl-C lands as the test's thread releases the pool's lock the ``at``-th time from now."""
    pool = _workers._workers()
    monkeypatch.setattr(pool, "_lock", _LockExit(pool._lock, at))


def _probe(inbox: _workers.SyncInbox, release: threading.Event) -> list[Any]:
    """Hand the pool a call that blocks until ``release``; the reports read until it started
    (the only worker is then done with every call queued before it)."""
    probe = _workers.Ticket(100)
    _workers.submit_sync(inbox, probe, release.wait, 10)
    reports = []
    while not reports or reports[-1][:2] != (probe, None):
        reports.append(inbox.get(10))
    return reports


def _one_worker_left(inbox: _workers.SyncInbox) -> list[Any]:
    """Probe the pool (see ``_probe``), check only the one worker is left, running the probe,
    then let the probe end; the probe's reports."""
    last = threading.Event()
    try:
        reports = _probe(inbox, last)
        assert _pool_state() == (1, 0, 0, 0)  # the one worker, running the probe
    finally:
        last.set()
    return reports


def _ready(jobs: _Queue, reserved: str, inbox: _workers.SyncInbox) -> threading.Event:
    """Put the one-worker pool where a call reserves ``reserved``: its idle worker, a new
    one (none yet), or the backlog (the worker busy until the event returned is set)."""
    release = threading.Event()
    if reserved != "new":
        _probe(inbox, release)
        if reserved == "idle":
            jobs.waited.clear()
            release.set()
            assert jobs.waited.wait(10)  # back waiting: idle
            assert inbox.get(10)[1:] == (True, True)
    return release


@pytest.mark.parametrize(
    ("reserved", "taken", "interrupted"),
    [
        ("idle", False, (1, 1, 0)),
        ("new", False, (1, 1, 0)),
        ("backlog", False, (1, 0, 0)),
        ("idle", True, None),
        ("new", True, None),
    ],
)
def test_ctrl_c_just_after_a_call_is_queued_drops_it_unless_a_worker_took_it(
    monkeypatch: pytest.MonkeyPatch,
    reserved: str,
    taken: bool,
    interrupted: tuple[int, int, int] | None,
) -> None:
    """Ctrl-C in submit once the call is queued, the pool's lock still held: no worker took the
    call, it never runs and its reservation comes back; one took it, it runs as any other.
    Either way the pool's counts stay exact."""
    jobs = _watched_pool(monkeypatch)
    inbox = _workers.SyncInbox()
    release = _ready(jobs, reserved, inbox)
    ghost: list[str] = []
    interrupted_call = _workers.Ticket(9)
    jobs.interrupt = jobs._marks.watch = interrupted_call
    jobs.taken = taken
    with pytest.raises(KeyboardInterrupt):
        _workers.submit_sync(inbox, interrupted_call, ghost.append, "ran")
    pool = _workers._workers()
    if interrupted is not None:
        assert (pool._count, pool._idle, pool._backlog) == interrupted
    jobs.hold.set()
    release.set()
    reports = _one_worker_left(inbox)
    assert ghost == (["ran"] if taken else [])
    assert any(ticket is interrupted_call for ticket, _, _ in reports) is taken
    assert pool._dropped == set()


@pytest.mark.parametrize(
    ("reserved", "at", "runs"),
    [("idle", 1, True), ("new", 1, False), ("new", 2, True), ("backlog", 1, True)],
)
def test_ctrl_c_as_submit_releases_the_lock_keeps_the_pool_exact(
    monkeypatch: pytest.MonkeyPatch, reserved: str, at: int, runs: bool
) -> None:
    """Ctrl-C as submit releases the pool's lock (a worker reserved, or the call queued):
    the call runs if it was queued, else never, and no slot is left reserved for nothing."""
    jobs = _watched_pool(monkeypatch)
    inbox = _workers.SyncInbox()
    release = _ready(jobs, reserved, inbox)
    ran: list[str] = []
    _lock_exit(monkeypatch, at)
    with pytest.raises(KeyboardInterrupt):
        _workers.submit_sync(inbox, _workers.Ticket(9), ran.append, "ran")
    release.set()
    # The one worker, running the probe: its slot neither lost nor counted twice.
    _one_worker_left(inbox)
    assert ran == (["ran"] if runs else [])


def test_a_hand_off_interrupted_after_its_call_was_queued_never_runs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C as `hand_off`'s submit lets the pool's lock go, its call queued behind a busy
    worker: the call's future is cancelled, so the worker that takes it skips it (nothing
    awaits its result) and the pool's counts stay exact."""
    jobs = _watched_pool(monkeypatch)
    inbox = _workers.SyncInbox()
    release = _ready(jobs, "backlog", inbox)
    ran: list[str] = []

    async def interrupted() -> None:
        _lock_exit(monkeypatch, 1)
        with pytest.raises(KeyboardInterrupt):
            _workers.hand_off(ran.append, "ran")

    asyncio.run(interrupted())
    release.set()
    _one_worker_left(inbox)  # the worker is done with every call queued before the probe
    assert ran == []


def _stuck_and_queued(
    inbox: _workers.SyncInbox, release: threading.Event
) -> tuple[_workers.Ticket, _workers.Ticket]:
    """On the one-worker pool: a call stuck until ``release``, and one queued behind it."""
    stuck, queued = _workers.Ticket(0), _workers.Ticket(1)
    _workers.submit_sync(inbox, stuck, release.wait, 10)
    assert inbox.get(10)[:2] == (stuck, None)
    _workers.submit_sync(inbox, queued, lambda: "queued")
    assert _pool_state() == (1, 0, 1, 0)
    return stuck, queued


def _ended(inbox: _workers.SyncInbox, stuck: object, queued: object) -> None:
    """Both calls of `_stuck_and_queued` end (the queued one after it started)."""
    reports = [inbox.get(10) for _ in range(3)]
    assert (stuck, True, True) in reports
    assert [r for r in reports if r[0] is queued] == [
        (queued, None, None),
        (queued, True, "queued"),
    ]


def test_ctrl_c_as_abandon_releases_the_lock_leaves_the_call_its_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C as abandon releases the pool's lock, before a worker is started for the queued
    call: the stuck call keeps its slot, so its worker serves the queued call once free."""
    jobs = _watched_pool(monkeypatch)
    inbox, release = _workers.SyncInbox(), threading.Event()
    try:
        stuck, queued = _stuck_and_queued(inbox, release)
        _lock_exit(monkeypatch, 1)
        with pytest.raises(KeyboardInterrupt):
            _workers.abandon(stuck)
        assert _pool_state() == (1, 0, 1, 0)
        jobs.waited.clear()
    finally:
        release.set()
    _ended(inbox, stuck, queued)
    assert jobs.waited.wait(10)  # its worker took the queued call
    _one_worker_left(inbox)


@pytest.mark.parametrize("interrupted", [True, False])
def test_a_stuck_call_that_ends_before_its_replacement_begins_serves_in_its_place(
    monkeypatch: pytest.MonkeyPatch, interrupted: bool
) -> None:
    """An abandoned call that ends before its replacement worker begins: its worker serves the
    queued call in its place, and the replacement, if it starts (not if Ctrl-C stopped its
    start), ends at once."""
    jobs = _watched_pool(monkeypatch)
    inbox, release = _workers.SyncInbox(), threading.Event()
    stuck, queued = _stuck_and_queued(inbox, release)
    real = threading.Thread.start
    replacements: list[threading.Thread] = []

    def start(thread: threading.Thread) -> None:
        jobs.waited.clear()
        release.set()  # the stuck call ends now
        assert jobs.waited.wait(10)  # its worker serves on: it took the queued call
        if interrupted:
            raise KeyboardInterrupt  # Ctrl-C before the replacement's thread is made
        replacements.append(thread)
        real(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    if interrupted:
        with pytest.raises(KeyboardInterrupt):
            _workers.abandon(stuck)
    else:
        assert _workers.abandon(stuck)
    monkeypatch.setattr(threading.Thread, "start", real)
    _ended(inbox, stuck, queued)
    for thread in replacements:
        thread.join(10)
        assert not thread.is_alive()
    _one_worker_left(inbox)


def _nested_agents(
    inner_kind: str, own_loop: bool = False, depth: int = 1
) -> tuple[Any, list[threading.Thread]]:
    """An agent whose step makes two calls of a sync tool that runs another agent blocking
    (``inner.run``), whose step makes two calls: two sync tools ("threads"), or a sync
    and an async one ("loop": on an event loop of the worker's). With ``own_loop`` the
    tool calls ``inner.run`` inside an event loop it runs (``asyncio.run``). With ``depth``
    2, the agent it runs is itself one whose step makes two calls of such a tool (running
    the leaves' agent). Every call waits for its fellows to run (barriers): all delegating
    calls of a level hold a thread at once, and the sync calls of all inner runs run at
    once. Returns the agent and the threads tools ran on."""
    from toolfold import Agent
    from toolfold.testing import FunctionModel

    threads: list[threading.Thread] = []
    runs = 2**depth  # inner (leaf-calling) runs
    leaves = threading.Barrier(runs * (2 if inner_kind == "threads" else 1), timeout=30)

    @tool
    def leaf(i: int) -> str:
        """Waits for the other sync leaves.

        Args:
            i: Which.
        """
        threads.append(threading.current_thread())
        leaves.wait()
        return "leaf"

    @tool
    async def aleaf() -> str:
        """Returns at once."""
        return "aleaf"

    second = call("leaf", {"i": 1}) if inner_kind == "threads" else call("aleaf", {})

    def inner_reply(request: Any) -> Any:
        if request.messages[-1].role == "user":
            return [call("leaf", {"i": 0}), second]
        return "inner done"

    inner = Agent(FunctionModel(inner_reply), tools=[leaf, aleaf])
    for level in range(depth, 0, -1):
        # Below the top, an async call too: the step runs on an event loop (`run_kept`),
        # handed to another thread inside the delegating tool's loop.
        delegates = threading.Barrier(2**level, timeout=30)
        inner = _delegating_agent(inner, delegates, threads, own_loop, aleaf if level > 1 else None)
    return inner, threads


def _delegating_agent(
    inner: Any,
    delegates: threading.Barrier,
    threads: list[threading.Thread],
    own_loop: bool,
    aleaf: Any = None,
) -> Any:
    """An agent whose step makes two calls of a sync tool running ``inner`` blocking, once
    every call of its level (``delegates``) holds a thread, and one of ``aleaf`` if given."""
    from toolfold import Agent
    from toolfold.testing import FunctionModel

    @tool
    def delegate(topic: str) -> str:
        """Runs the inner agent, blocking, once all delegating calls of its level hold a thread.

        Args:
            topic: What to ask.
        """
        threads.append(threading.current_thread())
        delegates.wait()
        if own_loop:  # blocking code inside an event loop of the tool's: run hands the step on

            async def ask() -> str:
                return inner.run(topic).text

            return asyncio.run(ask())
        return inner.run(topic).text

    def outer_reply(request: Any) -> Any:
        if request.messages[-1].role == "user":
            calls = [call("delegate", {"topic": "a"}), call("delegate", {"topic": "b"})]
            return calls if aleaf is None else [*calls, call("aleaf", {})]
        return "outer done"

    return Agent(
        FunctionModel(outer_reply), tools=[delegate] if aleaf is None else [delegate, aleaf]
    )


@pytest.mark.parametrize("inner_kind", ["threads", "loop"])
@pytest.mark.parametrize("mode", ["run", "arun"])
def test_a_sync_tool_running_an_agent_blocking_cannot_starve_the_workers(
    monkeypatch: pytest.MonkeyPatch, mode: str, inner_kind: str
) -> None:
    """Sync tools that run another agent with `run` holding every worker: the inner runs' calls
    get threads past the cap (no deadlock), and those threads end once their calls did."""
    private_pool(monkeypatch, 2)
    outer, threads = _nested_agents(inner_kind)
    texts: list[str] = []
    done = threading.Event()

    def main() -> None:
        if mode == "run":
            texts.append(outer.run("go").text)
        else:
            texts.append(asyncio.run(outer.arun("go")).text)
        done.set()

    threading.Thread(target=main, daemon=True).start()
    assert done.wait(60), "deadlock: the inner runs' calls wait for the workers they hold"
    assert texts == ["outer done"]
    ran = set(threads)
    extra = len(ran) - 2
    assert extra == (4 if inner_kind == "threads" else 2)  # the leaves ran past the cap
    # The workers past the cap end (each as its call did): the pool is back to two.
    deadline = time.monotonic() + 30
    while sum(t.is_alive() for t in ran) > 2 and time.monotonic() < deadline:
        for thread in ran:
            thread.join(0.01)
    assert sum(t.is_alive() for t in ran) == 2
    assert _workers._workers()._count == 2


def test_a_sync_tool_running_an_agent_blocking_inside_its_own_event_loop_cannot_starve_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sync tool calling `run` from an event loop of its own (the step goes to toolfold's
    loop thread, the worker blocked on it): the inner calls still get threads past the cap."""
    private_pool(monkeypatch, 2)
    outer, threads = _nested_agents("loop", own_loop=True)
    texts: list[str] = []
    done = threading.Event()

    def main() -> None:
        texts.append(outer.run("go").text)
        done.set()

    threading.Thread(target=main, daemon=True).start()
    assert done.wait(60), "deadlock: the inner runs' calls wait for the workers they hold"
    assert texts == ["outer done"]
    assert len(set(threads)) - 2 == 2  # each inner run's sync leaf ran past the cap


class _TwoThreads:
    """A thread pool running at most two calls at once, on daemon threads (a hung call does not
    hold up the interpreter's exit, as a `ThreadPoolExecutor`'s would)."""

    def __init__(self) -> None:
        self._slots = threading.Semaphore(2)

    def submit(self, function: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            with self._slots:
                try:
                    future.set_result(function())
                except BaseException as exc:
                    future.set_exception(exc)

        threading.Thread(target=run, daemon=True).start()
        return future


def test_sync_tools_running_agents_blocking_inside_their_own_event_loops_two_deep_cannot_hang(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two levels of sync tools calling `run` from their own event loops, every worker and
    every hand-over pool thread held: each hand-over gets a thread of its own, and those end."""
    from toolfold.runtime.drive import _kept_loop

    private_pool(monkeypatch, 2)
    monkeypatch.setattr(_kept_loop, "_POOL", _TwoThreads())  # run_blocking's pool: 2, not 32
    outer, threads = _nested_agents("loop", own_loop=True, depth=2)
    before = set(threading.enumerate())
    texts: list[str] = []
    done = threading.Event()

    def main() -> None:
        texts.append(outer.run("go").text)
        done.set()

    threading.Thread(target=main, daemon=True).start()
    assert done.wait(60), "deadlock: the second level's hand-overs wait for pool threads held"
    assert texts == ["outer done"]
    # 2 workers, then past the cap: 4 second-level delegates and the 4 inner runs' sync leaves.
    assert len(set(threads)) == 2 + 4 + 4
    # Past the cap workers and the hand-overs' threads end: the 2 workers are left.
    deadline = time.monotonic() + 30
    while len(set(threading.enumerate()) - before) > 2 and time.monotonic() < deadline:
        for thread in set(threading.enumerate()) - before:
            thread.join(0.01)
    assert len(set(threading.enumerate()) - before) == 2
    assert _workers._workers()._count == 2
