"""The tools of support.toml / support.yaml, and a demo model that needs no network.

The file names these by import path (``support_tools:lookup_order``); the
agent file's folder is searched first, as a script's own folder is.
"""

from __future__ import annotations

import json

from toolfold import ModelRequest, tool
from toolfold.testing import FunctionModel, Reply

ORDERS = {"A17": "shipped on 2 March", "B42": "waiting for stock"}


@tool
def lookup_order(order: str) -> str:
    """Look an order up.

    Args:
        order: The order id, e.g. A17.
    """
    return ORDERS.get(order, "no such order")


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves each refund).

    Args:
        order: The order id.
    """
    return f"order {order} refunded"


def _demo(request: ModelRequest) -> Reply:
    """Plays each agent of the file: calls the tool its job needs, then answers."""
    last = request.messages[-1]
    tools = {t.name for t in request.tools}
    if last.role == "tool":
        result = last.tool_results[0]
        if result.tool_name.startswith("transfer_to_"):
            return FunctionModel.call("refund", {"order": "A17"})
        if result.tool_name == "lookup_order":
            return f"Order status: {result.content}."
        return result.content
    prompt = " ".join(m.text for m in request.messages if m.role == "user")
    if "transfer_to_refunds" in tools and "refund" in prompt:
        return FunctionModel.call("transfer_to_refunds")
    if "researcher" in tools:
        return FunctionModel.call("researcher", {"input": prompt})
    if "lookup_order" in tools:
        order = "A17" if "A17" in prompt else "B42"
        return FunctionModel.call("lookup_order", {"order": order})
    return json.dumps({"unexpected": sorted(tools)})


demo_model = FunctionModel(_demo, name="demo:support")
"""A model for every agent of the file: ``toolfold run ... --model support_tools:demo_model``."""
