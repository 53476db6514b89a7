"""The public surface of toolfold is pinned: adding or removing a name is a decision."""

from __future__ import annotations

import importlib
import inspect
import pickle
import traceback
import types
import typing
from typing import Any

import pytest

import toolfold
import toolfold.adapters
import toolfold.integrations.ray
import toolfold.runtime
import toolfold.testing
import toolfold.toolkit

TOP = {
    # toolkit: the tool DSL
    "Field",
    "RunContext",
    "SchemaContext",
    "Tool",
    "ToolDefinitionWarning",
    "UndocumentedParameterWarning",
    "register_schema_rule",
    "register_type_hooks",
    "schema_for_type",
    "tool",
    # runtime: messages, models, the loop
    "Agent",
    "Denied",
    "ExtraToolsWarning",
    "FilePart",
    "Handoff",
    "ImagePart",
    "Message",
    "ConnectedModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ReasoningPart",
    "Response",
    "RunEndEvent",
    "RunState",
    "RunStream",
    "Step",
    "StepEndEvent",
    "StepStartEvent",
    "SubRunEvent",
    "TextDelta",
    "TextPart",
    "ToolCallEvent",
    "ToolCallPart",
    "ToolResultEvent",
    "OutputInvalidEvent",
    "ToolResultPart",
    "Usage",
    "agenerate_text",
    "approval_key",
    "aresume",
    "drop_tool_calls",
    "generate_text",
    "model",
    "resume",
    "state_of",
    "token_budget",
    "tool_called",
    # runtime: workflows
    "Loop",
    "Parallel",
    "Route",
    "Sequence",
    "Task",
    "Workflow",
    "WorkflowResponse",
    # adapters: schema dialects
    "CompiledTool",
    "Dialect",
    "SchemaRewrite",
    "check_arguments",
    "compile_tool",
    "restore_arguments",
    # errors
    "AgentFileError",
    "ArgumentJSONError",
    "ArgumentValidationError",
    "AuthenticationError",
    "BadRequestError",
    "ContextWindowExceededError",
    "ProviderConnectionError",
    "InvalidEventError",
    "InvalidTransitionError",
    "ModelConfigError",
    "NotFoundError",
    "OutputValidationError",
    "MalformedResponseError",
    "ProviderError",
    "ProviderFinishError",
    "RateLimitError",
    "RunError",
    "SchemaCompileError",
    "SerializationError",
    "ServerError",
    "SourceCloseError",
    "StreamError",
    "ProviderTimeoutError",
    "ToolArgumentError",
    "ToolDefinitionError",
    "ToolExecutionError",
    "ToolRetriesExceededError",
    "ToolUseFailedError",
    "Unpicklable",
    "UsageError",
    "ToolfoldError",
    "WorkflowDefinitionError",
    # metadata
    "__version__",
}

RUNTIME = {
    # the API: runs, agents, responses, stream events
    "Agent",
    # workflows
    "Loop",
    "Parallel",
    "Route",
    "Sequence",
    "Task",
    "Workflow",
    "WorkflowResponse",
    "WorkflowStream",
    "Denied",
    "ExtraToolsWarning",
    "Handoff",
    "Response",
    "RunEndEvent",
    "RunStream",
    "RunStreamEvent",
    "Step",
    "StepEndEvent",
    "StepStartEvent",
    "SubRunEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "OutputInvalidEvent",
    "agenerate_text",
    "approval_key",
    "aresume",
    "generate_text",
    "resume",
    "state_of",
    # messages
    "FilePart",
    "FrozenDict",
    "FrozenList",
    "ImagePart",
    "Message",
    "Part",
    "ReasoningPart",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "Usage",
    "drop_tool_calls",
    # the pure core: state, config, events, effects, reducer
    "ApprovalDenied",
    "ApprovalGranted",
    "AttemptDropped",
    "AwaitApproval",
    "AwaitToolResults",
    "CallModel",
    "CallResumed",
    "CallState",
    "Effect",
    "Event",
    "Finish",
    "HandedOff",
    "Log",
    "ModelResponded",
    "OutputAccepted",
    "OutputRejected",
    "RunConfig",
    "RunFailed",
    "RunFailure",
    "RunStarted",
    "RunState",
    "RunTools",
    "StepLimitChanged",
    "StopRequested",
    "TRANSITIONS",
    "ToolInvocation",
    "ToolResultsProvided",
    "ToolReturned",
    "ToolSpec",
    "ToolSuspended",
    "UserMessageAdded",
    "ValidateOutput",
    "build_request",
    "initial_state",
    "next_effect",
    "reduce",
    "transition_diagram",
    "transition_table",
    # errors the core raises
    "InvalidEventError",
    "InvalidTransitionError",
    "RunError",
    # stop conditions
    "MaxSteps",
    "StopCondition",
    "TokenBudget",
    "ToolCalled",
    "max_steps",
    "stop_reason",
    "stopping_result",
    "token_budget",
    "tool_called",
    # serialization, replay, fork
    "converter",
    "events_from_json",
    "events_to_json",
    "fork",
    "from_json",
    "replay",
    "to_json",
    # the provider contract: models, requests, streams
    "ConnectedModel",
    "Model",
    "ModelRequest",
    "Prepared",
    "RequestReport",
    "ModelResponse",
    "OutputSpec",
    "MediaOutput",
    "ReasoningDelta",
    "ResponseInfo",
    "StreamEvent",
    "StreamFinish",
    "StreamState",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolDefinition",
    "UsageUpdate",
    "finish_stream",
    "fold_stream",
    "model",
    "register_provider",
}

# toolfold.toolkit: the tool DSL
TOOLKIT = {
    "Field",
    "FunctionSchema",
    "RunContext",
    "SchemaContext",
    "Tool",
    "ToolDefinitionWarning",
    "UndocumentedParameterWarning",
    "check_tool_names",
    "function_schema",
    "register_schema_rule",
    "register_type_hooks",
    "schema_for_type",
    "tool",
}

# toolfold.adapters: dialects, transport pieces, keys
ADAPTERS = {
    "CompiledTool",
    "Dialect",
    "HttpLimits",
    "RedactingFilter",
    "RetryPolicy",
    "SSEDecoder",
    "SSEEvent",
    "SchemaRewrite",
    "Secret",
    "Timeouts",
    "Transport",
    "check_arguments",
    "compile_tool",
    "redact_logs",
    "restore_arguments",
}

# toolfold.testing: models that need no network
TESTING = {
    "FunctionModel",
    "Reply",
    "ScriptedModel",
    "TestModel",
    "override_models",
    "response_events",
    "sample_value",
}

# toolfold.files: agent files (TOML / YAML)
FILES = {"AgentFile", "from_dict", "load", "loads"}

# toolfold.integrations.temporal: durable agents (the `temporal` extra)
TEMPORAL = {
    "WORKFLOW_NAME",
    "ActivitySettings",
    "AgentHandle",
    "AgentInput",
    "AgentWorkflow",
    "Answers",
    "CarriedCall",
    "EventStreamHandler",
    "FileStorageDriver",
    "ModelCallInput",
    "StatePart",
    "StreamContext",
    "TemporalAgent",
    "ToolCallInput",
    "ToolfoldJSONPayloadConverter",
    "ToolfoldPayloadConverter",
    "ToolfoldPlugin",
    "data_converter",
    "model_activity_name",
    "tool_activity_name",
}


# toolfold.integrations.ray: batch fan-out on Ray
RAY = {"BatchError", "BatchResult", "run_batch"}

# toolfold.local: the local: provider (llama.cpp's server, built and run for you)
LOCAL = {
    "CACHE_ENV",
    "LLAMA_CPP_PYTHON",
    "LOCAL_PROVIDER",
    "MODELS",
    "SERVER_ENV",
    "LocalModel",
    "LocalServer",
    "LocalSetupError",
    "PackagedModel",
    "built_binary",
    "cache_dir",
    "ensure_model",
    "ensure_server_binary",
    "installed_model",
    "print_progress",
    "running_servers",
    "stop_all",
}


# Functions whose hints name a class their module imports only for type checking
# (an import cycle): get_type_hints fails on them as it did before the rename.
HINTS_NEED_TYPE_CHECKING = {toolfold.runtime.stop_reason, toolfold.runtime.stopping_result}

NAMESPACES = {
    "toolfold": TOP,
    "toolfold.runtime": RUNTIME,
    "toolfold.toolkit": TOOLKIT,
    "toolfold.adapters": ADAPTERS,
    "toolfold.testing": TESTING,
    "toolfold.files": FILES,
    "toolfold.integrations.ray": RAY,
    "toolfold.local": LOCAL,
    "toolfold.integrations.temporal": TEMPORAL,
}


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


@pytest.mark.parametrize("name", sorted(NAMESPACES))
def test_all_is_exactly_the_public_names(name: str) -> None:
    """Each namespace's `__all__` lists exactly the intended public names, sorted, each once."""
    names = list(_module(name).__all__)
    assert names == sorted(set(names))
    assert set(names) == NAMESPACES[name]


@pytest.mark.parametrize("name", sorted(NAMESPACES))
def test_every_public_name_resolves(name: str) -> None:
    """Every name in `__all__` is importable (lazy ones included), and `dir()` shows just those."""
    module = _module(name)
    for public in module.__all__:
        assert getattr(module, public) is not None, public
    assert dir(module) == sorted(module.__all__)


def test_no_stray_typing_names() -> None:
    """`from toolfold import *` brings no `Any` or `TYPE_CHECKING` along."""
    namespace: dict[str, object] = {}
    exec("from toolfold import *", namespace)
    assert {"Any", "TYPE_CHECKING"} & set(namespace) == set()
    assert not hasattr(toolfold, "Any")
    assert not hasattr(toolfold.runtime, "TYPE_CHECKING")


def _home(value: object) -> str:
    """The namespace a user imports ``value`` from: the top level when it is there.

    The top level's lazy names stay at home in toolfold.adapters: they load when
    the adapters do, whichever namespace asks first.
    """
    homes = [
        name
        for name in NAMESPACES
        if any(getattr(_module(name), n, None) is value for n in NAMESPACES[name])
    ]
    lazy = "toolfold.adapters" in homes
    return "toolfold" if "toolfold" in homes and not lazy else homes[-1]


def _public_objects() -> list[tuple[str, str, object]]:
    """Every public class and function, with the namespace that exports it."""
    toolfold.CompiledTool  # noqa: B018  (loads the lazy names)
    seen: dict[int, tuple[str, str, object]] = {}
    for name in NAMESPACES:
        module = _module(name)
        for public in sorted(module.__all__):
            value = getattr(module, public)
            if typing.get_origin(value) is not None:
                continue  # a type alias such as Callable[...] (a `type` on 3.10)
            if isinstance(value, type) or inspect.isfunction(value):
                seen.setdefault(id(value), (name, public, value))
    return list(seen.values())


@pytest.mark.parametrize(
    ("namespace", "public", "value"),
    _public_objects(),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_public_names_show_their_public_module(namespace: str, public: str, value: Any) -> None:
    """A public class or function names the module users import it from (`toolfold.Agent`)."""
    assert value.__module__ == _home(value)
    assert getattr(_module(value.__module__), value.__qualname__) is value


@pytest.mark.parametrize(
    ("namespace", "public", "value"),
    _public_objects(),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_type_hints_still_resolve(namespace: str, public: str, value: Any) -> None:
    """`typing.get_type_hints` works on every public class and function after the rename."""
    if value in HINTS_NEED_TYPE_CHECKING:
        with pytest.raises(NameError):
            typing.get_type_hints(value)
        return
    hints = typing.get_type_hints(value)
    assert all(not isinstance(hint, str) for hint in hints.values())


# Classes whose __init__ hints name a class their module imports only for type
# checking (an import cycle): get_type_hints fails on them, as it did before the
# output type made Response, RunStream and Agent generic.
INIT_HINTS_NEED_TYPE_CHECKING = {
    "CallResumed",
    "CallState",
    "InvalidEventError",
    "InvalidTransitionError",
    "OutputValidationError",
    "MalformedResponseError",  # its usage: a Usage
    "ProviderFinishError",  # its usage: a Usage
    "RunError",
    "RunState",
    "SourceCloseError",
    "ToolExecutionError",
    "ToolRetriesExceededError",
}


@pytest.mark.parametrize(
    ("namespace", "public", "value"),
    [found for found in _public_objects() if isinstance(found[2], type)],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_init_type_hints_resolve(namespace: str, public: str, value: type) -> None:
    """`typing.get_type_hints` resolves every public class's __init__, inherited ones too."""
    if public in INIT_HINTS_NEED_TYPE_CHECKING:
        with pytest.raises(NameError):
            typing.get_type_hints(value.__init__)
        return
    hints = typing.get_type_hints(value.__init__)
    assert all(not isinstance(hint, str) for hint in hints.values())


def test_reprs_and_tracebacks_show_public_paths() -> None:
    """A class repr and a traceback's last line read `toolfold.X`, not a private module."""
    assert repr(toolfold.Agent) == "<class 'toolfold.Agent'>"
    try:
        raise toolfold.UsageError("bad option")
    except toolfold.UsageError:
        last = traceback.format_exc().strip().splitlines()[-1]
    assert last == "toolfold.UsageError: bad option"


def test_public_values_pickle_and_serialize() -> None:
    """Pickle and cattrs find classes under their public module."""
    from toolfold.testing import ScriptedModel

    response = toolfold.generate_text(ScriptedModel(["hi"]), "go")
    state = response.state
    assert pickle.loads(pickle.dumps(state)) == state
    assert toolfold.RunState.from_json(state.to_json()) == state
    message = toolfold.Message.user("hi")
    assert pickle.loads(pickle.dumps(message)) == message
    error = pickle.loads(pickle.dumps(toolfold.UsageError("bad")))
    assert type(error) is toolfold.UsageError


def test_errors_form_one_tree() -> None:
    """Every public exception class (warnings aside) derives from ToolfoldError."""
    for name in toolfold.__all__:
        value = getattr(toolfold, name)
        is_error = isinstance(value, type) and issubclass(value, BaseException)
        if is_error and not issubclass(value, Warning):
            assert issubclass(value, toolfold.ToolfoldError), name


def test_invalid_event_error_is_where_the_docs_say() -> None:
    """docs/state-and-reducers.md's `InvalidEventError` is importable from toolfold.runtime."""
    from toolfold.runtime import InvalidEventError

    assert InvalidEventError is toolfold.InvalidEventError
