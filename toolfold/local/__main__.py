"""``python -m toolfold.local build|serve|status|clean``: the local server, ahead of time.

- ``build [MODEL]``: build llama-server and install the model (default smollm2).
- ``serve [MODEL] [--port N]``: run a server in the foreground until Ctrl-C.
- ``status``: what is built and installed, and where.
- ``clean``: delete the cache folder (the next use builds again); exit 1 naming
  what is left when it is not a folder or some of it cannot be removed.
"""

from __future__ import annotations

import argparse
import errno
import shutil
import sys
from pathlib import Path

from toolfold._errors import ModelConfigError
from toolfold.local._build import LLAMA_CPP_PYTHON, built_binary, ensure_server_binary
from toolfold.local._model import print_progress
from toolfold.local._paths import CACHE_ENV, LocalSetupError, cache_dir, damage, remedy
from toolfold.local._server import LocalServer, check_port
from toolfold.local._weights import MODELS, ensure_model, installed_model


def main(argv: list[str] | None = None, *, prog: str = "python -m toolfold.local") -> int:
    """Run the command line; return the exit code (1 for an error, or a stdout that cannot
    be written; 141 when the reader of stdout went away)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Build, serve, show or delete the local model's llama-server ahead of time "
        "(docs/local-model.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build llama-server and install a model")
    build.add_argument("model", nargs="?", default="smollm2", help="a model name or .gguf path")
    serve = commands.add_parser("serve", help="run a server until Ctrl-C")
    serve.add_argument("model", nargs="?", default="smollm2", help="a model name or .gguf path")
    serve.add_argument(
        "--port",
        type=_port,
        default=None,
        help="1 to 65535 (default, or 0: a free port the server picks)",
    )
    commands.add_parser("status", help="show what is built and installed")
    commands.add_parser("clean", help="delete the cache folder")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            ensure_server_binary(print_progress)
            ensure_model(args.model, print_progress)
            return _out("ready\n")
        if args.command == "serve":
            return _serve(args.model, args.port)
        if args.command == "status":
            return _out(_status())
        return _out(_clean(cache_dir()))
    except ModelConfigError as exc:  # a LocalSetupError, or the local extra not installed
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # before `serve` serves: a build, a download, a start cut short
        print("interrupted", file=sys.stderr)
        return 130  # (the shell's code for SIGINT; Ctrl-C ending `serve` once it serves is 0)


def _out(text: str) -> int:
    """``text`` written to stdout as the other commands write it: 0; 141, quietly, when its
    reader went away (``| head -1``); 1, saying so, when it cannot be written (a full
    disk, closed). What its encoding cannot write is escaped (a cp1252 stdout on Windows)."""
    from toolfold._commands import _out as out

    return out("local", text)


def _port(text: str) -> int:
    """``--port``'s value, refused by argparse (exit 2) unless a port of 0 to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    try:
        return check_port(port)
    except LocalSetupError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _serve(model: str, port: int | None) -> int:
    """Serve until Ctrl-C or the server ends; the exit code: 0 for Ctrl-C once it serves
    (before, `main` returns 130), 1 when the server died (saying how, and where its log is), not 0
    either when stdout cannot take the line saying where it serves (the server is
    stopped)."""
    server = LocalServer(
        ensure_server_binary(print_progress), ensure_model(model, print_progress), port=port
    ).start()  # (interrupted, it stops what it started; `main` says so)
    code = 0
    try:
        code = _out(f"serving {server.model.name} at {server.base_url} (Ctrl-C stops it)\n")
        while code == 0 and server.alive():
            server.wait(1.0)
        if code == 0:  # (the server ended by itself: killed, out of memory, crashed)
            print(f"error: {server.exit_report()}", file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return code


def _clean(folder: Path) -> str:
    """Delete the cache folder; what was done, to print: ``removed``, or ``nothing to remove``.

    Raises:
        LocalSetupError: ``folder`` is not a folder (a file, a link), which is left
            alone, or some of it could not be removed (naming what is left).
    """
    if not folder.exists() and not folder.is_symlink():
        return f"nothing to remove at {folder}\n"
    if folder.is_symlink() or not folder.is_dir():
        raise LocalSetupError(
            f"the cache folder {folder} is not a folder (a file or a link): nothing removed; "
            f"set {CACHE_ENV} to a folder, or remove it yourself"
        )
    failures: list[str] = []

    def failed(path: str, error: BaseException) -> None:
        if getattr(error, "errno", None) != errno.ENOTEMPTY:  # (a folder kept by what failed)
            failures.append(f"{path}: {getattr(error, 'strerror', None) or error}")

    if sys.version_info >= (3, 12):
        shutil.rmtree(folder, onexc=lambda _function, path, error: failed(path, error))
    else:
        shutil.rmtree(folder, onerror=lambda _function, path, info: failed(path, info[1]))
    if failures or folder.exists():
        left = sum(1 for _ in folder.rglob("*")) if folder.is_dir() else 0
        raise LocalSetupError(
            f"could not remove all of {folder}: {left} file(s) and folder(s) left in it; "
            f"{len(failures)} failed: {'; '.join(failures[:3])}"
            + ("; ..." if len(failures) > 3 else "")
        )
    return f"removed {folder}\n"


def _status() -> str:
    """What is built and installed, and where, to print; a file seen damaged says so."""
    binary = built_binary()
    lines = [
        f"cache:        {cache_dir()}",
        f"llama-server: {binary or 'not built'} (llama-cpp-python {LLAMA_CPP_PYTHON})"
        + (_damaged(binary, executable=True) if binary else ""),
    ]
    for name in sorted(MODELS):
        model = installed_model(name)
        shown = f"{model}{_damaged(model, size=MODELS[name].size)}" if model else "not installed"
        lines.append(f"{name + ':':<13} {shown}")
    return "".join(f"{line}\n" for line in lines)


def _damaged(path: Path, *, executable: bool = False, size: int | None = None) -> str:
    """`` DAMAGED (...): remedy`` when ``path`` cannot be what it should (`damage`)."""
    problem = damage(path, executable=executable, size=size)
    return f" DAMAGED ({problem}): {remedy(path)}" if problem else ""


if __name__ == "__main__":
    sys.exit(main())
