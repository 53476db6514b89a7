"""Every public exception class (and each internal one built from fields) pickles: an error crosses a process (multiprocessing, Ray) intact."""

from __future__ import annotations

import inspect
import pickle
from typing import Any

import pytest

import toolfold
import toolfold.local
import toolfold.mcp
from toolfold.adapters._wire import WireError
from toolfold.runtime.drive._workers import StopIterationCarrier
from toolfold.toolkit._converter import UnionStructureError


def _public_errors() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in (toolfold, toolfold.mcp, toolfold.local):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, BaseException):
                found[f"{module.__name__}.{name}"] = value
    # Internal errors with an __init__ of their own: they cross a process inside a cause chain.
    found["WireError"] = WireError
    found["UnionStructureError"] = UnionStructureError
    # Raised by a run whose tool's validate_arguments raised StopIteration.
    found["StopIterationCarrier"] = StopIterationCarrier
    return [found[name] for name in sorted(found)]


# Sample values for the fields the errors' __init__ take, by parameter name.
_SAMPLES: dict[str, Any] = {
    "problems": ["first problem", "second problem"],
    "errors": ["expected integer @ $.count"],
    "position": 7,
    "status_code": 500,
    "headers": {"x-request-id": "r1"},
    "retry_after": 2.5,
    "close_errors": [ValueError("close failed")],
    "response": None,
    "state": None,
    "raised": StopIteration("no more"),
}


def _made(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` with every field of its ``__init__`` given (keywords too)."""
    given: dict[str, Any] = {}
    positional: list[Any] = []
    try:
        parameters = inspect.signature(cls).parameters
    except ValueError:  # Exception's own __init__: the message only
        return cls("the message")
    for name, parameter in parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        value = _SAMPLES.get(name, f"{name} value")
        if parameter.kind is parameter.KEYWORD_ONLY:
            given[name] = value
        else:
            positional.append(value)
    return cls(*positional, **given)


def _fields(error: BaseException) -> dict[str, Any]:
    # Exceptions compare by identity: compare nested ones by type and text.
    return {
        key: [(type(e), str(e)) for e in value]
        if key == "close_errors"
        else (type(value), str(value))
        if isinstance(value, BaseException)
        else value
        for key, value in vars(error).items()
    }


@pytest.mark.parametrize("cls", _public_errors(), ids=lambda cls: cls.__name__)
def test_every_public_error_round_trips_through_pickle(cls: type[BaseException]) -> None:
    """pickle.loads(pickle.dumps(error)) gives the same type, message, args and fields."""
    error = _made(cls)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls
    assert str(back) == str(error)
    assert back.args == error.args
    assert _fields(back) == _fields(error)


def test_the_errors_tested_include_mcp_and_the_hierarchy() -> None:
    """The parametrized test covers MCPError and every class drawn in the hierarchy."""
    names = {cls.__name__ for cls in _public_errors()}
    assert {"MCPError", "ToolfoldError", "RunError", "ProviderError", "AgentFileError"} <= names


def test_a_run_error_pickles_with_its_state() -> None:
    """A RunError's state survives pickling: the run can be resumed in another process."""
    from toolfold.testing import ScriptedModel

    state = toolfold.Agent(ScriptedModel(["hi"])).run("x").state
    back = pickle.loads(pickle.dumps(toolfold.RunError("failed", state)))
    assert back.state == state
    assert str(back) == "failed"


@pytest.mark.parametrize("kind", [StopIteration, StopAsyncIteration], ids=lambda k: k.__name__)
def test_a_check_s_stop_iteration_pickles_with_its_cause_and_state(kind: type[Exception]) -> None:
    """The error a run raises for a validate_arguments' StopIteration (or StopAsyncIteration)
    pickles with its cause and state."""
    from toolfold.testing import ScriptedModel

    class Stops(toolfold.Tool[..., Any]):
        def validate_arguments(self, raw: Any) -> dict[str, Any]:
            raise kind("no more")

    schema = {"type": "object", "properties": {}}
    tool = Stops("bad", "B.", schema, lambda arguments: "x")
    agent = toolfold.Agent(ScriptedModel([[ScriptedModel.call("bad", {})], "done"]), tools=[tool])
    with pytest.raises(StopIterationCarrier) as raised:
        agent.run("go")
    back = pickle.loads(pickle.dumps(raised.value))
    assert type(back) is StopIterationCarrier
    assert str(back) == f"validate_arguments of tool 'bad' raised {kind.__name__}: no more"
    assert type(back.__cause__) is kind
    assert back.__cause__.args == ("no more",)
    assert toolfold.state_of(back) == toolfold.state_of(raised.value) is not None
    # A process pool sets the cause to its remote traceback: what was raised is kept
    back.__cause__ = RuntimeError("remote traceback")
    again = pickle.loads(pickle.dumps(back))
    assert str(again) == str(back)
    assert type(again.__cause__) is kind
