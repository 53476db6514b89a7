"""``toolfold`` refusing what would lose or break the user's files, and its edges
(a closed stdout, a run file of another format), run as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_process import COMMAND, environment, into_closed_pipe, toolfold, with_stdout_closed

# A tool module and agent file of these tests: `wait` asks for approval, `big` answers
# with much text (streamed in many chunks), `lim` calls `ping` until max_steps stops it.
TOOLS = '''
from toolfold import tool
from toolfold.testing import FunctionModel


@tool(requires_approval=True)
def danger(x: str) -> str:
    """Needs a person's yes.

    Args:
        x: Anything.
    """
    return "done"


@tool
def ping(x: str) -> str:
    """Answers pong.

    Args:
        x: Anything.
    """
    return "pong"


def _wait(request):
    if request.messages[-1].role == "tool":
        return "finished"
    return FunctionModel.call("danger", {"x": "1"})


def _ping(request):
    results = sum(1 for m in request.messages if m.role == "tool")
    return FunctionModel.call("ping", {"x": "1"}) if results < 3 else f"pinged {results}"


wait = FunctionModel(_wait, name="fake:wait")
big = FunctionModel(lambda request: "x" * 2_000_000, name="fake:big")
lim = FunctionModel(_ping, name="fake:lim")
'''

AGENTS = """
[agents.waits]
model = "guard_tools:wait"
tools = ["guard_tools:danger"]

[agents.big]
model = "guard_tools:big"

[agents.limited]
model = "guard_tools:lim"
tools = ["guard_tools:ping"]
max_steps = 2

[workflows.flow]
kind = "sequence"
steps = ["waits"]
"""


BIG = [*COMMAND, "run", "agents.toml", "--agent", "big"]


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "guard_tools.py").write_text(TOOLS)
    (tmp_path / "agents.toml").write_text(AGENTS)
    return tmp_path / "agents.toml"


def test_a_state_out_naming_the_agent_file_is_refused_before_the_run(tmp_path: Path) -> None:
    """``--state-out`` that is the agent file (or a module it imports) exits 2 and leaves it whole."""
    agents = _folder(tmp_path)
    module = tmp_path / "guard_tools.py"
    for target in (agents, module):
        before = target.read_text()
        for command in (["run", "agents.toml", "--agent", "waits", "go"],):
            proc = toolfold(*command, "--state-out", target.name, cwd=tmp_path)
            assert proc.returncode == 2, proc.stderr
            assert f"--state-out {target.name} is the " in proc.stderr
            assert "the run file would replace it" in proc.stderr
            assert target.read_text() == before
    proc = toolfold(
        "run", "agents.toml", "--agent", "waits", "go", "--state-out", "r.json", cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stderr
    proc = toolfold(
        "resume", "r.json", "--approve", "call_1_0", "--state-out", "agents.toml", cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr
    assert agents.read_text() == AGENTS
    assert json.loads((tmp_path / "r.json").read_text())["state"]["phase"] == "awaiting_approval"


def test_a_new_run_keeps_a_waiting_run_in_the_default_run_file(tmp_path: Path) -> None:
    """A second run without ``--state-out`` exits 2 rather than replace a waiting run's file."""
    _folder(tmp_path)
    first = toolfold("run", "agents.toml", "--agent", "waits", "first task", cwd=tmp_path)
    assert first.returncode == 3, first.stderr
    run_file = tmp_path / "toolfold-run.json"
    kept = run_file.read_text()
    second = toolfold("run", "agents.toml", "--agent", "flow", "second task", cwd=tmp_path)
    assert second.returncode == 2, second.stderr
    assert (
        "toolfold run: toolfold-run.json holds a run that waits for answers (awaiting_approval): "
        "a new run would replace it" in second.stderr
    )
    assert run_file.read_text() == kept
    # with --state-out it runs; once the first run ended, its file is replaced as before
    other = toolfold(
        "run", "agents.toml", "--agent", "flow", "x", "--state-out", "b.json", cwd=tmp_path
    )
    assert other.returncode == 3, other.stderr
    done = toolfold("resume", "toolfold-run.json", "--approve", "call_1_0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    again = toolfold("run", "agents.toml", "--agent", "waits", "third task", cwd=tmp_path)
    assert again.returncode == 3, again.stderr
    assert "third task" in run_file.read_text()


def test_a_stream_into_a_closed_pipe_stops_quietly_and_keeps_the_run(tmp_path: Path) -> None:
    """``--stream | head``: no traceback, exit 141, the run file written and resumable."""
    _folder(tmp_path)
    proc = subprocess.Popen(
        [*BIG, "hi", "--stream"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env=environment(),
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    assert proc.stdout.read(10) == b"x" * 10
    proc.stdout.close()  # the reader goes away, as `head -c 10` does
    code = proc.wait(timeout=60)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert code == 141, err
    assert "Traceback" not in err
    assert "toolfold run: stdout was closed; the run stopped; state written to" in err
    document = json.loads((tmp_path / "toolfold-run.json").read_text())
    assert document["agent"] == "big"


def test_a_closed_stdout_is_said_once_and_the_run_file_written(tmp_path: Path) -> None:
    """``>&-``: no AttributeError traceback; exit 1 saying stdout is closed; ``--state-out`` written."""
    _folder(tmp_path)
    for stream in ([], ["--stream"]):
        out = tmp_path / f"out{len(stream)}.json"
        proc = with_stdout_closed(
            ["run", "agents.toml", "--agent", "big", "hi", "--state-out", out.name, *stream],
            tmp_path,
        )
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert "toolfold run: cannot write to stdout: stdout is closed" in proc.stderr
        assert json.loads(out.read_text())["agent"] == "big"


def test_resume_takes_max_steps_and_message(tmp_path: Path) -> None:
    """A run stopped at max_steps goes on with ``resume --max-steps N``; the refusal names the options."""
    _folder(tmp_path)
    proc = toolfold(
        "run", "agents.toml", "--agent", "limited", "go", "--state-out", "r.json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "the run stopped: max_steps" in proc.stderr
    refused = toolfold("resume", "r.json", cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "resume with --max-steps N above 2" in refused.stderr
    assert "or with --message TEXT to start a new turn" in refused.stderr
    proc = toolfold("resume", "r.json", "--max-steps", "5", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "pinged 3\n"), proc.stderr
    proc = toolfold("resume", "r.json", "--message", "again", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    turns = json.loads((tmp_path / "r.json").read_text())["state"]
    assert "again" in json.dumps(turns)
    waits = toolfold(
        "run", "agents.toml", "--agent", "flow", "x", "--state-out", "f.json", cwd=tmp_path
    )
    assert waits.returncode == 3, waits.stderr
    proc = toolfold("resume", "f.json", "--max-steps", "5", "--approve", "call_1_0", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "--max-steps continues an agent's run; 'flow' is a workflow" in proc.stderr


def test_resume_names_a_file_of_another_format(tmp_path: Path) -> None:
    """A run file of an unknown format, or JSON that is no object, is said to be so (not a bare state)."""
    (tmp_path / "v2.json").write_text('{"format": "toolfold-run/2", "state": {}}')
    (tmp_path / "list.json").write_text("[1]")
    proc = toolfold("resume", "v2.json", cwd=tmp_path)
    assert proc.returncode == 1
    assert "bare state" not in proc.stderr
    assert (
        "v2.json is not a run file this toolfold reads: its format is a string "
        "'toolfold-run/2', not 'toolfold-run/1'" in proc.stderr
    )
    proc = toolfold("resume", "list.json", cwd=tmp_path)
    assert proc.returncode == 1
    assert "bare state" not in proc.stderr
    assert "list.json is not a run file nor a run's state: expected a JSON object, got a list" in (
        proc.stderr
    )


def test_tools_with_an_mcp_server_that_cannot_start_is_bad_input(tmp_path: Path) -> None:
    """``tools`` of a file whose MCP server does not start exits 1 (the file's input), not 4."""
    (tmp_path / "mcp.toml").write_text(
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\n\n[[agents.a.mcp]]\n'
        f'command = {json.dumps(str(tmp_path / "no-such-server"))}\nname = "gone"\n'
    )
    proc = toolfold("tools", "mcp.toml", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "toolfold tools: agent 'a': cannot list its tool sources:" in proc.stderr


def test_a_module_that_exits_while_imported_is_a_problem_of_the_file(tmp_path: Path) -> None:
    """``check`` of a file whose tool module calls sys.exit (or argparse) lists it, exit 1."""
    (tmp_path / "exiting.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "argy.py").write_text(
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--foo', required=True)\n"
        "p.parse_args()\n"
    )
    for module, code in (("exiting", 3), ("argy", 2)):
        (tmp_path / f"{module}.toml").write_text(
            f'[agents.a]\nmodel = "openai:gpt-4o-mini"\ntools = ["{module}:x"]\n'
        )
        proc = toolfold("check", f"{module}.toml", cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        assert (
            f"{module}.toml:3: agents.a.tools[0]: cannot import '{module}:x': the module "
            f"exited while imported (sys.exit), code {code}" in proc.stderr
        )


def test_tools_graph_and_check_stop_quietly_on_a_closed_pipe_or_stdout(tmp_path: Path) -> None:
    """``tools``, ``tools --json``, ``graph``, ``check``: a gone reader exits 141 with no
    traceback; a closed stdout (``>&-``) is said and exits 1, not 0 having printed nothing."""
    _folder(tmp_path)
    for args in (
        ["tools", "agents.toml"],
        ["tools", "agents.toml", "--json"],
        ["graph", "agents.toml"],
        ["check", "agents.toml"],
    ):
        piped = into_closed_pipe(args, tmp_path)
        assert piped.returncode == 141, (args, piped.stderr)
        assert piped.stderr == "", args
        closed = with_stdout_closed(args, tmp_path)
        assert closed.returncode == 1, (args, closed.stderr)
        assert "Traceback" not in closed.stderr
        assert f"toolfold {args[0]}: cannot write to stdout: stdout is closed" in closed.stderr


def test_view_prints_its_output_path_as_the_other_commands_print(tmp_path: Path) -> None:
    """``view``'s output path: a gone reader exits 141 quietly, a closed stdout is said
    (exit 1), and into a cp1252 stdout what it lacks is escaped (exit 0): each was a
    traceback."""
    _folder(tmp_path)
    ran = toolfold(
        "run", "agents.toml", "--agent", "waits", "go", "--state-out", "s\u2713.json", cwd=tmp_path
    )
    assert ran.returncode == 3, ran.stderr
    piped = into_closed_pipe(["view", "s\u2713.json"], tmp_path)
    assert (piped.returncode, piped.stderr) == (141, "")
    closed = with_stdout_closed(["view", "s\u2713.json"], tmp_path)
    assert closed.returncode == 1, closed.stderr
    assert closed.stderr == "toolfold view: cannot write to stdout: stdout is closed\n"
    cp1252 = toolfold("view", "s\u2713.json", cwd=tmp_path, env={"PYTHONIOENCODING": "cp1252"})
    assert (cp1252.returncode, cp1252.stdout) == (0, "s\\u2713.html\n"), cp1252.stderr


def test_a_state_out_hard_linked_to_the_agent_file_is_refused(tmp_path: Path) -> None:
    """``--state-out`` naming a hard link of the agent file exits 2 and leaves the file whole."""
    agents = _folder(tmp_path)
    os.link(agents, tmp_path / "hard.toml")
    proc = toolfold(
        "run", "agents.toml", "--agent", "waits", "go", "--state-out", "hard.toml", cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr
    assert "--state-out hard.toml is the agent file agents.toml" in proc.stderr
    assert agents.read_text() == AGENTS


def test_resume_refusals_name_the_commands_options(tmp_path: Path) -> None:
    """A message or max steps a waiting run cannot take are refused in --message and
    --max-steps terms, not in the Python API's (message=, max_steps=, approvals=)."""
    _folder(tmp_path)
    proc = toolfold(
        "run", "agents.toml", "--agent", "waits", "go", "--state-out", "w.json", cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stderr
    message = toolfold("resume", "w.json", "--message", "more", cwd=tmp_path)
    assert message.returncode == 1, message.stderr
    assert "--message cannot add the message now" in message.stderr
    assert "answer them with --approve ID / --deny ID and resume without --message" in (
        message.stderr
    )
    assert "then add it with `toolfold resume w.json --message TEXT`" in message.stderr
    steps = toolfold("resume", "w.json", "--max-steps", "0", cwd=tmp_path)
    assert steps.returncode == 1, steps.stderr
    assert "--max-steps 0 is below the 1 model calls this turn" in steps.stderr
    for said in (message.stderr, steps.stderr):
        assert "message=" not in said
        assert "max_steps=" not in said
        assert "approvals=" not in said
        assert "given to resume" not in said


DEEP_MODEL = """
from toolfold.testing import FunctionModel


def _next(request):
    last = request.messages[-1]
    if last.role == "tool":
        return "up"
    if not request.tools:
        return "bottom"
    return FunctionModel.call(request.tools[0].name, {"input": "go on"})


model = FunctionModel(_next, name="fake:deep", keep_requests=False)
"""


def _chain(levels: int) -> str:
    parts = ['entry = "a0"\n']
    for i in range(levels):
        parts.append(f'[agents.a{i}]\nmodel = "deep_model:model"\n')
        if i < levels - 1:
            parts.append(f'tools = [{{agent = "a{i + 1}", description = "next"}}]\n')
    return "".join(parts)


def test_a_file_nesting_too_deep_for_graph_or_stream_is_said_not_a_traceback(
    tmp_path: Path,
) -> None:
    """A 600-level chain of agents loads (``check``); ``graph`` of it and ``run --stream`` of
    a 200-level one run out of stack: each says so and exits 1, with no traceback."""
    (tmp_path / "deep_model.py").write_text(DEEP_MODEL)
    (tmp_path / "c600.toml").write_text(_chain(600))
    (tmp_path / "c200.toml").write_text(_chain(200))
    checked = toolfold("check", "c600.toml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    for command, args in (
        ("graph", ["graph", "c600.toml"]),
        ("run", ["run", "c200.toml", "hi", "--stream", "--state-out", "r.json"]),
    ):
        proc = toolfold(*args, cwd=tmp_path)
        assert proc.returncode == 1, (args, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr
        assert (
            f"toolfold {command}: the agent file nests too deep for this command: its agents "
            "used as tools and workflow steps, each inside the next, went past Python's "
            "recursion limit (1000 frames)" in proc.stderr
        )


def test_check_of_a_yaml_alias_loop_names_the_alias(tmp_path: Path) -> None:
    """``check`` of a YAML file whose alias is inside the node it names prints that problem
    (with the alias's line), exit 1: no traceback, no word of agents nested too deep."""
    (tmp_path / "loop.yaml").write_text(
        "agents:\n  a: &me\n    model: openai:gpt-4o-mini\n    tools: [*me]\n"
    )
    proc = toolfold("check", "loop.yaml", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "too deep" not in proc.stderr
    assert (
        "loop.yaml:4: agents.a.tools[0]: the alias *me is inside the node it names "
        "(&me at line 2)" in proc.stderr
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("raise ImportError('mcp needs pydantic>=3')", "ImportError: mcp needs pydantic>=3"),
        ("raise RuntimeError('half-installed')", "RuntimeError: half-installed"),
    ],
)
def test_check_of_a_file_whose_mcp_sdk_is_installed_but_broken_says_so(
    tmp_path: Path, body: str, error: str
) -> None:
    """``check`` of a file with an MCP server imports the mcp SDK: one installed but failing
    in its own import is a problem of the entry giving that error, exit 1 (check said ok, and
    the server's start then failed, a RuntimeError raw)."""
    (tmp_path / "broken" / "mcp").mkdir(parents=True)
    (tmp_path / "broken" / "mcp" / "__init__.py").write_text(body + "\n")
    (tmp_path / "f.toml").write_text(
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\n[[agents.a.mcp]]\ncommand = "x"\n'
    )
    proc = toolfold("check", "f.toml", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "broken")})
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (
        "f.toml:3: agents.a.mcp[0]: an MCP server needs 'mcp' (toolfold[mcp]), installed but "
        f"failing to import: {error}\n"
    ) in proc.stderr
