"""A workflow's own functions (until, merge, a router) that raise are named in the error."""

from __future__ import annotations

import re

import pytest

from toolfold import Loop, Parallel, Route, RunError


def text(x: str) -> str:
    """Its input."""
    return x


def other(x: str) -> str:
    """Its input, marked."""
    return x + "!"


def broken_until(value: str) -> bool:
    """An until that raises."""
    raise ValueError("until broke")


def broken_merge(outputs: dict[str, str]) -> str:
    """A merge that raises."""
    raise ValueError("merge broke")


def broken_router(x: str) -> str:
    """A router that raises."""
    raise KeyError("r")


@pytest.mark.parametrize(
    ("workflow", "message"),
    [
        (
            Loop(text, until=broken_until),
            "the until function (test_workflow_user_functions:broken_until) of Loop 'loop' "
            "raised ValueError: until broke",
        ),
        (
            Parallel(text, other, merge=broken_merge),
            "the merge function (test_workflow_user_functions:broken_merge) of Parallel "
            "'parallel' raised ValueError: merge broke",
        ),
        (
            Route(broken_router, {"a": text}),
            "the router function (test_workflow_user_functions:broken_router) of Route 'route' "
            "raised KeyError: 'r'",
        ),
    ],
)
def test_a_workflow_function_that_raises_is_named(workflow: object, message: str) -> None:
    """The RunError says which function of which workflow raised (it used to say only
    "workflow 'loop': ValueError: ...")."""
    with pytest.raises(RunError, match=re.escape(message)) as info:
        workflow.run("x")  # type: ignore[attr-defined]
    assert info.value.state is not None
