"""Tools from plain functions: schemas from type hints and docstrings, no model needed.

Run: python examples/tools_basics.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
from typing import Annotated, Any, Literal

import toolfold
from toolfold import Field, RunContext, Tool, tool


class Priority(enum.Enum):
    """How urgent a task is."""

    LOW = "low"
    HIGH = "high"


@dataclasses.dataclass
class Task:
    """A task to schedule.

    Attributes:
        title: What to do, in a few words.
        due: The day it must be done by.
    """

    title: str
    due: datetime.date


@tool
def schedule(
    task: Task,
    priority: Priority = Priority.LOW,
    remind: Annotated[int, Field(ge=0, le=7)] = 1,
    channel: Literal["email", "sms"] = "email",
) -> dict[str, Any]:
    """Put a task in the calendar.

    The task is stored and a reminder goes out before it is due.

    Args:
        task: The task to schedule.
        priority: How urgent it is.
        remind: Days before the due date to send a reminder.
        channel: How to send the reminder.
    """
    reminder = task.due - datetime.timedelta(days=remind)
    return {"title": task.title, "priority": priority.value, "remind_on": reminder.isoformat()}


@tool(requires_approval=True, timeout=10)
async def send_email(ctx: RunContext[Any], to: str, body: str) -> str:
    """Send an email (waits for approval in a run).

    Args:
        to: The recipient's address.
        body: The text of the message.
    """
    return f"run {ctx.run_id}: sent {len(body)} characters to {to}"


class Inventory:
    """Methods become tools bound to each instance; `self` is not in the schema."""

    def __init__(self, stock: dict[str, int]) -> None:
        self.stock = stock

    @tool
    def count(self, sku: str) -> int:
        """How many items of a product are in stock.

        Args:
            sku: The product code.
        """
        return self.stock.get(sku, 0)


# An explicit JSON Schema, when a function's signature is not the right shape:
# its function receives the arguments as one dict.
weather = Tool(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    function=lambda args: f"sunny in {args['city']}",
)


def main() -> None:
    print("== schedule: the schema a model sees")
    print(schedule.description)
    print(json.dumps(schedule.parameters, indent=2))

    print("== it is still the function")
    print(schedule(Task("file taxes", datetime.date(2025, 4, 30)), Priority.HIGH))

    print("== arguments from a model: validated, then structured into the declared types")
    args = schedule.validate_arguments('{"task": {"title": "ship", "due": "2025-06-01"}}')
    print(args)
    print(schedule.format_result(schedule.invoke(args)))

    print("== a mistake is explained to the model, not raised as a traceback")
    try:
        schedule.validate_arguments('{"task": {"title": "ship"}, "remind": 9}')
    except toolfold.ToolArgumentError as exc:
        print(exc.message_for_model)

    print("== the run context is injected, not exposed")
    print(json.dumps(send_email.parameters["properties"]))
    ctx = RunContext(run_id="run-1", step=1, call_id="call-1", tool_name="send_email")
    print(asyncio.run(send_email.invoke({"to": "ada@example.com", "body": "hi"}, ctx)))

    print("== a method tool")
    shop = Inventory({"A1": 3})
    print(shop.count.parameters, shop.count.invoke({"sku": "A1"}))

    print("== an explicit-schema tool")
    print(weather.invoke(weather.validate_arguments('{"city": "Lyon"}')))

    print("== definition errors come all at once, at decoration time")
    try:

        @tool
        def broken(*items, data: bytes, when=None):  # type: ignore[no-untyped-def]
            """Broken on purpose."""

    except toolfold.ToolDefinitionError as exc:
        print(exc)


if __name__ == "__main__":
    main()
