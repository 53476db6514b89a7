"""The ``toolfold`` agent-file commands, run as real subprocesses on the example file.

Every run uses ``--model support_tools:demo_model`` (a test model named by import
path, found next to the file), so nothing touches the network. The interactive
approval runs under a real pseudo-terminal.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import pty
import re
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest
from child_processes import dies_with_this_process
from cli_process import COMMAND, ROOT, environment, interruptible, read_until, toolfold

from toolfold import RunState
from toolfold._cli import _run_file_after_answers as cli_run_file_after_answers
from toolfold._cli import main as cli_main
from toolfold._cli import parser as cli_parser
from toolfold._commands import _read_line

EXAMPLE = ROOT / "examples" / "agent_files" / "support.toml"
FILES = Path(__file__).resolve().parent
DEMO = ["--model", "support_tools:demo_model"]


_INTERRUPTED = (
    "toolfold run: interrupted; state written to toolfold-run.json; continue with: "
    "toolfold resume toolfold-run.json\n"
)
_WAITS = (
    b"toolfold run: stopping once the running tool or model call returns; "
    b"press Ctrl-C again to stop now (what still runs then runs again on resume)\n"
)


def _interrupted(proc: subprocess.Popen[bytes], until: bytes, then: Callable[[], object]) -> None:
    """Read ``proc``'s stderr until ``until`` is said, do ``then`` (open the gate, or press
    Ctrl-C again), and check that it exits 130 saying where the run's file is written."""
    try:
        seen = read_until(proc.stderr, until, "no notice", "stderr")
        then()
        _, errors = proc.communicate(timeout=60)
    except BaseException:
        proc.kill()  # (the with then closes its pipes and reaps it)
        raise
    assert proc.returncode == 130, seen + errors
    assert (seen + errors).decode().endswith(_INTERRUPTED)


def _open_fifo(gate: Path) -> None:
    """Write the line a tool (or model) held at the FIFO ``gate`` waits for."""
    with open(gate, "w", encoding="utf-8") as opened:
        opened.write("go\n")


def _run_file_state(folder: Path, name: str = "toolfold-run.json") -> RunState:
    """The state in the run file ``name`` of ``folder``."""
    return RunState.from_json(json.dumps(json.loads((folder / name).read_text())["state"]))


@pytest.mark.parametrize("command", ["", "run", "resume", "tools", "graph", "check", "view"])
def test_every_command_has_help(command: str, tmp_path: Path) -> None:
    """``--help`` works on the command and each subcommand and lists the exit codes: ``view``
    only those it returns (it listed 3, 4 and 130, which only a run gives)."""
    proc = toolfold(*([command] if command else []), "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage: toolfold" in proc.stdout
    shown = " ".join(proc.stdout.split())
    assert ("3 the run waits" in shown) is (command != "view")
    assert "0 done, 1 bad input" in shown
    if command == "view":
        assert "130" not in shown
        assert "141 stdout closed by its reader" in shown


def _help(*command: str, capsys: pytest.CaptureFixture[str]) -> str:
    """The ``--help`` of ``toolfold COMMAND``, on one line."""
    with pytest.raises(SystemExit) as exited:
        cli_main([*command, "--help"])
    assert exited.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_help_reads_as_text_and_names_each_default(capsys: pytest.CaptureFixture[str]) -> None:
    """The top ``--help`` is plain text (it printed the module docstring's reST,
    ````The ``toolfold`` command line.````, and "the local: model's server"), ``view``
    describes itself as the other commands do, and ``--state-out`` names its default
    (it said "see docs")."""
    top = _help(capsys=capsys)
    assert "``" not in top
    assert "local:" not in top
    assert "Run, resume and inspect agent files;" in top
    view = _help("view", capsys=capsys)
    assert "Write the run in STATE" in view
    assert "[--title TITLE] STATE " in view  # (the usage said `state`, the text STATE)
    assert "] STATE Continue a run" in _help("resume", capsys=capsys)  # required, not [STATE]
    assert "(default: toolfold-run.json in the current folder)" in _help("run", capsys=capsys)
    assert "(default: the run file resumed, STATE)" in _help("resume", capsys=capsys)


def test_version_prints_the_version(tmp_path: Path) -> None:
    """``toolfold --version`` prints toolfold's version and exits 0 (no command needed)."""
    import toolfold as package

    proc = toolfold("--version", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"toolfold {package.__version__}\n"


@pytest.mark.parametrize(
    ("command", "listed"),
    [
        (["local"], "usage: toolfold local [-h] {build,serve,status,clean} ..."),
        (["mcp"], "usage: toolfold mcp [-h] {serve} ..."),
        (["mcp", "serve"], "usage: toolfold mcp serve [-h] [--http] [--host HOST]"),
        (["local", "serve"], "usage: toolfold local serve [-h] [--port PORT] [model]"),
    ],
)
def test_local_and_mcp_help_lists_their_subcommands(
    command: list[str], listed: str, tmp_path: Path
) -> None:
    """``toolfold local --help`` and ``toolfold mcp --help`` (and their subcommands') show the
    sub-command line's own help, not a bare ``rest`` argument."""
    for flag in ("--help", "-h"):
        proc = toolfold(*command, flag, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(listed), proc.stdout
        assert "rest" not in proc.stdout


def test_the_installed_console_script_runs(tmp_path: Path) -> None:
    """The ``toolfold`` entry point pip installed next to the interpreter runs the same commands."""
    script = Path(sys.executable).parent / ("toolfold.exe" if os.name == "nt" else "toolfold")
    assert script.is_file(), f"pip did not install the console script at {script}"
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.run(
        [str(script), "check", str(EXAMPLE)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == toolfold("check", str(EXAMPLE), cwd=tmp_path).stdout


def test_a_wrong_command_line_exits_2(tmp_path: Path) -> None:
    """A missing argument is argparse's exit code 2, with the usage on stderr."""
    proc = toolfold("run", str(EXAMPLE), cwd=tmp_path)
    assert proc.returncode == 2
    assert "the following arguments are required: PROMPT" in proc.stderr


@pytest.mark.parametrize(
    "line",
    [
        ["--approve", "call_1", "--deny", "call_2=no", "run.json"],
        ["run.json", "--approve", "call_1", "--deny", "call_2=no"],
        ["--deny", "call_2=no", "run.json", "--approve", "call_1"],
        ["--deny", "call_2=no", "--approve", "call_1", "run.json"],
        ["--approve", "call_1", "run.json", "--deny", "call_2=no"],
    ],
    ids=["flags-first", "file-first", "mixed", "two-flags-first", "file-inside"],
)
def test_resume_takes_its_run_file_before_or_after_the_answers(line: list[str]) -> None:
    """A run file after the answers is the run file (``--approve ID RUN.json`` took
    RUN.json for a second id, and exited 2 with no STATE)."""
    args = cli_parser().parse_args(["resume", *line])
    assert cli_run_file_after_answers(args) is None
    assert (args.state, args.approve, args.deny, args.result) == (
        "run.json",
        ["call_1"],
        ["call_2=no"],
        [],
    )


def test_resume_flags_take_several_answers_as_the_docs_said(tmp_path: Path) -> None:
    """``resume RUN.json --approve A B`` approves both, as before (``--approve ID...``;
    round one had made each flag take one value, and this an error); repeating a flag adds
    to it. The run file after them is taken back when it exists or ends in .json."""
    parse = cli_parser().parse_args
    args = parse(["resume", "run.json", "--approve", "a", "b", "--approve", "c", "--deny", "d"])
    assert (args.state, args.approve, args.deny) == ("run.json", ["a", "b", "c"], ["d"])
    run_file = tmp_path / "waiting"  # (no .json: found as a file)
    run_file.write_text("{}", encoding="utf-8")
    for line in (
        ["--approve", "a", "b", str(run_file)],
        ["--approve", "a", "--approve", "b", str(run_file)],
        ["--result", 'a="x"', "b=1", str(run_file)],
    ):
        args = parse(["resume", *line])
        assert cli_run_file_after_answers(args) is None
        assert args.state == str(run_file)
        assert [*args.approve, *args.result] in (["a", "b"], ['a="x"', "b=1"])
    args = parse(["resume", "--approve", "run.json", "b", "run.json"])  # (the last one)
    assert cli_run_file_after_answers(args) is None
    assert (args.state, args.approve) == ("run.json", ["run.json", "b"])


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (
            ["--approve", "a", "b"],
            "required: STATE (each value after a flag was taken as one of its answers: "
            "--approve a b; give the run file first: toolfold resume RUN.json --approve ID)",
        ),
        (
            ["--approve", "a", "x.json", "--deny", "b", "y.json"],
            "required: STATE (more than one flag ends on what may be a run file: "
            "--approve ... x.json, --deny ... y.json; give it first",
        ),
        (["--deny", "a", "b=c.json"], "--deny a b=c.json; give the run file first"),
        (["--approve", "a"], "the following arguments are required: STATE\n"),
        (["--result", "a=1", "b=" + "x" * 300], "; give the run file first"),
    ],
    ids=["no-run-file", "two-run-files", "an-answer", "one-value", "a-long-answer"],
)
def test_resume_without_a_run_file_says_where_the_values_went(
    line: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No run file among the values a flag took (or more than one) exits 2 as argparse
    does for a missing STATE, saying which values each flag took."""
    with pytest.raises(SystemExit) as exited:
        cli_main(["resume", *line])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "toolfold resume: error: the following arguments are required: STATE" in err
    assert says in err + "\n"


@pytest.mark.parametrize(
    "line",
    [
        ["r.json", "--message", "hello", "world"],
        ["r.json", "--max-steps", "5", "6"],
        ["r.json", "--aprove", "A"],
        ["r.json", "--approve", "A", "--json", "B"],
    ],
)
def test_resume_with_an_extra_argument_gets_argparse_s_error_alone(
    line: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """An extra argument is argparse's ``unrecognized arguments``, with no hint about
    --approve (round one added "take one value each: repeat the flag" to every one)."""
    with pytest.raises(SystemExit) as exited:
        cli_main(["resume", *line])
    assert exited.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("toolfold: error: unrecognized arguments: ")
    assert "--approve" not in err[-1]


def test_resume_approves_with_the_run_file_last(tmp_path: Path) -> None:
    """``toolfold resume --approve ID RUN.json`` resumes the run."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "I want a refund for A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    proc = toolfold("resume", "--approve", "call_4_0", "toolfold-run.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "order A17 refunded\n"


def test_run_prints_the_answer_and_compact_tool_lines(tmp_path: Path) -> None:
    """``run`` prints the answer on stdout and one line per tool call and result on stderr."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "Where is order A17?", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Order status: shipped on 2 March.\n"
    assert proc.stderr.splitlines() == [
        '→ researcher({"input": "Where is order A17?"}) [call_2_0]',
        "← researcher: Order status: shipped on 2 March.",
    ]


def test_run_stream_shows_sub_agents_and_json_prints_the_state(tmp_path: Path) -> None:
    """``--stream`` shows the sub-agent's calls indented; ``--json`` prints a loadable state."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "--stream", "Where is A17?", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Order status: shipped on 2 March.\n"
    assert '  [researcher] → lookup_order({"order": "A17"}) [call_2_0]' in proc.stderr
    proc = toolfold("run", str(EXAMPLE), *DEMO, "--json", "Where is A17?", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    state = RunState.from_json(proc.stdout)
    assert state.last_text == "Order status: shipped on 2 March."


def test_a_waiting_run_writes_its_file_exits_3_and_resumes(tmp_path: Path) -> None:
    """Without a terminal, a run waiting for approval exits 3; ``resume --approve`` finishes it."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "I want a refund for A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "the run waits for approvals: call_4_0 (refund)" in proc.stderr
    run_file = tmp_path / "toolfold-run.json"
    document = json.loads(run_file.read_text())
    assert (document["format"], document["agent"]) == ("toolfold-run/1", "triage")
    assert document["file"] == str(EXAMPLE)
    view = toolfold("view", str(run_file), "-o", "run.html", cwd=tmp_path)
    assert view.returncode == 0, view.stderr  # `view` reads a run file too
    assert "refund" in (tmp_path / "run.html").read_text()
    proc = toolfold("resume", str(run_file), "--approve", "call_4_0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "order A17 refunded\n"
    assert "← refund: order A17 refunded" in proc.stderr
    # The run file now holds the ended run: the same answer cannot run the refund twice.
    assert json.loads(run_file.read_text())["state"]["phase"] == "finished"
    again = toolfold("resume", str(run_file), "--approve", "call_4_0", cwd=tmp_path)
    assert again.returncode == 1
    assert "no call 'call_4_0' waits for an approval; waiting: none" in again.stderr
    assert "refund(" not in again.stderr


def test_a_waiting_run_with_json_prints_its_state(tmp_path: Path) -> None:
    """``run --json`` that waits (exit 3) prints the waiting state on stdout, which resumes."""
    for stream in ([], ["--stream"]):
        proc = toolfold("run", str(EXAMPLE), *DEMO, *stream, "--json", "refund A17", cwd=tmp_path)
        assert proc.returncode == 3, proc.stderr
        state = RunState.from_json(proc.stdout)
        assert [c.id for c in state.pending_approvals] == ["call_4_0"]
        # (the next run would not replace the waiting run's file: moved aside)
        (tmp_path / "toolfold-run.json").rename(tmp_path / f"waiting{len(stream)}.json")
    (tmp_path / "bare.json").write_text(proc.stdout)
    proc = toolfold(
        "resume", "bare.json", "--file", str(EXAMPLE), *DEMO, "--approve", "call_4_0", cwd=tmp_path
    )
    assert (proc.returncode, proc.stdout) == (0, "order A17 refunded\n"), proc.stderr


def test_two_resumes_of_one_run_file_at_once_run_its_tool_once(tmp_path: Path) -> None:
    """A second ``resume`` of a run file while the first still runs its approved tool is
    refused at once (exit 1, nothing run); the first goes on and writes the file back."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    (tmp_path / "calc.toml").write_text(
        '[agents.calc]\nmodel = "files_helpers:model"\ntools = ["files_helpers:add_at_gate"]\n'
    )
    env = {"PYTHONPATH": str(FILES), "TOOLFOLD_TEST_GATE": str(gate)}
    proc = toolfold("run", "calc.toml", "go", cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stderr
    first = subprocess.Popen(
        [*COMMAND, "resume", "toolfold-run.json", "--approve", "call_1_0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env=environment(env),
        preexec_fn=dies_with_this_process(),
    )
    try:
        # the first runs the tool, which holds at the gate
        seen = read_until(first.stderr, b"adding\n", "the tool did not start", "stderr")
        second = toolfold(
            "resume", "toolfold-run.json", "--approve", "call_1_0", cwd=tmp_path, env=env
        )
        _open_gate(gate, first)
        out, errors = first.communicate(timeout=60)
    except BaseException:
        first.kill()
        first.wait()
        raise
    assert second.returncode == 1, second.stderr
    assert second.stderr == (
        "toolfold resume: toolfold-run.json is held by another toolfold process (a resume of it, "
        "or a run writing it; the run file is locked): nothing ran and toolfold-run.json is "
        "unchanged; resume it once that one has ended\n"
    )
    assert (first.returncode, out) == (0, b"result: 5\n"), seen + errors
    assert (tmp_path / "ran.log").read_text() == "add 2 3\n"  # the tool ran once
    again = toolfold("resume", "toolfold-run.json", "--approve", "call_1_0", cwd=tmp_path, env=env)
    assert again.returncode == 1  # the file holds the ended run: nothing waits
    assert "no call 'call_1_0' waits for an approval; waiting: none" in again.stderr


def _open_gate(gate: Path, holder: subprocess.Popen[bytes]) -> None:
    """Write the line ``holder``'s tool waits for on the FIFO ``gate``, failing at once if it died.

    Opened without blocking: with no reader (the tool not at the gate yet, or dead) the open
    fails with ENXIO instead of waiting for one forever; between tries it waits on the
    holder's exit, so a dead tool fails the test at once, and for 60 s at most in all.
    """
    deadline = time.monotonic() + 60
    while True:
        try:
            handle = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
        with contextlib.suppress(subprocess.TimeoutExpired):
            holder.wait(timeout=0.05)
        assert holder.returncode is None, "the tool's process ended before it opened the gate"
        assert time.monotonic() < deadline, "the tool never opened the gate"
    try:
        os.write(handle, b"go\n")
    finally:
        os.close(handle)


def test_resume_denies_with_a_reason_and_reads_a_bare_state(tmp_path: Path) -> None:
    """``--deny ID=REASON`` reaches the model; a bare state resumes with ``--file``."""
    out = tmp_path / "waiting.json"
    proc = toolfold(
        "run", str(EXAMPLE), *DEMO, "--state-out", str(out), "refund A17 please", cwd=tmp_path
    )
    assert proc.returncode == 3, proc.stderr
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(json.loads(out.read_text())["state"]))
    proc = toolfold("resume", str(bare), "--deny", "call_4_0=not today", cwd=tmp_path)
    assert proc.returncode == 1
    assert "give the agent file with --file FILE" in proc.stderr
    proc = toolfold(
        "resume", str(bare), "--file", str(EXAMPLE), *DEMO, "--deny", "call_4_0=not today",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "✗ refund: " in proc.stderr
    assert "not today" in proc.stdout


def test_a_state_that_does_not_fit_the_agent_is_bad_input(tmp_path: Path) -> None:
    """Resuming with another agent, or with a file whose agent changed, is refused with exit 1
    (bad input, not a failed run 4), naming the agent, its file and what does not fit; nothing
    runs and the run file is left as it was, so the right resume still works."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "I want a refund for A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    run_file = tmp_path / "toolfold-run.json"
    kept = run_file.read_text()
    changed = tmp_path / "support.toml"  # the same file, its agents' instructions edited
    changed.write_text(EXAMPLE.read_text().replace('instructions = "', 'instructions = "Now: '))
    env = {"PYTHONPATH": str(EXAMPLE.parent)}
    for options, reason in (
        (
            ["--agent", "researcher"],
            f"agent 'researcher' of {EXAMPLE} (nothing ran; {run_file} is unchanged): the run "
            "was started by 'triage', not by 'researcher'; resume it with --agent triage",
        ),
        (  # the agent the run was handed to: the API lets it go on, the run file does not
            ["--agent", "refunds"],
            f"agent 'refunds' of {EXAMPLE} (nothing ran; {run_file} is unchanged): the run "
            "was started by 'triage', not by 'refunds'; resume it with --agent triage",
        ),
        (
            ["--file", str(changed)],
            f"agent 'triage' of {changed} (nothing ran; {run_file} is unchanged): the resuming "
            "agent's instructions differ from the run's",
        ),
    ):
        proc = toolfold(
            "resume", str(run_file), "--approve", "call_4_0", *options, cwd=tmp_path, env=env
        )
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.startswith(f"toolfold resume: cannot resume {run_file} with {reason}")
        assert proc.stdout == ""
        assert run_file.read_text() == kept
    proc = toolfold("resume", str(run_file), "--approve", "call_4_0", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "order A17 refunded\n"), proc.stderr


def test_resume_refuses_an_agent_that_did_not_start_the_run_naming_both(tmp_path: Path) -> None:
    """``resume --agent`` (or a bare state's ``--file`` entry) naming another agent of the file
    than the one that started the run is refused with exit 1, naming both; the run file is kept
    and the agent that started the run resumes it."""
    two = tmp_path / "two.toml"
    agent = '[agents.{}]\nmodel = "files_helpers:model"\ntools = ["files_helpers:add_approved"]\n'
    two.write_text('entry = "beta"\n' + agent.format("alpha") + agent.format("beta"))
    env = {"PYTHONPATH": str(FILES)}
    proc = toolfold("run", str(two), "--agent", "alpha", "go", cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stderr
    run_file = tmp_path / "toolfold-run.json"
    kept = run_file.read_text()
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(json.loads(kept)["state"]))
    for state, options in ((run_file, ["--agent", "beta"]), (bare, ["--file", str(two)])):
        proc = toolfold(
            "resume", str(state), "--approve", "call_1_0", *options, cwd=tmp_path, env=env
        )
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr == (
            f"toolfold resume: cannot resume {state} with agent 'beta' of {two} (nothing ran; "
            f"{state} is unchanged): the run was started by 'alpha', not by 'beta'; resume it "
            "with --agent alpha\n"
        )
        assert proc.stdout == ""
    assert run_file.read_text() == kept
    proc = toolfold("resume", str(run_file), "--approve", "call_1_0", cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stdout) == (0, "result: 5\n"), proc.stderr


def test_a_usage_error_once_the_run_is_under_way_is_a_failed_run(tmp_path: Path) -> None:
    """A UsageError raised by the run itself (a test model out of answers), which carries the
    run's state, is a failed run: exit 4, the run file written."""
    (tmp_path / "empty_model.py").write_text(
        "from toolfold.testing import ScriptedModel\n\nmodel = ScriptedModel([])\n"
    )
    (tmp_path / "a.toml").write_text('[agents.a]\nmodel = "empty_model:model"\n')
    proc = toolfold("run", "a.toml", "hi", cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.startswith("toolfold run: the run failed: UsageError: ScriptedModel has")
    state = json.loads((tmp_path / "toolfold-run.json").read_text())["state"]
    assert state["phase"] == "awaiting_model"


def test_resume_refuses_unknown_ids_and_bad_results(tmp_path: Path) -> None:
    """An id no call waits under exits 1 naming the waiting ones; ``--result`` must be JSON."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 3
    proc = toolfold("resume", "toolfold-run.json", "--approve", "call_9", cwd=tmp_path)
    assert proc.returncode == 1
    assert "no call 'call_9' waits for an approval; waiting: call_4_0" in proc.stderr
    proc = toolfold("resume", "toolfold-run.json", "--result", "call_4_0=not json", cwd=tmp_path)
    assert proc.returncode == 2
    assert "not JSON" in proc.stderr
    proc = toolfold("resume", "missing.json", cwd=tmp_path)
    assert proc.returncode == 1
    assert "cannot read missing.json" in proc.stderr
    (tmp_path / "cut.json").write_text('{"format": "toolfold-run/1", "file": "x.toml"}')
    proc = toolfold("resume", "cut.json", "--approve", "call_4_0", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr == (
        "toolfold resume: cut.json does not load as a run's state: the run file has no 'state'\n"
    )


def test_an_id_both_approved_and_denied_is_a_wrong_command_line(tmp_path: Path) -> None:
    """``--approve X --deny X`` exits 2 naming the id, instead of one answer silently winning."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 3
    proc = toolfold(
        "resume", "toolfold-run.json", "--deny", "call_4_0=no", "--approve", "call_4_0",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "call_4_0 is answered more than once" in proc.stderr
    assert "refund" not in proc.stdout  # nothing ran: the run still waits
    assert json.loads((tmp_path / "toolfold-run.json").read_text())["state"]["phase"] == (
        "awaiting_approval"
    )


def test_a_run_file_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path) -> None:
    """``--state-out`` in a folder that does not exist exits 1 before any model call, not a traceback."""
    out = tmp_path / "no_such_folder" / "run.json"
    proc = toolfold("run", str(EXAMPLE), *DEMO, "--state-out", str(out), "refund A17", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"toolfold run: cannot write the run file {out}: ")
    assert "Traceback" not in proc.stderr
    assert "→" not in proc.stderr  # no step ran
    (tmp_path / "a_folder").mkdir()  # found out only when writing: the state is not lost
    proc = toolfold(
        "run", str(EXAMPLE), *DEMO, "--state-out", "a_folder", "refund A17", cwd=tmp_path
    )
    assert proc.returncode == 1, proc.stderr
    assert "cannot write the run file a_folder: " in proc.stderr
    document = json.loads(proc.stdout)
    assert RunState.from_json(json.dumps(document["state"])).phase == "awaiting_approval"


def test_manual_tool_results_come_from_the_command_line(tmp_path: Path) -> None:
    """A call returned to the caller exits 3; ``--result ID=JSON`` answers it."""
    shutil.copy(EXAMPLE.parent / "support_tools.py", tmp_path)
    (tmp_path / "manual.toml").write_text(
        '[agents.clerk]\nmodel = "support_tools:demo_model"\n'
        'tools = ["support_tools:lookup_order"]\nauto_execute_tools = false\n'
    )
    proc = toolfold("run", "manual.toml", "Where is A17?", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "the run waits for tool results: call_1_0 (lookup_order)" in proc.stderr
    proc = toolfold("resume", "toolfold-run.json", "--result", 'call_1_0="lost"', cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Order status: lost.\n"


def test_an_answer_of_the_wrong_kind_names_the_options_that_answer_the_call(
    tmp_path: Path,
) -> None:
    """``--result`` for a call waiting for an approval, or ``--approve``/``--deny`` for one
    waiting for a result, exits 1 saying what the call waits for and which options answer it
    (not "waiting: none"), and runs nothing."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    kept = (tmp_path / "toolfold-run.json").read_text()
    proc = toolfold("resume", "toolfold-run.json", "--result", "call_4_0=1", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    assert proc.stderr == (
        "toolfold resume: call 'call_4_0' waits for an approval, not a result: answer it with "
        "--approve call_4_0 or --deny call_4_0[=REASON], not --result\n"
    )
    assert (tmp_path / "toolfold-run.json").read_text() == kept
    shutil.copy(EXAMPLE.parent / "support_tools.py", tmp_path)
    (tmp_path / "manual.toml").write_text(
        '[agents.clerk]\nmodel = "support_tools:demo_model"\n'
        'tools = ["support_tools:lookup_order"]\nauto_execute_tools = false\n'
    )
    proc = toolfold("run", "manual.toml", "--state-out", "m.json", "Where is A17?", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    for answer in (["--approve", "call_1_0"], ["--deny", "call_1_0=no"]):
        proc = toolfold("resume", "m.json", *answer, cwd=tmp_path)
        assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
        assert proc.stderr == (
            "toolfold resume: call 'call_1_0' waits for a result, not an approval: answer it "
            "with --result call_1_0=JSON, not --approve or --deny\n"
        )


_HANDING_TEAM = """\
from toolfold import tool
from toolfold.testing import FunctionModel


@tool(requires_approval=True)
def refund(order: str) -> str:
    \"\"\"Refund an order.

    Args:
        order: The order.
    \"\"\"
    return f"refunded {order}"


def _lead(request):
    last = request.messages[-1]
    if last.role == "tool":
        return "done"
    return FunctionModel.call("support", {"input": last.text})


def _support(request):
    return FunctionModel.call("transfer_to_refunds", {})


def _refunds(request):
    last = request.messages[-1]
    if last.role == "tool" and last.tool_results[0].tool_name == "refund":
        return "refunded"
    return FunctionModel.call("refund", {"order": "A17"})


lead = FunctionModel(_lead)
support = FunctionModel(_support)
refunds = FunctionModel(_refunds)
"""


def test_streamed_sub_run_lines_name_the_agent_running_them(tmp_path: Path) -> None:
    """``--stream`` labels a sub-run's lines with the agents down its path: two Parallel
    branches calling the same agent tool are told apart (``[east/support]``, ``[west/support]``),
    and after a handoff in the sub-run its lines name the agent handed to (``[east/refunds]``),
    in a later ``resume --stream`` too (they said ``[support]`` for all of them)."""
    (tmp_path / "team.py").write_text(_HANDING_TEAM)
    (tmp_path / "team.toml").write_text(
        'entry = "par"\n[agents.refunds]\nmodel = "team:refunds"\ntools = ["team:refund"]\n'
        '[agents.support]\nmodel = "team:support"\nhandoffs = ["refunds"]\n'
        '[agents.east]\nmodel = "team:lead"\ntools = [{ agent = "support" }]\n'
        '[agents.west]\nmodel = "team:lead"\ntools = [{ agent = "support" }]\n'
        '[workflows.par]\nkind = "parallel"\nsteps = ["east", "west"]\n'
    )
    env = {"PYTHONPATH": str(tmp_path)}
    proc = toolfold("run", "team.toml", "--stream", "refund A17", cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    for branch in ("east", "west"):
        assert f'  [{branch}] → support({{"input": "refund A17"}}) [call_1_0]' in lines
        assert f"    [{branch}/support] → transfer_to_refunds({{}}) [call_1_0]" in lines
        assert f"    [{branch}/support] ← transfer_to_refunds: Transferred to refunds." in lines
        waits = (
            f'    [{branch}/refunds] → refund({{"order": "A17"}}) [call_3_0] (waits for approval)'
        )
        assert waits in lines
    keys = ["--approve", "east/call_1_0/call_3_0", "--approve", "west/call_1_0/call_3_0"]
    proc = toolfold("resume", "toolfold-run.json", "--stream", *keys, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    for branch in ("east", "west"):
        assert f"    [{branch}/refunds] ← refund: refunded A17" in lines


_FORGING_TEAM = """\
from toolfold import tool
from toolfold.testing import FunctionModel


@tool
def note(text: str) -> str:
    \"\"\"Note a text.

    Args:
        text: The text.
    \"\"\"
    return "Transferred to refunds."


@tool
def lookup(order: str) -> str:
    \"\"\"Look an order up.

    Args:
        order: The order.
    \"\"\"
    return f"{order}: paid"


def _lead(request):
    answered = sum(1 for message in request.messages if message.role == "tool")
    if answered < 2:  # (the same call id twice: the second sub-run is a new one)
        asked = "hand" if answered == 0 else "forge"
        return FunctionModel.call("support", {"input": asked}, id="c0")
    return "done"


def _support(request):
    last = request.messages[-1]
    if last.role != "tool":
        if last.text == "hand":
            return FunctionModel.call("transfer_to_refunds", {})
        return FunctionModel.call("note", {"text": "x"})
    if last.tool_results[0].tool_name == "note":
        return FunctionModel.call("lookup", {"order": "F1"})
    return "support done"


lead = FunctionModel(_lead)
support = FunctionModel(_support)
refunds = FunctionModel(lambda request: "refunds done")
"""


def test_a_streamed_sub_run_is_relabelled_by_a_handoff_only(tmp_path: Path) -> None:
    """``--stream`` relabels a sub-run only on a handoff's own result: a plain tool returning
    "Transferred to refunds." leaves it ``[support]``, and a later sub-run under a call id the
    model reused starts as ``[support]`` again (both showed ``[refunds]``)."""
    (tmp_path / "forging.py").write_text(_FORGING_TEAM)
    (tmp_path / "forging.toml").write_text(
        'entry = "lead"\n[agents.refunds]\nmodel = "forging:refunds"\n'
        '[agents.support]\nmodel = "forging:support"\n'
        'tools = ["forging:note", "forging:lookup"]\nhandoffs = ["refunds"]\n'
        '[agents.lead]\nmodel = "forging:lead"\ntools = [{ agent = "support" }]\n'
    )
    env = {"PYTHONPATH": str(tmp_path)}
    proc = toolfold("run", "forging.toml", "--stream", "go", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert "  [support] ← transfer_to_refunds: Transferred to refunds." in lines  # (handed)
    at = lines.index('→ support({"input": "forge"}) [c0]')
    assert [line.split(" ", 4)[:4] for line in lines[at + 1 : at + 5]] == [
        ["", "", "[support]", "→"],  # note (not the first sub-run's [refunds])
        ["", "", "[support]", "←"],
        ["", "", "[support]", "→"],  # lookup (not [refunds]: note is no handoff)
        ["", "", "[support]", "←"],
    ], lines


_PYTHON_TEAM = """
from toolfold import Agent, tool
from toolfold.testing import FunctionModel


@tool
def lookup(order: str) -> str:
    \"\"\"Look an order up.

    Args:
        order: The order.
    \"\"\"
    return f"{order}: paid"


def _lead(request):
    if request.messages[-1].role == "tool":
        return "done"
    return FunctionModel.call("desk", {"input": "help"}, id="c0")


def _support(request):
    if request.messages[-1].role == "tool":
        return "support done"
    return FunctionModel.call("transfer_to_refunds", {})


def _refunds(request):
    if request.messages[-1].role == "tool" and request.messages[-1].tool_results[0].tool_name == "lookup":
        return "refunds done"
    return FunctionModel.call("lookup", {"order": "R1"})


lead = FunctionModel(_lead)
refunds = Agent(FunctionModel(_refunds), name="refunds", tools=[lookup])
support = Agent(FunctionModel(_support), name="support", handoffs=[refunds])
desk = support.as_tool("desk")
"""


def test_a_streamed_sub_run_of_a_python_agent_is_relabelled_by_its_handoff(
    tmp_path: Path,
) -> None:
    """``run --stream`` relabels the sub-run of an agent the file reaches only as a Python
    object (a tool made with ``as_tool``) once its handoff hands it on, as ``resume`` does (it
    stayed ``[desk]``: only the handoffs of the file's [agents] counted)."""
    (tmp_path / "pyteam.py").write_text(_PYTHON_TEAM)
    (tmp_path / "pyteam.toml").write_text(
        'entry = "lead"\n[agents.lead]\nmodel = "pyteam:lead"\ntools = ["pyteam:desk"]\n'
    )
    env = {"PYTHONPATH": str(tmp_path)}
    proc = toolfold("run", "pyteam.toml", "--stream", "go", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    at = lines.index("  [desk] ← transfer_to_refunds: Transferred to refunds.")
    assert lines[at + 1 : at + 3] == [
        '  [refunds] → lookup({"order": "R1"}) [call_3_0]',
        "  [refunds] ← lookup: R1: paid",
    ], lines


def test_ctrl_c_writes_the_run_file_and_resume_goes_on(tmp_path: Path) -> None:
    """Ctrl-C mid-run exits 130 with the run file written; resuming it answers, the step kept."""
    (tmp_path / "adds.toml").write_text(
        '[agents.adder]\nmodel = "files_helpers:model"\ntools = ["files_helpers:add_interrupted"]\n'
    )
    env = {"PYTHONPATH": str(Path(__file__).parent)}
    proc = toolfold("run", "adds.toml", "add 2 and 3", cwd=tmp_path, env=env)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == _INTERRUPTED
    assert _run_file_state(tmp_path).phase == "running_tools"
    proc = toolfold("resume", "toolfold-run.json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "result: 5\n"


def test_ctrl_c_in_a_streamed_sub_agent_keeps_what_it_finished(tmp_path: Path) -> None:
    """``run --stream`` interrupted by Ctrl-C while a sub-agent (an agent used as a tool) waits
    on its second tool: the run file holds the sub-agent where it stopped, and resuming runs
    none of its finished tools again."""
    (tmp_path / "team.toml").write_text(
        'entry = "lead"\n\n[agents.lead]\nmodel = "files_helpers:lead_and_worker"\n'
        'tools = [{ agent = "worker" }]\n\n[agents.worker]\n'
        'model = "files_helpers:lead_and_worker"\n'
        'tools = ["files_helpers:note", "files_helpers:press_ctrl_c"]\n'
    )
    proc = subprocess.run(
        [*COMMAND, "run", "team.toml", "--stream", "go"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment({"PYTHONPATH": str(FILES)}),
        stdin=subprocess.DEVNULL,
        timeout=60,
        # (a process started in the background inherits SIGINT ignored: Python's own handler)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.endswith(_INTERRUPTED)
    assert "stopping once" not in proc.stderr  # an async tool is cancelled: nothing waits
    proc = toolfold("resume", "toolfold-run.json", cwd=tmp_path, env={"PYTHONPATH": str(FILES)})
    assert (proc.returncode, proc.stdout) == (0, "lead: worker: noted x, pressed x\n"), proc.stderr
    assert (tmp_path / "ran.log").read_text() == "note x\n"  # not run again


def test_ctrl_c_that_waits_for_a_blocking_tool_says_so(tmp_path: Path) -> None:
    """``run --stream`` interrupted while a sub-agent's sync tool runs tells the user at once
    that it stops once the tool returns (it is not stuck); then it keeps the run."""
    gate = tmp_path / "gate"
    with _team_run(tmp_path, gate) as proc:

        def said_while_held() -> None:
            assert not (tmp_path / "ran.log").exists()  # said while the tool still ran
            _open_fifo(gate)

        _interrupted(proc, _WAITS, said_while_held)
    proc2 = toolfold("resume", "toolfold-run.json", cwd=tmp_path, env={"PYTHONPATH": str(FILES)})
    assert (proc2.returncode, proc2.stdout) == (0, "lead: worker: held x\n"), proc2.stderr
    assert (tmp_path / "ran.log").read_text() == "held x\n"  # the tool's return was kept


def test_a_second_ctrl_c_keeps_a_streamed_sub_agent_where_it_stood(tmp_path: Path) -> None:
    """A second Ctrl-C while ``run --stream`` waits for a sub-agent's sync tool exits at once
    (130) with the sub-agent kept where it stood: resuming runs only the tool that still ran,
    not the sub-agent's model call before it (it was kept, with its answer)."""
    gate = tmp_path / "gate"
    with _team_run(tmp_path, gate) as proc:
        # the gate stays shut: the tool never returns
        _interrupted(proc, b"stopping once", lambda: proc.send_signal(signal.SIGINT))
    state = _run_file_state(tmp_path)
    [worker] = [c.child for c in state.calls if c.call.name == "worker"]
    assert worker is not None  # kept where it stood: its model had answered
    assert [e.kind for e in worker.log] == ["run_started", "model_responded"]
    assert [c.status for c in worker.calls] == ["to_run"]
    proc2 = toolfold("resume", "toolfold-run.json", cwd=tmp_path, env={"PYTHONPATH": str(FILES)})
    assert (proc2.returncode, proc2.stdout) == (0, "lead: worker: held x\n"), proc2.stderr
    assert _ran(tmp_path) == ["held x"]  # run by the resume (the first never returned)


def _team_run(tmp_path: Path, gate: Path) -> subprocess.Popen[bytes]:
    """``toolfold run --stream`` of an agent whose sub-agent calls a tool held at the FIFO
    ``gate``, started with Ctrl-C's default handling; used as ``with _team_run(...) as proc``."""
    os.mkfifo(gate)
    (tmp_path / "team.toml").write_text(
        'entry = "lead"\n\n[agents.lead]\nmodel = "files_helpers:lead_and_holder"\n'
        'tools = [{ agent = "worker" }]\n\n[agents.worker]\n'
        'model = "files_helpers:lead_and_holder"\ntools = ["files_helpers:hold_at_gate"]\n'
    )
    env = {"PYTHONPATH": str(FILES), "TOOLFOLD_TEST_GATE": str(gate)}
    return interruptible(["run", "team.toml", "--stream", "go"], tmp_path, env)


def _pair_run(
    tmp_path: Path, gate: Path, beside: str = "note", options: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    """``toolfold run`` (with ``options``) of an agent calling a tool held at the FIFO ``gate``
    beside another (``note``; the async ``wait_for_cancel``, or the agent ``worker`` calling it:
    then the step runs on an event loop), started with Ctrl-C's default handling; used as
    ``with _pair_run(...) as proc``."""
    os.mkfifo(gate)
    if beside == "worker":
        (tmp_path / "pair.toml").write_text(
            'entry = "pair"\n\n[agents.pair]\nmodel = "files_helpers:lead_beside_holder"\n'
            'tools = [{ agent = "worker" }, "files_helpers:hold_at_gate"]\n\n[agents.worker]\n'
            'model = "files_helpers:lead_beside_holder"\ntools = ["files_helpers:wait_for_cancel"]\n'
        )
    else:
        model = "holder_beside_note" if beside == "note" else "holder_beside_waiter"
        (tmp_path / "pair.toml").write_text(
            f'[agents.pair]\nmodel = "files_helpers:{model}"\n'
            f'tools = ["files_helpers:hold_at_gate", "files_helpers:{beside}"]\n'
        )
    env = {
        "PYTHONPATH": str(FILES),
        "TOOLFOLD_TEST_GATE": str(gate),
        # (Ctrl-C only once ``wait_for_cancel`` waits: see `files_helpers.hold_at_gate`)
        "TOOLFOLD_TEST_AFTER_WAITER": "" if beside == "note" else "1",
    }
    return interruptible(["run", "pair.toml", *options, "go"], tmp_path, env)


def _held_then_opened(tmp_path: Path, gate: Path) -> Callable[[], None]:
    """What a test does once ``run`` said it waits: checks the held tool has not returned,
    then opens its ``gate``."""

    def open_it() -> None:
        assert "held x" not in _ran(tmp_path)  # said while the tool still ran
        _open_fifo(gate)

    return open_it


def test_ctrl_c_in_a_blocking_run_waits_for_its_running_tool_and_keeps_it(tmp_path: Path) -> None:
    """``run`` (no --stream) interrupted while a sync tool runs beside another says it waits,
    waits for the tool, and writes its result to the run file: resuming does not run it again."""
    gate = tmp_path / "gate"
    with _pair_run(tmp_path, gate) as proc:
        _interrupted(proc, _WAITS, _held_then_opened(tmp_path, gate))
    state = _run_file_state(tmp_path)
    held = [c for c in state.calls if c.call.name == "hold_at_gate"]
    assert [(c.status, c.result.content if c.result else None) for c in held] == [
        ("done", "held x")
    ]
    proc2 = toolfold("resume", "toolfold-run.json", cwd=tmp_path, env={"PYTHONPATH": str(FILES)})
    assert (proc2.returncode, proc2.stdout) == (0, "done: held x, noted y\n"), proc2.stderr
    # Each tool ran once: the held one before Ctrl-C was kept ("note" ran then or on resume).
    assert sorted(_ran(tmp_path)) == ["held x", "note y"]


@pytest.mark.parametrize("beside", ["wait_for_cancel", "worker"])
@pytest.mark.parametrize("options", [(), ("--stream",)])
def test_ctrl_c_in_a_step_on_an_event_loop_waits_for_its_running_tool_and_keeps_it(
    tmp_path: Path, options: tuple[str, ...], beside: str
) -> None:
    """``run`` (and ``run --stream``) interrupted while a sync tool runs beside an async tool
    or an agent calling one (the step runs on an event loop) cancels the async tool, says it
    waits, waits for the sync tool and writes its result to the run file: resuming does not
    run it again."""
    gate = tmp_path / "gate"
    with _pair_run(tmp_path, gate, beside, options) as proc:
        _interrupted(proc, _WAITS, _held_then_opened(tmp_path, gate))
    state = _run_file_state(tmp_path)
    # The async tool, waiting when Ctrl-C came, was cancelled (its handler ran before the
    # command exited) and is to run again; the held sync tool was waited for and kept.
    assert [(c.call.name, c.status) for c in state.calls] == [
        (beside, "to_run"),
        ("hold_at_gate", "done"),
    ]
    assert _ran(tmp_path) == ["cancelled w", "held x"]
    proc2 = toolfold("resume", "toolfold-run.json", cwd=tmp_path, env={"PYTHONPATH": str(FILES)})
    waited = "worker: waited w" if beside == "worker" else "waited w"
    assert (proc2.returncode, proc2.stdout) == (0, f"done: {waited}, held x\n"), proc2.stderr
    assert _ran(tmp_path) == ["cancelled w", "held x"]  # the held tool ran once in all


def test_a_second_ctrl_c_stops_waiting_and_keeps_the_run_as_it_stood(tmp_path: Path) -> None:
    """A second Ctrl-C while ``run`` waits for a tool exits at once (130) with the run file
    written: the tool still running stays to run, and resuming runs it."""
    gate = tmp_path / "gate"
    with _pair_run(tmp_path, gate) as proc:
        # the gate stays shut: the tool never returns
        _interrupted(proc, b"stopping once", lambda: proc.send_signal(signal.SIGINT))
    state = _run_file_state(tmp_path)
    assert [c.status for c in state.calls if c.call.name == "hold_at_gate"] == ["to_run"]
    assert "held x" not in _ran(tmp_path)
    proc2 = toolfold("resume", "toolfold-run.json", cwd=tmp_path, env={"PYTHONPATH": str(FILES)})
    assert (proc2.returncode, proc2.stdout) == (0, "done: held x, noted y\n"), proc2.stderr
    assert _ran(tmp_path).count("held x") == 1  # run by the resume (the first never returned)


def _ran(folder: Path) -> list[str]:
    """The lines of ``ran.log`` in ``folder`` (each a tool's run), none when it is missing."""
    log = folder / "ran.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_provider_error_after_an_approved_tool_keeps_its_result(tmp_path: Path) -> None:
    """The run file holds the tool's result, so resuming it again cannot run the tool twice.

    A provider error is not a RunError: its state (the approved tool's result
    in it) was dropped, and the second resume ran the tool again.
    """
    (tmp_path / "adds.toml").write_text(
        '[agents.adder]\nmodel = "files_helpers:model_failing_once"\n'
        'tools = ["files_helpers:add_logged"]\n'
    )
    env = {"PYTHONPATH": str(Path(__file__).parent)}
    proc = toolfold("run", "adds.toml", "add 2 and 3", cwd=tmp_path, env=env)
    assert proc.returncode == 3, proc.stderr
    [call_id] = [c.id for c in _waiting(tmp_path / "toolfold-run.json")]
    proc = toolfold("resume", "toolfold-run.json", "--approve", call_id, cwd=tmp_path, env=env)
    assert proc.returncode == 4, proc.stderr
    assert "the run failed: ServerError" in proc.stderr
    proc = toolfold("resume", "toolfold-run.json", "--approve", call_id, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr  # nothing waits for an approval any more
    proc = toolfold("resume", "toolfold-run.json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "result: 5\n"
    assert (tmp_path / "ran.log").read_text() == "2+3\n"


def _waiting(run_file: Path) -> tuple[Any, ...]:
    return _run_file_state(run_file.parent, run_file.name).pending_approvals


def test_a_run_whose_source_fails_to_close_still_answers(tmp_path: Path) -> None:
    """The run ended: its answer is shown and it exits 0, the close error as a warning."""
    (tmp_path / "flaky.toml").write_text(
        '[agents.adder]\nmodel = "files_helpers:model"\ntools = ["files_helpers:closing_badly"]\n'
    )
    env = {"PYTHONPATH": str(Path(__file__).parent)}
    proc = toolfold("run", "flaky.toml", "add 2 and 3", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "result: 5\n"
    assert proc.stderr.endswith(
        "toolfold run: warning: the run ended, but closing a tool source failed: "
        "OSError: flaky-server would not close\n"
    )


def on_terminal(*args: str, cwd: Path, answer: bytes | None = b"y\n") -> tuple[int, str]:
    """``toolfold ARGS`` under a pseudo-terminal, answering every ``[y/n]`` question
    (with Ctrl-C when ``answer`` is None)."""
    main, secondary = pty.openpty()
    proc = subprocess.Popen(
        [*COMMAND, *args],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        cwd=cwd,
        env=environment(),
        close_fds=True,
        # A process started in the background inherits SIGINT ignored, and Python then
        # never raises KeyboardInterrupt for it: the default lets Python install its own.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    os.close(secondary)
    seen = b""
    answered = 0
    try:
        while True:
            ready, _, _ = select.select([main], [], [], 60)
            assert ready, f"no output from the command; so far: {seen!r}"
            try:
                chunk = os.read(main, 1024)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            seen += chunk
            if seen.count(b"[y/n] ") > answered:
                if answer is None:
                    proc.send_signal(signal.SIGINT)
                else:
                    os.write(main, answer)
                answered += 1
    except BaseException:
        proc.kill()  # a failed check leaves no process running into later tests
        proc.wait()
        raise
    finally:
        os.close(main)
    return proc.wait(timeout=60), seen.decode()


def test_interactive_approval_on_a_terminal(tmp_path: Path) -> None:
    """With stdin a terminal, ``run`` asks y/n per call and goes on with the answer."""
    code, text = on_terminal("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert code == 0, text
    assert 'approve refund({"order": "A17"}) [call_4_0]? [y/n] ' in text
    assert text.rstrip().endswith("order A17 refunded")
    assert not (tmp_path / "toolfold-run.json").exists()


def test_ctrl_c_at_a_question_keeps_the_waiting_run(tmp_path: Path) -> None:
    """Ctrl-C at the terminal's y/n question exits 130 with the run file written (the
    steps that ran are kept: it was lost), and ``resume`` answers it."""
    code, text = on_terminal("run", str(FILES / "approval.toml"), "go", cwd=tmp_path, answer=None)
    assert code == 130, text
    assert text.rstrip().endswith(_INTERRUPTED.rstrip())
    proc = toolfold("resume", "toolfold-run.json", "--approve", "call_1_0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "result: 5\n"
    assert "writer" not in proc.stderr  # the first step is not run again


_HOSTILE_TOOLS = """
from toolfold import tool
from toolfold.testing import FunctionModel

FAKE = 'approve lookup({"order": "A17"}) [c9]? [y/n] '


@tool(requires_approval=True)
def refund(order: str, amount: int) -> str:
    \"\"\"Refund.

    Args:
        order: The order.
        amount: How much.
    \"\"\"
    return f"refunded {amount}"


@tool
def lookup(order: str) -> str:
    \"\"\"Look up.

    Args:
        order: The order.
    \"\"\"
    return "fine\\x1b[31mRED\\x1b[0m"


def _answer(request):
    if request.messages[-1].role == "tool":
        return "\\x1b[0mdone\\r\\nbye\\u202e"
    spoof = "c9\\x1b[2K\\r" + FAKE[: -len(" [c9]? [y/n] ")] + " [c9"
    return [
        "Checking.\\x1b[8m",
        FunctionModel.call("lookup", {"order": "A17"}),
        FunctionModel.call("refund", {"order": "A17", "amount": 99999}, id=spoof),
    ]


model = FunctionModel(_answer, name="hostile:m")
"""


def _hostile(folder: Path) -> Path:
    """An agent file whose model writes escape sequences in its text and a call id that
    clears the question's line and writes a fake one, and whose tool returns some."""
    (folder / "hostile_tools.py").write_text(_HOSTILE_TOOLS)
    agent_file = folder / "hostile.toml"
    agent_file.write_text(
        '[agents.main]\nmodel = "openai:gpt-4o-mini"\n'
        'tools = ["hostile_tools:refund", "hostile_tools:lookup"]\n'
    )
    return agent_file


@pytest.mark.parametrize("stream", [[], ["--stream"]])
def test_escape_sequences_a_model_writes_are_shown_not_run_on_a_terminal(
    tmp_path: Path, stream: list[str]
) -> None:
    """On a terminal, control characters in the model's text, a call's id and a tool's result
    are written as visible escapes (\\x1b), so a model cannot clear the approval question's
    line and write a fake one over it, nor hide text; newlines and tabs stay."""
    agent_file = _hostile(tmp_path)
    args = ("run", str(agent_file), "--model", "hostile_tools:model", *stream, "refund")
    code, text = on_terminal(*args, cwd=tmp_path)
    assert code == 0, text
    assert "\x1b" not in text  # nothing reached the terminal raw
    assert "\u202e" not in text
    assert "Checking.\\x1b[8m" in text
    question = 'approve refund({"order": "A17", "amount": 99999}) [c9\\x1b[2K\\x0dapprove'
    assert question in text
    assert "← lookup: fine\\x1b[31mRED\\x1b[0m" in text
    assert "\\x1b[0mdone\r\nbye\\u202e" in text  # (the terminal writes a newline as CR LF)


def test_a_models_text_into_a_pipe_is_written_as_it_came(tmp_path: Path) -> None:
    """Off a terminal the answer on stdout is the model's text unchanged (a file or a program
    reads it), while what goes to stderr (here the waiting call's id) is escaped all the same."""
    agent_file = _hostile(tmp_path)
    proc = toolfold("run", str(agent_file), "--model", "hostile_tools:model", "x", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "Checking.\x1b[8m\n"
    assert "\x1b" not in proc.stderr
    assert "the run waits for approvals: c9\\x1b[2K\\x0dapprove lookup(" in proc.stderr


@pytest.fixture
def terminal() -> Iterator[tuple[int, TextIO]]:
    """A pseudo-terminal: its main side, and its other side open as a text stream."""
    main, secondary = pty.openpty()
    stream = open(secondary, encoding="utf-8", closefd=True)  # noqa: SIM115
    try:
        yield main, stream
    finally:
        stream.close()
        os.close(main)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_question_reads_a_line_and_leaves_nothing_behind(
    terminal: tuple[int, TextIO],
) -> None:
    """The terminal read returns the typed line; its wakeup pipe is closed and the
    wakeup descriptor it replaced is back."""
    main, stream = terminal
    before = _open_fds()
    os.write(main, b"yes\n")
    assert _read_line(stream) == "yes\n"
    assert _open_fds() == before
    assert signal.set_wakeup_fd(-1) == -1  # nothing was left installed


def _interrupted_at(point: int) -> Callable[[Any, str, Any], None]:
    """A profile function raising `Interrupted` as the ``point``-th call to a C function
    made by `_read_line` returns: where Python runs a signal handler, whose
    KeyboardInterrupt (a Ctrl-C) then comes out of the read."""
    returns = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal returns
        if event == "c_return" and frame.f_code is _read_line.__code__:
            returns += 1
            if returns == point:
                raise Interrupted(arg)

    return profile


def test_a_ctrl_c_anywhere_in_the_question_puts_the_wakeup_fd_back(
    terminal: tuple[int, TextIO], tmp_path: Path
) -> None:
    """A Ctrl-C at any point of the terminal read where Python runs handlers leaves the earlier
    wakeup descriptor in place, so a later signal writes nothing into files opened after (one
    coming as the read's own was put in left the wakeup on its closed pipe: SIGINT's b"\\x02"
    then went into whatever file took that descriptor, such as a run file)."""
    main, stream = terminal
    earlier_r, earlier_w = os.pipe()  # (an event loop's self-pipe, say)
    os.set_blocking(earlier_w, False)
    before = signal.set_wakeup_fd(earlier_w)
    handler = signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    try:
        point, finished = 0, False
        while not finished:
            point += 1
            if not select.select([stream], [], [], 0)[0]:  # (the last line was read)
                os.write(main, b"yes\n")
            where: object = "the read's end"
            sys.setprofile(_interrupted_at(point))
            try:
                finished = _read_line(stream) == "yes\n"
            except Interrupted as stop:
                where = stop.args[0]
            finally:
                sys.setprofile(None)
            files = [tmp_path / "one", tmp_path / "two"]  # (taking the pipe's descriptors)
            with open(files[0], "wb"), open(files[1], "wb"):
                signal.raise_signal(signal.SIGUSR1)
            assert [f.read_bytes() for f in files] == [b"", b""], f"after {where}"
            assert signal.set_wakeup_fd(earlier_w) == earlier_w, f"after {where}"
        assert point > 5  # (the read was interrupted where it reads, too)
        assert os.read(earlier_r, 512)  # the signals woke the earlier descriptor
    finally:
        signal.set_wakeup_fd(before)
        signal.signal(signal.SIGUSR1, handler)
        os.close(earlier_r)
        os.close(earlier_w)


def test_a_ctrl_c_anywhere_in_the_question_leaves_no_descriptor_open(
    terminal: tuple[int, TextIO],
) -> None:
    """A Ctrl-C at any point of the terminal read where Python runs handlers closes both ends of
    its wakeup pipe (one coming as ``os.pipe()`` returned left them open)."""
    main, stream = terminal
    point, finished = 0, False
    while not finished:
        point += 1
        if not select.select([stream], [], [], 0)[0]:  # (the last line was read)
            os.write(main, b"yes\n")
        before = _open_fds()
        where: object = "the read's end"
        sys.setprofile(_interrupted_at(point))
        try:
            finished = _read_line(stream) == "yes\n"
        except Interrupted as stop:
            where = stop.args[0]
        finally:
            sys.setprofile(None)
        assert _open_fds() == before, f"after {where}"
    assert point > 5  # (the read was interrupted where it reads, too)


class Interrupted(Exception):
    pass


def _in_read_line(frame: Any) -> bool:
    while frame is not None:
        if frame.f_code is _read_line.__code__:
            return True
        frame = frame.f_back
    return False


class _Sender(threading.Thread):
    """Sends SIGUSR1 to its own thread, where the signal's C-level handler then runs
    (and ends, wakeup write included, before the send returns), so no read in the main
    thread is interrupted by it: the signal lands where only a wakeup can reach the
    read. Sent to the process instead, it could land on any other thread that leaves
    it unblocked (a worker an earlier test left idle), whose handler may write to the
    wakeup pipe after the read closed it: "Exception ignored when trying to write to
    the signal wakeup fd", a failure under ``-W error``. The main thread answers each signal
    with ``tell``: "early" (handled before the read began: send again), "type" (type
    ``line`` now) or "end". A read the signal never reaches gets ``line`` after 30 s."""

    def __init__(self, main: int, line: bytes) -> None:
        super().__init__()
        self.main = main
        self.line = line
        self.news = threading.Event()
        self.word = ""
        self.typed = False

    def tell(self, word: str) -> None:
        self.word = word
        self.news.set()

    def run(self) -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        while True:
            self.news.clear()
            signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
            if not self.news.wait(30) or self.word == "type":
                self.typed = True
                os.write(self.main, self.line)
                return
            if self.word == "end":
                return


@pytest.fixture
def sigusr1_off_the_main_thread() -> Iterator[None]:
    """SIGUSR1 blocked in the main thread (as for a signal landing on another thread,
    or after Python's last check and before a read): Python still runs its handler in
    the main thread, but nothing interrupts a read there. The wakeup descriptor is put
    back after, and one left installed fails the test (a later signal would write into
    whatever file took its number: a later test's run file read b"\\x02")."""
    earlier = signal.getsignal(signal.SIGUSR1)
    wakeup = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        signal.signal(signal.SIGUSR1, earlier)
        left = signal.set_wakeup_fd(wakeup)
        assert left == wakeup, f"the read left the wakeup descriptor {left} installed"


@pytest.mark.usefixtures("sigusr1_off_the_main_thread")
def test_a_signal_the_read_does_not_see_still_ends_the_question(
    terminal: tuple[int, TextIO],
) -> None:
    """A Ctrl-C whose handler ran where the read cannot see it ends the question at
    once (a plain readline waited until a line was typed: the CLI hung on Ctrl-C)."""
    main, stream = terminal
    sender = _Sender(main, b"typed after all\n")

    def interrupt(signum: int, frame: Any) -> None:
        if _in_read_line(frame) and not sender.typed:  # not the read's line ending it
            raise Interrupted
        sender.tell("early")

    signal.signal(signal.SIGUSR1, interrupt)
    sender.start()
    try:
        with pytest.raises(Interrupted):
            _read_line(stream)
    finally:
        sender.tell("end")
        sender.join()


@pytest.mark.usefixtures("sigusr1_off_the_main_thread")
def test_a_signal_whose_handler_returns_leaves_the_question_waiting(
    terminal: tuple[int, TextIO],
) -> None:
    """Another signal's handler runs, and the question waits on for its line."""
    main, stream = terminal
    sender = _Sender(main, b"n\n")

    def note(signum: int, frame: Any) -> None:
        sender.tell("type" if _in_read_line(frame) else "early")  # in the wait: type on

    signal.signal(signal.SIGUSR1, note)
    sender.start()
    try:
        assert _read_line(stream) == "n\n"
    finally:
        sender.tell("end")
        sender.join()


def test_graph_prints_the_diagram(tmp_path: Path) -> None:
    """``graph`` prints the entry agent's Mermaid flowchart, with no API key."""
    proc = toolfold("graph", str(EXAMPLE), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "flowchart LR"
    assert '    triage -->|"as tool researcher"| researcher' in lines
    assert '    triage -.->|"handoff"| refunds' in lines


def test_tools_prints_each_dialect_with_its_rewrites(tmp_path: Path) -> None:
    """``tools`` compiles every tool per dialect; ``--json`` gives the payloads and rewrites."""
    proc = toolfold("tools", str(EXAMPLE), "--agent", "researcher", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "agent researcher" in proc.stdout
    assert "  tool lookup_order" in proc.stdout
    assert "    anthropic (" in proc.stdout
    proc = toolfold(
        "tools", str(EXAMPLE), "--dialect", "openai-chat", "--dialect", "ollama", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert sorted(report) == ["refunds", "researcher", "triage"]
    chat = report["researcher"]["lookup_order"]["openai-chat"]
    assert chat["payload"]["function"]["name"] == "lookup_order"
    assert chat["strict"] is True
    assert chat["rewrites"] == []
    ollama = report["researcher"]["lookup_order"]["ollama"]
    assert ollama["strict"] is False
    assert any("additionalProperties dropped [lossy]" in r for r in ollama["rewrites"])
    assert "transfer_to_refunds" in report["triage"]
    proc = toolfold("tools", str(EXAMPLE), "--dialect", "klingon", cwd=tmp_path)
    assert proc.returncode == 1
    assert "unknown dialect 'klingon'" in proc.stderr
    # An agent without tools says so (it printed nothing, exit 0).
    (tmp_path / "plain.toml").write_text('[agents.plain]\nmodel = "openai:gpt-4o-mini"\n')
    proc = toolfold("tools", "plain.toml", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "agent plain: no tools\n")
    proc = toolfold("tools", "plain.toml", "--json", cwd=tmp_path)
    assert json.loads(proc.stdout) == {"plain": {}}


def test_check_passes_a_good_file_and_lists_every_problem(tmp_path: Path) -> None:
    """``check`` exits 0 on the example and 1 with every problem of a bad file on stderr."""
    proc = toolfold("check", str(EXAMPLE), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3 agent(s): triage, researcher, refunds (entry: triage)" in proc.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "agents:\n  a:\n    model: openai:gpt-4o-mini\n    max_steps: ten\n"
        "    tools: [nowhere_x:f]\n    handoffs: [ghost]\n"
    )
    proc = toolfold("check", str(bad), cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0] == f"cannot load agent file {bad}: 3 problems"
    assert [line.split(": ")[0].strip() for line in lines[1:]] == [
        f"{bad}:4",
        f"{bad}:5",
        f"{bad}:6",
    ]
    proc = toolfold("run", str(bad), "hi", cwd=tmp_path)
    assert proc.returncode == 1


def test_stream_writes_each_piece_as_it_arrives(tmp_path: Path) -> None:
    """``run --stream`` writes the answer's first piece to stdout while the model still
    holds back the second (it is not written at the end)."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    (tmp_path / "gated.toml").write_text('[agents.gated]\nmodel = "files_helpers:gated_model"\n')
    env = environment({"PYTHONPATH": str(FILES), "TOOLFOLD_TEST_GATE": str(gate)})
    proc = subprocess.Popen(
        [*COMMAND, "run", "gated.toml", "--stream", "hi"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,  # (this checkout's toolfold first on the path, as for every CLI run here)
        preexec_fn=dies_with_this_process(),
    )
    try:
        seen = read_until(proc.stdout, b"first ", "nothing streamed", "stdout")
        assert seen == b"first "  # the second piece is still held back by the model
        _open_fifo(gate)
        rest, errors = proc.communicate(timeout=60)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    assert proc.returncode == 0, errors
    assert seen + rest == b"first second\n"


def test_a_workflow_file_runs_draws_and_checks(tmp_path: Path) -> None:
    """``run``, ``graph`` and ``check`` take a workflow as the file's entry."""
    pipeline = str(FILES / "pipeline.toml")
    proc = toolfold("run", pipeline, "hi", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "CRITIC: HELLO\nLOUD: HELLOCRITIC: HELLO\nLOUD: HELLO\n"
    # a step's call shows its name and input, not the workflow's {"input", "values"} envelope
    assert '→ writer("hi") [writer]' in proc.stderr.splitlines()
    assert '→ both("HELLO") [both]' in proc.stderr.splitlines()
    assert "values" not in proc.stderr
    streamed = toolfold("run", pipeline, "--stream", "hi", cwd=tmp_path)
    assert streamed.returncode == 0, streamed.stderr
    assert '  [both] → critic("HELLO") [critic]' in streamed.stderr.splitlines()
    assert "values" not in streamed.stderr
    assert streamed.stdout == proc.stdout  # a workflow's answer has no deltas of its own
    proc = toolfold("graph", pipeline, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert '    desk{"Route desk"}' in proc.stdout.splitlines()
    assert '    pipeline -->|"3. both"| views' in proc.stdout.splitlines()
    proc = toolfold("check", pipeline, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2 agent(s): writer, critic; 4 workflow(s): pipeline, views, desk, polish" in (
        proc.stdout
    )
    proc = toolfold("tools", pipeline, "--agent", "views", cwd=tmp_path)
    assert proc.returncode == 1
    assert "'views' is a workflow" in proc.stderr


def test_a_loop_out_of_iterations_is_noted_and_exits_0(tmp_path: Path) -> None:
    """A loop whose ``until`` never held answers its last output (exit 0) and says so on stderr,
    as the entry or as a step; one that converged says nothing."""
    (tmp_path / "loop.toml").write_text(
        '[workflows.pipeline]\nkind = "sequence"\nsteps = ["polish", "files_helpers:shout"]\n\n'
        '[workflows.polish]\nkind = "loop"\nstep = "files_helpers:grow"\n'
        'until = "files_helpers:long_enough"\nmax_iterations = 2\n',
        encoding="utf-8",
    )
    env = {"PYTHONPATH": str(FILES)}
    proc = toolfold("run", "loop.toml", "--agent", "polish", "hi", cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stdout) == (0, "hihihihi\n"), proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "toolfold run: the run stopped: max_iterations (its until never held; "
        "the answer is its last iteration's output)"
    )
    proc = toolfold("run", "loop.toml", "--agent", "pipeline", "hi", cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stdout) == (0, "HIHIHIHI\n"), proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "toolfold run: note: the loop step polish stopped at max_iterations "
        "(its until never held; it passed on its last iteration's output)"
    )
    proc = toolfold("run", "loop.toml", "--agent", "polish", "hello", cwd=tmp_path, env=env)
    assert (proc.returncode, proc.stdout) == (0, "hellohellohellohello\n")
    assert "max_iterations" not in proc.stderr


def test_a_steps_input_and_values_show_their_text_as_written(tmp_path: Path) -> None:
    """The values a step's prompt reads show as text (``"CAFÉ"``), like its input,
    not as ``\\u`` escapes."""
    (tmp_path / "say.toml").write_text(
        '[workflows.w]\nkind = "sequence"\n'
        'steps = ["files_helpers:shout", { step = "writer", prompt = "Sagen: {shout}" }]\n\n'
        '[agents.writer]\nmodel = "files_helpers:model"\n',
        encoding="utf-8",
    )
    env = {"PYTHONPATH": str(FILES)}
    proc = toolfold("run", "say.toml", "café", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert '→ writer("CAFÉ", values {"shout": "CAFÉ"}) [writer]' in proc.stderr.splitlines()


def test_an_approval_inside_a_workflow_suspends_and_resumes(tmp_path: Path) -> None:
    """A step's approval stops ``run`` with exit 3; ``resume`` answers it by id and finishes."""
    proc = toolfold("run", str(FILES / "approval.toml"), "--stream", "go", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "the run waits for approvals: call_1_0 (add_approved)" in proc.stderr
    document = json.loads((tmp_path / "toolfold-run.json").read_text())
    assert document["agent"] == "checked"
    proc = toolfold("resume", "toolfold-run.json", "--approve", "call_1_0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "result: 5\n"


def test_a_changed_step_agent_is_refused_and_the_run_file_kept(tmp_path: Path) -> None:
    """A step's agent whose instructions changed since the run began is refused as the entry
    agent is (exit 1, nothing ran, the run file as it was): the approval is not used up by an
    error result, and the file that started the run still resumes it."""
    proc = toolfold("run", str(FILES / "approval.toml"), "go", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    run_file = tmp_path / "toolfold-run.json"
    kept = run_file.read_text()
    changed = tmp_path / "approval.toml"
    changed.write_text(
        (FILES / "approval.toml")
        .read_text()
        .replace("[agents.calc]\n", '[agents.calc]\ninstructions = "Add."\n')
    )
    proc = toolfold(
        "resume", str(run_file), "--approve", "call_1_0", "--file", str(changed),
        cwd=tmp_path, env={"PYTHONPATH": os.pathsep.join((str(ROOT), str(FILES)))},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(
        f"toolfold resume: cannot resume {run_file} with workflow 'checked' of {changed} "
        f"(nothing ran; {run_file} is unchanged): cannot resume the sub-run of call 'calc' "
        "(tool 'calc'), so nothing was run: the resuming agent's instructions differ"
    ), proc.stderr
    assert (proc.stdout, run_file.read_text()) == ("", kept)
    proc = toolfold("resume", str(run_file), "--approve", "call_1_0", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "result: 5\n"), proc.stderr


def test_calls_waiting_under_one_id_in_two_sub_runs_are_answered_by_path(
    tmp_path: Path,
) -> None:
    """Two steps whose models made the same call id: the run names each call by its path,
    ``resume`` takes those paths (a bare id is refused with exit 1, naming them), and the
    terminal asks for each call and answers both."""
    both = str(FILES / "same_ids.toml")
    proc = toolfold("run", both, "go", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert (
        "the run waits for approvals: left/call_1_0 (add_approved), right/call_1_0 (add_approved)"
        in proc.stderr
    )
    proc = toolfold("resume", "toolfold-run.json", "--approve", "call_1_0", cwd=tmp_path)
    assert proc.returncode == 1
    assert "answer each by its own key instead: 'left/call_1_0', 'right/call_1_0'" in proc.stderr
    proc = toolfold("resume", "toolfold-run.json", "--approve", "left/call_1_0", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "the run waits for approvals: call_1_0 (add_approved)" in proc.stderr
    proc = toolfold("resume", "toolfold-run.json", "--deny", "right/call_1_0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "left": "result: 5",
        "right": "result: The user denied this tool call.",
    }
    code, text = on_terminal("run", both, "go", cwd=tmp_path)
    assert code == 0, text
    assert 'approve add_approved({"a": 2, "b": 3}) [left/call_1_0]? [y/n] ' in text
    assert 'approve add_approved({"a": 2, "b": 3}) [right/call_1_0]? [y/n] ' in text
    assert text.rstrip().endswith('{"left": "result: 5", "right": "result: 5"}')


def test_a_call_id_that_is_another_calls_path_is_refused_and_every_call_gets_its_own_key(
    tmp_path: Path,
) -> None:
    """The top run's call ``a/b`` (a model-chosen id) and h1's call ``b`` (path ``a/b``): the
    run lists three distinct keys, ``--approve a/b`` is refused (exit 1, nothing ran), the
    listed keys approve each call, and the terminal asks each under its own key."""
    slash = str(FILES / "slash_ids.toml")
    proc = toolfold("run", slash, "go", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    listed = re.search(r"the run waits for approvals: (.*?); state written", proc.stderr)
    assert listed is not None, proc.stderr
    keys = [item.rsplit(" (", 1)[0] for item in listed[1].split(", ")]
    assert len(keys) == len(set(keys)) == 3
    assert "c/b" in keys
    proc = toolfold("resume", "toolfold-run.json", "--approve", "a/b", cwd=tmp_path)
    assert proc.returncode == 1
    assert "call key 'a/b' names 2 calls waiting for an approval" in proc.stderr
    assert not (tmp_path / "ran.log").exists()
    approve = [arg for key in keys for arg in ("--approve", key)]
    proc = toolfold("resume", "toolfold-run.json", *approve, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted((tmp_path / "ran.log").read_text().split()) == ["1+1", "2+2", "3+3"]
    (tmp_path / "ran.log").unlink()
    code, text = on_terminal("run", slash, "go", cwd=tmp_path)
    assert code == 0, text
    asked = re.findall(r"approve add_logged\(.*?\) \[(.*?)\]\? \[y/n\] ", text)
    assert len(asked) == len(set(asked)) == 3
    assert sorted((tmp_path / "ran.log").read_text().split()) == ["1+1", "2+2", "3+3"]


def test_tools_lists_an_mcp_servers_tools(tmp_path: Path) -> None:
    """``tools`` starts a file's MCP server (a real one), lists its tools with the prefix."""
    (tmp_path / "clock.toml").write_text(
        '[agents.clock]\nmodel = "openai:gpt-4o-mini"\n\n[[agents.clock.mcp]]\n'
        f"command = {json.dumps(sys.executable)}\n"
        'args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]\nprefix = "time"\nname = "time"\n'
    )
    proc = toolfold("tools", "clock.toml", "--dialect", "anthropic", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)["clock"]
    assert "time_get_current_time" in listed
    payload = listed["time_get_current_time"]["anthropic"]["payload"]
    assert payload["name"] == "time_get_current_time"
    proc = toolfold("graph", "clock.toml", cwd=tmp_path)
    assert '    clock_time{{"MCP time"}}' in proc.stdout.splitlines()


def test_tools_says_to_leave_out_an_mcp_tool_whose_parameter_name_anthropic_refuses(
    tmp_path: Path,
) -> None:
    """``tools --dialect anthropic``: an MCP tool's key 'rule_name[]' points at include=, not at renaming."""
    server = ROOT / "tests" / "ecosystem" / "dotted_server.py"
    (tmp_path / "dotted.toml").write_text(
        '[agents.a]\nmodel = "openai:gpt-4o-mini"\n\n[[agents.a.mcp]]\n'
        f"command = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(server))}, "keys"]\nname = "dotted"\n'
    )
    proc = toolfold("tools", "dotted.toml", "--dialect", "anthropic", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    error = json.loads(proc.stdout)["a"]["files_read"]["anthropic"]["error"]
    assert "parameter 'rule_name[]'" in error
    assert (
        "leave the tool out with include=[...] on MCP server 'dotted', without 'files.read'"
        in error
    )
    assert "(rename the parameter)" not in error


def test_a_file_with_a_handoff_cycle_checks_draws_and_runs(tmp_path: Path) -> None:
    """desk.toml (a cycle, a workflow tool, stop conditions, a step timeout) through the CLI."""
    desk = ROOT / "examples" / "agent_files" / "desk.toml"
    checked = toolfold("check", str(desk), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    graph = toolfold("graph", str(desk), cwd=tmp_path)
    assert '    billing -.->|"handoff"| triage\n' in graph.stdout
    assert '    triage -.->|"handoff"| billing\n' in graph.stdout
    for agent in ("triage", "billing"):
        ran = toolfold(
            "run",
            str(desk),
            "--agent",
            agent,
            "--model",
            "desk_tools:demo_model",
            "--json",
            "parcel late?",
            cwd=tmp_path,
        )
        assert ran.returncode == 0, ran.stderr
        state = RunState.from_json(ran.stdout)
        assert state.output == "A paragraph from notes on parcel delays."


def _documented_sessions() -> list[str]:
    """The shell sessions of docs/cli.md: its code blocks that begin with ``$ toolfold``."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    return re.findall(r"```\n(\$ toolfold .*?)```", text, re.S)


def test_the_documented_sessions_print_what_the_command_prints(tmp_path: Path) -> None:
    """Each command of docs/cli.md's sessions, run in a folder holding the example file, prints
    (stderr and stdout as they interleave) exactly the lines shown under it; a command without
    ``< /dev/null`` runs on a terminal, where each y/n question is answered as shown."""
    sessions = _documented_sessions()
    assert len(sessions) >= 3  # running a file, and both approval sessions
    for session in sessions:
        folder = tmp_path / f"session{sessions.index(session)}"
        shutil.copytree(EXAMPLE.parent, folder / "examples" / "agent_files")
        commands = re.findall(r"^\$ (.*)\n((?:(?!\$ ).*\n)*)", session, re.M)
        for line, shown in commands:
            words = shlex.split(line)
            assert words[0] == "toolfold"
            if words[-2:] == ["<", "/dev/null"]:
                proc = subprocess.run(
                    [*COMMAND, *words[1:-2]],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    text=True,
                    cwd=folder,
                    env=environment(),
                    timeout=60,
                )
                printed = proc.stdout
            else:
                _, printed = on_terminal(*words[1:], cwd=folder)
                printed = printed.replace("\r\n", "\n")
            assert printed == shown, line


def _streamed_session(agent: Any, file: str, tmp_path: Path) -> Any:
    """The session of ``toolfold run --stream`` of ``agent`` from ``file``, in-process, its
    run file ``run.json`` in ``tmp_path``."""
    import argparse

    from toolfold._commands import _Session

    args = argparse.Namespace(stream=True, json=False, state_out=None)
    where = {"file": file, "agent": agent.name, "model": None}
    return _Session("run", agent, args, where, str(tmp_path / "run.json"))


def test_ctrl_c_while_a_streamed_event_is_shown_keeps_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C that lands while ``run --stream`` shows an event (not while the run waits) is
    thrown into the stream: the run file holds what the run did, and resuming runs none of the
    sub-agent's finished tools again."""
    import asyncio

    from toolfold import Agent, tool
    from toolfold._commands import INTERRUPTED, _continue, _Session, _start

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(FILES))
    import files_helpers

    holding = [True]

    @tool
    async def press_ctrl_c(text: str) -> str:
        """Wait until cancelled while ``holding``; else answer.

        Args:
            text: What to answer with.
        """
        if holding[0]:
            await asyncio.Event().wait()
        return f"pressed {text}"

    worker = Agent(
        files_helpers.lead_and_worker, name="worker", tools=[files_helpers.note, press_ctrl_c]
    )
    lead = Agent(files_helpers.lead_and_worker, name="lead", tools=[worker.as_tool()])
    session = _streamed_session(lead, "team.toml", tmp_path)
    shown_by = _Session._result_line

    def result_line(self: Any, result: Any, depth: int, name: str) -> None:
        shown_by(self, result, depth, name)
        if result.tool_name == "note":  # Ctrl-C as the terminal shows note's result
            raise KeyboardInterrupt

    monkeypatch.setattr(_Session, "_result_line", result_line)
    try:
        code = session._attempt(lambda: _start(lead, "go", True, None), ())
    except KeyboardInterrupt:  # what the command then says: "interrupted", no run file
        pytest.fail("the interruption carried no state: the run's work was lost")
    assert code == INTERRUPTED
    state = _run_file_state(tmp_path, "run.json")
    (kept,) = [c for c in state.calls if c.child is not None]
    assert kept.status == "to_run"  # the sub-agent where it stopped, its note ended
    monkeypatch.setattr(_Session, "_result_line", shown_by)
    holding[0] = False
    response = session._attempt(lambda: _continue(lead, state, {}, True, None), ())
    assert response.text == "lead: worker: noted x, pressed x"
    assert (tmp_path / "ran.log").read_text() == "note x\n"


def test_ctrl_c_while_the_last_event_is_shown_keeps_the_ended_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C that lands while ``run --stream`` shows the stream's last event (the run has
    ended) exits 130 with the run file holding the run as it ended, not "interrupted" with
    nothing kept."""

    from toolfold import Agent
    from toolfold._commands import INTERRUPTED, _Session, _start
    from toolfold.testing import FunctionModel

    agent = Agent(FunctionModel(lambda request: "done"), name="solo")
    session = _streamed_session(agent, "solo.toml", tmp_path)
    shows = _Session._show

    def show(self: Any, event: Any, ended_line: bool, shown: bool) -> tuple[bool, bool]:
        if event.kind == "run_end":  # Ctrl-C as the terminal shows the run's end
            raise KeyboardInterrupt
        return shows(self, event, ended_line, shown)

    monkeypatch.setattr(_Session, "_show", show)
    try:
        code = session._attempt(lambda: _start(agent, "go", True, None), ())
    except KeyboardInterrupt:  # what the command then says: "interrupted", no run file
        pytest.fail("the interruption carried no state: the ended run was not written")
    assert code == INTERRUPTED
    state = _run_file_state(tmp_path, "run.json")
    assert (state.phase, state.messages[-1].text) == ("finished", "done")
    assert (
        capsys.readouterr().err
        == f"toolfold run: interrupted as the run ended; state written to {tmp_path / 'run.json'}\n"
    )


def test_ctrl_c_while_the_final_step_end_is_shown_says_the_run_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C that lands while ``run --stream`` shows the final step's end (the run has
    finished, its state carried by the interruption) says the run ended, not "continue
    with: toolfold resume" for a run that has nothing left to do."""

    from toolfold import Agent
    from toolfold._commands import INTERRUPTED, _Session, _start
    from toolfold.testing import FunctionModel

    agent = Agent(FunctionModel(lambda request: "done"), name="solo")
    session = _streamed_session(agent, "solo.toml", tmp_path)
    shows = _Session._show

    def show(self: Any, event: Any, ended_line: bool, shown: bool) -> tuple[bool, bool]:
        if event.kind == "step_end":  # Ctrl-C as the terminal shows the last step's end
            raise KeyboardInterrupt
        return shows(self, event, ended_line, shown)

    monkeypatch.setattr(_Session, "_show", show)
    code = session._attempt(lambda: _start(agent, "go", True, None), ())
    assert code == INTERRUPTED
    state = _run_file_state(tmp_path, "run.json")
    assert (state.phase, state.messages[-1].text) == ("finished", "done")
    assert (
        capsys.readouterr().err
        == f"toolfold run: interrupted as the run ended; state written to {tmp_path / 'run.json'}\n"
    )


def test_resume_reads_a_bare_state_from_a_pipe(tmp_path: Path) -> None:
    """``resume /dev/stdin`` reads a state piped in to its end (not locked, so no hang) and goes on."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "--json", "refund A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    command = ["resume", "/dev/stdin", "--file", str(EXAMPLE), *DEMO, "--approve", "call_4_0"]
    resumed = subprocess.run(
        [*COMMAND, *command],
        input=proc.stdout,  # (a pipe, whose end comes once this is written)
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment(),
        timeout=30,
    )
    assert (resumed.returncode, resumed.stdout) == (0, "order A17 refunded\n"), resumed.stderr


def test_run_does_not_write_a_run_file_another_process_holds(tmp_path: Path) -> None:
    """``run`` whose run file a resume holds (its flock) does not write it: exit 1, the file
    unchanged, the run file printed on stdout instead."""
    import fcntl

    run_file = tmp_path / "toolfold-run.json"
    run_file.write_text("held")
    with open(run_file, "rb") as holder:  # what a resume under way holds
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.endswith(
        "toolfold run: cannot write the run file toolfold-run.json: another toolfold process "
        "holds it (a run or resume writing it); the run file follows on stdout\n"
    )
    assert run_file.read_text() == "held"
    assert [
        c.id
        for c in RunState.from_json(json.dumps(json.loads(proc.stdout)["state"])).pending_approvals
    ] == ["call_4_0"]


def test_resume_of_a_run_file_it_cannot_write_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run file that cannot be opened for writing is refused before its approved tool runs
    (exit 1), as the tool would run again on every resume; ``--state-out`` elsewhere goes on."""
    from toolfold._cli import main

    proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    run_file = tmp_path / "toolfold-run.json"
    kept = run_file.read_text()
    opening = os.open

    def read_only(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR) and os.fspath(path).endswith("toolfold-run.json"):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return opening(path, flags, *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "open", read_only)
    assert main(["resume", "toolfold-run.json", "--approve", "call_4_0"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # the refund did not run
    assert captured.err == (
        "toolfold resume: toolfold-run.json cannot be written (Read-only file system): nothing "
        "ran; the new state goes back to the run file, so make it writable, or give "
        "--state-out FILE\n"
    )
    assert run_file.read_text() == kept
    code = main(["resume", "toolfold-run.json", "--approve", "call_4_0", "--state-out", "end.json"])
    assert (code, capsys.readouterr().out) == (0, "order A17 refunded\n")
    assert run_file.read_text() == kept


def test_resume_into_a_state_out_it_cannot_write_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --state-out file that cannot be opened for writing is refused before the approved
    tool runs (exit 1), as the run file would still wait and the tool run again."""
    from toolfold._cli import main

    proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    run_file = tmp_path / "toolfold-run.json"
    kept = run_file.read_text()
    (tmp_path / "out.json").write_text("{}")
    opening = os.open

    def read_only(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR) and os.fspath(path).endswith("out.json"):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return opening(path, flags, *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "open", read_only)
    command = ["resume", "toolfold-run.json", "--approve", "call_4_0", "--state-out", "out.json"]
    assert main(command) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # the refund did not run
    assert captured.err == (
        "toolfold resume: --state-out out.json cannot be written (Read-only file system): "
        "nothing ran and toolfold-run.json is unchanged; make it writable, or give another "
        "--state-out FILE\n"
    )
    assert (run_file.read_text(), (tmp_path / "out.json").read_text()) == (kept, "{}")


def test_resume_into_a_state_out_another_resume_holds_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --state-out file another resume holds (its flock) is refused before the approved tool
    runs (exit 1); once free, the new state replaces it, under the lock taken first."""
    import fcntl

    from toolfold._cli import main

    proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    run_file = tmp_path / "toolfold-run.json"
    kept = run_file.read_text()
    out = tmp_path / "out.json"
    out.write_text("held, and longer than nothing")
    monkeypatch.chdir(tmp_path)
    command = ["resume", "toolfold-run.json", "--approve", "call_4_0", "--state-out", "out.json"]
    with open(out, "rb") as holder:  # what a resume of out.json under way holds
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(command) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # the refund did not run
    assert captured.err == (
        "toolfold resume: --state-out out.json cannot be written (another toolfold process "
        "holds its lock: a run or resume writing it): nothing ran and toolfold-run.json is "
        "unchanged; make it writable, or give another --state-out FILE\n"
    )
    assert (run_file.read_text(), out.read_text()) == (kept, "held, and longer than nothing")
    assert (main(command), capsys.readouterr().out) == (0, "order A17 refunded\n")
    assert json.loads(out.read_text())["state"]["phase"] == "finished"
    assert run_file.read_text() == kept


def test_resume_into_a_new_state_out_in_a_folder_it_cannot_write_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new --state-out file whose folder cannot be written to is refused before the approved
    tool runs (exit 1)."""
    from toolfold._cli import main

    proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    (tmp_path / "locked").mkdir()
    checking = os.access

    def access(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
        if os.fspath(path) == "locked" and mode == os.W_OK:
            return False
        return checking(path, mode, *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "access", access)
    out = os.path.join("locked", "out.json")
    assert main(["resume", "toolfold-run.json", "--approve", "call_4_0", "--state-out", out]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # the refund did not run
    assert captured.err.startswith(
        f"toolfold resume: --state-out {out} cannot be written (its folder locked cannot be "
        "written to): nothing ran"
    )


def test_resume_into_a_state_out_on_a_file_system_without_locks_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where flock is refused (ENOLCK), an existing --state-out file is written unlocked."""
    import fcntl

    from toolfold._cli import main

    proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    out = tmp_path / "out.json"
    out.write_text("an older state, longer than the new one " * 400)

    def no_locks(handle: Any, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fcntl, "flock", no_locks)
    command = ["resume", "toolfold-run.json", "--approve", "call_4_0", "--state-out", "out.json"]
    assert (main(command), capsys.readouterr().out) == (0, "order A17 refunded\n")
    assert json.loads(out.read_text())["state"]["phase"] == "finished"


@pytest.mark.parametrize("stream", [[], ["--stream"]])
@pytest.mark.parametrize(
    ("model", "failure"),
    [("model_failing_once", "ServerError"), ("model_breaking", "RuntimeError")],
)
def test_a_failed_resume_with_json_prints_its_state(
    model: str, failure: str, stream: list[str], tmp_path: Path
) -> None:
    """``--json`` on exit 4 from a provider error or a RunError prints the state the run file
    holds, and nothing else, on stdout."""
    (tmp_path / "adds.toml").write_text(
        f'[agents.adder]\nmodel = "files_helpers:{model}"\ntools = ["files_helpers:add_logged"]\n'
    )
    env = {"PYTHONPATH": str(FILES)}
    assert toolfold("run", "adds.toml", "add 2 and 3", cwd=tmp_path, env=env).returncode == 3
    [call_id] = [c.id for c in _waiting(tmp_path / "toolfold-run.json")]
    resume = ("resume", "toolfold-run.json", "--approve", call_id, "--json", *stream)
    proc = toolfold(*resume, cwd=tmp_path, env=env)
    assert proc.returncode == 4, proc.stderr
    assert failure in proc.stderr
    kept = json.loads((tmp_path / "toolfold-run.json").read_text())["state"]
    assert json.loads(proc.stdout) == kept


def test_ctrl_c_with_json_prints_the_state_it_wrote(tmp_path: Path) -> None:
    """``--json`` on exit 130 (Ctrl-C mid-run) prints the state the run file holds on stdout."""
    (tmp_path / "adds.toml").write_text(
        '[agents.adder]\nmodel = "files_helpers:model"\ntools = ["files_helpers:add_interrupted"]\n'
    )
    env = {"PYTHONPATH": str(FILES)}
    proc = toolfold("run", "adds.toml", "add 2 and 3", "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 130, proc.stderr
    kept = json.loads((tmp_path / "toolfold-run.json").read_text())["state"]
    assert json.loads(proc.stdout) == kept
    assert kept["phase"] == "running_tools"


def _waiting_run_file(tmp_path: Path) -> tuple[Path, str]:
    """A run file (``toolfold-run.json`` in ``tmp_path``) waiting for call_4_0's approval, and its text."""
    proc = toolfold("run", str(EXAMPLE), *DEMO, "refund A17", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    run_file = tmp_path / "toolfold-run.json"
    return run_file, run_file.read_text()


def test_a_write_back_stopped_by_a_full_disk_leaves_the_old_run_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A resume's write-back that fails after half the new run file (a full disk) leaves the old
    run file whole and no temporary file, and its error names the run file."""
    from toolfold._cli import main

    run_file, kept = _waiting_run_file(tmp_path)
    writing = os.write

    def half(handle: int, data: Any) -> int:
        if bytes(data[:40]).startswith(b'{\n "format": "toolfold-run/1"'):
            writing(handle, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return writing(handle, data)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "write", half)
    assert main(["resume", "toolfold-run.json", "--approve", "call_4_0"]) == 1
    captured = capsys.readouterr()
    assert captured.err.endswith(
        "toolfold resume: cannot write the run file toolfold-run.json: No space left on "
        "device; the run file follows on stdout\n"
    )
    assert json.loads(captured.out.partition("\n")[2])["state"]["phase"] == "finished"
    assert run_file.read_text() == kept  # whole: the waiting run
    assert [p.name for p in tmp_path.iterdir()] == ["toolfold-run.json"]  # (no temporary file)


def test_ctrl_c_during_the_write_back_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C (SIGINT) halfway through a resume's write-back comes once the new state is written:
    exit 130, and the run file no longer waits for the approved tool, which cannot run again."""
    from toolfold._cli import main

    run_file, _ = _waiting_run_file(tmp_path)
    writing = os.write

    def half(handle: int, data: Any) -> int:
        if bytes(data[:40]).startswith(b'{\n "format": "toolfold-run/1"'):
            done = writing(handle, data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGINT)  # (Ctrl-C, halfway)
            return done
        return writing(handle, data)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "write", half)
    command = ["resume", "toolfold-run.json", "--approve", "call_4_0"]
    assert main(command) == 130
    assert capsys.readouterr().err.endswith("toolfold resume: interrupted\n")
    monkeypatch.undo()
    assert json.loads(run_file.read_text())["state"]["phase"] == "finished"
    assert [p.name for p in tmp_path.iterdir()] == ["toolfold-run.json"]  # (no temporary file)
    monkeypatch.chdir(tmp_path)
    assert main(command) == 1  # (the refund is not made twice)
    assert "no call 'call_4_0' waits for an approval" in capsys.readouterr().err


@pytest.mark.parametrize(
    "refusal",
    [
        "temporary",  # a folder it cannot write to: the new file cannot be made (EACCES)
        "rename",  # a bind-mounted run file (EBUSY)
    ],
)
def test_a_run_file_that_cannot_be_replaced_is_written_in_place(
    refusal: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run file whose new file cannot be made (EACCES) or renamed over it (EBUSY) is written in
    place, as before the replacing: the resume ends (exit 0), the same file holding the new state."""
    from toolfold._cli import main

    run_file, _ = _waiting_run_file(tmp_path)
    before = run_file.stat().st_ino
    opening, replacing = os.open, os.replace

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if refusal == "temporary" and ".toolfold-" in os.fspath(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return opening(path, flags, *args, **kwargs)

    def replace(source: Any, target: Any) -> None:
        if refusal == "rename":
            raise OSError(errno.EBUSY, "Device or resource busy")
        replacing(source, target)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "replace", replace)
    assert main(["resume", "toolfold-run.json", "--approve", "call_4_0"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "order A17 refunded\n", captured.err
    monkeypatch.undo()
    assert json.loads(run_file.read_text())["state"]["phase"] == "finished"
    assert run_file.stat().st_ino == before  # (written in place)
    assert [p.name for p in tmp_path.iterdir()] == ["toolfold-run.json"]


def test_a_run_file_with_another_hard_link_is_written_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run file with a second hard link is written in place, so both names hold the new state
    (a replacing file would leave the other name with the waiting run, to be resumed again)."""
    from toolfold._cli import main

    run_file, _ = _waiting_run_file(tmp_path)
    other = tmp_path / "shared-run.json"
    os.link(run_file, other)
    monkeypatch.chdir(tmp_path)
    assert main(["resume", "toolfold-run.json", "--approve", "call_4_0"]) == 0
    assert capsys.readouterr().out == "order A17 refunded\n"
    assert run_file.stat().st_ino == other.stat().st_ino
    assert json.loads(other.read_text())["state"]["phase"] == "finished"


@pytest.mark.parametrize("state_out", ["/dev/stdout", "log.txt"])
def test_a_state_out_that_is_stdout_s_file_is_written_through_it(
    state_out: str, tmp_path: Path
) -> None:
    """``--state-out /dev/stdout`` (or stdout's own file) with stdout sent to a file writes the
    run file through that file, as before, not by putting a new file in its place."""
    log = tmp_path / "log.txt"
    log.write_text("earlier log line\n")
    options = ("--state-out", state_out, "refund A17")
    before = log.stat().st_ino
    with log.open("a") as stdout:
        proc = subprocess.run(
            [*COMMAND, "run", str(EXAMPLE), *DEMO, *options],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=environment(None),
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
    assert proc.returncode == 3, proc.stderr
    assert log.stat().st_ino == before  # (the file stdout writes to, still)
    assert json.loads(log.read_text())["state"]["phase"] == "awaiting_approval"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.txt"]


def test_a_run_file_replaced_keeps_its_permission_bits(tmp_path: Path) -> None:
    """A run file written back keeps its mode (0o640 stays 0o640); a new one gets 0o666 less
    the umask, as a file ``open`` creates."""
    run_file, _ = _waiting_run_file(tmp_path)
    (tmp_path / "plain").touch()
    assert stat.S_IMODE(run_file.stat().st_mode) == stat.S_IMODE(
        (tmp_path / "plain").stat().st_mode
    )
    run_file.chmod(0o640)
    before = run_file.stat().st_ino
    proc = toolfold("resume", "toolfold-run.json", "--approve", "call_4_0", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (0, "order A17 refunded\n"), proc.stderr
    assert run_file.stat().st_ino != before  # (replaced, not written in place)
    assert stat.S_IMODE(run_file.stat().st_mode) == 0o640
    assert json.loads(run_file.read_text())["state"]["phase"] == "finished"


def test_a_resume_that_locked_a_replaced_run_file_reads_the_new_one(tmp_path: Path) -> None:
    """A resume that opened the run file just before another process renamed its new state over
    it, and locked it once that one ended, drops that old file and reads the one named now."""
    from toolfold._commands import _held

    run_file = tmp_path / "run.json"
    run_file.write_text("the old state")
    replaced = tmp_path / "new.json"
    replaced.write_text("the new state")
    opening = os.open
    opened: list[int] = []

    def racing(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        handle = opening(path, flags, *args, **kwargs)
        if flags & os.O_RDWR:
            opened.append(handle)
            if len(opened) == 1:  # the old file, opened; then another resume's write-back:
                os.replace(replaced, run_file)
        return handle

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "open", racing)
        with _held(run_file, None) as held:
            assert held.raw == b"the new state"
            assert os.path.samestat(os.fstat(held.handle), run_file.stat())
            assert len(opened) == 2  # (locked, found replaced, and opened again)


def test_a_write_holds_the_new_run_file_until_the_command_ends(tmp_path: Path) -> None:
    """The new run file is locked before it is renamed into place and stays locked until the
    command ends, so a resume started meanwhile is refused instead of reading it mid-command."""
    import argparse

    from toolfold import _flock
    from toolfold._commands import _Session

    run_file = tmp_path / "run.json"
    run_file.write_text("the old state")
    args = argparse.Namespace(stream=False, json=False, state_out=None)
    session = _Session("run", None, args, {}, str(run_file))
    session._write_text(b"the new state")
    probe = os.open(run_file, os.O_RDWR)
    try:
        assert run_file.read_text() == "the new state"
        assert _flock.try_lock(probe) == "held"
        session.close()
        assert _flock.try_lock(probe) == "locked"
    finally:
        os.close(probe)


def test_a_run_file_created_while_it_was_written_is_locked_before_it_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run file that another process created (and a resume of it holds) after ``run`` found
    none is not replaced unlocked: the write is refused as held, the file left as it is."""
    import argparse
    import fcntl

    from toolfold._commands import _Session

    run_file = tmp_path / "run.json"
    args = argparse.Namespace(stream=False, json=False, state_out=None)
    session = _Session("run", None, args, {}, str(run_file))
    looking = os.stat

    def created_after_the_look(path: Any, *rest: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(path) == str(run_file) and not holder:
            seen = FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
            run_file.write_text("another run's state")  # (after the look, before the write)
            holder.append(os.open(run_file, os.O_RDWR))
            fcntl.flock(holder[0], fcntl.LOCK_EX | fcntl.LOCK_NB)
            raise seen
        return looking(path, *rest, **kwargs)

    holder: list[int] = []
    monkeypatch.setattr(os, "stat", created_after_the_look)
    try:
        with pytest.raises(BlockingIOError):
            session._write_text(b"this run's state")
    finally:
        session.close()
        for handle in holder:
            os.close(handle)
    monkeypatch.undo()
    assert run_file.read_text() == "another run's state"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_a_failed_run_says_where_its_state_was_written_and_whether_it_resumes(
    tmp_path: Path,
) -> None:
    """Exit 4 says where the run file was written and how to go on, as exits 3 and 130 do: a
    run stopped before what failed, a workflow whose step failed and an agent whose answer
    did not fit its output type (asked again on resume) resume."""
    (tmp_path / "failing.py").write_text(
        "from toolfold.testing import ScriptedModel\n\n"
        "empty = ScriptedModel([])\n"
        "wrong = ScriptedModel(['not a number'])\n\n"
        "def boom(text: str) -> str:\n"
        "    raise ValueError('boom')\n"
    )
    (tmp_path / "f.toml").write_text(
        '[agents.empty]\nmodel = "failing:empty"\n'
        '[agents.wrong]\nmodel = "failing:wrong"\noutput_type = "builtins:int"\n'
        "output_retries = 0\n"
        '[workflows.flow]\nkind = "sequence"\nsteps = ["failing:boom"]\n'
    )
    env = {"PYTHONPATH": str(tmp_path)}
    resumes = "; once the cause is fixed, continue with: toolfold resume "
    for agent, says in (("empty", resumes), ("flow", resumes), ("wrong", resumes)):
        proc = toolfold("run", "f.toml", "hi", "--agent", agent, cwd=tmp_path, env=env)
        assert proc.returncode == 4, proc.stderr
        last = proc.stderr.splitlines()[-1]
        assert last.startswith("toolfold run: state written to "), proc.stderr
        assert says in last
        assert (tmp_path / "toolfold-run.json").exists()


def test_a_bad_model_option_is_named_as_the_option(tmp_path: Path) -> None:
    """``--model nope`` is reported under ``--model`` (the Python API says model=)."""
    proc = toolfold("check", str(EXAMPLE), "--model", "nope", cwd=tmp_path)
    assert proc.returncode == 1
    assert f"{EXAMPLE}: --model: 'nope' is not an import path like" in proc.stderr
    assert "model=" not in proc.stderr


def test_a_misspelt_hyphenated_provider_is_named_under_model(tmp_path: Path) -> None:
    """``--model openai-response:gpt-4o`` read as an import failure: it is the unknown
    provider, with the one meant."""
    proc = toolfold("check", str(EXAMPLE), "--model", "openai-response:gpt-4o", cwd=tmp_path)
    assert proc.returncode == 1
    assert (
        f"{EXAMPLE}: --model: unknown provider 'openai-response' in 'openai-response:gpt-4o' "
        "(did you mean 'openai-responses'?)" in proc.stderr
    )
    assert "import" not in proc.stderr


def test_a_parallel_failing_while_a_branch_waits_shows_its_round(tmp_path: Path) -> None:
    """Without --stream, a Parallel whose branch fails while another waits for an approval
    shows its calls and the failure (✗), as --stream does; resuming the kept state shows
    the failure again: both printed no tool line at all."""
    (tmp_path / "mixed.toml").write_text(
        'entry = "mixed"\n[agents.pay]\nmodel = "files_helpers:model"\n'
        'tools = ["files_helpers:add_approved"]\n'
        '[workflows.mixed]\nkind = "parallel"\nsteps = ["pay", "files_helpers:step_fails"]\n'
    )
    env = {"PYTHONPATH": str(FILES)}
    proc = toolfold("run", "mixed.toml", "go", "--state-out", "run.json", cwd=tmp_path, env=env)
    assert proc.returncode == 4, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[:3] == [
        '→ pay("go") [pay]',
        '→ step_fails("go") [step_fails]',
        "✗ step_fails: Error: ValueError: step kaboom",
    ]
    assert lines[3].startswith("toolfold run: the run failed: step 'step_fails'")
    proc = toolfold("resume", "run.json", cwd=tmp_path, env=env)
    assert proc.returncode == 4, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "✗ step_fails: Error: ValueError: step kaboom"
    assert lines[1].startswith("toolfold resume: the run failed: step 'step_fails'")


def test_an_answer_held_in_a_failed_nested_parallel_says_to_resume_first(tmp_path: Path) -> None:
    """A failed Sequence(shout, Parallel(pay, step_fails)), 'pay' waiting for an approval:
    answering that call (with --approve or --result) exits 1 saying it waits in the failed step
    and to resume first, not "waiting: none" (--result: that it waits for an approval, not a
    result, and the options that answer it); the run file is unchanged."""
    (tmp_path / "nested.toml").write_text(
        'entry = "flow"\n[agents.pay]\nmodel = "files_helpers:model"\n'
        'tools = ["files_helpers:add_approved"]\n'
        '[workflows.mixed]\nkind = "parallel"\nsteps = ["pay", "files_helpers:step_fails"]\n'
        '[workflows.flow]\nkind = "sequence"\nsteps = ["files_helpers:shout", "mixed"]\n'
    )
    env = {"PYTHONPATH": str(FILES)}
    proc = toolfold("run", "nested.toml", "go", "--state-out", "run.json", cwd=tmp_path, env=env)
    assert proc.returncode == 4, proc.stderr
    kept = (tmp_path / "run.json").read_text()
    for answer, waits, then in (
        (["--approve", "call_1_0"], "an approval", "answer it"),
        (
            ["--result", "call_1_0=1"],
            "an approval, not a result,",  # (which kind it waits for, and the options)
            "answer it with --approve call_1_0 or --deny call_1_0[=REASON], not --result",
        ),
    ):
        proc = toolfold("resume", "run.json", *answer, cwd=tmp_path, env=env)
        assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
        assert proc.stderr == (
            f"toolfold resume: call 'call_1_0' waits for {waits} in step 'mixed', which "
            "failed: resume the run first, with no answers (toolfold resume run.json), which "
            f"runs what failed again and has the run wait for the call again; then {then}\n"
        )
    assert (tmp_path / "run.json").read_text() == kept


@pytest.mark.parametrize(
    ("chunks", "shown"),
    [
        (["a line\r", "\nnext"], "a line\nnext"),  # CR LF split across two chunks
        (["a\r", "\r\nb"], "a\\x0d\nb"),  # a bare CR, then a whole CR LF
        (["end\r"], "end\\x0d"),  # a CR last: written when the stream ends
    ],
)
def test_a_cr_lf_split_across_streamed_chunks_is_a_newline_on_a_terminal(
    tmp_path: Path, chunks: list[str], shown: str
) -> None:
    """On a terminal, a chunk's trailing CR waits for the next chunk: CR LF is a newline as
    when it comes in one chunk, a bare CR is escaped (\\x0d), a last CR is written at the end."""
    import argparse
    import io

    from toolfold._session import _Session
    from toolfold.runtime import TextDelta

    session = _Session("run", None, argparse.Namespace(json=False), {}, str(tmp_path / "r.json"))
    session.out = io.StringIO()
    session.on_terminal = True
    for chunk in chunks:
        session._show(TextDelta(chunk), True, False)
    session._release_cr()
    assert session.out.getvalue() == shown


def test_a_held_cr_is_written_before_the_tool_lines_that_follow_it(tmp_path: Path) -> None:
    """On a terminal, a streamed chunk's trailing CR that no LF follows goes out before the
    tool call and result lines after it, not after them at the step's end."""
    import argparse
    import io

    from toolfold import Agent
    from toolfold._session import _Session
    from toolfold.testing import ScriptedModel

    written: list[tuple[str, str]] = []

    class Tagged(io.StringIO):
        def __init__(self, tag: str) -> None:
            super().__init__()
            self.tag = tag

        def write(self, text: str) -> int:
            if text.strip():
                written.append((self.tag, text.strip("\n")))
            return len(text)

    def shout(x: int) -> str:
        """Shout.

        Args:
            x: A number.
        """
        return "ok"

    session = _Session(
        "run", None, argparse.Namespace(json=False, stream=True), {}, str(tmp_path / "r.json")
    )
    session.out, session.err, session.on_terminal = Tagged("out"), Tagged("err"), True
    model = ScriptedModel([["abc\r", ScriptedModel.call("shout", {"x": 1})], "done"])
    ended, shown = True, False
    for event in Agent(model, tools=[shout]).stream("go"):
        ended, shown = session._show(event, ended, shown)
    session._release_cr()
    assert written[:4] == [
        ("out", "abc"),
        ("out", "\\x0d"),
        ("err", '→ shout({"x": 1}) [call_1_1]'),
        ("err", "← shout: ok"),
    ]


_PAINTER = """
from toolfold import ImagePart
from toolfold.testing import FunctionModel

model = FunctionModel(
    lambda request: ["Here:", ImagePart(b"\\x89PNG\\r\\n\\x1a\\n1", media_type="image/png")],
    name="painter:m",
)
"""


@pytest.mark.parametrize("stream", [[], ["--stream"]])
def test_an_image_the_model_answers_with_is_one_line(tmp_path: Path, stream: list[str]) -> None:
    """An answer's image is shown as one ``[image: type, N bytes]`` line, streamed or not."""
    (tmp_path / "painter.py").write_text(_PAINTER)
    agent_file = tmp_path / "painter.toml"
    agent_file.write_text('[agents.main]\nmodel = "openai:gpt-4o-mini"\n')
    proc = toolfold(
        "run", str(agent_file), "--model", "painter:model", *stream, "draw", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Here:\n"
    assert "[image: image/png, 9 bytes]" in proc.stderr.splitlines()


def _ticking(folder: Path) -> Path:
    """An agent file whose model answers with a character cp1252 lacks (✓) and one it has (é)."""
    (folder / "ticking_model.py").write_text(
        "from toolfold.testing import FunctionModel\n\n"
        "model = FunctionModel(lambda request: 'Done \\u2713 caf\\u00e9', name='tick:m')\n",
        encoding="utf-8",
    )
    agent_file = folder / "tick.toml"
    agent_file.write_text('[agents.a]\nmodel = "openai:gpt-4o-mini"\n', encoding="utf-8")
    return agent_file


@pytest.mark.parametrize("stream", [[], ["--stream"]])
def test_an_answer_stdout_cannot_encode_is_written_escaped(
    tmp_path: Path, stream: list[str]
) -> None:
    """Into a cp1252 stdout (Windows, redirected to a file) the answer is written with what
    cp1252 lacks escaped, and the run exits 0 (it lost the answer and exited 1)."""
    args = ["run", str(_ticking(tmp_path)), "--model", "ticking_model:model", *stream, "hi"]
    proc = subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        cwd=tmp_path,
        env=environment({"PYTHONIOENCODING": "cp1252"}),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"Done \\u2713 caf\xe9\n"


def test_json_into_a_stdout_that_is_not_utf8_is_ascii_json(tmp_path: Path) -> None:
    """With ``--json`` into a cp1252 stdout the state is written as ASCII JSON (every
    non-ASCII character a JSON escape), the same state, and the run exits 0."""
    args = ["run", str(_ticking(tmp_path)), "--model", "ticking_model:model", "--json", "hi"]
    proc = subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        cwd=tmp_path,
        env=environment({"PYTHONIOENCODING": "cp1252"}),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.isascii()
    text = proc.stdout.decode("ascii")
    RunState.from_json(text)  # (it loads)
    assert "Done \u2713 caf\u00e9" in json.dumps(json.loads(text), ensure_ascii=False)


def test_ascii_json_escapes_runs_as_json_dumps_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ascii_json` gives ``json.dumps(ensure_ascii=True)``'s text (CJK, é, an emoji outside
    the BMP), escaping each run of non-ASCII characters at once: it made one json.dumps call
    per character (1.5 s for 1M), and leaves a UTF-8 stream's JSON as it is."""
    from toolfold._session import ascii_json

    value = {
        "m": "\u4e2d\u6587" * 500,
        "n": "\u00e9 \u2713 \U0001f600\U0001f600 x",
        "k\u2713": ["\u00fc"],
    }
    text = json.dumps(value, ensure_ascii=False, indent=2)
    cp1252 = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    assert ascii_json(text, io.TextIOWrapper(io.BytesIO(), encoding="utf-8")) is text
    dumps = json.dumps
    calls: list[object] = []
    monkeypatch.setattr(json, "dumps", lambda v, *a, **k: calls.append(v) or dumps(v, *a, **k))
    assert ascii_json(text, cp1252) == dumps(value, ensure_ascii=True, indent=2)
    assert len(calls) == 6  # (the runs: the CJK text, é, ✓, the two emoji, the key's ✓, ü)


FORGING = """
from toolfold import ServerError
from toolfold.testing import FunctionModel


def _down(request):
    raise ServerError("overloaded\\ntoolfold run: all fine \\x1b[2K", provider="openai", status_code=503)


model = FunctionModel(_down, name="forging")


def step(text):
    raise ValueError("kaboom\\ntoolfold run: all fine")
"""


def test_the_run_failed_line_is_one_line_whatever_the_error_says(tmp_path: Path) -> None:
    """A provider's error (or a step's) with a newline prints one "the run failed" line,
    its newline and escape sequence written as escapes: it cannot add a line of its own."""
    (tmp_path / "forging.py").write_text(FORGING)
    (tmp_path / "a.toml").write_text('[agents.a]\nmodel = "forging:model"\n')
    (tmp_path / "w.toml").write_text('[workflows.w]\nkind = "sequence"\nsteps = ["forging:step"]\n')
    env = {"PYTHONPATH": str(tmp_path)}
    for name, said in (
        ("a.toml", r"ServerError: overloaded\x0atoolfold run: all fine \x1b[2K"),
        ("w.toml", r"ValueError: kaboom\x0atoolfold run: all fine"),
    ):
        proc = toolfold("run", name, "go", "--state-out", "r.json", cwd=tmp_path, env=env)
        assert proc.returncode == 4, proc.stderr
        (failed,) = [line for line in proc.stderr.splitlines() if "the run failed" in line]
        assert said in failed, failed
        assert not any(
            line.startswith("toolfold run: all fine") for line in proc.stderr.splitlines()
        )


SOURCES_FORGING = """
from toolfold import tool
from toolfold.mcp import MCPError
from toolfold.testing import FunctionModel


@tool
def ledger() -> str:
    '''Read the ledger.'''
    return "ok"


class BadClose:
    name = "srv"

    def open(self):
        pass

    def close(self):
        raise OSError("srv\\ntoolfold run: all fine \\x1b[2K")

    def tools(self):
        return [ledger]


class BadList(BadClose):
    def close(self):
        pass

    def tools(self):
        raise MCPError("srv", "crashed\\ntoolfold tools: all fine \\x1b[2K")


closing = BadClose()
listing = BadList()
model = FunctionModel(lambda r: "done", name="m")
"""


def test_a_source_or_server_text_in_the_cli_warnings_is_one_line(tmp_path: Path) -> None:
    """A tool source's close error and a server's listing error are each one CLI line, their
    newline and escape sequence written as escapes: they cannot add a line of their own."""
    (tmp_path / "srcmod.py").write_text(SOURCES_FORGING)
    (tmp_path / "c.toml").write_text(
        '[agents.a]\nmodel = "srcmod:model"\ntools = ["srcmod:closing"]\n'
    )
    (tmp_path / "l.toml").write_text(
        '[agents.a]\nmodel = "srcmod:model"\ntools = ["srcmod:listing"]\n'
    )
    env = {"PYTHONPATH": str(tmp_path)}
    for args, code, said in (
        (("run", "c.toml", "go"), 0, r"failed: OSError: srv\x0atoolfold run: all fine \x1b[2K"),
        (("tools", "l.toml"), 1, r"sources: MCP server 'srv': crashed\x0atoolfold tools: all fine"),
    ):
        proc = toolfold(*args, cwd=tmp_path, env=env)
        assert proc.returncode == code, proc.stderr
        assert said in proc.stderr, proc.stderr
        assert "\x1b" not in proc.stderr
        assert not any(
            "all fine" in line and "srv" not in line for line in proc.stderr.splitlines()
        )
