"""`ToolOptions`: what ``@tool`` and ``Tool`` take besides the function and its schema.

One frozen value, validated in one place (`ToolOptions.problems`), so the
decorator, the constructor, bound copies of a method tool and
``Tool.replace`` all agree on what an option may be.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from typing import Any, NamedTuple

ApprovalPolicy = bool | Callable[[Any, Any], bool]

# A tool's name as providers take it: 1 to TOOL_NAME_LONGEST of these characters (the body
# of a regex class; `mcp.model_name` replaces any other).
TOOL_NAME_CHARACTERS = "a-zA-Z0-9_-"
TOOL_NAME_LONGEST = 64
TOOL_NAME = re.compile(  # fullmatch: "$" would allow a final "\n"
    f"[{TOOL_NAME_CHARACTERS}]{{1,{TOOL_NAME_LONGEST}}}"
)
# tool_choice values in ModelRequest: a tool with one of these names could not be forced.
RESERVED_NAMES = frozenset({"auto", "none", "required"})

BLOCKING_TIMEOUT_PROBLEM = (
    "blocking=False runs the tool inline on the event loop, where a timeout cannot"
    " interrupt it; drop timeout=... or keep blocking=True (a worker thread)"
)


class ToolOptions(NamedTuple):
    """A tool's options, as ``@tool(...)`` and ``Tool(...)`` take them.

    A named tuple rather than an attrs class: a tool is made at import time,
    and building, copying and applying a tuple costs a fraction of the rest.

    ``name`` and ``description`` are None until they are known: ``@tool``
    fills them from the function (`resolved`) before the options are checked
    (`problems`), so a Tool's options always hold both.

    Attributes:
        name: The tool name the model sees.
        description: What the tool does, for the model.
        strict: Ask providers for strict schema adherence (None: when possible).
        requires_approval: True, or a predicate over (call, state).
        timeout: Seconds a call may take before it counts as failed.
        max_retries: Consecutive failures allowed before the run fails.
        blocking: False for a quick sync function that runs inline on the event loop.
    """

    name: str | None = None
    description: str | None = None
    strict: bool | None = None
    requires_approval: ApprovalPolicy = False
    timeout: float | None = None
    max_retries: int = 3
    blocking: bool = True

    def resolved(self, name: Any, description: str) -> ToolOptions:
        """These options with ``name``/``description`` filled where they were not given."""
        return self._replace(
            name=name if self.name is None else self.name,
            description=description if self.description is None else self.description,
        )

    def given(self) -> dict[str, Any]:
        """The options that differ from their defaults (what a user asked for)."""
        defaults = self._field_defaults
        return {
            name: value
            for name, value in zip(self._fields, self, strict=True)
            if value != defaults[name]
        }

    def problems(self, is_async: bool) -> list[str]:
        """Everything wrong with these options (empty if they are fine).

        Args:
            is_async: Whether the tool's function is async (``blocking=False``
                with a timeout is refused for sync functions only).
        """
        # Typed as object: explicit tools are often built from config data.
        description: object = self.description
        approval: object = self.requires_approval
        timeout: object = self.timeout
        retries: object = self.max_retries
        strict: object = self.strict
        blocking: object = self.blocking
        problems = name_problems(self.name)
        if not isinstance(description, str):
            problems.append(f"description must be a str, not {type(description).__name__}")
        if not (isinstance(approval, bool) or callable(approval)):
            problems.append(
                f"requires_approval must be a bool or a predicate (call, state) -> bool,"
                f" not {approval!r}"
            )
        elif not isinstance(approval, bool):
            problems.extend(predicate_problems(approval))
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not _finite_float(timeout)
            or timeout <= 0
        ):
            problems.append(
                "timeout must be a positive number of seconds or None,"
                f" not {_short_number(timeout)}"
            )
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            problems.append(f"max_retries must be an int >= 0, not {retries!r}")
        if strict is not None and not isinstance(strict, bool):
            problems.append(f"strict must be True, False or None, not {strict!r}")
        if not isinstance(blocking, bool):
            problems.append(f"blocking must be True or False, not {blocking!r}")
        elif not blocking and timeout is not None and not is_async:
            problems.append(BLOCKING_TIMEOUT_PROBLEM)
        return problems


OPTION_NAMES = ToolOptions._fields


def _finite_float(number: float) -> bool:
    """Whether ``number`` is finite as a float: an int too large for one (``10**400``)
    is not, and `math.isfinite` would raise OverflowError on it."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


def _short_number(value: object) -> str:
    """``repr(value)``; an int too large for a float said by its size (its repr may
    fail past 4300 digits, and would fill the message)."""
    if isinstance(value, int) and not isinstance(value, bool) and not _finite_float(value):
        digits = int(value.bit_length() * 0.30103) + 1
        return f"an int of about {digits} digits (too large for a float)"
    return repr(value)


def predicate_problems(predicate: Callable[..., Any]) -> list[str]:
    """What makes ``predicate`` no ``requires_approval`` predicate: an async function (the run
    calls it without awaiting: its coroutine, never run, would ask for every call), or one
    that cannot take ``(call, state)`` (each call would raise, and ask)."""
    named = getattr(predicate, "__name__", None)
    label = f"requires_approval={named}" if isinstance(named, str) else "requires_approval"
    # (an object whose class has an async __call__)
    call = None if inspect.isroutine(predicate) else type(predicate).__call__
    if any(
        inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f) for f in (predicate, call)
    ):
        return [
            f"{label} is an async function: the predicate is called, not awaited, as the run "
            "decides; make it a plain function (call, state) -> bool"
        ]
    try:
        signature = inspect.signature(predicate)
    except (TypeError, ValueError):  # (no signature to read: some builtins)
        return []
    try:
        signature.bind(None, None)
    except TypeError:
        return [f"{label} must take (call, state): it cannot be called with those two arguments"]
    return []


def name_problems(name: object, hint: str = " (pass name=...)") -> list[str]:
    """What is wrong with a tool name (empty if it is fine); ``hint`` ends an invalid one's."""
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        return [
            f"tool name {name!r} is invalid: use 1 to 64 characters among a-z A-Z 0-9 _ -{hint}"
        ]
    if name in RESERVED_NAMES:
        return [f"tool name {name!r} is reserved (a tool_choice value); pass another name=..."]
    return []
