"""Agent files whose import paths, YAML keys, step names or nesting are at the edges."""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfold import AgentFileError, UsageError, WorkflowDefinitionError
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


def _chain(levels: int) -> str:
    """A file of ``levels`` agents, each using the next as a tool."""
    parts = ['entry = "a0"\n']
    for i in range(levels):
        parts.append(f'[agents.a{i}]\nmodel = "openai:gpt-4o-mini"\n')
        if i < levels - 1:
            parts.append(f'tools = [{{agent = "a{i + 1}", description = "next"}}]\n')
    return "".join(parts)


def test_a_deep_chain_loads_and_runs_and_past_the_stack_is_a_problem_naming_the_spec() -> None:
    """Chains of 101 and 300 agents, each the next's tool, load (no blanket depth limit) and
    60 levels run; 1200 nested workflows are one problem naming where loading ran out of
    stack (no RecursionError)."""
    from toolfold.testing import FunctionModel

    def next_level(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return f"{last.tool_results[0].content}+"
        if not request.tools:
            return "bottom"
        return FunctionModel.call(request.tools[0].name, {"input": "go on"})

    with override_models(FunctionModel(next_level, keep_requests=False)):
        assert [len(loads(_chain(n)).agents) for n in (101, 300)] == [101, 300]
        assert loads(_chain(60)).get().run("hi").text == "bottom" + "+" * 59
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(_nested(1200))
    (problem,) = caught.value.problems
    assert ": nests too deep to load (" in problem
    assert problem.partition(": workflows.w")[2].partition(":")[0].isdigit()
    assert f"recursion limit of {sys.getrecursionlimit()} frames" in problem


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


def test_a_namespace_package_module_from_another_folder_is_refused(
    tmp_path: Path, forgets: list[str]
) -> None:
    """``nsp_tools/mod.py`` (no ``__init__.py``) in two folders: the second file is refused,
    not handed the first folder's module."""
    forgets.extend(["nsp_tools", "nsp_tools.mod"])
    for name in ("A", "B"):
        (tmp_path / name / "nsp_tools").mkdir(parents=True)
        (tmp_path / name / "nsp_tools" / "mod.py").write_text(TOOL.format(where=name))
        (tmp_path / name / "f.toml").write_text(FILE.format(module="nsp_tools.mod"))
    with override_models(TestModel()):
        assert load(tmp_path / "A" / "f.toml").agent().tools[0].function("x") == "A"
        with pytest.raises(AgentFileError) as caught:
            load(tmp_path / "B" / "f.toml")
    (problem,) = caught.value.problems
    assert "cannot import 'nsp_tools.mod:which'" in problem
    assert f"already imported from {tmp_path / 'A' / 'nsp_tools' / 'mod.py'}" in problem
    assert f"not from {tmp_path / 'B' / 'nsp_tools' / 'mod.py'} in the file's folder" in problem


def test_a_package_the_program_imported_is_used_though_the_folder_has_its_source(
    tmp_path: Path, forgets: list[str]
) -> None:
    """An installed package the program imported, whose source the file's folder also holds
    (a checkout), is used as imported, as before: no clash with another agent file."""
    import importlib

    forgets.append("inst_proj")
    for where in ("site", "app"):
        (tmp_path / where / "inst_proj").mkdir(parents=True)
        (tmp_path / where / "inst_proj" / "__init__.py").write_text(TOOL.format(where=where))
    (tmp_path / "app" / "f.toml").write_text(FILE.format(module="inst_proj"))
    sys.path.append(str(tmp_path / "site"))
    importlib.import_module("inst_proj")
    with override_models(TestModel()):
        assert load(tmp_path / "app" / "f.toml").agent().tools[0].function("x") == "site"


_FRENCH = 'entry = "a"\n[agents.a]\nmodel = "openai:gpt-4o-mini"\ninstructions = "Réponds"\n'


def test_a_file_that_is_not_utf8_is_an_agent_file_error_naming_the_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cp1252 file (Notepad's "ANSI") is one AgentFileError naming the file, the line and
    the byte's offset, and `toolfold check` says so (exit 1), not a UnicodeDecodeError."""
    from toolfold._cli import main

    path = tmp_path / "ansi.toml"
    path.write_bytes(_FRENCH.encode("cp1252"))
    with pytest.raises(AgentFileError) as info:
        load(path)
    assert info.value.problems == (
        f"{path}:4: not UTF-8: byte 0xe9 at offset 69 (saved in another encoding, such as "
        "Windows' cp1252?): save it as UTF-8",
    )
    assert main(["check", str(path)]) == 1
    assert "not UTF-8: byte 0xe9" in capsys.readouterr().err


@pytest.mark.parametrize(("encoding", "named"), [("utf-16", "UTF-16"), ("utf-32", "UTF-32")])
def test_a_utf16_or_utf32_file_is_named_as_such(tmp_path: Path, encoding: str, named: str) -> None:
    """A file saved as UTF-16 (PowerShell 5's ``>``) or UTF-32 is said to be one, as ``toolfold
    view`` and ``resume`` say of a run file (`decoded_file`): it was guessed to be cp1252."""
    path = tmp_path / "wide.toml"
    path.write_bytes(_FRENCH.encode(encoding))
    with pytest.raises(AgentFileError) as info:
        load(path)
    how = " (PowerShell 5's > writes it)" if named == "UTF-16" else ""
    assert info.value.problems == (
        f"{path}: not UTF-8 but {named}{how}: save it as UTF-8 (PowerShell: ... | Out-File "
        "-Encoding utf8 FILE, or Set-Content -Encoding utf8)",
    )


def test_a_yaml_name_that_is_not_text_beside_a_bad_reference_is_no_traceback() -> None:
    """A YAML agent named ``1:`` (a problem of its own) in a file with a bad reference lists
    the defined names without it: it was a TypeError (the near-miss and Unicode checks took
    every name for text)."""
    text = (
        "entry: lead\nagents:\n  1:\n    model: openai:gpt-4o-mini\n  lead:\n"
        "    model: openai:gpt-4o-mini\n    handoffs: [x]\n"
    )
    with pytest.raises(AgentFileError) as info:
        loads(text, format="yaml", name="f.yaml")
    assert (
        "f.yaml:7: agents.lead.handoffs[0]: refers to agent 'x', which the file does not "
        "define (defined: lead)"
    ) in info.value.problems


@pytest.mark.parametrize("suffix", [".toml", ".yaml"])
def test_a_utf8_file_with_a_bom_loads(tmp_path: Path, suffix: str) -> None:
    """A UTF-8 file starting with a byte order mark (Notepad's "UTF-8 with BOM") loads, TOML
    as YAML (TOML said "not TOML: Invalid statement" at line 1)."""
    path = tmp_path / f"bom{suffix}"
    text = _FRENCH if suffix == ".toml" else "agents:\n  a:\n    model: openai:gpt-4o-mini\n"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    with override_models(TestModel()):
        assert load(path).entry == "a"


def _laughs(depth: int, indent: str = "") -> str:
    """A "billion laughs" of YAML: each list holds the one before nine times, by alias."""
    lines = [f'{indent}x0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, depth):
        lines.append(f"{indent}x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


AGENT = "agents:\n  a:\n    model: openai:gpt-4o-mini\n"


def test_a_yaml_file_of_nested_aliases_is_walked_once_per_node() -> None:
    """Finding the lines of a file whose aliases expand to 9**5 items notes each key path
    once per node written (an alias's path, not every path under it): linear in the file."""
    from toolfold.files._load import _Lines, _parse

    text = _laughs(5) + AGENT
    lines = _Lines("f.yaml", text, "yaml")
    _parse(text, "yaml", lines)
    assert len(lines._known) < 100  # 5 keys, 45 items, agents.a.model (was 9**5 and more)
    assert lines.line("x4[3][2][1]") == 2  # (a list through aliases: where x1 is written)
    assert lines.line("x4[3][2][1][0][4]") == 1


@pytest.mark.parametrize("where", ["top", "settings"])
def test_a_billion_laughs_yaml_file_is_one_problem_naming_the_alias(where: str) -> None:
    """A 10-level billion-laughs file (9**10 items expanded), at the top or in an agent's
    settings (which building the agent would copy whole), is refused at once, naming its
    largest alias: what aliases add to a file is limited."""
    if where == "top":
        text, path, line = _laughs(10) + AGENT, "x9[0]", 10
    else:
        text = AGENT + "    settings:\n      extra_body:\n" + _laughs(10, " " * 8)
        path, line = "agents.a.settings.extra_body.x9[0]", 15
    part = "x9" if where == "top" else "agents.a"
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith(
        f"f.yaml:{line}: {path}: the alias *a8 stands for 435,848,050 values, and the aliases "
        f"in {part} make "
    )
    assert (
        "written there: more than the 100,000 aliases may add to one agent, workflow or "
        'top-level key (a YAML "billion laughs"?): building the file copies what each alias '
        "stands for; write the values out instead"
    ) in problem


def _shared_base(agents: int, values: int) -> str:
    """``agents`` agents merging (``<<: *base``) one base agent of ``values`` values."""
    body = "".join(f"        k{i}: v{i}\n" for i in range(values - 6))
    base = (
        "agents:\n  base: &base\n    model: openai:gpt-4o-mini\n    instructions: Be brief.\n"
        "    settings:\n      temperature: 0.2\n      extra_body:\n" + body
    )
    return base + "".join(
        f"  a{i}:\n    <<: *base\n    instructions: Agent {i}.\n" for i in range(agents)
    )


def test_many_agents_merging_one_base_load() -> None:
    """300 agents merging a 400-value base (120,000 values copied as the agents are built:
    each its own) load: what one agent's aliases add is small (was refused as a "billion
    laughs": the cap was on the file's expansion, at 100,000)."""
    with override_models(TestModel()):
        loaded = loads(_shared_base(300, 400), format="yaml")
    assert len(loaded.agents) == 301
    assert loaded.agent("a299").instructions == "Agent 299."
    assert loaded.agent("a299").settings["extra_body"]["k393"] == "v393"


def test_nested_aliases_in_one_agent_are_refused_under_the_files_cap() -> None:
    """An agent whose settings nest aliases to 9**6 values (531,441: each request would send
    them) is refused, though the file's aliases add less than the file's cap."""
    text = AGENT + "    settings:\n      extra_body:\n" + _laughs(6, " " * 8)
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith(
        "f.yaml:11: agents.a.settings.extra_body.x5[0]: the alias *a4 stands for 66,430 values, "
        "and the aliases in agents.a make 672,607 values of the 19 written there: more than the "
    )


def test_a_base_shared_by_too_many_agents_is_refused() -> None:
    """Agents each adding less than an agent's cap by one alias (74,736 values), but over
    1,000,000 together (each agent built copies them), are refused, naming the file's cap."""
    text = (
        "agents:\n  base: &base\n    model: openai:gpt-4o-mini\n    settings:\n"
        "      extra_body:\n" + _laughs(5, " " * 8)
    )
    text += "".join(f"  a{i}: *base\n" for i in range(20))
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("f.yaml:11: agents.a0: the alias *base stands for 74,736 values, ")
    assert "more than the 1,000,000 aliases may add to an agent file (a base shared" in problem


def test_nested_yaml_merges_are_refused_before_pyyaml_makes_the_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Merges of merges (``<<: [*m0, *m0, ...]``, 9**8 pairs) are refused before PyYAML
    builds the data: a PyYAML before 6.0.3 (``pyyaml>=6`` allows it) copies every merged
    pair, which would take minutes (stood in for by a merge that refuses to copy them)."""
    import yaml

    def old_merge(self: Any, node: Any) -> None:
        raise AssertionError("PyYAML was given the file to build")

    monkeypatch.setattr(yaml.constructor.SafeConstructor, "flatten_mapping", old_merge)
    lines = ["    m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9}"]
    for i in range(1, 9):
        lines.append(f"    m{i}: &m{i}\n      <<: [" + ", ".join([f"*m{i - 1}"] * 9) + "]")
    text = AGENT + "    settings:\n" + "\n".join(lines) + "\n"
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert "the aliases in agents.a make " in problem


def test_yaml_aliases_that_repeat_a_little_still_load() -> None:
    """An agent given again by an alias, and 9**4 values by nested aliases, still load."""
    text = (
        "agents:\n  a: &same\n    model: openai:gpt-4o-mini\n    instructions: Be brief.\n"
        "    settings:\n      extra_body:\n" + _laughs(4, " " * 8) + "  b: *same\n"
    )
    with override_models(TestModel()):
        loaded = loads(text, format="yaml")
    assert loaded.agent("b").instructions == "Be brief."
    assert len(loaded.agent("b").settings["extra_body"]["x3"]) == 9


def test_a_key_under_a_yaml_alias_is_at_the_line_of_the_one_the_alias_names() -> None:
    """A problem under an aliased agent is said at the line of the key in the anchored one."""
    text = "base: &base\n  model: test\n  tools: [1]\nagents:\n  a: *base\n"
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    assert any(p.startswith("f.yaml:3: agents.a.tools[0]: ") for p in caught.value.problems)


def test_a_key_missing_under_a_yaml_alias_is_at_the_aliass_line() -> None:
    """A key not written under an alias (a missing required key, a settings key the
    anchored node lacks) is said at the alias's line, not at the anchor's."""
    from toolfold.files._load import _Lines, _parse

    text = (
        "agents:\n  c: &c\n    instructions: hi\n    settings: &s\n      temperature: 0.5\n"
        "  d: *c\n  e:\n    model: x\n    settings: *s\n"
    )
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    assert caught.value.problems[:2] == (
        "f.yaml:2: agents.c.model: missing (this key is required)",
        "f.yaml:6: agents.d.model: missing (this key is required)",
    )
    lines = _Lines("f.yaml", text, "yaml")
    _parse(text, "yaml", lines)
    assert lines.line("agents.e.settings.missing") == 9  # (the alias *s's key)
    assert lines.line("agents.e.settings.temperature") == 5  # written: under the anchor
    assert lines.line("agents.d.settings.temperature.x") == 5


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "x: &x [*x]\n",
            "f.yaml:1: x[0]: the alias *x is inside the node it names (&x at line 1): "
            "the value would contain itself; repeat the value instead of the alias",
        ),
        (
            "agents:\n  a: &me\n    model: test\n    tools:\n      - *me\n",
            "f.yaml:5: agents.a.tools[0]: the alias *me is inside the node it names "
            "(&me at line 2): the value would contain itself; repeat the value instead "
            "of the alias",
        ),
    ],
)
def test_a_yaml_alias_inside_the_node_it_names_is_a_problem_naming_it(
    text: str, problem: str
) -> None:
    """An alias loop (data that contains itself) is one problem naming the alias and its
    line, not a RecursionError."""
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    assert caught.value.problems == (problem,)


def test_a_yaml_file_with_a_control_character_is_one_problem_naming_its_line(
    tmp_path: Path,
) -> None:
    """A character YAML refuses (a control one) is an AgentFileError at its line, not a bare ReaderError."""
    path = tmp_path / "f.yaml"
    path.write_text("agents:\n  a:\n    model: test\n    instructions: bell \x07 here\n")
    with pytest.raises(AgentFileError) as caught:
        load(path)
    assert f"{path}:4: not YAML: special characters are not allowed (character \\x07)" in str(
        caught.value
    )


def _alias_items(levels: int, indent: str = "") -> list[str]:
    """Items of a list of ``levels`` lists, each of 9 aliases to the one before (9**levels)."""
    items = [f"{indent}- &l0 [a, a, a, a, a, a, a, a, a]"]
    for i in range(1, levels):
        items.append(f"{indent}- &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return items


@pytest.mark.parametrize(
    ("text", "line"),
    [
        # the key written out: nested aliases inside a "? " key
        (AGENT + "?\n" + "\n".join(_alias_items(10, "  ")) + "\n: 1\n", 5),
        # the key an alias to nested aliases written as a value
        ("defs:\n" + "\n".join(_alias_items(10, "  ")) + "\nagents:\n  ? *l9\n  : 1\n", 13),
    ],
)
def test_a_yaml_list_as_a_key_is_refused_without_reading_what_its_aliases_expand_to(
    text: str, line: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list as a mapping key (nested aliases under it: 9**10 items) is one "unhashable
    key" problem at its line, its nodes never written out (was: their repr, exponential)."""
    import yaml

    def written(self: Any) -> str:
        raise AssertionError("a YAML node was written out")

    monkeypatch.setattr(yaml.Node, "__repr__", written)
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    assert caught.value.problems == (
        f"f.yaml:{line}: not YAML: while constructing a mapping found unhashable key "
        "(a list or table as a key)",
    )


def test_a_yaml_file_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The data of a YAML file is built from the nodes its alias check composed: the file
    is composed once (was twice: yaml.safe_load parsed it again, as long as the first)."""
    import yaml

    composed: list[int] = []
    compose = yaml.composer.Composer.compose_document

    def counted(self: Any) -> Any:
        composed.append(1)
        return compose(self)

    monkeypatch.setattr(yaml.composer.Composer, "compose_document", counted)
    text = AGENT + "    settings: &s {temperature: 0.5}\n  b:\n    <<: *a\n    settings: *s\n"
    text = text.replace("  a:\n", "  a: &a\n")
    with override_models(TestModel()):
        loaded = loads(text, format="yaml", name="f.yaml")
    assert loaded.agent("b").settings == {"temperature": 0.5}
    assert len(composed) == 1


@pytest.mark.parametrize(
    "value", ["!!python/name:os.system x", "!!python/object/apply:os.system [echo]"]
)
def test_a_yaml_python_tag_is_not_built(value: str) -> None:
    """A python/ tag (which PyYAML's unsafe loaders build into objects or calls) is refused
    at its line: the data is built by the safe constructor."""
    text = AGENT + f"    settings: {{t: {value}}}\n"
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("f.yaml:4: not YAML: could not determine a constructor for the tag")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("!!int abc", "cannot read this value as !!int"),
        ("!!float x", "cannot read this value as !!float"),
        ("!!bool maybe", "cannot read this value as !!bool"),
        ("!!timestamp soon", "cannot read this value as !!timestamp"),
        ("!!float " + "x" * 100_000, "cannot read this value as !!float"),
    ],
)
def test_a_yaml_value_its_tag_cannot_read_is_a_problem_at_its_line(
    value: str, problem: str
) -> None:
    """A scalar its tag cannot read (``!!int abc``) is an AgentFileError at its line naming
    the tag, not the value (was: the reading function's raw ValueError, KeyError...; then
    its text, 100,000 characters for a long ``!!float``)."""
    text = AGENT + f"    settings:\n      temperature: 0.5\n      t: {value}\n"
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    assert caught.value.problems == (f"f.yaml:6: not YAML: {problem}",)


@pytest.mark.parametrize("tag", ["!!int", "!!float", "!!timestamp"])
def test_a_tagged_mcp_env_value_its_tag_cannot_read_is_not_shown(tag: str) -> None:
    """An MCP server's ``env`` value its tag cannot read is a problem naming the tag only: the
    value (a token) was shown, twice with the reading function's error."""
    text = (
        AGENT
        + f"    mcp:\n      - command: srv\n        env: {{API_TOKEN: {tag} sk-live-51Habc}}\n"
    )
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    assert caught.value.problems == (f"f.yaml:6: not YAML: cannot read this value as {tag}",)
    assert "51H" not in str(caught.value)


def _long_text_aliased(agents: int, aliases: int) -> str:
    """A 100,000-character text (base's instructions, ``&s``) aliased ``aliases`` times in the
    settings of each of ``agents`` agents."""
    text = AGENT.replace("  a:", "  base:") + "    instructions: &s " + "x" * 100_000 + "\n"
    for i in range(agents):
        text += f"  a{i}:\n    model: openai:gpt-4o-mini\n    settings:\n      extra_body:\n"
        text += "        k: [" + ", ".join(["*s"] * aliases) + "]\n"
    return text


def test_a_long_yaml_text_aliased_many_times_in_one_agent_is_refused() -> None:
    """A 100,000-character text aliased 150 times in one agent's settings (15 MB its
    settings would copy and send: 150 values) is refused at the alias, counting characters
    (was loaded: a scalar counted one value, and 20,000 aliases ran out of memory)."""
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(_long_text_aliased(1, 150), format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith(
        "f.yaml:9: agents.a0.settings.extra_body.k[0]: the alias *s stands for 100,000 "
        "characters, and the aliases in agents.a0 make 15,000,042 characters of the 42 written "
        "there: more than the 10,000,000 aliases may add to one agent, workflow or top-level "
        "key: building the file copies"
    )


def test_a_long_yaml_text_aliased_in_many_agents_is_refused_under_the_files_cap() -> None:
    """Six agents each adding 9,900,000 characters by aliases (under an agent's cap), 59 MB
    together, are refused naming the file's cap; five (49.5 MB) load."""
    with override_models(TestModel()):
        loaded = loads(_long_text_aliased(5, 99), format="yaml", name="f.yaml")
    assert len(loaded.agent("a4").settings["extra_body"]["k"]) == 99
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(_long_text_aliased(6, 99), format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("f.yaml:9: agents.a0.settings.extra_body.k[0]: the alias *s ")
    assert "more than the 50,000,000 aliases may add to an agent file (a text shared" in problem


def test_a_long_yaml_text_aliased_as_many_keys_is_refused() -> None:
    """A 100,000-character text aliased as the key of 150 tables in one agent's settings
    (15 MB its settings would copy) is refused at the first alias: a key an alias stands
    for is not counted as written at each use."""
    text = _long_text_aliased(0, 0) + "  a0:\n    model: openai:gpt-4o-mini\n    settings:\n"
    text += "      extra_body:\n        k: [" + ", ".join(["{*s : 1}"] * 150) + "]\n"
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith(
        "f.yaml:9: agents.a0.settings.extra_body.k[0]." + _named("x" * 100_000) + ": the alias *s "
    ), problem[:100]
    assert (
        "the alias *s stands for 100,000 characters, and the aliases in agents.a0 make " in problem
    )
    assert len(problem) < 500  # (the key shown by its first 40 characters, not 100,000)


def _named(key: str) -> str:
    """How problems and key paths name a key longer than 40 characters: its first 40, "…",
    and 6 hex digits of the CRC-32 of its UTF-8 text."""
    return f"{key[:40]}…{zlib.crc32(key.encode()) & 0xFFFFFF:06x}"


def _key_paths(text: str) -> Any:
    """The `_Lines` of the YAML ``text`` once its key paths are noted."""
    from toolfold.files._load import _Lines, _parse

    lines = _Lines("f.yaml", text, "yaml")
    _parse(text, "yaml", lines)
    return lines


@pytest.mark.parametrize("how", ["aliased", "written", "nested"])
def test_a_long_yaml_key_is_shortened_in_the_key_paths_noted(how: str) -> None:
    """A 10,000-character key (aliased as the key of 300 tables, written once over a list of
    300 items, or aliased as 30 nested keys) is noted in paths by its first 40 characters:
    paths copied its whole text (a 300 KB file took 2 GB)."""
    long = "k" * 10_000
    text = AGENT + "    settings:\n      extra_body:\n"
    if how == "aliased":
        text += f"        a: &s {long}\n        b: [" + ", ".join(["{*s : 1}"] * 300) + "]\n"
    elif how == "written":
        text += f"        ? {long}\n        : [" + ", ".join(["1"] * 300) + "]\n"
    else:
        text += f"        a: &s {long}\n        b: " + "{*s : " * 30 + "1" + "}" * 30 + "\n"
    lines = _key_paths(text)
    assert max(len(path) for path in lines._known) < 2_000
    shown = _named(long)
    under = "agents.a.settings.extra_body"
    if how == "aliased":
        assert lines._known[f"{under}.b[299].{shown}"] == 6
    elif how == "written":
        assert lines._known[f"{under}.{shown}[299]"] == 7
        # (a problem's path with the whole key is found at its line too)
        assert lines.line(f"{under}.{long}[299]") == 7
    else:
        assert lines._known[f"{under}.b" + f".{shown}" * 5] == 6


def test_long_yaml_keys_alike_in_their_first_characters_are_not_given_twice() -> None:
    """Two keys of one table that differ after their first 40 characters (shown alike in
    paths) are two keys, not one given twice."""
    text = AGENT + "    settings:\n      extra_body:\n"
    text += f"        {'k' * 50}1: 1\n        {'k' * 50}2: 2\n"
    with override_models(TestModel()):
        loaded = loads(text, format="yaml", name="f.yaml")
    assert len(loaded.agent("a").settings["extra_body"]) == 2


def test_an_anchored_value_aliased_as_a_key_of_its_table_names_the_alias() -> None:
    """In ``{a: &s TEXT, *s : 1}`` (TEXT aliased too often) the problem names the alias, the
    key, not the anchored value ``a``."""
    text = AGENT.replace("  a:", "  a0:") + "    settings:\n      extra_body:\n"
    text += f"        k: [{{a: &s {'x' * 100_000}, *s : 1}}, " + ", ".join(["{*s : 1}"] * 150)
    text += "]\n"
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith(
        "f.yaml:6: agents.a0.settings.extra_body.k[0]." + _named("x" * 100_000) + ": the alias *s "
    ), problem[:120]


def test_key_paths_noted_for_a_deeply_nested_yaml_list_stay_short() -> None:
    """A list of 1,000 items under 30 nested 40-character keys notes no path past 500
    characters (each item noted its own 1,240-character path: a 53 KB file took 280 MB);
    a problem deeper down is at the line of the last key noted."""
    key = "k" * 40
    text = "a:\n" + "".join(f"{'  ' * (i + 1)}{key}:\n" for i in range(30))
    text += "  " * 31 + "- [" + ", ".join(["1"] * 1_000) + "]\n"
    lines = _key_paths(text)
    assert max(len(path) for path in lines._known) < 600
    assert sum(len(path) for path in lines._known) < 20_000
    deep = "a" + f".{key}" * 30 + "[0][999]"
    assert lines.line(deep) == 14  # (the 13th key, at line 14, makes the path 534 long)
    assert lines.line("a" + f".{key}" * 3) == 4


@pytest.mark.parametrize("how", ["flow", "block"])
def test_yaml_nested_deeper_than_pyyaml_reads_is_one_problem(how: str) -> None:
    """Tables nested 2,000 deep (10 KB) are an AgentFileError saying so: PyYAML's reader ran
    out of stack, and loads raised the raw RecursionError."""
    if how == "flow":
        text = "a: " + "{k: " * 2_000 + "1" + "}" * 2_000 + "\n"
    else:
        text = "a:\n" + "".join(f"{' ' * (i + 1)}k:\n" for i in range(2_000)) + " " * 2_001 + "1\n"
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    assert caught.value.problems == (
        "f.yaml: not YAML: lists and tables nested too deep to read "
        "(past Python's recursion limit)",
    )


@pytest.mark.parametrize("how", ["table", "array"])
def test_toml_nested_deeper_than_tomllib_reads_is_one_problem(how: str) -> None:
    """Inline tables (or arrays) nested 2,000 deep are an AgentFileError saying so: tomllib
    ran out of stack, and loads raised the raw RecursionError."""
    if how == "table":
        text = "a = " + "{k = " * 2_000 + "1" + "}" * 2_000 + "\n"
    else:
        text = "a = " + "[" * 2_000 + "1" + "]" * 2_000 + "\n"
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="toml", name="f.toml")
    assert caught.value.problems == (
        "f.toml: not TOML: arrays and inline tables nested too deep to read "
        "(past Python's recursion limit)",
    )


@pytest.mark.parametrize("where", ["agent", "tool"])
def test_an_unknown_long_yaml_key_is_named_by_its_first_40_characters(where: str) -> None:
    """An unknown 100,000-character key of an agent (or of an agent-as-tool entry) is named
    in its path and message by its first 40 characters, at its line: the problem held it
    whole, twice (200 KB)."""
    key = "k" * 100_000
    if where == "agent":
        text = AGENT + f"    ? {key}\n    : 1\n"
        path = "agents.a."
    else:
        text = AGENT + f"    tools: [{{agent: b, ? {key} : 1}}]\n"
        path = "agents.a.tools[0]."
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    shown = _named(key)
    assert problem.startswith(f"f.yaml:4: {path}{shown}: unknown key '{shown}'"), problem[:200]
    assert len(problem) < 1_000


def test_two_long_yaml_keys_sharing_their_first_40_characters_are_named_apart() -> None:
    """Two agents whose names share their first 40 characters are named apart in problems,
    each at its own line: both were "x…" and a problem of the first was at the second's."""
    prefix = "x" * 40
    first, second = prefix + "A", prefix + "B"
    text = (
        f"agents:\n  {first}:\n    model: openai:gpt-4o-mini\n    max_steps: notint\n"
        f"  {second}:\n    model: openai:gpt-4o-mini\n"
    )
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    assert caught.value.problems == (
        f"f.yaml:4: agents.{_named(first)}.max_steps: expected an integer, got a string 'notint'",
    )
    assert _named(first) != _named(second)


def test_two_unknown_long_yaml_keys_sharing_their_first_40_characters_are_two_problems() -> None:
    """Two unknown keys sharing their first 40 characters are each named at its own line (both
    were at the second's, under one name)."""
    prefix = "x" * 40
    text = AGENT + f"    {prefix}A: 1\n    {prefix}B: 2\n"
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    problems = caught.value.problems
    assert [problem.split(" unknown key")[0] for problem in problems] == [
        f"f.yaml:4: agents.a.{_named(prefix + 'A')}:",
        f"f.yaml:5: agents.a.{_named(prefix + 'B')}:",
    ]


def test_a_long_toml_key_keeps_the_line_of_its_problem() -> None:
    """A TOML agent whose name is 50 characters long has the problem of its bad value at its
    line, and an unknown 50-character key is at its line: both lost their line (or had line 1),
    as the TOML key paths kept the whole key and problems the shortened one."""
    name = "n" * 50
    text = f'entry = "{name}"\n\n[agents.{name}]\nmodel = "openai:gpt-4o-mini"\n\nmax_steps = "x"\n'
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(text, format="toml", name="f.toml")
    assert caught.value.problems == (
        f"f.toml:6: agents.{_named(name)}.max_steps: expected an integer, got a string 'x'",
    )
    text = '[agents.a]\nmodel = "openai:gpt-4o-mini"\n\n\n' + name + " = 1\n"
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(text, format="toml", name="f.toml")
    (problem,) = caught.value.problems
    assert problem.startswith(f"f.toml:5: agents.a.{_named(name)}: unknown key"), problem


def test_the_names_a_bad_reference_lists_are_shortened() -> None:
    """A handoff to an agent the file does not define lists the defined ones with a
    100,000-character name shortened: the problem held the name whole."""
    name = "y" * 100_000
    text = f"agents:\n  ? {name}\n  : model: openai:gpt-4o-mini\n    handoffs: [nope]\n"
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.endswith(f"which the file does not define (defined: {_named(name)})")


def test_a_name_written_in_another_unicode_normalization_is_said_to_be_one() -> None:
    """A reference, the entry and ``get`` naming an agent ``café`` written with a combining
    accent (NFD) where the file defines it as one character (NFC) say they differ only in
    normalization: they said the file does not define it, listing a name that looks the same."""
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    text = (
        f'entry = "{nfd}"\n[agents."{nfc}"]\nmodel = "openai:gpt-4o-mini"\n'
        f'handoffs = ["{nfd}"]\n[agents.other]\nmodel = "openai:gpt-4o-mini"\n'
        f'tools = [{{ agent = "{nfd}" }}]\n'
        f'[workflows.w]\nkind = "sequence"\nsteps = ["{nfd}"]\n'
    )
    with override_models(TestModel()), pytest.raises(AgentFileError) as caught:
        loads(text, format="toml", name="f.toml")
    said = f"which differs only in Unicode normalization from {nfc!r} (NFD here, NFC in the definition)"
    assert caught.value.problems == (
        f"f.toml:1: entry: names no agent or workflow of the file: {nfd!r}, {said}",
        f"f.toml:4: agents.{nfc}.handoffs[0]: refers to agent {nfd!r}, {said}",
        f"f.toml:7: agents.other.tools[0].agent: refers to agent {nfd!r}, {said}",
        f"f.toml:10: workflows.w.steps[0]: refers to an agent or workflow {nfd!r}, {said}",
    )
    with override_models(TestModel()):
        loaded = loads(f'[agents."{nfc}"]\nmodel = "openai:gpt-4o-mini"\n', name="f.toml")
    for look_up in (loaded.get, loaded.agent):
        with pytest.raises(UsageError) as refused:
            look_up(nfd)
        assert str(refused.value).endswith(f"; {nfd!r} {said.removeprefix('which ')}")


def test_an_untagged_yaml_int_of_too_many_digits_says_why() -> None:
    """An untagged 5,000-digit number is a problem at its line saying Python's limit of int
    digits, never the value (it said only "cannot read this value as !!int")."""
    digits = "7" * 5_000
    text = AGENT + f"    settings:\n      t: {digits}\n"
    with pytest.raises(AgentFileError) as caught:
        loads(text, format="yaml", name="f.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith("f.yaml:5: not YAML: cannot read this value as !!int: Exceeds ")
    assert "sys.set_int_max_str_digits()" in problem
    assert digits[:20] not in problem


@pytest.mark.parametrize("kind", ["yaml", "toml"])
def test_a_shallow_file_read_on_a_deep_stack_is_not_blamed_for_nesting(kind: str) -> None:
    """A YAML (or TOML) file nested 8 deep, read with only 20 to 120 frames of stack left,
    raises the RecursionError as it is (or loads): it was an AgentFileError saying the
    file's lists and tables are nested too deep."""
    from toolfold.files._load import _Lines, _parse, _stack_room

    if kind == "yaml":
        text = "a:\n" + "".join(f"{'  ' * (i + 1)}k{i}:\n" for i in range(8)) + "  " * 9 + "x: 1\n"
    else:
        text = "a = " + "{k = " * 8 + "1" + "}" * 8 + "\n"
    name = f"f.{kind}"
    _parse(text, kind, _Lines(name, text, kind))  # (its parser imported first)
    limit = sys.getrecursionlimit()
    depth = limit - _stack_room()
    raised = 0
    try:
        for room in range(20, 120, 2):
            sys.setrecursionlimit(depth + room)
            try:
                _parse(text, kind, _Lines(name, text, kind))
            except RecursionError:
                raised += 1
    finally:
        sys.setrecursionlimit(limit)
    assert raised > 0  # (some were read past the limit: the RecursionError is kept)
