"""Builders shared by the core's tests: configs, calls and events, no model needed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolfold.runtime import (
    Message,
    ModelResponded,
    ModelResponse,
    RunConfig,
    RunState,
    ToolCallPart,
    ToolDefinition,
    ToolSpec,
    Usage,
    initial_state,
)
from toolfold.runtime.core._config import Approval
from toolfold.runtime.core._state import Disposition
from toolfold.runtime.drive import _workers


def spec(
    name: str,
    *,
    approval: Approval = "never",
    has_function: bool = True,
    max_retries: int = 3,
) -> ToolSpec:
    """A tool spec with an empty object schema."""
    return ToolSpec(
        ToolDefinition(name, f"the {name} tool"),
        has_function=has_function,
        approval=approval,
        max_retries=max_retries,
    )


def config(*tools: ToolSpec, **options: Any) -> RunConfig:
    """A run config with these tools."""
    return RunConfig(tools=tools, **options)


def start(*tools: ToolSpec, prompt: str = "hi", run_id: str = "run", **options: Any) -> RunState:
    """A started run with these tools."""
    return initial_state(prompt, config(*tools, **options), run_id=run_id)


def call(call_id: str, name: str, arguments: Any = None, text: str | None = None) -> ToolCallPart:
    """A tool call; ``text`` overrides the argument text (e.g. broken JSON)."""
    args = {} if arguments is None else arguments
    if text is None:
        return ToolCallPart(call_id, name, json.dumps(args), args)
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    return ToolCallPart(call_id, name, text, parsed if isinstance(parsed, dict) else None)


def responded(
    *calls: ToolCallPart,
    text: str = "",
    usage: Usage | None = None,
    dispositions: tuple[Disposition, ...] = (),
    finish_reason: Any = None,
) -> ModelResponded:
    """A model response with these calls and/or text."""
    reason = finish_reason or ("tool_calls" if calls else "stop")
    response = ModelResponse(
        Message.assistant(text, calls), usage or Usage(10, 5, requests=1), reason
    )
    return ModelResponded(response, dispositions)


def answer(text: str = "done", **kwargs: Any) -> ModelResponded:
    """A final answer with no tool calls."""
    return responded(text=text, **kwargs)


def private_pool(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Give the test a fresh pool of `size` workers, restored when it ends."""
    monkeypatch.setattr(_workers, "MAX_WORKERS", size)
    monkeypatch.setattr(_workers, "_WORKERS", _workers._Workers())
