"""Models for tests and examples: no network, no API keys, deterministic.

- `ScriptedModel`: answers from a script, one entry per request.
- `FunctionModel`: answers from a function of the request.
- `TestModel`: calls each tool once with schema-valid arguments, then
  summarises the results.
- `override_models`: makes ``"provider:model"`` strings resolve to one of
  these while a block runs, so code written for a real provider runs offline.
"""

from toolfold._public import publish as _publish
from toolfold.runtime._sample import sample_value
from toolfold.runtime._testing import (
    FunctionModel,
    Reply,
    ScriptedModel,
    TestModel,
    override_models,
    response_events,
)

__all__ = [
    "FunctionModel",
    "Reply",
    "ScriptedModel",
    "TestModel",
    "override_models",
    "response_events",
    "sample_value",
]

_publish(globals(), __all__, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
