"""``python -m toolfold.local build|serve|status|clean``: the local server, ahead of time.

- ``build [MODEL]``: build llama-server and install the model (default smollm2).
- ``serve [MODEL] [--port N]``: run a server in the foreground until Ctrl-C.
- ``status``: what is built and installed, and where.
- ``clean``: delete the cache folder (the next use builds again).
"""

from __future__ import annotations

import argparse
import shutil
import sys

from toolfold.local._build import LLAMA_CPP_PYTHON, built_binary, ensure_server_binary
from toolfold.local._model import print_progress
from toolfold.local._paths import LocalSetupError, cache_dir
from toolfold.local._server import LocalServer
from toolfold.local._weights import MODELS, ensure_model, installed_model


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m toolfold.local", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build llama-server and install a model")
    build.add_argument("model", nargs="?", default="smollm2", help="a model name or .gguf path")
    serve = commands.add_parser("serve", help="run a server until Ctrl-C")
    serve.add_argument("model", nargs="?", default="smollm2", help="a model name or .gguf path")
    serve.add_argument(
        "--port", type=int, default=None, help="default: a free port the server picks"
    )
    commands.add_parser("status", help="show what is built and installed")
    commands.add_parser("clean", help="delete the cache folder")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            ensure_server_binary(print_progress)
            ensure_model(args.model, print_progress)
            print("ready")
        elif args.command == "serve":
            _serve(args.model, args.port)
        elif args.command == "status":
            _status()
        else:
            shutil.rmtree(cache_dir(), ignore_errors=True)
            print(f"removed {cache_dir()}")
    except LocalSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _serve(model: str, port: int | None) -> None:
    server = LocalServer(
        ensure_server_binary(print_progress), ensure_model(model, print_progress), port=port
    ).start()
    print(f"serving {server.model.name} at {server.base_url} (Ctrl-C stops it)", flush=True)
    try:
        while server.alive():
            server.wait(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def _status() -> None:
    binary = built_binary()
    print(f"cache:        {cache_dir()}")
    print(f"llama-server: {binary or 'not built'} (llama-cpp-python {LLAMA_CPP_PYTHON})")
    for name in sorted(MODELS):
        print(f"{name + ':':<13} {installed_model(name) or 'not installed'}")


if __name__ == "__main__":
    sys.exit(main())
