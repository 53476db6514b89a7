"""One command's run (`_Session`): shows it, asks at the terminal, writes the run file.

Output: the answer's text goes to stdout (as it arrives with ``--stream``);
tool calls and results, one compact line each, and every message go to
stderr. `_start` and `_continue` begin the run a session drives.
"""

from __future__ import annotations

import argparse
import codecs
import errno
import functools
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO, cast

from toolfold import _flock
from toolfold._cli_common import (
    _EXCERPT,
    FAILED,
    INTERRUPTED,
    OK,
    PROBLEM,
    RUN_FILE,
    WAITING,
    _read_line,
    _say,
    _Stop,
    _visible,
    as_typed,
)
from toolfold._errors import (
    RunError,
    SourceCloseError,
    ToolfoldError,
    UsageError,
)
from toolfold._run_files import _Held, _uninterrupted, _written_through
from toolfold.toolkit._results import describe_exception


def _start(agent: Any, prompt: str, stream: bool, on_step: Any) -> Any:
    if stream:
        return agent.stream(prompt)
    return agent.run(prompt, on_step=on_step)


def _continue(agent: Any, state: Any, answers: dict[str, Any], stream: bool, on_step: Any) -> Any:
    if stream:
        return agent.resume_stream(state, **answers)
    return agent.resume(state, on_step=on_step, **answers)


def _ended(stream: Any) -> Any:
    """The response of ``stream`` if the run it streams has ended, else None."""
    try:
        return stream.response
    except UsageError:  # (it has not ended)
        return None


class _Session:
    """One command's run: shows it, asks at the terminal, writes the run file, picks the code."""

    def __init__(
        self,
        command: str,
        agent: Any,
        args: argparse.Namespace,
        where: dict[str, Any],
        run_file: str,
        held: _Held | None = None,
        transfers: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.command = command
        self.held = held or _Held(b"")
        self.agent = agent
        self.args = args
        self.where = where
        self.run_file = Path(run_file)
        if not self.run_file.parent.is_dir():  # found out before the run, not after it
            _say(command, f"cannot write the run file {run_file}: no folder {self.run_file.parent}")
            raise _Stop(PROBLEM)
        self.out: TextIO = sys.stdout if sys.stdout is not None else cast(TextIO, _Closed())
        # The exit code once stdout could not be written (`_emit`): its reader went away
        # (`| head`: SIGPIPE's 141, no traceback) or it was closed (`>&-`: 1); 0 until then.
        self.gone = 0
        self.err: TextIO = sys.stderr
        # The answer's text is escaped on a terminal (`_visible`), where a model's
        # escape sequences could clear a line and write a fake approval question;
        # into a pipe or a file it goes as the model wrote it.
        self.on_terminal = _is_terminal(self.out)
        # A chunk's trailing CR, held back on a terminal until the next chunk shows
        # whether it starts a CR LF (a newline) or is a bare CR (escaped).
        self.held_cr = False
        self.shown: set[str] = set()
        self.stepped: set[int] = set()  # the steps `_step` showed
        # The agent a handoff gave each sub-run (by its path) to, seen in the stream: its
        # lines are labelled with that agent, not with the tool that started the sub-run.
        self.handed: dict[tuple[str, ...], str] = {}
        # (tool, agent) of each handoff a run of ``agent`` can make, at any depth (`transfers_of`):
        # only a result of such a tool saying it handed the run over to that agent relabels a
        # sub-run.
        self.transfers = transfers
        # The state the attempt under way resumes (None: a new run): `_failed_round` shows
        # what the attempt added to its log (`_log_before`, read only then).
        self.start: Any = None
        self.locks: list[int] = []  # descriptors holding run files' locks until `close`

    def go(
        self, first: Callable[[Any], Any], waiting: tuple[str, ...] = (), start: Any = None
    ) -> int:
        """Run ``first`` (a run, or a resume of the state ``start``), then answer at the
        terminal until it ends.

        When stdout cannot be written (`gone`), the run file is written as the run
        left it, and the code says stdout's failure rather than the run's end.
        """
        code = self._go(first, waiting, start)
        return self.gone if self.gone and code in (OK, WAITING) else code

    def _go(self, first: Callable[[Any], Any], waiting: tuple[str, ...], start: Any) -> int:
        self.start = start
        if start is not None:  # (a resume: the sub-runs it goes on with were handed on before)
            self.handed.update(_handed_sub_runs(start, ()))
        response = self._attempt(lambda: first(self._step), waiting)
        while not isinstance(response, int) and response.finish_reason in (
            "approval_required",
            "tool_calls",
        ):
            try:
                answers = self._ask(response) if sys.stdin.isatty() else None
            except KeyboardInterrupt:  # Ctrl-C at a question: the waiting run is kept
                return self._interrupted(response.state)
            if answers is None:
                self._keep(response.state)  # (--json: the waiting state, which resumes with --file)
                self._explain(response)
                return WAITING
            if getattr(self.args, "max_steps", None) is not None:  # (resume's: for the whole run)
                answers["max_steps"] = self.args.max_steps
            state = response.state
            self.start = state
            ids = tuple(c.id for c in (*state.pending_approvals, *state.tool_calls))
            go_on = functools.partial(
                _continue, self.agent, state, answers, self.args.stream, self._step
            )
            response = self._attempt(go_on, ids)
        if isinstance(response, int):
            return response
        if self.args.state_out or self.command == "resume":
            # A resumed run file holds the run's end, so its answers cannot be given twice.
            self._write(response.state)
        if self.args.json:
            self._emit_json(response.state.to_json() + "\n")
        if response.finish_reason == "error":
            _say(self.command, "the run failed (see the state's error)")
            return FAILED
        reason = response.finish_reason
        if reason == "max_iterations":
            _say(
                self.command, f"the run stopped: max_iterations ({_RAN_OUT}; the answer is {_LAST})"
            )
        elif reason != "stop":
            _say(self.command, f"the run stopped: {reason}")
        for path in _loops_ran_out(response.state):
            _say(
                self.command,
                f"note: the loop step {'/'.join(path)} stopped at max_iterations "
                f"({_RAN_OUT}; it passed on {_LAST})",
            )
        return OK

    def _attempt(self, call: Callable[[], Any], waiting: tuple[str, ...]) -> Any:
        """The response of ``call`` shown, or the exit code of its failure."""
        from toolfold.runtime.drive._shells import interrupt_waits

        try:
            # Ctrl-C while tools run on worker threads waits for them (and says so) so
            # that the run file keeps them: they must not run again on resume.
            with interrupt_waits(self._waits):
                outcome = call()
            if not hasattr(outcome, "finish_reason"):  # a stream: show it as it arrives
                return self._streamed(outcome, waiting)
            self._catch_up(outcome, waiting)
            if not self.args.json:
                self._emit(self._answer(outcome.text) + ("\n" if outcome.text else ""))
            return outcome
        except RunError as exc:
            if exc.state is not None:
                self._failed_round(exc.state)
            _say(
                self.command, f"the run failed: {_visible(str(exc))}"
            )  # (one line: a provider's text)
            if exc.state is not None:
                self._keep(exc.state)
                self._kept_failed(exc.state)
            return FAILED
        except SourceCloseError as exc:  # the run ended: it goes on as it ended
            failures = "; ".join(describe_exception(e) for e in exc.close_errors)
            _say(
                self.command,
                f"warning: the run ended, but closing a tool source failed: {_visible(failures)}",
            )  # (one line: a source's or server's text)
            outcome = exc.response
            if outcome is None:  # (only a workflow's stream closed early has none)
                raise
            self._catch_up(outcome, waiting)
            if not self.args.json and not self.args.stream:  # a stream showed its text
                self._emit(self._answer(outcome.text) + ("\n" if outcome.text else ""))
            return outcome
        except ToolfoldError as exc:
            from toolfold.runtime._api import state_of

            # A provider error carries the run as it stood (an approved tool may
            # have run): kept, so resuming the file again cannot run it twice.
            state = state_of(exc)
            if state is None and isinstance(exc, UsageError):
                # Refused before the run went on (an error of a run under way
                # carries its state): the input does not fit, and nothing ran.
                _say(
                    self.command,
                    f"{self._refused()}: {_as_options(self.command, str(exc), self.run_file)}",
                )
                return PROBLEM
            _say(self.command, f"the run failed: {_visible(describe_exception(exc))}")
            if state is not None:
                self._keep(state)
                self._kept_failed(state)
            return FAILED
        except KeyboardInterrupt as exc:  # Ctrl-C: what the run did is kept
            from toolfold.runtime._api import state_of

            state = state_of(exc)
            if state is None:
                raise
            return self._interrupted(state, ended=state.is_done)

    def _kept_failed(self, state: Any) -> None:
        """Say where a failed run's state was written, and whether and how it resumes."""
        from toolfold.runtime._retry import retry_state

        # a run stopped before what failed (a model call...) goes on; a failed workflow or
        # agent goes on from just before what failed it (`retry_state`), as `resume` does
        again = state.phase != "failed" or retry_state(state) is not None
        if again:
            _say(
                self.command,
                f"state written to {self.run_file}; once the cause is fixed, continue with: "
                f"toolfold resume {self.run_file}",
            )
        else:
            _say(
                self.command,
                f"state written to {self.run_file} (a failed run's state is final: it cannot "
                "be resumed; run again to start over)",
            )

    def _refused(self) -> str:
        """What could not be done, naming the agent and its file (and the state resumed)."""
        from toolfold.runtime._agent import Agent

        kind = "agent" if isinstance(self.agent, Agent) else "workflow"
        target = f"{kind} {self.agent.name!r} of {self.where['file']}"
        if self.command == "run":
            return f"cannot run {target} (nothing ran)"
        state = self.args.state
        return f"cannot resume {state} with {target} (nothing ran; {state} is unchanged)"

    def _interrupted(self, state: Any, ended: bool = False) -> int:
        """Ctrl-C: the run file written with ``state``, and the code to exit with.

        ``ended``: the run had ended (Ctrl-C came as its end was shown); ``state`` is
        its end, which only a run that waits for answers continues.
        """
        from toolfold.runtime.core._state import WAITING_PHASES

        self._keep(state)
        if self.gone:  # (stdout could not be written: the run stopped there)
            again = (
                ""
                if ended and state.phase not in WAITING_PHASES
                else (f"; continue with: toolfold resume {self.run_file}")
            )
            _say(
                self.command,
                f"stdout was closed; the run stopped; state written to {self.run_file}{again}",
            )
            return self.gone
        if ended and state.phase not in WAITING_PHASES:
            _say(self.command, f"interrupted as the run ended; state written to {self.run_file}")
            return INTERRUPTED
        _say(
            self.command,
            f"interrupted; state written to {self.run_file}; continue with: "
            f"toolfold resume {self.run_file}",
        )
        return INTERRUPTED

    def _catch_up(self, response: Any, waiting: tuple[str, ...]) -> None:
        """Show the results of answered calls no step or event showed (denials)."""
        from toolfold.runtime._response import steps_of

        for step in steps_of(response.state):
            for result in step.tool_results:
                if result.call_id in waiting and result.call_id not in self.shown:
                    self._result_line(result, 0, "")

    # -- showing -------------------------------------------------------------------

    def _streamed(self, outcome: Any, waiting: tuple[str, ...]) -> Any:
        """The response of a stream, its text and tool lines shown as they arrive."""
        from toolfold.runtime._api import state_of
        from toolfold.runtime.drive._shells import interrupt_waits

        ended_line = True
        shown = False
        events: Any = iter(outcome)  # (a generator: Ctrl-C can be thrown into it)
        try:
            with interrupt_waits(self._waits):
                try:
                    for event in events:
                        try:
                            ended_line, shown = self._show(event, ended_line, shown)
                        except KeyboardInterrupt as exc:
                            # Ctrl-C while an event is shown: thrown into the stream where
                            # it waits, so the run keeps what it did (the error carries its
                            # state) as it would had Ctrl-C come a moment later.
                            events.throw(exc)
                            raise
                        if self.gone:
                            # stdout's reader went away (`| head`): the run stops as at
                            # Ctrl-C, kept in the run file, instead of going on unseen.
                            events.throw(KeyboardInterrupt())
                            raise KeyboardInterrupt
                finally:
                    self._release_cr()
        except KeyboardInterrupt as exc:
            ended = _ended(outcome)
            if state_of(exc) is not None or ended is None:
                raise
            # Ctrl-C once the run had ended (as its last event was shown): no run is
            # under way to keep; the run file holds the run as it ended.
            return self._interrupted(ended.state, ended=True)
        response = outcome.response
        if not shown and not self.args.json and response.text:
            # A workflow's answer is its output, which arrives with no deltas of its own.
            self._emit(self._answer(response.text) + "\n")
        self._catch_up(response, waiting)
        return response

    def _waits(self) -> None:
        """Ctrl-C waits for a blocking tool (or model call) to return before the run is kept.

        A second Ctrl-C stops the wait: the run is kept as it stood (the calls still
        running then run again on resume), as a Ctrl-C that did not wait keeps it.
        """
        self._release_cr()
        print(
            f"toolfold {self.command}: stopping once the running tool or model call returns; "
            "press Ctrl-C again to stop now (what still runs then runs again on resume)",
            file=self.err,
            flush=True,
        )

    def _show(self, event: Any, ended_line: bool, shown: bool) -> tuple[bool, bool]:
        """Show one event of a stream; whether the output ends a line, and whether text was shown."""
        for depth, name, inner in _unwrap(event, self.handed, self.transfers):
            kind = getattr(inner, "kind", "")
            if kind == "text_delta" and depth == 0 and not self.args.json:
                text = "\r" + inner.text if self.held_cr else inner.text
                # (a CR LF split across two chunks is a newline, as in one chunk)
                self.held_cr = self.on_terminal and text.endswith("\r")
                self._emit(self._answer(text[:-1] if self.held_cr else text))
                ended_line = inner.text.endswith("\n")
                shown = True
            elif kind == "media" and depth == 0:
                self._media_line(inner.part)
            elif kind == "tool_call":
                self._call_line(inner.call, depth, name, inner.disposition)
            elif kind == "tool_result":
                self._result_line(inner.result, depth, name)
            elif kind == "step_end" and depth == 0 and not ended_line:
                self._release_cr()
                self._emit("\n")
                ended_line = True
        return ended_line, shown

    def _failed_round(self, state: Any) -> None:
        """Show the round a failure ended, which no step showed (a run not streamed).

        A round whose failure comes while another of its calls waits (a
        `Parallel` branch for an approval) never completes as a step: its
        calls, if this attempt made them, and the results this attempt
        gave them are shown as a stream shows them.
        """
        from toolfold.runtime._response import steps_of

        steps = steps_of(state)
        if self.args.stream or not steps or steps[-1].index in self.stepped:
            return
        new = state.log[_log_before(self.start) :]
        last = steps[-1]
        if any(event.kind == "model_responded" for event in new):  # (the last round's own)
            for call in last.tool_calls:
                self._call_line(call, 0, "", "")
        returned = {event.call_id for event in new if event.kind == "tool_returned"}
        for result in last.tool_results:
            if result.call_id in returned:
                self._result_line(result, 0, "")

    def _step(self, step: Any) -> None:
        self.stepped.add(step.index)
        for part in step.response.message.parts:
            if part.kind in ("image", "file"):
                self._media_line(part)
        for call in step.tool_calls:
            self._call_line(call, 0, "", "")
        for result in step.tool_results:
            self._result_line(result, 0, "")

    def _media_line(self, part: Any) -> None:
        """An image or file the model answered with, as one line (``[image: image/png, 9 bytes]``):
        a terminal shows no bytes, and the run file keeps them."""
        from toolfold.runtime.core._messages import describe_media

        self._release_cr()
        print(_visible(describe_media(part)), file=self.err)

    def _call_line(self, call: Any, depth: int, name: str, disposition: str) -> None:
        self._release_cr()  # (an answer's held CR goes out before the line after it)
        waits = " (waits for approval)" if disposition == "approve" else ""
        where = f"[{name}] " if name else ""
        text = _excerpt(_arguments_shown(call))
        line = f"{'  ' * depth}{where}→ {call.name}({text}) [{call.id}]{waits}"
        print(_visible(line), file=self.err)  # (the name and id are the model's, too)

    def _result_line(self, result: Any, depth: int, name: str) -> None:
        self._release_cr()
        if depth == 0:
            self.shown.add(result.call_id)
        mark = "✗" if result.is_error else "←"
        where = f"[{name}] " if name else ""
        text = _excerpt(result.content)
        print(_visible(f"{'  ' * depth}{where}{mark} {result.tool_name}: {text}"), file=self.err)

    # -- waiting -------------------------------------------------------------------

    def _ask(self, response: Any) -> dict[str, Any] | None:
        """Answers typed at the terminal, or None when stdin ends."""
        from toolfold.runtime._resume import answer_keys

        approvals: dict[str, Any] = {}
        results: dict[str, Any] = {}
        for key, call in answer_keys(response.state, "awaiting_approval"):
            question = f"approve {call.name}({_excerpt(call.arguments_text)}) [{key}]? [y/n] "
            answer = self._prompt(question, ("y", "yes", "n", "no"))
            if answer is None:
                return None
            approvals[key] = answer in ("y", "yes")
        for key, call in answer_keys(response.state, "to_return"):
            question = f"result of {call.name}({_excerpt(call.arguments_text)}) [{key}] as JSON: "
            while True:
                text = self._prompt(question, None)
                if text is None:
                    return None
                try:
                    results[key] = json.loads(text)
                    break
                except ValueError:
                    print('not JSON; quote text as "text"', file=self.err)
        return {"approvals": approvals or None, "tool_results": results or None}

    def _prompt(self, question: str, choices: tuple[str, ...] | None) -> str | None:
        question = _visible(question)  # a call's name, arguments and id are the model's
        while True:
            self.err.write(question)
            self.err.flush()
            line = _read_line(sys.stdin)
            if not line:
                return None
            try:  # (a result typed in UTF-8 under an ASCII locale: as typed, as argv's text)
                answer = as_typed(line.strip(), getattr(sys.stdin, "encoding", None) or "utf-8")
            except UnicodeError:
                self.err.write("not UTF-8 text: type it again in UTF-8\n")
                continue
            if choices is None or answer.lower() in choices:
                return answer.lower() if choices else answer
            self.err.write(f"answer {' or '.join(choices[::2])}\n")

    def _release_cr(self) -> None:
        """Write the CR held back from the last chunk (`_show`): no LF came after it."""
        if self.held_cr:
            self.held_cr = False
            self._emit(self._answer("\r"))

    def _emit(self, text: str) -> None:
        """``text`` written to stdout and flushed, unless stdout cannot be written (`gone`).

        A reader that went away (``| head -c 10``: a broken pipe) ends the output
        quietly, as well-behaved commands do (code 141, as a shell reports SIGPIPE);
        a closed stdout (``>&-``) is said once (code 1). Either way the run file is
        still written, and nothing more goes to stdout.
        """
        if self.gone:
            return
        try:
            written(self.out, text)
        except (OSError, ValueError) as exc:  # (ValueError: a closed file object)
            self.gone = SIGPIPE_EXIT if isinstance(exc, BrokenPipeError) else PROBLEM
            if self.gone == PROBLEM:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                _say(self.command, f"cannot write to stdout: {why}")
            quiet_stdout(self.out)

    def _emit_json(self, text: str) -> None:
        """JSON ``text`` written as `_emit` does, ASCII where stdout is not UTF-8 (`ascii_json`)."""
        self._emit(ascii_json(text, self.out))

    def _answer(self, text: str) -> str:
        """The answer's ``text`` as written to stdout: escaped on a terminal (`_visible`)."""
        return _visible(text, lines=True) if self.on_terminal else text

    def _keep(self, state: Any) -> None:
        """The run file written with ``state``, and with ``--json`` the state on stdout."""
        self._write(state)
        if self.args.json:
            self._emit_json(state.to_json() + "\n")

    def _write(self, state: Any) -> None:
        """The run file written with ``state``, or, when it cannot be, printed on stdout (exit 1).

        Written under the exclusive ``flock`` a resume holds it by (`_held`), not
        waited for: while another process holds it, the state is not written there,
        as that process's own write would replace it (`_write_text`).
        """
        document = {"format": RUN_FILE, **self.where, "state": json.loads(state.to_json())}
        text = json.dumps(document, indent=1) + "\n"
        try:
            self._write_text(text.encode("utf-8"))
        except OSError as exc:
            why = (
                "another toolfold process holds it (a run or resume writing it)"
                if isinstance(exc, BlockingIOError)
                else exc.strerror or str(exc)
            )
            _say(
                self.command,
                f"cannot write the run file {self.run_file}: {why}; the run file follows on stdout",
            )
            self._emit(text)
            raise _Stop(PROBLEM) from None

    def _write_text(self, data: bytes) -> None:
        """The run file (a symlink's target) made to hold ``data``: replaced whole where it can be.

        Ctrl-C waits until the write is done (`_uninterrupted`): a resume's run file
        then holds the run as it went on, never the waiting state whose approved
        tools already ran. The file is replaced whole (`_flock.replace_locked`), so a
        crash or a full disk mid-write leaves the old file whole, keeping its mode,
        owner and group (a new file gets ``0o666`` less the umask, as before). Where
        it cannot be replaced (`_flock.NotReplaced`: a folder that cannot be written
        to, a sticky folder, a bind-mounted file, an owner or group the new file
        cannot be given) it is written in place, as before, through the descriptor
        that holds it (`_flock.write_in_place`). A pipe, FIFO or terminal, a file
        named under ``/dev`` or ``/proc`` (``/dev/stdout``), and the very file stdout
        or stderr writes to are written through as they are, never replaced.

        Where locks can be had, the file is held before it is written (`_holding`),
        and a new file replacing it is locked before it is renamed into place; both
        stay held until the command ends (`close`).

        Raises:
            BlockingIOError: Another toolfold process holds the run file.
            OSError: It cannot be written; what it held is kept whole unless it was
                written in place.
        """
        with _uninterrupted():
            try:
                found: os.stat_result | None = os.stat(self.run_file)
            except FileNotFoundError:
                found = None
            if found is not None and _written_through(self.run_file, found):
                if not stat.S_ISREG(found.st_mode):
                    handle = os.open(self.run_file, os.O_WRONLY)
                    try:
                        _flock.write_all(handle, data)
                    finally:
                        os.close(handle)
                    return
                _flock.write_in_place(self._holding(self.run_file), data)
                return
            self._replace(os.path.realpath(self.run_file), found, data)

    def _replace(self, target: str, found: os.stat_result | None, data: bytes) -> None:
        """``target`` (``found``: as it was looked at) replaced with ``data``, or written in place."""
        for _ in range(_flock.ATTEMPTS):
            handle = -1
            if found is not None and sys.platform != "win32":
                # (no locks on Windows; and a file open there cannot be replaced)
                handle = self._holding(target)
                found = os.fstat(handle)
                if found.st_nlink > 1:  # (its other names would keep the old state)
                    _flock.write_in_place(handle, data)
                    return
            try:
                new = _flock.replace_locked(
                    target,
                    data,
                    None if found is None else stat.S_IMODE(found.st_mode),
                    None if found is None else (found.st_uid, found.st_gid),
                )
            except FileExistsError:  # (created meanwhile, maybe held: locked first, as above)
                found = os.stat(target)
                continue
            except _flock.NotReplaced:
                if sys.platform == "win32":
                    Path(target).write_bytes(data)
                    return
                if handle < 0:  # (a new file: created as open would, then held)
                    handle = self._holding(target, create=True)
                _flock.write_in_place(handle, data)
                return
            if new >= 0:
                self.locks.append(new)
            return
        raise OSError(errno.EBUSY, "it kept being created by another process", target)

    def _holding(self, path: str | Path, create: bool = False) -> int:
        """A descriptor, open for writing, that holds the lock of the regular file ``path``.

        One this command holds already (`_held`, `_claimed`, an earlier write), else
        ``path`` opened (``create``: made if missing) and locked, then checked to be
        the file so named (`_flock.lock_named`), and kept until `close`. A file system
        refusing locks leaves it unlocked.

        Raises:
            BlockingIOError: Another process holds its lock.
        """
        for held in (self.held.handle, self.held.out, *self.locks):
            if held >= 0 and _flock.same_file(held, path):
                return held
        # (for writing, non-blocking: NFS and CIFS lock only a file so opened, and a
        # FIFO swapped in meanwhile fails at once instead of waiting for a reader)
        flags = os.O_WRONLY | os.O_NONBLOCK | (os.O_CREAT if create else 0)
        handle, taken = _flock.lock_named(path, lambda: os.open(path, flags, 0o666))
        if taken == "held":
            os.close(handle)
            raise BlockingIOError(errno.EWOULDBLOCK, "held by another process", os.fspath(path))
        self.locks.append(handle)
        return handle

    def close(self) -> None:
        """Let go of the run files this command's writes hold (their locks), as it ends."""
        while self.locks:
            os.close(self.locks.pop())

    def _explain(self, response: Any) -> None:
        from toolfold.runtime._resume import answer_keys

        state = response.state
        waiting = [*answer_keys(state, "awaiting_approval"), *answer_keys(state, "to_return")]
        lines = [f"{key} ({call.name})" for key, call in waiting]
        what = "approvals" if response.pending_approvals else "tool results"
        _say(
            self.command,
            f"the run waits for {what}: {', '.join(lines)}; state written to {self.run_file}; "
            f"continue with: toolfold resume {self.run_file} --approve ID / --deny ID / "
            "--result ID=JSON",
        )


def _as_options(command: str, text: str, run_file: object = "RUN.json") -> str:
    """``Agent.resume``'s words (``max_steps=N``, ``message=...``, ``approvals=``) as
    ``resume``'s options (``--max-steps``, ``--message``, ``--approve``), for ``run_file``."""
    if command != "resume":
        return text
    import re

    text = re.sub(r"max_steps=(\S+) \(given to resume\)", r"--max-steps \1", text)
    text = text.replace(
        "max_steps is the total per turn", "max_steps (--max-steps) is the total per turn"
    )
    for api, option in (
        ("resume(message=...) cannot", "--message cannot"),
        ("with approvals= and", "with --approve ID / --deny ID and"),
        ("resume without message= (nothing was run)", "resume without --message (nothing was run)"),
        (
            "resume(response.state, message=...)",
            f"`toolfold resume {run_file} --message TEXT`",
        ),
        (
            "with tool_results= in the same resume as message=",
            "with --result ID=JSON in the same resume as --message",
        ),
        ("a larger max_steps does not", "a larger --max-steps does not"),
        ("with max_steps=N", "with --max-steps N"),
        ("with message=...", "with --message TEXT"),
    ):
        text = text.replace(api, option)
    return text


#: The code a shell reports for a command that SIGPIPE ended (128 + 13).
SIGPIPE_EXIT = 141


class _Closed:
    """What stdout is when the command started with it closed (``>&-``): writes fail."""

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "stdout is closed")

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


def written(stream: TextIO, text: str) -> None:
    """``text`` written to ``stream`` (stdout) and flushed; what its encoding cannot write
    (a cp1252 stdout redirected to a file on Windows) as ``\\u2713``-style escapes.

    Raises:
        OSError: It cannot be written (a broken pipe, a full disk).
        ValueError: It is closed.
    """
    try:
        stream.write(text)
    except UnicodeEncodeError:  # (written whole or not at all: it is encoded before writing)
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


def ascii_json(text: str, stream: TextIO) -> str:
    """JSON ``text`` with every non-ASCII character as a JSON escape when ``stream``'s
    encoding is not UTF-8: the same JSON, readable whatever encoding its reader assumes."""
    try:
        utf8 = codecs.lookup(getattr(stream, "encoding", None) or "utf-8").name == "utf-8"
    except (LookupError, TypeError):
        utf8 = False
    if utf8 or text.isascii():
        return text
    return _NOT_ASCII.sub(lambda found: json.dumps(found.group())[1:-1], text)


_NOT_ASCII = re.compile(r"[^\x00-\x7f]+")  # (runs: one json.dumps for each, not each character)


def quiet_stdout(stream: Any) -> None:
    """Point ``stream``'s descriptor at the null device, so that what it still buffers
    is dropped at exit instead of failing again there (as the Python docs advise)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


_RAN_OUT = "its until never held"
_LAST = "its last iteration's output"


def _log_before(state: Any) -> int:
    """How many events of ``state``'s log a resume of it starts from (none for a new run).

    A failed workflow goes on from just before what failed it (`retry_state`).
    """
    from toolfold.runtime._retry import retry_state

    if state is None:
        return 0
    if state.phase == "failed":
        retried = retry_state(state)
        return len((retried or state).log)
    return len(state.log)


def _loops_ran_out(state: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The sub-runs (any depth) of loops that ran out of iterations, by the call ids down to them."""
    for call_id, child in state.sub_runs.items():
        here = (*path, call_id)
        if child.finish_reason == "max_iterations":
            yield here
        yield from _loops_ran_out(child, here)


def _unwrap(
    event: Any, handed: dict[tuple[str, ...], str], transfers: frozenset[tuple[str, str]]
) -> Iterator[tuple[int, str, Any]]:
    """(depth, who runs it or "", the event) of a possibly nested event.

    Who runs a sub-run's event: the agent running each sub-run down its path,
    joined by "/" (``east/support``: two branches calling the same tool are
    told apart), each the tool that started it (its agent, or a workflow's
    step) until a handoff in that sub-run gave it to another agent (``handed``,
    by path, noted here from the transfer's result: ``east/refunds``). Only the
    result of a handoff's tool (``transfers``: tool, agent) that says it handed
    the run to that agent counts, not a plain tool's that reads the same; a
    new call opening a path (a model reusing a call id) drops what was noted
    for the sub-runs under it.
    """
    sub_run = getattr(event, "kind", "") == "sub_run"
    path, inner = (event.path, event.event) if sub_run else ((), event)
    if getattr(inner, "kind", "") == "tool_call":  # (a sub-run it starts is not handed yet)
        opened = (*path, inner.call.name, inner.call.id)
        for gone in [p for p in handed if p[: len(opened)] == opened]:
            del handed[gone]
    if not sub_run:
        yield 0, "", event
        return
    names = [handed.get(path[: i + 2], path[i]) for i in range(0, len(path) - 1, 2)]
    yield len(path) // 2, "/".join(names), inner
    if getattr(inner, "kind", "") == "tool_result" and inner.outcome == "ok":
        content = inner.result.content
        target = _HANDED.fullmatch(content) if isinstance(content, str) else None
        if target is not None and (inner.result.tool_name, target[1]) in transfers:
            handed[path] = target[1]  # (the text a handoff's tool returns: see `Handoff.tool`)


def transfers_of(spec: Any) -> frozenset[tuple[str, str]]:
    """(tool, agent) of each handoff a run of ``spec`` (an agent or a workflow) can make, at
    any depth: the transfer tool's name and the agent it hands a run to.

    Its handoff graph's agents, the agents and workflows their tools were made from
    (``as_tool``, found whether the file names them or they are Python objects), a
    workflow's steps, and so on below (each once: a graph may have cycles).
    """
    from toolfold.runtime._agent import Agent
    from toolfold.runtime._agent_tool import as_tool_of

    found: set[tuple[str, str]] = set()
    seen: set[int] = set()
    todo = [spec]
    while todo:
        each = todo.pop()
        if id(each) in seen:
            continue
        seen.add(id(each))
        if not isinstance(each, Agent):  # a workflow: its steps that run an agent or a workflow
            todo.extend(t.target for t in getattr(each, "_tasks", ()) if t.kind != "function")
            continue
        if each.handoffs:
            found.update((h.tool_name, h.target) for h in each._handoff_specs())
            todo.extend(each._reach()[0].values())  # (by name too; unresolved ones fail the run)
        todo.extend(m.agent for m in map(as_tool_of, each._options.tools.values()) if m)
    return frozenset(found)


def _handed_sub_runs(state: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    """(path, agent) of each open sub-run of ``state``'s tree that a handoff gave to another
    agent than the one it started with, by its path as `SubRunEvent` has it."""
    from toolfold.runtime.drive._failures import handed_to

    for c in state.calls:
        if c.child is None or c.status == "done":
            continue
        here = (*path, c.call.name, c.call.id)
        handed = handed_to(c.child)
        if handed is not None:
            yield here, handed[0]
        yield from _handed_sub_runs(c.child, here)


_HANDED = re.compile(r"Transferred to (.+)\.")
"""The result of a handoff's transfer call that handed the run over (`Handoff.tool`)."""


def _arguments_shown(call: Any) -> str:
    """A call's arguments as the user wrote them: a workflow step's input, as JSON.

    A workflow calls its steps with its input and the earlier outputs their
    templates read (``{"input": ..., "values": {...}}``), under the step's
    name as the call id (``.n`` for a loop's iteration, ``#n`` for a retry).
    """
    name, arguments = call.name, call.arguments
    if (
        arguments is not None
        and arguments.keys() == {"input", "values"}
        and (call.id == name or call.id.startswith((name + ".", name + "#")))
    ):
        step = json.loads(call.arguments_text)
        shown = json.dumps(step["input"], ensure_ascii=False)
        if not step["values"]:
            return shown
        return f"{shown}, values {json.dumps(step['values'], ensure_ascii=False)}"
    return str(call.arguments_text)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # a replaced or closed stream
        return False


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT else flat[: _EXCERPT - 1] + "…"
