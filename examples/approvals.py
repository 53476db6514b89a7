"""Approvals: a tool that needs a human's yes before it runs.

The run suspends with ``finish_reason == "approval_required"``; its state is
plain JSON, so the approval can come later, from another process (a web
request, a queue worker). ``resume`` continues with the decision; a denied
call becomes an error result the model reads, with the reason.

    python examples/approvals.py                       # a scripted model
    MODEL=local:smollm2 python examples/approvals.py   # a real local model
"""

from __future__ import annotations

import os
import sys

from toolfold import Agent, Denied, ModelConfigError, RunState, tool
from toolfold.testing import Reply, ScriptedModel

call = ScriptedModel.call
BALANCES = {"alice": 120, "bob": 40}


@tool(requires_approval=lambda call, state: call.arguments.get("amount", 0) > 50)
def transfer(to: str, amount: int) -> str:
    """Send money to someone. Transfers above 50 need a human's approval.

    Args:
        to: Who receives the money.
        amount: How much, in euros.
    """
    BALANCES[to] = BALANCES.get(to, 0) + amount
    return f"sent {amount} EUR to {to}; their balance is {BALANCES[to]} EUR"


@tool(requires_approval=True)
def close_account(name: str) -> str:
    """Close an account (always needs approval).

    Args:
        name: The account holder.
    """
    BALANCES.pop(name, None)
    return f"closed the account of {name}"


def make_agent(script: list[Reply]) -> Agent:
    """Both "processes" below build the agent the same way; the state names its tools.

    The scripted model stands in for a real one unless ``MODEL`` names one.
    """
    model = os.environ.get("MODEL", "test")
    return Agent(
        ScriptedModel(script) if model == "test" else model,
        instructions="Use the tools.",
        tools=[transfer, close_account],
    )


def main() -> None:
    calls = [
        call("transfer", {"to": "bob", "amount": 20}),
        call("transfer", {"to": "alice", "amount": 500}),
        call("close_account", {"name": "bob"}),
    ]
    first = make_agent([calls]).run("Pay bob 20, alice 500, and close bob's account.")
    print(f"finish reason: {first.finish_reason}")
    if first.finish_reason != "approval_required":
        print(f"answer: {first.text}")  # the model asked for nothing that needs approval
        return
    for pending in first.pending_approvals:
        print(f"  waiting for approval: {pending.name}({pending.arguments_text})  id={pending.id}")

    saved = first.state.to_json()  # store it anywhere: a database, a queue message...
    print(f"saved state: {len(saved)} bytes of JSON")

    # Later, maybe elsewhere: load the state, decide, resume.
    state = RunState.from_json(saved)
    decisions = {
        c.id: True if c.name == "transfer" else Denied("closing accounts needs a manager")
        for c in state.pending_approvals
    }
    answer = "Sent 20 EUR to Bob and 500 EUR to Alice; closing Bob's account needs a manager."
    done = make_agent([answer]).resume(state, approvals=decisions)
    for result in done.steps[0].tool_results:
        flag = "error" if result.is_error else "ok"
        print(f"  {result.tool_name:<14} {flag:<5} {result.content}")
    print(f"answer: {done.text}")
    print(f"balances: {BALANCES}")


if __name__ == "__main__":
    try:
        main()
    except ModelConfigError as error:  # e.g. MODEL=openai:gpt-4o-mini without OPENAI_API_KEY
        sys.exit(str(error))  # the message alone (exit status 1), not a traceback
