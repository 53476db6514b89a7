"""Models for tests and examples: no network, no API keys, deterministic.

- `ScriptedModel`: answers from a script, one entry per request.
- `FunctionModel`: answers from a function of the request.
- `TestModel`: calls each tool once with schema-valid arguments, then
  summarises the results.
"""

from toolfold.runtime._sample import sample_value
from toolfold.runtime._testing import (
    FunctionModel,
    Reply,
    ScriptedModel,
    TestModel,
    response_events,
)

__all__ = [
    "FunctionModel",
    "Reply",
    "ScriptedModel",
    "TestModel",
    "response_events",
    "sample_value",
]
