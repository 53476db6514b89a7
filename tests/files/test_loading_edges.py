"""Agent files whose import paths, YAML keys, step names or nesting are at the edges."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolfold import AgentFileError, WorkflowDefinitionError
from toolfold.files import load, loads
from toolfold.runtime import Sequence, Task
from toolfold.testing import TestModel, override_models

TOOL = '''
from toolfold import tool


@tool
def which(x: str) -> str:
    """Which folder this module is in.

    Args:
        x: Anything.
    """
    return {where!r}
'''

FILE = '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = ["{module}:which"]\n'


@pytest.fixture
def forgets() -> Iterator[list[str]]:
    """Module names a test imports, removed from ``sys.modules`` (and ``sys.path`` restored) after."""
    names: list[str] = []
    path = list(sys.path)
    yield names
    sys.path[:] = path
    for name in names:
        sys.modules.pop(name, None)


def _folder(root: Path, name: str, module: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / f"{module}.py").write_text(TOOL.format(where=name))
    (folder / "f.toml").write_text(FILE.format(module=module))
    return folder / "f.toml"


def test_a_module_of_the_same_name_from_another_folder_is_refused(
    tmp_path: Path, forgets: list[str]
) -> None:
    """Two files whose folders each have ``helpers.py``: the second is a problem naming both."""
    forgets.append("twin_helpers")
    first = _folder(tmp_path, "A", "twin_helpers")
    second = _folder(tmp_path, "B", "twin_helpers")
    with override_models(TestModel()):
        assert load(first).agent().tools[0].function("x") == "A"
        with pytest.raises(AgentFileError) as caught:
            load(second)
    (problem,) = caught.value.problems
    assert "agents.a.tools[0]: cannot import 'twin_helpers:which'" in problem
    assert f"already imported from {tmp_path / 'A' / 'twin_helpers.py'}" in problem
    assert f"not from {tmp_path / 'B' / 'twin_helpers.py'} in the file's folder" in problem
    with override_models(TestModel()):  # the first file's folder loads again
        assert load(first).agent().tools[0].function("x") == "A"


def test_the_files_folder_is_searched_first_even_when_on_sys_path(
    tmp_path: Path, forgets: list[str]
) -> None:
    """A folder already on ``sys.path`` (last) is still searched before the entries ahead of it."""
    forgets.append("first_helpers")
    ahead = _folder(tmp_path, "ahead", "first_helpers").parent
    mine = _folder(tmp_path, "mine", "first_helpers")
    sys.path.insert(0, str(ahead))
    sys.path.append(str(mine.parent))
    with override_models(TestModel()):
        assert load(mine).agent().tools[0].function("x") == "mine"
    assert sys.path[0] == str(ahead)
    assert sys.path[-1] == str(mine.parent)


def test_the_folder_is_on_sys_path_only_while_the_file_loads(
    tmp_path: Path, forgets: list[str]
) -> None:
    """As documented: a sibling imported at call time is not found; sys.path is as it was."""
    forgets.extend(["late_helpers", "late_sibling"])
    (tmp_path / "late_sibling.py").write_text("VALUE = 1\n")
    (tmp_path / "late_helpers.py").write_text(
        "from toolfold import tool\n\n\n@tool\ndef which(x: str) -> str:\n"
        '    """Imports a sibling when called.\n\n    Args:\n        x: Anything.\n    """\n'
        "    import late_sibling\n\n    return str(late_sibling.VALUE)\n"
    )
    (tmp_path / "f.toml").write_text(FILE.format(module="late_helpers"))
    before = list(sys.path)
    with override_models(TestModel()):
        which = load(tmp_path / "f.toml").agent().tools[0].function
    assert sys.path == before
    with pytest.raises(ModuleNotFoundError, match="late_sibling"):
        which("x")


YAML_LABELS = """
agents:
  r:
    model: openai:gpt-4o-mini
  a:
    model: openai:gpt-4o-mini
workflows:
  w:
    kind: route
    router: r
    branches:
      yes: a
      "no": a
"""

YAML_NULL = """
agents:
  ok:
    model: openai:gpt-4o-mini
  null:
    model: openai:gpt-4o-mini
"""


def test_a_yaml_label_read_as_a_boolean_says_so_at_its_line() -> None:
    """``yes:`` as a branch label: the problem is at its line, says YAML read it, and to quote it."""
    with pytest.raises(AgentFileError) as caught:
        loads(YAML_LABELS, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("f.yaml:12: workflows.w.branches.True: ")
    assert "got a boolean True" in problem
    assert "YAML reads yes, no, on, off, null, ~ and numbers as other values; quote it" in problem


def test_a_yaml_name_read_as_nothing_is_at_its_line() -> None:
    """``null:`` as an agent's name is reported at its own line, not the table's."""
    with pytest.raises(AgentFileError) as caught:
        loads(YAML_NULL, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem == "f.yaml:5: agents.None: a name is text, got nothing (quote it in YAML)"


def test_an_empty_step_name_is_said_to_be_empty() -> None:
    """``Task(agent, name="")`` and ``{step = "a", name = ""}``: the name given is empty."""
    from toolfold import Agent

    agent = Agent(TestModel(), name="a")
    with pytest.raises(WorkflowDefinitionError) as caught:
        Sequence(Task(agent, name=""))
    assert (
        "a step's name is empty (name=''): give it a name, or leave name out for the default, 'a'"
        in str(caught.value)
    )
    assert "has no name" not in str(caught.value)
    text = (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\n[workflows.w]\nkind = "sequence"\n'
        'steps = [{step = "a", name = ""}]\n'
    )
    with override_models(TestModel()), pytest.raises(AgentFileError) as loaded:
        loads(text)
    assert "a step's name is empty (name='')" in str(loaded.value)
    assert "has no name" not in str(loaded.value)


def _nested(levels: int) -> str:
    """A file of one agent inside ``levels - 1`` sequences, each inside the next."""
    parts = [f'entry = "w{levels - 2}"\n[agents.a]\nmodel = "openai:gpt-4o-mini"\n']
    for i in range(levels - 1):
        step = "a" if i == 0 else f"w{i - 1}"
        parts.append(f'[workflows.w{i}]\nkind = "sequence"\nsteps = ["{step}"]\n')
    return "".join(parts)


def test_nesting_beyond_the_documented_depth_is_a_problem_of_the_file() -> None:
    """1200 nested workflows: one problem naming the depth (no RecursionError); 100 levels load."""
    from toolfold.files._load import MAX_NESTING

    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(_nested(1200))
    (problem,) = caught.value.problems
    assert "workflows.w1198: nests 1200 levels deep" in problem
    assert f"at most {MAX_NESTING} load" in problem
    with override_models(TestModel()):
        deepest = loads(_nested(MAX_NESTING)).get()
        assert deepest.run("hi").text
    with override_models(TestModel()), pytest.raises(AgentFileError, match="nests 101 levels"):
        loads(_nested(MAX_NESTING + 1))


def test_a_folder_without_init_does_not_shadow_a_module_imported(
    tmp_path: Path, forgets: list[str]
) -> None:
    """A data folder named like an imported module (no ``__init__.py``) is no clash: Python
    imports the module found on ``sys.path`` over it, as in a script."""
    forgets.append("plain_helpers")
    first = _folder(tmp_path, "A", "plain_helpers")
    second = tmp_path / "B"
    (second / "plain_helpers").mkdir(parents=True)
    (second / "f.toml").write_text(FILE.format(module="plain_helpers"))
    with override_models(TestModel()):
        assert load(first).agent().tools[0].function("x") == "A"
        assert load(second / "f.toml").agent().tools[0].function("x") == "A"
