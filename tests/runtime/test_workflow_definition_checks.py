"""Workflow definitions refuse bad arguments at construction, naming the argument."""

from __future__ import annotations

from typing import Any

import pytest
from workflow_helpers import echo

from toolfold import Sequence, Task, WorkflowDefinitionError


@pytest.mark.parametrize(("given", "shown"), [("/", "str '/'"), (3, "int 3")])
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


def test_type_annotations_stay_valid_input_types() -> None:
    """Classes, generics, unions, Literal and Any are still taken as input types."""
    from typing import Literal

    for given in (str, list[int], int | None, Literal["a"], Any, type(None)):
        assert Sequence(Task(echo("a"), input_type=given)).tasks[0].input_type is given
