"""The shared models of an app, built when imported: one needs DeepSeek's API key.

Imported by `ray_keyed`, as an app's agents module imports its models. Its base
URL comes from ``RAY_KEYED_BASE_URL`` (the tests' fake server); the key from
``DEEPSEEK_API_KEY``, read wherever the module is imported.
"""

from __future__ import annotations

import os

import toolfold

chat = toolfold.model(
    "deepseek:deepseek-chat",
    base_url=os.environ.get("RAY_KEYED_BASE_URL", "http://127.0.0.1:9"),
    retry=0,
)
