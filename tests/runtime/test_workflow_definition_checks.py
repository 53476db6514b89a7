"""Workflow definitions refuse bad arguments at construction, naming the argument."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from workflow_helpers import echo

from toolfold import (
    Loop,
    Parallel,
    Route,
    Sequence,
    Task,
    ToolDefinitionError,
    WorkflowDefinitionError,
)


@pytest.mark.parametrize(("given", "shown"), [(b"/", "bytes b'/'"), (3, "int 3")])
def test_a_task_input_type_that_is_not_a_type_is_refused(given: Any, shown: str) -> None:
    """``Task(input_type=<a value>)`` is a WorkflowDefinitionError naming the step and
    input_type (it used to build, and the step failed at run time or ignored it)."""

    def f(x: int) -> int:
        return x

    for step, name in ((echo("a"), "a"), (f, "f")):
        with pytest.raises(WorkflowDefinitionError) as info:
            Sequence(Task(step, input_type=given))
        assert info.value.problems == (
            f"step {name!r}: input_type must be a type (str, int, an attrs class or dataclass, "
            f"list[str]...), got {shown}",
        )


@pytest.mark.parametrize("given", ["int", typing.ForwardRef("int")])
def test_a_type_given_by_its_name_is_refused_saying_so(given: Any) -> None:
    """``input_type="int"`` (or a ForwardRef) is refused, telling to give the type itself, not
    its name, and that a name was ignored before."""
    with pytest.raises(WorkflowDefinitionError) as info:
        Sequence(Task(echo("a"), input_type=given))
    assert info.value.problems == (
        "step 'a': input_type must be a type, got its name 'int': give the type itself, not "
        "its name (a name was ignored before, the step taking any input)",
    )


@pytest.mark.parametrize("where", ["typing", "typing_extensions"])
def test_literal_string_is_a_valid_input_type(where: str) -> None:
    """LiteralString (typing's on 3.11+, typing_extensions' on any) is taken as an input type."""
    import typing_extensions

    module = typing if where == "typing" else typing_extensions
    given = getattr(module, "LiteralString", typing_extensions.LiteralString)
    flow = Sequence(echo("a"), Task(echo("b"), input_type=given), name="w")
    assert flow.run("x").output == "b(a(x))"


def test_type_annotations_stay_valid_input_types() -> None:
    """Classes, generics, unions, Literal and Any are still taken as input types."""
    from typing import Literal

    for given in (str, list[int], int | None, Literal["a"], Any, type(None)):
        assert Sequence(Task(echo("a"), input_type=given)).tasks[0].input_type is given


@pytest.mark.parametrize("name", ["", 3, b"flow"])
def test_a_workflow_name_that_is_not_text_is_refused(name: Any) -> None:
    """A workflow's name must be non-empty text (or None): anything else is refused when built."""
    for kind in (
        lambda: Sequence(echo("a"), name=name),
        lambda: Parallel(echo("a"), name=name),
        lambda: Loop(echo("a"), name=name),
        lambda: Route(lambda x: "a", {"a": echo("a")}, name=name),
    ):
        with pytest.raises(WorkflowDefinitionError) as info:
            kind()
        assert info.value.problems[0] == (
            f"name must be non-empty text, got {type(name).__name__} {name!r}"
        )


def test_a_workflow_named_none_runs_as_it_did() -> None:
    """name=None builds and runs a workflow, as before names were checked."""
    assert Sequence(echo("a"), name=None).run("x").output == "a(x)"  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["My report flow", "flow.v2", "résumé", "a/b", "x" * 65])
def test_a_workflow_name_that_is_not_a_tool_name_runs(name: str) -> None:
    """Any non-empty text names a workflow that runs; as_tool without name= then says
    its default tool name is not one, and name= gives it one."""
    flow = Sequence(echo("a"), name=name)
    assert flow.run("x").output == "a(x)"
    with pytest.raises(ToolDefinitionError) as info:
        flow.as_tool()
    assert f"tool name {name!r} is invalid" in str(info.value)
    assert flow.as_tool(name="report").name == "report"


def test_a_workflow_named_with_a_space_as_a_step_is_refused() -> None:
    """As a step, a workflow's name must be an identifier: the step's check says so."""
    with pytest.raises(WorkflowDefinitionError) as info:
        Sequence(Sequence(echo("a"), name="my flow"))
    assert info.value.problems[0].startswith("step name 'my flow' is not a name")


def test_names_that_worked_still_build() -> None:
    """Identifiers and tool names with a hyphen still build and run."""
    for name in ("flow", "my-flow", "x" * 64):
        assert Sequence(echo("a"), name=name).run("x").output == "a(x)"


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        (lambda: Task(echo("a"), name=3), "a step's name must be text, got int 3"),
        (
            lambda: Task(echo("a"), prompt=3),
            "step 'a': prompt must be text (a template), got int 3",
        ),
    ],
)
def test_task_arguments_of_the_wrong_type_are_refused(task: Any, problem: str) -> None:
    """Task(name=3) and Task(prompt=3) are definition problems naming the argument (they
    used to crash inside toolfold with a TypeError)."""
    with pytest.raises(WorkflowDefinitionError) as info:
        Sequence(task())
    assert info.value.problems == (problem,)
