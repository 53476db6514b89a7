"""The run context a tool can ask for by annotating a parameter with it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

if TYPE_CHECKING:
    # typing_extensions' TypeVar takes a default (PEP 696; typing's from Python 3.13):
    # a ``RunContext(...)`` built by hand, with no deps, is a ``RunContext[Any]``.
    # Type checkers ship its stubs; at run time the default changes nothing.
    from typing_extensions import TypeVar as _TypeVarWithDefault

    DepsT = _TypeVarWithDefault("DepsT", default=Any)
else:
    DepsT = TypeVar("DepsT")


@attrs.frozen
class RunContext(Generic[DepsT]):
    """What a tool may know about the run that called it.

    A tool parameter annotated with ``RunContext`` (or ``RunContext[MyDeps]``)
    is left out of the tool's schema; the runtime fills it at call time.

    Attributes:
        run_id: The id of the run, stable across resumes.
        step: The step (model round) that made the call, from 1.
        call_id: The id of the tool call being executed.
        tool_name: The name of the tool being executed.
        messages: The conversation so far, oldest first.
        deps: The user dependencies passed to ``run(deps=...)``.
        idempotency_key: ``<run id>:<step>:<call index>``, the same every time
            the engine runs this call again (a retry after a crash, a resumed
            state): key a side effect with it to make it happen once. Its step
            counts the model responses of the whole conversation: in a run
            continued with ``history=``, those of the history too (so it may
            exceed ``step``). Empty in a context built by hand.
        sub_run: The stored state of the sub-run this call continues (an
            agent used as a tool that waited for the caller); None otherwise.
        forward: Where a sub-run sends its events, as they happen, when the
            caller streams (an agent used as a tool, a workflow step); None
            otherwise.
        token_budget: What is left of the run's tree budget
            (``token_budget(n, tree=True)``) for a sub-run this call starts:
            a ``TokenBudget(left, tree=True)`` counted from the state the
            step began with (the same for every call of the step, on every
            replay); ``left`` may be 0 or less when the step's own model call
            spent it. None when the run has no tree budget. An agent used as
            a tool starts its sub-run with it.
    """

    run_id: str
    step: int
    call_id: str
    tool_name: str
    messages: Sequence[Any] = ()
    deps: DepsT = None  # type: ignore[assignment]
    idempotency_key: str = ""
    sub_run: Any = None
    forward: Callable[[Any], object] | None = None
    token_budget: Any = None
    # Set by the run when nothing is left of its tree budget (`spent_reason`): whose
    # budget and how far it is spent, for the error result of a sub-run not started.
    _spent: str | None = attrs.field(default=None, alias="_spent", repr=False)

    @property
    def tool_call_id(self) -> str:
        """The id of the tool call being executed (the same as ``call_id``)."""
        return self.call_id
