"""What the lean path of a tool step still gives: contexts where read, strict argument JSON."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

import toolfold
from toolfold import RunContext, Tool
from toolfold.runtime._run import new_run_id
from toolfold.testing import ScriptedModel
from toolfold.toolkit._arguments import strict_loads
from toolfold.toolkit._tool import reads_context

call = ScriptedModel.call


def test_a_tool_that_asks_for_the_context_gets_the_step_s() -> None:
    """A RunContext parameter gets the run id, step, call, key and the conversation with the call."""
    seen: list[RunContext[Any]] = []

    @toolfold.tool
    def note(ctx: RunContext[Any], text: str) -> str:
        """Note something."""
        seen.append(ctx)
        return text

    model = ScriptedModel([call("note", {"text": "a"}, id="c1"), "done"])
    toolfold.generate_text(model, "go", tools=[note], run_id="r1", deps={"k": 1})
    (ctx,) = seen
    assert (ctx.run_id, ctx.step, ctx.call_id, ctx.tool_name) == ("r1", 1, "c1", "note")
    assert ctx.idempotency_key == "r1:1:0"
    assert ctx.deps == {"k": 1}
    assert [m.role for m in ctx.messages] == ["user", "assistant"]


def test_only_tools_that_read_a_context_need_one() -> None:
    """A plain tool reads no context; one with a RunContext parameter, or its own invoke, does."""

    @toolfold.tool
    def plain(a: int) -> int:
        """Plain."""
        return a

    @toolfold.tool
    def with_context(ctx: RunContext[Any], a: int) -> int:
        """With a context."""
        return a

    class Logged(Tool[..., Any]):
        def invoke(self, arguments: Any, context: RunContext[Any] | None = None) -> Any:
            assert context is not None
            return f"{context.call_id}:{super().invoke(arguments, context)}"

    logged = Logged.__new__(Logged)
    logged.__dict__.update(plain.__dict__)
    assert not reads_context(plain)
    assert reads_context(with_context)
    assert reads_context(logged)
    model = ScriptedModel([call("plain", {"a": 2}, id="c9"), "done"])
    response = toolfold.generate_text(model, "go", tools=[logged])
    assert response.steps[0].tool_results[0].content == "c9:2"


@pytest.mark.parametrize(
    "text",
    ['{"a": 1}', ' {"a": 1}', '{"a": 1} ', '{"a": 1} x', '{"a": ', "", "[1, 2]", '"x"', "{}{}"],
)
def test_strict_loads_reads_what_json_reads(text: str) -> None:
    """One scanner call where the text is one value, else JSON's own errors (same message)."""
    try:
        want: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        want = str(exc)
    try:
        got: Any = strict_loads(text)
    except json.JSONDecodeError as exc:
        got = str(exc)
    assert got == want


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": 1e999}', "Infinity"])
def test_strict_loads_still_refuses_numbers_json_cannot_carry(text: str) -> None:
    """NaN, Infinity and overflowing numbers are refused on the one-call path too."""
    with pytest.raises(ValueError, match=r"finite|NaN|Infinity|1e999"):
        strict_loads(text)


def test_a_fresh_run_id_is_a_version_4_uuid_in_hex() -> None:
    """A run without an id gets 32 hex digits that read as a random (version 4, RFC 4122) UUID, a new one each run."""
    model = ScriptedModel(["a", "b"])
    ids = [toolfold.generate_text(model, "go").state.run_id for _ in range(2)]
    for run_id in ids:
        parsed = uuid.UUID(hex=run_id)
        assert parsed.hex == run_id
        assert (parsed.version, parsed.variant) == (4, uuid.RFC_4122)
    assert ids[0] != ids[1]
    assert new_run_id("mine") == "mine"


def test_first_states_share_no_log_and_a_refused_start_keeps_its_own_state() -> None:
    """Each run's first state has a log of its own (the blank state they start from is never appended to); a refused start's error carries a fresh blank state."""
    from toolfold._errors import InvalidEventError
    from toolfold.runtime.core import _reducer
    from toolfold.runtime.core._config import RunConfig
    from toolfold.runtime.core._messages import Message, ToolCallPart

    first = _reducer.initial_state("a", run_id="r1")
    second = _reducer.initial_state("b", run_id="r2")
    assert [e.run_id for e in first.log] == ["r1"]  # type: ignore[attr-defined]
    assert [e.run_id for e in second.log] == ["r2"]  # type: ignore[attr-defined]
    assert len(_reducer._BLANK.log._items) == 0
    assert first == _reducer.reduce(_reducer.blank_state(), first.log[0])
    unanswered = Message.assistant(tool_calls=[ToolCallPart("c1", "t")])
    with pytest.raises(InvalidEventError) as caught:
        _reducer.initial_state([Message.user("x"), unanswered], RunConfig(), run_id="r3")
    assert caught.value.state.phase == "new"  # type: ignore[attr-defined]
    assert caught.value.state is not _reducer._BLANK  # type: ignore[attr-defined]
    assert len(_reducer._BLANK.log._items) == 0


def test_a_message_s_tool_calls_are_its_call_parts_in_order() -> None:
    """Only calls: the parts themselves; mixed with text: the calls alone; no call: empty."""
    first = toolfold.ToolCallPart("c1", "add", '{"a":1}', {"a": 1})
    second = toolfold.ToolCallPart("c2", "add", "{}", {})
    only = toolfold.Message.assistant(tool_calls=[first, second])
    mixed = toolfold.Message.assistant("thinking aloud", [first, second])
    assert only.tool_calls == (first, second)
    assert type(only.tool_calls) is tuple
    assert mixed.tool_calls == (first, second)
    assert toolfold.Message.assistant("done").tool_calls == ()
    assert toolfold.Message.assistant().tool_calls == ()


def test_quick_arguments_are_what_validate_arguments_gives_or_none() -> None:
    """Flat arguments of their types, once the checker ran, go straight to the function as
    `validate_arguments` would make them; anything that needs a step of its own gets None."""
    from toolfold.toolkit._tool import quick_arguments

    @toolfold.tool
    def plain(
        a: int, s: str, flag: bool = False, ratio: float = 1.0, tags: list[str] | None = None
    ) -> str:
        """Plain."""
        return s

    stored = {"a": 2, "s": "x", "flag": True}
    assert quick_arguments(plain, stored) is None  # its checker is made by the first check
    assert plain.validate_arguments(dict(stored)) == stored
    quick = quick_arguments(plain, stored)
    assert quick == plain.validate_arguments(dict(stored))
    assert quick is not stored
    for needs_a_step in (
        {"a": 2.0, "s": "x"},  # an integral float: made an int
        {"a": 2, "s": "x", "ratio": 1},  # a float parameter: made a float by its hook
        {"a": 2, "s": "x", "tags": ["t"]},  # nested: copied
        {"a": "two", "s": "x"},  # invalid: explained
        {"a": 2},  # missing
        {"a": 2, "s": "x", "other": 1},  # unexpected
    ):
        assert quick_arguments(plain, needs_a_step) is None, needs_a_step

    @toolfold.tool
    def with_context(ctx: RunContext[Any], a: int) -> int:
        """With a context."""
        return a

    @toolfold.tool
    def positional(a: int, /) -> int:
        """Positional."""
        return a

    explicit = Tool(
        "explicit", "", {"type": "object", "properties": {"a": {"type": "integer"}}}, dict
    )

    class Own(Tool[..., Any]):
        def invoke(self, arguments: Any, context: RunContext[Any] | None = None) -> Any:
            return "own"

    own = Own.__new__(Own)
    own.__dict__.update(plain.__dict__)
    for other in (with_context, positional, explicit, own):
        other.validate_arguments({"a": 1, "s": "x"} if other is own else {"a": 1})
        assert quick_arguments(other, {"a": 1, "s": "x"} if other is own else {"a": 1}) is None


def test_a_patched_invoke_or_validate_arguments_sees_every_call() -> None:
    """A spy or wrapper put on a tool's `invoke` or `validate_arguments` (on the tool or on
    `Tool`) sees every call, later ones too: the lane straight to the function is not taken."""
    import asyncio
    from unittest import mock

    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    def run(made: Tool[..., Any], blocking: bool, calls: int = 3) -> list[str]:
        steps = [call("add", {"a": 1, "b": 2}, id=f"c{i}") for i in range(calls)]
        model = ScriptedModel([*steps, "done"])
        if blocking:
            response = toolfold.generate_text(model, "go", tools=[made], max_steps=9)
        else:
            response = asyncio.run(toolfold.agenerate_text(model, "go", tools=[made], max_steps=9))
        return [e.content for e in response.state.log if e.kind == "tool_returned"]

    inline, threaded = toolfold.tool(add, blocking=False), toolfold.tool(add)
    original = Tool.invoke
    for made, blocking in ((inline, False), (threaded, False), (threaded, True)):
        assert (
            run(made, blocking) == ["3"] * 3
        )  # the checker is made: later calls may take the lane
        with mock.patch.object(made, "invoke", wraps=made.invoke) as spy:
            assert run(made, blocking) == ["3"] * 3
        assert spy.call_count == 3, (made, blocking)
        with mock.patch.object(Tool, "invoke", autospec=True, side_effect=original) as spy:
            assert run(made, blocking) == ["3"] * 3
        assert [c.args[1] for c in spy.call_args_list] == [{"a": 1, "b": 2}] * 3, (made, blocking)
        with mock.patch.object(made, "validate_arguments", return_value={"a": 10, "b": 20}):
            assert run(made, blocking, calls=1) == ["30"], (made, blocking)


def test_an_inline_tool_answers_as_a_threaded_one_call_after_call() -> None:
    """Later calls of a blocking=False tool (straight to its function when they can) give the
    events a worker thread's calls give, blocking runs' too, and a tool never changes the
    stored arguments."""
    import asyncio

    @toolfold.tool
    def total(a: int, tags: list[str] | None = None, scale: float = 1.0) -> str:
        """Totals."""
        if tags is not None:
            tags.append("seen")
        return f"{a * scale}:{tags}"

    script = [
        call("total", {"a": 1}, id="c1"),
        call("total", {"a": 2}, id="c2"),
        call("total", {"a": 3.0}, id="c3"),
        call("total", {"a": 4, "tags": ["x"]}, id="c4"),
        call("total", {"a": "five"}, id="c5"),
        call("total", {"a": 6, "scale": 2}, id="c6"),
        call("total", {"a": 7, "extra": 1}, id="c7"),
        "done",
    ]

    def results(made: Tool[..., Any], blocking: bool = False) -> list[Any]:
        model = ScriptedModel(list(script))
        if blocking:
            response = toolfold.generate_text(model, "go", tools=[made], max_steps=9)
        else:
            response = asyncio.run(toolfold.agenerate_text(model, "go", tools=[made], max_steps=9))
        events = [e for e in response.state.log if e.kind == "tool_returned"]
        calls = [c for m in response.state.conversation for c in m.tool_calls]
        assert calls[3].arguments == {"a": 4, "tags": ["x"]}
        return [(e.call_id, e.content, e.is_error, e.outcome) for e in events]

    threaded = results(total)
    assert threaded == results(total.replace(blocking=False))
    assert threaded == results(total, blocking=True)
    assert [r[3] for r in threaded] == ["ok"] * 4 + ["invalid_arguments", "ok", "invalid_arguments"]


def test_a_lone_inline_call_s_duration_spans_its_function() -> None:
    """The duration a lone inline call reports, however its arguments went in, covers the call."""
    import asyncio
    import time

    @toolfold.tool(blocking=False)
    def nap(a: int) -> int:
        """Naps."""
        time.sleep(0.02)
        return a

    steps = [call("nap", {"a": a}, id=f"c{a}") for a in (1, 2, 3.0)]
    for blocking in (False, True):
        model = ScriptedModel([*steps, "done"])
        if blocking:
            response = toolfold.generate_text(model, "go", tools=[nap], max_steps=5)
        else:
            response = asyncio.run(toolfold.agenerate_text(model, "go", tools=[nap], max_steps=5))
        durations = [e.duration for e in response.state.log if e.kind == "tool_returned"]
        assert len(durations) == 3
        assert all(isinstance(d, float) and d >= 0.02 for d in durations), durations


def test_a_blocking_twin_that_reads_the_context_needs_a_tool_that_does() -> None:
    """Jobs carry a context only for tools that read one, so a twin reading it needs such a tool."""
    from toolfold.runtime.drive._executor import _TWIN, with_blocking_twin

    @toolfold.tool
    async def bare(a: int) -> int:
        """Bare."""
        return a

    @toolfold.tool
    def reading(ctx: RunContext[Any], a: int) -> int:
        """Reads its context."""
        return a

    @toolfold.tool
    async def async_reading(ctx: RunContext[Any], a: int) -> int:
        """Reads its context."""
        return a

    with pytest.raises(ValueError, match=r"^the blocking twin of tool 'bare' ") as caught:
        with_blocking_twin(bare, reading)
    assert str(caught.value) == (
        "the blocking twin of tool 'bare' reads a run context, and the tool reads no run "
        "context: a call gets a context only when its tool reads one, so the twin would be "
        "called with None; give the tool a RunContext parameter too"
    )
    assert _TWIN not in bare.__dict__  # refused: blocking runs still call the tool itself
    assert with_blocking_twin(async_reading, reading) is async_reading
