"""Tools that the MCP tests serve with `python -m toolfold.mcp serve` (imported by path)."""

from __future__ import annotations

import asyncio
import os
import threading
import time

from toolfold import RunContext, tool


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


@tool
def snapshot(label: str) -> list[object]:
    """Return a caption, a tiny PNG and a PDF (a result with parts).

    Args:
        label: The caption.
    """
    from toolfold import FilePart, ImagePart

    png = b"\x89PNG\r\n\x1a\n" + label.encode()
    pdf = FilePart(b"%PDF-1.4 " + label.encode(), media_type="application/pdf", filename="r.pdf")
    return [label, ImagePart(png, media_type="image/png"), pdf]


MEDIA_TOOLS = [snapshot]


@tool
def greet(ctx: RunContext[dict[str, str]], greeting: str) -> str:
    """Greet the user named in the deps.

    Args:
        greeting: The greeting.
    """
    return f"{greeting}, {ctx.deps['user']} ({ctx.tool_name})"


@tool(timeout=0.5)
def slow_sync() -> str:
    """Wait until the test releases it (its timeout ends the call before)."""
    RELEASE.wait(3600)
    return "unreachable"


@tool(timeout=0.5)
async def slow_async() -> str:
    """Wait forever (its timeout ends the call)."""
    await asyncio.Event().wait()
    return "unreachable"


@tool(requires_approval=True)
def delete_everything(path: str) -> str:
    """Delete a folder (needs approval).

    Args:
        path: The folder.
    """
    return f"deleted {path}"


APPROVAL_TOOLS = [add, delete_everything]


RELEASE = threading.Event()
"""Set by the test once `slow_sync` timed out, so that its abandoned thread ends."""
