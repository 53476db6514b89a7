"""Tools made per request (a closure over the request's user) are freed after their run."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from toolfold import Tool, generate_text, tool
from toolfold.runtime._run import _MADE
from toolfold.testing import FunctionModel


def _per_request_tool(user: str) -> Tool[..., Any]:
    def lookup(order: int) -> str:
        """Look an order of the request's user up.

        Args:
            order: The order number.
        """
        return f"{user}: order {order} shipped"

    return tool(lookup)


def _reply(request: Any) -> Any:
    if request.messages[-1].role == "tool":
        return "done"
    return FunctionModel.call("lookup", {"order": 7})


def test_a_tool_made_per_request_leaves_no_config_behind_in_the_options_memo() -> None:
    """After a `generate_text` run with a tool made for that request, dropping the tool
    frees the run's config and the tool's definition: the memo of made options drops its
    entry with the tool, not at its bound."""
    model = FunctionModel(_reply, keep_requests=False)
    made = _per_request_tool("ada")
    assert generate_text(model, "where is my order?", tools=[made]).text == "done"
    [config] = [config for refs, config in list(_MADE.values()) if refs and refs[0]() is made]
    held = weakref.ref(config), weakref.ref(config.definitions[0])
    del made, config
    gc.collect()
    assert [ref() for ref in held] == [None, None]


def test_a_tool_kept_across_requests_still_reuses_its_config() -> None:
    """A tool kept and given to two `generate_text` calls gets the same config both times
    (the memo's entry lives as long as the tool)."""
    kept = _per_request_tool("bob")
    configs = []
    for _ in range(2):
        model = FunctionModel(_reply, keep_requests=False)
        assert generate_text(model, "where is my order?", tools=[kept]).text == "done"
        gc.collect()
        configs += [config for refs, config in list(_MADE.values()) if refs and refs[0]() is kept]
    assert len(configs) == 2
    assert configs[0] is configs[1]
