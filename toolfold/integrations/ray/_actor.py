"""The Ray actor that runs inputs, and how an agent gets into it.

An agent reaches the actors either pickled (an `Agent` pickles as its spec:
model string or model object, tools, options; live clients and API keys stay
behind and are rebuilt in the actor) or as an import path ``"module:name"``
that each actor imports. What crosses back is plain data: the final state as
JSON, or an error's description.
"""

from __future__ import annotations

import importlib
import traceback
from typing import Any

import ray
from ray import cloudpickle

from toolfold._errors import RunError, UsageError
from toolfold.runtime import Agent


def load_agent(source: str | bytes) -> Agent:
    """The agent named by an import path, or unpickled from bytes."""
    agent = cloudpickle.loads(source) if isinstance(source, bytes) else _import(source)
    if callable(agent) and not isinstance(agent, Agent):
        agent = agent()
    if not isinstance(agent, Agent):
        raise UsageError(f"{source!r} names a {type(agent).__name__}, not a toolfold Agent")
    return agent


def _import(path: str) -> Any:
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise UsageError(f"an agent's import path reads 'package.module:name', got {path!r}")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot import the agent {path!r}: {exc}") from exc
    return value


def pickled(agent: Agent) -> bytes:
    """The agent as bytes for the actors, or a clear error saying what cannot travel."""
    try:
        return bytes(cloudpickle.dumps(agent))  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise UsageError(
            f"the agent cannot be sent to Ray actors: {type(exc).__name__}: {exc}. Give the "
            "model as a 'provider:model' string (each actor builds its own client and reads "
            "its key from its environment), use tools and models that pickle, or pass the "
            "agent as an import path 'package.module:name' that the actors import"
        ) from exc


def error_data(exc: BaseException) -> dict[str, Any]:
    """An exception as plain data: its type, message, traceback and the run's state."""
    kind = type(exc)
    state = exc.state if isinstance(exc, RunError) else None
    return {
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(kind, exc, exc.__traceback__)),
        "state": state.to_json() if state is not None else None,
    }


class BatchActor:
    """Runs inputs of one agent concurrently on its event loop (a Ray async actor)."""

    def __init__(self, source: str | bytes) -> None:
        self.agent = load_agent(source)

    @ray.method
    async def ready(self) -> bool:
        """True once the agent is built (an error in the constructor surfaces here)."""
        return True

    @ray.method
    async def run(self, index: int, prompt: Any, run_id: str) -> tuple[int, str | None, Any]:
        """Run one input: ``(index, final state JSON, None)`` or ``(index, None, error)``."""
        try:
            response = await self.agent.arun(prompt, run_id=run_id)
        except Exception as exc:  # an input's failure is its own result, never the batch's
            return index, None, error_data(exc)
        return index, response.state.to_json(), None


RemoteBatchActor = ray.remote(BatchActor)
