"""A resume's hold on its run file (and its --state-out file), and safe writes.

`_held` reads the run file under an exclusive lock, held until the command ends,
so two resumes of one file never both run its approved tools; `_claimed` makes
sure of a --state-out file before anything runs. `_written_through` and
`_uninterrupted` serve the write of the new state (`_Session._write_text`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from toolfold import _flock
from toolfold._cli_common import PROBLEM, _say, _Stop


class _Held(NamedTuple):
    """A run file as a resume read it: its text, and the descriptor that holds its lock."""

    raw: bytes
    handle: int = -1  # -1: not held (a pipe, Windows)
    out: int = -1  # an existing --state-out file opened for writing and locked, or -1


_UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


@contextlib.contextmanager
def _held(path: Path, state_out: str | None) -> Iterator[_Held]:
    """The run file ``path`` read under an exclusive ``flock``, held until the command ends.

    Taken before the file is read, then checked to be the file the path still names
    (`_flock.lock_named`: a write-back may rename a new file over it, and the file
    named now is tried instead), and the text is read from the locked descriptor
    itself, so the state resumed is the one the last resume wrote back; held past
    the write of the new state (`_Session._write_text`). Not waited for: the holder
    may run for long, or wait at the terminal for an answer, so a second resume is
    refused at once, with nothing run. Opened for writing where it can be (NFS and
    CIFS lock only such a file, and the new state may be written through it); a
    run file the new state would go to that cannot be opened for writing is refused
    before anything runs, as its approved tools would run again on every resume.
    Only a regular file is held: a pipe or FIFO (``/dev/stdin``, ``<(...)``) is read
    as it is, to its end. Where no lock can be had (Windows, a file system refusing
    locks) the resume goes on unlocked. A ``--state-out`` file other than the run
    file is checked the same way, before anything runs (`_claimed`).
    """
    if sys.platform == "win32":
        yield _Held(_read(path, path.read_bytes))
        return
    refusal: list[OSError] = []  # (why the file named now cannot be opened for writing)

    def opened() -> int:
        # Read-only and non-blocking first: a FIFO's open does not wait for a writer,
        # and a descriptor opened for writing would keep a pipe's reader from its end.
        probe: int = _read(path, lambda: os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        refusal.clear()
        if not stat.S_ISREG(os.fstat(probe).st_mode):
            return probe
        try:
            handle = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno in _UNWRITABLE:
                refusal.append(exc)
            return probe
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            os.close(handle)  # (swapped for something else in between: the probe is it)
            return probe
        os.close(probe)
        return handle

    try:
        handle, taken = _flock.lock_named(path, opened)
    except OSError as exc:  # (EBUSY: replaced each time it was locked)
        _say("resume", f"cannot read {path}: {exc.strerror}; nothing ran")
        raise _Stop(PROBLEM) from None
    out = -1
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            out = _claimed(path, state_out, handle)
            yield _Held(_read(path, path.read_bytes), out=out)  # (as it is, to its end)
            return
        if taken == "held":
            _say(
                "resume",
                f"{path} is held by another toolfold process (a resume of it, or a run writing "
                f"it; the run file is locked): nothing ran and {path} is unchanged; resume it "
                "once that one has ended",
            )
            raise _Stop(PROBLEM)
        if refusal and _names(state_out, handle):
            _say(
                "resume",
                f"{path} cannot be written ({refusal[0].strerror}): nothing ran; the new state "
                "goes back to the run file, so make it writable, or give --state-out FILE",
            )
            raise _Stop(PROBLEM)
        out = _claimed(path, state_out, handle)
        os.set_blocking(handle, True)
        yield _Held(_read(path, lambda: _read_all(handle)), handle, out)
    finally:
        if out != -1:
            os.close(out)  # (and its lock)
        os.close(handle)  # (and its lock)


def _claimed(path: Path, state_out: str | None, handle: int) -> int:
    """A ``--state-out`` file other than the run file, made sure of before anything runs.

    An approved tool whose new state cannot be written runs again on every resume
    (the run file still waits for it), so a --state-out file that exists is opened
    for writing (left as it is until the new state is written, `_Session._write_text`)
    and locked like a run file (another toolfold process writing it holds it), and
    one that does not exist needs a folder it can be created in; else the resume is
    refused, with nothing run. The
    descriptor returned holds the lock until the command ends; -1 where there is
    nothing to hold (no --state-out, the run file itself, a new file, or not a
    regular file, such as ``/dev/stdout``, which is opened when written). A file
    system refusing locks leaves it unlocked.
    """
    if state_out is None or _names(state_out, handle):
        return -1
    why = None
    taken: _flock.Taken = "no lock"
    try:
        # (non-blocking: a FIFO's open would wait for a reader; locked, then checked to
        # be still the file so named, as a run file is in `_held`)
        out, taken = _flock.lock_named(
            state_out, lambda: os.open(state_out, os.O_WRONLY | os.O_NONBLOCK)
        )
    except FileNotFoundError:
        folder = Path(state_out).parent
        if folder.is_dir() and not os.access(folder, os.W_OK):
            why = f"its folder {folder} cannot be written to"
        out = -1
    except OSError as exc:
        if exc.errno not in (*_UNWRITABLE, errno.EISDIR, errno.EBUSY):
            return -1  # (another trouble: found out when it is written, as before)
        why, out = exc.strerror or str(exc), -1
    if out >= 0 and not stat.S_ISREG(os.fstat(out).st_mode):
        os.close(out)
        return -1
    if out >= 0 and taken == "held":
        os.close(out)
        why, out = "another toolfold process holds its lock: a run or resume writing it", -1
    if why is not None:
        _say(
            "resume",
            f"--state-out {state_out} cannot be written ({why}): nothing ran and {path} is "
            "unchanged; make it writable, or give another --state-out FILE",
        )
        raise _Stop(PROBLEM)
    if out >= 0:
        os.set_blocking(out, True)
    return out


def _written_through(path: str | Path, found: os.stat_result) -> bool:
    """Whether the new state is written through ``path`` as it is (``found``: its stat), not replaced.

    So it is for what is not a regular file (a pipe, FIFO, terminal), for a name
    under ``/dev`` or ``/proc`` (``/dev/stdout``, ``/dev/fd/3``), and for the file
    stdout or stderr writes to (``--state-out out.txt > out.txt``), which a new file
    would take away from them.
    """
    if not stat.S_ISREG(found.st_mode):
        return True
    if os.path.abspath(path).startswith(("/dev/", "/proc/")):
        return True
    for stream in (1, 2):
        with contextlib.suppress(OSError):
            if os.path.samestat(os.fstat(stream), found):
                return True
    return False


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ctrl-C (SIGINT) held off until the block ends, then delivered as it would have been.

    Only on the main thread, where Python handles signals: a handler that notes
    the signal stands in for the one in place, which is put back, then the signal
    raised again if it came. Elsewhere, or when the handler in place was not set
    from Python, the block runs as it is.
    """
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        yield
        return
    came: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if came:
            signal.raise_signal(signal.SIGINT)


def _read(path: Path, read: Callable[[], Any]) -> Any:
    """``read()``, or a refusal naming ``path`` and why it cannot be read."""
    try:
        return read()
    except OSError as exc:
        _say("resume", f"cannot read {path}: {exc}")
        raise _Stop(PROBLEM) from None


def _read_all(handle: int) -> bytes:
    os.lseek(handle, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(handle, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def _names(state_out: str | None, handle: int) -> bool:
    """Whether the new state goes to the file open at ``handle`` (no --state-out, or the same file)."""
    if state_out is None:
        return True
    try:
        there, held = os.stat(state_out), os.fstat(handle)
    except OSError:
        return False
    return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)
