"""The agent-file commands of ``toolfold``: run, resume, tools, graph, check.

Output: the answer's text goes to stdout (as it arrives with ``--stream``);
tool calls and results, one compact line each, and every message go to
stderr, so ``toolfold run ... > answer.txt`` keeps only the answer.

A run that waits for approvals or tool results asks on the terminal when
stdin is one; otherwise it writes a *run file* and exits with `WAITING`. The
run file is JSON: the state (``state``) and what rebuilds the agent (``file``,
``agent``, ``model``), so ``toolfold resume RUN.json`` needs nothing else.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from toolfold._cli_common import (
    DEFAULT_RUN_FILE,
    INTERRUPTED,
    OK,
    PROBLEM,
    RUN_FILE,
    USAGE,
    _say,
    _Stop,
    _visible,
)
from toolfold._cli_common import FAILED as FAILED  # (the exit codes, all here as before)
from toolfold._cli_common import WAITING as WAITING
from toolfold._cli_common import _read_line as _read_line  # (read by tests, as before)
from toolfold._errors import (
    AgentFileError,
    ToolfoldError,
    UsageError,
)
from toolfold._run_files import _Held, _held
from toolfold._session import (
    SIGPIPE_EXIT,
    _continue,
    _Session,
    _start,
    ascii_json,
    quiet_stdout,
    transfers_of,
    written,
)
from toolfold.toolkit._results import CONTROLS, NotUTF8Error, decoded_file


def state_text(raw: bytes) -> str:
    """The state inside a run file, or the file's text itself (a bare state, or not JSON at all).

    Raises:
        ValueError: The file is not UTF-8 text (`run_file_text`).
    """
    text = run_file_text(raw)
    try:
        document = json.loads(text)
    except ValueError:
        return text
    if isinstance(document, dict) and document.get("format") == RUN_FILE:
        return json.dumps(document.get("state"))
    return text


def run_file_text(raw: bytes) -> str:
    """A run file's (or a state's) bytes as text (`decoded_file`): UTF-8, UTF-16 or UTF-32
    (PowerShell 5's ``>`` writes UTF-16), a byte order mark dropped. ``view`` and
    ``resume`` read both through it.

    Raises:
        ValueError: It is none of them: the message says where its first bad byte is.
    """
    try:
        return decoded_file(raw, wide=True)
    except NotUTF8Error as exc:
        raise ValueError(str(exc) if exc.line is None else f"line {exc.line}: {exc}") from None


def _load(command: str, path: str, model: str | None, *, offline: bool = False) -> Any:
    """Load an agent file; ``offline``: model strings resolve to a stand-in (no key needed).

    ``check`` checks model names fully all the same (a ``local:`` model file that
    is not there), as a run would: a user's `override_models` does not.
    """
    from contextlib import nullcontext

    from toolfold.files._load import read_file
    from toolfold.runtime._model import _FULL_NAME_CHECK
    from toolfold.testing import TestModel, override_models

    source = Path(path)
    full = _FULL_NAME_CHECK.set(command == "check")
    try:
        with override_models(TestModel()) if offline else nullcontext():
            # (not `load`, whose model= errors are the Python API's: --model's are the file's)
            return read_file(
                source, model, str(source.resolve().parent), imports=command == "check"
            )
    except AgentFileError as exc:
        print(_visible(str(exc), lines=True), file=sys.stderr)  # (it may quote an MCP server)
        raise _Stop(PROBLEM) from None
    finally:
        _FULL_NAME_CHECK.reset(full)


def _agent(command: str, loaded: Any, name: str | None) -> Any:
    try:
        return loaded.get(name)
    except UsageError as exc:
        _say(command, str(exc))
        raise _Stop(PROBLEM) from None


def guarded(command: str, body: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """``body`` with its `_Stop` and Ctrl-C turned into exit codes."""

    def handler(args: argparse.Namespace) -> int:
        try:
            return body(args)
        except _Stop as stop:
            return stop.code
        except KeyboardInterrupt:
            _say(command, "interrupted")
            return INTERRUPTED
        except RecursionError:
            # A file whose agents (used as tools) and workflows nest hundreds of levels
            # deep loads, but showing or streaming it goes a few frames down per level.
            _say(
                command,
                "the agent file nests too deep for this command: its agents used as tools "
                "and workflow steps, each inside the next, went past Python's recursion "
                f"limit ({sys.getrecursionlimit()} frames); flatten it (a sequence takes many "
                "steps at one level)",
            )
            return PROBLEM

    return handler


# --- check, graph, tools -----------------------------------------------------------


def check(args: argparse.Namespace) -> int:
    """``toolfold check FILE``: load and validate, print every problem."""
    loaded = _load("check", args.file, args.model, offline=True)
    names = ", ".join(loaded.agents)
    flows = ", ".join(loaded.workflows)
    counted = f"{len(loaded.agents)} agent(s): {names}" if loaded.agents else "no agents"
    if loaded.workflows:
        counted += f"; {len(loaded.workflows)} workflow(s): {flows}"
    return _out("check", f"{args.file}: ok: {counted} (entry: {loaded.entry})\n")


def graph(args: argparse.Namespace) -> int:
    """``toolfold graph FILE``: the Mermaid diagram of the entry (or ``--agent``)."""
    loaded = _load("graph", args.file, None, offline=True)
    return _out("graph", _agent("graph", loaded, args.agent).to_mermaid())


def tools(args: argparse.Namespace) -> int:
    """``toolfold tools FILE``: every tool's compiled schema per dialect, with the rewrites."""
    from toolfold._errors import SchemaCompileError
    from toolfold.adapters._dialects import DIALECTS, compile_tool
    from toolfold.runtime._sources import opened
    from toolfold.toolkit._tool import advise_on_parameter_names

    loaded = _load("tools", args.file, None, offline=True)
    names = [args.agent] if args.agent else list(loaded.agents)  # workflows have no tools
    dialects = args.dialect or list(DIALECTS)
    unknown = [d for d in dialects if d not in DIALECTS]
    if unknown:
        _say("tools", f"unknown dialect {unknown[0]!r}; known: {', '.join(DIALECTS)}")
        return PROBLEM
    report: dict[str, Any] = {}
    for name in names:
        agent = _agent("tools", loaded, name)
        if not hasattr(agent, "_sources"):
            _say("tools", f"{name!r} is a workflow: its steps' agents have the tools")
            return PROBLEM
        try:
            with opened(agent._sources) as listed:
                own = agent._run_options(agent._graph_or_none()).tools  # handoffs described
                every = [*own.values(), *listed]
        except ToolfoldError as exc:
            # (a server of the file that does not start is the file's input: no run failed)
            _say("tools", f"agent {name!r}: cannot list its tool sources: {_visible(str(exc))}")
            return PROBLEM
        report.setdefault(name, {})  # an agent without tools is listed as such
        for tool in every:
            for dialect in dialects:
                try:
                    compiled = compile_tool(tool, dialect)
                except SchemaCompileError as exc:
                    advise_on_parameter_names(exc, {tool.name: tool})
                    entry: dict[str, Any] = {"error": str(exc)}
                else:
                    entry = {
                        "strict": compiled.strict,
                        "payload": compiled.payload,
                        "rewrites": [str(r) for r in compiled.rewrites],
                    }
                report.setdefault(name, {}).setdefault(tool.name, {})[dialect] = entry
    if args.json:  # (ASCII escapes only where stdout is not UTF-8, as `run --json`)
        shown = json.dumps(report, indent=2, default=str, ensure_ascii=False)
        return _out("tools", _shown_json(shown) + "\n")
    lines: list[str] = []
    for name, by_tool in report.items():
        lines.append(f"agent {name}" if by_tool else f"agent {name}: no tools")
        for tool_name, by_dialect in by_tool.items():
            lines.append(f"  tool {tool_name}")
            for dialect, entry in by_dialect.items():
                if "error" in entry:  # (its lines, each problem on one, indented under it)
                    error = _visible(entry["error"], lines=True).replace("\n", "\n      ")
                    lines.append(f"    {dialect}: cannot compile: {error}")
                    continue
                mode = "strict" if entry["strict"] else "non-strict"
                lines.append(f"    {dialect} ({mode}): {_payload_text(entry['payload'])}")
                lines.extend(_visible(f"      rewrite {rewrite}") for rewrite in entry["rewrites"])
    return _out("tools", "".join(f"{line}\n" for line in lines))


def _payload_text(payload: Any) -> str:
    """A compiled tool's payload as `tools` shows it: JSON on one line (`_shown_json`)."""
    return _shown_json(json.dumps(payload, sort_keys=True, ensure_ascii=False))


def _shown_json(text: str) -> str:
    """JSON ``text`` (``ensure_ascii=False``) as `tools` prints it: its text as it is (\\u
    escapes only where stdout is not UTF-8, `ascii_json`), but what a terminal acts on
    (a description's U+202E, a C1 control, U+2028) as a JSON escape: the same JSON,
    shown. (A raw newline is the indent's: JSON escapes those in its strings.)"""
    text = CONTROLS.sub(_json_escape, text)
    return ascii_json(text, sys.stdout)


def _json_escape(found: re.Match[str]) -> str:
    char = found.group()
    return char if char == "\n" else f"\\u{ord(char):04x}"


def _out(command: str, text: str) -> int:
    """``text`` written to stdout: OK, or the code of a stdout that cannot be written.

    As for ``run`` (`_Session._emit`): a reader that went away (``| head``) ends
    quietly with SIGPIPE's 141, a closed stdout (``>&-``) is said and exits 1.
    """
    out = sys.stdout
    try:
        if out is None:  # (started with stdout closed)
            raise OSError(errno.EBADF, "stdout is closed")
        written(out, text)
    except (OSError, ValueError) as exc:  # (ValueError: a closed file object)
        if out is not None:
            quiet_stdout(out)
        if isinstance(exc, BrokenPipeError):
            return SIGPIPE_EXIT
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        _say(command, f"cannot write to stdout: {why}")
        return PROBLEM
    return OK


# --- run and resume ----------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """``toolfold run FILE PROMPT``: run the entry agent (or ``--agent``) on a prompt."""
    loaded = _load("run", args.file, args.model)
    agent = _agent("run", loaded, args.agent)
    _not_a_source("run", args.state_out, args.file)
    if not args.state_out:
        _no_waiting_run_replaced(Path(DEFAULT_RUN_FILE))
    where = {
        "file": str(Path(args.file).resolve()),
        "agent": agent.name,
        "model": args.model,
    }
    run_file = args.state_out or DEFAULT_RUN_FILE
    session = _Session("run", agent, args, where, run_file, transfers=transfers_of(agent))
    try:
        return session.go(lambda on_step: _start(agent, args.prompt, args.stream, on_step))
    finally:
        session.close()


def _not_a_source(command: str, state_out: str | None, agent_file: str) -> None:
    """Refuse a ``--state-out`` that is the agent file or a module imported (its tools' code).

    The run file would replace it with JSON: the agent file would no longer
    load, nor the run file resume.
    """
    if not state_out:
        return
    target = os.path.realpath(state_out)
    if _same_file(state_out, target, agent_file):
        what = f"the agent file {agent_file}"
    else:
        imported = (getattr(module, "__file__", None) for module in list(sys.modules.values()))
        if not any(isinstance(f, str) and _same_file(state_out, target, f) for f in imported):
            return
        what = "the source of a module the agent file imports"
    _say(
        command,
        f"--state-out {state_out} is {what}: the run file would replace it; "
        "give another path (nothing ran)",
    )
    raise _Stop(USAGE)


def _same_file(path: str, real: str, other: str) -> bool:
    """``path`` (whose real path is ``real``) is ``other``: the same path, or the same
    file under another name (a hard link), which writing ``path`` would replace too."""
    if os.path.realpath(other) == real:
        return True
    try:
        return os.path.samefile(path, other)
    except (OSError, ValueError):  # (one of them does not exist: not the same file)
        return False


def _no_waiting_run_replaced(path: Path) -> None:
    """Refuse to start a run whose run file (the default one) holds a run waiting for answers.

    Its waiting calls would be lost with it: resume it, move it, or give
    ``--state-out``.
    """
    from toolfold.runtime.core._state import WAITING_PHASES, RunState

    try:
        document = json.loads(path.read_bytes())
        if not isinstance(document, dict) or document.get("format") != RUN_FILE:
            return
        state = RunState.from_json(json.dumps(document["state"]))
    except (OSError, ValueError, KeyError, ToolfoldError):
        return  # no run file, or none that resumes: replacing it loses nothing
    if state.phase not in WAITING_PHASES:  # (an ended or interrupted run is replaced, as before)
        return
    _say(
        "run",
        f"{path} holds a run that waits for answers ({state.phase}): a new run would replace it; "
        f"continue it with `toolfold resume {path}`, move it aside, or give --state-out PATH "
        "(nothing ran)",
    )
    raise _Stop(USAGE)


def resume(args: argparse.Namespace) -> int:
    """``toolfold resume RUN.json``: answer a waiting run and continue it.

    The run file is locked from before it is read until its new state is written
    back (`_held`), so two resumes of one file never both run its approved tools.
    """
    path = Path(args.state)
    with _held(path, args.state_out) as held:
        return _resume(args, path, held)


def _resume(args: argparse.Namespace, path: Path, held: _Held) -> int:
    from toolfold.runtime.core._state import RunState
    from toolfold.runtime.drive._failures import started_by

    try:
        document = json.loads(run_file_text(held.raw))
    except ValueError as exc:  # (not UTF-8, said by run_file_text, or not JSON)
        _say("resume", f"cannot read {path}: {exc}")
        return PROBLEM
    wrapped = isinstance(document, dict) and document.get("format") == RUN_FILE
    where = dict(document) if wrapped else {"file": None, "agent": None, "model": None}
    where.pop("state", None)
    where.pop("format", None)
    for key in ("file", "agent", "model"):
        given = getattr(args, key)
        if given is not None:
            where[key] = str(Path(given).resolve()) if key == "file" else given
    form = document.get("format") if isinstance(document, dict) else None
    if isinstance(document, dict) and not wrapped and not _state_format(form):
        _say(
            "resume",
            f"{path} is not a run file this toolfold reads: its format is "
            f"{_shown(document['format'])}, not {RUN_FILE!r} (a newer toolfold's, or not a run file)",
        )
        return PROBLEM
    if not isinstance(document, dict):
        _say(
            "resume",
            f"{path} is not a run file nor a run's state: expected a JSON object, "
            f"got {_shown(document)}",
        )
        return PROBLEM
    if wrapped and "state" not in document:
        _say("resume", f"{path} does not load as a run's state: the run file has no 'state'")
        return PROBLEM
    if where.get("file") is None:
        _say("resume", f"{path} is a bare state: give the agent file with --file FILE")
        return PROBLEM
    try:
        state = RunState.from_json(json.dumps(document["state"] if wrapped else document))
    except ToolfoldError as exc:
        _say("resume", f"{path} does not load as a run's state: {exc}")
        return PROBLEM
    agent_file = str(where["file"]) if args.file is not None else _stored_path(path, where["file"])
    loaded = _load("resume", agent_file, where.get("model"))
    agent = _agent("resume", loaded, where.get("agent"))
    _not_a_source("resume", args.state_out, agent_file)
    where["agent"] = agent.name
    run_file = args.state_out or str(path)
    session = _Session("resume", agent, args, where, run_file, held, transfers_of(agent))
    started = started_by(state)
    if started is not None and started != agent.name:
        # The API lets an agent resume a run handed to it; the run file names the one
        # that started the run, whose handoffs reach wherever the run went.
        _say(
            "resume",
            f"{session._refused()}: the run was started by {started!r}, not by "
            f"{agent.name!r}; resume it with --agent {started}",
        )
        return PROBLEM
    from toolfold.runtime._workflow import Workflow

    answers = _answers(args, state, "step" if isinstance(agent, Workflow) else "call")
    for option, key in (("--max-steps", "max_steps"), ("--message", "message")):
        if getattr(args, key) is None:
            continue
        if not hasattr(agent, "_sources"):  # (a workflow's resume takes answers only)
            _say("resume", f"{option} continues an agent's run; {agent.name!r} is a workflow")
            return USAGE
        answers[key] = getattr(args, key)
    waiting = tuple(c.id for c in (*state.pending_approvals, *state.tool_calls))
    try:
        return session.go(
            lambda on_step: _continue(agent, state, answers, args.stream, on_step),
            waiting,
            start=state,
        )
    finally:
        session.close()


def _stored_path(path: Path, stored: Any) -> str:
    """The agent file the run file ``path`` names (``stored``), as this process can open it.

    The run file holds the path as text. Written under a UTF-8 locale, a path
    with ``é`` cannot be encoded in an ASCII one (``LC_ALL=C``, outside Python's
    UTF-8 mode): its UTF-8 bytes, the file's name on disk, are taken instead
    when they name a file; else the resume is refused, saying how to run it.
    """
    if not isinstance(stored, str) or "\0" in stored:
        _say("resume", f"{path}: its 'file' is not an agent file's path: {_shown(stored)}")
        raise _Stop(PROBLEM)
    try:
        os.fsencode(stored)
        return stored
    except UnicodeEncodeError:
        pass
    try:
        rebuilt = os.fsdecode(stored.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:  # (a lone surrogate no bytes were read as: '\ud800')
        _say(
            "resume",
            f"{path}: its 'file' names no file in any encoding: {stored!r}; give --file FILE",
        )
        raise _Stop(PROBLEM) from None
    if os.path.isfile(rebuilt):
        return rebuilt
    _say(
        "resume",
        f"{path} names the agent file {stored!r}, which cannot be named in this locale's "
        f"encoding ({sys.getfilesystemencoding()}) nor found by its UTF-8 bytes: resume "
        "under a UTF-8 locale (LC_ALL=C.UTF-8) or with PYTHONUTF8=1, or give --file FILE",
    )
    raise _Stop(PROBLEM)


def _state_format(form: Any) -> bool:
    """Whether a JSON object's ``format`` is a bare state's (any version: `RunState.from_json`
    says which it reads), or absent (whatever it is, loading it as a state says what is wrong)."""
    return form is None or (isinstance(form, str) and form.startswith("toolfold.run_state/"))


def _shown(value: Any) -> str:
    """A value of a JSON document, short, for a message (a run file's wrong ``format``)."""
    from toolfold.runtime._document import describe

    return describe(value)


def _answers(args: argparse.Namespace, state: Any, where: str) -> dict[str, Any]:
    """The answers of the command line, checked against the waiting calls of ``state``
    (``where``: what the run's own calls are, "step" of a workflow or "call")."""
    from toolfold.runtime._resume import answer_keys, held_in_failure, held_refusal, waiting_call
    from toolfold.runtime._run import Denied

    approvals: dict[str, Any] = {}
    results: dict[str, Any] = {}
    answered = [*args.approve, *(item.partition("=")[0] for item in (*args.deny, *args.result))]
    for call_id in sorted({c for c in answered if answered.count(c) > 1}):
        _say("resume", f"{call_id} is answered more than once (--approve, --deny, --result)")
        raise _Stop(USAGE)
    for call_id in args.approve:
        approvals[call_id] = True
    for item in args.deny:
        call_id, _, reason = item.partition("=")
        approvals[call_id] = Denied(reason) if reason else False
    for item in args.result:
        call_id, sep, text = item.partition("=")
        if not sep:
            _say("resume", f"--result {item!r}: expected ID=JSON")
            raise _Stop(USAGE)
        try:
            results[call_id] = json.loads(text)
        except ValueError as exc:
            _say("resume", f"--result {call_id}: not JSON ({exc}); quote text as '\"text\"'")
            raise _Stop(USAGE) from None
    checks: tuple[tuple[dict[str, Any], Literal["awaiting_approval", "to_return"], str], ...] = (
        (approvals, "awaiting_approval", "an approval"),
        (results, "to_return", "a result"),
    )
    for ids, status, what in checks:
        for call_id in ids:
            try:
                found = waiting_call(state, call_id, status)
            except UsageError as exc:  # an id that calls of several sub-runs wait under
                _say("resume", str(exc))
                raise _Stop(PROBLEM) from None
            if found is None and _waits_otherwise(state, call_id, status):
                _say("resume", _other_answer(call_id, status))
                raise _Stop(PROBLEM)
            if found is None and state.phase == "failed":  # a failed nested step's branch?
                first = f"resume the run first, with no answers (toolfold resume {args.state})"
                held = held_in_failure(state, call_id, status)
                if held is not None:
                    _say("resume", held_refusal(call_id, what, where, held[0], first))
                    raise _Stop(PROBLEM)
                held = held_in_failure(state, call_id, _other(status))
                if held is not None:  # (of the other kind: say which, and the options)
                    kind = f"{_other_what(status)}, not {what},"
                    then = _answer_with(call_id, status)
                    _say("resume", held_refusal(call_id, kind, where, held[0], first, then))
                    raise _Stop(PROBLEM)
            if found is None:
                listed = ", ".join(key for key, _ in answer_keys(state, status)) or "none"
                _say("resume", f"no call {call_id!r} waits for {what}; waiting: {listed}")
                raise _Stop(PROBLEM)
    return {"approvals": approvals or None, "tool_results": results or None}


def _waits_otherwise(
    state: Any, call_id: str, status: Literal["awaiting_approval", "to_return"]
) -> bool:
    """Whether a call waits under ``call_id`` for the other kind of answer than ``status``."""
    from toolfold.runtime._resume import waiting_call

    try:
        return waiting_call(state, call_id, _other(status)) is not None
    except UsageError:  # (several calls under it, of the other kind: "no call" lists the keys)
        return False


def _other_answer(call_id: str, status: Literal["awaiting_approval", "to_return"]) -> str:
    """The refusal of an answer of the wrong kind (``status``'s) to a call waiting under
    ``call_id`` for the other kind, naming the options that answer it."""
    given = "an approval" if status == "awaiting_approval" else "a result"
    return (
        f"call {call_id!r} waits for {_other_what(status)}, not {given}: "
        f"{_answer_with(call_id, status)}"
    )


def _answer_with(call_id: str, status: Literal["awaiting_approval", "to_return"]) -> str:
    """How to answer call ``call_id``, given an answer of the wrong kind (``status``'s)."""
    if status == "awaiting_approval":
        return f"answer it with --result {call_id}=JSON, not --approve or --deny"
    return f"answer it with --approve {call_id} or --deny {call_id}[=REASON], not --result"


def _other(
    status: Literal["awaiting_approval", "to_return"],
) -> Literal["awaiting_approval", "to_return"]:
    """The status of a call waiting for the other kind of answer than ``status``."""
    return "to_return" if status == "awaiting_approval" else "awaiting_approval"


def _other_what(status: Literal["awaiting_approval", "to_return"]) -> str:
    """What a call waits for in the status `_other` than ``status``."""
    return "a result" if status == "awaiting_approval" else "an approval"
