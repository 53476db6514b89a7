"""runtime: messages, state, events, pure reducers, drivers and agents."""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from toolfold._errors import InvalidEventError, InvalidTransitionError, RunError
from toolfold._public import publish as _publish
from toolfold.runtime._agent import Agent, Handoff
from toolfold.runtime._api import (
    Denied,
    RunStream,
    agenerate_text,
    aresume,
    generate_text,
    resume,
    state_of,
)
from toolfold.runtime._kinds import Loop, Parallel, Route, Sequence
from toolfold.runtime._model import (
    ConnectedModel,
    Model,
    Prepared,
    RequestReport,
    model,
    register_provider,
)
from toolfold.runtime._response import (
    OutputInvalidEvent,
    Response,
    RunEndEvent,
    RunStreamEvent,
    Step,
    StepEndEvent,
    StepStartEvent,
    SubRunEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from toolfold.runtime._resume import ExtraToolsWarning, approval_key
from toolfold.runtime._task import Task
from toolfold.runtime._workflow import Workflow, WorkflowResponse, WorkflowStream
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
    AttemptDropped,
    CallResumed,
    Event,
    HandedOff,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    RunFailed,
    RunStarted,
    StepLimitChanged,
    StopRequested,
    ToolResultsProvided,
    ToolReturned,
    ToolSuspended,
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
    drop_tool_calls,
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
    stopping_result,
    token_budget,
    tool_called,
)
from toolfold.runtime.core._stream import (
    MediaOutput,
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
    "ApprovalDenied",
    "ApprovalGranted",
    "AttemptDropped",
    "AwaitApproval",
    "AwaitToolResults",
    "CallModel",
    "CallResumed",
    "CallState",
    "ConnectedModel",
    "Denied",
    "Effect",
    "Event",
    "ExtraToolsWarning",
    "FilePart",
    "Finish",
    "FrozenDict",
    "FrozenList",
    "HandedOff",
    "Handoff",
    "ImagePart",
    "InvalidEventError",
    "InvalidTransitionError",
    "Log",
    "Loop",
    "MaxSteps",
    "MediaOutput",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponded",
    "ModelResponse",
    "OutputAccepted",
    "OutputInvalidEvent",
    "OutputRejected",
    "OutputSpec",
    "Parallel",
    "Part",
    "Prepared",
    "ReasoningDelta",
    "ReasoningPart",
    "RequestReport",
    "Response",
    "ResponseInfo",
    "Route",
    "RunConfig",
    "RunEndEvent",
    "RunError",
    "RunFailed",
    "RunFailure",
    "RunStarted",
    "RunState",
    "RunStream",
    "RunStreamEvent",
    "RunTools",
    "Sequence",
    "Step",
    "StepEndEvent",
    "StepLimitChanged",
    "StepStartEvent",
    "StopCondition",
    "StopRequested",
    "StreamEvent",
    "StreamFinish",
    "StreamState",
    "SubRunEvent",
    "TRANSITIONS",
    "Task",
    "TextDelta",
    "TextPart",
    "TokenBudget",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallEvent",
    "ToolCallPart",
    "ToolCallStart",
    "ToolCalled",
    "ToolDefinition",
    "ToolInvocation",
    "ToolResultEvent",
    "ToolResultPart",
    "ToolResultsProvided",
    "ToolReturned",
    "ToolSpec",
    "ToolSuspended",
    "Usage",
    "UsageUpdate",
    "UserMessageAdded",
    "ValidateOutput",
    "Workflow",
    "WorkflowResponse",
    "WorkflowStream",
    "agenerate_text",
    "approval_key",
    "aresume",
    "build_request",
    "converter",
    "drop_tool_calls",
    "events_from_json",
    "events_to_json",
    "finish_stream",
    "fold_stream",
    "fork",
    "from_json",
    "generate_text",
    "initial_state",
    "max_steps",
    "model",
    "next_effect",
    "reduce",
    "register_provider",
    "replay",
    "resume",
    "state_of",
    "stop_reason",
    "stopping_result",
    "to_json",
    "token_budget",
    "tool_called",
    "transition_diagram",
    "transition_table",
]

if _TYPE_CHECKING:
    from toolfold.runtime.core._serialize import (
        converter,
        events_from_json,
        events_to_json,
        from_json,
        to_json,
    )

_SERIALIZE = frozenset({"converter", "events_from_json", "events_to_json", "from_json", "to_json"})


def __getattr__(name: str) -> _Any:
    # cattrs loads on first use of the converter, so `import toolfold` stays cheap.
    if name in _SERIALIZE:
        from toolfold.runtime.core import _serialize

        _publish(vars(_serialize), _SERIALIZE, __name__)
        return getattr(_serialize, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_publish(globals(), __all__, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
