"""The Python examples in README.md and docs/*.md run against the current API.

Every ```python block is extracted. A block is run when it is self-contained
and needs no provider:

- it names no provider model (no ``"openai:"``, ``"groq:"``, ... string) and
  no ``api_key``: those need a key and the network;
- every name it reads is bound in the block itself (an import, an assignment,
  a ``def``/``class``, a parameter) or is a builtin. A block that reads a name
  it does not bind continues an earlier block (``search.validate_arguments``
  after the block defining ``search``) and is not run on its own;
- it compiles as a module (no top-level ``await``).

Each included block runs in a fresh namespace with every warning turned into
an error, and must raise nothing. Excluded blocks get no test case; they were
checked by hand with a test model in place of the provider.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
import types
import warnings
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_PROVIDERS = (
    "openai",
    "openai-compatible",
    "openai-responses",
    "anthropic",
    "gemini",
    "google",
    "groq",
    "mistral",
    "deepseek",
    "openrouter",
)
_NEEDS_PROVIDER = re.compile(r"""["'](?:""" + "|".join(_PROVIDERS) + r"""):|\bapi_key\b""")


class Block(NamedTuple):
    """One ```python block of a document."""

    path: Path
    line: int
    source: str

    @property
    def id(self) -> str:
        """The block's place, e.g. ``docs/tools.md:7``."""
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def extract_blocks(path: Path) -> list[Block]:
    """Every ```python block of a Markdown file, with the line of its fence."""
    text = path.read_text(encoding="utf-8")
    return [
        Block(path, text.count("\n", 0, match.start()) + 1, match.group(1))
        for match in _FENCE.finditer(text)
    ]


def _bound_and_read(tree: ast.AST) -> tuple[set[str], set[str]]:
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def is_runnable(block: Block) -> bool:
    """Whether the module docstring's rule includes the block."""
    if _NEEDS_PROVIDER.search(block.source):
        return False
    try:
        tree = ast.parse(block.source)
        compile(tree, block.id, "exec")
    except SyntaxError:
        return False
    bound, read = _bound_and_read(tree)
    return read <= bound | set(dir(builtins))


ALL_BLOCKS = [block for path in DOC_FILES for block in extract_blocks(path)]
RUNNABLE = [block for block in ALL_BLOCKS if is_runnable(block)]


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.id for block in RUNNABLE])
def test_doc_block_runs(block: Block) -> None:
    """A self-contained doc example runs without an exception or a warning."""
    code = compile(block.source, block.id, "exec")
    # A real module, so dataclasses and string annotations can resolve names.
    module = types.ModuleType("_doc_" + re.sub(r"\W", "_", block.id))
    sys.modules[module.__name__] = module
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec(code, module.__dict__)
    finally:
        del sys.modules[module.__name__]


def test_rule_keeps_the_known_examples() -> None:
    """The rule still selects the examples known to be self-contained."""
    ids = {block.id for block in RUNNABLE}
    expected = {
        "docs/arguments.md:9",
        "docs/schema-dialects.md:8",
        "docs/state-and-reducers.md:25",
        "docs/testing.md:15",
        "docs/testing.md:68",
        "docs/tools.md:7",
    }
    assert expected <= ids
    assert all(block.path.is_file() for block in ALL_BLOCKS)


def test_rule_excludes_provider_and_fragment_blocks() -> None:
    """Blocks needing a key or continuing an earlier block are not run."""
    fragment = Block(ROOT / "README.md", 1, "search.validate_arguments({})\n")
    keyed = Block(ROOT / "README.md", 1, 'import toolfold\ntoolfold.model("groq:x")\n')
    awaiting = Block(ROOT / "README.md", 1, "import asyncio\nawait asyncio.sleep(0)\n")
    plain = Block(ROOT / "README.md", 1, "import json\nprint(json.dumps(1))\n")
    assert [is_runnable(b) for b in (fragment, keyed, awaiting, plain)] == [
        False,
        False,
        False,
        True,
    ]
