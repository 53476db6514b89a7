"""The official OpenAI OpenAPI document as JSON Schema validators (loaded once per session).

The document is OpenAPI 3.1 but still marks some fields ``nullable: true``
(3.0 style), which JSON Schema ignores; those become unions with null so that
a ``null`` the API accepts validates.
"""

from __future__ import annotations

import functools
from typing import Any

import jsonschema
import yaml
from cassettes import SPECS
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

_URI = "urn:openai-openapi"


def _nullable(node: Any) -> Any:
    if isinstance(node, dict):
        node = {k: _nullable(v) for k, v in node.items()}
        if node.pop("nullable", False) is True:
            kind = node.get("type")
            if isinstance(kind, str):
                node["type"] = [kind, "null"]
            elif isinstance(kind, list):
                node["type"] = [*kind, "null"] if "null" not in kind else kind
            else:
                node = {"anyOf": [node, {"type": "null"}]}
        return node
    if isinstance(node, list):
        return [_nullable(v) for v in node]
    return node


@functools.cache
def _registry() -> Registry:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    document = yaml.load((SPECS / "openai-openapi.yaml").read_text(encoding="utf-8"), Loader=loader)
    resource = Resource(contents=_nullable(document), specification=DRAFT202012)
    return Registry().with_resource(_URI, resource)


@functools.cache
def validator(schema_name: str) -> jsonschema.protocols.Validator:
    """A validator for ``#/components/schemas/<schema_name>``."""
    schema = {"$ref": f"{_URI}#/components/schemas/{schema_name}"}
    return jsonschema.Draft202012Validator(schema, registry=_registry())


def problems(schema_name: str, instance: Any) -> list[str]:
    """Every validation error, with its path, or [] when the instance is valid."""
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:300]}"
        for e in validator(schema_name).iter_errors(instance)
    ]


@functools.cache
def mistral_validator() -> jsonschema.protocols.Validator:
    """A validator for Mistral's ``ChatCompletionRequest`` (its published OpenAPI document)."""
    import json

    document = json.loads((SPECS / "mistral-openapi.json").read_text(encoding="utf-8"))
    uri = "urn:mistral-openapi"
    resource = Resource(contents=_nullable(document), specification=DRAFT202012)
    registry: Registry = Registry().with_resource(uri, resource)
    schema = {"$ref": f"{uri}#/components/schemas/ChatCompletionRequest"}
    return jsonschema.Draft202012Validator(schema, registry=registry)


def mistral_problems(instance: Any) -> list[str]:
    """Every error of ``instance`` against Mistral's ChatCompletionRequest."""
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:300]}"
        for e in mistral_validator().iter_errors(instance)
    ]
