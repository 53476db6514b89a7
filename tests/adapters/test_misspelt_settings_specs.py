"""No request field of the providers' specs is refused as a misspelt parameter of `Agent`
or `generate_text` (``instruction=`` for ``instructions=`` is: sent as a model setting, it
reached the provider while the run went without it)."""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cassettes import SPECS

from toolfold import Agent, UsageError, generate_text
from toolfold.runtime._agent import _agent_parameters
from toolfold.runtime._api import _function_parameters
from toolfold.runtime._misplaced import _MISSPELT, _OTHER_NAMES, _PROVIDER_FIELDS, _misspelt
from toolfold.runtime._model import _OPTION_ALIASES, OTHER_CLIENTS_OPTIONS
from toolfold.testing import TestModel


def _load(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _resolved(document: Any, node: Any) -> Any:
    seen: set[str] = set()
    while isinstance(node, dict) and "$ref" in node and node["$ref"] not in seen:
        seen.add(node["$ref"])
        target = document
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def _properties(document: Any, node: Any, seen: frozenset[str] = frozenset()) -> Iterator[str]:
    """The property names of a schema, through $ref, allOf, anyOf and oneOf."""
    ref = node.get("$ref") if isinstance(node, dict) else None
    if ref in seen:
        return
    node = _resolved(document, node)
    if not isinstance(node, dict):
        return
    yield from node.get("properties", {})
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(key, []):
            yield from _properties(document, sub, seen | ({ref} if ref else set()))


@functools.cache
def _request_fields() -> frozenset[str]:
    """Every top-level field of every request body in the specs, and Gemini's generation
    config's (given as settings too)."""
    fields: set[str] = set()
    for path in sorted(SPECS.iterdir()):
        document = _load(path)
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                if not isinstance(operation, dict):
                    continue
                body = _resolved(document, operation.get("requestBody", {}))
                for media in (body.get("content") or {}).values():
                    fields.update(_properties(document, media.get("schema", {})))
        schemas = document.get("components", {}).get("schemas", {})
        if "GenerationConfig" in schemas:
            fields.update(_properties(document, schemas["GenerationConfig"]))
    return frozenset(fields)


def test_no_provider_request_field_is_taken_for_a_misspelling() -> None:
    """No request field of OpenAI's, Anthropic's, Gemini's or Mistral's spec is refused as a
    misspelt parameter (``stop``, ``max_tokens``, ``top_p``, ``seed``, ``metadata``...)."""
    fields = _request_fields()
    assert {"max_tokens", "stop", "seed", "metadata", "reasoning_effort", "maxOutputTokens"} <= (
        fields
    )
    for own in (_agent_parameters(), _function_parameters()):
        caught = {f: _misspelt(f, own) for f in sorted(fields) if f not in own}
        assert {f: c for f, c in caught.items() if c is not None} == {}


def test_the_fields_let_through_are_real_and_close() -> None:
    """Each field let through by name is in a spec and would be caught otherwise."""
    for field in _PROVIDER_FIELDS:
        assert field in _request_fields()
        assert difflib.get_close_matches(field, _agent_parameters(), n=1, cutoff=_MISSPELT)


@pytest.mark.parametrize(
    "typo", ["instruction", "max_step", "on_tool_errors", "tool_choise", "output_types"]
)
def test_the_misspellings_caught_are_no_request_field(typo: str) -> None:
    """The typos the check is for are no provider's field, and Agent refuses them."""
    assert typo not in _request_fields()
    with pytest.raises(UsageError, match="did you mean"):
        Agent(TestModel(), **{typo: 1})


@pytest.mark.parametrize("name", [*_OTHER_NAMES, "settings"])
def test_other_libraries_names_are_no_request_field(name: str) -> None:
    """Other libraries' parameter names refused with toolfold's (``system_prompt=``,
    ``result_type=``, ``max_turns=``...) and generate_text's ``settings=`` are no request
    field of the providers' specs here, so the keyword is refused. (A server may still
    read one, such as llama.cpp's legacy ``system_prompt`` before its PR #9857:
    ``settings={...}`` sends it.)"""
    assert name not in _request_fields()
    with pytest.raises(UsageError, match=f"got {name}=: did you mean "):
        generate_text(TestModel(), "x", **{name: {}})


def test_other_clients_options_refused_are_no_request_field() -> None:
    """The other libraries' option names refused as bare keywords (``extra_headers=``,
    ``max_retries=``, ``organization=``, ``api_version=``...) are no request field of the
    providers' specs; ``endpoint`` (OpenAI's batch requests') is one, and is not refused."""
    fields = _request_fields()
    assert OTHER_CLIENTS_OPTIONS.isdisjoint(fields)
    assert "endpoint" in _OPTION_ALIASES
    assert "endpoint" in fields
    assert "endpoint" not in OTHER_CLIENTS_OPTIONS
    Agent(TestModel(), endpoint="/v1/chat/completions")
