"""toolfold: give LLMs tools and compose agents declaratively.

Everything a user imports comes from here. Provider adapters load lazily, the
first time a model string is resolved, so ``import toolfold`` stays cheap.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from toolfold._errors import (
    AgentFileError,
    ArgumentJSONError,
    ArgumentValidationError,
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    InvalidEventError,
    InvalidTransitionError,
    MalformedResponseError,
    ModelConfigError,
    NotFoundError,
    OutputValidationError,
    ProviderConnectionError,
    ProviderError,
    ProviderFinishError,
    ProviderTimeoutError,
    RateLimitError,
    RunError,
    SchemaCompileError,
    SerializationError,
    ServerError,
    SourceCloseError,
    StreamError,
    ToolArgumentError,
    ToolDefinitionError,
    ToolExecutionError,
    ToolfoldError,
    ToolRetriesExceededError,
    ToolUseFailedError,
    Unpicklable,
    UsageError,
    WorkflowDefinitionError,
)
from toolfold._public import publish as _publish
from toolfold.runtime import (
    Agent,
    ConnectedModel,
    Denied,
    ExtraToolsWarning,
    FilePart,
    Handoff,
    ImagePart,
    Loop,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    OutputInvalidEvent,
    Parallel,
    ReasoningPart,
    Response,
    Route,
    RunEndEvent,
    RunState,
    RunStream,
    Sequence,
    Step,
    StepEndEvent,
    StepStartEvent,
    SubRunEvent,
    Task,
    TextDelta,
    TextPart,
    ToolCallEvent,
    ToolCallPart,
    ToolResultEvent,
    ToolResultPart,
    Usage,
    Workflow,
    WorkflowResponse,
    agenerate_text,
    approval_key,
    aresume,
    drop_tool_calls,
    generate_text,
    model,
    resume,
    state_of,
    token_budget,
    tool_called,
)
from toolfold.runtime._model import set_adapter_loader as _set_adapter_loader
from toolfold.toolkit import (
    Field,
    RunContext,
    SchemaContext,
    Tool,
    ToolDefinitionWarning,
    UndocumentedParameterWarning,
    register_schema_rule,
    register_type_hooks,
    schema_for_type,
    tool,
)


def _load_adapters() -> None:
    import toolfold.adapters  # adapters register their providers on import
    import toolfold.local  # noqa: F401  (registers local:, above the adapters)


# Names served from toolfold.adapters on first access, so `import toolfold` stays light.
_LAZY = {
    "CompiledTool": "toolfold.adapters._dialects",
    "Dialect": "toolfold.adapters._dialects",
    "SchemaRewrite": "toolfold.adapters._dialects",
    "check_arguments": "toolfold.adapters._dialects",
    "compile_tool": "toolfold.adapters._dialects",
    "restore_arguments": "toolfold.adapters._dialects",
}

if _TYPE_CHECKING:
    from toolfold.adapters._dialects import (
        CompiledTool,
        Dialect,
        SchemaRewrite,
        check_arguments,
        compile_tool,
        restore_arguments,
    )


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolfold' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


_set_adapter_loader(_load_adapters)

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentFileError",
    "ArgumentJSONError",
    "ArgumentValidationError",
    "AuthenticationError",
    "BadRequestError",
    "CompiledTool",
    "ConnectedModel",
    "ContextWindowExceededError",
    "Denied",
    "Dialect",
    "ExtraToolsWarning",
    "Field",
    "FilePart",
    "Handoff",
    "ImagePart",
    "InvalidEventError",
    "InvalidTransitionError",
    "Loop",
    "MalformedResponseError",
    "Message",
    "Model",
    "ModelConfigError",
    "ModelRequest",
    "ModelResponse",
    "NotFoundError",
    "OutputInvalidEvent",
    "OutputValidationError",
    "Parallel",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderFinishError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ReasoningPart",
    "Response",
    "Route",
    "RunContext",
    "RunEndEvent",
    "RunError",
    "RunState",
    "RunStream",
    "SchemaCompileError",
    "SchemaContext",
    "SchemaRewrite",
    "Sequence",
    "SerializationError",
    "ServerError",
    "SourceCloseError",
    "Step",
    "StepEndEvent",
    "StepStartEvent",
    "StreamError",
    "SubRunEvent",
    "Task",
    "TextDelta",
    "TextPart",
    "Tool",
    "ToolArgumentError",
    "ToolCallEvent",
    "ToolCallPart",
    "ToolDefinitionError",
    "ToolDefinitionWarning",
    "ToolExecutionError",
    "ToolResultEvent",
    "ToolResultPart",
    "ToolRetriesExceededError",
    "ToolUseFailedError",
    "ToolfoldError",
    "UndocumentedParameterWarning",
    "Unpicklable",
    "Usage",
    "UsageError",
    "Workflow",
    "WorkflowDefinitionError",
    "WorkflowResponse",
    "__version__",
    "agenerate_text",
    "approval_key",
    "aresume",
    "check_arguments",
    "compile_tool",
    "drop_tool_calls",
    "generate_text",
    "model",
    "register_schema_rule",
    "register_type_hooks",
    "restore_arguments",
    "resume",
    "schema_for_type",
    "state_of",
    "token_budget",
    "tool",
    "tool_called",
]

_publish(globals(), __all__, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
