"""An agent whose model needs an API key (DeepSeek's), for a batch that names it by import path.

Its base URL comes from ``RAY_KEYED_BASE_URL`` (the tests' fake server); the
key from ``DEEPSEEK_API_KEY``, read wherever the module is imported.
"""

from __future__ import annotations

import os

import toolfold

agent = toolfold.Agent(
    toolfold.model(
        "deepseek:deepseek-chat",
        base_url=os.environ.get("RAY_KEYED_BASE_URL", "http://127.0.0.1:9"),
        retry=0,
    ),
    name="keyed",
)
