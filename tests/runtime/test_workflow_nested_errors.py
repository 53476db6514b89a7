"""`response.errors` lists the steps skipped inside nested workflows, under their paths."""

from __future__ import annotations

from workflow_helpers import echo

from toolfold import Loop, Parallel, Sequence, Task


def boom(text: object) -> str:
    """A step that always fails."""
    raise ValueError("boom")


def test_a_step_skipped_in_a_nested_workflow_is_listed_under_its_path() -> None:
    """A skip two levels down is listed as ``outer/inner/step`` (it used to be left out), run
    blocking and with an observer (the other driver); the nested outputs are unchanged."""
    inner = Parallel(echo("p"), Task(boom, name="bad", on_error="skip"), name="inner")
    workflow = Sequence(
        echo("a"), Sequence(inner, Task(boom, name="late", on_error="skip"), name="outer")
    )
    for response in (workflow.run("x"), workflow.run("x", on_event=lambda event: None)):
        assert dict(response.errors) == {
            "outer/inner/bad": "Error: ValueError: boom",
            "outer/late": "Error: ValueError: boom",
        }
        assert response.outputs["outer"] == {"p": "p(a(x))"}


def test_a_later_iteration_that_succeeds_clears_a_nested_skip() -> None:
    """In a Loop, a nested step skipped in iteration 1 but ok in iteration 2 is not listed
    (its stale error stayed); one that fails in the last iteration still is."""
    calls: list[int] = []

    def first_fails(text: object) -> str:
        """Fails on its first call only."""
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("first time")
        return "ok"

    inner = Parallel(echo("p"), Task(first_fails, name="bad", on_error="skip"), name="inner")
    assert dict(Loop(inner, max_iterations=2, name="lp").run("x").errors) == {}
    assert len(calls) == 2
    late = Parallel(echo("p"), Task(boom, name="bad", on_error="skip"), name="inner")
    assert dict(Loop(late, max_iterations=2, name="lp").run("x").errors) == {
        "inner/bad": "Error: ValueError: boom"
    }
