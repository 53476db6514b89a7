"""`response.errors` lists the steps skipped inside nested workflows, under their paths."""

from __future__ import annotations

from workflow_helpers import echo

from toolfold import Parallel, Sequence, Task


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
