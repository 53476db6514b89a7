"""Route and Loop, function steps, named values, failure policies and definition errors."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Any, Literal, TypedDict

import attrs
import pytest
from workflow_helpers import echo, exact

from toolfold import (
    Agent,
    Loop,
    Message,
    ModelResponse,
    Parallel,
    Route,
    RunError,
    RunState,
    Sequence,
    StepEndEvent,
    SubRunEvent,
    Task,
    TextDelta,
    ToolCallPart,
    Usage,
    UsageError,
    WorkflowDefinitionError,
    tool,
)
from toolfold.runtime import ModelResponded, fork, max_steps
from toolfold.testing import FunctionModel, ScriptedModel


@attrs.frozen
class Draft:
    """A draft and whether it is good enough."""

    text: str
    done: bool


def drafts(done_at: int) -> Agent:
    """A reviser whose n-th answer is draft ``vn``, done from ``done_at`` on."""

    def reply(request: Any) -> str:
        n = sum(1 for m in request.messages if m.role == "user")  # one prompt per run
        count = reply.calls = getattr(reply, "calls", 0) + n  # type: ignore[attr-defined]
        return f'{{"text": "v{count}", "done": {str(count >= done_at).lower()}}}'

    return Agent(FunctionModel(reply), name="reviser", output_type=Draft)


# --- Route ---------------------------------------------------------------------


def test_route_runs_the_branch_its_router_agent_chose() -> None:
    """A router agent answering a Literal label picks the branch; only that branch runs."""
    triage = Agent(
        FunctionModel(lambda r: '"tech"'), name="triage", output_type=Literal["billing", "tech"]
    )
    response = Route(triage, {"billing": echo("bill"), "tech": echo("fix")}).run("it crashed")
    assert response.output == "fix(it crashed)"
    assert dict(response.outputs) == {"triage": "tech", "fix": "fix(it crashed)"}
    exact(response.state)


def test_route_with_a_router_function_and_a_default() -> None:
    """A plain function routes; a label with no branch goes to the default."""

    def pick(text: str) -> str:
        return "refund" if "money" in text else "other"

    desk = Route(pick, {"refund": echo("refund")}, default=echo("human"))
    assert desk.run("my money back").output == "refund(my money back)"
    assert desk.run("hello").output == "human(hello)"


def test_route_branches_are_read_only_and_copied() -> None:
    """A Route's branches refuse changes after the workflow was checked, and ignore the caller's dict."""

    def pick(text: str) -> str:
        return "sales" if "buy" in text else "tech"

    given = {"tech": echo("tech")}
    desk = Route(pick, given, default=echo("other"))
    given["sales"] = echo("sales")
    with pytest.raises(TypeError, match="read-only"):
        desk.branches["sales"] = Task(echo("sales"))  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        desk.branches.clear()  # type: ignore[attr-defined]
    assert list(desk.branches) == ["tech"]
    assert desk.run("buy tea").output == "other(buy tea)"
    assert desk.run("fix pc").output == "tech(fix pc)"
    assert hash(desk) == hash(Route(pick, dict(desk.branches), default=desk.default))


def test_route_label_without_branch_or_default_fails_clearly() -> None:
    """A router answering an unknown label with no default fails, naming the label."""
    desk = Route(lambda text: "nope", {"yes": echo("yes")})
    with pytest.raises(RunError, match="chose 'nope', which is not a label"):
        desk.run("x")


def test_route_branch_may_use_the_router_output() -> None:
    """A branch's prompt template can read the router's answer by its name."""
    triage = Agent(FunctionModel(lambda r: '"tech"'), name="triage", output_type=Literal["tech"])
    branch = Task(echo("fix"), prompt="[{triage}] {input}")
    assert Route(triage, {"tech": branch}).run("x").output == "fix([tech] x)"


def test_router_literal_labels_must_all_have_a_branch() -> None:
    """A router that may answer a label no branch takes is a definition error."""
    triage = Agent(FunctionModel(lambda r: '"a"'), name="t", output_type=Literal["a", "b"])
    with pytest.raises(WorkflowDefinitionError, match="'b', which no branch takes"):
        Route(triage, {"a": echo("a")})


# --- Loop ----------------------------------------------------------------------


def test_loop_until_a_structured_field_holds() -> None:
    """`until="done"` stops at the first output whose ``done`` is true."""
    response = Loop(drafts(done_at=3), until="done", max_iterations=10).run("write")
    assert response.output == Draft("v3", True)
    assert list(response.state.sub_runs) == ["reviser.1", "reviser.2", "reviser.3"]
    assert response.outputs["reviser"] == {"text": "v3", "done": True}
    exact(response.state)


def test_loop_feeds_each_output_back_and_stops_at_max_iterations() -> None:
    """Each iteration gets the previous output; without the condition holding it stops at the limit."""
    response = Loop(echo("e"), until=lambda text: False, max_iterations=3).run("x")
    assert response.output == "e(e(e(x)))"
    assert response.finish_reason == "max_iterations"


@pytest.mark.parametrize("driver", ["run", "watched", "arun", "stream"])
def test_a_loop_out_of_iterations_says_so_a_converged_one_does_not(driver: str) -> None:
    """`finish_reason` tells a loop whose ``until`` never held (``max_iterations``, the last
    output as its output) from one that converged at its last iteration (``stop``), whichever
    driver runs it; the state keeps it through JSON and a replay."""

    def ran(limit: int) -> Any:
        loop = Loop(echo("e"), until=lambda text: text.count("(") >= 3, max_iterations=limit)
        if driver == "run":
            return loop.run("x")
        if driver == "watched":  # an observer: the agent loop drives it, not the lean driver
            return loop.run("x", on_event=lambda event: None)
        if driver == "arun":
            return asyncio.run(loop.arun("x"))
        stream = loop.stream("x")
        for _ in stream:
            pass
        return stream.response

    exhausted, converged = ran(2), ran(3)
    assert (exhausted.output, exhausted.finish_reason) == ("e(e(x))", "max_iterations")
    assert exhausted.state.finish_reason == "max_iterations"
    assert exhausted.state.output == "e(e(x))"
    exact(exhausted.state)
    assert (converged.output, converged.finish_reason) == ("e(e(e(x)))", "stop")
    assert converged.state.finish_reason == "stop"


def test_the_planners_last_answer_says_max_iterations_where_the_user_reads_it() -> None:
    """The planner's answer of a loop out of iterations has ``finish_reason == "max_iterations"``
    (model ``toolfold:workflow``) on the last step and in the log; a converged loop's says
    ``stop``; a stream's last step carries the same answer (FinishReason's docstring)."""

    def loop(limit: int) -> Loop:
        return Loop(echo("e"), until=lambda text: text.count("(") >= 3, max_iterations=limit)

    exhausted, converged = loop(2).run("x"), loop(3).run("x")
    last = exhausted.steps[-1].response
    assert (last.finish_reason, last.model_name) == ("max_iterations", "toolfold:workflow")
    answers = [e.response for e in exhausted.state.log if isinstance(e, ModelResponded)]
    assert [a.finish_reason for a in answers] == ["tool_calls", "tool_calls", "max_iterations"]
    assert converged.steps[-1].response.finish_reason == "stop"
    ends = [e for e in loop(2).stream("x") if isinstance(e, StepEndEvent)]
    assert ends[-1].step.response.finish_reason == "max_iterations"


def test_any_models_answer_saying_max_iterations_finishes_its_run_so() -> None:
    """An answer that says ``max_iterations`` finishes the run with it, whichever model gave it
    (a scripted one standing in for a loop), with an output type or without."""

    def said(text: str) -> ModelResponse:
        return ModelResponse(Message.assistant(text), finish_reason="max_iterations")

    plain = Agent(ScriptedModel([said("done")])).run("x")
    typed = Agent(ScriptedModel([said('{"a": 1}')]), output_type=dict).run("x")
    assert (plain.output, plain.finish_reason) == ("done", "max_iterations")
    assert (typed.output, typed.finish_reason) == ({"a": 1}, "max_iterations")


def test_a_loop_without_until_runs_its_iterations_and_stops() -> None:
    """``until=None`` asks for exactly ``max_iterations``: reaching them is no limit hit."""
    response = Loop(echo("e"), max_iterations=2).run("x")
    assert (response.output, response.finish_reason) == ("e(e(x))", "stop")


def test_a_loops_decision_reads_only_the_iterations_since_the_last_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each decision of a long `Loop` reads a step status or two, not every earlier iteration."""
    from toolfold.runtime._planner import Plan

    reads = 0
    status = Plan.status

    def counted(self: Plan, task: Task, base: str) -> Any:
        nonlocal reads
        reads += 1
        return status(self, task, base)

    monkeypatch.setattr(Plan, "status", counted)

    def step(text: str) -> str:
        return text[:1] + "."

    response = Loop(step, until=lambda text: False, max_iterations=300).run("hi")
    assert (response.output, response.finish_reason) == ("h.", "max_iterations")
    assert reads <= 3 * 300  # (read from the first iteration each time: 45,000)


def test_a_loop_keeps_nothing_of_its_finished_runs() -> None:
    """A `Loop` used for many runs holds none of their outputs once they end."""
    import gc
    import tracemalloc

    def step(text: str) -> str:
        return "y" * 1_000_000

    loop = Loop(step, max_iterations=3)
    loop.run("warm")
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(5):
            loop.run(f"in{i}")
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1_000_000  # (kept per run: 2 MB a run)


def test_many_concurrent_runs_of_one_loop_each_read_only_new_iterations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """100 concurrent runs of one `Loop` each decide reading a step status or two."""
    from toolfold.runtime._planner import Plan

    reads = 0
    status = Plan.status

    def counted(self: Plan, task: Task, base: str) -> Any:
        nonlocal reads
        reads += 1
        return status(self, task, base)

    monkeypatch.setattr(Plan, "status", counted)

    def step(text: str) -> str:
        return "y"

    loop = Loop(step, max_iterations=60)

    async def main() -> list[Any]:
        return await asyncio.gather(*[loop.arun("hi") for _ in range(100)])

    responses = asyncio.run(main())
    assert {(r.output, r.finish_reason) for r in responses} == {("y", "stop")}
    assert reads <= 3 * 60 * 100  # (read from the first iteration each time: 183,000)


def test_extending_the_last_plan_of_a_chain_copies_none_of_its_attempts() -> None:
    """`Plan.extended` on the plan a chain ends with allocates for the new attempt only."""
    import tracemalloc

    from toolfold.runtime._planner import Attempt, first_plan

    plan = first_plan("x", {})
    for i in range(1, 3001):
        plan = plan.extended([Attempt(f"s.{i}", "s", True, i)])
    new = Attempt("s.3001", "s", True, 3001)
    tracemalloc.start()
    try:
        extended = plan.extended([new])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4_000  # (a copy of 3,000 attempts and their index: over 100 kB)
    assert len(extended.attempts) == 3001
    assert extended.attempts[-1] is new
    assert extended.by_step["s.3001"] == (new,)
    # The plan extended still reads as it did.
    assert len(plan.attempts) == 3000
    assert "s.3001" not in plan.by_step
    assert plan.by_step["s.3000"] == (plan.attempts[-1],)


def test_a_nested_loop_out_of_iterations_passes_its_output_and_its_sub_run_says_so() -> None:
    """A loop step that ran out still passes its last output on (the outer run answers: ``stop``);
    its sub-run, in the outer state, finished with ``max_iterations``."""
    outer = Sequence(
        Loop(echo("e"), until=lambda text: False, max_iterations=2, name="polish"), echo("w")
    )
    response = outer.run("x")
    assert (response.output, response.finish_reason) == ("w(e(e(x)))", "stop")
    assert response.state.sub_runs["polish"].finish_reason == "max_iterations"
    exact(response.state)


def test_a_state_stored_before_max_iterations_existed_loads_and_replays_as_stop() -> None:
    """A state written when a loop out of iterations finished with ``stop`` (its planner's
    answer said ``stop`` too) still loads, and replays to the very state stored."""
    response = Loop(echo("e"), until=lambda text: False, max_iterations=2).run("x")
    stored = response.state.to_json()
    assert stored.count('"max_iterations"') == 2  # the planner's answer, the run's finish
    old = RunState.from_json(stored.replace('"max_iterations"', '"stop"'))
    assert (old.finish_reason, old.output) == ("stop", "e(e(x))")
    exact(old)


def test_loop_predicate_sees_the_typed_output() -> None:
    """A predicate gets the step's output as its declared type."""
    seen: list[Any] = []

    def good(draft: Draft) -> bool:
        seen.append(draft)
        return draft.text == "v2"

    Loop(drafts(done_at=99), until=good).run("write")
    assert seen == [Draft("v1", False), Draft("v2", False)]


def test_loop_until_field_must_exist_on_the_output_type() -> None:
    """`until` naming a field the output type lacks is a definition error."""
    with pytest.raises(WorkflowDefinitionError, match="has no field 'finished'"):
        Loop(drafts(1), until="finished")


def test_loop_until_field_of_a_text_output_is_a_definition_error() -> None:
    """`until="done"` on a step that answers text (no fields) is refused when built, not a silent never."""
    with pytest.raises(WorkflowDefinitionError, match="gives str, which has no fields"):
        Loop(echo("e"), until="done", max_iterations=3)


def test_loop_until_field_missing_from_an_untyped_output_fails_the_run() -> None:
    """An untyped step whose output lacks the `until` field fails the workflow, naming the field."""

    def revise(text: Any):  # type: ignore[no-untyped-def]  # untyped: checked at run time
        return {"text": text}

    with pytest.raises(RunError, match=r"until='done'.*'revise' gave .*no field 'done'") as info:
        Loop(revise, until="done", max_iterations=3).run("x")
    assert info.value.state is not None
    assert [c.call.id for c in info.value.state.calls] == ["revise.1"]  # the step ran once


# --- function steps, named values ------------------------------------------------


def test_function_steps_get_typed_input() -> None:
    """A function step receives the previous output as its parameter's type."""

    def count(text: str) -> int:
        return len(text)

    def double(n: int) -> int:
        return n * 2

    response = Sequence(echo("a"), count, double).run("xyz")
    assert response.output == 12
    assert dict(response.outputs) == {"a": "a(xyz)", "count": 6, "double": 12}


def test_prompt_and_instruction_templates_read_earlier_outputs() -> None:
    """`{name}`, `{name.field}` and `{input}` fill a step's prompt and its agent's instructions."""
    seen: list[tuple[str, str]] = []

    def reply(request: Any) -> str:
        seen.append((request.messages[0].text, request.messages[-1].text))
        return "ok"

    writer = Agent(FunctionModel(reply), name="writer", instructions="Draft was {reviser.text}.")
    workflow = Sequence(drafts(1), Task(writer, prompt="Polish {reviser.text} for {input}"))
    workflow.run("Ann")
    assert seen == [("Draft was v1.", 'Polish v1 for {"text": "v1", "done": true}')]


def test_templates_are_safe() -> None:
    """Attribute access, indexing, conversions and format specs are definition errors."""
    for template in ("{a.__class__}", "{a[0]}", "{a!r}", "{a:>10}", "{}"):
        with pytest.raises(WorkflowDefinitionError):
            Sequence(echo("a"), Task(echo("b"), prompt=template))


def test_literal_braces_in_a_step_agents_instructions_are_doubled() -> None:
    """A JSON example in a step agent's instructions: single braces are an error naming the step, where, and the doubled text; doubled braces reach the model as one."""
    seen: list[str] = []

    def reply(request: Any) -> str:
        seen.append(request.messages[0].text)
        return "done"

    def writer(instructions: str) -> Agent:
        return Agent(FunctionModel(reply), name="writer", instructions=instructions)

    with pytest.raises(WorkflowDefinitionError) as caught:
        Sequence(echo("notes"), writer('Answer like {"a": {"b": 1}} about {notes}.'))
    assert 'step \'writer\', in its instructions: {"a": {"b": 1}} is not a placeholder' in str(
        caught.value
    )
    assert 'double them, as in str.format: {{"a": {{"b": 1}}}}' in str(caught.value)
    flow = Sequence(echo("notes"), writer('Answer like {{"a": {{"b": 1}}}} about {notes}.'))
    flow.run("tea")
    assert seen == ['Answer like {"a": {"b": 1}} about notes(tea).']
    with pytest.raises(WorkflowDefinitionError) as caught:  # a whole name, no final newline
        Sequence(echo("notes"), writer("About {notes\n}."))
    assert "{notes\n} is not a placeholder" in str(caught.value)


def test_template_naming_a_later_step_is_a_definition_error() -> None:
    """A template cannot read a step that runs after it, or at the same time."""
    with pytest.raises(WorkflowDefinitionError, match=r"refers to \{b\}, which runs after it"):
        Sequence(Task(echo("a"), prompt="{b}"), echo("b"))
    with pytest.raises(WorkflowDefinitionError, match="which runs at the same time"):
        Parallel(Task(echo("a"), prompt="{b}"), echo("b"))


@dataclasses.dataclass
class Outline:
    """A typed function step's output."""

    title: str
    draft: Draft


class Verdict(TypedDict):
    """A TypedDict output."""

    score: int


def test_a_field_an_earlier_output_type_lacks_is_a_definition_error() -> None:
    """`{name.field}` naming a field the earlier step's declared type lacks fails when the workflow is built, naming the placeholder, the step and the fields."""

    def outline(draft: Draft) -> Outline:
        return Outline(draft.text, draft)

    def judge(outline: Outline) -> Verdict:
        return {"score": len(outline.title)}

    with pytest.raises(WorkflowDefinitionError) as caught:
        Sequence(
            drafts(1),
            outline,
            judge,
            Task(echo("w"), prompt="{reviser.txt} {outline.draft.dne} {judge.grade} {w2.x}"),
            Task(Agent(FunctionModel(lambda r: "x"), name="w2", instructions="{w.title}")),
        )
    problems = list(caught.value.problems)
    assert problems == [
        "step 'w' refers to {w2}, which runs after it",
        "step 'w' refers to {reviser.txt}, but step 'reviser' gives Draft, which has no "
        "field 'txt' (fields: text, done)",
        "step 'w' refers to {outline.draft.dne}, but outline.draft is Draft, which has no "
        "field 'dne' (fields: text, done)",
        "step 'w' refers to {judge.grade}, but step 'judge' gives Verdict, which has no "
        "field 'grade' (fields: score)",
        "step 'w2' refers to {w.title}, but step 'w' gives str, which has no field 'title' "
        "(it has no fields)",
    ]


class Pending(TypedDict):
    """A TypedDict whose field names a class not defined anywhere yet."""

    title: str
    extra: NotDefinedYet  # type: ignore[name-defined]  # noqa: F821


def test_a_typeddict_output_with_an_unresolved_reference_still_checks_its_field_names() -> None:
    """A forward reference that cannot be resolved yet leaves field types open but not the names: no NameError escapes."""

    def make(text: str) -> Pending:
        return {"title": text, "extra": None}

    Sequence(make, Task(echo("w"), prompt="{make.title} {make.extra}"))
    with pytest.raises(WorkflowDefinitionError) as caught:
        Sequence(make, Task(echo("w"), prompt="{make.nope}"))
    assert list(caught.value.problems) == [
        "step 'w' refers to {make.nope}, but step 'make' gives Pending, which has no "
        "field 'nope' (fields: title, extra)"
    ]


def test_resolved_hints_do_not_keep_a_self_referencing_class_alive() -> None:
    """Typing a recursive class's fields caches nothing that keeps the class from being collected."""
    import gc
    import weakref

    from toolfold.runtime._task import fields_of

    def make() -> type:
        node: Any = dataclasses.make_dataclass("Node", [("value", int), ("children", list)])
        node.__annotations__["children"] = list[node]  # resolved: the hints name the class
        return node

    refs = []
    for _ in range(20):
        cls = make()
        assert set(fields_of(cls) or {}) == {"value", "children"}
        refs.append(weakref.ref(cls))
        del cls
    gc.collect()
    assert [r for r in refs if r() is not None] == []


def test_fields_checked_through_nesting_and_routes_and_left_to_run_time_when_unknown() -> None:
    """A nested workflow's placeholders are checked where the name is defined; a router's output too; untyped outputs wait for the run."""
    inner = Sequence(Task(echo("b"), prompt="{reviser.text} {reviser.nope}"), name="inner")
    with pytest.raises(WorkflowDefinitionError, match=r"\{reviser.nope\}.*fields: text, done"):
        Sequence(drafts(1), inner)
    router = Agent(FunctionModel(lambda r: "a"), name="pick", output_type=Literal["a"])
    with pytest.raises(WorkflowDefinitionError, match=r"\{pick.label\}.*no field 'label'"):
        Route(router, {"a": Task(echo("a"), prompt="{pick.label}")})

    def untyped(text):  # type: ignore[no-untyped-def]
        return {"k": text}

    late = Sequence(untyped, Task(echo("w"), prompt="{untyped.k} {untyped.missing}"))
    with pytest.raises(RunError, match=r"\{untyped.missing\}: the value of untyped has no field"):
        late.run("x")
    assert Sequence(untyped, Task(echo("w"), prompt="{untyped.k}")).run("x").output == "w(x)"


def test_unknown_name_found_when_the_outermost_workflow_runs() -> None:
    """A name no step defines is refused before anything runs; an enclosing step may define it."""
    inner = Sequence(Task(echo("b"), prompt="about {topic}"), name="inner")
    with pytest.raises(
        WorkflowDefinitionError, match=r"step 'b' refers to \{topic\}, which no earlier step"
    ):
        inner.run("x")
    outer = Sequence(echo("topic"), inner)
    assert outer.run("x").output == "b(about topic(x))"


def test_name_of_a_skipped_step_fails_the_step_that_reads_it() -> None:
    """A value that does not exist at run time (a skipped step) is a clear error there."""

    def broken(text: str) -> str:
        raise ValueError("no")

    workflow = Sequence(Task(broken, on_error="skip"), Task(echo("b"), prompt="{broken}"))
    with pytest.raises(RunError, match="no value named 'broken'"):
        workflow.run("x")


# --- types ---------------------------------------------------------------------


def test_mismatched_step_types_are_a_definition_error_naming_both_steps() -> None:
    """A step whose input type does not accept the previous output type is refused when built."""

    def count(text: str) -> int:
        return len(text)

    with pytest.raises(WorkflowDefinitionError) as caught:
        Sequence(count, Task(echo("b"), input_type=str))
    assert caught.value.problems == (
        "step 'b' takes str, but the step before it, 'count', gives int",
    )


def _text(text: str) -> str:
    return text


def _plus_one(n: int) -> int:
    return n + 1


def _counts(text: str) -> dict[str, int]:
    return {"score": 1}


def _verdict_text(verdict: Verdict) -> str:
    return repr(verdict)


def test_a_typeddict_input_is_checked_as_a_dict_when_the_workflow_is_built() -> None:
    """A step taking a TypedDict accepts a dict or a TypedDict, refuses text; its fields at run time."""
    assert Sequence(_counts, _verdict_text).run("x").output == "{'score': 1}"
    with pytest.raises(WorkflowDefinitionError, match=r"takes Verdict, but .* gives str"):
        Sequence(_text, _verdict_text)


def _pick(text: str) -> str:
    return "a"


def test_a_parallel_branch_whose_type_does_not_fit_the_previous_output_is_refused() -> None:
    """A Parallel branch is checked against the step before the Parallel, naming both."""
    with pytest.raises(WorkflowDefinitionError) as caught:
        Sequence(_text, Parallel(Task(_plus_one), echo("b")))
    assert caught.value.problems == (
        "step '_plus_one' takes int, but the step before it, '_text', gives str",
    )


def test_a_route_branch_whose_type_does_not_fit_the_routers_input_is_refused() -> None:
    """A Route branch gets the route's input: it must take what the router takes."""
    with pytest.raises(WorkflowDefinitionError) as caught:
        Route(_pick, {"a": Task(_plus_one)})
    assert caught.value.problems == (
        "step '_plus_one' takes int, but it gets the route's input, "
        "and the router '_pick' takes str",
    )


@pytest.mark.parametrize("as_pairs", [list, tuple, iter])
def test_a_route_takes_its_branches_as_label_step_pairs(as_pairs: Any) -> None:
    """Route branches given as (label, step) pairs (a list, a tuple, an iterator) are read
    as dict() reads them, as a mapping's are."""
    desk = Route(_pick, as_pairs([("a", echo("a")), ("b", echo("b"))]))
    assert list(desk.branches) == ["a", "b"]
    assert desk.run("hi").output == "a(hi)"


class _DuckMapping:
    """A mapping by duck typing only: ``keys`` and item access, as dict() reads one."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def keys(self) -> Any:
        return self._data.keys()

    def __getitem__(self, key: str) -> Any:
        return self._data[key]


def test_a_route_takes_its_branches_from_a_duck_typed_mapping() -> None:
    """Route branches given as an object with keys() and item access (no Mapping) are read as
    dict() reads them."""
    desk = Route(_pick, _DuckMapping({"a": echo("a"), "b": echo("b")}))
    assert list(desk.branches) == ["a", "b"]
    assert desk.run("hi").output == "a(hi)"


class _FailingList(list[Any]):
    """A list whose iteration fails (with something else than TypeError or ValueError)."""

    def __iter__(self) -> Any:
        raise RuntimeError("boom")


class _FailingHash(str):
    """A label whose hash fails."""

    __slots__ = ()

    def __hash__(self) -> int:
        raise RuntimeError("boom")


class _FailingLength(tuple[Any, ...]):
    """A pair whose length fails."""

    def __len__(self) -> int:
        raise RuntimeError("boom")


@pytest.mark.parametrize(
    "branches",
    [
        [(_FailingHash("a"), echo("a"))],
        [_FailingLength(("a", echo("a")))],
    ],
    ids=["label-hash-fails", "pair-length-fails"],
)
def test_a_route_whose_pairs_fail_to_read_is_refused(branches: Any) -> None:
    """Route branches whose label's hash or pair's length raises: a WorkflowDefinitionError,
    not the bare error."""
    with pytest.raises(WorkflowDefinitionError) as caught:
        Route(_pick, branches)
    assert caught.value.problems == (
        "branches maps each label to its step (branches={'label': step, ...}), got list",
    )


@pytest.mark.parametrize(
    "branches",
    [
        [echo("a")],
        [echo("a"), echo("b")],
        "a",
        "ab",
        echo("a"),
        ["ab"],
        ["ab", "cd"],
        [("a", echo("a"), echo("b"))],
        _FailingList([("a", echo("a"))]),
    ],
)
def test_a_route_whose_branches_are_not_a_mapping_is_refused(branches: Any) -> None:
    """Route branches given as a list (of steps, or of strings: not read as 'a' -> 'b'), a
    string, one step, or what fails to iterate: a WorkflowDefinitionError, not dict()'s bare
    error nor a misread."""
    with pytest.raises(WorkflowDefinitionError) as caught:
        Route(_pick, branches)
    assert caught.value.problems == (
        "branches maps each label to its step (branches={'label': step, ...}), got "
        + type(branches).__name__,
    )


def test_a_route_given_a_label_twice_in_its_pairs_is_refused_naming_the_label() -> None:
    """Route branches as pairs that give a label twice: a WorkflowDefinitionError naming it,
    not the first of its steps dropped."""
    with pytest.raises(WorkflowDefinitionError) as caught:
        Route(_pick, [("a", echo("a")), ["b", echo("b")], ("a", echo("c")), ("a", echo("d"))])
    assert caught.value.problems == (
        "branch label 'a' is given more than once (each label has one step)",
    )


@pytest.mark.parametrize("kind", [Sequence, Parallel])
def test_steps_given_as_one_list_are_refused_saying_to_pass_them_one_by_one(kind: Any) -> None:
    """Sequence([a, b]) says steps are arguments, not 'list has no name'."""
    with pytest.raises(WorkflowDefinitionError) as caught:
        kind([echo("a"), echo("b")])
    assert caught.value.problems == (
        "a step is an Agent, a workflow or a function, got list: steps are given one by one, "
        "as arguments (pass *steps), not as a list",
    )


def test_a_route_inside_a_sequence_checks_its_branches_against_the_previous_step() -> None:
    """A Route whose router takes anything still has its branches checked in a Sequence."""
    router = Agent(FunctionModel(lambda request: "a"), name="router")
    with pytest.raises(WorkflowDefinitionError) as caught:
        Sequence(_text, Route(router, {"a": _plus_one}))
    assert caught.value.problems == (
        "step '_plus_one' takes int, but the step before it, '_text', gives str",
    )


def test_a_loop_body_workflow_is_checked_against_its_own_output() -> None:
    """A Loop whose body is a workflow checks the steps inside it against the body's output."""
    with pytest.raises(WorkflowDefinitionError) as caught:
        Loop(Sequence(Parallel(_plus_one), Task(echo("b"))), max_iterations=2)
    assert caught.value.problems == (
        "step '_plus_one' takes int, but its previous iteration gives str",
    )


def _anything(value: Any) -> Any:
    return value


def test_a_typed_function_step_refuses_a_value_of_another_type_at_run_time() -> None:
    """A value whose type shows only at run time fails the typed step, naming both types."""
    with pytest.raises(
        RunError, match=r"step '_plus_one' \(parameter 'n'\) takes int, but got str 'hello'"
    ):
        Sequence(_anything, _plus_one).run("hello")


def test_a_wrong_runtime_type_goes_through_the_steps_on_error_policy() -> None:
    """A skipped step with the wrong input records the type error and never runs."""
    response = Sequence(_anything, Task(_plus_one, on_error="skip")).run("hello")
    assert response.state.output == "hello"
    assert response.errors == {
        "_plus_one": "Error: TypeError: step '_plus_one' (parameter 'n') takes int, "
        "but got str 'hello'"
    }
    exact(response.state)


@attrs.frozen
class Order:
    """A typed function step's parameter."""

    item: str
    qty: int


def _ship(order: Order) -> str:
    return f"{order.qty} x {order.item}"


def _half(x: float) -> float:
    return x / 2


def test_run_time_type_checks_are_strict_and_name_step_parameter_expected_and_got() -> None:
    """Text is not made a number, a number not text, and an object with an extra key or a wrong field is not made a class."""
    cases = [
        ("3", _plus_one, r"step '_plus_one' \(parameter 'n'\) takes int, but got str '3'$"),
        (
            {"item": "tea", "qty": 2, "gift": True},
            _ship,
            r"step '_ship' \(parameter 'order'\) takes Order, but got dict .*"
            r"\(\$: unexpected property 'gift'\)$",
        ),
        (
            {"item": "tea", "qty": "2"},
            _ship,
            r"step '_ship' \(parameter 'order'\) takes Order, but got dict .*"
            r"\(\$\.qty: cannot convert to int: expected an integer, got str '2'\)$",
        ),
        (True, _half, r"step '_half' \(parameter 'x'\) takes float, but got bool True$"),
    ]
    for value, step, message in cases:
        response = Sequence(_anything, Task(step, on_error="skip")).run(value)
        assert re.search(message, response.errors[step.__name__].removeprefix("Error: TypeError: "))
        exact(response.state)
    assert Sequence(_anything, _ship).run({"item": "tea", "qty": 2}).output == "2 x tea"
    assert Sequence(_anything, _half).run(3).output == 1.5  # an int is a float, as in JSON


def test_a_router_function_gets_its_type_strictly() -> None:
    """A function router whose parameter type the input does not have fails the run, naming the router."""

    def by_size(n: int) -> str:
        return "big" if n > 10 else "small"

    route = Route(by_size, {"big": echo("big"), "small": echo("small")})
    flow = Sequence(_anything, route)
    assert flow.run(12).output == "big(12)"
    with pytest.raises(
        RunError,
        match=r"the router 'by_size' of Route 'route' \(parameter 'n'\) takes int, but got str '12'",
    ):
        flow.run("12")


def test_a_typed_function_step_gets_its_type_when_the_value_fits() -> None:
    """A fitting value is structured into the parameter's type (a number stays a number)."""
    assert Sequence(_anything, _plus_one).run(41).state.output == 42


def test_every_definition_problem_at_once() -> None:
    """Duplicate names, bad options and bad steps are reported together."""
    with pytest.raises(WorkflowDefinitionError) as caught:
        Parallel(echo("a"), echo("a"), Task(42, name="n", on_error="never"), max_concurrency=0)
    problems = "\n".join(caught.value.problems)
    assert "used 2 times" in problems
    assert "on_error must be" in problems
    assert "a step is an Agent, a workflow or a function" in problems
    assert "max_concurrency" in problems


# --- failure policies ------------------------------------------------------------


def failing(name: str, times: int) -> Agent:
    """An agent whose model fails ``times`` times, then answers ``ok``."""
    count = {"n": 0}

    def reply(request: Any) -> str:
        count["n"] += 1
        if count["n"] <= times:
            raise ValueError(f"failure {count['n']}")
        return "ok"

    return Agent(FunctionModel(reply), name=name)


def test_on_error_fail_fails_the_workflow_with_the_error_in_its_state() -> None:
    """A failing step fails the workflow; the error names the step and the state records it."""
    with pytest.raises(RunError, match="step 'bad' of Sequence 'sequence' failed") as caught:
        Sequence(echo("a"), failing("bad", 1), echo("c")).run("x")
    state = caught.value.state
    assert state.phase == "failed"
    assert state.error.tool_name == "bad"
    assert "failure 1" in state.error.message
    exact(state)


def test_on_error_skip_records_the_error_and_goes_on() -> None:
    """A skipped step's error is in the response; the next step gets the skipped step's input."""
    workflow = Sequence(echo("a"), Task(failing("bad", 1), on_error="skip"), echo("c"))
    response = workflow.run("x")
    assert response.output == "c(a(x))"
    assert "failure 1" in response.errors["bad"]
    assert "bad" not in response.outputs
    exact(response.state)


def looper(**kw: Any) -> Agent:
    """An agent that calls its tool on every step, so it stops at ``max_steps=2``."""

    def ping() -> str:
        """Ping."""
        return "pong"

    return Agent(ScriptedModel([ScriptedModel.call("ping")] * 9), tools=[ping], name="looper", **kw)


@pytest.mark.parametrize("stream", [False, True])
def test_an_agent_step_that_stops_at_max_steps_has_failed(stream: bool) -> None:
    """It has no answer to pass on (it passed ``"null"``): ``on_error`` applies, naming the step."""
    workflow = Sequence(Task(looper(max_steps=2), on_error="skip"), echo("b"))
    if stream:
        running = workflow.stream("x")
        list(running)
        response = running.response
    else:
        response = workflow.run("x")
    assert response.output == "b(x)"
    assert response.errors == {
        "looper": "Error: the step's run stopped at its limit max_steps=2 after 2 model calls "
        "without answering"
    }
    exact(response.state)
    with pytest.raises(RunError, match=r"step 'looper' .*max_steps=2 after 2 model calls"):
        Sequence(looper(max_steps=2), echo("b")).run("x")
    # A stop condition at a lower limit names its own value.
    stopped = Sequence(Task(looper(stop_when=[max_steps(3)]), on_error="skip"), echo("b")).run("x")
    assert stopped.errors["looper"].endswith("max_steps=3 after 3 model calls without answering")


@pytest.mark.parametrize("stream", [False, True])
def test_a_step_whose_run_was_handed_on_names_both_agents_at_its_limit(stream: bool) -> None:
    """A step's agent that handed its run to another, which stopped at max_steps, is named
    as an agent tool's run is: the run of the step's agent, handed to the one that stopped
    (it said "the step's run" alone)."""
    stuck = looper().evolve(name="stuck")
    desk = Agent(ScriptedModel([ScriptedModel.call("transfer_to_stuck")]), name="desk")
    workflow = Sequence(Task(desk.evolve(handoffs=[stuck], max_steps=2), on_error="skip"))
    if stream:
        running = workflow.stream("x")
        list(running)
        response = running.response
    else:
        response = workflow.run("x")
    assert response.errors == {
        "desk": "Error: the run of agent 'desk', handed to agent 'stuck', stopped at its limit "
        "max_steps=2 after 2 model calls without answering"
    }


def test_a_skipped_parallel_step_has_no_entry_in_the_merge() -> None:
    """Its output is not ``None`` (a step may answer that): it has none."""

    def bad(x: str) -> str:
        raise ValueError("no")

    seen: list[dict[str, Any]] = []

    def merge(outputs: dict[str, Any]) -> str:
        seen.append(outputs)
        return " / ".join(outputs.values())

    skipped = Task(bad, name="bad", on_error="skip")
    response = Parallel(echo("a"), skipped).run("x")
    assert response.output == {"a": "a(x)"}
    assert "bad" in response.errors
    exact(response.state)
    assert Parallel(echo("a"), skipped, merge=merge).run("x").output == "a(x)"
    assert seen == [{"a": "a(x)"}]


def test_a_step_whose_output_is_not_data_fails_naming_the_type() -> None:
    """Its ``str()`` was kept silently (``"<...Thing object at 0x...>"``), passed to the next step."""

    class Thing:
        pass

    def make(x: str) -> object:
        return Thing()

    def take(x: object) -> str:
        return f"took {x}"

    response = Sequence(Task(make, name="make", on_error="skip"), take).run("x")
    assert response.output == "took x"
    assert response.errors["make"].startswith("Error: TypeError: a Thing is not JSON data")
    with pytest.raises(RunError, match="a Thing is not JSON data"):
        Parallel(take, Task(take, name="again"), merge=lambda outputs: Thing()).run("x")


def test_a_step_returning_another_runs_response_fails_saying_what_to_return() -> None:
    """A function step that returns a Response (``.text`` meant) fails with a TypeError saying so."""
    inner = Agent(ScriptedModel(["hi"]))

    def ask(x: str) -> object:
        return inner.run(x)

    response = Sequence(Task(ask, name="ask", on_error="skip"), echo("b")).run("x")
    assert response.errors["ask"].startswith(
        "Error: TypeError: the step returned a Response, another run's whole record: "
        "return response.text or response.output"
    )


def test_a_workflow_given_a_response_as_input_says_so_without_blaming_a_step() -> None:
    """A Response as a workflow's input (``workflow.run(agent.run(q))``) is named as such.

    Before, the error said "the step returned a Response" of an input no step
    returned (and main said "a Log is not JSON data").
    """
    inner = Agent(ScriptedModel(["hi"]))

    def up(x: str) -> str:
        return x.upper()

    with pytest.raises(TypeError) as raised:
        Sequence(Task(up, name="up")).run(inner.run("q"))
    assert str(raised.value).startswith(
        "a Response is another run's whole record, not JSON data: "
        "use response.text or response.output"
    )
    assert "step" not in str(raised.value)


def test_a_merge_returning_a_response_is_not_said_to_be_a_step() -> None:
    """A Parallel's merge that returns a Response fails naming it, not a step's output."""
    inner = Agent(ScriptedModel(["hi"]))

    def take(x: object) -> str:
        return f"took {x}"

    merged = Parallel(take, Task(take, name="again"), merge=lambda outputs: inner.run("q"))
    with pytest.raises(RunError, match="a Response is another run's whole record") as raised:
        merged.run("x")
    assert "step returned" not in str(raised.value)


def test_on_error_retry_runs_the_step_again() -> None:
    """A retried step runs until it succeeds, within its retries; each attempt is on the record."""
    response = Sequence(Task(failing("flaky", 2), on_error="retry", retries=2)).run("x")
    assert response.output == "ok"
    # The failed attempts' runs too, where their model call failed (see test_agent_tool.py).
    phases = {key: run.phase for key, run in response.state.sub_runs.items()}
    assert phases == {"flaky": "awaiting_model", "flaky#2": "awaiting_model", "flaky#3": "finished"}
    results = [r for m in response.messages if m.role == "tool" for r in m.tool_results]
    assert [(r.call_id, r.is_error) for r in results] == [
        ("flaky", True),
        ("flaky#2", True),
        ("flaky#3", False),
    ]
    assert response.errors == {}


def _calls_then_fails(name: str, failures: int) -> Agent:
    """An agent that calls a tool, then (its first ``failures`` times) fails its second model
    call; every response is worth one request of 10 + 10 tokens."""
    count = {"failed": 0}

    @tool
    def look() -> str:
        """Look."""
        return "seen"

    def reply(request: Any) -> ModelResponse:
        if request.messages[-1].role == "tool":
            if count["failed"] < failures:
                count["failed"] += 1
                raise ValueError("provider down")
            message = Message.assistant("ok")
        else:
            message = Message.assistant("", [ToolCallPart("c1", "look", "{}")])
        return ModelResponse(message, Usage(10, 10, requests=1))

    return Agent(FunctionModel(reply), name=name, tools=[look])


@pytest.mark.parametrize(
    ("task", "requests", "phases"),
    [
        (
            Task(_calls_then_fails("st", 1), on_error="skip"),
            1,
            {"st": "awaiting_model"},
        ),
        (
            Task(_calls_then_fails("st", 1), on_error="retry"),
            3,
            {"st": "awaiting_model", "st#2": "finished"},
        ),
        (
            Task(
                Agent(
                    FunctionModel(lambda request: "not json"),
                    name="st",
                    output_type=Literal["a", "b"],
                    output_retries=1,
                ),
                on_error="skip",
            ),
            2,
            {"st": "failed"},
        ),
    ],
)
def test_the_runs_of_failed_attempts_count_in_the_workflows_usage(
    task: Task, requests: int, phases: dict[str, str]
) -> None:
    """A step whose run failed (its model's error, an output that never fit), skipped or
    retried, keeps that run on its call's result: its model calls are in response.usage and
    the run in sub_runs, and the state replays and round-trips exactly."""
    response = Sequence(task, name="w").run("go")
    assert response.usage.requests == requests
    assert {key: run.phase for key, run in response.state.sub_runs.items()} == phases
    exact(response.state)


def test_on_error_retry_fails_once_retries_are_used_up() -> None:
    """More failures than retries fail the workflow."""
    with pytest.raises(RunError, match="step 'flaky'"):
        Sequence(Task(failing("flaky", 3), on_error="retry", retries=2)).run("x")


def test_parallel_retries_only_the_failing_step() -> None:
    """In a parallel, a retried step runs again alone; the others ran once."""
    calls: list[str] = []

    def once(request: Any) -> str:
        calls.append("steady")
        return "steady"

    workflow = Parallel(
        Agent(FunctionModel(once), name="steady"), Task(failing("flaky", 1), on_error="retry")
    )
    response = workflow.run("x")
    assert response.output == {"steady": "steady", "flaky": "ok"}
    assert calls == ["steady"]


# --- fork, streaming of the other kinds -------------------------------------------


def test_fork_at_a_middle_step_reruns_only_what_follows() -> None:
    """A fork after the first step resumes from there: the first step does not run again."""
    calls: list[str] = []

    def counted(name: str) -> Agent:
        def reply(request: Any) -> str:
            calls.append(name)
            return f"{name}({request.messages[-1].text})"

        return Agent(FunctionModel(reply), name=name)

    workflow = Sequence(counted("a"), counted("b"), counted("c"))
    done = workflow.run("x", run_id="first")
    forked = fork(done.state, step=1, run_id="second")
    assert forked.phase == "awaiting_model"
    calls.clear()
    again = workflow.resume(forked)
    assert calls == ["b", "c"]
    assert again.output == done.output
    assert sorted(again.state.sub_runs) == ["a", "b", "c"]
    assert again.state.sub_runs["b"].run_id == "second/b"
    exact(again.state)


@pytest.mark.parametrize(
    "workflow",
    [
        Route(lambda text: "a", {"a": echo("a")}),
        Loop(echo("a"), max_iterations=2),
        Parallel(echo("a"), Task(echo("a"), name="a2")),
    ],
    ids=["route", "loop", "parallel"],
)
def test_route_and_loop_stream_like_they_run(workflow: Any) -> None:
    """Streaming gives the same final state as running, with the steps' text deltas tagged."""
    stream = workflow.stream("x", run_id="s")
    deltas = [e for e in stream if isinstance(e, SubRunEvent) and isinstance(e.event, TextDelta)]
    assert deltas
    assert {e.path[0] for e in deltas} <= {"a", "a2"}
    assert stream.response.state == workflow.run("x", run_id="s").state


def pick_tech(value: object) -> str:
    """A router function with an import path (so a workflow holding it pickles)."""
    return "tech"


def test_a_workflow_pickles_as_its_spec() -> None:
    """A workflow travels to another process as its spec and is rebuilt there, equal."""
    import pickle

    from toolfold.testing import TestModel, override_models

    with override_models(lambda spec: TestModel()):
        a = Agent("openai:gpt-4o-mini", name="a")
        reviser = Agent("openai:gpt-4o-mini", name="reviser", output_type=Draft)
        workflow = Sequence(
            Task(a, on_error="skip"),
            Parallel(
                Task(a, name="b"), Loop(Task(reviser, name="c"), until="done", max_iterations=2)
            ),
            Route(pick_tech, {"tech": Task(a, name="d")}),
            name="top",
        )
        again = pickle.loads(pickle.dumps(workflow))
    assert again == workflow
    assert again.steps[0].on_error == "skip"


def test_workflow_as_tool_checks_the_steps_inside_that_get_its_input() -> None:
    """A Parallel used as a tool refuses an input_type one of its branches cannot take."""
    with pytest.raises(
        UsageError, match="step '_plus_one' takes int, but the tool's input_type is str"
    ):
        Parallel(_plus_one, echo("b")).as_tool()
