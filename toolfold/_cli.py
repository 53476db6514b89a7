"""The ``toolfold`` command line.

Exit codes: 0 success; 1 the input could not be used (an agent file or a state
file that does not load, an unknown agent or call id, a state that does not fit
the agent resuming it); 2 the command line
itself is wrong (argparse's own code); 3 the run waits for approvals or tool
results (its run file is written); 4 the run failed; 130 interrupted; 141
stdout's reader went away (a broken pipe). See docs/cli.md.

Plain `argparse`: the standard library covers subcommands, repeated options
and ``--help`` on each command, and keeps the console script free of extra
dependencies (it ships with the core install).
"""

from __future__ import annotations

import argparse
import codecs
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import toolfold
from toolfold._cli_common import DEFAULT_RUN_FILE, USAGE, as_typed
from toolfold._errors import ToolfoldError


def _view(args: argparse.Namespace) -> int:
    from toolfold._commands import _out, state_text
    from toolfold.runtime._view import to_html
    from toolfold.runtime.core._state import RunState

    source = Path(args.state)
    try:
        state = RunState.from_json(state_text(source.read_bytes()))
    except (OSError, ValueError, ToolfoldError) as exc:  # (ValueError: not UTF-8, run_file_text)
        print(f"toolfold view: cannot load {source}: {exc}", file=sys.stderr)
        return 1
    target = Path(args.output) if args.output else source.with_suffix(".html")
    page = to_html(state, title=args.title).encode()  # made whole before the file is opened
    try:
        target.write_bytes(page)
    except OSError as exc:
        print(f"toolfold view: cannot write {target}: {exc}", file=sys.stderr)
        return 1
    return _out("view", f"{target}\n")


def _mcp(args: argparse.Namespace) -> int:
    try:
        from toolfold.mcp.__main__ import main as mcp_main
    except ImportError as exc:
        from toolfold.toolkit._results import describe_exception  # never raises, as str() may

        print(
            "toolfold mcp: needs the mcp extra (pip install 'toolfold[mcp]'): "
            f"{describe_exception(exc)}",
            file=sys.stderr,
        )
        return 1
    return mcp_main(list(args.rest), prog="toolfold mcp")


def _local(args: argparse.Namespace) -> int:
    from toolfold.local.__main__ import main as local_main

    return local_main(list(args.rest), prog="toolfold local")


def _agent_commands(commands: Any) -> None:
    from toolfold import _commands as c

    def add(name: str, help: str, handler: Any, description: str) -> argparse.ArgumentParser:
        made: argparse.ArgumentParser = commands.add_parser(
            name, help=help, description=description, epilog=_EXIT_CODES
        )
        made.set_defaults(handler=c.guarded(name, handler))
        return made

    run = add(
        "run",
        "run an agent file's agent on a prompt",
        c.run,
        "Run the entry agent or workflow of FILE (or --agent) on PROMPT. The answer goes to stdout, "
        "tool calls and results to stderr. A run that waits for approvals asks y/n per call "
        "when stdin is a terminal; otherwise it writes a run file and exits with 3.",
    )
    run.add_argument("file", metavar="FILE", help="an agent file (.toml, .yaml, .yml)")
    run.add_argument("prompt", metavar="PROMPT", help="the user's prompt")
    _run_options(run, state_out=f"{DEFAULT_RUN_FILE} in the current folder")
    resume = add(
        "resume",
        "answer a waiting run and continue it",
        c.resume,
        "Continue a run from the run file `toolfold run` wrote (or a bare state with --file): "
        "approve, deny or answer its waiting calls by id.",
    )
    # Optional to argparse only: a run file after the answers (`--approve ID RUN.json`)
    # is taken by the flag, and `_run_file_after_answers` takes it back.
    resume.add_argument(
        "state",
        nargs="?",
        metavar="STATE",
        help="the run file (or a bare state JSON); first, or last after the answers",
    )
    resume.add_argument("--file", help="the agent file (default: the one the run file names)")
    for flag, metavar, text in (
        ("--approve", "ID", "approve calls"),
        ("--deny", "ID[=REASON]", "deny calls (the reason is what the model reads)"),
        ("--result", "ID=JSON", "the result of a call returned to the caller, as JSON"),
    ):
        resume.add_argument(
            flag, nargs="+", default=[], action=_Answers, metavar=metavar, help=text
        )
    resume.set_defaults(answer_runs=(), command_error=resume.error)
    resume.add_argument(
        "--max-steps",
        type=int,
        metavar="N",
        help="an agent's new limit of model calls per turn (the total): continues a run "
        "that stopped at max_steps",
    )
    resume.add_argument(
        "--message", metavar="TEXT", help="a new user message: a new turn of an agent's ended run"
    )
    _run_options(resume, state_out="the run file resumed, STATE")
    usage = resume.format_usage()  # (argparse brackets STATE, optional to it: not to resume)
    if usage.startswith("usage: "):  # (plain text, not a colored one of Python 3.14)
        resume.usage = usage.removeprefix("usage: ").rstrip().replace("[STATE]", "STATE")
        resume.usage = resume.usage.replace("%", "%%")  # (argparse fills in %(prog)s)
    tools = add(
        "tools",
        "show each tool's schema as each provider receives it",
        c.tools,
        "Compile every tool of the file's agents (or --agent) for each dialect (or --dialect) "
        "and print the payload sent and every rewrite made.",
    )
    tools.add_argument("file", metavar="FILE", help="an agent file")
    tools.add_argument("--agent", help="only this agent")
    tools.add_argument(
        "--dialect", action="append", metavar="D", help="a dialect (repeat; default: all)"
    )
    tools.add_argument("--json", action="store_true", help="print the report as JSON")
    graph = add(
        "graph",
        "print an agent file's Mermaid diagram",
        c.graph,
        "Print the Mermaid flowchart of the entry (or --agent): agents, tools, sub-agents, "
        "tool sources, handoffs, workflow steps.",
    )
    graph.add_argument("file", metavar="FILE", help="an agent file")
    graph.add_argument("--agent", help="the agent or workflow to draw (default: the entry)")
    check = add(
        "check",
        "load and validate an agent file",
        c.check,
        "Load FILE, build every agent, and print every problem (exit 1 if any).",
    )
    check.add_argument("file", metavar="FILE", help="an agent file")
    check.add_argument("--model", help="check with this model for every agent")


class _Answers(argparse.Action):
    """``--approve``/``--deny``/``--result``: one or more values a time, the flag repeated
    for more (argparse's ``extend``); each time is noted too (``answer_runs``): the flag,
    its values, and where the last one went."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        taken = [*getattr(namespace, self.dest), *values]  # (a copy: not the default's list)
        setattr(namespace, self.dest, taken)
        run = (option_string, list(values), self.dest, len(taken) - 1)
        namespace.answer_runs = (*namespace.answer_runs, run)


def _run_file_after_answers(args: argparse.Namespace) -> str | None:
    """Why ``resume``'s command line has no run file, or None once it has one.

    The run file given last (``resume --approve ID RUN.json``) is taken by the flag
    before it as one more value: it is taken back when exactly one flag took more
    than one value and ended on a file that exists or a name ending in ``.json`` (not
    an ``ID=...``), which no call id is.
    """
    if args.state is not None:
        return None
    runs = [run for run in args.answer_runs if len(run[1]) > 1]
    found = [run for run in runs if _may_be_run_file(run[1][-1])]
    if len(found) == 1:
        _, values, dest, index = found[0]
        del getattr(args, dest)[index]
        args.state = values[-1]
        return None
    problem = "the following arguments are required: STATE"
    if len(found) > 1:
        return f"{problem} (more than one flag ends on what may be a run file: " + (
            ", ".join(f"{flag} ... {values[-1]}" for flag, values, _, _ in found)
            + "; give it first: toolfold resume RUN.json --approve ID)"
        )
    if runs:
        taken = ", ".join(f"{flag} {' '.join(values)}" for flag, values, _, _ in runs)
        return (
            f"{problem} (each value after a flag was taken as one of its answers: "
            f"{taken}; give the run file first: toolfold resume RUN.json --approve ID)"
        )
    return problem


def _may_be_run_file(value: str) -> bool:
    """Whether ``value``, the last taken by an answer flag, is the run file given after it."""
    # os.path.isfile, not Path.is_file: a --result value longer than a file name can be
    # (a big JSON answer) makes the latter raise OSError (ENAMETOOLONG).
    return os.path.isfile(value) or (value.endswith(".json") and "=" not in value)


def _run_options(command: argparse.ArgumentParser, *, state_out: str) -> None:
    command.add_argument("--agent", help="the agent or workflow to run (default: the file's entry)")
    command.add_argument(
        "--model",
        help="a model for every agent instead of the file's: provider:model, or an import "
        "path to a Model object (package.module:name)",
    )
    command.add_argument("--stream", action="store_true", help="stream the answer as it arrives")
    command.add_argument("--json", action="store_true", help="print the final state as JSON")
    command.add_argument(
        "--state-out", metavar="PATH", help=f"where the run file goes (default: {state_out})"
    )


_EXIT_CODES = (
    "exit codes: 0 done, 1 bad input (file, state, id), 2 bad command line, "
    "3 the run waits (run file written), 4 the run failed, 130 interrupted (run file written when a run was under way), "
    "141 stdout closed by its reader"
)


def parser() -> argparse.ArgumentParser:
    """The argument parser of the ``toolfold`` command."""
    top = argparse.ArgumentParser(
        prog="toolfold",
        description="Run, resume and inspect agent files; view a run; serve tools over MCP; "
        "manage the local model's server.",
        epilog=_EXIT_CODES,
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {toolfold.__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _agent_commands(commands)
    view = commands.add_parser(
        "view",
        help="write a run's state as a self-contained HTML page",
        description="Write the run in STATE (a state JSON or a run file) as one HTML page "
        "needing nothing else, next to STATE (or -o), and print the page's path.",
        epilog="exit codes: 0 done, 1 bad input (a STATE that does not load, a page that "
        "cannot be written), 2 bad command line, 141 stdout closed by its reader",
    )
    view.add_argument(
        "state",
        metavar="STATE",
        help="a state written by state.to_json(), or a run file of `toolfold run`",
    )
    view.add_argument("-o", "--output", help="the HTML file (default: STATE with .html)")
    view.add_argument("--title", help="the page title (default: the run id)")
    view.set_defaults(handler=_view)
    # `mcp` and `local` hand every argument, -h and --help included, to their own
    # command lines (`python -m toolfold.mcp`, `python -m toolfold.local`), which list
    # their subcommands: no prefix character here, so no argument is taken for an
    # option of this parser (building their parsers here would import the MCP SDK
    # and the local model's modules on every `toolfold` command).
    mcp = commands.add_parser(
        "mcp",
        help="MCP: serve toolfold tools (see `toolfold mcp --help`)",
        add_help=False,
        prefix_chars="\0",
    )
    mcp.add_argument("rest", nargs=argparse.REMAINDER)
    mcp.set_defaults(handler=_mcp)
    local = commands.add_parser(
        "local",
        help="the local model's server: build, serve, status, clean (see `toolfold local --help`)",
        add_help=False,
        prefix_chars="\0",
    )
    local.add_argument("rest", nargs=argparse.REMAINDER)
    local.set_defaults(handler=_local)
    return top


# The arguments holding text, not paths: what the model reads (the prompt, a denial's
# reason, a result) and names matched against a file's (an agent, a call id, a dialect).
_TEXT_ARGUMENTS = {
    "prompt": "PROMPT",
    "message": "--message",
    "approve": "--approve",
    "deny": "--deny",
    "result": "--result",
    "agent": "--agent",
    "dialect": "--dialect",
    "title": "--title",
}


def _texts_as_utf8(args: argparse.Namespace) -> str | None:
    """The text arguments read as UTF-8 where the locale's encoding could not read them
    (`as_typed`); returns what is wrong when one is not UTF-8 either, or None. Paths
    are left as the OS gave them: they name files by those very bytes. Under a UTF-8
    locale nothing is re-read: a byte that is not UTF-8 there reaches the model as
    U+FFFD, as typed."""
    encoding = sys.getfilesystemencoding()  # (argv's, on POSIX)
    if codecs.lookup(encoding).name == "utf-8":
        return None
    for dest, shown in _TEXT_ARGUMENTS.items():
        given = getattr(args, dest, None)
        if given is None:
            continue
        values = given if isinstance(given, list) else [given]
        read: list[Any] = []
        for value in values:
            try:
                read.append(as_typed(value, encoding) if isinstance(value, str) else value)
            except UnicodeError:  # (not UTF-8 either)
                return (
                    f"{shown} is not text in this locale's encoding ({encoding}) nor UTF-8: "
                    "type it in UTF-8 under a UTF-8 locale (LC_ALL=C.UTF-8), or set PYTHONUTF8=1"
                )
        setattr(args, dest, read if isinstance(given, list) else read[0])
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    top = parser()
    args = top.parse_args(argv)
    if args.command == "resume":
        problem = _run_file_after_answers(args)
        if problem is not None:
            args.command_error(problem)  # (as argparse says a missing STATE: exit 2)
    problem = _texts_as_utf8(args)
    if problem is not None:
        print(f"toolfold {args.command}: {problem}", file=sys.stderr)
        return USAGE
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
