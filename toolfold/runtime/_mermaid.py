"""Mermaid flowcharts of specs: agents, their tools, sub-agents and handoffs.

``spec.to_mermaid()`` draws a spec and everything it refers to. Each kind of
spec draws itself through `DRAWERS` (the spec type -> a function adding its
nodes and edges and returning its node id), so composed specs plug in by
registering their own. Each spec is drawn once, however often it is referred
to, so a graph that refers back to an agent ends in an edge, not a loop.

Shapes: an agent is a stadium, a tool a subroutine box, a tool source (MCP
server) a hexagon, a workflow (and a function step) a box, a route a
rhombus. Edges: ``-->`` a tool, ``-->|as tool|`` an agent used as a tool,
``-.->|handoff|`` a handoff; from a workflow, ``-->|1. name|`` its steps in
order (a sequence), ``-->|parallel name|`` (a parallel), ``-->|router|`` and
``-.->|if label|`` (a route), ``-->|repeat until ...|`` (a loop).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolfold._errors import UsageError

if TYPE_CHECKING:
    from toolfold.runtime._agent import Agent

SHAPES = {
    "agent": ('(["', '"])'),
    "tool": ('[["', '"]]'),
    "source": ('{{"', '"}}'),
    "step": ('["', '"]'),
    "choice": ('{"', '"}'),
}


class Diagram:
    """A flowchart being drawn: node definitions and edges, in drawing order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._ids: dict[int, str] = {}
        self._taken: set[str] = set()
        # agents by name, for handoffs given by name (a cycle's edge back)
        self.agents: dict[str, Agent] = {}
        self._missing: dict[str, str] = {}

    def node_id(self, hint: str) -> str:
        """A fresh node id made from ``hint``."""
        base = re.sub(r"\W", "_", hint) or "node"
        if base.lower() in _RESERVED:  # `end`, `class`... as an id break the flowchart
            base += "_"
        candidate, count = base, 1
        while candidate in self._taken:
            count += 1
            candidate = f"{base}_{count}"
        self._taken.add(candidate)
        return candidate

    def node(self, hint: str, label: str, shape: str) -> str:
        """Add a node and return its id."""
        node = self.node_id(hint)
        start, end = SHAPES[shape]
        self.lines.append(f"    {node}{start}{_escape(label)}{end}")
        return node

    def edge(
        self, source: str, target: str, label: str | None = None, *, dotted: bool = False
    ) -> None:
        """Add an edge, with a label if given."""
        arrow = "-.->" if dotted else "-->"
        text = f'|"{_escape(label)}"|' if label else ""
        self.lines.append(f"    {source} {arrow}{text} {target}")

    def draw(self, spec: Any) -> str:
        """Draw ``spec`` (once) and return its node id."""
        known = self._ids.get(id(spec))
        if known is not None:
            return known
        for kind, drawer in DRAWERS.items():
            if isinstance(spec, kind):
                return drawer(spec, self)
        raise UsageError(f"cannot draw {spec!r}: not an agent or a workflow")

    def missing(self, name: str) -> str:
        """The node of a handoff target named ``name`` that no agent drawn is."""
        if name not in self._missing:
            self._missing[name] = self.node(name, f"{name}\n(not found)", "agent")
        return self._missing[name]

    def known(self, spec: Any) -> str | None:
        """The node ``spec`` was drawn as, if it was."""
        return self._ids.get(id(spec))

    def remember(self, spec: Any, node: str) -> None:
        """Record ``spec``'s node, so later references draw an edge to it."""
        self._ids[id(spec)] = node

    def text(self) -> str:
        """The Mermaid source."""
        return "\n".join(["flowchart LR", *self.lines]) + "\n"


Drawer = Callable[[Any, Diagram], str]
DRAWERS: dict[type, Drawer] = {}
"""How each kind of spec draws itself: (spec, diagram) -> its node id."""


def to_mermaid(spec: Any) -> str:
    """The Mermaid flowchart of ``spec`` and everything it refers to."""
    diagram = Diagram()
    diagram.draw(spec)
    return diagram.text()


_RESERVED = frozenset(
    {"end", "subgraph", "graph", "flowchart", "direction", "class", "classdef", "click"}
    | {"style", "linkstyle", "call", "href", "default"}
)
"""Words Mermaid's flowchart grammar reads as keywords where a node id stands."""


def _escape(label: str) -> str:
    """A label as Mermaid text: quotes and angle brackets as entities, line breaks as ``<br/>``."""
    for char, entity in (('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        label = label.replace(char, entity)
    return label.replace("\n", "<br/>")


def _draw_agent(agent: Agent, diagram: Diagram) -> str:
    from toolfold.runtime._agent import Handoff
    from toolfold.runtime._agent_tool import as_tool_of
    from toolfold.runtime._sources import split_sources
    from toolfold.toolkit._tool import Tool

    name = agent.name or "agent"
    model = agent.model if isinstance(agent.model, str) else agent.model.name
    node = diagram.node(name, f"{name}\n{model}", "agent")
    diagram.remember(agent, node)
    static, sources = split_sources(agent.tools)
    for item in static:
        made = as_tool_of(item) if isinstance(item, Tool) else None
        if made is not None:
            diagram.edge(node, diagram.draw(made.agent), f"as tool {item.name}")
            continue
        label = item.name if isinstance(item, Tool) else getattr(item, "__name__", repr(item))
        diagram.edge(node, diagram.node(f"{node}_{label}", label, "tool"))
    for source in sources:
        label = str(getattr(source, "name", type(source).__name__))
        diagram.edge(node, diagram.node(f"{node}_{label}", f"MCP {label}", "source"))
    graph = agent._reach()[0]
    for name, other in graph.items():  # the first agent drawn says where names lead
        diagram.agents.setdefault(name, other)
    for item in agent.handoffs:
        spec = item if isinstance(item, Handoff) else Handoff(item)
        target = spec.agent
        if isinstance(target, str):
            found = diagram.agents.get(target)
            to = diagram.draw(found) if found is not None else diagram.missing(target)
        else:
            to = diagram.draw(target)
        diagram.edge(node, to, "handoff", dotted=True)
    return node


def _draw_workflow(workflow: Any, diagram: Diagram) -> str:
    from toolfold.runtime._kinds import Loop, Parallel, Route, Sequence

    kind = type(workflow).__name__
    node = diagram.node(
        workflow.name, f"{kind} {workflow.name}", "choice" if kind == "Route" else "step"
    )
    diagram.remember(workflow, node)
    if isinstance(workflow, Sequence):
        for index, task in enumerate(workflow.steps, start=1):
            diagram.edge(node, _draw_step(task, diagram), f"{index}. {task.name}")
    elif isinstance(workflow, Parallel):
        for task in workflow.steps:
            diagram.edge(node, _draw_step(task, diagram), f"parallel {task.name}")
    elif isinstance(workflow, Route):
        diagram.edge(node, _draw_step(workflow.router, diagram), "router")
        for label, task in workflow.branches.items():
            diagram.edge(node, _draw_step(task, diagram), f"if {label}", dotted=True)
        if workflow.default is not None:
            diagram.edge(node, _draw_step(workflow.default, diagram), "default", dotted=True)
    elif isinstance(workflow, Loop):
        until = workflow.until
        condition = (
            "" if until is None else f" until {until if isinstance(until, str) else _name(until)}"
        )
        label = f"repeat{condition}, at most {workflow.max_iterations}"
        diagram.edge(node, _draw_step(workflow.step, diagram), label)
    return node


def _draw_step(step: Any, diagram: Diagram) -> str:
    """A workflow step's node: its agent or workflow, or a box for a function."""
    from toolfold.runtime._agent import Agent
    from toolfold.runtime._task import Task
    from toolfold.runtime._workflow import Workflow

    target = step.target if isinstance(step, Task) else step
    if isinstance(target, Agent | Workflow):
        return diagram.draw(target)
    known = diagram.known(target)
    if known is not None:
        return known
    node = diagram.node(_name(target), f"{_name(target)}()", "step")
    diagram.remember(target, node)
    return node


def _name(function: Any) -> str:
    return str(getattr(function, "__name__", type(function).__name__))


def _register() -> None:
    from toolfold.runtime._agent import Agent
    from toolfold.runtime._workflow import Workflow

    DRAWERS[Agent] = _draw_agent
    DRAWERS[Workflow] = _draw_workflow


_register()
