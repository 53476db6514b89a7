"""Agents as tools: a lead agent asks a researcher agent, which asks a file agent.

The file agent's ``delete`` needs an approval. The approval asked two agents
down suspends the *top* run; its state (the whole tree of runs) is plain JSON.
``resume`` at the top answers the nested call by its id, and the tree goes on
exactly where it stopped: nothing that already ran runs again.

    python examples/agents_as_tools.py
"""

from __future__ import annotations

from toolfold import Agent, RunState, SubRunEvent, TextDelta, tool
from toolfold.testing import ScriptedModel

call = ScriptedModel.call
RAN: list[str] = []


@tool
def list_files(folder: str) -> list[str]:
    """List a folder's files.

    Args:
        folder: The folder.
    """
    RAN.append("list_files")
    return ["old.log", "notes.txt"]


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file (needs a human's approval).

    Args:
        path: The file.
    """
    RAN.append("delete")
    return f"deleted {path}"


files = Agent(
    ScriptedModel(
        [
            [call("list_files", {"folder": "/tmp"}), call("delete", {"path": "/tmp/old.log"})],
            "Removed old.log; notes.txt stays.",
        ]
    ),
    name="files",
    instructions="Manage files.",
    tools=[list_files, delete],
)
researcher = Agent(
    ScriptedModel([call("files", {"input": "clean /tmp"}), "The file agent cleaned /tmp."]),
    name="researcher",
    tools=[files.as_tool()],
)
lead = Agent(
    ScriptedModel([call("researcher", {"input": "tidy up /tmp"}), "Done: /tmp is tidy."]),
    name="lead",
    tools=[researcher.as_tool(description="Finds things out and acts on files.")],
)


def main() -> None:
    response = lead.run("Please tidy /tmp")
    print(response.finish_reason, [c.name for c in response.pending_approvals])
    saved = response.state.to_json()  # the whole tree, e.g. stored in a database

    # later, maybe in another process:
    state = RunState.from_json(saved)
    approvals = {key: True for key, _ in state.keyed_pending_approvals}
    stream = lead.resume_stream(state, approvals=approvals)
    said: dict[str, str] = {}  # what each sub-agent streamed, by its path in the tree
    for event in stream:
        if isinstance(event, SubRunEvent) and isinstance(event.event, TextDelta):
            where = " > ".join(event.path[::2])  # tool names, without the call ids
            said[where] = said.get(where, "") + event.event.text
    for where, text in said.items():
        print(f"{where}: {text}")
    final = stream.response
    print(final.text)
    print("tools ran:", RAN, "| model calls in the tree:", final.usage.requests)
    assert RAN == ["list_files", "delete"]


if __name__ == "__main__":
    main()
