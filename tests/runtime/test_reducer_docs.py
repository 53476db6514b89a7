"""The docs' transition table and diagram are generated from the code, and match it."""

from __future__ import annotations

import re
from pathlib import Path

from toolfold.runtime import TRANSITIONS, transition_diagram, transition_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "state-and-reducers.md"


def _section(name: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(f"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert match, f"{name} markers missing from {DOC.name}"
    return match.group(1).strip()


def test_doc_table_matches_the_code() -> None:
    """The transition table in the docs is exactly transition_table()."""
    assert _section("transition-table") == transition_table()


def test_doc_diagram_matches_the_code() -> None:
    """The Mermaid diagram in the docs is exactly transition_diagram()."""
    assert _section("transition-diagram") == f"```mermaid\n{transition_diagram()}\n```"


def test_table_lists_every_transition() -> None:
    """Every (phase, event, next phase) of TRANSITIONS appears in the generated table."""
    table = transition_table()
    for phase, events in TRANSITIONS.items():
        for kind, targets in events.items():
            row = f"| `{phase}` | `{kind}` | {', '.join(f'`{t}`' for t in targets)} |"
            assert row in table


def test_doc_example_runs() -> None:
    """The 'driving the core by hand' example in the docs runs as written."""
    text = DOC.read_text(encoding="utf-8")
    example = text.split("## Driving the core by hand", 1)[1].split("```python\n", 1)[1]
    exec(example.split("```", 1)[0], {})
