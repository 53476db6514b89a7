"""The Ray actor that runs inputs, and how an agent or a workflow gets into it.

An agent or a workflow spec reaches the actors either pickled (both pickle as
their spec: an `Agent`'s model string or model object, tools, options; a
workflow's steps, each agent in it as its spec; a provider model pickles as
its name and options, its live clients and a key read from the environment
stay behind and are rebuilt in the actor, and one given a key or a client in
code refuses) or as an import path ``"module:name"`` that each actor imports. What crosses back is plain data: the final state as
JSON, or an error's description.
"""

from __future__ import annotations

import asyncio
import importlib
import pickle
import traceback
from typing import Any

import attrs
import ray
from ray import cloudpickle

from toolfold._errors import Unpicklable, UsageError
from toolfold.adapters._http._keys import keys_deferred, keys_unpickled
from toolfold.runtime import Agent, Workflow, state_of
from toolfold.toolkit._results import describe_exception, exception_text

Spec = Agent | Workflow
"""What a batch runs: an agent, or a workflow spec (`Sequence`, `Parallel`, `Route`, `Loop`)."""


def load_spec(source: str | bytes) -> Spec:
    """The agent or workflow named by an import path, or unpickled from bytes."""
    if isinstance(source, bytes):
        with keys_unpickled():  # (a model string's key too: set where the actor runs)
            spec = cloudpickle.loads(source)
    else:
        spec = _import(source)
    if callable(spec) and not isinstance(spec, (Agent, Workflow)):
        spec = spec()
    if not isinstance(spec, (Agent, Workflow)):
        raise UsageError(
            f"{source!r} names a {type(spec).__name__}, not a toolfold Agent or workflow"
        )
    return spec


def driver_spec(path: str) -> Spec:
    """The spec an import path names, as the driver builds it: its API keys not required.

    The driver reads the spec (inputs checked against it, responses made from
    the states that come back) and never calls its models, so the key may be
    set only where the actors run (they import the path again, key required).
    The path is imported once, under `keys_deferred`: a model whose key is set
    is built with it, as by any import; one whose key is missing is built
    without it and refuses to send, raising the `ModelConfigError` it would
    have raised when built. The modules stay imported (one module object for
    the driver, its output classes included), and their top-level code runs
    once.
    """
    with keys_deferred():
        return load_spec(path)


def _import(path: str) -> Any:
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise UsageError(
            f"an agent's or workflow's import path reads 'package.module:name', got {path!r}"
        )
    try:
        value: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot import {path!r}: {exc}") from exc
    return value


def pickled(spec: Spec) -> bytes:
    """The agent or workflow as bytes for the actors, or a clear error saying what cannot travel."""
    what = "agent" if isinstance(spec, Agent) else "workflow"
    try:
        return bytes(cloudpickle.dumps(spec))  # type: ignore[no-untyped-call]
    except Unpicklable as exc:  # a model's refusal says what to do itself
        raise UsageError(f"the {what} cannot be sent to Ray actors: {exc}") from exc
    except Exception as exc:
        raise UsageError(
            f"the {what} cannot be sent to Ray actors: {describe_exception(exc)}. Give "
            "models as 'provider:model' strings or as models built with no key, client or "
            "credential header of their own (each actor builds its own client and reads its "
            "key from its environment), use tools and functions that pickle, or pass the "
            f"{what} as an import path 'package.module:name' that the actors import (a model "
            "that needs its key or client given in code is then built in each actor)"
        ) from exc


def error_data(exc: BaseException) -> dict[str, Any]:
    """An exception as plain data: its type, message, traceback and the run's state.

    The state is the one any error of a run carries (`state_of`): a `RunError`'s, and
    a provider error's (whose state counts the usage a failed answer was billed).
    """
    kind = type(exc)
    state = state_of(exc)
    return {
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "message": exception_text(exc),
        "traceback": "".join(traceback.format_exception(kind, exc, exc.__traceback__)),
        "state": state.to_json() if state is not None else None,
    }


@attrs.frozen
class Finished:
    """One input's outcome as it crosses back to the driver.

    ``state``: the final `RunState` pickled (the driver loads it several times
    faster than it would parse the JSON), ``state_json``: the same state as
    JSON when the batch writes a checkpoint, ``error``: `error_data` of the
    exception that ended the run (then both states are None).
    """

    index: int
    state: bytes | None
    state_json: str | None
    error: dict[str, Any] | None


class BatchActor:
    """Runs inputs of one agent or workflow concurrently on its event loop (a Ray async actor).

    The driver talks to it with `exchange`, one call at a time: each call
    hands over new inputs and returns what finished since the last one, so
    Ray's per-call cost is paid per round trip, not per input.
    """

    def __init__(self, source: str | bytes, with_json: bool = False) -> None:
        self.spec: Spec | None = None
        self.unbuilt: str | None = None  # why the spec could not be built here
        try:
            self.spec = load_spec(source)
        except Exception as exc:  # said by `ready`, plainly (not as a dead actor's traceback)
            self.unbuilt = f"{describe_exception(exc)}"
        self.with_json = with_json
        self.running: set[asyncio.Task[None]] = set()
        self.finished: list[Finished] = []
        self.news = asyncio.Event()

    @ray.method
    async def ready(self) -> str | None:
        """None once the spec is built; else why it could not be (``"<error type>: <message>"``)."""
        return self.unbuilt

    @ray.method
    async def exchange(self, inputs: list[tuple[int, Any, str]]) -> list[Finished]:
        """Start ``inputs`` (index, prompt, run id); return what finished, once something has."""
        for index, prompt, run_id in inputs:
            task = asyncio.create_task(self._run(index, prompt, run_id))
            self.running.add(task)
            task.add_done_callback(self.running.discard)
        while not self.finished and self.running:
            self.news.clear()
            await self.news.wait()
        done, self.finished = self.finished, []
        return done

    async def _run(self, index: int, prompt: Any, run_id: str) -> None:
        finished: Finished | None = None
        try:
            assert self.spec is not None, "given inputs only once ready() said it was built"
            response = await self.spec.arun(prompt, run_id=run_id)
            state = response.state
            finished = Finished(
                index,
                pickle.dumps(state, pickle.HIGHEST_PROTOCOL),
                state.to_json() if self.with_json else None,
                None,
            )
        except Exception as exc:  # an input's failure is its own result, never the batch's
            finished = Finished(index, None, None, error_data(exc))
        finally:  # whatever ended it (a cancel too), the driver hears of the input
            if finished is None:
                finished = Finished(
                    index,
                    None,
                    None,
                    error_data(RuntimeError("the run was interrupted before it ended")),
                )
            self.finished.append(finished)
            self.news.set()


RemoteBatchActor = ray.remote(BatchActor)
