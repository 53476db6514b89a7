"""`Agent`: a run kept as a reusable, frozen spec."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar, cast, overload

import attrs

from toolfold._errors import ToolDefinitionError, UsageError
from toolfold.runtime._misplaced import (
    config_options,
    own_parameters,
    refuse_misspelt,
    refuse_model_options,
    refuse_run_options,
    run_options,
)
from toolfold.runtime._model import Model, keeps_override
from toolfold.runtime._response import OutputT_co, Response, Step
from toolfold.runtime._resume import Retrying, caller_answered, check_sub_run, resumed
from toolfold.runtime._retry import retry_state
from toolfold.runtime._run import (
    AGENT_RESUME,
    Approval,
    MessagesInput,
    RunOptions,
    RunStream,
    fresh,
    make_options,
    pass_messages_hint,
    run_async,
    run_sync,
    start,
    to_messages,
    within_copy,
)
from toolfold.runtime._sources import (
    SourcedStream,
    ToolSource,
    aopened,
    close_failed,
    opened,
    refuse_unlisted_choice,
    source_label,
    split_sources,
)
from toolfold.runtime.core._config import RunConfig, ToolSpec
from toolfold.runtime.core._events import Event
from toolfold.runtime.core._messages import Message, freeze
from toolfold.runtime.core._repr import value_or_type
from toolfold.runtime.core._state import RunState, not_a_state
from toolfold.runtime.core._stop import StopCondition, StopPredicate, TokenBudget
from toolfold.runtime.drive._executor import DEFAULT_MAX_CONCURRENCY
from toolfold.runtime.drive._failures import started_by
from toolfold.runtime.drive._handoff import Handover, started_config
from toolfold.runtime.drive._loop import Ended, Live, OnToolError, interrupted
from toolfold.runtime.drive._shells import drive_async, drive_sync, finish
from toolfold.toolkit._context import DepsT
from toolfold.toolkit._options import (
    TOOL_NAME_CHARACTERS,
    TOOL_NAME_LONGEST,
    ApprovalPolicy,
    name_problems,
)
from toolfold.toolkit._tool import MADE_AS, Tool, is_async_callable

Observer = Callable[[Event], object]
StepObserver = Callable[[Step], object]

_T = TypeVar("_T")  # an output type given as a class, in `Agent`'s overloads


@attrs.frozen(init=False)
class Agent(Generic[DepsT, OutputT_co]):
    """A model, instructions and tools, ready to run any number of times.

    An agent is a frozen spec: `run` / `arun` / `stream` start a run,
    `resume` continues one that stopped for approvals or tool results.
    Everything a run produces lives in its `Response` and state, never in the
    agent, so one agent serves concurrent runs.

    For type checkers an agent is an ``Agent[Deps, Output]``: ``Output`` is
    read from ``output_type`` (``Agent(model, output_type=Weather)`` runs give
    a ``Response[Weather]``; without one, ``str``; Any for what is not a class,
    such as a union or a ``Literal``), and ``Deps`` is the type of ``deps``
    (Any unless the agent is annotated or built as ``Agent[MyDeps, Weather]``).
    A bare ``Agent`` annotation is ``Agent[Any, Any]``. The parameters change
    nothing at run time.

    Example:
        >>> agent = Agent(model="openai:gpt-4o-mini", tools=[get_weather],
        ...               instructions="Be brief.", temperature=0)
        >>> agent.run("Weather in Paris?").text

    Args:
        model: A ``provider:model`` string or a model object.
        instructions: System instructions sent first with every request.
        tools: `Tool` objects, plain functions (made tools with ``@tool``),
            and tool sources such as an MCP server (each run opens them when
            it starts, adds their tools, and closes them when it ends).
        max_steps: Model calls allowed per run (``finish_reason ==
            "max_steps"`` when reached).
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or a tool name.
        reset_tool_choice: True (the default) to force a ``"required"`` or
            named ``tool_choice`` on the first step of each turn only, later
            steps going ``"auto"`` (so the model can answer); False to force
            every step (then ``max_steps`` or a stop condition ends the run).
        output_type: The type the final answer is structured into.
        output_retries: Invalid final answers sent back before failing.
        auto_execute_tools: False to return every call unexecuted.
        stop_when: Extra stop conditions.
        on_tool_error: ``"return"`` (the model sees errors) or ``"raise"``.
        max_concurrency: Calls of one step that may run at once (at least 1).
        name: A name for the agent (for logs and composition).
        handoffs: Agents (or `Handoff` specs) this agent may hand the run
            to: each adds a ``transfer_to_<name>`` tool, and when the model
            calls it the run goes on with that agent's model, instructions
            and tools, on the same conversation. A target may be given by
            its name (``"triage"``): it is then found among the agents the
            run's first agent reaches through handoffs, which is how a
            handoff cycle (triage -> billing -> triage) is written.
        settings: Model settings as a mapping; keyword arguments not listed
            here (``temperature=0``...) are model settings too. The agent
            keeps a read-only deep copy (a `FrozenDict`, nested lists
            `FrozenList`s): later changes to the caller's mapping do not
            reach it, and ``agent.settings`` refuses changes (use
            ``agent.evolve(settings={...})``).

    Raises:
        UsageError: A keyword argument that is an option of a run, not of
            the agent (``prompt``, ``deps``, ``history``, ``run_id``,
            ``on_event``, ``on_step``, or ``resume``'s ``state``,
            ``approvals``...): pass it to `run` / `arun` / `stream` (or
            `resume`) instead, or a model setting of that name in
            ``settings={...}``; or a model setting that is an option of the
            model: a credential or client option (``api_key``,
            ``base_url``, ``http_client``...) given as a keyword or a key of
            ``settings``, or another (``timeout``, ``retry``, ``headers``...)
            given as a keyword (a request body field of that name goes in
            ``settings={...}``): pass it to
            ``toolfold.model("provider:model", api_key=...)`` and give the
            agent that model.
    """

    model: str | Model
    instructions: str | None
    tools: tuple[Tool[..., Any] | Callable[..., Any] | ToolSource, ...]
    max_steps: int
    tool_choice: str | None
    reset_tool_choice: bool
    output_type: Any
    output_retries: int
    auto_execute_tools: bool
    stop_when: tuple[StopCondition | StopPredicate, ...]
    on_tool_error: OnToolError
    max_concurrency: int
    name: str | None
    handoffs: tuple[Agent | Handoff | str, ...]
    settings: Mapping[str, Any]
    _options: RunOptions = attrs.field(init=False, eq=False, repr=False, hash=False)
    _sources: tuple[ToolSource, ...] = attrs.field(init=False, eq=False, repr=False, hash=False)
    # Agents a handoff by name may also reach (an agent file's agents), see `handoff_graph`.
    _scope: Mapping[str, Agent] | None = attrs.field(
        init=False, default=None, eq=False, repr=False, hash=False
    )
    _graph: Mapping[str, Agent] | None = attrs.field(
        init=False, default=None, eq=False, repr=False, hash=False
    )
    # The handovers last made (see `_handovers`), with the graph they were made in.
    _handed: tuple[Mapping[str, Agent], Mapping[str, Handover]] | None = attrs.field(
        init=False, default=None, eq=False, repr=False, hash=False
    )
    # The options with handoffs by name described, and the graph they were described in.
    _described: tuple[Mapping[str, Agent], RunOptions] | None = attrs.field(
        init=False, default=None, eq=False, repr=False, hash=False
    )

    # The output type for type checkers: text without an ``output_type``, the
    # class given (``list[int]`` and a TypedDict are classes to mypy), or Any
    # for what is not one (a union, a ``Literal``) or is abstract. ``DepsT``
    # stays free: ``Agent[MyDeps, Weather](...)`` or an annotation sets it.
    @overload
    def __init__(
        self: Agent[DepsT, str],
        model: str | Model,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
        max_steps: int = 10,
        tool_choice: str | None = None,
        reset_tool_choice: bool = True,
        output_type: None = None,
        output_retries: int = 3,
        auto_execute_tools: bool = True,
        stop_when: Sequence[StopCondition | StopPredicate] = (),
        on_tool_error: OnToolError = "return",
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        name: str | None = None,
        handoffs: Sequence[Agent | Handoff | str] = (),
        settings: Mapping[str, Any] | None = None,
        **more_settings: Any,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[DepsT, _T],
        model: str | Model,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
        max_steps: int = 10,
        tool_choice: str | None = None,
        reset_tool_choice: bool = True,
        output_type: type[_T],
        output_retries: int = 3,
        auto_execute_tools: bool = True,
        stop_when: Sequence[StopCondition | StopPredicate] = (),
        on_tool_error: OnToolError = "return",
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        name: str | None = None,
        handoffs: Sequence[Agent | Handoff | str] = (),
        settings: Mapping[str, Any] | None = None,
        **more_settings: Any,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[DepsT, Any],
        model: str | Model,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
        max_steps: int = 10,
        tool_choice: str | None = None,
        reset_tool_choice: bool = True,
        output_type: Any,
        output_retries: int = 3,
        auto_execute_tools: bool = True,
        stop_when: Sequence[StopCondition | StopPredicate] = (),
        on_tool_error: OnToolError = "return",
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        name: str | None = None,
        handoffs: Sequence[Agent | Handoff | str] = (),
        settings: Mapping[str, Any] | None = None,
        **more_settings: Any,
    ) -> None: ...

    def __init__(
        self,
        model: str | Model,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
        max_steps: int = 10,
        tool_choice: str | None = None,
        reset_tool_choice: bool = True,
        output_type: Any = None,
        output_retries: int = 3,
        auto_execute_tools: bool = True,
        stop_when: Sequence[StopCondition | StopPredicate] = (),
        on_tool_error: OnToolError = "return",
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        name: str | None = None,
        handoffs: Sequence[Agent | Handoff | str] = (),
        settings: Mapping[str, Any] | None = None,
        **more_settings: Any,
    ) -> None:
        if more_settings:
            refuse_run_options("Agent()", more_settings, _agent_run_options())
            refuse_model_options("Agent()", more_settings, model)
            refuse_misspelt("Agent()", more_settings, _agent_parameters())
        if settings is not None:
            _refuse_unmapped_settings("Agent()", settings)
        if settings:
            refuse_model_options("Agent()", settings, model, keywords=False)
        self.__attrs_init__(
            model=model,
            instructions=instructions,
            tools=_listed(tools, "tools", name),
            max_steps=max_steps,
            tool_choice=tool_choice,
            reset_tool_choice=reset_tool_choice,
            output_type=output_type,
            output_retries=output_retries,
            auto_execute_tools=auto_execute_tools,
            stop_when=_listed(stop_when, "stop_when", name),
            on_tool_error=on_tool_error,
            max_concurrency=max_concurrency,
            name=name,
            handoffs=_listed(handoffs, "handoffs", name),
            # A read-only deep copy: a frozen spec's runs, copies (evolve, pickling)
            # and equality must all see the settings it was made with.
            settings=freeze({**(settings or {}), **more_settings}),
        )

    def __attrs_post_init__(self) -> None:
        if self.name is not None and (type(self.name) is not str or not self.name):
            raise UsageError(  # a name is a tool name, a step's key and a log's label
                f"an agent's name is a non-empty string (or None), got {self.name!r}"
            )
        # Resolve once: building a provider client per run would waste its
        # connection pool, and bad specs should fail here, not at first run.
        static, sources = split_sources(self.tools)
        specs = self._handoff_specs() if self.handoffs else []
        transfers = [h.tool() for h in specs]
        object.__setattr__(self, "_sources", sources)
        # Its tools and its transfer tools are checked here, before any run:
        # a name two of them share is refused naming the agent.
        owner = None if self.name is None else f"agent {self.name!r}"
        _refuse_repeated_sources(sources, owner)
        options = make_options(
            **{**self._spec(), "tools": (*static, *transfers)},
            owner=owner,
            sourced=bool(sources),
        )
        if self.name is not None:  # options are made without a name: no copy for none
            options = attrs.evolve(options, name=self.name)
        object.__setattr__(self, "_options", options)

    def _handoff_specs(self) -> list[Handoff]:
        specs = [h if isinstance(h, Handoff) else Handoff(h) for h in self.handoffs]
        for spec in specs:
            target = spec.agent
            if isinstance(target, str):
                if not target:
                    raise UsageError("a handoff target given by name needs a non-empty name")
            elif not isinstance(target, Agent):
                raise UsageError(
                    f"a handoff target is an Agent or an agent's name, got "
                    f"{type(target).__name__}: a handoff gives the conversation to an agent; "
                    "run a workflow from an agent with workflow.as_tool() instead"
                )
            elif not target.name:
                raise UsageError("a handoff target needs a name: give the agent name=...")
            if spec.input_filter is not None and not callable(spec.input_filter):
                raise UsageError(  # found now, not when the model first hands off
                    f"the input_filter of the handoff to {spec.target!r} is a function of the "
                    f"conversation, got {type(spec.input_filter).__name__}"
                )
            if is_async_callable(spec.input_filter):
                from toolfold.runtime._agent_tool import function_name  # (it imports this)

                raise UsageError(
                    f"the input_filter of the handoff to {spec.target!r} is a plain function "
                    f"of the conversation, got the async function "
                    f"{function_name(spec.input_filter)!r}: a run calls it without awaiting "
                    f"it; make it a plain def"
                )
        return specs

    def handoff_graph(self) -> Mapping[str, Agent]:
        """Every agent a run started with this agent can be handed to, by name (itself included).

        Targets given as agents are followed at any depth; a target given by
        name is one of them (or, for agents loaded from one file, any agent of
        the file), so a cycle is written with one name.

        Raises:
            UsageError: A handoff names an agent not in the graph, or two
                different agents of the graph share a name.
        """
        if self._graph is None:
            graph, missing, clashes = self._reach()
            if clashes:
                raise UsageError(
                    f"two different agents are named {clashes[0]!r} in the handoff graph of "
                    f"agent {self.name!r}: handoffs find agents by name, give them distinct names"
                )
            if missing:
                shown = ", ".join(f"{owner!r} -> {name!r}" for owner, name in missing)
                names = " / ".join(dict.fromkeys(repr(name) for _, name in missing))
                raise UsageError(
                    f"handoffs by name that name no agent reachable from agent "
                    f"{self.name or '(unnamed)'!r}: {shown}; somewhere on the way, hand off "
                    f"to the Agent named {names} itself (the object in handoffs=[...], not "
                    "its name), or start the run with the agent that does"
                )
            object.__setattr__(self, "_graph", graph)
        assert self._graph is not None
        return self._graph

    def _reach(self) -> tuple[dict[str, Agent], list[tuple[str, str]], list[str]]:
        """The handoff graph from this agent (the first agent of each name), the
        (agent, name) handoffs it cannot resolve, and names two different agents share."""
        graph: dict[str, Agent] = {}
        named: list[tuple[str, str]] = []
        clashes: list[str] = []
        todo: list[Agent] = [self]
        while todo:
            agent = todo.pop(0)
            known = graph.get(agent.name or "")
            if known is agent:
                continue
            if known is not None:
                if known != agent:
                    clashes.append(known.name or "")
                continue
            if agent.name:
                graph[agent.name] = agent
            for spec in agent._handoff_specs():
                if isinstance(spec.agent, str):
                    named.append((agent.name or "", spec.agent))
                else:
                    todo.append(spec.agent)
        for agent in list(graph.values()):
            for name, other in (agent._scope or {}).items():
                graph.setdefault(name, other)
        missing = [(owner, name) for owner, name in named if name not in graph]
        return graph, missing, clashes

    def _run_options(self, graph: Mapping[str, Agent] | None) -> RunOptions:
        """The options a run uses in ``graph``: a handoff by name is described like one to its agent.

        A ``transfer_to_<name>`` tool made before the graph was known only
        knows the target's name; in the run its description says what the
        target does, as for a handoff given the agent itself.
        """
        if not self.handoffs:
            return self._options
        named = [
            spec
            for spec in self._handoff_specs()
            if isinstance(spec.agent, str) and spec.description is None
        ]
        if not named or graph is None:
            return self._options
        if self._described is not None and self._described[0] is graph:
            return self._described[1]
        tools = dict(self._options.tools)
        for spec in named:
            target = graph.get(spec.target)
            if target is not None:
                tools[spec.tool_name] = attrs.evolve(spec, agent=target).tool()
        specs = tuple(ToolSpec.from_tool(t) for t in tools.values())
        config = attrs.evolve(self._options.config, tools=specs)
        options = attrs.evolve(self._options, tools=tools, config=config)
        object.__setattr__(self, "_described", (graph, options))
        return options

    def _live(self, live: Live, graph: Mapping[str, Agent] | None = None) -> Live:
        """``live`` with this agent's handoffs attached (targets by name found in ``graph``)."""
        if not self.handoffs:
            return live
        return attrs.evolve(live, handoffs=self._handovers(graph))

    def _handovers(self, graph: Mapping[str, Agent] | None = None) -> Mapping[str, Handover]:
        """Where each of this agent's handoff tools sends a run (targets by name found in ``graph``).

        Made once per graph, not per run and per handoff: a run only reads them.
        """
        if not self.handoffs:
            return {}
        graph = graph if graph is not None else self.handoff_graph()
        handed = self._handed
        if handed is not None and handed[0] is graph:
            return handed[1]
        handovers = {}
        for spec in self._handoff_specs():
            target = graph[spec.agent] if isinstance(spec.agent, str) else spec.agent
            handovers[spec.tool_name] = Handover(
                target.name or "",
                functools.partial(target._takes_over, graph),
                spec.input_filter,
                target._sources,
            )
        object.__setattr__(self, "_handed", (graph, handovers))
        return handovers

    def _takes_over(
        self, graph: Mapping[str, Agent], current: Live, listed: Sequence[Tool[..., Any]]
    ) -> tuple[RunConfig, Live]:
        """This agent's configuration and live half for a run handed to it.

        ``listed``: the tools of its sources, which the driver opened for the
        run; ``graph``: the run's handoff graph, where its handoffs by name go.
        The live stop conditions of the agent that began the run (or the
        resume: its callables, and those a resume gave) go on bounding it beside
        this agent's own, as its stored ones do (`handed_off`), like the run's
        step limit: a handoff is no way out of them. Those of an agent handed
        to since are its own: they do not follow the run (as on Temporal).
        """
        agent = self._with(listed) if self._sources else self
        options = agent._run_options(graph)
        own = (*options.stop_when, *options.config.stop_when)
        first = current.stop_when if current.first_stop_when is None else current.first_stop_when
        live = options.live(
            deps=current.deps,
            on_event=current.on_event,
            on_step=current.on_step,
            stop_when=tuple(c for c in first if c not in own),
            handoffs=agent._handovers(graph),
        )
        return options.config, attrs.evolve(live, first_stop_when=first)

    def _for_state(self, state: RunState) -> Agent:
        """The agent of the handoff graph that runs ``state`` now."""
        if state.agent is None or state.agent == self.name:
            return self
        found = self.handoff_graph().get(state.agent) if self.handoffs else None
        if found is None:
            started = started_by(state)
            if started is None or started == state.agent:  # never handed off (or handed back)
                raise UsageError(
                    f"the run belongs to agent {state.agent!r}, not to this agent "
                    f"({self.name!r}), and {state.agent!r} is not among its handoffs (any "
                    f"depth): resume it with agent {state.agent!r}"
                )
            raise UsageError(
                f"the run was handed to agent {state.agent!r}, which is not among the "
                f"handoffs (any depth) of this agent ({self.name!r}): resume it with the "
                f"agent that started it ({started!r})"
            )
        return found

    def __reduce__(self) -> tuple[Any, ...]:
        # An agent travels (to another process, a Ray actor) as its spec: the
        # resolved options hold live clients and API keys, which must not be
        # pickled; loading rebuilds them where the agent lands.
        return (_from_spec, (self._spec(), self.name, self.handoffs, self._scope))

    def _with(self, listed: Sequence[Tool[..., Any]]) -> Agent:
        """This agent with its sources' listed tools in their place (for one run).

        It keeps the model resolved when the agent was made: a provider
        client per run (or per handoff) would waste its connection pool.
        """
        static, _ = split_sources(self.tools)
        # (checked here, not when the agent was made: its sources' tools were not known)
        refuse_unlisted_choice(
            self.tool_choice,
            list(self._options.tools),
            [t.name for t in listed],
            self._sources,
            None if self.name is None else f"agent {self.name!r}",
        )
        agent = self.evolve(tools=(*static, *listed), model=self._options.model)
        if self._options.spec is not None:  # still resolved again by a block a run starts in
            options = attrs.evolve(agent._options, spec=self._options.spec)
            object.__setattr__(agent, "_options", options)
        return agent

    def _within(self, budget: TokenBudget) -> Agent:
        """This agent with ``budget`` (a caller's tree budget) among its stop conditions.

        Not built again (`evolve` resolves the model anew: a provider client,
        and its connection pool, per sub-run, or an `override_models`
        factory called per call): a copy sharing the resolved options, the
        budget added to their plain-data config as `make_options` would put
        it (after the agent's own data conditions).
        """
        # (``_described`` was made from the options without the budget)
        return within_copy(
            self, Agent, budget, stop_when=(*self.stop_when, budget), _described=None
        )

    def _spec(self) -> dict[str, Any]:
        """The run options by name (every field but the name and the resolved options)."""
        return {f.name: getattr(self, f.name) for f in _RUN_FIELDS}

    @overload
    def evolve(self, *, output_type: None, **changes: Any) -> Agent[DepsT, str]: ...

    @overload
    def evolve(self, *, output_type: type[_T], **changes: Any) -> Agent[DepsT, _T]: ...

    @overload
    def evolve(self, *, output_type: Any, **changes: Any) -> Agent[DepsT, Any]: ...

    @overload
    def evolve(self, **changes: Any) -> Agent[DepsT, OutputT_co]: ...

    def evolve(self, **changes: Any) -> Agent[Any, Any]:
        """A copy of this agent with some fields changed (a new ``output_type`` types its runs'
        outputs as `Agent` does)."""
        refuse_run_options("evolve()", changes, _agent_run_options())
        model = changes.get("model", self.model)
        refuse_model_options("evolve()", changes, model)
        own = _agent_parameters()
        refuse_misspelt("evolve()", {k: v for k, v in changes.items() if k not in own}, own)
        if changes.get("settings") is not None:  # (None: none added, as Agent() takes it)
            _refuse_unmapped_settings("evolve()", changes["settings"])
        if changes.get("settings"):
            refuse_model_options("evolve()", changes["settings"], model, keywords=False)
        fields = {**self._spec(), "name": self.name, "handoffs": self.handoffs}
        settings = {**fields.pop("settings"), **(changes.pop("settings", None) or {})}
        fields.update(changes)
        made = Agent(settings=settings, **fields)
        if self._scope is not None:
            made._in_scope(self._scope)
        return made

    def _in_scope(self, scope: Mapping[str, Agent]) -> None:
        """Let handoffs by name also find the agents of ``scope`` (an agent file's)."""
        object.__setattr__(self, "_scope", scope)
        object.__setattr__(self, "_graph", None)
        object.__setattr__(self, "_handed", None)
        object.__setattr__(self, "_described", None)

    def to_mermaid(self) -> str:
        """This agent as a Mermaid flowchart: its tools, sub-agents, tool sources and handoffs.

        Example:
            >>> print(triage.to_mermaid())  # paste into a ```mermaid block
        """
        from toolfold.runtime._mermaid import to_mermaid

        return to_mermaid(self)

    def to_dict(self) -> dict[str, Any]:
        """This agent, and every agent it refers to, as an agent file's document.

        ``toolfold.files.from_dict(agent.to_dict())`` builds the same agents
        again; the dict can be written as TOML or YAML. Tools, models given as
        objects, output types, input filters and stop conditions that are
        functions are written as import paths; the built-in stop conditions
        as tables (``{max_steps = 3}``).

        Raises:
            UsageError: Something has no import path (a lambda, a local
                function), or a tool made by ``as_tool`` has an option an
                agent file cannot hold (a ``requires_approval`` predicate: the
                file takes true or false; ``max_retries``, ``strict`` or
                ``blocking`` changed by ``replace``); the error names its key path.
        """
        from toolfold.runtime._document import spec_to_dict

        return spec_to_dict(self)

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        input_type: Any = str,
        requires_approval: ApprovalPolicy = False,
        timeout: float | None = None,
        output: Callable[[Response[OutputT_co]], Any] | None = None,
    ) -> Tool[..., Any]:
        """This agent as a tool another agent can call.

        The calling model passes one argument, ``input`` (text by default; an
        attrs class or dataclass ``input_type`` gives its schema, and the
        value reaches this agent as JSON). It sees this agent's final text,
        or its structured output as JSON. The sub-run's state is kept on the
        call's record, so the whole tree serializes, replays and resumes: an
        approval or a manual call inside the sub-run suspends the calling
        run, and ``resume(state, approvals={nested_id: True})`` at the top
        continues it where it stopped.

        Example:
            >>> researcher = Agent(model, name="researcher", tools=[search])
            >>> lead = Agent(model, tools=[researcher.as_tool()])

        Args:
            name: The tool's name (default: the agent's ``name``).
            description: What the calling model reads about the tool.
            input_type: The type of the ``input`` argument.
            requires_approval: Ask before the sub-agent runs at all: True, or a
                predicate over (call, state) as `tool` takes.
            timeout: Seconds the whole sub-run may take.
            output: What the calling model sees of the finished run: by
                default its final text, or its structured output as JSON; or a
                function of its `Response` returning text or JSON-able data
                (e.g. ``lambda r: r.output.summary``, defined at module level
                for agent files). It runs once, when the run finishes, and its
                result is what the call records (a resume or a replay does not
                run it again); if it raises, the call is an error result
                naming the tool, which the calling model reads.

        Raises:
            UsageError: Neither the agent nor ``name`` gives a name, or
                ``output`` is not a function.
        """
        from toolfold.runtime._agent_tool import agent_tool

        return agent_tool(
            self,
            name=name,
            description=description,
            input_type=input_type,
            requires_approval=requires_approval,
            timeout=timeout,
            output=output,
        )

    def _start(
        self,
        prompt: MessagesInput,
        history: Sequence[Message],
        run_id: str,
        options: RunOptions | None = None,
    ) -> RunState:
        messages = (
            (*given_history(history), *to_messages(prompt, resume=AGENT_RESUME))
            if history
            else prompt
        )
        if options is None:
            options = self._run_options(self._graph_or_none())
        return start(options, messages, run_id, agent=self.name, resume=AGENT_RESUME)

    def _graph_or_none(self) -> Mapping[str, Agent] | None:
        return self.handoff_graph() if self.handoffs else None

    def run(
        self,
        prompt: MessagesInput,
        *,
        history: Sequence[Message] = (),
        deps: DepsT | None = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
        run_id: str | None = None,
    ) -> Response[OutputT_co]:
        """Run until the model answers, or the run waits for the caller (blocking).

        Args:
            prompt: The user's prompt, a `Message`, a role/content dict (those
                two keys only: any other is a `UsageError` naming it), or a
                list of messages or dicts.
            history: Earlier messages (e.g. ``previous_response.messages``).
            deps: Anything tools need, handed to them in their `RunContext`.
            on_event: Called with every event of the run (read-only).
            on_step: Called with every completed `Step` (read-only).
            run_id: The run's id (random by default).
        """
        return self._sync(_Fresh(prompt, history, deps, on_event, on_step, run_id))

    @keeps_override
    async def arun(
        self,
        prompt: MessagesInput,
        *,
        history: Sequence[Message] = (),
        deps: DepsT | None = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
        run_id: str | None = None,
    ) -> Response[OutputT_co]:
        """Like `run`, on the running event loop."""
        if self._sources:
            return await self._sourced_async(
                _Fresh(prompt, history, deps, on_event, on_step, run_id)
            )
        # `run_async`, spelled out: one coroutine fewer for every await of the run
        # (and, as there, no local holding the run's first state until it ends).
        return finish(
            *await drive_async(*self._fresh_run(prompt, history, deps, on_event, on_step, run_id))
        )

    def stream(
        self,
        prompt: MessagesInput,
        *,
        history: Sequence[Message] = (),
        deps: DepsT | None = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
        run_id: str | None = None,
    ) -> RunStream[OutputT_co]:
        """Run with streaming: iterate the result with ``for`` or ``async for``.

        The events are `StepStartEvent`, the model's stream events as they
        arrive (`TextDelta`...), `ToolCallEvent`, `ToolResultEvent`,
        `OutputInvalidEvent` (a structured answer sent back), `StepEndEvent`,
        and last a `RunEndEvent` carrying the `Response`.
        """
        return self._streamed(_Fresh(prompt, history, deps, on_event, on_step, run_id))

    def _step_state(self, prompt: MessagesInput, deps: Any, run_id: str) -> RunState:
        """A workflow step's run of this agent, blocking: `run`'s state, without the
        `Response` (nor the typed output) a step does not read."""
        if self._sources:
            return self.run(prompt, deps=deps, run_id=run_id).state
        # `run_sync`'s end state, without its `Response`.
        return drive_sync(*self._fresh_run(prompt, (), deps, None, None, run_id)).state

    def _astep_run(
        self, prompt: MessagesInput, deps: Any, run_id: str
    ) -> Coroutine[Any, Any, Response | Ended]:
        """Like `_step_state`, on the running event loop: the run to await, whose ``.state``
        the step reads (`arun`'s response; without sources, `drive_async`'s end, without
        the `Response`). Not a coroutine function: the step awaits the run itself, one
        coroutine fewer per step."""
        if self._sources:
            return self.arun(prompt, deps=deps, run_id=run_id)
        return drive_async(*self._fresh_run(prompt, (), deps, None, None, run_id))

    def _fresh_run(
        self,
        prompt: MessagesInput,
        history: Sequence[Message],
        deps: Any,
        on_event: Observer | None,
        on_step: StepObserver | None,
        run_id: str | None,
    ) -> tuple[Live, RunState]:
        """A new run of this agent (its sources' tools aside): `_Fresh`'s live half and
        first state, begun without it for an agent without handoffs and a run without
        history (`_run_options` and `_handovers` of no graph: the agent's options, no
        handovers; the prompt as it is), as most runs are: five calls fewer a run."""
        if self.handoffs or history:
            return _Fresh(prompt, history, deps, on_event, on_step, run_id)(self)
        return fresh(
            self._options,
            prompt,
            run_id,
            deps,
            on_event,
            on_step,
            self.name,
            {},
            resume=AGENT_RESUME,
        )

    # --- how every run and resume goes: the agent's sources opened around it ---

    def _answered(
        self, state: RunState, answers: _Answers, function: str, resume: str = AGENT_RESUME
    ) -> tuple[Agent, _Begin]:
        """The agent that runs ``state`` now, and how the run goes on with the answers
        (``resume``: how a refused ``message`` says to go on with a run, see `to_messages`).

        A failed ``state`` goes on from before what failed it, as a failed
        workflow step does (`retry_state`): an answer unfit for the output
        type is asked for again, calls whose tools used up their retries run
        again. A failure nothing can retry is raised again when the run goes on.

        Raises:
            UsageError: ``state`` is no `RunState` (``function`` is the method
                called, for the message).
        """
        if not isinstance(state, RunState):  # a Response, its JSON, None
            raise not_a_state(function, state)
        graph = self._graph_or_none()
        handed = state.agent not in (None, self.name)
        if answers.max_steps is None and handed:
            # the run's limit is its first agent's, whoever runs it after handoffs
            answers = answers._replace(max_steps=self.max_steps)
        # So are its stop conditions: its callables are live (not stored), and a
        # state stored before a handoff kept them holds none of its data ones.
        mine = (*self._options.stop_when, *self._options.config.stop_when) if handed else ()
        # An agent resuming a run another agent started and handed to it is not
        # its first agent: its conditions stop nothing once it hands the run on.
        relayed = not handed and started_by(state) not in (None, self.name)
        failed = state.phase == "failed"
        retrying = None  # (an answer to a call held in what failed: resume first)
        if failed:  # retried as a workflow's failed step is (see `retry_state`)
            retried = retry_state(state)  # (None: nothing to retry, its error raised again)
            if retried is not None:
                retrying, state = Retrying(state, "call"), retried
        continued = caller_answered(state)  # (asked now: the run may begin in another context)

        def begin(agent: Agent) -> tuple[Live, RunState]:
            options = agent._run_options(graph)
            live, resumed_state = resumed(
                state,
                options,
                **answers._asdict(),
                continued=continued,
                failed=failed,
                retrying=retrying,
                resume=resume,
            )
            if handed:  # this agent's bound the run beside the running one's, as after a handoff
                kept = resumed_state.config.stop_when
                added = tuple(c for c in mine if c not in live.stop_when and c not in kept)
                started = started_config(resumed_state).stop_when
                live = attrs.evolve(
                    live,
                    stop_when=(*live.stop_when, *added),
                    first_stop_when=tuple(c for c in mine if c not in started),
                )
            elif relayed:  # (None would make its callables the first agent's)
                live = attrs.evolve(live, first_stop_when=())
            return agent._live(live, graph), resumed_state

        return self._for_state(state), begin

    def _check_resume(self, state: RunState) -> None:
        """Refuse, running nothing, what resuming ``state`` (a suspended sub-run) would refuse.

        The sub-run resumes as `resume` with no answers of its own goes (see
        `_answered`); tools of the agent's sources are not listed before they
        open, so only its other checks are made for such an agent.
        """
        graph = self._graph_or_none()
        max_steps = self.max_steps if state.agent not in (None, self.name) else None
        agent = self._for_state(state)
        options = agent._run_options(graph)
        check_sub_run(state, options, max_steps, tools_known=not agent._sources)

    def _sync(self, begin: _Begin) -> Response:
        if not self._sources:
            return run_sync(*begin(self))
        response = None
        try:
            with opened(self._sources) as listed:
                response = run_sync(*self._begun(begin, listed))
        except BaseException as exc:
            _after_the_run(exc, response)
            raise
        return response

    def _async(self, begin: _Begin) -> Coroutine[Any, Any, Response]:
        """The run to await: without sources, `run_async`'s own coroutine.

        No coroutine of this method waits on it, holding ``begin`` for the
        whole run: each object a run keeps across its awaits is one more for
        the garbage collector to walk, and move to an older generation, while
        many runs are in flight.
        """
        if self._sources:
            return self._sourced_async(begin)
        return run_async(*begin(self))

    async def _sourced_async(self, begin: _Begin) -> Response:
        response = None
        try:
            async with aopened(self._sources) as listed:
                response = await run_async(*self._begun(begin, listed))
        except BaseException as exc:
            _after_the_run(exc, response)
            raise
        return response

    def _streamed(self, begin: _Begin) -> RunStream:
        if self._sources:
            return SourcedStream(
                self._sources, lambda listed: RunStream(*self._begun(begin, listed))
            )
        return RunStream(*begin(self))

    def _begun(self, begin: _Begin, listed: Sequence[Tool[..., Any]]) -> tuple[Live, RunState]:
        """``begin`` with this agent's sources open (``listed``: their tools).

        The run knows they are open, so a handoff back to this agent reuses
        them instead of opening them again.
        """
        live, state = begin(self._with(listed))
        return attrs.evolve(live, opened=((self._sources, tuple(listed)),)), state

    def resume(
        self,
        state: RunState,
        *,
        tool_results: Mapping[str, Any] | None = None,
        approvals: Mapping[str, Approval] | None = None,
        message: MessagesInput | None = None,
        max_steps: int | None = None,
        deps: DepsT | None = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
    ) -> Response[OutputT_co]:
        """Continue a run that waits for the caller or stopped at ``max_steps``, or retry one.

        The run keeps the configuration stored in its state. This agent's
        live parts apply (model, tools, output type, ``on_tool_error``,
        ``max_concurrency``, stop conditions the run does not have), and so
        does its ``max_steps``; an agent whose stored options (instructions,
        settings, ``tool_choice``, ``output_retries``,
        ``auto_execute_tools``, output type) differ from the run's is refused.
        A failed run (an error's ``.state``) is retried from before what
        failed it, as a failed workflow step is: an answer that did not fit
        the output type is asked for again, the calls of a tool that used up
        its retries run again; a failure nothing can retry is raised again.

        Args:
            state: ``response.state``, an error's ``.state``, or a state
                loaded with ``RunState.from_json`` (in any process).
            tool_results: Results for returned calls, by call id: text, any
                value, an exception (an error result) or a `ToolResultPart`.
            approvals: By call id: True, False or `Denied(reason)`.
            message: A new user message (a new turn on a finished run).
            max_steps: The run's new limit of model calls per turn (the
                total, not an increment; default: this agent's). A run that
                stopped at ``max_steps`` continues when it is larger.
            deps: Dependencies for the tools' `RunContext`.
            on_event: Called with every event (read-only).
            on_step: Called with every completed step (read-only).

        Raises:
            UsageError: The agent's stored options differ from the run's,
                ``max_steps`` is below the calls this turn made, or the run
                stopped at ``max_steps`` and nothing continues it.
        """
        answers = _Answers(tool_results, approvals, message, max_steps, deps, on_event, on_step)
        agent, begin = self._answered(state, answers, "Agent.resume")
        return agent._sync(begin)

    @keeps_override
    async def aresume(
        self,
        state: RunState,
        *,
        tool_results: Mapping[str, Any] | None = None,
        approvals: Mapping[str, Approval] | None = None,
        message: MessagesInput | None = None,
        max_steps: int | None = None,
        deps: DepsT | None = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
    ) -> Response[OutputT_co]:
        """Like `resume`, on the running event loop."""
        answers = _Answers(tool_results, approvals, message, max_steps, deps, on_event, on_step)
        agent, begin = self._answered(state, answers, "Agent.aresume")
        return await agent._async(begin)

    def resume_stream(
        self,
        state: RunState,
        *,
        tool_results: Mapping[str, Any] | None = None,
        approvals: Mapping[str, Approval] | None = None,
        message: MessagesInput | None = None,
        max_steps: int | None = None,
        deps: DepsT | None = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
    ) -> RunStream[OutputT_co]:
        """Like `resume`, streaming (see `stream`)."""
        answers = _Answers(tool_results, approvals, message, max_steps, deps, on_event, on_step)
        agent, begin = self._answered(state, answers, "Agent.resume_stream")
        return agent._streamed(begin)


@attrs.frozen
class Handoff:
    """A handoff target with its tool's name, description and an input filter.

    Example:
        >>> triage = Agent(model, handoffs=[billing, Handoff(refunds, input_filter=drop_tool_calls)])

    Attributes:
        agent: The agent that takes over (it must have a ``name``), or its
            name, found in the run's handoff graph (see `Agent`).
        name: The tool's name (default ``transfer_to_<agent name>``).
        description: What the model reads about the tool.
        input_filter: A function of the conversation (a tuple of `Message`)
            returning the messages the target continues with.
    """

    agent: Agent | str
    name: str | None = None
    description: str | None = None
    input_filter: Callable[[tuple[Message, ...]], Sequence[Message]] | None = None

    @property
    def target(self) -> str:
        """The name of the agent that takes over."""
        return self.agent if isinstance(self.agent, str) else self.agent.name or ""

    @property
    def tool_name(self) -> str:
        """The name of the tool that hands the run over."""
        return f"transfer_to_{self.target}" if self.name is None else self.name

    def tool(self) -> Tool[..., Any]:
        """The tool the handing agent's model calls.

        Its result says the run was transferred. When the model calls two
        transfer tools in one answer, the run goes to the first call that
        succeeds, and the other successful one's result is rewritten to say
        it was not transferred when its round is committed (see
        ``toolfold.runtime.drive._handoff``).
        """
        from toolfold.toolkit import tool

        target = self.target
        instructions = None if isinstance(self.agent, str) else self.agent.instructions
        text = self.description or f"Hand the conversation over to the {target} agent." + (
            f" It: {instructions}" if instructions else ""
        )
        done = f"Transferred to {target}."

        def transfer() -> str:
            return done

        transfer.__dict__[MADE_AS] = f"the handoff to agent {target!r}"  # (not this function)
        problems = name_problems(self.tool_name, self._name_hint())
        if problems:  # (the call to fix is Handoff's, not the tool() made here)
            raise ToolDefinitionError(f"the handoff to {target!r}", problems)
        try:
            made: Tool[..., Any] = tool(name=self.tool_name, description=text, blocking=False)(
                transfer
            )
        except ToolDefinitionError as exc:  # name the handoff, not the function made here
            raise ToolDefinitionError(f"the handoff to {target!r}", exc.problems) from None
        return made

    def _name_hint(self) -> str:
        """What an invalid tool name's error says to do: give `Handoff` a ``name``."""
        if self.name is not None:
            return " (give Handoff(agent, name=...) another)"
        # the agent's name made it: one such name, each other character as _, fits
        fitting = re.sub(f"[^{TOOL_NAME_CHARACTERS}]", "_", self.tool_name)[:TOOL_NAME_LONGEST]
        return (
            f" (made from the agent's name: list the handoff as "
            f"Handoff(agent, name={fitting!r}) in handoffs=[...])"
        )


class _Answers(NamedTuple):
    """What a resume is given besides the state (`resumed`'s keyword arguments)."""

    tool_results: Mapping[str, Any] | None
    approvals: Mapping[str, Approval] | None
    message: MessagesInput | None
    max_steps: int | None
    deps: Any
    on_event: Observer | None
    on_step: StepObserver | None


_Begin = Callable[[Agent], tuple[Live, RunState]]


def _refuse_repeated_sources(sources: Sequence[Any], owner: str | None) -> None:
    """A tool source (an MCP server) listed more than once would give each of its tools
    twice: refused now, saying so, rather than as tools sharing names at the first run.

    Raises:
        ToolDefinitionError: One is.
    """
    problems = []
    where = f" in the tools of {owner}" if owner else ""
    for index, source in enumerate(sources):
        if any(source is other for other in sources[:index]):
            continue
        count = sum(source is other for other in sources)
        if count > 1:
            label = source_label(source)
            problems.append(
                f"the tool source {label} is listed {count} times{where}: list it once "
                "(each of its tools would be there twice)"
            )
    if problems:
        error = ToolDefinitionError(f"the tools of {owner}" if owner else "the tool list", problems)
        error.args = ("; ".join(problems),)
        raise error


def _after_the_run(exc: BaseException, response: Response | None) -> None:
    """What ``exc``, raised while an agent's sources closed, means once the run ended.

    Before the run ended (``response`` None) it is the run's own error, raised
    as it is. After, a close error becomes a `SourceCloseError` carrying the
    response, and an interruption gets the run's final state.
    """
    if response is None:
        return
    if isinstance(exc, Exception):
        raise close_failed(exc, response) from exc
    interrupted(exc, response.state)


@attrs.define
class _Fresh:
    """How a new run begins: called with its agent, the run's live half and first state.

    The agent is the one called, or it with its sources' tools. One object
    holds the run's arguments, where a closure over them would make a cell
    for each as well (and a run with sources keeps it while it lasts).
    """

    prompt: MessagesInput
    history: Sequence[Message]
    deps: Any
    on_event: Observer | None
    on_step: StepObserver | None
    run_id: str | None

    def __call__(self, agent: Agent) -> tuple[Live, RunState]:
        graph = agent._graph_or_none()
        history = self.history
        return fresh(
            agent._run_options(graph),
            (
                (*given_history(history), *to_messages(self.prompt, resume=AGENT_RESUME))
                if history
                else self.prompt
            ),
            self.run_id,
            self.deps,
            self.on_event,
            self.on_step,
            agent.name,
            agent._handovers(graph),
            resume=AGENT_RESUME,
        )


def _from_spec(
    spec: dict[str, Any],
    name: str | None,
    handoffs: Sequence[Agent | Handoff | str] = (),
    scope: Mapping[str, Agent] | None = None,
) -> Agent:
    """An agent rebuilt from its pickled spec (see `Agent.__reduce__`)."""
    agent = Agent(name=name, handoffs=handoffs, **spec)
    if scope is not None:
        agent._in_scope(scope)
    return agent


_RUN_FIELDS = tuple(
    f
    for f in attrs.fields(Agent)
    if f.name
    not in ("name", "handoffs", "_options", "_sources", "_scope", "_graph", "_handed", "_described")
)


# The methods whose options a caller may mistake for the agent's.
_RUN_METHODS = ("run", "arun", "stream", "resume", "aresume", "resume_stream")


@functools.cache
def _agent_parameters() -> tuple[str, ...]:
    """`Agent`'s parameters that a keyword may misspell (`own_parameters`)."""
    return own_parameters(Agent.__init__)


@functools.cache
def _agent_run_options() -> Mapping[str, str]:
    """Each parameter of a run method that `Agent` does not take, with the methods that take it."""
    methods = {name: getattr(Agent, name) for name in _RUN_METHODS}
    return {
        **config_options(Agent.__init__),
        **run_options(methods, Agent.__init__, "agent."),
    }


def _refuse_unmapped_settings(caller: str, settings: object) -> None:
    """Raise a `UsageError` naming ``caller`` if ``settings=`` is no mapping (checking its
    keys failed on it: ``settings=5`` was "'int' object is not iterable")."""
    if not isinstance(settings, Mapping):
        raise UsageError(
            f"{caller}: settings= takes a mapping of model settings, e.g. "
            f"settings={{'temperature': 0}}, got {value_or_type(settings)}"
        )


_HISTORY = "history= takes a list of messages (Messages or {'role', 'content'} dicts)"


def given_history(history: Any) -> tuple[Message, ...]:
    """A run's ``history=`` as messages, once it is seen to be a list of messages or
    role/content dicts.

    Raises:
        UsageError: Another value, named as ``history=``: a `Response` or a
            `RunState` (their ``.messages`` are the history), a str, one dict,
            or an item that is no message.
    """
    hint = pass_messages_hint(history, "history=", AGENT_RESUME)
    if hint:
        raise UsageError(f"history= takes a list of messages, got {hint}")
    if isinstance(history, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(
        history, Iterable
    ):  # (bytes of any kind: their items are ints, which to_messages calls a prompt's)
        if isinstance(history, str):
            got, hint = "a str", ": the prompt is the first argument, run(prompt, history=[...])"
        elif isinstance(history, Mapping):
            got, hint = "one dict", ": pass a list, history=[{'role': ..., 'content': ...}]"
        else:
            got, hint = type(history).__name__, ""
        raise UsageError(f"{_HISTORY}, got {got}{hint}")
    return to_messages(history, _HISTORY)  # (an item that is no message: named as history='s)


def _listed(value: Any, param: str, agent: Any, caller: str = "Agent()") -> tuple[Any, ...]:
    """A list parameter of `Agent` (``tools``, ``handoffs``, ``stop_when``) as a tuple.

    ``caller`` is the call the error names when ``agent`` (the agent's name)
    is none: ``"Agent()"``, or the function that builds the run
    (``"generate_text()"``, ``"resume()"``).

    Raises:
        UsageError: ``value`` is one item, not a list of them: a string (which
            would be a list of its letters), a mapping (the AI SDK's
            ``tools={"weather": tool}``: a tool's name is its own), or what
            is not iterable (an agent, a tool, a function, a number).
    """
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
        return tuple(value)
    who = caller if not isinstance(agent, str) or not agent else f"agent {agent!r}"
    if isinstance(value, str):
        got, item = f"the string {value!r}", repr(value)
    elif isinstance(value, Mapping):
        keys = ", ".join(repr(k) for k in list(value)[:5]) + (", ..." if len(value) > 5 else "")
        got = f"a {type(value).__name__} (keys {keys})" if value else "an empty dict"
        item = "..."
        names = [getattr(v, "name", None) or getattr(v, "__name__", None) for v in value.values()]
        if names and all(isinstance(n, str) and n.isidentifier() for n in names):
            item = ", ".join(cast("list[str]", names))
        named_by = (
            " (a tool keeps its own name, @tool(name=...) or Tool's, not a key's)"
            if param == "tools"
            else ""
        )
        raise UsageError(
            f"{who}: {param} takes a list, got {got}: pass a list of its values, "
            f"{param}=[{item}]{named_by}"
        )
    else:
        named = getattr(value, "name", None) or getattr(value, "__name__", None)
        kind = "agent" if isinstance(value, Agent) else type(value).__name__
        got = f"one {kind}" + (f" ({named!r})" if isinstance(named, str) else "")
        item = named if isinstance(named, str) and named.isidentifier() else "..."
    raise UsageError(f"{who}: {param} takes a list, got {got}: pass a list, {param}=[{item}]")
