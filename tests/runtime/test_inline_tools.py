"""``blocking=False``: a quick sync tool runs inline on the event loop in async runs."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from toolfold import (
    ModelRequest,
    RunContext,
    Tool,
    ToolDefinitionError,
    agenerate_text,
    generate_text,
    tool,
)
from toolfold.testing import ScriptedModel

call = ScriptedModel.call

TIMEOUT_PROBLEM = (
    "blocking=False runs the tool inline on the event loop, where a timeout cannot"
    " interrupt it; drop timeout=... or keep blocking=True (a worker thread)"
)


def _tool_results(request: ModelRequest) -> list[Any]:
    return [r for m in request.messages for r in m.tool_results]


def _run_async(model: ScriptedModel, tools: list[Any]) -> int:
    """Run the loop with agenerate_text; the loop thread's id."""

    async def main() -> int:
        await agenerate_text(model, "go", tools=tools)
        return threading.get_ident()

    return asyncio.run(main())


def _thread_tools() -> tuple[Tool[..., Any], Tool[..., Any], list[tuple[str, int]]]:
    seen: list[tuple[str, int]] = []

    @tool(blocking=False)
    def inline(n: int) -> int:
        """Runs on the loop."""
        seen.append(("inline", threading.get_ident()))
        return n

    @tool
    def threaded(n: int) -> int:
        """Runs in a worker."""
        seen.append(("threaded", threading.get_ident()))
        return n

    return inline, threaded, seen


def test_lone_non_blocking_call_runs_on_the_loop_thread() -> None:
    """A step's only call to a blocking=False tool runs on the event loop's thread."""
    inline, _, seen = _thread_tools()
    model = ScriptedModel([call("inline", {"n": 4}), "done"])
    loop_thread = _run_async(model, [inline])
    assert seen == [("inline", loop_thread)]
    assert [r.content for r in _tool_results(model.requests[1])] == ["4"]
    assert inline.blocking is False


def test_default_sync_tool_runs_in_a_worker_thread() -> None:
    """A sync tool without the option still runs off the loop, in a worker thread."""
    _, threaded, seen = _thread_tools()
    model = ScriptedModel([call("threaded", {"n": 1}), "done"])
    loop_thread = _run_async(model, [threaded])
    ((_, thread),) = seen
    assert thread != loop_thread
    assert threaded.blocking is True


def test_mixed_step_keeps_each_tool_where_it_belongs_results_in_order() -> None:
    """In a step with several calls, inline calls run on the loop, the others in threads."""
    inline, threaded, seen = _thread_tools()
    calls = [call("threaded", {"n": 0}), call("inline", {"n": 1}), call("threaded", {"n": 2})]
    model = ScriptedModel([calls, "done"])
    loop_thread = _run_async(model, [inline, threaded])
    assert sorted((name, thread == loop_thread) for name, thread in seen) == [
        ("inline", True),
        ("threaded", False),
        ("threaded", False),
    ]
    assert [r.content for r in _tool_results(model.requests[1])] == ["0", "1", "2"]


def test_inline_exception_becomes_an_error_result() -> None:
    """An exception from an inline tool is an error result for the model, not a crash."""

    @tool(blocking=False)
    def boom() -> str:
        """Fails."""
        raise ValueError("no luck")

    model = ScriptedModel([call("boom"), "saw it"])
    _run_async(model, [boom])
    (result,) = _tool_results(model.requests[1])
    assert (result.content, result.is_error) == ("Error: ValueError: no luck", True)


@pytest.mark.parametrize("fails", [False, True])
def test_inline_tool_returning_an_awaitable_is_awaited_on_the_loop(fails: bool) -> None:
    """An inline tool that returns an awaitable: its value is the result, its exception an error."""

    async def later() -> str:
        await asyncio.sleep(0)
        if fails:
            raise ValueError("late failure")
        return "awaited value"

    def deferred(args: dict[str, Any]) -> Any:
        return later()

    schema = {"type": "object", "properties": {}}
    deferred_tool = Tool("deferred", "Answers later.", schema, deferred, blocking=False)
    for parallel in (False, True):  # a step's lone call, and calls side by side
        calls = [call("deferred", id="a"), call("deferred", id="b")] if parallel else None
        model = ScriptedModel([calls or call("deferred"), "done"])
        _run_async(model, [deferred_tool])
        results = _tool_results(model.requests[1])
        expected = ("Error: ValueError: late failure", True) if fails else ("awaited value", False)
        assert [(r.content, r.is_error) for r in results] == [expected] * (2 if parallel else 1)


def test_inline_tool_gets_its_run_context_and_keeps_context_variables_its_own() -> None:
    """RunContext is injected inline; a context variable the tool sets does not leak out."""
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    seen: list[tuple[str | None, str]] = []

    @tool(blocking=False)
    def whoami(ctx: RunContext[None]) -> str:
        """Reports its call id."""
        marker.set("set by the tool")
        seen.append((ctx.call_id, ctx.tool_name))
        return "ok"

    async def main() -> str:
        model = ScriptedModel([call("whoami", id="c7"), call("whoami", id="c8"), "done"])
        await agenerate_text(model, "go", tools=[whoami])
        return marker.get()

    assert asyncio.run(main()) == "unset"
    assert seen == [("c7", "whoami"), ("c8", "whoami")]


def test_explicit_schema_tool_takes_the_option() -> None:
    """Tool(..., blocking=False) runs its function (given one dict) on the loop thread."""
    threads: list[int] = []

    def echo(args: dict[str, Any]) -> str:
        threads.append(threading.get_ident())
        return str(args["text"])

    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    echo_tool = Tool("echo", "Echoes.", schema, echo, blocking=False)
    model = ScriptedModel([call("echo", {"text": "hi"}), "done"])
    assert echo_tool.blocking is False
    loop_thread = _run_async(model, [echo_tool])
    assert threads == [loop_thread]
    assert [r.content for r in _tool_results(model.requests[1])] == ["hi"]


def test_option_survives_method_binding_and_replace() -> None:
    """A method tool's bound copies and replace() copies keep blocking=False (or change it)."""

    class Counter:
        def __init__(self) -> None:
            self.threads: list[int] = []

        @tool(blocking=False)
        def bump(self, by: int) -> int:
            """Counts."""
            self.threads.append(threading.get_ident())
            return by

    counter = Counter()
    assert counter.bump.blocking is False
    renamed = counter.bump.replace(name="bump_it")
    assert renamed.blocking is False
    model = ScriptedModel([call("bump_it", {"by": 2}), "done"])
    loop_thread = _run_async(model, [renamed])
    assert counter.threads == [loop_thread]
    assert counter.bump.replace(blocking=True).blocking is True


def test_blocking_false_with_timeout_is_a_definition_error() -> None:
    """blocking=False and timeout= together are refused, wherever the options are set."""
    with pytest.raises(ToolDefinitionError) as info:

        @tool(blocking=False, timeout=1.0)
        def quick() -> str:
            """Quick."""
            return "x"

    assert info.value.problems == (TIMEOUT_PROBLEM,)
    with pytest.raises(ToolDefinitionError) as info:
        Tool("quick", "", None, lambda args: "x", blocking=False, timeout=1.0)
    assert info.value.problems == (TIMEOUT_PROBLEM,)

    @tool(timeout=1.0)
    def timed() -> str:
        """Timed."""
        return "x"

    with pytest.raises(ToolDefinitionError) as info:
        timed.replace(blocking=False)
    assert info.value.problems == (TIMEOUT_PROBLEM,)


def test_blocking_must_be_a_bool() -> None:
    """A non-bool blocking value is named in the error."""
    with pytest.raises(ToolDefinitionError) as info:
        Tool("quick", "", None, lambda args: "x", blocking="no")  # type: ignore[arg-type]
    assert info.value.problems == ("blocking must be True or False, not 'no'",)


def test_async_tool_ignores_the_option_and_keeps_its_timeout() -> None:
    """On an async function blocking=False changes nothing: it runs on the loop, timeout allowed."""
    threads: list[int] = []

    @tool(blocking=False, timeout=5.0)
    async def fetch() -> str:
        """Fetches."""
        threads.append(threading.get_ident())
        return "fetched"

    model = ScriptedModel([call("fetch"), "done"])
    loop_thread = _run_async(model, [fetch])
    assert threads == [loop_thread]
    assert [r.content for r in _tool_results(model.requests[1])] == ["fetched"]


def test_blocking_runs_are_unchanged() -> None:
    """generate_text runs a blocking=False tool as before: the lone call in the caller's thread."""
    inline, _, seen = _thread_tools()
    model = ScriptedModel([call("inline", {"n": 3}), "done"])
    generate_text(model, "go", tools=[inline])
    assert seen == [("inline", threading.get_ident())]
    assert [r.content for r in _tool_results(model.requests[1])] == ["3"]


class _LazyProxy:
    """A lazy proxy (Django's SimpleLazyObject pattern): reading its class loads the value."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise LookupError("user 42 not found")


@pytest.mark.parametrize("calls", [1, 2])
def test_a_value_whose_type_cannot_be_read_is_an_error_result_in_async_runs(calls: int) -> None:
    """A tool's value that fails when its type is read is an error the model reads, not a crash."""
    lazy = Tool(
        "lazy_user", "Looks a user up.", {"type": "object"}, lambda a: _LazyProxy(), blocking=False
    )
    model = ScriptedModel([[call("lazy_user", id=f"c{i}") for i in range(calls)], "done"])
    asyncio.run(agenerate_text(model, "go", tools=[lazy]))
    results = [r for m in model.requests[1].messages for r in m.tool_results]
    assert [(r.content, r.is_error) for r in results] == [
        ("Error: LookupError: user 42 not found", True)
    ] * calls


marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="caller")


@tool(blocking=False)
def sets_marker() -> str:
    """Sets a context variable."""
    marker.set("set by the tool")
    return "ok"


def returns_coroutine(args: dict[str, Any]) -> Any:
    async def later() -> str:
        marker.set("set by the tool's coroutine")
        return "ok"

    return later()


@pytest.mark.parametrize("mode", ["blocking", "async"])
@pytest.mark.parametrize("calls", [1, 2])
def test_what_a_lone_or_paired_tool_sets_stays_its_own(mode: str, calls: int) -> None:
    """A context variable a sync tool (or the coroutine it returns) sets never reaches the caller."""
    deferred = Tool(
        "deferred", "Sets later.", {"type": "object"}, returns_coroutine, blocking=False
    )
    tools = [sets_marker, deferred]
    for name in ("sets_marker", "deferred"):
        model = ScriptedModel([[call(name, id=f"c{i}") for i in range(calls)], "done"])
        if mode == "blocking":
            generate_text(model, "go", tools=tools)
            seen = marker.get()
        else:

            async def main(model: ScriptedModel = model) -> str:
                await agenerate_text(model, "go", tools=tools)
                return marker.get()

            seen = asyncio.run(main())
        results = [r.content for m in model.requests[1].messages for r in m.tool_results]
        assert (seen, results) == ("caller", ["ok"] * calls), name


def test_every_source_a_run_opened_is_closed_when_one_close_fails() -> None:
    """An async run closes all its handoff target's sources even when one's close raises."""

    from toolfold.runtime.drive._open import aopened

    closed: list[str] = []

    class Source:
        def __init__(self, name: str, fails: bool) -> None:
            self.name, self.fails = name, fails

        def open(self) -> None:
            pass

        def close(self) -> None:
            closed.append(self.name)
            if self.fails:
                raise OSError(f"{self.name} close failed")

        def tools(self) -> list[Tool[..., Any]]:
            return []

    async def main() -> None:
        async with aopened([Source("a", False), Source("b", True)]):
            pass

    with pytest.raises(OSError, match="b close failed"):
        asyncio.run(main())
    assert closed == ["b", "a"]
