"""A Parallel: three reviewers read the same draft at once; a merge joins their notes.

Results are committed in declaration order whatever order the steps finish
in, so the state (and its replay) is the same on every run. By default the
output maps each step's name to its output; ``merge=`` combines them.
Streamed, each reviewer's text arrives as it is written, tagged with the
reviewer's place in the tree (the branches interleave).

    python examples/workflow_parallel.py
"""

from __future__ import annotations

from toolfold import Agent, Parallel, SubRunEvent, TextDelta
from toolfold.runtime import replay
from toolfold.testing import FunctionModel


def reviewer(name: str, note: str) -> Agent:
    return Agent(FunctionModel(lambda request: note), name=name)


def summary(notes: dict[str, str]) -> str:
    """One line per reviewer."""
    return "\n".join(f"- {name}: {note}" for name, note in notes.items())


reviews = Parallel(
    reviewer("style", "Shorter sentences."),
    reviewer("facts", "Check the date in paragraph 2."),
    reviewer("tone", "Friendly enough."),
    merge=summary,
    max_concurrency=3,
)


def main() -> None:
    response = reviews.run("Draft: tea arrived in Europe in 1610...")
    print("output:")
    print(response.output)
    print("usage:", response.usage)
    assert replay(response.state.log) == response.state
    assert list(response.outputs) == ["style", "facts", "tone"]

    print("streamed, as each reviewer writes:")
    stream = reviews.stream("Draft: tea arrived in Europe in 1610...")
    for event in stream:
        if isinstance(event, SubRunEvent) and isinstance(event.event, TextDelta):
            print(f"  [{event.path[0]}] {event.event.text!r}")
    assert stream.response.output == response.output


if __name__ == "__main__":
    main()
