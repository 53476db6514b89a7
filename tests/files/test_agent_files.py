"""Agent files: TOML and YAML load into the same `Agent` specs, write back, and fail clearly."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import toolfold
from toolfold import Agent, AgentFileError, Handoff, Loop, Parallel, Route, Sequence, UsageError
from toolfold.files import AgentFile, from_dict, load, loads
from toolfold.mcp import MCPServerStdio
from toolfold.testing import TestModel, override_models

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EXAMPLES = ROOT / "examples" / "agent_files"
SEARCH = str(HERE)

FULL_TOML = """
entry = "lead"

[agents.lead]
model = "openai:gpt-4o-mini"
instructions = "Lead the work."
tools = [
  "files_helpers:add",
  "files_helpers:echo",
  { agent = "helper", name = "ask_helper", description = "Asks.", input_type = "files_helpers:Query", requires_approval = true, timeout = 5.0 },
]
handoffs = ["closer", { agent = "filtered", name = "pass_on", description = "Passes on.", input_filter = "files_helpers:users_only" }]
max_steps = 7
tool_choice = "auto"
output_retries = 2
auto_execute_tools = true
on_tool_error = "raise"
max_concurrency = 3
settings = { temperature = 0, seed = 7 }

[[agents.lead.mcp]]
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]
prefix = "time"
requires_approval = ["get_current_time"]
include = ["get_current_time"]

[[agents.lead.mcp]]
url = "http://127.0.0.1:9/mcp"
name = "remote"
timeout = 3.0

[agents.helper]
model = "files_helpers:model"
output_type = "files_helpers:Verdict"

[agents.closer]
model = "openai:gpt-4o-mini"

[agents.filtered]
model = "openai:gpt-4o-mini"
"""


def _offline(text: str, kind: str = "toml") -> AgentFile:
    with override_models(TestModel()):
        return loads(text, format=kind, search=SEARCH)


def test_every_key_loads_into_the_agent_spec() -> None:
    """Each key of a file reaches the `Agent` it builds: tools, sub-agents, MCP, handoffs, options."""
    lead = _offline(FULL_TOML).agent()
    assert lead.name == "lead"
    assert lead.model == "openai:gpt-4o-mini"
    assert (lead.max_steps, lead.tool_choice, lead.output_retries) == (7, "auto", 2)
    assert (lead.on_tool_error, lead.max_concurrency) == ("raise", 3)
    assert dict(lead.settings) == {"temperature": 0, "seed": 7}
    names = [getattr(t, "name", None) for t in lead.tools[:3]]
    assert names == ["add", "echo", "ask_helper"]
    asked = lead.tools[2]
    assert asked.requires_approval is True
    assert asked.timeout == 5.0
    assert asked.parameters["properties"]["input"]["type"] == "object"  # Query's schema
    servers = [t for t in lead.tools if isinstance(t, MCPServerStdio)]
    assert [(s.command, s.args, s.prefix) for s in servers] == [
        ("mcp-server-time", ("--local-timezone", "UTC"), "time")
    ]
    closer, passed = lead.handoffs
    assert isinstance(closer, Agent)
    assert closer.name == "closer"
    assert isinstance(passed, Handoff)
    assert (passed.name, passed.agent.name) == ("pass_on", "filtered")
    assert passed.input_filter is not None
    assert passed.input_filter.__name__ == "users_only"


def test_to_dict_round_trips() -> None:
    """``from_dict(agent.to_dict())`` builds agents that write the very same document."""
    lead = _offline(FULL_TOML).agent()
    document = lead.to_dict()
    assert document["entry"] == "lead"
    assert list(document["agents"]) == ["lead", "helper", "closer", "filtered"]
    with override_models(TestModel()):
        again = from_dict(document, search=SEARCH).agent()
    assert again.to_dict() == document
    assert document["agents"]["helper"] == {
        "model": "files_helpers:model",
        "output_type": "files_helpers:Verdict",
    }


def test_code_built_agents_write_a_file_that_loads() -> None:
    """An agent built in Python (module-level tools) writes a document that loads back equal."""
    sys.path.insert(0, SEARCH)
    try:
        import files_helpers
    finally:
        sys.path.remove(SEARCH)
    with override_models(TestModel()):
        helper = Agent(files_helpers.model, name="helper", tools=[files_helpers.echo])
        lead = Agent(
            "openai:gpt-4o-mini",
            name="lead",
            tools=[files_helpers.add, helper.as_tool(description="Asks.")],
            handoffs=[Handoff(helper, input_filter=files_helpers.users_only)],
            temperature=0.5,
        )
        document = lead.to_dict()
        assert from_dict(document).agent().to_dict() == document
    assert document["agents"]["lead"]["handoffs"] == [
        {"agent": "helper", "input_filter": "files_helpers:users_only"}
    ]


def test_a_router_with_literal_labels_writes_and_loads_as_a_list() -> None:
    """A Route's router agent with output_type Literal[...] writes its labels as a list that loads back."""
    from typing import Literal

    from toolfold.testing import FunctionModel

    with override_models(TestModel()):
        router = Agent("openai:gpt-4o-mini", name="triage", output_type=Literal["billing", "tech"])
        assert router.to_dict()["agents"]["triage"]["output_type"] == ["billing", "tech"]
    text = """
entry = "desk"

[agents.triage]
model = "openai:gpt-4o-mini"
output_type = ["billing", "tech"]

[agents.fix]
model = "openai:gpt-4o-mini"

[workflows.desk]
kind = "route"
router = "triage"
branches = { billing = "fix", tech = { step = "fix", name = "tech_fix" } }
"""
    desk = _offline(text)
    assert desk.agent("triage").output_type == Literal["billing", "tech"]
    document = desk.get().to_dict()
    assert document["agents"]["triage"]["output_type"] == ["billing", "tech"]
    with override_models(TestModel()):
        assert from_dict(document).get().to_dict() == document
    running = loads(text, model=FunctionModel(lambda r: '"tech"'))
    assert running.get().run("it crashed").outputs["triage"] == "tech"


@pytest.mark.parametrize("labels", ["[]", "[1, 2]", '["a", "a"]', '["a", ""]'])
def test_output_type_labels_must_be_distinct_text(labels: str) -> None:
    """An empty, non-text or repeated label list is a problem naming the key."""
    text = f'[agents.a]\nmodel = "openai:gpt-4o-mini"\noutput_type = {labels}\n'
    with (
        pytest.raises(
            AgentFileError, match=r"f.toml:3: agents.a.output_type: (a list|labels|a label)"
        ),
        override_models(TestModel()),
    ):
        loads(text, name="f.toml")


def test_toml_and_yaml_examples_are_the_same_agents() -> None:
    """The example's TOML and YAML files hold the same agents, which run on the demo model."""
    toml = load(EXAMPLES / "support.toml", model="support_tools:demo_model")
    yaml = load(EXAMPLES / "support.yaml", model="support_tools:demo_model")
    assert toml.agent().to_dict() == yaml.agent().to_dict()
    response = toml.agent().run("Where is order A17?")
    assert response.text == "Order status: shipped on 2 March."


def test_a_file_model_by_import_path_runs() -> None:
    """``model = "module:name"`` names a Model object; the agent runs on it."""
    text = '[agents.calc]\nmodel = "files_helpers:model"\ntools = ["files_helpers:add"]\n'
    response = loads(text, search=SEARCH).agent().run("2 + 3?")
    assert response.text == "result: 5"


def test_workflow_files_load_run_and_round_trip() -> None:
    """Every workflow kind loads from TOML and YAML alike, runs, and writes back the same."""
    toml = load(HERE / "pipeline.toml")
    yaml = load(HERE / "pipeline.yaml")
    pipeline = toml.get()
    assert isinstance(pipeline, Sequence)
    assert sorted(toml.workflows) == ["desk", "pipeline", "polish", "views"]
    assert pipeline.to_dict() == yaml.get().to_dict()
    views = toml.workflows["views"]
    assert isinstance(views, Parallel)
    assert (views.max_concurrency, [t.name for t in views.steps]) == (2, ["critic", "loud"])
    assert views.steps[1].on_error == "skip"
    desk, polish = toml.workflows["desk"], toml.workflows["polish"]
    assert isinstance(desk, Route)
    assert sorted(desk.branches) == ["long", "short"]
    assert isinstance(polish, Loop)
    assert polish.max_iterations == 4
    document = pipeline.to_dict()
    assert document["workflows"]["pipeline"]["steps"][2] == {"step": "views", "name": "both"}
    assert from_dict(document, search=SEARCH).get().to_dict() == document
    # writer "hello" -> shout -> views (critic, loud) -> desk (long: shout) -> polish (grow)
    assert pipeline.run("hi").output == "CRITIC: HELLO\nLOUD: HELLO" * 2


def test_a_lambda_in_a_workflow_cannot_be_written() -> None:
    """A workflow holding a function without an import path says so when written."""
    from toolfold import Task

    flow = Sequence(Task(lambda text: text, name="same"), name="anon")
    with pytest.raises(UsageError, match=r"workflows.anon.steps\[0\].*has no import path"):
        flow.to_dict()


def _lambda_slots() -> dict[str, tuple[Any, str]]:
    """Specs with a lambda in each place a function goes, and the key path named."""
    writer = Agent("openai:gpt-4o-mini", name="writer")
    helper = Agent("openai:gpt-4o-mini", name="helper")
    return {
        "merge": (
            Parallel(writer, helper, merge=lambda outputs: outputs, name="views"),
            r"workflows\.views\.merge: <function .*<lambda>.* has no import path",
        ),
        "until": (
            Loop(writer, until=lambda text: True, max_iterations=2, name="again"),
            r"workflows\.again\.until: <function .*<lambda>.* has no import path",
        ),
        "router": (
            Route(lambda text: "a", {"a": writer}, name="desk"),
            r"workflows\.desk\.router: <function .*<lambda>.* has no import path",
        ),
        "input_filter": (
            Agent(
                "openai:gpt-4o-mini",
                name="lead",
                handoffs=[Handoff(helper, input_filter=lambda messages: messages)],
            ),
            r"agents\.lead\.handoffs\[0\]\.input_filter: <function .*<lambda>.* has no import",
        ),
    }


@pytest.mark.parametrize("slot", ["merge", "until", "router", "input_filter"])
def test_a_function_without_an_import_path_is_named_where_it_sits(slot: str) -> None:
    """Every place a spec holds a function says which one cannot be written, and where."""
    with override_models(TestModel()):
        spec, message = _lambda_slots()[slot]
        with pytest.raises(UsageError, match=message):
            spec.to_dict()


# --- errors: every class, in TOML and in YAML ------------------------------------------

# (TOML text, YAML text, the line, the key path, words of the message)
ERRORS = {
    "unknown key": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ncolour = "red"\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    colour: red\n",
        (3, 4),
        "agents.a.colour",
        "unknown key 'colour'",
    ),
    "unknown top-level key": (
        'agent = 1\n[agents.a]\nmodel = "openai:gpt-4o-mini"\n',
        "agent: 1\nagents:\n  a: {model: 'openai:gpt-4o-mini'}\n",
        (1, 1),
        "agent",
        "unknown key",
    ),
    "wrong type": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\nmax_steps = "ten"\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    max_steps: ten\n",
        (3, 4),
        "agents.a.max_steps",
        "expected an integer, got a string 'ten'",
    ),
    "empty model": (
        '[agents.a]\nmodel = ""\n',
        "agents:\n  a:\n    model: ''\n",
        (2, 3),
        "agents.a.model",
        "expected a provider:model string or an import path, got ''",
    ),
    "missing key": (
        '[agents.a]\ninstructions = "Hi."\n',
        "agents:\n  a:\n    instructions: Hi.\n",
        (1, 2),
        "agents.a.model",
        "missing",
    ),
    "import path that does not resolve": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = ["files_helpers:add", "no_such_mod_x:f"]\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    tools:\n      - files_helpers:add\n"
        "      - no_such_mod_x:f\n",
        (3, 6),
        "agents.a.tools[1]",
        "ModuleNotFoundError: No module named 'no_such_mod_x'",
    ),
    "missing attribute": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = ["files_helpers:nope"]\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    tools: [files_helpers:nope]\n",
        (3, 4),
        "agents.a.tools[0]",
        "has no attribute 'nope'",
    ),
    "not a tool": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = ["files_helpers:NOT_A_TOOL"]\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    tools: [files_helpers:NOT_A_TOOL]\n",
        (3, 4),
        "agents.a.tools[0]",
        "is not a tool: 42",
    ),
    "a function @tool refuses": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = ["files_helpers:untyped"]\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    tools: [files_helpers:untyped]\n",
        (3, 4),
        "agents.a.tools[0]",
        "parameter 'x' has no type annotation",
    ),
    "undefined agent": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\nhandoffs = ["ghost"]\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    handoffs: [ghost]\n",
        (3, 4),
        "agents.a.handoffs[0]",
        "refers to agent 'ghost', which the file does not define",
    ),
    "cycle": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = [{ agent = "b" }]\n\n'
        '[agents.b]\nmodel = "openai:gpt-4o-mini"\ntools = [{ agent = "a" }]\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    tools: [{agent: b}]\n"
        "  b:\n    model: openai:gpt-4o-mini\n    tools: [{agent: a}]\n",
        (1, 2),
        "agents.a",
        "cycle in definitions: a -> b -> a",
    ),
    "an agent that cannot be built": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = ["files_helpers:Shelf.lookup"]\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    tools: ['files_helpers:Shelf.lookup']\n",
        (1, 2),
        "agents.a",
        "cannot build the agent",
    ),
    "a tool_choice naming no tool": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntool_choice = "nope"\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    tool_choice: nope\n",
        (3, 4),
        "agents.a.tool_choice",
        "'nope' is not 'auto', 'none', 'required' nor a tool of the agent",
    ),
    "unknown workflow kind": (
        '[workflows.w]\nkind = "pipeline"\nsteps = ["f:g"]\n',
        "workflows:\n  w:\n    kind: pipeline\n    steps: ['f:g']\n",
        (2, 3),
        "workflows.w.kind",
        "expected one of 'sequence', 'parallel', 'route', 'loop', got a string 'pipeline'",
    ),
    "a key of another kind of workflow": (
        '[workflows.w]\nkind = "sequence"\nsteps = ["files_helpers:shout"]\nmerge = "x:y"\n',
        "workflows:\n  w:\n    kind: sequence\n    steps: ['files_helpers:shout']\n"
        "    merge: x:y\n",
        (4, 5),
        "workflows.w.merge",
        "not a key of a sequence workflow",
    ),
    "a value a nested key does not allow": (
        '[workflows.w]\nkind = "sequence"\nsteps = [{ step = "files_helpers:shout", on_error = "never" }]\n',
        "workflows:\n  w:\n    kind: sequence\n    steps:\n"
        "      - {step: 'files_helpers:shout', on_error: never}\n",
        (3, 5),
        "workflows.w.steps[0].on_error",
        "expected one of 'fail', 'skip', 'retry', got a string 'never'",
    ),
    "a step that names nothing": (
        '[workflows.w]\nkind = "loop"\nstep = "ghost"\n',
        "workflows:\n  w:\n    kind: loop\n    step: ghost\n",
        (3, 4),
        "workflows.w.step",
        "refers to an agent or workflow 'ghost', which the file does not define",
    ),
    "a function path that is not a function": (
        '[workflows.w]\nkind = "parallel"\nsteps = ["files_helpers:shout"]\n'
        'merge = "files_helpers:NOT_A_TOOL"\n',
        "workflows:\n  w:\n    kind: parallel\n    steps: ['files_helpers:shout']\n"
        "    merge: files_helpers:NOT_A_TOOL\n",
        (4, 5),
        "workflows.w.merge",
        "is not a function: 42",
    ),
    "a workflow cycle": (
        '[workflows.a]\nkind = "sequence"\nsteps = ["b"]\n\n'
        '[workflows.b]\nkind = "loop"\nstep = "a"\n',
        "workflows:\n  a:\n    kind: sequence\n    steps: [b]\n  b:\n    kind: loop\n    step: a\n",
        (1, 2),
        "workflows.a",
        "cycle in definitions: a -> b -> a",
    ),
    "a route cycle": (
        '[workflows.a]\nkind = "sequence"\nsteps = ["b"]\n\n'
        '[workflows.b]\nkind = "route"\nrouter = "files_helpers:pick"\n'
        'branches = { x = "files_helpers:shout", y = "a" }\n',
        "workflows:\n  a:\n    kind: sequence\n    steps: [b]\n  b:\n    kind: route\n"
        "    router: files_helpers:pick\n    branches: {x: 'files_helpers:shout', y: a}\n",
        (1, 2),
        "workflows.a",
        "cycle in definitions: a -> b -> a",
    ),
    "a workflow that cannot be built": (
        '[workflows.w]\nkind = "sequence"\nsteps = [{ step = "files_helpers:shout", retries = -1 }]\n',
        "workflows:\n  w:\n    kind: sequence\n"
        "    steps: [{step: 'files_helpers:shout', retries: -1}]\n",
        (1, 2),
        "workflows.w",
        "cannot build the workflow: ",
    ),
    "a template naming no step": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ninstructions = "About {ghost}."\n\n'
        '[workflows.w]\nkind = "sequence"\nsteps = ["a"]\n',
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    instructions: About {ghost}.\n"
        "workflows:\n  w:\n    kind: sequence\n    steps: [a]\n",
        (5, 6),
        "workflows.w",
        "step 'a' refers to {ghost}, which no earlier step defines (no other workflow",
    ),
    "syntax": (
        '[agents.a]\nmodel = "openai:gpt-4o-mini\n',
        "agents:\n  a:\n    model: [openai\n",
        (2, 4),
        "",
        "not ",
    ),
}


@pytest.mark.parametrize("kind", ["toml", "yaml"])
@pytest.mark.parametrize("case", sorted(ERRORS))
def test_each_error_names_file_line_and_key(kind: str, case: str) -> None:
    """Each kind of problem raises AgentFileError naming the file, the line and the key path."""
    toml_text, yaml_text, lines, path, words = ERRORS[case]
    text = toml_text if kind == "toml" else yaml_text
    line = lines[0] if kind == "toml" else lines[1]
    name = f"agents.{kind}"
    with override_models(TestModel()), pytest.raises(AgentFileError) as info:
        loads(text, format=kind, name=name, search=SEARCH)
    assert info.value.file == name
    assert len(info.value.problems) == 1, info.value.problems
    (problem,) = info.value.problems
    where = f"{name}:{line}: " if line else f"{name}: "
    assert problem.startswith(where + (f"{path}: " if path else "")), problem
    assert words in problem, problem
    assert problem in str(info.value)


def test_a_yaml_file_without_pyyaml_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without PyYAML (``import yaml`` fails), a YAML file is one problem naming the extra;
    a TOML file still loads."""
    monkeypatch.setitem(sys.modules, "yaml", None)  # what Python does for a missing module
    path = tmp_path / "f.yaml"
    path.write_text("agents:\n  a:\n    model: openai:gpt-4o-mini\n")
    with pytest.raises(AgentFileError) as info:
        load(path)
    assert info.value.problems == (
        f"{path}: a YAML agent file needs 'yaml': pip install 'toolfold[yaml]'",
    )
    with override_models(TestModel()):
        loaded = loads('[agents.a]\nmodel = "openai:gpt-4o-mini"\n', format="toml", name="f")
    assert loaded.agent().name == "a"


def test_an_mcp_entry_without_the_mcp_extra_is_a_problem_of_the_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without the mcp SDK, an agent's MCP server is a problem of the file naming the extra,
    so `toolfold check` fails (it said ok, and `tools`/`run` then gave a traceback)."""
    from toolfold._cli import main

    monkeypatch.setitem(sys.modules, "mcp", None)  # what Python does for a missing module
    path = tmp_path / "f.toml"
    path.write_text(
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\n[[agents.a.mcp]]\ncommand = "x"\n',
        encoding="utf-8",
    )
    problem = f"{path}:3: agents.a.mcp[0]: an MCP server needs 'mcp': pip install 'toolfold[mcp]'"
    with pytest.raises(AgentFileError) as info:
        load(path)
    assert info.value.problems == (problem,)
    assert main(["check", str(path)]) == 1
    assert problem in capsys.readouterr().err


def test_loading_a_file_with_an_mcp_server_does_not_import_the_mcp_sdk(tmp_path: Path) -> None:
    """Loading finds the mcp SDK without importing it: its import took over a second, where
    loading the file took a fifth (`toolfold check` alone imports it, to say a broken one)."""
    path = tmp_path / "f.toml"
    path.write_text('[agents.a]\nmodel = "openai:gpt-4o-mini"\n[[agents.a.mcp]]\ncommand = "x"\n')
    code = (
        "import sys\nfrom toolfold.files import load\nfrom toolfold.testing import TestModel\n"
        f"load({str(path)!r}, model=TestModel())\nprint('mcp' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "False\n"


def test_a_yaml_key_given_twice_is_a_problem_not_silently_the_last() -> None:
    """PyYAML keeps the last of two equal keys: the file's second agent 'a' is reported, not used."""
    text = "agents:\n  a:\n    model: openai:gpt-4o-mini\n  a:\n    model: files_helpers:model\n"
    with override_models(TestModel()), pytest.raises(AgentFileError) as info:
        loads(text, format="yaml", name="f.yaml", search=SEARCH)
    assert info.value.problems == ("f.yaml:4: agents.a: given twice (first at line 2)",)


def test_a_yaml_name_that_is_not_text_is_a_problem() -> None:
    """YAML reads `1:`, `yes:` and `~:` as a number, True and None: such an agent or workflow is refused."""
    text = (
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n  1:\n    model: openai:gpt-4o-mini\n"
        "workflows:\n  ~:\n    kind: sequence\n    steps: [a]\n"
    )
    with override_models(TestModel()), pytest.raises(AgentFileError) as info:
        loads(text, format="yaml", name="f.yaml", search=SEARCH)
    assert info.value.problems == (
        "f.yaml:4: agents.1: a name is text, got an integer 1 (quote it in YAML)",
        "f.yaml:7: workflows.None: a name is text, got nothing (quote it in YAML)",
    )


def test_every_workflow_that_cannot_be_built_is_reported_at_once() -> None:
    """Two broken workflows (and one using a broken one) give one error listing both, not the
    first only: a step's name used twice, said before the build, hid the other one's build
    problems (the build skips only the workflow with the name problem)."""
    text = (
        "[workflows.w1]\n"
        'kind = "sequence"\n'
        'steps = ["files_helpers:shout", "files_helpers:shout"]\n'
        "[workflows.w2]\n"
        'kind = "loop"\n'
        'step = "files_helpers:shout"\n'
        "max_iterations = 0\n"
        "[workflows.outer]\n"
        'kind = "sequence"\n'
        'steps = ["w1", "files_helpers:shout"]\n'
    )
    with pytest.raises(AgentFileError) as info:
        loads(text, name="flows.toml", search=SEARCH)
    problems = info.value.problems
    assert [p.split(": ")[1] for p in problems] == ["workflows.w1.steps[1]", "workflows.w2"]
    assert "makes a step named 'shout', as workflows.w1.steps[0] does" in problems[0]
    assert "max_iterations must be an integer >= 1" in problems[1]


def test_an_agent_using_a_broken_agent_still_reports_its_own_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent whose agent-tool failed to build still reports its own missing key; one fine but for that tool does not."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = (
        "[agents.triage]\n"
        'model = "openai:gpt-4o-mini"\n'
        'tools = [{ agent = "researcher", name = "ask" }]\n'
        "[agents.researcher]\n"
        'model = "openai:gpt-4o-mini"\n'
        "[agents.fine]\n"
        'model = "files_helpers:model"\n'
        'tools = [{ agent = "researcher" }]\n'
        'tool_choice = "researcher"\n'
    )
    with pytest.raises(AgentFileError) as info:
        loads(text, name="desk.toml", search=SEARCH)
    problems = info.value.problems
    assert [p.split(": ")[1] for p in problems] == ["agents.triage", "agents.researcher"]
    assert all("cannot build the agent: no API key" in p for p in problems), problems


def test_a_workflow_with_a_broken_agent_step_still_reports_its_own_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workflow whose agent step failed to build still reports its own problem (a step used twice, max_iterations)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = (
        "[agents.r]\n"
        'model = "openai:gpt-4o-mini"\n'
        "[workflows.twice]\n"
        'kind = "sequence"\n'
        'steps = ["r", "files_helpers:shout", "files_helpers:shout"]\n'
        "[workflows.looped]\n"
        'kind = "loop"\n'
        'step = "r"\n'
        "max_iterations = 0\n"
    )
    with pytest.raises(AgentFileError) as info:
        loads(text, name="desk.toml", search=SEARCH)
    problems = info.value.problems
    assert [p.split(": ")[1] for p in problems] == [
        "agents.r",
        "workflows.twice.steps[2]",
        "workflows.looped",
    ]
    assert "no API key" in problems[0]
    assert "makes a step named 'shout'" in problems[1]
    assert "max_iterations must be an integer >= 1" in problems[2]


def test_a_workflow_fine_but_for_its_broken_steps_adds_no_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workflow fine apart from a broken agent or workflow step adds nothing (no type or kind mismatch)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = (
        "[agents.r]\n"
        'model = "openai:gpt-4o-mini"\n'
        "[workflows.inner]\n"
        'kind = "loop"\n'
        'step = "files_helpers:shout"\n'
        "max_iterations = 0\n"
        "[workflows.prompted]\n"
        'kind = "sequence"\n'
        'steps = ["files_helpers:long_enough", { step = "r", prompt = "Check {input}" },'
        ' "files_helpers:shout", "inner"]\n'
        "[workflows.routed]\n"
        'kind = "route"\n'
        'router = "r"\n'
        'branches = { a = "files_helpers:shout", b = "inner" }\n'
        "[workflows.looped]\n"
        'kind = "loop"\n'
        'step = "r"\n'
        'until = "done"\n'
    )
    with pytest.raises(AgentFileError) as info:
        loads(text, name="desk.toml", search=SEARCH)
    problems = info.value.problems
    assert [p.split(": ")[1] for p in problems] == ["agents.r", "workflows.inner"], problems


def test_a_nested_workflow_may_use_a_name_its_outer_workflow_defines() -> None:
    """A workflow of the file nested in another is checked where it is nested, not alone."""
    text = (
        "[agents.a]\n"
        'model = "openai:gpt-4o-mini"\n'
        'instructions = "About {topic}."\n'
        "[workflows.inner]\n"
        'kind = "sequence"\n'
        'steps = ["a"]\n'
        "[workflows.outer]\n"
        'kind = "sequence"\n'
        'steps = [{ step = "files_helpers:shout", name = "topic" }, "inner"]\n'
    )
    with override_models(TestModel()):
        loaded = loads(text, name="nested.toml", search=SEARCH)
    assert loaded.workflows["inner"].free_names == {"topic"}
    assert loaded.workflows["outer"].free_names == frozenset()


def test_every_problem_at_once() -> None:
    """A file with many problems reports them all in one error, in the file's order."""
    text = (
        "[agents.a]\n"
        'model = "openai:gpt-4o-mini"\n'
        'colour = "red"\n'
        'tools = ["no_such_mod_x:f", 5, "files_helpers:NOT_A_TOOL"]\n'
        'handoffs = ["ghost"]\n'
        'on_tool_error = "explode"\n'
        "[[agents.a.mcp]]\n"
        "command = 4\n"
    )
    with pytest.raises(AgentFileError) as info:
        loads(text, name="many.toml", search=SEARCH)
    problems = info.value.problems
    assert [re.match(r"many\.toml:(\d+): (\S+):", p).groups() for p in problems] == [  # type: ignore[union-attr]
        ("3", "agents.a.colour"),
        ("4", "agents.a.tools[0]"),
        ("4", "agents.a.tools[1]"),
        ("4", "agents.a.tools[2]"),
        ("5", "agents.a.handoffs[0]"),
        ("6", "agents.a.on_tool_error"),
        ("8", "agents.a.mcp[0].command"),
    ]
    assert "7 problems" in str(info.value)


def test_an_unreadable_file_is_an_agent_file_error(tmp_path: Path) -> None:
    """A missing file is reported as the file's problem, not an OSError."""
    with pytest.raises(AgentFileError) as info:
        load(tmp_path / "missing.toml")
    assert "cannot read" in info.value.problems[0]


def test_a_module_that_fails_to_import_is_a_problem(tmp_path: Path) -> None:
    """Whatever a tools module raises while importing is reported with its class, not raised."""
    (tmp_path / "explodes_on_import.py").write_text('raise RuntimeError("no database")\n')
    text = '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = ["explodes_on_import:f"]\n'
    with pytest.raises(AgentFileError) as info:
        loads(text, name="a.toml", search=str(tmp_path))
    assert info.value.problems == (
        "a.toml:3: agents.a.tools[0]: cannot import 'explodes_on_import:f': "
        "RuntimeError: no database",
    )


def test_mcp_entry_needs_command_or_url() -> None:
    """An MCP entry with both (or neither) of command and url is refused."""
    text = '[agents.a]\nmodel = "openai:gpt-4o-mini"\n[[agents.a.mcp]]\nprefix = "x"\n'
    with pytest.raises(AgentFileError, match=r"agents.a.mcp\[0\]: give either command"):
        loads(text, name="m.toml")


def test_the_entry_must_name_an_agent() -> None:
    """``entry`` naming no agent of the file is a problem; ``agent(name)`` refuses unknown names."""
    with pytest.raises(AgentFileError, match="entry: names no agent"):
        _offline('entry = "b"\n[agents.a]\nmodel = "openai:gpt-4o-mini"\n')
    loaded = _offline('[agents.a]\nmodel = "openai:gpt-4o-mini"\n')
    assert loaded.entry == "a"
    with pytest.raises(ValueError, match="defines no agent 'z'"):
        loaded.agent("z")


def test_a_step_timeout_loads_and_writes_back() -> None:
    """``{step = ..., timeout = 2.5}`` is the step's Task timeout, and to_dict writes it again."""
    text = """
entry = "flow"

[agents.writer]
model = "openai:gpt-4o-mini"

[workflows.flow]
kind = "sequence"
steps = [{ step = "writer", timeout = 2.5, on_error = "skip" }]
"""
    with override_models(TestModel()):
        flow = loads(text).get()
        assert isinstance(flow, Sequence)
        assert flow.steps[0].timeout == 2.5
        document = flow.to_dict()
        assert document["workflows"]["flow"]["steps"] == [
            {"step": "writer", "on_error": "skip", "timeout": 2.5}
        ]
        assert from_dict(document).get().to_dict() == document


def test_a_step_retry_delay_loads_and_writes_back() -> None:
    """``{step = ..., retry_delay = 0.5}`` is the step's Task retry_delay, and to_dict writes it again."""
    text = """
entry = "flow"

[agents.writer]
model = "openai:gpt-4o-mini"

[workflows.flow]
kind = "sequence"
steps = [{ step = "writer", on_error = "retry", retry_delay = 0.5 }]
"""
    with override_models(TestModel()):
        flow = loads(text).get()
        assert isinstance(flow, Sequence)
        assert flow.steps[0].retry_delay == 0.5
        document = flow.to_dict()
        assert document["workflows"]["flow"]["steps"] == [
            {"step": "writer", "on_error": "retry", "retry_delay": 0.5}
        ]
        assert from_dict(document).get().to_dict() == document


def test_a_workflow_using_a_name_an_outer_one_defines_round_trips_but_a_file_checks_it() -> None:
    """Python builds a workflow whose ``{topic}`` no step defines (a workflow nesting it may),
    so ``from_dict(spec.to_dict())`` builds it back, nested or alone; a file whose top-level
    workflow is that one is refused when it loads, as it could only fail when run."""
    import yaml

    from toolfold import Task, WorkflowDefinitionError

    with override_models(TestModel()):
        writer = Agent("openai:gpt-4o-mini", name="writer")
        inner = Sequence(Task(writer, prompt="{topic}: {input}"), name="inner")
        document = inner.to_dict()
        again = from_dict(document).get()
        assert again == inner
        assert again.to_dict() == document
        with pytest.raises(WorkflowDefinitionError, match=r"refers to \{topic\}, which no earlier"):
            again.run("x")  # alone, as Python's own
        outer = Sequence(Task(writer, name="topic"), inner, name="outer")
        nested = from_dict(outer.to_dict()).get()
        assert nested == outer
        assert nested.run("x").output == outer.run("x").output
        text = yaml.safe_dump(document, sort_keys=False)
        with pytest.raises(AgentFileError, match="no other workflow of the file nests this one"):
            loads(text, format="yaml")


def test_stop_conditions_load_and_write_back() -> None:
    """Built-in stop conditions are tables, a predicate an import path; both round-trip."""
    from toolfold.runtime.core._stop import max_steps, token_budget, tool_called

    text = """
[agents.main]
model = "files_helpers:model"
stop_when = [{ max_steps = 3 }, { token_budget = 500 }, { tool_called = "add" }, "files_helpers:two_tool_results"]
"""
    agent = loads(text, search=SEARCH).agent()
    import files_helpers  # the folder is on sys.path while the file loads; imported once

    assert agent.stop_when == (
        max_steps(3),
        token_budget(500),
        tool_called("add"),
        files_helpers.two_tool_results,
    )
    document = agent.to_dict()
    assert document["agents"]["main"]["stop_when"] == [
        {"max_steps": 3},
        {"token_budget": 500},
        {"tool_called": "add"},
        "files_helpers:two_tool_results",
    ]
    assert from_dict(document, search=SEARCH).agent().to_dict() == document


def test_a_stop_condition_without_import_path_is_named_by_to_dict() -> None:
    """A lambda in stop_when: to_dict raises, naming the key path and the lambda."""
    agent = Agent(TestModel(), name="main", stop_when=[lambda state: False])
    with pytest.raises(
        UsageError, match=r"agents\.main\.stop_when\[0\]: <function .*<lambda>.* has no import path"
    ):
        agent.to_dict()


def test_bad_stop_conditions_are_each_a_problem() -> None:
    """An unknown condition key, two at once, a zero budget, a non-function: all reported."""
    text = """
[agents.main]
model = "files_helpers:model"
stop_when = [{ max_step = 3 }, { max_steps = 3, tool_called = "add" }, { token_budget = 0 }, "files_helpers:nowhere", 7]
"""
    with pytest.raises(AgentFileError) as info:
        loads(text, search=SEARCH)
    problems = "\n".join(info.value.problems)
    assert "agents.main.stop_when[0].max_step: unknown key 'max_step'" in problems
    assert (
        "agents.main.stop_when[1]: give exactly one of max_steps, token_budget, tool_called (got max_steps, tool_called)"
        in problems
    )
    assert "agents.main.stop_when[2].token_budget: must be at least 1, got 0" in problems
    assert "agents.main.stop_when[3]: cannot import 'files_helpers:nowhere'" in problems
    assert "agents.main.stop_when[4]: expected a function's import path" in problems


def test_a_tool_called_name_no_tool_can_have_is_a_problem_at_its_key() -> None:
    """{tool_called = "soumettre_réponse"} (a function's name, not the tool's) never held: refused at the key."""
    text = """
[agents.main]
model = "files_helpers:model"
stop_when = [{ tool_called = "soumettre_réponse" }, { tool_called = "soumettre" }]
"""
    with pytest.raises(AgentFileError) as info:
        loads(text, search=SEARCH)
    (problem,) = info.value.problems
    assert problem.startswith("<string>:4: agents.main.stop_when[0].tool_called: no tool can have")
    assert "'soumettre_réponse'" in problem


def test_out_of_range_agent_numbers_are_each_a_problem_on_their_line() -> None:
    """``max_steps``, ``output_retries`` and ``max_concurrency`` out of range are all
    reported, each on its key's line (building the agent named only the first, on the
    table's line, and took ``max_concurrency = 0``)."""
    text = """
[agents.main]
model = "files_helpers:model"
max_steps = 0
output_retries = -1
max_concurrency = 0
"""
    with pytest.raises(AgentFileError) as info:
        loads(text, name="main.toml", search=SEARCH)
    assert info.value.problems == (
        "main.toml:4: agents.main.max_steps: must be at least 1, got 0",
        "main.toml:5: agents.main.output_retries: must be at least 0, got -1",
        "main.toml:6: agents.main.max_concurrency: must be at least 1, got 0",
    )


def test_an_as_tool_output_function_loads_by_import_path_and_writes_back() -> None:
    """``{agent = ..., output = "module:function"}`` builds the tool with that extractor."""
    text = (
        '[agents.helper]\nmodel = "files_helpers:model"\n\n'
        '[agents.lead]\nmodel = "files_helpers:model"\n'
        'tools = [{ agent = "helper", output = "files_helpers:first_word" }]\n'
    )
    lead = loads(text, search=SEARCH).agent("lead")
    (made,) = lead.tools
    from toolfold.runtime._agent_tool import as_tool_of

    found = as_tool_of(made)
    assert found is not None
    assert found.output is not None
    assert found.output.__name__ == "first_word"
    document = lead.to_dict()
    assert document["agents"]["lead"]["tools"] == [
        {"agent": "helper", "output": "files_helpers:first_word"}
    ]
    assert from_dict(document, search=SEARCH).agent().to_dict() == document


def test_an_as_tool_tool_is_written_with_its_options_as_replace_left_them(tmp_path: Path) -> None:
    """to_dict() wrote an as_tool tool's as_tool() arguments, not its options: the file of
    ``sub.as_tool().replace(requires_approval=True)`` loaded back a tool that ran the
    sub-agent unasked, ``replace(timeout=9)`` came back with the first timeout, a renamed
    tool with its old name, and a predicate replaced by False was refused. It writes the
    tool's own options, and refuses, naming them, those an agent file cannot hold."""
    import yaml

    def always(call: Any, state: Any) -> bool:
        return True

    with override_models(TestModel()):
        sub = Agent("openai:gpt-4o-mini", name="sub", instructions="Help.")
        tools = [
            sub.as_tool().replace(requires_approval=True, timeout=9),
            sub.as_tool("ask", timeout=3, requires_approval=always).replace(
                requires_approval=False, name="asked"
            ),
            sub.as_tool(description="Asks.").replace(name="other"),
            sub.as_tool("plain"),
        ]
        lead = Agent("openai:gpt-4o-mini", name="lead", tools=tools)
        document = lead.to_dict()
        path = tmp_path / "lead.yaml"
        path.write_text(yaml.safe_dump(document), encoding="utf-8")
        loaded = load(path).agent("lead")

        def options(tool: Any) -> tuple[Any, ...]:
            return (tool.name, tool.description, tool.requires_approval, tool.timeout)

        assert [options(t) for t in loaded.tools] == [options(t) for t in tools]
        assert loaded.tools[0].requires_approval is True
        assert document["agents"]["lead"]["tools"][3] == {"agent": "sub", "name": "plain"}
        assert loaded.to_dict() == document
        for made, says in (
            (sub.as_tool().replace(requires_approval=always), r"\.requires_approval: the pred"),
            (sub.as_tool().replace(max_retries=5), r"tools\[0\]: the tool's max_retries=5"),
        ):
            with pytest.raises(UsageError, match=says):
                Agent("openai:gpt-4o-mini", name="lead", tools=[made]).to_dict()


def test_an_as_tool_output_that_is_not_a_function_is_a_problem() -> None:
    """An ``output`` path naming something that is not callable is reported at its key."""
    text = (
        '[agents.helper]\nmodel = "files_helpers:model"\n\n'
        '[agents.lead]\nmodel = "files_helpers:model"\n'
        'tools = [{ agent = "helper", output = "files_helpers:not_a_function" }]\n'
    )
    with pytest.raises(AgentFileError) as info:
        loads(text, name="lead.toml", search=SEARCH)
    (problem,) = info.value.problems
    assert "agents.lead.tools[0].output: 'not a function' is not a function" in problem


def _problems(text: str) -> tuple[str, ...]:
    with pytest.raises(AgentFileError) as info, override_models(TestModel()):
        loads(text, name="f.toml", search=SEARCH)
    return info.value.problems


def test_problems_under_dotted_keys_have_their_line() -> None:
    """A key written dotted (``a.max_steps = 0``, ``agents.a.model = ...``) is found on its line."""
    text = 'agents.a.model = "openai:gpt-4o-mini"\n\nagents.a.max_steps = "many"\n'
    assert _problems(text) == (
        "f.toml:3: agents.a.max_steps: expected an integer, got a string 'many'",
    )
    text = '[agents]\na.model = "openai:gpt-4o-mini"\n# here\na.tools = ["nowhere:f"]\n'
    assert _problems(text)[0].startswith("f.toml:4: agents.a.tools[0]: cannot import")


def test_problems_under_quoted_table_names_have_their_line() -> None:
    """``[agents."x y"]`` and ``[ agents . 'a' ]`` headers are found, and the keys under them."""
    text = (
        '[agents."x y"]\nmodel = "openai:gpt-4o-mini"\nmax_steps = "many"\n'
        "[ agents . 'b' ]\nmodel = \"openai:gpt-4o-mini\"\nbogus = 1\n"
    )
    problems = _problems(text)
    assert "f.toml:3: agents.x y.max_steps: expected an integer, got a string 'many'" in problems
    assert any(p.startswith("f.toml:6: agents.b.bogus: ") for p in problems), problems


def test_items_of_a_multi_line_array_have_their_own_lines() -> None:
    """Each item of an array written over several lines is reported on its own line."""
    text = (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = [\n'
        '  "nowhere:f",  # the first\n\n  "nowhere:g",\n]\n'
    )
    problems = _problems(text)
    assert [p.split(" cannot")[0] for p in problems] == [
        "f.toml:4: agents.a.tools[0]:",
        "f.toml:6: agents.a.tools[1]:",
    ]


def test_a_second_array_table_has_its_own_line() -> None:
    """The problem of ``[[agents.a.mcp]]``'s second entry is at that entry, not the first."""
    text = (
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\n[[agents.a.mcp]]\ncommand = "x"\n'
        '[[agents.a.mcp]]\nprefix = "y"\n'
    )
    (problem,) = _problems(text)
    assert problem.startswith("f.toml:5: agents.a.mcp[1]: give either command"), problem


def test_a_module_level_model_object_is_written_by_its_name_and_loads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model instance bound at module level (``MODEL = toolfold.model(...)``) is written as
    ``module:MODEL`` and loads back as that very object; one made in a function is refused."""
    (tmp_path / "made_models.py").write_text(
        "import toolfold\n"
        "from toolfold import Agent\n\n"
        'MODEL = toolfold.model("openai:gpt-4o-mini", api_key="sk-not-written")\n'
        'agent = Agent(MODEL, name="writer", instructions="Write.")\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "made_models", raising=False)  # (gone after the test)
    made_models = importlib.import_module("made_models")
    document = made_models.agent.to_dict()
    assert document == {
        "entry": "writer",
        "agents": {"writer": {"model": "made_models:MODEL", "instructions": "Write."}},
    }
    assert "sk-not-written" not in json.dumps(document)
    assert from_dict(document).agent().model is made_models.MODEL
    local = Agent(toolfold.model("openai:gpt-4o-mini", api_key="sk-x"), name="local")
    with pytest.raises(UsageError, match=r"agents\.local: .* has no import path"):
        local.to_dict()


def _bound_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A module ``bound_models`` (imported afresh) whose ``MODEL`` is a model made at module level."""
    (tmp_path / "bound_models.py").write_text(
        'import toolfold\n\nMODEL = toolfold.model("openai:gpt-4o-mini", api_key="sk-x")\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bound_models", raising=False)
    return importlib.import_module("bound_models")


def test_a_module_level_model_is_not_written_under_an_alias_of_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``__mp_main__`` (the alias of ``__main__`` that importing multiprocessing adds) and other
    entries of sys.modules that are not their module's own name are passed over; the script
    itself is named only when no module defines the object."""
    bound_models = _bound_models(tmp_path, monkeypatch)
    main = sys.modules["__main__"]
    monkeypatch.setitem(sys.modules, "__mp_main__", main)
    monkeypatch.setitem(sys.modules, "an_alias", bound_models)  # (its __name__ differs)
    monkeypatch.setattr(main, "MODEL", bound_models.MODEL, raising=False)  # from x import MODEL
    agent = Agent(bound_models.MODEL, name="a")
    assert agent.to_dict()["agents"]["a"]["model"] == "bound_models:MODEL"
    own = toolfold.model("openai:gpt-4o-mini", api_key="sk-x")
    monkeypatch.setattr(main, "OWN_MODEL", own, raising=False)  # defined in the script only
    assert Agent(own, name="b").to_dict()["agents"]["b"]["model"] == "__main__:OWN_MODEL"


def test_a_re_exported_model_is_written_by_the_module_that_defines_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model another module re-exports (``from bound_models import MODEL``, a package's
    ``__init__`` doing the same) is written by the module whose source assigns it, whatever
    sorts first and whatever else is imported; it loads back as the same object."""
    bound_models = _bound_models(tmp_path, monkeypatch)
    for name in ("a_app", "zz_app"):  # one sorts before the defining module, one after
        (tmp_path / f"{name}.py").write_text("from bound_models import MODEL  # re-exported\n")
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.import_module(name)
    package = tmp_path / "a_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from a_pkg.models import MODEL\n")
    (package / "models.py").write_text(
        'import toolfold\n\nif True:\n    MODEL = toolfold.model("openai:gpt-4o-mini", api_key="sk-x")\n'
    )
    for name in ("a_pkg", "a_pkg.models"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    nested = importlib.import_module("a_pkg").MODEL
    document = Agent(bound_models.MODEL, name="a").to_dict()
    assert document["agents"]["a"]["model"] == "bound_models:MODEL"
    assert from_dict(document).agent().model is bound_models.MODEL
    assert Agent(nested, name="b").to_dict()["agents"]["b"]["model"] == "a_pkg.models:MODEL"


_M = "openai:gpt-4o-mini"
WRONG_TYPES: dict[str, tuple[Any, str, str]] = {
    "handoffs as text": (
        {"agents": {"w": {"model": _M, "handoffs": "v"}, "v": {"model": _M}}},
        "agents.w.handoffs",
        "expected a list, got a string 'v'",
    ),
    "tools as text": (
        {"agents": {"w": {"model": _M, "tools": "m:f"}}},
        "agents.w.tools",
        "expected a list, got a string 'm:f'",
    ),
    "stop_when as text": (
        {"agents": {"w": {"model": _M, "stop_when": "m:f"}}},
        "agents.w.stop_when",
        "expected a list, got a string 'm:f'",
    ),
    "mcp as a table": (
        {"agents": {"w": {"model": _M, "mcp": {"command": "x"}}}},
        "agents.w.mcp",
        "expected a list, got a table",
    ),
    "mcp args as text": (
        {"agents": {"w": {"model": _M, "mcp": [{"command": "x", "args": "abc"}]}}},
        "agents.w.mcp[0].args",
        "expected a list, got a string of 3 characters",
    ),
    "mcp include as text": (
        {"agents": {"w": {"model": _M, "mcp": [{"command": "x", "include": "abc"}]}}},
        "agents.w.mcp[0].include",
        "expected a list, got a string 'abc'",
    ),
    "mcp env as a list": (
        {"agents": {"w": {"model": _M, "mcp": [{"command": "x", "env": ["A=1"]}]}}},
        "agents.w.mcp[0].env",
        "expected a table of name = text, got a list",
    ),
    "an mcp env value": (
        {"agents": {"w": {"model": _M, "mcp": [{"command": "x", "env": {"A": 1}}]}}},
        "agents.w.mcp[0].env.A",
        "expected a string, got an integer",
    ),
    "steps as text": (
        {"agents": {"w": {"model": _M}}, "workflows": {"p": {"kind": "sequence", "steps": "w"}}},
        "workflows.p.steps",
        "expected a list, got a string 'w'",
    ),
    "branches as a list": (
        {
            "agents": {"w": {"model": _M}},
            "workflows": {"r": {"kind": "route", "router": "w", "branches": ["w"]}},
        },
        "workflows.r.branches",
        "expected a table of label = step, got a list",
    ),
    "agents as a list": ({"agents": ["w"]}, "agents", "expected a table of agents"),
    "workflows as text": (
        {"agents": {"w": {"model": _M}}, "workflows": "p"},
        "workflows",
        "expected a table of workflows",
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_a_value_of_the_wrong_type_is_one_problem_naming_what_was_expected(case: str) -> None:
    """A string, list or table where another kind is expected is reported as such, once, not
    read item by item (a string's characters, a list's .items())."""
    document, path, words = WRONG_TYPES[case]
    with pytest.raises(AgentFileError) as info:
        from_dict(document, name="doc")
    (problem,) = info.value.problems
    assert problem.startswith(f"doc: {path}: {words}"), problem


def test_a_list_field_given_as_text_in_a_toml_file_names_its_line() -> None:
    """``handoffs = "v"`` in a file is a problem on its line, not a handoff to v."""
    text = f'[agents.w]\nmodel = "{_M}"\nhandoffs = "v"\n[agents.v]\nmodel = "{_M}"\n'
    with pytest.raises(AgentFileError) as info:
        loads(text, name="t.toml")
    assert list(info.value.problems) == [
        "t.toml:3: agents.w.handoffs: expected a list, got a string 'v'"
    ]


@pytest.mark.parametrize("document", ["agents", ["agents"], 3])
def test_from_dict_of_something_not_a_mapping_says_a_document_is_expected(document: Any) -> None:
    """from_dict refuses what is not a mapping with an AgentFileError saying what it expects."""
    with pytest.raises(AgentFileError, match=r"doc: expected a document, a mapping with the keys"):
        from_dict(document, name="doc")


SECRET = "hunter2secret"


@pytest.mark.parametrize(
    ("server", "path", "words"),
    [
        ({"env": f"TOKEN={SECRET}"}, "env", "expected a table of name = text, got a string of 19"),
        ({"env": {"PIN": 98765431}}, "env.PIN", "expected a string, got an integer"),
        ({"env": {"TOKEN": [SECRET]}}, "env.TOKEN", "expected a string, got a list"),
        ({"args": f"--token {SECRET}"}, "args", "expected a list, got a string of 21 characters"),
        ({"args": ["a", 98765431]}, "args[1]", "expected a string, got an integer"),
    ],
    ids=["env-text", "env-number", "env-list", "args-text", "args-number"],
)
def test_a_wrong_kind_of_mcp_env_or_args_never_shows_its_value(
    server: dict[str, Any], path: str, words: str
) -> None:
    """An MCP server's env or args of the wrong kind is named by kind and length, never shown."""
    document = {"agents": {"w": {"model": _M, "mcp": [{"command": "x", **server}]}}}
    with pytest.raises(AgentFileError) as info:
        from_dict(document, name="doc")
    (problem,) = info.value.problems
    assert problem.startswith(f"doc: agents.w.mcp[0].{path}: {words}"), problem
    assert SECRET not in str(info.value)
    assert "98765431" not in str(info.value)


def test_a_long_value_of_the_wrong_kind_is_not_shown_whole() -> None:
    """A long value of the wrong kind is named by its kind and length, not written out."""
    long = "m:" + "f" * 300
    with pytest.raises(AgentFileError) as info:
        from_dict({"agents": {"w": {"model": _M, "tools": long}}}, name="doc")
    (problem,) = info.value.problems
    assert problem == "doc: agents.w.tools: expected a list, got a string of 302 characters"
    flows = {"p": {"kind": "x" * 300, "steps": ["w"]}}
    with pytest.raises(AgentFileError) as info:
        from_dict({"agents": {"w": {"model": _M}}, "workflows": flows}, name="doc")
    assert info.value.problems[0].endswith("got a string of 300 characters")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "agents:\n  a:\n    model: x:y\nworkflows:\n  r:\n    kind: route\n"
            "    router: a\n    branches:\n",
            "f.yaml:8: workflows.r.branches: expected a table of label = step, got nothing",
        ),
        (
            "agents:\n  a:\n    model: x:y\nworkflows:\n  s:\n    kind: sequence\n    steps:\n",
            "f.yaml:7: workflows.s.steps: expected a list, got nothing",
        ),
        (
            "agents:\nworkflows:\n  w:\n    kind: sequence\n    steps: [json:dumps]\n",
            "f.yaml:1: agents: expected a table of agents, each under agents.<name>, got nothing",
        ),
    ],
    ids=["branches-null", "steps-null", "agents-null"],
)
def test_a_yaml_key_left_null_is_one_problem_saying_got_nothing(
    tmp_path: Path, text: str, problem: str
) -> None:
    """A YAML key left empty (null) is said once, as got nothing, not as a second problem."""
    (tmp_path / "f.yaml").write_text(text)
    with pytest.raises(AgentFileError) as info:
        load(tmp_path / "f.yaml", model=TestModel())
    assert [p.replace(str(tmp_path) + "/", "") for p in info.value.problems] == [problem]


def test_an_input_type_path_that_is_not_a_type_is_a_file_problem() -> None:
    """``input_type = "os:sep"`` (a value, not a type) is a problem at its path (it used to
    load)."""
    text = (
        '[agents.a]\nmodel = "openai:x"\n[workflows.w]\nkind = "sequence"\n'
        'steps = [{step = "a", input_type = "os:sep"}]\n'
    )
    with pytest.raises(AgentFileError) as info:
        loads(text, name="f.toml")
    sep = re.escape(repr(__import__("os").sep))
    assert re.fullmatch(
        r"f\.toml:5: workflows\.w\.steps\[0\]\.input_type: 'os:sep' must be a type "
        rf"\(str, int, an attrs class or dataclass, list\[str\]\.\.\.\), got str {sep}",
        info.value.problems[0],
    )


def _problems(text: str, name: str = "f.toml") -> tuple[str, ...]:
    with pytest.raises(AgentFileError) as info:
        loads(text, name=name, format="yaml" if name.endswith(".yaml") else "toml")
    return tuple(info.value.problems)


AGENT_A = '[agents.a]\nmodel = "openai:x"\n'


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("[]", "a list of labels (a Literal) needs at least one label, got an empty list"),
        ("[1, 2]", "labels are text, got an integer 1, an integer 2"),
        ('["x", "x"]', "labels are distinct, got 'x' more than once"),
    ],
)
def test_a_bad_list_of_labels_says_what_is_wrong(given: str, says: str) -> None:
    """An output_type list that is empty, not text or repeats a label says which (it used to
    say only "got a list"); a TOML file gets no hint about quoting in YAML."""
    assert _problems(AGENT_A + f"output_type = {given}\n") == (
        f"f.toml:3: agents.a.output_type: {says}",
    )


def test_yaml_labels_read_as_booleans_say_to_quote_them() -> None:
    """YAML's ``[yes, no]`` labels are booleans: the problem says to quote them."""
    text = "agents:\n  r:\n    model: openai:x\n    output_type: [yes, no]\n"
    (problem,) = _problems(text, "x.yaml")
    assert problem.startswith("x.yaml:4: agents.r.output_type: labels are text, got a boolean")
    assert "in YAML, quote them" in problem


def test_a_workflow_as_a_handoff_target_says_to_use_it_as_a_tool() -> None:
    """``handoffs = ["w"]`` naming a workflow says a workflow cannot be a handoff target and
    shows the tool table (it used to say the file does not define agent 'w')."""
    text = (
        AGENT_A + 'handoffs = ["w"]\n[agents.b]\nmodel = "openai:x"\n'
        '[workflows.w]\nkind = "sequence"\nsteps = ["b"]\n'
    )
    assert _problems(text) == (
        "f.toml:3: agents.a.handoffs[0]: 'w' is a workflow, and a workflow cannot be a handoff "
        "target (a handoff gives the conversation to an agent); to call it, list it as a tool: "
        'tools = [{workflow = "w"}]',
    )


def test_a_loop_step_that_is_not_a_step_is_one_problem() -> None:
    """``step = ["a"]`` is said once, without a false "missing" beside it."""
    text = AGENT_A + '[workflows.w]\nkind = "loop"\nstep = ["a"]\n'
    assert _problems(text) == (
        "f.toml:5: workflows.w.step: expected an agent or workflow name, a function's import "
        "path or a {step = ...} table, got a list",
    )


def test_a_yaml_agent_named_by_a_number_is_not_a_file_without_agents() -> None:
    """A YAML agent named ``1:`` says the name must be text, not that the file defines none."""
    assert _problems("agents:\n  1:\n    model: openai:x\n", "x.yaml") == (
        "x.yaml:2: agents.1: a name is text, got an integer 1 (quote it in YAML)",
    )


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        (
            'tools = [{agent = "b"}, {agent = "b"}]\n',
            "f.toml:3: agents.a.tools[1]: makes a tool named 'b', as agents.a.tools[0] does",
        ),
        (
            'handoffs = ["b", "b"]\n',
            "f.toml:3: agents.a.handoffs[1]: makes a tool named 'transfer_to_b', as "
            "agents.a.handoffs[0] does",
        ),
    ],
)
def test_two_entries_making_one_tool_name_are_named_by_their_paths(entries: str, says: str) -> None:
    """Two {agent = "b"} tools (or two handoffs to b) name the file's entries, not toolfold's
    internal functions (``_nested.<locals>.acall``)."""
    (problem,) = _problems(AGENT_A + entries + '[agents.b]\nmodel = "openai:x"\n')
    assert problem.startswith(says)
    assert "<locals>" not in problem


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        (
            '"files_helpers:add", {agent = "b", name = "add"}',
            "f.toml:6: agents.a.tools[1]: makes a tool named 'add', as agents.a.tools[0] does",
        ),
        (
            '{agent = "b", name = "add"}, "files_helpers:add"',
            "f.toml:6: agents.a.tools[1]: makes a tool named 'add', as agents.a.tools[0] does",
        ),
        (
            '"files_helpers:add", "files_helpers:add"',
            "f.toml:6: agents.a.tools[1]: makes a tool named 'add', as agents.a.tools[0] does",
        ),
    ],
)
def test_an_import_path_tool_clashing_with_an_entry_is_named_at_the_entry(
    tools: str, says: str
) -> None:
    """An import-path tool and an agent used as a tool with one name are reported on the
    tools[i] entry that clashes, not on the agent's header line."""
    text = f'[agents.b]\nmodel = "openai:x"\n\n[agents.a]\nmodel = "openai:x"\ntools = [{tools}]\n'
    with pytest.raises(AgentFileError) as info:
        loads(text, name="f.toml", search=SEARCH)
    (problem,) = info.value.problems
    assert problem.startswith(says)


def test_agents_whose_names_no_tool_can_have_are_said_at_each_entry() -> None:
    """An agent used as a tool, or a handoff, without ``name``, whose tool would be named after
    an agent no tool can be named after (CJK, 'none'), is said at its own key with the file's
    way to name it, every one at once: only the first was said, at the agent's header, advising
    Python's ``name=...``."""
    text = (
        AGENT_A + 'tools = [{ agent = "研究员" }, { workflow = "none" }, { agent = "ok" }]\n'
        'handoffs = ["退款", { agent = "退款", name = "refund" }]\n'
        '[agents."研究员"]\nmodel = "openai:x"\n[agents."退款"]\nmodel = "openai:x"\n'
        '[agents.ok]\nmodel = "openai:x"\n'
        '[workflows.none]\nkind = "sequence"\nsteps = ["ok"]\n'
    )
    no_tool = "which no tool can have (1 to 64 characters among a-z A-Z 0-9 _ -)"
    with override_models(TestModel()):  # (the other agents are built: no API key needed)
        problems = _problems(text)
    assert problems == (
        "f.toml:3: agents.a.tools[0].agent: makes a tool named '研究员', after the agent's "
        f'name, {no_tool}: name the tool, {{ agent = "研究员", name = "..." }}',
        "f.toml:3: agents.a.tools[1].workflow: makes a tool named 'none', after the workflow's "
        "name, which is reserved (a tool_choice value): name the tool, "
        '{ workflow = "none", name = "..." }',
        "f.toml:4: agents.a.handoffs[0]: makes a tool named 'transfer_to_退款', after the "
        f'agent\'s name, {no_tool}: name the tool, {{ agent = "退款", name = "..." }}',
    )


def test_a_name_problem_hides_no_other_agents_build_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent whose tool is named after an agent no tool can be named after is not built, but
    the other agents are, so their build problems (no API key) are listed with it: the name
    problem, said before the build, hid them all."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = (
        AGENT_A + 'tools = [{ agent = "研究员" }]\n'
        '[agents."研究员"]\nmodel = "openai:x"\n[agents.b]\nmodel = "openai:x"\n'
    )
    problems = _problems(text)
    assert [p.split(": ")[1] for p in problems] == [
        "agents.a.tools[0].agent",
        "agents.研究员",
        "agents.b",
    ]
    assert all("cannot build the agent: no API key" in p for p in problems[1:]), problems


def test_step_names_are_said_at_each_step_with_the_files_way_to_name_one() -> None:
    """A step named after an agent whose name templates cannot refer to ('rédacteur'), a step
    ``name`` that is no name, and a second step of one name (two route branches to one agent)
    are said at their keys, every one at once, with the file's way to name a step: they were
    said at the workflow's header, advising Python's ``Task(..., name=...)``."""
    text = (
        '[agents."rédacteur"]\nmodel = "openai:x"\n[agents.critique]\nmodel = "openai:x"\n'
        '[workflows.chain]\nkind = "sequence"\n'
        'steps = [{ step = "rédacteur", name = "résumé" }, "critique", "critique"]\n'
        '[workflows.router]\nkind = "route"\nrouter = "rédacteur"\n'
        'branches = { "français" = "critique", "中文" = "critique" }\n'
    )
    no_name = (
        "is not a name (ASCII letters, digits and _, up to 64, not starting with a digit), "
        "and templates refer to it as {name}"
    )
    with override_models(TestModel()):  # (the agents are built: no API key needed)
        problems = _problems(text)
    assert problems == (
        f"f.toml:7: workflows.chain.steps[0].name: step name 'résumé' {no_name}: give another name",
        "f.toml:7: workflows.chain.steps[2]: makes a step named 'critique', as "
        "workflows.chain.steps[1] does: each step of a workflow needs its own name; name the "
        'step, { step = "critique", name = "..." }',
        f"f.toml:10: workflows.router.router: step name 'rédacteur' {no_name}: name the step, "
        '{ step = "rédacteur", name = "..." }',
        "f.toml:11: workflows.router.branches.中文: makes a step named 'critique', as "
        "workflows.router.branches.français does: each step of a workflow needs its own "
        'name; name the step, { step = "critique", name = "..." }',
    )


def test_a_workflow_named_with_a_space_loads_and_runs() -> None:
    """``[workflows."my flow"]`` loads and runs as on earlier versions (a name with a space
    was refused when the workflow was built)."""
    text = (
        'entry = "my flow"\n[agents.left]\nmodel = "openai:x"\n'
        '[workflows."my flow"]\nkind = "sequence"\nsteps = ["left"]\n'
    )
    from toolfold.testing import FunctionModel

    flow = loads(text, model=FunctionModel(lambda r: "done")).get()
    assert flow.name == "my flow"
    assert flow.run("hi").outputs == {"left": "done"}


_TWO_AGENTS = '[agents.b]\nmodel = "openai:x"\n\n[agents.a]\nmodel = "openai:x"\n'


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (
            'output_type = "os:sep"',
            "f.toml:6: agents.a.output_type: 'os:sep' must be a type (str, int, an attrs class "
            "or dataclass, list[str]...), got str '/'",
        ),
        (
            'output_type = "threading:Thread"',
            "f.toml:6: agents.a.output_type: 'threading:Thread' cannot be an output type: "
            "type Thread has no JSON Schema rule",
        ),
        (
            'tools = [{agent = "b", timeout = 0}]',
            "f.toml:6: agents.a.tools[0].timeout: must be a positive number of seconds, got 0.0",
        ),
        (
            'tools = [{agent = "b", timeout = inf}]',
            "f.toml:6: agents.a.tools[0].timeout: must be a positive number of seconds, got inf",
        ),
        (
            'tools = [{agent = "b", name = "has space"}]',
            "f.toml:6: agents.a.tools[0].name: tool name 'has space' is invalid: use 1 to 64 "
            "characters among a-z A-Z 0-9 _ -",
        ),
        (
            'handoffs = [{agent = "b", name = "has space"}]',
            "f.toml:6: agents.a.handoffs[0].name: tool name 'has space' is invalid",
        ),
        (
            'tool_choice = "sometimes"',
            "f.toml:6: agents.a.tool_choice: 'sometimes' is not 'auto', 'none', 'required' nor "
            "a tool of the agent (its tools: none)",
        ),
        (
            'tools = ["files_helpers:add", {agent = "b"}]\ntool_choice = "ad"',
            "f.toml:7: agents.a.tool_choice: 'ad' is not 'auto', 'none', 'required' nor "
            "a tool of the agent (its tools: 'add', 'b')",
        ),
        (
            '\n[workflows.w]\nkind = "sequence"\nsteps = [{step = "b", timeout = 0}]',
            "f.toml:9: workflows.w.steps[0].timeout: must be a positive number of seconds, got 0.0",
        ),
    ],
)
def test_a_bad_agent_option_is_reported_at_its_own_key(entry: str, says: str) -> None:
    """output_type naming a value, an agent tool's timeout 0 or bad name, an unknown
    tool_choice, a step's timeout 0: each on its own key's line, not the header's."""
    with pytest.raises(AgentFileError) as info, override_models(TestModel()):
        loads(_TWO_AGENTS + entry + "\n", name="f.toml", search=SEARCH)
    (problem,) = info.value.problems
    assert problem.startswith(says)


@pytest.mark.parametrize(
    "entry",
    [
        'tools = ["files_helpers:add"]\ntool_choice = "add"',
        'handoffs = ["b"]\ntool_choice = "transfer_to_b"',
        'tools = [{agent = "b", name = "ask", timeout = 2.5}]\ntool_choice = "required"',
        'output_type = "builtins:int"',
    ],
)
def test_good_agent_options_still_load(entry: str) -> None:
    """A tool_choice naming one of the agent's tools or handoffs, a positive timeout and an
    output type load as before."""
    with override_models(TestModel()):
        agent = loads(_TWO_AGENTS + entry + "\n", name="f.toml", search=SEARCH).get("a")
    assert agent.name == "a"


EXAMPLE_FILE = Path(__file__).resolve().parents[2] / "examples" / "agent_files" / "support.toml"


@pytest.mark.parametrize(
    ("model", "meant"),
    [
        ("opneai:gpt-4o", "openai"),
        ("openai-response:gpt-4o", "openai-responses"),
        ("openai-compatable:llama3", "openai-compatible"),
    ],
)
def test_a_misspelt_provider_in_a_file_is_an_unknown_provider(model: str, meant: str) -> None:
    """``model = "opneai:gpt-4o"`` said "cannot import 'opneai:gpt-4o': ModuleNotFoundError",
    a hyphenated one (``openai-response``, no module name at all) an import failure too;
    it says what toolfold.model says, with the provider meant."""
    with pytest.raises(AgentFileError) as info:
        loads(f'[agents.a]\nmodel = "{model}"\n', name="f.toml", search=SEARCH)
    (problem,) = info.value.problems
    prefix = model.partition(":")[0]
    assert problem.startswith(
        f"f.toml:2: agents.a.model: unknown provider '{prefix}' in '{model}' "
        f"(did you mean '{meant}'?); known providers: "
    )
    assert "import" not in problem if "-" in prefix else "ModuleNotFoundError" not in problem


@pytest.mark.parametrize(
    ("source", "model", "says"),
    [
        (
            'raise RuntimeError("bug in line 1")\n',
            "s43-raising-models:fast",
            "cannot import 's43-raising-models:fast': RuntimeError: bug in line 1",
        ),
        (
            "fast = 1\n",
            "s43-typo-models:fsat",
            "cannot import 's43-typo-models:fsat': ImportError: module 's43-typo-models' "
            "has no attribute 'fsat'",
        ),
    ],
    ids=["raises", "no-such-name"],
)
def test_a_hyphenated_module_that_fails_keeps_its_error(
    tmp_path: Path, source: str, model: str, says: str
) -> None:
    """A hyphenated file imports (``my-models.py``): when it raised, or named nothing of
    that name, the file's model and load(model=...) said 'unknown provider', hiding why."""
    module = model.partition(":")[0]
    (tmp_path / f"{module}.py").write_text(source)
    path = tmp_path / "f.toml"
    path.write_text('[agents.a]\nmodel = "openai:gpt-4o-mini"\n')
    try:
        with pytest.raises(AgentFileError) as info:
            loads(f'[agents.a]\nmodel = "{model}"\n', name="f.toml", search=str(tmp_path))
        with pytest.raises(UsageError, match=r"^load\(\): model=") as refused:
            load(path, model=model)
    finally:
        sys.modules.pop(module, None)
    assert info.value.problems == (f"f.toml:2: agents.a.model: {says}",)
    assert says.partition(": ")[2] in str(refused.value)
    assert "unknown provider" not in str(refused.value)


@pytest.mark.parametrize(
    ("model", "says"),
    [
        (3, r"^load\(\): model= must be a model string \('openai:gpt-4o-mini'\), an import "),
        ("nope", r"^load\(\): model= must be a model string .* got str 'nope'$"),
        ("os:sep", r"^load\(\): model='os:sep' must be a path to a Model, got str$"),
        (
            "nosuchmodule_s35:m",
            r"^load\(\): model='nosuchmodule_s35:m': unknown provider 'nosuchmodule_s35' in "
            r"'nosuchmodule_s35:m'; known providers: .*openai.* \(nor is 'nosuchmodule_s35' a "
            r"module to import a Model from\)$",
        ),
        ("nosuch.module_s35:m", r"^load\(\): model='nosuch.module_s35:m' does not import: "),
        (
            "openai-response:gpt-4o",
            r"^load\(\): model='openai-response:gpt-4o': unknown provider 'openai-response' "
            r"in 'openai-response:gpt-4o' \(did you mean 'openai-responses'\?\); known "
            r"providers: [a-z, -]+$",
        ),
    ],
)
def test_load_names_a_bad_model_argument(model: Any, says: str) -> None:
    """load(..., model=3) or a string that is no model names model= in a UsageError: it was a
    bare AttributeError, or an AgentFileError under the CLI's --model."""
    with pytest.raises(UsageError, match=says) as info:
        load(EXAMPLE_FILE, model=model)
    assert not isinstance(info.value, AgentFileError)
    assert "--model" not in str(info.value)


class _Config:
    """A user's object whose repr shows a key."""

    def __repr__(self) -> str:
        return "Config(api_key='sk-proj-SECRET123')"


@pytest.mark.parametrize(
    "model", [{"model": "openai:gpt-4o", "api_key": "sk-proj-SECRET123"}, _Config()]
)
def test_load_shows_a_bad_model_argument_s_type_only(model: Any) -> None:
    """load(..., model={... 'api_key': ...}) printed the dict, key and all."""
    with pytest.raises(UsageError) as info:
        load(EXAMPLE_FILE, model=model)
    message = str(info.value)
    assert "SECRET" not in message
    assert message.endswith(f"or a Model, got {type(model).__qualname__}")


@pytest.mark.parametrize("name", ["SETTINGS", "CONFIG"])
def test_a_model_path_naming_no_model_shows_the_value_s_type_only(
    tmp_path: Path, name: str
) -> None:
    """load(..., model='pkg.mod:NAME') and a file's model = 'pkg.mod:NAME' naming a value
    that is no model (a settings dict, a user's object) printed its repr, key and all."""
    module = "s44_model_settings"
    (tmp_path / f"{module}.py").write_text(
        "SETTINGS = {'model': 'openai:gpt-4o', 'api_key': 'sk-proj-SECRET123'}\n"
        "class Config:\n"
        "    def __repr__(self):\n"
        "        return \"Config(api_key='sk-proj-SECRET123')\"\n"
        "CONFIG = Config()\n"
    )
    path = tmp_path / "f.toml"
    path.write_text('[agents.a]\nmodel = "openai:gpt-4o-mini"\n')
    kind = "dict" if name == "SETTINGS" else "Config"
    try:
        with pytest.raises(UsageError) as refused:
            load(path, model=f"{module}:{name}")
        with pytest.raises(AgentFileError) as info:
            loads(f'[agents.a]\nmodel = "{module}:{name}"\n', name="f.toml", search=str(tmp_path))
    finally:
        sys.modules.pop(module, None)
    assert str(refused.value) == (
        f"load(): model='{module}:{name}' must be a path to a Model, got {kind}"
    )
    assert info.value.problems == (
        f"f.toml:2: agents.a.model: '{module}:{name}' is not a model string nor a Model "
        f"object, got {kind}",
    )


@pytest.mark.parametrize(
    ("name", "got"),
    [
        ("MyModel", "the class MyModel; pass an instance (MyModel(...))"),
        ("Plain", "the class Plain"),
    ],
)
def test_a_model_path_naming_a_class_names_the_class(tmp_path: Path, name: str, got: str) -> None:
    """A path naming a class said "got type" (a file's model) or let a Model class through
    to fail building the agent (load(model=)): both name the class, and a Model class is
    told to be given as an instance, as model() says."""
    module = "s44_model_classes"
    (tmp_path / f"{module}.py").write_text(
        "from toolfold.testing import ScriptedModel\n"
        "class MyModel(ScriptedModel):\n"
        "    pass\n"
        "class Plain:\n"
        "    pass\n"
    )
    text = '[agents.a]\nmodel = "openai:gpt-4o-mini"\n'
    try:
        with pytest.raises(UsageError) as refused:
            loads(text, name="f.toml", search=str(tmp_path), model=f"{module}:{name}")
        with pytest.raises(AgentFileError) as info:
            loads(f'[agents.a]\nmodel = "{module}:{name}"\n', name="f.toml", search=str(tmp_path))
    finally:
        sys.modules.pop(module, None)
    assert (
        str(refused.value)
        == f"loads(): model='{module}:{name}' must be a path to a Model, got {got}"
    )
    assert info.value.problems == (
        f"f.toml:2: agents.a.model: '{module}:{name}' is not a model string nor a Model "
        f"object, got {got}",
    )


@pytest.mark.parametrize("function", ["loads", "from_dict"])
def test_loads_and_from_dict_name_a_bad_model_argument(function: str) -> None:
    """loads() and from_dict() refuse model=3 by their own names."""
    calls = {
        "loads": lambda: loads(AGENT_A, model=3),  # type: ignore[arg-type]
        "from_dict": lambda: from_dict({"agents": {}}, model=3),  # type: ignore[arg-type]
    }
    with pytest.raises(UsageError, match=rf"^{function}\(\): model= must be a model string"):
        calls[function]()


def test_load_still_takes_a_model_string_or_a_model_path() -> None:
    """model='openai:x' and an import path to a Model both load the file as before."""
    with override_models(TestModel()):
        by_string = load(EXAMPLE_FILE, model="openai:gpt-4o-mini")
    by_path = load(EXAMPLE_FILE, model="support_tools:demo_model")
    assert by_string.entry == by_path.entry == "triage"
    assert by_path.get().model is importlib.import_module("support_tools").demo_model


def test_an_agent_with_nested_settings_dumps_with_yaml_safe_dump() -> None:
    """to_dict() writes plain dicts and lists (settings thawed), so yaml.safe_dump takes it and loads back."""
    import yaml

    with override_models(TestModel()):
        agent = Agent(
            "openai:gpt-4o-mini",
            name="writer",
            settings={"stop": ["x"], "extra_body": {"n": [1, {"m": [2]}]}},
        )
        with pytest.raises(yaml.representer.RepresenterError):
            yaml.safe_dump(agent.settings)  # the documented reason to thaw
        text = yaml.safe_dump(agent.to_dict())
        assert yaml.safe_load(text)["agents"]["writer"]["settings"] == agent.settings.thaw()
        assert loads(text, format="yaml").agent() == agent
