"""The ``toolfold`` command line.

Exit codes: 0 success; 1 the input could not be used (a state file that does
not load, a tool path that does not resolve); 2 the command line itself is
wrong (argparse's own code).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from toolfold._errors import ToolfoldError


def _view(args: argparse.Namespace) -> int:
    from toolfold.runtime._view import to_html
    from toolfold.runtime.core._state import RunState

    source = Path(args.state)
    try:
        state = RunState.from_json(source.read_bytes())
    except (OSError, ToolfoldError) as exc:
        print(f"toolfold view: cannot load {source}: {exc}", file=sys.stderr)
        return 1
    target = Path(args.output) if args.output else source.with_suffix(".html")
    target.write_text(to_html(state, title=args.title), encoding="utf-8")
    print(target)
    return 0


def _mcp(args: argparse.Namespace) -> int:
    try:
        from toolfold.mcp.__main__ import main as mcp_main
    except ImportError as exc:
        print(
            f"toolfold mcp: needs the mcp extra (pip install 'toolfold[mcp]'): {exc}",
            file=sys.stderr,
        )
        return 1
    return mcp_main(list(args.rest))


def _local(args: argparse.Namespace) -> int:
    from toolfold.local.__main__ import main as local_main

    return local_main(list(args.rest))


def parser() -> argparse.ArgumentParser:
    """The argument parser of the ``toolfold`` command."""
    top = argparse.ArgumentParser(prog="toolfold", description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    view = commands.add_parser("view", help="write a run's state as a self-contained HTML page")
    view.add_argument("state", help="a state written by state.to_json()")
    view.add_argument("-o", "--output", help="the HTML file (default: STATE with .html)")
    view.add_argument("--title", help="the page title (default: the run id)")
    view.set_defaults(handler=_view)
    mcp = commands.add_parser("mcp", help="MCP: serve toolfold tools (see `toolfold mcp serve -h`)")
    mcp.add_argument("rest", nargs=argparse.REMAINDER)
    mcp.set_defaults(handler=_mcp)
    local = commands.add_parser(
        "local", help="the local: model's server: build, serve, status, clean (see -h)"
    )
    local.add_argument("rest", nargs=argparse.REMAINDER)
    local.set_defaults(handler=_local)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    args = parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
