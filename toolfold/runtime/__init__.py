"""runtime: messages, state, events, pure reducers, drivers and agents."""

from typing import TYPE_CHECKING, Any

from toolfold.runtime._agent import Agent
from toolfold.runtime._api import (
    Denied,
    RunStream,
    agenerate_text,
    aresume,
    generate_text,
    resume,
)
from toolfold.runtime._model import Model, model, register_provider
from toolfold.runtime._response import (
    Response,
    RunEndEvent,
    RunStreamEvent,
    Step,
    StepEndEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from toolfold.runtime.core._config import RunConfig, ToolSpec
from toolfold.runtime.core._effects import (
    AwaitApproval,
    AwaitToolResults,
    CallModel,
    Effect,
    Finish,
    RunTools,
    ToolInvocation,
    ValidateOutput,
)
from toolfold.runtime.core._events import (
    ApprovalDenied,
    ApprovalGranted,
    Event,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    RunFailed,
    RunStarted,
    StepLimitChanged,
    StopRequested,
    ToolResultsProvided,
    ToolReturned,
    UserMessageAdded,
)
from toolfold.runtime.core._log import Log
from toolfold.runtime.core._messages import (
    FilePart,
    FrozenDict,
    FrozenList,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from toolfold.runtime.core._next import build_request, next_effect
from toolfold.runtime.core._reducer import (
    TRANSITIONS,
    initial_state,
    reduce,
    transition_diagram,
    transition_table,
)
from toolfold.runtime.core._replay import fork, replay
from toolfold.runtime.core._request import ModelRequest, ModelResponse, OutputSpec, ToolDefinition
from toolfold.runtime.core._state import CallState, RunFailure, RunState
from toolfold.runtime.core._stop import (
    MaxSteps,
    StopCondition,
    TokenBudget,
    ToolCalled,
    max_steps,
    stop_reason,
    token_budget,
    tool_called,
)
from toolfold.runtime.core._stream import (
    ReasoningDelta,
    ResponseInfo,
    StreamEvent,
    StreamFinish,
    StreamState,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageUpdate,
    finish_stream,
    fold_stream,
)

__all__ = [
    "Agent",
    "Denied",
    "Response",
    "RunEndEvent",
    "RunStream",
    "RunStreamEvent",
    "Step",
    "StepEndEvent",
    "StepStartEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "agenerate_text",
    "aresume",
    "generate_text",
    "resume",
    "RunConfig",
    "ToolSpec",
    "AwaitApproval",
    "AwaitToolResults",
    "CallModel",
    "Effect",
    "Finish",
    "RunTools",
    "ToolInvocation",
    "ValidateOutput",
    "ApprovalDenied",
    "ApprovalGranted",
    "Event",
    "ModelResponded",
    "OutputAccepted",
    "OutputRejected",
    "RunFailed",
    "RunStarted",
    "StepLimitChanged",
    "StopRequested",
    "ToolResultsProvided",
    "ToolReturned",
    "UserMessageAdded",
    "Log",
    "build_request",
    "next_effect",
    "TRANSITIONS",
    "initial_state",
    "reduce",
    "transition_table",
    "transition_diagram",
    "converter",
    "events_from_json",
    "events_to_json",
    "fork",
    "from_json",
    "replay",
    "to_json",
    "CallState",
    "RunFailure",
    "RunState",
    "MaxSteps",
    "StopCondition",
    "TokenBudget",
    "ToolCalled",
    "max_steps",
    "stop_reason",
    "token_budget",
    "tool_called",
    "FilePart",
    "FrozenDict",
    "FrozenList",
    "ImagePart",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OutputSpec",
    "Part",
    "ReasoningDelta",
    "ReasoningPart",
    "ResponseInfo",
    "StreamEvent",
    "StreamFinish",
    "StreamState",
    "TextDelta",
    "TextPart",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallPart",
    "ToolCallStart",
    "ToolDefinition",
    "ToolResultPart",
    "Usage",
    "UsageUpdate",
    "finish_stream",
    "fold_stream",
    "model",
    "register_provider",
]

if TYPE_CHECKING:
    from toolfold.runtime.core._serialize import (
        converter,
        events_from_json,
        events_to_json,
        from_json,
        to_json,
    )

_SERIALIZE = frozenset({"converter", "events_from_json", "events_to_json", "from_json", "to_json"})


def __getattr__(name: str) -> Any:
    # cattrs loads on first use of the converter, so `import toolfold` stays cheap.
    if name in _SERIALIZE:
        from toolfold.runtime.core import _serialize

        return getattr(_serialize, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
