"""What the agent-file commands share: exit codes, the run file's format, messages.

A command ends early by raising `_Stop` with its exit code, after `_say` put
the message on stderr; `_read_line` asks at the terminal. What a model, a tool
or a server wrote is shown through `_visible`, so that it cannot drive the
terminal (clear a line, move the cursor, hide text) to pass for toolfold's own
lines, such as an approval question.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import select
import signal
import sys
import threading
from typing import TextIO

from toolfold.toolkit._results import BIDI, escaped_control, one_line

OK = 0
PROBLEM = 1
USAGE = 2
WAITING = 3
FAILED = 4
INTERRUPTED = 130

RUN_FILE = "toolfold-run/1"
DEFAULT_RUN_FILE = "toolfold-run.json"
_EXCERPT = 160


def _read_line(stream: TextIO) -> str:
    """A line from the terminal, or ``""`` at its end; Ctrl-C always interrupts the wait.

    A plain ``readline()`` loses a Ctrl-C that lands after Python last checked for
    signals but before the read begins: the handler only marks the signal, the read
    then blocks, and the question hangs until a line is typed (a program driving the
    command through a terminal hits that window). A wakeup file descriptor closes it:
    the signal's C-level handler writes to it whenever the signal lands, so the wait on
    it and the terminal ends at once and Python raises ``KeyboardInterrupt``. Off the
    main thread, off POSIX (no ``select`` on a console) or for a stream with no file
    descriptor, it is a plain ``readline()``.
    """
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd < 0 or os.name != "posix" or threading.current_thread() is not threading.main_thread():
        return stream.readline()
    made: list[tuple[int, int]] = []
    try:
        # Made and kept in one call from C, as the wakeup below: a Ctrl-C whose
        # KeyboardInterrupt came as a plain ``os.pipe()`` returned (Python runs handlers
        # there) was raised before the ends had names, and both stayed open.
        made.extend(itertools.starmap(os.pipe, ((),)))
        wake_r, wake_w = made[0]
        os.set_blocking(wake_w, False)
        earlier: list[int] = []
        try:
            # Installed and the earlier descriptor kept in one call from C, which no
            # Python signal handler interrupts: a Ctrl-C whose KeyboardInterrupt came
            # as ``set_wakeup_fd`` returned (Python runs handlers there) skipped the
            # restore, leaving the wakeup on this pipe once closed, and a later signal
            # wrote its number (b"\x02" for Ctrl-C) into whatever file took that
            # descriptor next, such as the run file being written back.
            earlier.extend(map(_install_wakeup, (wake_w,)))
            while True:
                ready, _, _ = select.select([fd, wake_r], [], [])
                if fd in ready:
                    return stream.readline()
                os.read(wake_r, 512)  # a signal whose handler did not raise: wait again
        finally:
            if earlier:
                signal.set_wakeup_fd(earlier[0])
    finally:
        for ends in made:
            try:
                os.close(ends[0])
            finally:  # (a KeyboardInterrupt as the first close returns)
                os.close(ends[1])


_install_wakeup = functools.partial(signal.set_wakeup_fd, warn_on_full_buffer=False)


class _Stop(Exception):
    """Ends a command with an exit code, after its message went to stderr."""

    def __init__(self, code: int) -> None:
        self.code = code


def _say(command: str, message: str) -> None:
    print(f"toolfold {command}: {_visible(message, lines=True)}", file=sys.stderr)


def as_typed(text: str, encoding: str) -> str:
    """``text``, read in ``encoding`` with ``surrogateescape``, as a UTF-8 terminal typed it.

    Under an ASCII locale (``LC_ALL=C``, outside Python's UTF-8 mode) Python keeps
    each byte of the command line or of stdin it cannot decode as a lone surrogate:
    "Où" would reach the model as "O\ufffd\ufffd". Text holding such bytes is
    decoded as UTF-8 instead; other text is returned as it is.

    Raises:
        UnicodeError: Its bytes are not UTF-8 either.
    """
    if not _ESCAPED.search(text):
        return text
    return text.encode(encoding, "surrogateescape").decode("utf-8")


_ESCAPED = re.compile("[\udc80-\udcff]")  # (a byte the encoding could not decode)

# What a terminal acts on instead of showing (see `one_line`), newlines and tabs kept.
_LINES = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI}]")


def _visible(text: str, *, lines: bool = False) -> str:
    """``text`` as the commands write it to a terminal: each control character as a
    visible escape (``\\x1b``, ``\\x0d``, ``\\u202e``); with ``lines``, newlines and
    tabs are kept (and CR LF is a newline)."""
    if lines:
        if "\r" in text:
            text = text.replace("\r\n", "\n")
        return _LINES.sub(escaped_control, text)
    return one_line(text)
