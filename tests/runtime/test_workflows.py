"""Workflows (Sequence, Parallel, Route, Loop) on the agent loop: run, stream, replay, JSON."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import attrs
import pytest

from toolfold import (
    Agent,
    Parallel,
    RateLimitError,
    RunError,
    RunState,
    Sequence,
    SubRunEvent,
    Task,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
    UsageError,
    WorkflowResponse,
    tool,
)
from toolfold.runtime import ModelRequest, RunEndEvent, replay
from toolfold.testing import FunctionModel


def echo(name: str) -> Agent:
    """An agent that answers ``name(<its prompt>)``."""
    return Agent(FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name)


def exact(response: WorkflowResponse) -> None:
    """The response's state replays from its log and survives JSON exactly."""
    assert replay(response.state.log) == response.state
    assert RunState.from_json(response.state.to_json()) == response.state


# --- Sequence ------------------------------------------------------------------


def test_sequence_feeds_each_output_to_the_next_step() -> None:
    """Each step's output is the next step's prompt; the last output is the workflow's."""
    response = Sequence(echo("a"), echo("b"), echo("c")).run("x")
    assert response.output == "c(b(a(x)))"
    assert response.text == "c(b(a(x)))"
    assert response.finish_reason == "stop"
    assert dict(response.outputs) == {"a": "a(x)", "b": "b(a(x))", "c": "c(b(a(x)))"}
    assert response.usage.requests == 3  # the planner calls no model
    exact(response)


def test_sequence_passes_any_text_on_unchanged() -> None:
    """Text with quotes, escapes, non-ASCII and astral characters reaches the next step as it was."""
    text = 'say "é" \\ \n\t \u2028 \U0001f600 \x00 end'
    quoting = Agent(FunctionModel(lambda request: text), name="quoting")
    response = Sequence(quoting, echo("b")).run("x")
    assert response.output == f"b({text})"
    assert dict(response.outputs)["quoting"] == text
    exact(response)


def test_sequence_nests_each_step_run_in_its_state() -> None:
    """Each step's run is kept on its call's record, with an id derived from the workflow's."""
    response = Sequence(echo("a"), echo("b")).run("x", run_id="wf")
    runs = response.state.sub_runs
    assert sorted(runs) == ["a", "b"]
    assert runs["a"].run_id == "wf/a"
    assert runs["b"].messages[0].text == "a(x)"


def test_sequence_streams_its_steps_events_tagged_with_their_path() -> None:
    """Streaming a sequence yields each step's events wrapped with (step name, call id)."""
    stream = Sequence(echo("a"), echo("b")).stream("x", run_id="s")
    events = list(stream)
    texts = [
        (e.path, e.event.text)
        for e in events
        if isinstance(e, SubRunEvent) and isinstance(e.event, TextDelta)
    ]
    assert texts == [(("a", "a"), "a(x)"), (("b", "b"), "b(a(x))")]
    assert not any(
        isinstance(e, TextDelta) for e in events
    )  # the planner's own output is not shown
    assert [e.call.name for e in events if isinstance(e, ToolCallEvent)] == ["a", "b"]
    assert [e.result.tool_name for e in events if isinstance(e, ToolResultEvent)] == ["a", "b"]
    end = events[-1]
    assert isinstance(end, RunEndEvent)
    assert stream.response.output == "b(a(x))"
    plain = Sequence(echo("a"), echo("b")).run("x", run_id="s")
    assert stream.response.state == plain.state


def test_a_workflow_stream_stopped_by_break_says_the_caller_stopped_it() -> None:
    """After `break`, a workflow stream's `response` says the run was abandoned."""
    stream = Sequence(echo("a"), echo("b")).stream("x")
    for event in stream:
        if isinstance(event, SubRunEvent):
            break
    with pytest.raises(UsageError, match="caller stopped iterating it"):
        _ = stream.response


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_workflow_stream_whose_run_failed_says_so(how: str) -> None:
    """After a workflow stream raised, `response` names the failure, not an unfinished stream."""

    def fail(request: Any) -> Any:
        raise RateLimitError("slow down")

    stream = Sequence(echo("a"), Agent(FunctionModel(fail), name="b")).stream("x")

    async def drain() -> None:
        async for _ in stream:
            pass

    with pytest.raises(RunError, match="RateLimitError"):
        list(stream) if how == "sync" else asyncio.run(drain())
    with pytest.raises(UsageError, match=r"its run failed with RunError .*`\.state`"):
        _ = stream.response


def test_sequence_runs_on_the_event_loop() -> None:
    """`arun` gives the same state as `run`."""
    workflow = Sequence(echo("a"), echo("b"))
    response = asyncio.run(workflow.arun("x", run_id="r"))
    assert response.state == workflow.run("x", run_id="r").state


def test_arun_steps_run_on_the_loop_as_its_docstring_says() -> None:
    """Under `arun` a step's model and async tool run on the loop's thread, as documented."""
    threads: list[int] = []

    @tool
    async def probe() -> str:
        """Say where the step runs."""
        threads.append(threading.get_ident())
        return "here"

    def reply(request: ModelRequest) -> Any:
        threads.append(threading.get_ident())
        if request.messages[-1].role == "tool":
            return "done"
        return FunctionModel.call("probe", {})

    workflow = Sequence(Agent(FunctionModel(reply), name="a", tools=[probe]), name="flow")

    async def main() -> WorkflowResponse:
        threads.append(threading.get_ident())
        return await workflow.arun("go")

    assert asyncio.run(main()).text == "done"
    assert threads == [threads[0]] * 4  # the loop, the model twice, the tool
    doc = inspect.getdoc(Sequence.arun) or ""
    assert "steps run as coroutines of that loop" in doc
    assert "steps run on worker threads" not in doc


def test_sequence_takes_structured_input_and_output() -> None:
    """A dict input reaches the first agent as JSON; a structured output comes back typed."""

    @attrs.frozen
    class Verdict:
        ok: bool

    judge = Agent(FunctionModel(lambda r: '{"ok": true}'), name="judge", output_type=Verdict)
    response = Sequence(echo("a"), judge).run({"topic": "tea"})
    assert response.outputs["a"] == 'a({"topic": "tea"})'
    assert response.output == Verdict(ok=True)
    assert response.state.output == {"ok": True}
    exact(response)


# --- Parallel ------------------------------------------------------------------


def test_parallel_merges_outputs_by_step_name() -> None:
    """Every step gets the same input; the default merge maps step names to outputs."""
    response = Parallel(echo("a"), echo("b"), echo("c")).run("x")
    assert response.output == {"a": "a(x)", "b": "b(x)", "c": "c(x)"}
    assert response.usage.requests == 3
    exact(response)


def test_parallel_output_types_each_branch_that_has_an_output_type() -> None:
    """The default merge types a branch with an output type; plain agents' text is kept as is."""

    @attrs.frozen
    class Verdict:
        ok: bool

    judge = Agent(FunctionModel(lambda r: '{"ok": true}'), name="judge", output_type=Verdict)
    typed = Parallel(echo("a"), judge).run("x")
    assert typed.output == {"a": "a(x)", "judge": Verdict(ok=True)}
    assert typed.state.output == {"a": "a(x)", "judge": {"ok": True}}
    plain = Parallel(echo("a"), echo("b"))
    assert plain.restore({"a": None, "b": "b(x)", "c": "?"}) == {"a": None, "b": "b(x)"}
    exact(typed)


def test_parallel_commits_in_declaration_order_whatever_finishes_first() -> None:
    """The slow first step finishes last, yet its result is committed first."""
    second_done = asyncio.Event()

    async def slow(request: Any) -> str:
        await asyncio.wait_for(second_done.wait(), 10)
        return "slow"

    async def fast(request: Any) -> str:
        second_done.set()
        return "fast"

    workflow = Parallel(
        Agent(FunctionModel(slow), name="first"), Agent(FunctionModel(fast), name="second")
    )
    response = workflow.run("go")
    results = response.messages[-2].tool_results
    assert [r.tool_name for r in results] == ["first", "second"]
    assert response.output == {"first": "slow", "second": "fast"}
    exact(response)


def test_nested_parallels_wider_than_the_worker_pool_finish() -> None:
    """Steps wait on the event loop, not on worker threads: 4 x 8 x 8 nested steps cannot starve."""

    def inner(i: int) -> Parallel:
        return Parallel(*[echo(f"a{j}") for j in range(8)], name=f"p{i}")

    def middle(k: int) -> Parallel:
        return Parallel(*[inner(i) for i in range(8)], name=f"m{k}")

    response = Parallel(*[middle(k) for k in range(4)]).run("x")
    assert response.usage.requests == 256


def test_parallel_merge_function_sees_typed_outputs() -> None:
    """A merge function gets the outputs by name and its result is the output."""

    def join(outputs: dict[str, Any]) -> str:
        return " + ".join(f"{k}={v}" for k, v in outputs.items())

    response = Parallel(echo("a"), echo("b"), merge=join).run("x")
    assert response.output == "a=a(x) + b=b(x)"


def test_parallel_inside_sequence_then_a_step_reads_both() -> None:
    """A sequence step after a parallel gets the merged mapping as JSON."""
    response = Sequence(Parallel(echo("a"), echo("b"), name="both"), echo("c")).run("x")
    assert response.output == 'c({"a": "a(x)", "b": "b(x)"})'
    assert response.outputs["both"] == {"a": "a(x)", "b": "b(x)"}
    exact(response)


@pytest.mark.parametrize(("limit", "expected"), [(1, 1), (4, 4)])
def test_parallel_runs_at_most_max_concurrency_steps_at_once(limit: int, expected: int) -> None:
    """max_concurrency bounds how many steps are in flight; every step runs."""
    running = 0
    most = 0

    async def counted(request: Any) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)  # let the other steps start, if the limit allows
        running -= 1
        return "ok"

    steps = [Agent(FunctionModel(counted), name=f"s{i}") for i in range(6)]
    response = Parallel(*steps, max_concurrency=limit).run("x")
    assert list(response.output) == [f"s{i}" for i in range(6)]
    assert most == expected


def test_named_task_overrides_the_agent_name() -> None:
    """A Task gives a step its own name; the same agent may run twice under two names."""
    a = echo("a")
    response = Sequence(Task(a, name="first"), Task(a, name="second")).run("x")
    assert dict(response.outputs) == {"first": "a(x)", "second": "a(a(x))"}


@pytest.mark.parametrize("kind", [Sequence, Parallel])
def test_unnamed_agent_is_a_definition_error(kind: Any) -> None:
    """A step needs a name: an unnamed agent is refused when the workflow is built."""
    from toolfold import WorkflowDefinitionError

    with pytest.raises(WorkflowDefinitionError, match="has no name"):
        kind(Agent(FunctionModel(lambda r: "x")))


def test_a_step_name_outside_ascii_is_refused_saying_so() -> None:
    """Step names are ASCII (templates and tool names need them so): 'résumé' is refused
    with a message that says ASCII, not merely "letters"."""
    from toolfold import WorkflowDefinitionError

    with pytest.raises(WorkflowDefinitionError, match=r"'résumé' is not a name \(ASCII letters"):
        Sequence(Task(echo("a"), name="résumé"))


def test_a_step_name_with_a_final_newline_is_refused() -> None:
    """'writer\\n' is not a name: the check covers the whole name, its last line break too."""
    from toolfold import WorkflowDefinitionError

    with pytest.raises(WorkflowDefinitionError, match=r"'writer\\n' is not a name"):
        Sequence(Task(echo("a"), name="writer\n"))


def test_parallel_streams_and_runs_on_the_event_loop() -> None:
    """`async for` over a parallel's stream and `arun` reach the state `run` reaches."""
    workflow = Parallel(echo("a"), echo("b"))

    async def main() -> tuple[list[Any], WorkflowResponse]:
        stream = workflow.stream("x", run_id="p")
        events = [event async for event in stream]
        return events, await workflow.arun("x", run_id="p")

    events, response = asyncio.run(main())
    assert isinstance(events[-1], RunEndEvent)
    assert events[-1].response.state == response.state == workflow.run("x", run_id="p").state
    assert {e.path[0] for e in events if isinstance(e, SubRunEvent)} == {"a", "b"}


def test_structured_values_in_prompts_keep_non_ascii_text() -> None:
    """A structured step output reaches the next step's prompt, through ``{name}`` or as
    its input, and the workflow's text, as JSON with the text as written, not ``\\u``
    escapes."""

    @attrs.frozen
    class Note:
        text: str

    def note(text: str) -> Note:
        return Note(f"{text} ✓")

    seen: list[str] = []

    def reply(request: Any) -> str:
        seen.append(request.messages[-1].text)
        return "ok"

    reader = Agent(FunctionModel(reply), name="reader")
    Sequence(note, Task(reader, prompt="Read {note}.")).run("café")
    Sequence(note, reader).run("日本")
    assert seen == ['Read {"text": "café ✓"}.', '{"text": "日本 ✓"}']
    assert Sequence(note).run("é").text == '{"text": "é ✓"}'
