"""Durable agents on Temporal (``pip install 'toolfold[temporal]'``).

`TemporalAgent` runs an `Agent` as a Temporal workflow: the workflow drives
the pure core (`reduce` / `next_effect`), each model request and tool call is
an activity with a stable name, and a run survives worker and server crashes.
See docs/durable.md.
"""

from toolfold._public import publish as _publish
from toolfold.integrations.temporal._activities import (
    EventStreamHandler,
    ModelCallInput,
    StreamContext,
    ToolCallInput,
    model_activity_name,
    tool_activity_name,
)
from toolfold.integrations.temporal._agent import AgentHandle, TemporalAgent, ToolfoldPlugin
from toolfold.integrations.temporal._converter import (
    ToolfoldJSONPayloadConverter,
    ToolfoldPayloadConverter,
    data_converter,
)
from toolfold.integrations.temporal._storage import FileStorageDriver
from toolfold.integrations.temporal._workflow import (
    WORKFLOW_NAME,
    ActivitySettings,
    AgentInput,
    AgentWorkflow,
    Answers,
    CarriedCall,
    StatePart,
)

__all__ = [
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
    "WORKFLOW_NAME",
    "data_converter",
    "model_activity_name",
    "tool_activity_name",
]

_publish(globals(), __all__, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
