"""`run_batch`: fan one agent out over many inputs on Ray async actors."""

from __future__ import annotations

import json
import operator
import os
import pickle
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from toolfold._errors import SerializationError, UsageError, WorkflowDefinitionError
from toolfold._extras import raise_missing_extra

try:
    import ray
    from ray.actor import ActorHandle
    from ray.exceptions import RayActorError
    from tqdm import tqdm
except ImportError as exc:  # the ray extra (ray and tqdm) is missing, or fails to import
    raise_missing_extra(exc, "ray", "toolfold.integrations.ray", ("ray", "tqdm"))

from toolfold.integrations.ray._actor import (
    BatchActor,
    Finished,
    RemoteBatchActor,
    Spec,
    driver_spec,
    pickled,
)
from toolfold.integrations.ray._checkpoint import Checkpoint, input_digest
from toolfold.runtime import Agent, Response, RunState, Workflow, WorkflowResponse
from toolfold.runtime._run import AGENT_RESUME, to_messages
from toolfold.runtime.core._messages import Message, wrong_argument
from toolfold.runtime.drive._shells import finish


@attrs.frozen
class BatchError:
    """Why an input failed: the exception as data (it crossed a process boundary).

    Attributes:
        type: The exception's qualified class name (``toolfold.ToolExecutionError``).
        message: Its message.
        traceback: Its formatted traceback, from the actor.
        state: The run's last consistent state when the error carried one
            (as `toolfold.state_of` finds it: a `RunError`'s, or a provider
            error's, whose state counts what a failed answer was billed), else None.
    """

    type: str
    message: str
    traceback: str = attrs.field(repr=False)
    state: RunState | None = attrs.field(default=None, repr=False)


@attrs.frozen
class BatchResult:
    """One input's outcome: a `Response`, or the `BatchError` that ended it.

    Attributes:
        index: The input's position in ``inputs``.
        response: The run's response (None when it failed): a `WorkflowResponse`
            when the batch ran a workflow spec.
        error: Why it failed (None when it ran).
        from_checkpoint: True when the result was read from the checkpoint
            file instead of being run again.
    """

    index: int
    response: Response | None = attrs.field(repr=False)
    error: BatchError | None
    from_checkpoint: bool = False

    @property
    def ok(self) -> bool:
        """True when the input ran to a response."""
        return self.error is None

    @property
    def text(self) -> str | None:
        """The response's text, or None when the input failed."""
        return self.response.text if self.response is not None else None


def run_batch(
    agent: Agent | Workflow | str,
    inputs: Iterable[Any],
    *,
    concurrency: int = 32,
    num_actors: int = 2,
    checkpoint: str | os.PathLike[str] | None = None,
    retry_errors: bool = True,
    progress: bool = True,
    on_result: Callable[[BatchResult], object] | None = None,
    actor_options: Mapping[str, Any] | None = None,
) -> list[BatchResult]:
    """Run an agent or a workflow on many inputs on Ray async actors; results in input order.

    Each actor builds the agent (or workflow) once and runs up to ``concurrency /
    num_actors`` inputs at a time on its event loop; as its runs finish, the
    driver collects them and hands it as many new inputs, in one Ray call. An
    exception in a run (a tool raising with ``on_tool_error="raise"``, a
    provider error, a workflow step that failed the workflow...) or an actor's
    crash becomes that input's error result; the other inputs go on. A run
    that suspends (an approval, a manual tool call) is a result too: its
    response's state resumes with ``agent.resume``.
    Call ``ray.init(...)`` first to choose the cluster (else Ray starts a local
    one with its defaults).

    Example:
        >>> results = run_batch(agent, ["2+2?", "3+3?"], checkpoint="out.jsonl")
        >>> [r.text for r in results]

    Args:
        agent: The `Agent` or workflow spec (`Sequence`, `Parallel`, `Route`,
            `Loop`), or an import path ``"package.module:name"`` naming one
            (or a function returning one) that each actor imports. Both
            pickle as their spec: a model string, or a model object built
            with no key or client of its own, is built again in each actor,
            which reads the API key from its own environment. The
            driver imports a path too, once, with keys not required (it stays
            imported there), to read the spec: a key set only on the actors
            is enough; a model built there without its key refuses to send
            (`ModelConfigError`).
        inputs: The prompts, an iterable (a list, a generator): each what
            the agent's or workflow's ``arun`` accepts (for an agent text, a
            `Message`, a list of messages; for a workflow also plain data: a
            dict, a list, an attrs instance). One prompt alone (a str, bytes,
            a dict, a `Message`) is refused: wrap it in a list.
        concurrency: Runs in flight at once, over all actors (an integer >= 1:
            an int, or any integer type such as ``numpy.int64``; not a bool).
        num_actors: Ray actors (processes) to spread the runs over (an
            integer >= 1, as ``concurrency``).
        checkpoint: A JSON-lines file: each finished input's final state is
            appended to it as it finishes, and a rerun with the same file and
            inputs skips the inputs recorded there. Run ids are stable per
            file (``<batch id>-<index>``), so a rerun's tool calls carry the
            same idempotency keys.
        retry_errors: On a rerun, run again the inputs whose recorded outcome
            is an error (False: keep the recorded error).
        progress: Show a progress bar (tqdm) on stderr.
        on_result: Called in the driver with each input's result as it finishes.
        actor_options: Extra Ray actor options (``num_cpus``,
            ``runtime_env``...), passed to ``.options()``.

    Returns:
        One `BatchResult` per input, in input order.

    Raises:
        UsageError: Bad arguments (``inputs`` that is one prompt, a table
            such as a DataFrame (it iterates its column labels: pass
            ``df["prompt"].tolist()``) or no iterable, a ``concurrency`` or
            ``num_actors`` that is no integer >= 1), an input that is not a prompt, an agent
            or workflow that cannot reach the actors or cannot be built there,
            a checkpoint in use by another `run_batch` (it stays locked
            until the batch ends), a checkpoint written for other inputs,
            or one whose recorded states do not load (another toolfold
            version wrote them).
        WorkflowDefinitionError: The workflow's templates name values no
            step defines (checked before anything runs).
    """
    concurrency = _count("concurrency", concurrency)
    num_actors = _count("num_actors", num_actors)
    if _is_table(inputs):
        # A DataFrame iterates its column labels: each would be a paid run.
        raise wrong_argument(
            "run_batch",
            "inputs",
            "an iterable of prompts (a list, a generator)",
            inputs,
            " (a table iterates its column labels: pass one column's prompts, "
            "run_batch(agent, df['prompt'].tolist()))",
        )
    if isinstance(inputs, (str, bytes, bytearray, Mapping, Message)) or not isinstance(
        inputs, Iterable
    ):
        # A str (or bytes, a dict) is iterable: each character (key) would be a paid run.
        raise wrong_argument(
            "run_batch",
            "inputs",
            "an iterable of prompts (a list, a generator)",
            inputs,
            " (wrap a single prompt in a list: run_batch(agent, ['...']))",
        )
    local = driver_spec(agent) if isinstance(agent, str) else agent
    if not isinstance(local, (Agent, Workflow)):
        raise UsageError(
            f"run_batch needs a toolfold Agent, a workflow or an import path, got {agent!r}"
        )
    prompts = list(inputs)
    _check_inputs(local, prompts)
    source = agent if isinstance(agent, str) else pickled(local)
    digests = [input_digest(p) for p in prompts]
    file = Checkpoint.open(checkpoint, digests) if checkpoint is not None else None
    try:
        return _Batch(local, prompts, digests, file, on_result).run(
            source,
            concurrency=concurrency,
            num_actors=min(num_actors, max(1, len(prompts))),
            retry_errors=retry_errors,
            progress=progress,
            actor_options=dict(actor_options or {}),
        )
    finally:
        if file is not None:
            file.close()


class _Batch:
    """One call of `run_batch`: its results so far, and the dispatch loop."""

    def __init__(
        self,
        spec: Spec,
        prompts: list[Any],
        digests: list[str],
        checkpoint: Checkpoint | None,
        on_result: Callable[[BatchResult], object] | None,
    ) -> None:
        self.spec = spec
        self.prompts = prompts
        self.digests = digests
        self.checkpoint = checkpoint
        self.on_result = on_result
        self.batch_id = checkpoint.batch_id if checkpoint is not None else uuid.uuid4().hex
        self.results: list[BatchResult | None] = [None] * len(prompts)

    def run(
        self,
        source: str | bytes,
        *,
        concurrency: int,
        num_actors: int,
        retry_errors: bool,
        progress: bool,
        actor_options: dict[str, Any],
    ) -> list[BatchResult]:
        todo = self._restore(retry_errors)
        bar = tqdm(
            total=len(self.prompts),
            initial=len(self.prompts) - len(todo),
            desc="toolfold batch",
            unit="run",
            disable=not progress,
        )
        try:
            if todo:
                self._dispatch(source, todo, concurrency, num_actors, actor_options, bar)
        finally:
            bar.close()
        return [r for r in self.results if r is not None]

    def _restore(self, retry_errors: bool) -> list[int]:
        """Fill in the results the checkpoint holds; the indices left to run."""
        found = self.checkpoint.found if self.checkpoint is not None else {}
        todo = []
        for index in range(len(self.prompts)):
            record = found.get(index)
            if record is None or ("error" in record and retry_errors):
                todo.append(index)
                continue
            try:
                if record.get("state") is not None:
                    state = RunState.from_json(json.dumps(record["state"]))
                    result = BatchResult(index, response_of(self.spec, state), None, True)
                else:
                    result = BatchResult(index, None, _failure(record["error"]), True)
            except SerializationError as exc:
                assert self.checkpoint is not None
                raise UsageError(
                    f"checkpoint {self.checkpoint.path}: the state recorded for input {index} "
                    f"does not load ({exc}). It was written by another toolfold version "
                    "(its event log replays to another state now) or edited: finish the "
                    "batch with the version that wrote it, or pass a new checkpoint path"
                ) from exc
            self.results[index] = result
        return todo

    def _record(self, finished: Finished) -> BatchResult:
        index = finished.index
        if finished.state is not None:
            state = pickle.loads(finished.state)  # made by our own actor: trusted as the spec
            result = BatchResult(index, response_of(self.spec, state), None)
        else:
            assert finished.error is not None
            result = BatchResult(index, None, _failure(finished.error))
        self.results[index] = result
        if self.checkpoint is not None:
            if finished.state_json is not None:
                self.checkpoint.append_state(index, self.digests[index], finished.state_json)
            else:
                line = {"index": index, "input": self.digests[index], "error": finished.error}
                self.checkpoint.append(line)
        if self.on_result is not None:
            self.on_result(result)
        return result

    def _dispatch(
        self,
        source: str | bytes,
        todo: list[int],
        concurrency: int,
        num_actors: int,
        actor_options: dict[str, Any],
        bar: tqdm[Any],
    ) -> None:
        # One exchange per actor at a time, plus a ping while it restarts.
        options = {"max_concurrency": 4, "max_restarts": -1, **actor_options}
        with_json = self.checkpoint is not None
        actors: list[ActorHandle[BatchActor]] = []
        for _ in range(num_actors):
            handle = RemoteBatchActor.options(**options).remote(source, with_json)
            assert isinstance(handle, ActorHandle)  # a handle, not the class (for typing)
            actors.append(handle)
        try:
            try:
                unbuilt: list[str | None] = ray.get([actor.ready.remote() for actor in actors])
            except RayActorError as exc:
                raise UsageError(f"the spec could not be built in a Ray actor: {exc}") from exc
            for reason in unbuilt:
                if reason is not None:
                    how = (
                        "the spec was pickled and built again in the actor, its models with "
                        "it, which read their API keys from the actor's own environment: set "
                        "them in the environment the cluster's nodes start with, or pass the "
                        "spec as an import path 'package.module:name' whose module reads them "
                        "from a secret manager"
                        if isinstance(source, bytes)
                        else "an actor imports an import path itself and reads API keys from "
                        "its own environment: set them in the environment the cluster's nodes "
                        "start with, or have the spec read them from a secret manager"
                    )
                    raise UsageError(
                        f"the spec could not be built in a Ray actor: {reason} ({how}; a key "
                        "in actor_options' runtime_env env_vars works too, but Ray writes those "
                        "values in plain text into its session logs)"
                    )
            self._drive(actors, todo, concurrency, bar)
        finally:
            for actor in actors:
                ray.kill(actor)

    def _drive(
        self, actors: list[ActorHandle[BatchActor]], todo: list[int], concurrency: int, bar: Any
    ) -> None:
        """Keep ``concurrency`` runs in flight over the live actors until all are done.

        Each live actor has one `BatchActor.exchange` call outstanding while it
        has runs: it returns what finished, and the next call hands the actor
        as many new inputs as came back (its share of ``concurrency``). An
        actor that died fails the inputs it held and is given none until a
        ping (retried by Ray across the restart) finds it back; one that
        cannot come back is dropped, and with no actor left the remaining
        inputs fail.
        """
        # Ray's ActorHandle types an actor's methods as Never for Python 3.11+ (mypy then
        # took the code after a call as unreachable): the calls go through Any.
        handles: list[Any] = list(actors)
        held: list[set[int]] = [set() for _ in actors]  # inputs each actor is running
        down: set[int] = set()  # restarting: a ping is in flight
        gone: set[int] = set()  # will not come back
        unbuilt: list[str] = []  # why restarted actors could not build the spec
        calls: dict[Any, tuple[bool, int]] = {}  # ref -> (a ping?, actor)
        asked: set[int] = set()  # actors with an exchange outstanding
        queue = list(reversed(todo))
        while queue or any(held):
            live = [n for n in range(len(actors)) if n not in down and n not in gone]
            share = -(-concurrency // max(1, len(live)))
            room = concurrency - sum(len(h) for h in held)
            for number in live:
                if number in asked:
                    continue
                count = max(0, min(share - len(held[number]), room, len(queue)))
                inputs = [queue.pop() for _ in range(count)]
                if not inputs and not held[number]:
                    continue
                room -= count
                held[number].update(inputs)
                sent = [(i, self.prompts[i], f"{self.batch_id}-{i}") for i in inputs]
                calls[handles[number].exchange.remote(sent)] = (False, number)
                asked.add(number)
            if not calls:  # every actor is gone
                for index in reversed(queue):
                    self._finished(Finished(index, None, None, _died(None, unbuilt)), bar)
                return
            ready, _ = ray.wait(list(calls), num_returns=1)
            for ref in ready:
                ping, number = calls.pop(ref)
                asked.discard(number)
                try:
                    got: Any = ray.get(ref)  # a ping's: `BatchActor.ready`'s
                except RayActorError as exc:
                    if ping:  # the actor will not come back
                        down.discard(number)
                        gone.add(number)
                        continue
                    down.add(number)
                    calls[handles[number].ready.options(max_task_retries=-1).remote()] = (
                        True,
                        number,
                    )
                    asked.add(number)
                    lost, held[number] = sorted(held[number]), set()
                    for index in lost:
                        self._finished(Finished(index, None, None, _died(exc, lost=lost)), bar)
                    continue
                if ping:
                    if got is not None:  # restarted, it could not build the spec: gone
                        gone.add(number)
                        unbuilt.append(got)
                    down.discard(number)
                    continue
                outcomes: list[Finished] = got
                for finished in outcomes:
                    held[number].discard(finished.index)
                    self._finished(finished, bar)

    def _finished(self, finished: Finished, bar: Any) -> None:
        result = self._record(finished)
        bar.update(1)
        if not result.ok:
            bar.set_postfix(failed=self._failed())

    def _failed(self) -> int:
        return sum(1 for r in self.results if r is not None and not r.ok)


def response_of(spec: Spec, state: RunState) -> Response:
    """The response a local run of ``spec`` gives for its final (or suspended) ``state``."""
    if isinstance(spec, Workflow):
        response = finish(state, spec._options.live())
        return WorkflowResponse(response.state, response.output)
    # after a handoff the agent that answered reads the output
    return finish(state, spec._for_state(state)._options.live())


def _count(name: str, count: object) -> int:
    """``count`` as an int >= 1 (any integer type, ``numpy.int64`` too; not a bool).

    Raises:
        UsageError: It is a bool, no integer, or below 1, naming ``name``.
    """
    if not isinstance(count, bool):
        try:
            value = operator.index(count)  # type: ignore[arg-type]
        except TypeError:
            pass
        else:
            if value >= 1:
                return value
    raise wrong_argument("run_batch", name, "an int >= 1", count)


def _is_table(inputs: object) -> bool:
    """Whether ``inputs`` looks like a DataFrame (pandas', polars'...): it has ``columns``.

    A table iterates its column labels, not its rows. A column of prompts
    (a pandas ``Series``, which has no ``columns``) iterates its values.
    """
    return hasattr(inputs, "columns") and not isinstance(inputs, (str, bytes, bytearray))


def _check_inputs(spec: Spec, prompts: list[Any]) -> None:
    """Refuse, before anything runs, inputs the spec could never start from.

    A workflow starts from text or any plain data, but its templates may name
    values no step defines: `Workflow._start` refuses that for every input alike.
    """
    for index, prompt in enumerate(prompts):
        try:
            if isinstance(spec, Workflow):
                spec._start(prompt, "check")  # the id is dropped: only the input is checked
            else:
                to_messages(prompt, resume=AGENT_RESUME)  # (an agent's: see `Spec`)
        except WorkflowDefinitionError:
            raise
        except (TypeError, ValueError) as exc:
            raise UsageError(f"input {index} is not a prompt: {exc}") from exc


def _failure(error: Mapping[str, Any]) -> BatchError:
    saved = error.get("state")
    return BatchError(
        type=error["type"],
        message=error["message"],
        traceback=error["traceback"],
        state=RunState.from_json(saved) if saved is not None else None,
    )


# The inputs in flight that a dead actor's message names (an actor may hold hundreds).
_LOST_SHOWN = 20


def _died(
    exc: RayActorError | None, unbuilt: Sequence[str] = (), lost: Sequence[int] = ()
) -> dict[str, Any]:
    """An input's failure when its actor died (``exc``), or when none is left.

    ``unbuilt``: why actors that restarted could not build the spec again.
    ``lost``: the inputs that were in flight on the actor when it died (this
    one among them): any of them may have crashed it.
    """
    kind = type(exc) if exc is not None else RayActorError
    why = str(exc) if exc is not None else "no actor is left"
    if exc is None and unbuilt:
        why += "; a restarted actor could not build the spec: " + "; ".join(dict.fromkeys(unbuilt))
    held = ""
    if len(lost) > 1:  # (which one crashed it, nothing tells: a rerun one at a time does)
        shown = ", ".join(map(str, lost[:_LOST_SHOWN]))
        more = f" and {len(lost) - _LOST_SHOWN} more" if len(lost) > _LOST_SHOWN else ""
        held = (
            f" with inputs {shown}{more} in flight (any of them may have crashed it: "
            "rerun them with concurrency=1 to tell which)"
        )
    elif lost:
        held = f" with input {lost[0]} in flight"
    return {
        "type": f"{kind.__module__}.{kind.__qualname__}",
        "message": f"the Ray actor running this input died{held}: {why}",
        "traceback": "",
        "state": None,
    }
