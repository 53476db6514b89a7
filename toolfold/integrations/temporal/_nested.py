"""Nested runs on Temporal: workflow steps and agents used as tools, driven in the workflow.

A step of a workflow spec (an agent or a nested workflow) and an agent used
as a tool run a sub-run, whose state nests in its caller's (`CallState.child`,
`ToolSuspended`, `CallResumed`). On Temporal the workflow drives that sub-run
itself, with the same loop as the top-level run: its model requests and tool
calls are activities of their own, named by the path of tool names from the
top (``<agent>.<step>__model_request``, ``<agent>.<step>__tool__<tool>``). So
a crash re-runs only the nested call in flight, an approval deep inside a step
suspends the whole durable run, and the result is the one tree of states a
local run makes.

A handoff switches the agent that runs a run (top-level or nested) to
another agent of its handoff graph, as locally: the workflow finds the
transfer call the step made and reduces the core's `HandedOff`. Each agent
of the graph is a node of its own, named ``<first agent's node>@<agent>``
(the first agent keeps its node's name, so a cycle back to it by name uses
its activities again).

This module is the pure half: which tools run sub-runs, which hand the run
over, a sub-run's first state, and the event that reports its end. Workflow
code calls it, so it must stay deterministic (tests/temporal/test_temporal.py
scans it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

import attrs
from temporalio.exceptions import ApplicationError

from toolfold.runtime._agent import Agent
from toolfold.runtime._agent_tool import (
    _content,
    _prompt,
    agent_label,
    as_tool_of,
    sub_run_id_of,
    within,
)
from toolfold.runtime._response import Response
from toolfold.runtime._run import RunOptions, start, to_tools
from toolfold.runtime._sources import refuse_unlisted_choice
from toolfold.runtime._task import Task, _prompt_text, _scope
from toolfold.runtime._template import render
from toolfold.runtime._workflow import Workflow, WorkflowResponse, _step_errors
from toolfold.runtime.core._config import RunConfig, ToolSpec
from toolfold.runtime.core._effects import ToolInvocation
from toolfold.runtime.core._events import ToolReturned, ToolSuspended
from toolfold.runtime.core._messages import Message, ToolCallPart
from toolfold.runtime.core._next import earlier_steps
from toolfold.runtime.core._reducer import initial_state, reduce
from toolfold.runtime.core._state import WAITING_PHASES, RunState
from toolfold.runtime.core._stop import STOP_REASONS, handed_budget, spent_reason
from toolfold.runtime.drive._executor import ToolJob, checked_arguments, returned
from toolfold.runtime.drive._failures import not_started_text, run_failure, stopped_content
from toolfold.runtime.drive._handoff import handed_off, transfer_called
from toolfold.runtime.drive._output import OutputSchema, restored
from toolfold.toolkit._results import describe_exception
from toolfold.toolkit._tool import Tool


@attrs.frozen(kw_only=True)
class Node:
    """An agent or a workflow as the durable workflow drives it: its names and live parts.

    The live tools are here for their approval policies (predicates run in
    workflow code) and to know which of them run sub-runs (``nested``); their
    functions run in activities.

    Attributes:
        name: The prefix of its activity names: the agent's name at the top,
            ``<parent>.<tool name>`` below.
        tools: The tools by name.
        output: How to read a structured answer, or None.
        stop_when: Live stop predicates (run in workflow code).
        max_concurrency: Tool calls of one step in flight at once.
        nested: The tools that run a sub-run, by tool name.
        on_tool_error: ``"return"``, or ``"raise"`` (a failed call fails the run).
        agent: The agent's name (None for a workflow or a nameless agent).
        config: The configuration a handoff to this agent brings into the state.
        transfers: Its handoff tools, by tool name.
        team: Every agent of the handoff graph this node belongs to, by
            agent name (shared by the graph's nodes; empty without handoffs).
        sources: The agent's tool sources (MCP servers...), live: their
            tools are listed by the ``<name>__list_tools`` activity when the
            run starts (see `listed`).
        sourced: After `listed`: the tools its sources listed, by tool name,
            with what their call activity needs.
    """

    name: str
    tools: Mapping[str, Tool[..., Any]]
    output: OutputSchema | None
    stop_when: tuple[Any, ...] = ()
    max_concurrency: int = 8
    nested: Mapping[str, SubRunTool] = attrs.field(factory=dict)
    on_tool_error: str = "return"
    agent: str | None = None
    config: RunConfig | None = None
    transfers: Mapping[str, Transfer] = attrs.field(factory=dict)
    team: Mapping[str, Member] = attrs.field(factory=dict, eq=False, repr=False)
    sources: tuple[Any, ...] = attrs.field(default=(), eq=False, repr=False)
    sourced: Mapping[str, Sourced] = attrs.field(factory=dict)

    def agent_run_by(self, tool_name: str) -> str | None:
        """How errors name the agent (or workflow) tool ``tool_name`` runs, or None.

        As `SubRunTool.start` and `SubRunTool.ended` name it (`agent_label`), for
        an agent or a workflow used as a tool; None for any other tool, a
        workflow's step included (see `budget_stopped`).
        """
        sub = self.nested.get(tool_name)
        if sub is None or sub.task is not None:
            return None
        return agent_label(sub.target, tool_name)

    def running(self, state: RunState) -> Node:
        """The node of the agent that runs ``state`` now (another one after a handoff)."""
        if not self.team or state.agent is None or state.agent == self.agent:
            return self
        member = self.team.get(state.agent)
        if member is None:
            raise ApplicationError(
                f"the run was handed to agent {state.agent!r}, which is not in the handoff "
                f"graph of {self.name!r} on this worker",
                non_retryable=True,
            )
        return member.node

    def handing_to(self, state: RunState) -> Node | None:
        """The node of the agent the last step asked to hand the run to, if it asked."""
        name = transfer_called(state, self.transfers) if self.transfers else None
        return None if name is None else self.team[self.transfers[name].agent].node

    def hand_off(
        self,
        state: RunState,
        keep_stops: Callable[[], bool],
        refuse_unfit: Callable[[], bool],
    ) -> tuple[Node, RunState] | None:
        """The node and state after the handoff the last step asked for, if it asked for one.

        ``keep_stops``: whether the target gets the stored stop conditions of the
        run's first agent (as locally), asked only when they differ from the tree
        budgets of the run's configuration (runs recorded before kept only those:
        they replay so). ``refuse_unfit``: whether a
        conversation its input filter returned that no provider takes is refused
        (as locally), asked only for such a conversation.

        Raises:
            RunError: The handoff's ``input_filter`` raised, returned no messages, or
                returned a conversation no provider takes (as locally).
        """
        name = transfer_called(state, self.transfers) if self.transfers else None
        if name is None:
            return None
        transfer = self.transfers[name]
        target = self.team[transfer.agent].node
        assert target.config is not None, "an agent's node has its configuration"
        event = handed_off(
            state,
            transfer.agent,
            target.config,
            transfer.input_filter,
            self.transfers,
            keep_stops=keep_stops,
            refuse_unfit=refuse_unfit,
        )
        return target, reduce(state, event)


Listing = tuple[tuple[Mapping[str, Any], ...], ...]
"""What the ``<node>__list_tools`` activity records: one listing per tool source, in order."""


@runtime_checkable
class ListedSource(Protocol):
    """A tool source a durable run can use: its listing is plain data, its tools are made from it.

    `toolfold.mcp.MCPServer` is one. The listing is recorded in the
    workflow's history; the workflow makes the run's tools from it (with
    the source's approval policies) in workflow code, so `tools_from` must
    be pure.
    """

    def listing(self) -> Sequence[Mapping[str, Any]]:
        """The source's tools as plain data (opens it if needed)."""
        ...

    def tools_from(self, listed: Sequence[Mapping[str, Any]]) -> Sequence[Tool[..., Any]]:
        """The tools of a listing (no I/O)."""
        ...

    def open(self) -> None:
        """Make the tools callable."""

    def close(self) -> None:
        """Release what `open` took."""


@attrs.frozen
class Sourced:
    """A tool a source listed: which source (its index in the agent's), and its listed entry."""

    source: int
    spec: Mapping[str, Any]


def listed(
    node: Node, listing: Listing | None, targets: Mapping[str, Listing] | None = None
) -> Node:
    """``node`` with the tools its sources listed, as a local run has them.

    ``listing``: what ``node``'s sources listed (None: it has none);
    ``targets``: what the sources of the agents of its handoff graph listed,
    by agent name (those the run reached so far).

    Deterministic (workflow code): the tools are made from the recorded
    listings. Their order is a local run's: the agent's own tools, then the
    sources', then the handoff tools. In a handoff graph, every node hands
    the run to the listed nodes, whose configuration has their listed tools,
    as a local run reuses the sources it opened.

    Raises:
        ToolDefinitionError: Two tools share a name (as a local run raises).
        UsageError: The ``tool_choice`` of an agent with sources names none of its
            tools (as a local run raises).
    """
    made = node if listing is None else _with_listed(node, listing)
    if not node.team:
        return made
    targets = targets or {}
    team: dict[str, Member] = {}  # the graph again, with the listed nodes (filled below)
    for name, member in node.team.items():
        each = member.node
        if name == node.agent:
            each = made
        elif name in targets:
            each = _with_listed(each, targets[name])
        team[name] = Member(attrs.evolve(each, team=team), member.agent)
    if node.agent in team:
        return team[node.agent].node
    return attrs.evolve(made, team=team)  # a nameless first agent: outside its graph


def _with_listed(node: Node, listing: Listing) -> Node:
    """``node`` with the tools its sources listed (in its tools and its configuration)."""
    sourced: dict[str, Sourced] = {}
    made: list[Tool[..., Any]] = []
    for index, (source, entries) in enumerate(zip(node.sources, listing, strict=True)):
        each = [(tool, entry) for entry in entries for tool in source.tools_from([entry])]
        if len({tool.name for tool, _ in each}) < len(each):
            # Names that collide only in the whole listing (an MCP server's 天気 and 時間,
            # both "__" alone) are told apart by it, as a local run's: listings whose
            # tools have one name each never come here, so their recorded runs replay as they were.
            whole = source.tools_from(entries)
            if len(whole) == len(each):  # (else a duplicate name, refused as it was)
                each = list(zip(whole, (entry for _, entry in each), strict=True))
        for tool, entry in each:
            sourced[tool.name] = Sourced(index, entry)
            made.append(tool)
    own = [t for name, t in node.tools.items() if name not in node.transfers]
    transfers = [t for name, t in node.tools.items() if name in node.transfers]
    owner = None if node.agent is None else f"agent {node.agent!r}"  # as a local run names it
    tools = to_tools((*own, *made, *transfers), owner)
    config = node.config
    if config is not None:
        # (as a local run checks it once its sources are listed: see `Agent._with`)
        refuse_unlisted_choice(
            config.tool_choice, list(node.tools), [t.name for t in made], node.sources, owner
        )
        config = attrs.evolve(config, tools=tuple(ToolSpec.from_tool(t) for t in tools.values()))
    return attrs.evolve(node, tools=tools, sourced=sourced, config=config)


def restarted(node: Node, state: RunState) -> RunState:
    """The first state ``state`` would have been with ``node``'s listed tools in its config."""
    specs = tuple(ToolSpec.from_tool(t) for t in node.tools.values())
    config = attrs.evolve(state.config, tools=specs)  # its instructions may be a step's, rendered
    # Its own count, not the history's: a state a worker before it was counted started keeps 0.
    return initial_state(
        state.messages,
        config,
        run_id=state.run_id,
        agent=state.agent,
        earlier_steps=earlier_steps(state),
    )


@attrs.frozen
class Transfer:
    """A handoff tool: the agent it hands the run to, and its input filter (live, run here)."""

    agent: str
    input_filter: Callable[[tuple[Message, ...]], Any] | None = None


@attrs.frozen
class Member:
    """An agent of a handoff graph: its node, and the agent."""

    node: Node
    agent: Agent


@attrs.frozen
class SubRunTool:
    """A tool that runs a sub-run: a workflow's agent or workflow step, or an agent as a tool.

    Attributes:
        node: The sub-run's agent or workflow.
        target: The `Agent` or `Workflow` it runs.
        task: The workflow step (None for an agent used as a tool).
        output: The ``as_tool(output=...)`` function, or None: it runs in
            the output activity once the sub-run finished.
    """

    node: Node
    target: Agent | Workflow
    task: Task | None = None
    output: Callable[[Response], Any] | None = None

    def start(
        self,
        invocation: ToolInvocation,
        tool: Tool[..., Any],
        caller: RunState,
        workflow_tools: Callable[[], bool],
    ) -> RunState | ToolReturned:
        """The sub-run's first state, as the tool's function would start it locally.

        ``caller``: the state of the run that makes the call (its id and
        conversation give the sub-run's id, as locally: `sub_run_id`).
        Arguments that do not fit the tool give the error result a local run gives.
        ``workflow_tools``: asked (only) for a workflow used as a tool; False
        in a run recorded before such a tool ran here, whose call failed with
        the error result ``Error: AssertionError`` (given again so that it
        replays).
        """
        prepared = checked_arguments(ToolJob(invocation, tool, cast(Any, None)))
        if not isinstance(prepared, dict):
            event = returned(prepared)
            assert isinstance(event, ToolReturned)
            return event
        call = invocation.call
        sub_id = sub_run_id_of(caller.run_id, call.id, invocation.step, caller.conversation)
        task = self.task
        if task is None:  # an agent or a workflow used as a tool (see `_agent_tool`)
            budget = handed_budget(caller)  # the caller's tree budget, as locally (`within`)
            if budget is not None and budget.tokens <= 0:  # spent: nothing starts
                who = agent_label(self.target, call.name)
                text = not_started_text(who, spent_reason(caller))
                return ToolReturned(call.id, text, True, "error")
            if isinstance(self.target, Agent):
                agent: Agent = self.target if budget is None else within(self.target, budget)
                return agent._start(_prompt(prepared["input"]), (), sub_id)
            if not workflow_tools():
                return ToolReturned(call.id, "Error: AssertionError", True, "error")
            # the input as is, as locally (`Workflow.as_tool` runs `workflow.run(input)`)
            return self.target._start(prepared["input"], sub_id)
        input_, values = prepared.get("input"), prepared.get("values")
        target = self.target
        if isinstance(target, Workflow):
            return target._start(target.envelope(input_, values or {}), sub_id)
        scope = _scope(input_, values)
        prompt = render(task.prompt, scope) if task.prompt else _prompt_text(input_)
        # its handoffs by name described as in a local run (see Agent._run_options)
        options: RunOptions = target._run_options(target._graph_or_none())
        if target.instructions:  # placeholders filled, as `_task._bound` does
            text = render(target.instructions, scope)
            if text != target.instructions:
                options = attrs.evolve(
                    options, config=attrs.evolve(options.config, instructions=text)
                )
        return start(options, prompt, sub_id, agent=target.name)

    def ended(
        self,
        call: ToolCallPart,
        state: RunState,
        names_handed: Callable[[], bool] | None = None,
        step_names_handed: Callable[[], bool] | None = None,
    ) -> ToolReturned | ToolSuspended:
        """The event reporting the sub-run of ``call``: waiting, finished, or failed (as locally).

        ``names_handed`` False (asked only for a sub-run a stop ended after a handoff): it
        is named by the agent it started with, as a durable run recorded before replays
        (see `stopped_content`); ``step_names_handed`` False: a workflow step's such run
        is "the step's run", as recorded before (see `step_result`).
        """
        call_id = call.id
        if state.phase in WAITING_PHASES:
            return ToolSuspended(call_id, state)
        if state.phase == "failed":  # locally the tool raises the run's error
            error = self._failure(state)
            # ...and the failed sub-run stays in the tree on the error result (`failed_sub_run`)
            text = f"Error: {describe_exception(error)}"
            return ToolReturned(call_id, text, True, "error", child=state)
        if self.task is not None:
            from toolfold.runtime._task import step_result

            # a step with no answer failed, as locally
            text, is_error = step_result(state, names_handed=step_names_handed)
        elif state.finish_reason in STOP_REASONS:  # as `_agent_tool._sub_run` answers
            who = agent_label(self.target, call.name)
            text, is_error = stopped_content(state, who, names_handed=names_handed)
        else:
            text, is_error = _content(state.output, state.last_text), False
        if is_error:
            return ToolReturned(call_id, text, True, "error", child=state)
        return ToolReturned(call_id, text, child=state)

    def _failure(self, state: RunState) -> BaseException:
        error: BaseException = run_failure(state)
        if isinstance(self.target, Workflow):
            try:
                with _step_errors(self.target):
                    raise error
            except BaseException as named:  # the step's failure, named as a local run names it
                error = named
        return error


def node(name: str, target: Agent | Workflow) -> Node:
    """The node of ``target`` named ``name``, with every sub-run below it (any depth).

    An agent with handoffs: its node, whose ``team`` holds the node of every
    agent of its handoff graph (``<name>@<agent>``; ``target`` itself is ``name``).
    """
    if not isinstance(target, Agent) or not target.handoffs:
        return _node(name, target, {})
    team: dict[str, Member] = {}  # shared by the graph's nodes, filled once they exist
    graph = target.handoff_graph()
    for agent_name, member in graph.items():
        each = name if member is target else f"{name}@{agent_name}"
        team[agent_name] = Member(_node(each, member, team, graph), member)
    if target.name in team:
        return team[target.name].node
    return _node(name, target, team, graph)  # a nameless first agent: nothing hands back to it


def _node(
    name: str,
    target: Agent | Workflow,
    team: Mapping[str, Member],
    graph: Mapping[str, Agent] | None = None,
) -> Node:
    # an agent's handoffs by name are described as in a local run (see Agent._run_options)
    options = target._run_options(graph) if isinstance(target, Agent) else target._options
    nested: dict[str, SubRunTool] = {}
    if isinstance(target, Workflow):
        for task in target._tasks:
            if task.kind != "function":
                nested[task.name] = SubRunTool(
                    node(f"{name}.{task.name}", task.target), task.target, task
                )
    else:
        for tool in options.tools.values():
            made = as_tool_of(tool)
            if made is not None:
                sub = node(f"{name}.{tool.name}", made.agent)
                nested[tool.name] = SubRunTool(sub, made.agent, output=made.output)
    transfers = {}
    if isinstance(target, Agent):
        for spec in target._handoff_specs():
            transfers[spec.tool_name] = Transfer(spec.target, spec.input_filter)
    return Node(
        name=name,
        tools=dict(options.tools),
        output=options.output,
        stop_when=options.stop_when,
        max_concurrency=options.max_concurrency,
        nested=nested,
        on_tool_error=options.on_tool_error,
        agent=target.name,
        config=options.config,
        transfers=transfers,
        team=team,
        sources=target._sources if isinstance(target, Agent) else (),
    )


def walk(top: Node) -> list[tuple[Node, Agent | Workflow]]:
    """Every node below ``top`` (not ``top`` itself), parents first, with its target.

    Below: its sub-runs and the other agents of its handoff graph (once each: a
    graph may have cycles).
    """
    found: list[tuple[Node, Agent | Workflow]] = []
    seen = {top.name}

    def visit(parent: Node) -> None:
        below: list[tuple[Node, Agent | Workflow]] = [
            *((sub.node, sub.target) for sub in parent.nested.values()),
            *((member.node, member.agent) for member in parent.team.values()),
        ]
        for each, target in below:
            if each.name not in seen:
                seen.add(each.name)
                found.append((each, target))
                visit(each)

    visit(top)
    return found


def response_of(target: Agent | Workflow, state: RunState) -> Response:
    """The `Response` a local run of ``target`` gives for its final ``state``.

    Its output is read with the output type of the agent that finished it
    (after handoffs, maybe not ``target``).
    """
    output = state.output
    answered = target._for_state(state) if isinstance(target, Agent) else target
    schema = answered._options.output
    if output is not None and schema is not None and state.phase == "finished":
        output = restored(schema, state)
    if isinstance(target, Workflow):
        return WorkflowResponse(state, output)
    return Response(state, output)
