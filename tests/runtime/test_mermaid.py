"""`spec.to_mermaid()`: the diagram's nodes and edges are the spec's agents, tools and links."""

from __future__ import annotations

import re

from toolfold import Agent, Handoff, tool
from toolfold.testing import ScriptedModel

NODE = re.compile(r'^    (\w+)(\(\[|\[\[|\{\{|\[|\{)"(.*)"(\]\)|\]\]|\}\}|\]|\})$')
EDGE = re.compile(r'^    (\w+) (-->|-\.->)(?:\|"(.*)"\|)? (\w+)$')
SHAPES = {"([": "agent", "[[": "tool", "{{": "source", "[": "step", "{": "choice"}


def parse(text: str) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str, str, str]]]:
    """(node id -> (shape, label), [(source label, arrow, edge label, target label)])."""
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    nodes: dict[str, tuple[str, str]] = {}
    edges: list[tuple[str, str, str]] = []
    for line in lines[1:]:
        node, edge = NODE.match(line), EDGE.match(line)
        assert node or edge, f"not a node or an edge: {line!r}"
        if node:
            assert node[1] not in nodes, f"node {node[1]} defined twice"
            nodes[node[1]] = (SHAPES[node[2]], node[3].split("<br/>")[0])
        elif edge:
            edges.append((edge[1], edge[2], edge[3] or "", edge[4]))
    named = [
        (nodes[a][1], arrow, label, nodes[b][1]) for a, arrow, label, b in edges
    ]  # every edge joins defined nodes
    return nodes, named


@tool
def search(query: str) -> str:
    """Search."""
    return query


@tool
def delete(path: str) -> str:
    """Delete."""
    return path


def test_agents_tools_sub_agents_and_handoffs_are_drawn() -> None:
    """Each agent is one node; tools, agents-as-tools and handoffs are labelled edges."""
    model = ScriptedModel([])
    files = Agent(model, name="files", tools=[delete])
    researcher = Agent(model, name="researcher", tools=[search, files.as_tool()])
    refunds = Agent(model, name="refunds")
    lead = Agent(
        model,
        name="lead",
        tools=[researcher.as_tool(name="research")],
        handoffs=[refunds, Handoff(files, name="to_files")],
    )
    nodes, edges = parse(lead.to_mermaid())
    agents = sorted(label for shape, label in nodes.values() if shape == "agent")
    assert agents == ["files", "lead", "refunds", "researcher"]  # files once, though used twice
    tools = sorted(label for shape, label in nodes.values() if shape == "tool")
    assert tools == ["delete", "search"]
    assert sorted(edges) == sorted(
        [
            ("lead", "-->", "as tool research", "researcher"),
            ("researcher", "-->", "", "search"),
            ("researcher", "-->", "as tool files", "files"),
            ("files", "-->", "", "delete"),
            ("lead", "-.->", "handoff", "refunds"),
            ("lead", "-.->", "handoff", "files"),
        ]
    )


def test_labels_are_escaped_and_ids_unique() -> None:
    """Quotes in names cannot break the diagram; two agents of one name get two nodes."""
    model = ScriptedModel([])
    twin = Agent(model, name="twin")
    other = Agent(model, name="twin", instructions="another")
    lead = Agent(model, name='say "hi"', handoffs=[twin, Handoff(other, name="to_other")])
    nodes, edges = parse(lead.to_mermaid())
    assert sorted(label for _, label in nodes.values()) == ["say #quot;hi#quot;", "twin", "twin"]
    assert len(edges) == 2
    assert len({target for *_, target in edges}) == 1


def test_names_mermaid_reserves_or_reads_as_markup_are_drawn_safely() -> None:
    """An agent named `end`, `class` or `style` gets another node id; `<` in a name is not markup."""
    model = ScriptedModel([])
    lead = Agent(
        model,
        name="end",
        handoffs=[
            Agent(model, name="class"),
            Agent(model, name="style"),
            Handoff(Agent(model, name="<b>x"), name="to_x"),
        ],
    )
    text = lead.to_mermaid()
    nodes, edges = parse(text)
    reserved = {"end", "class", "classdef", "click", "style", "linkstyle", "subgraph", "graph"}
    assert not reserved & {name.lower() for name in nodes}
    assert sorted(label for _, label in nodes.values()) == ["#lt;b#gt;x", "class", "end", "style"]
    assert len(edges) == 3
    assert "<b>" not in text


def shout(text: object) -> str:
    """A function step."""
    return str(text).upper()


def pick(text: object) -> str:
    """A router function."""
    return "a"


def test_workflow_structure_is_drawn() -> None:
    """Sequence order, parallel steps, route branches and a loop's condition are edges."""
    from toolfold import Loop, Parallel, Route, Sequence, Task

    model = ScriptedModel([])
    writer = Agent(model, name="writer", tools=[search])
    critic = Agent(model, name="critic")
    views = Parallel(critic, Task(shout, name="loud"), name="views")
    desk = Route(pick, {"a": writer, "b": shout}, name="desk")
    polish = Loop(writer, max_iterations=3, name="polish")
    pipeline = Sequence(writer, views, desk, polish, name="pipeline")
    nodes, edges = parse(pipeline.to_mermaid())
    shapes = {label: shape for shape, label in nodes.values()}
    assert shapes == {
        "Sequence pipeline": "step",
        "writer": "agent",
        "search": "tool",
        "Parallel views": "step",
        "critic": "agent",
        "shout()": "step",
        "Route desk": "choice",
        "pick()": "step",
        "Loop polish": "step",
    }
    assert sorted(edges) == sorted(
        [
            ("Sequence pipeline", "-->", "1. writer", "writer"),
            ("Sequence pipeline", "-->", "2. views", "Parallel views"),
            ("Sequence pipeline", "-->", "3. desk", "Route desk"),
            ("Sequence pipeline", "-->", "4. polish", "Loop polish"),
            ("writer", "-->", "", "search"),
            ("Parallel views", "-->", "parallel critic", "critic"),
            ("Parallel views", "-->", "parallel loud", "shout()"),
            ("Route desk", "-->", "router", "pick()"),
            ("Route desk", "-.->", "if a", "writer"),
            ("Route desk", "-.->", "if b", "shout()"),
            ("Loop polish", "-->", "repeat, at most 3", "writer"),
        ]
    )
