"""Opening tool sources for a run, and closing them however it ends.

The drivers open the sources of the agents a run reaches (a handoff target's
MCP servers...) and close them when the run ends; `Agent` opens its own the
same way when a run starts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from typing import Any, Protocol, runtime_checkable

from toolfold.toolkit._tool import Tool


@runtime_checkable
class ToolSource(Protocol):
    """What a run needs of a tool source.

    ``open`` and ``close`` nest (a source counts its holders); ``tools`` lists
    the tools of an open source as `Tool` values whose calls go to it.
    """

    def open(self) -> None:
        """Make the tools callable (start a process, connect...)."""

    def close(self) -> None:
        """Release what `open` took."""

    def tools(self) -> Sequence[Tool[..., Any]]:
        """The source's tools, listed now."""
        ...


@contextmanager
def opened(sources: Sequence[ToolSource]) -> Iterator[list[Tool[..., Any]]]:
    """Open every source, yield their tools, close them all however the block ends."""
    with ExitStack() as stack:
        listed: list[Tool[..., Any]] = []
        for source in sources:
            source.open()
            stack.callback(source.close)
            listed.extend(source.tools())
        yield listed


@asynccontextmanager
async def aopened(sources: Sequence[ToolSource]) -> AsyncIterator[list[Tool[..., Any]]]:
    """`opened` for async runs: opening and closing happen off the event loop."""
    import asyncio  # here, so that blocking runs never import asyncio

    async with AsyncExitStack() as stack:  # each one closed, even when another's close fails
        listed: list[Tool[..., Any]] = []
        for source in sources:
            await asyncio.to_thread(source.open)
            stack.push_async_callback(asyncio.to_thread, source.close)
            listed.extend(await asyncio.to_thread(source.tools))
        yield listed
