"""The drivers' tracing seam: one optional tracer sees every run, model call and tool call.

Tool calls the executor runs come as a step's `ToolsTrace`; the calls settled
without it (an unknown tool, arguments that are no JSON object, a denial, a
result the caller gave) come to `RunTrace.settled` when they are settled.

`toolfold.otel.instrument()` installs one; with none installed a shell pays one
global read per op. The tracer sees what the shells perform, never the pure
core, so replaying a log (which performs nothing) traces nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from toolfold.runtime.core._messages import Usage
    from toolfold.runtime.core._request import ModelRequest, ModelResponse
    from toolfold.runtime.core._state import CallState, RunState
    from toolfold.runtime.drive._executor import ToolJob, ToolOutcome
    from toolfold.runtime.drive._loop import Live


class CallTrace(Protocol):
    """One model call being traced."""

    def attach(self) -> object:
        """Make the call current in this context (what the model does nests under it).

        Returns:
            The token `detach` takes, in the same context.
        """

    def detach(self, token: object) -> None:
        """Undo the `attach` that returned ``token``."""

    def end(
        self,
        response: ModelResponse | None,
        error: BaseException | None,
        usage: Usage | None = None,
    ) -> None:
        """The call returned ``response``, or raised ``error``.

        ``error`` may be an interruption: a cancellation, Ctrl-C, or the
        caller stopping a stream (``GeneratorExit``) before the response ended.
        ``usage``: with ``error``, what a stream had reported before it failed
        (the provider billed it), or None.
        """


class ToolsTrace(Protocol):
    """One step's tool calls being traced."""

    @property
    def jobs(self) -> Sequence[ToolJob]:
        """The step's calls as the trace runs them: each with its own span current."""
        ...

    def end(self, outcomes: Sequence[ToolOutcome]) -> None:
        """The calls ended (each outcome carries its duration)."""

    def abandon(self) -> None:
        """The caller stopped the stream during these calls: the sub-runs they run stop
        because it left (their interruption or cancellation is no Ctrl-C, no error)."""


class RunTrace(Protocol):
    """One run (or one resumption of it) being traced."""

    def model_call(self, request: ModelRequest) -> CallTrace:
        """A model call starts now."""
        ...

    def tools(self, jobs: Sequence[ToolJob]) -> ToolsTrace:
        """A step's tool calls start now (a sub-run a call makes nests under it)."""
        ...

    def settled(self, calls: Sequence[CallState]) -> None:
        """Calls settled now without running: the core answered them (an unknown
        tool, arguments that are no JSON object) or the caller did (a denial, a
        result given on resume); each has its result and outcome."""

    def handoff(self, live: Live) -> None:
        """The run continues with another agent (``live`` is its live half)."""

    def end(self, state: RunState | None, error: BaseException | None) -> None:
        """The run stopped (finished, suspended or failed) at ``state``, or raised ``error``."""


class Tracer(Protocol):
    """What `set_tracer` installs."""

    def start_run(self, live: Live, state: RunState) -> RunTrace:
        """A driver starts performing a run from ``state``."""
        ...

    def retrying(self, retry: int, wait: float, cause: BaseException | None) -> None:
        """The transport sends the current model call's request again, retry number
        ``retry`` (1 for the first), after waiting ``wait`` seconds, because of ``cause``
        (the failed attempt's error). Called where the call runs: what is current there
        is the call's (`CallTrace.attach`)."""


_TRACER: list[Tracer | None] = [None]


def set_tracer(tracer: Tracer | None) -> Tracer | None:
    """Install ``tracer`` for every run started from now on (None removes it); returns the old one."""
    old, _TRACER[0] = _TRACER[0], tracer
    return old


def tracing() -> bool:
    """Whether a tracer is installed."""
    return _TRACER[0] is not None


def retrying(retry: int, wait: float, cause: BaseException | None) -> None:
    """Tell the tracer, if one is installed, that a request is sent again (`Tracer.retrying`)."""
    tracer = _TRACER[0]
    if tracer is not None:
        tracer.retrying(retry, wait, cause)


def start_run(live: Live, state: RunState) -> RunTrace | None:
    """The trace for a run about to be driven, or None when nothing traces."""
    tracer = _TRACER[0]
    return None if tracer is None else tracer.start_run(live, state)


def end_run(trace: RunTrace | None, state: Any, error: BaseException | None) -> None:
    """Close a run's trace, if there is one."""
    if trace is not None:
        trace.end(state, error)
