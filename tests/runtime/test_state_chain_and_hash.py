"""state_of follows the chain a traceback shows; RunState is explicitly unhashable; Usage + 1."""

from __future__ import annotations

import collections.abc

import pytest

from toolfold import Agent, ModelConfigError, RunError, RunState, Usage, UsageError, state_of
from toolfold.runtime import initial_state
from toolfold.testing import ScriptedModel


def _failed() -> UsageError:
    with pytest.raises(UsageError) as raised:
        Agent(ScriptedModel([])).run("go")  # no entry: a UsageError with .state
    return raised.value


def _wrap(error: BaseException, *, hide: bool) -> None:
    """Raise a ValueError while handling ``error`` (hidden with ``from None`` if ``hide``)."""
    try:
        raise error
    except type(error):
        if hide:
            raise ValueError("hidden") from None
        raise ValueError("wrapper")  # noqa: B904  (the plain context is the point)


def test_state_of_finds_the_state_through_a_plain_context() -> None:
    """A ValueError raised while handling a run's error gives that run's state."""
    error = _failed()
    with pytest.raises(ValueError, match="wrapper") as wrapped:
        _wrap(error, hide=False)
    assert wrapped.value.__context__ is error
    assert state_of(wrapped.value) is error.state


def test_state_of_respects_a_context_hidden_with_from_none() -> None:
    """``raise ... from None`` hides the run's error, as a traceback does: no state."""
    run_error = RunError("x", state=initial_state("hi", run_id="r"))
    with pytest.raises(ValueError, match="hidden") as wrapped:
        _wrap(run_error, hide=True)
    assert wrapped.value.__context__ is run_error  # kept, but hidden
    assert state_of(wrapped.value) is None


def test_a_run_state_is_not_hashable_by_its_own_name() -> None:
    """hash(state) raises 'unhashable type: RunState' (not 'Log'); the class says it is no Hashable."""
    state = Agent(ScriptedModel(["hi"])).run("go").state
    with pytest.raises(TypeError, match=r"^unhashable type: 'RunState'$"):
        hash(state)
    assert not isinstance(state, collections.abc.Hashable)
    assert RunState.__hash__ is None


def test_usage_plus_a_number_is_a_type_error() -> None:
    """Usage(...) + 1 lets Python raise TypeError (NotImplemented), not an AttributeError."""
    with pytest.raises(TypeError, match="unsupported operand"):
        Usage(input_tokens=1) + 1  # type: ignore[operator]
    assert Usage(input_tokens=1) + Usage(requests=1) == Usage(input_tokens=1, requests=1)


def test_state_of_a_stateless_toolfold_error_in_an_except_block_is_none() -> None:
    """A fallback run's ModelConfigError raised while handling another run's error has no state."""
    first = _failed()

    def fallback() -> None:
        try:
            raise first
        except UsageError:
            Agent(ScriptedModel([])).evolve(model="nosuchprovider:m")  # fails: no state

    with pytest.raises(ModelConfigError) as second:
        fallback()
    assert second.value.__context__ is first
    assert state_of(second.value) is None


def test_state_of_follows_a_toolfold_errors_cause() -> None:
    """``raise ToolfoldError(...) from run_error`` still gives the run's state."""
    run_error = RunError("x", state=initial_state("hi", run_id="r"))
    wrapper = UsageError("wrapped")
    wrapper.__cause__ = run_error
    assert state_of(wrapper) is run_error.state
