"""An agent file: agents declared in TOML (or YAML), loaded into `Agent` specs.

``agent_files/support.toml`` declares a triage agent that asks a researcher
(an agent used as a tool) and hands refunds over to a refunds agent, whose
tool waits for approval. Its tools are named by import path
(``support_tools:lookup_order``), found next to the file. ``agent_files/desk.toml``
declares a handoff cycle (triage <-> billing, by name), a workflow used as a
tool, stop conditions and a step with a timeout. The same from the shell:

    toolfold run examples/agent_files/support.toml --model support_tools:demo_model "Where is A17?"

    python examples/agent_file.py
"""

from __future__ import annotations

from pathlib import Path

from toolfold.files import load

HERE = Path(__file__).resolve().parent / "agent_files"

# --model's twin: every agent runs on the file's demo model (no key, no network)
desk = load(HERE / "support.toml", model="support_tools:demo_model")
triage = desk.agent()  # the file's entry agent
print(sorted(desk.agents), "entry:", desk.entry)

answer = triage.run("Where is order A17?")
print(answer.text)

waiting = triage.run("I want a refund for A17")
print(waiting.agent, waiting.finish_reason, [c.name for c in waiting.pending_approvals])
done = triage.resume(waiting.state, approvals={c.id: True for c in waiting.pending_approvals})
print(done.agent, done.text)

# the YAML twin holds the same agents, and to_dict() writes them back
same = load(HERE / "support.yaml", model="support_tools:demo_model").agent()
print(same.to_dict() == triage.to_dict())
print(triage.to_mermaid())

# desk.toml: a handoff cycle (triage <-> billing), a workflow as a tool, stop
# conditions and a step timeout, all declared in the file
help_desk = load(HERE / "desk.toml", model="desk_tools:demo_model")
reply = help_desk.agent().run("Why is my parcel late? Is it a billing problem?")
handed = [e.agent for e in reply.state.events if e.kind == "handed_off"]
print(" -> ".join(["triage", *handed]), "|", reply.text)
print(help_desk.agent().to_mermaid())
