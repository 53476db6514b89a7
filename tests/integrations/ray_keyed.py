"""Agents named by import path whose module needs an API key (DeepSeek's) when imported.

``agent`` calls the keyed model of `ray_keyed_models`; ``cities`` answers with a
`City` (a class of this module) from a function model, yet importing the module
still builds that keyed model.
"""

from __future__ import annotations

import dataclasses

from ray_keyed_models import chat

import toolfold
from toolfold import ModelRequest
from toolfold.testing import FunctionModel

agent = toolfold.Agent(chat, name="keyed")


@dataclasses.dataclass
class City:
    """A city, the output of ``cities``."""

    name: str


def _named(request: ModelRequest) -> str:
    return '{"name": "' + request.messages[-1].text.title() + '"}'


cities = toolfold.Agent(FunctionModel(_named), output_type=City, name="cities")
