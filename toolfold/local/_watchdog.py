"""Run a server for as long as the process that started it lives (stdlib only).

    python _watchdog.py llama-server -m model.gguf ...

The parent holds the write end of this process's stdin and never writes to it.
When the parent exits, however it exits (normally, on Ctrl-C, on SIGKILL), the
operating system closes that end, the read below returns, and the server is
stopped. On Linux the server also gets ``PR_SET_PDEATHSIG``: if this watchdog
is killed outright, the kernel kills the server too. No orphan survives.

    python _watchdog.py --exit-pipe=FD llama-server ...

hands the write end ``FD`` of the parent's pipe to the server alone (this
process closes its copy): the parent's read end reaches its end of file the
moment the server exits, whatever this process is doing then.

Run as a script by path, so it imports nothing of toolfold and starts fast.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any

_GRACE_SECONDS = 5
#: The option (first, before the command) naming the pipe end the server holds.
_EXIT_PIPE = "--exit-pipe="


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _stop(child: subprocess.Popen[Any]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def main(argv: list[str]) -> int:
    """Start ``argv``, stop it when stdin closes or a signal arrives; return its exit code."""
    linux = sys.platform.startswith("linux")
    held: tuple[int, ...] = ()
    if argv and argv[0].startswith(_EXIT_PIPE):
        held = (int(argv[0][len(_EXIT_PIPE) :]),)
        argv = argv[1:]
    try:
        child = subprocess.Popen(
            argv, preexec_fn=_die_with_parent if linux else None, pass_fds=held
        )
    except OSError as exc:  # an empty or damaged binary (Exec format error), no permission
        print(f"watchdog: cannot run {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 126  # (the shell's code for a command found but not runnable)
    for handle in held:
        os.close(handle)  # the server's alone now: its exit ends the parent's pipe

    def on_signal(signum: int, frame: object) -> None:
        _stop(child)
        _exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def watch_parent() -> None:
        sys.stdin.buffer.read()  # returns at EOF: the parent is gone or let go
        _stop(child)

    threading.Thread(target=watch_parent, daemon=True).start()
    code = child.wait()
    if code < 0:  # the log says why the server is gone (a crash prints nothing itself)
        try:
            name = signal.Signals(-code).name
        except ValueError:  # a real-time signal has no name
            name = f"signal {-code}"
        print(f"watchdog: {argv[0]} died of {name}", file=sys.stderr)
    return code if code >= 0 else 128 - code


def _exit(code: int) -> None:
    """Exit at once: the interpreter's shutdown would wait on the thread reading stdin
    (and abort with "could not acquire lock for <stdin>")."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main(sys.argv[1:]))
