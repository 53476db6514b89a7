"""``auto_execute_tools=False``: a person confirms each call before it runs.

Every call comes back in ``response.tool_calls`` unexecuted. The program asks
(here on the terminal; answers "y" by itself when stdin is not a terminal),
runs the confirmed ones, and resumes with their results; a refused call goes
back as a result saying so.

    python examples/confirm_each_call.py
    MODEL=local:smollm2 python examples/confirm_each_call.py
"""

from __future__ import annotations

import os
import sys

from toolfold import Agent, ModelConfigError, tool
from toolfold.testing import ScriptedModel


@tool
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file's path.
    """
    return f"deleted {path} (pretend)"


def confirm(question: str) -> bool:
    """Ask on the terminal; say yes when nobody is there to answer."""
    if not sys.stdin.isatty():
        print(f"{question} y (not a terminal)")
        return True
    return input(f"{question} [y/N] ").strip().lower() == "y"


SCRIPTED = ScriptedModel(
    [[ScriptedModel.call("delete_file", {"path": "/tmp/old.log"})], "Deleted /tmp/old.log."]
)


def main() -> None:
    # MODEL=local:smollm2 (or any provider) for a real model; by default a scripted one
    model = SCRIPTED if os.environ.get("MODEL", "test") == "test" else os.environ["MODEL"]
    agent = Agent(
        model, instructions="Use the tools.", tools=[delete_file], auto_execute_tools=False
    )
    response = agent.run("Please delete /tmp/old.log.")
    while response.tool_calls:
        results = {}
        for call in response.tool_calls:
            if confirm(f"run {call.name}({call.arguments_text})?"):
                results[call.id] = delete_file(**(call.arguments or {}))
            else:
                results[call.id] = "the user refused to run this call"
        response = agent.resume(response.state, tool_results=results)
    print(f"answer: {response.text}")


if __name__ == "__main__":
    try:
        main()
    except ModelConfigError as error:  # e.g. MODEL=openai:gpt-4o-mini without OPENAI_API_KEY
        sys.exit(str(error))  # the message alone (exit status 1), not a traceback
