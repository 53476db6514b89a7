"""An agent whose module cannot be imported again once its tool has crashed the process.

As a node that loses a licence: the tool, given ``"crash"``, writes the file
``RAY_FRAGILE_FLAG`` names and kills its process; an import that finds the
file raises, so the restarted actor cannot build the agent.
"""

from __future__ import annotations

import os
from pathlib import Path

import toolfold
from toolfold import ModelRequest
from toolfold.testing import FunctionModel

FLAG = Path(os.environ["RAY_FRAGILE_FLAG"])
if FLAG.exists():
    raise RuntimeError("this node may no longer run the agent")


def work(text: str) -> str:
    """Upper-case the text, or crash the process on "crash".

    Args:
        text: The text.
    """
    if text == "crash":
        FLAG.touch()
        os._exit(1)
    return text.upper()


def _reply(request: ModelRequest) -> object:
    last = request.messages[-1]
    if last.role == "tool":
        return last.tool_results[0].content
    return FunctionModel.call("work", {"text": last.text})


agent = toolfold.Agent(FunctionModel(_reply), tools=[toolfold.tool(work)], name="fragile")
