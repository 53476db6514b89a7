"""Tools that the MCP tests serve with `python -m toolfold.mcp serve` (imported by path)."""

from __future__ import annotations

import os
import time

from toolfold import tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@tool
async def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: What to shout.
    """
    return text.upper()


@tool
def fail(reason: str) -> str:
    """Always fail.

    Args:
        reason: The failure message.
    """
    raise RuntimeError(reason)


@tool
def crash() -> str:
    """End the server process in the middle of the call."""
    os._exit(3)


@tool
def hang() -> str:
    """Never answer (the caller's timeout ends the call)."""
    time.sleep(3600)
    return "unreachable"


TOOLS = [add, shout, fail, crash, hang]
