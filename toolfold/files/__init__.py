"""Agent files: agents declared in TOML or YAML, loaded into the very same `Agent` specs.

```toml
entry = "triage"

[agents.triage]
model = "openai:gpt-4o-mini"
instructions = "Send each question to the right agent."
handoffs = ["billing"]

[agents.billing]
model = "openai:gpt-4o-mini"
tools = ["shop.tools:refund"]
```

``load(path)`` gives an `AgentFile` (its agents by name); ``agent.to_dict()``
writes an agent and everything it refers to back as such a document. Every
problem of a file is reported at once in an `AgentFileError`.
"""

from toolfold._public import publish as _publish
from toolfold.files._load import AgentFile, from_dict, load, loads

__all__ = ["AgentFile", "from_dict", "load", "loads"]

_publish(globals(), __all__, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
