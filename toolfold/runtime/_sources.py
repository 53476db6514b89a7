"""Tool sources: things that give a run its tools when it starts (an MCP server...).

A source is held next to an agent's tools (``Agent(tools=[get_weather, server])``).
Its tools are not known until it is opened, so each run opens its sources when it
starts, lists their tools beside the agent's own, and closes them when it ends,
however it ends. A source that is already open (``with server:``) stays open: a
source counts its holders and only the last one closes it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Generator, Iterable, Sequence
from contextlib import aclosing
from typing import Any

from toolfold._errors import SourceCloseError, UsageError
from toolfold.runtime._model import MODEL_OVERRIDE, overriding
from toolfold.runtime._response import Response, RunStreamEvent
from toolfold.runtime._run import (
    CHOICES,
    SHOWN_CHOICES,
    RunStream,
    meant,
    refuse_non_tool,
    unknown_choice,
)
from toolfold.runtime.core._repr import near_names, shown_names
from toolfold.runtime.drive._open import ToolSource, aopened, close_failed, opened
from toolfold.runtime.drive._shells import throw_into
from toolfold.toolkit._tool import Tool

__all__ = [
    "SourcedStream",
    "ToolSource",
    "aopened",
    "close_failed",
    "opened",
    "refuse_unlisted_choice",
    "source_label",
    "split_sources",
]


def split_sources(
    items: Iterable[Any],
) -> tuple[tuple[Any, ...], tuple[ToolSource, ...]]:
    """An agent's ``tools`` as (tools and functions, tool sources).

    Raises:
        ToolDefinitionError: An item that is neither (None, an agent: see
            `refuse_non_tool`).
    """
    tools: list[Any] = []
    sources: list[ToolSource] = []
    for index, item in enumerate(items):
        if _is_source(item):
            sources.append(item)
        else:  # (refused here, where ``index`` is its place in ``tools=``, sources and all)
            tools.append(refuse_non_tool(item, index))
    return tuple(tools), tuple(sources)


def refuse_unlisted_choice(
    tool_choice: str | None,
    own: Sequence[str],
    listed: Sequence[str],
    sources: Sequence[ToolSource],
    owner: str | None = None,
) -> None:
    """Refuse a ``tool_choice`` naming none of a run's tools, once its sources are listed.

    Args:
        tool_choice: The run's ``tool_choice``.
        own: The names of the agent's own tools (its transfer tools too).
        listed: The names of the tools its ``sources`` listed, as the model is sent them.
        sources: The agent's tool sources (an MCP server...).
        owner: Whose run it is (``"agent 'lead'"``), None for none in particular.

    Raises:
        UsageError: ``tool_choice`` is none of them, naming the sources and their
            tools (the near ones first).
    """
    if tool_choice in CHOICES or tool_choice in own or tool_choice in listed:
        return
    assert tool_choice is not None  # (None is in CHOICES)
    if not sources:
        raise UsageError(unknown_choice(tool_choice, own))
    near = near_names(tool_choice, [*own, *listed])
    labels = ", ".join(source_label(source) for source in sources)
    raise UsageError(
        f"tool_choice {tool_choice!r} is not a tool of {owner or 'this run'}: its own tools: "
        f"{shown_names(own, near, SHOWN_CHOICES) or 'none'}; the tools its tool sources "
        f"({labels}) listed, named as the model is sent them: "
        f"{shown_names(listed, near, SHOWN_CHOICES) or 'none'}{meant(near)}"
    )


def source_label(source: Any) -> str:
    """A tool source as an error names it: ``MCPServerStdio 'time'``."""
    name = getattr(source, "name", None)
    return type(source).__name__ + (f" {name!r}" if isinstance(name, str) else "")


def _is_source(item: Any) -> bool:
    return not isinstance(item, Tool) and not callable(item) and isinstance(item, ToolSource)


class SourcedStream(RunStream):
    """A run stream whose tool sources open when iteration starts and close when it ends."""

    def __init__(
        self, sources: Sequence[ToolSource], make: Callable[[list[Tool[..., Any]]], RunStream]
    ) -> None:
        # No `RunStream.__init__`: the run (its live drive and state) is made
        # only once the sources are open; the flags it reads are set here.
        self._sources = tuple(sources)
        self._make = make
        # The run is made once iteration starts, under the `override_models` block
        # the stream was made in (`RunStream`'s `_override`), even after it ended.
        self._override = MODEL_OVERRIDE.get()
        self._inner: RunStream | None = None
        self._response = None
        self._started = False
        self._stopped = False
        self._failed = None

    @property
    def response(self) -> Response[Any]:
        """The response, once the stream is exhausted.

        Raises:
            UsageError: The stream has not been iterated to its end yet, was
                stopped before it (the run was then abandoned), or raised (the
                run failed: the state it reached is the error's ``.state``).
        """
        if self._inner is not None and self._inner._response is not None:
            return self._inner._response  # (the run ended, whether or not the caller broke off)
        return super().response  # raises the usual "not finished" / "stopped" error

    def __iter__(self) -> Generator[RunStreamEvent, None, None]:
        self._claim_once()  # iterated once, as `RunStream`: a second one is refused
        try:
            with opened(self._sources) as listed:
                with overriding(self._override):
                    self._inner = self._make(listed)
                yield from self._inner
            self._response = self._inner._response
        except GeneratorExit:
            self._ended_or_stopped()
            raise
        except Exception as exc:
            failed = self._close_failed(exc)
            self._failing(failed)
            if failed is exc:
                raise
            raise failed from exc
        except BaseException as exc:  # (Ctrl-C)
            self._failing(exc)
            raise

    async def __aiter__(self) -> AsyncGenerator[RunStreamEvent, None]:
        self._claim_once()
        try:
            async with aopened(self._sources) as listed:
                with overriding(self._override):
                    self._inner = self._make(listed)
                events = self._inner.__aiter__()
                async with aclosing(events):
                    async for event in events:
                        try:
                            yield event
                        except GeneratorExit:
                            self._ended_or_stopped()
                            raise
                        except BaseException as exc:
                            await throw_into(events, exc)  # (so it carries the run's state)
                            raise
            self._response = self._inner._response
        except Exception as exc:
            failed = self._close_failed(exc)
            self._failing(failed)
            if failed is exc:
                raise
            raise failed from exc
        except BaseException as exc:  # (Ctrl-C, a cancellation; not the caller's stop)
            self._failing(exc)
            raise

    def _failing(self, exc: BaseException) -> None:
        if self._inner is None or self._inner._response is None:  # (else: a close failed)
            super()._failing(exc)

    def _ended_or_stopped(self) -> None:
        """The caller stopped iterating: keep the response if the run had ended (a
        ``break`` on its last event), else mark the run abandoned."""
        ended = None if self._inner is None else self._inner._response
        if ended is None:
            self._stopped = True
        else:
            self._response = ended

    def _close_failed(self, exc: Exception) -> Exception:
        """What to raise for ``exc``: itself, unless the run ended and a source's close failed."""
        ended = None if self._inner is None else self._inner._response
        # The run's error, or a handoff's sources' close error (the driver's
        # `SourceCloseError`, this one's attached): raised as it is.
        if ended is None or isinstance(exc, SourceCloseError):
            return exc
        return close_failed(exc, ended)
