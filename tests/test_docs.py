"""Every Python example in README.md and docs/*.md runs, as shown, in the test suite.

How a page runs:

- its ```python blocks run in order in one namespace, as a reader follows the
  page (a later block may use what an earlier one defined); each block is its
  own test case, failing with the block's place (``docs/tools.md:81``);
- every block runs inside `toolfold.testing.override_models`, so a block that
  names a real provider (``"openai:gpt-4o-mini"``) gets a `TestModel` instead:
  no key, no network. A block's setup may bind ``doc_model`` to give that
  block a model of its own (a `ScriptedModel` with the answers it shows);
- an HTML comment right before a block, ``<!-- setup ... -->``, holds code
  that runs first without being shown (a tool the page defined elsewhere, a
  saved state); one right after it, ``<!-- check ... -->``, holds assertions
  on what the block did. A check reads ``printed`` (what the block printed)
  and ``shown`` (the block's trailing ``# ...`` comment lines, without the
  ``# ``), so ``assert printed == shown`` keeps shown output from drifting;
- top-level ``await`` is allowed (the block runs in ``asyncio.run``);
- every warning is an error, and a block must raise nothing.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import functools
import inspect
import io
import re
import sys
import types
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from toolfold.runtime import Model
from toolfold.testing import TestModel, override_models

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
_BLOCK = re.compile(
    r"(?:<!-- setup\n(?P<setup>.*?)-->\n)?"
    r"^```python[^\n]*\n(?P<code>.*?)^```\n"
    r"(?:<!-- check\n(?P<check>.*?)-->\n)?",
    re.DOTALL | re.MULTILINE,
)


class Block(NamedTuple):
    """One ```python block of a page, with its hidden setup and checks."""

    path: Path
    line: int
    source: str
    setup: str
    check: str

    @property
    def id(self) -> str:
        """The block's place, e.g. ``docs/tools.md:7``."""
        place = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{place.as_posix()}:{self.line}"


def extract_blocks(path: Path) -> list[Block]:
    """Every ```python block of a Markdown file, with the line of its fence."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in _BLOCK.finditer(text):
        fence = match.start("code") - len("```python\n")
        blocks.append(
            Block(
                path,
                text.count("\n", 0, fence) + 1,
                match["code"],
                match["setup"] or "",
                match["check"] or "",
            )
        )
    return blocks


ALL_BLOCKS = [block for path in DOC_FILES for block in extract_blocks(path)]


def shown_output(source: str) -> str:
    """The block's trailing comment lines without ``# ``: the output it shows."""
    lines = source.rstrip("\n").split("\n")
    tail: list[str] = []
    while lines and lines[-1].startswith("#"):
        tail.insert(0, lines.pop()[2:])
    return "".join(f"{line}\n" for line in tail)


def _run(source: str, name: str, namespace: dict[str, Any]) -> None:
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    code = compile(source, name, "exec", flags=flags, dont_inherit=True)
    result = eval(code, namespace)
    if inspect.iscoroutine(result):
        asyncio.run(result)


def _page_model(namespace: dict[str, Any]) -> Any:
    def resolve(spec: str) -> Model:
        model = namespace.get("doc_model")
        return model if model is not None else TestModel()

    return resolve


@functools.cache
def run_page(path: Path) -> dict[int, tuple[str, Exception | None]]:
    """Run a page's blocks in order; each block's printed output and error, by line."""
    # A real module, so dataclasses and string annotations can resolve names.
    module = types.ModuleType("_doc_" + re.sub(r"\W", "_", path.stem))
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    outcomes: dict[int, tuple[str, Exception | None]] = {}
    try:
        for block in extract_blocks(path):
            out = io.StringIO()
            try:
                with warnings.catch_warnings(), contextlib.redirect_stdout(out):
                    warnings.simplefilter("error")
                    namespace["doc_model"] = None  # a block's setup may set its own
                    with override_models(_page_model(namespace)):
                        _run(block.setup, f"{block.id} (setup)", namespace)
                        _run(block.source, block.id, namespace)
                    namespace["printed"] = out.getvalue()
                    namespace["shown"] = shown_output(block.source)
                    _run(block.check, f"{block.id} (check)", namespace)
            except Exception as exc:  # reported by the block's own test
                outcomes[block.line] = (out.getvalue(), exc)
            else:
                outcomes[block.line] = (out.getvalue(), None)
    finally:
        del sys.modules[module.__name__]
    return outcomes


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[block.id for block in ALL_BLOCKS])
def test_doc_block_runs(block: Block) -> None:
    """A doc example runs after the page's earlier ones, without an exception or a warning."""
    _, error = run_page(block.path)[block.line]
    if error is not None:
        raise AssertionError(f"{block.id} failed: {type(error).__name__}: {error}") from error


# Blocks a reader copies on their own (a section's first example, a recipe): each
# runs alone, with no hidden setup and none of the page's earlier blocks, by a
# line it holds. (Each used a name only a hidden setup or a far earlier block gave:
# `state`, `search_flights`, `Payments`, `dataclass`, `attrs`, `Money`.)
STANDALONE = [
    ("state-and-reducers.md", "state = reduce(state, event)"),
    ("running-tools.md", 'booking = generate_text(model, "Book me a flight"'),
    ("running-tools.md", "def charge(ctx: RunContext[Payments], amount: int) -> str:"),
    ("running-tools.md", "def whoami(ctx: RunContext[User]) -> str:"),
    ("tools.md", "@register_schema_rule(Money)"),
    ("tools.md", "test_agent = agent.evolve(model=script"),
    ("composition.md", 'Sequence(reviser, Task(editor, prompt="Edit {reviser.txt}"))'),
]


@pytest.mark.parametrize(("page", "line"), STANDALONE, ids=[page for page, _ in STANDALONE])
def test_a_block_a_reader_copies_runs_alone(page: str, line: str) -> None:
    """The block runs in a namespace of its own, without its page's setup or earlier blocks."""
    (block,) = [b for b in extract_blocks(ROOT / "docs" / page) if line in b.source]
    module = types.ModuleType("_doc_alone")
    sys.modules[module.__name__] = module
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("error")
            with override_models(TestModel()):
                _run(block.source, block.id, module.__dict__)
    finally:
        del sys.modules[module.__name__]


def test_every_python_block_is_found() -> None:
    """The extractor sees every ```python fence of every page (none hides from the tests)."""
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        fences = len(re.findall(r"^```python", text, re.MULTILINE))
        assert len(extract_blocks(path)) == fences, path.name
    assert len(ALL_BLOCKS) >= 36


def test_a_failing_block_is_reported(tmp_path: Path) -> None:
    """A block that raises is reported as failed, and the next block still runs."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nraise ValueError('drifted')\n```\n\n```python\nprint('after')\n```\n",
        encoding="utf-8",
    )
    outcomes = run_page(page)
    assert isinstance(outcomes[1][1], ValueError)
    assert outcomes[5] == ("after\n", None)


def test_setup_and_check_comments_run_hidden_code(tmp_path: Path) -> None:
    """Setup runs before the block, checks after it with the printed text in ``printed``."""
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- setup\nx = 2\n-->\n```python\nprint(x * 21)\n```\n"
        "<!-- check\nassert printed == '41\\n'\n-->\n"
        "```python\nprint(6 * 7)\n# 42\n```\n<!-- check\nassert printed == shown\n-->\n",
        encoding="utf-8",
    )
    block, shows = extract_blocks(page)
    assert (block.setup, block.check) == ("x = 2\n", "assert printed == '41\\n'\n")
    outcomes = run_page(page)
    assert isinstance(outcomes[block.line][1], AssertionError)
    assert outcomes[shows.line] == ("42\n", None)


def test_provider_strings_resolve_to_a_test_model(tmp_path: Path) -> None:
    """A block naming a real provider runs against a TestModel, or the page's doc_model."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport toolfold\nprint(toolfold.model('openai:gpt-4o-mini').name)\n```\n"
        "<!-- setup\nfrom toolfold.testing import ScriptedModel\n"
        "doc_model = ScriptedModel(['hi'], name='scripted:x')\n-->\n"
        "```python\nprint(toolfold.model('groq:llama').name)\n```\n",
        encoding="utf-8",
    )
    outcomes = run_page(page)
    assert [printed for printed, _ in outcomes.values()] == ["test:model\n", "scripted:x\n"]


def _doc_references() -> list[tuple[str, str, str | None]]:
    """Every ``docs/<page>.md`` toolfold's source names (not in double backticks: another
    project's docs), with the section named after it ("docs/durable.md, Heading"), if any.

    Adjacent string literals are joined first, so a reference split over two lines counts.
    """
    found = []
    for path in sorted((ROOT / "toolfold").rglob("*.py")):
        text = re.sub(r"\"\s*\n\s*f?\"", "", path.read_text(encoding="utf-8"))
        for match in re.finditer(r"(?<!`)docs/([\w-]+\.md)(?:, ([A-Z][^)\"\n]*))?", text):
            found.append((str(path.relative_to(ROOT)), match.group(1), match.group(2)))
    return found


def test_every_docs_page_and_section_the_source_names_exists() -> None:
    """A "docs/X.md, Section" reference in toolfold's source (an error message's pointer) names a page and a heading that exist."""
    references = _doc_references()
    missing = []
    for source, page, section in references:
        doc = ROOT / "docs" / page
        if not doc.exists():
            missing.append(f"{source}: docs/{page}")
            continue
        headings = {
            line.lstrip("#").strip()
            for line in doc.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")
        }
        if section is not None and section not in headings:
            missing.append(f"{source}: docs/{page}, {section}")
    assert missing == []
    # (the scan finds the references: the one the payload limit's error names)
    assert (
        "toolfold/integrations/temporal/_workflow.py",
        "durable.md",
        "Payloads and long runs",
    ) in references
