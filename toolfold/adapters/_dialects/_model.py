"""The values a compilation produces: `SchemaRewrite` and `CompiledTool`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

import attrs

Dialect = Literal[
    "openai-chat",
    "openai-responses",
    "anthropic",
    "gemini",
    "gemini-openapi",
    "ollama",
    "deepseek",
    "json-schema",
]
DIALECTS: tuple[Dialect, ...] = get_args(Dialect)

RewriteAction = Literal[
    "added",  # a keyword the dialect requires was added (additionalProperties: false, type)
    "dropped",  # a keyword was removed from the schema
    "moved_to_description",  # a keyword was removed and written into the description
    "rewritten",  # an equivalent (or looser) form replaced the keyword
    "made_nullable",  # an optional property became required with null allowed
    "made_required",  # an optional, already nullable property became required
    "inlined",  # a $ref was replaced by the schema it points to
    "refused",  # the construct cannot be expressed at all in this dialect and mode
]


@attrs.frozen
class SchemaRewrite:
    """One change a compilation made to a tool's schema.

    Attributes:
        path: JSON pointer into the tool's own schema of the node that changed
            (``""`` is the root, ``"/properties/city"`` a property).
        keyword: The keyword concerned, e.g. ``"minLength"``.
        action: What was done (see `RewriteAction`).
        detail: A sentence for humans: what changed and why.
        lossy: True when the schema sent no longer enforces what the tool's
            schema enforced; a strict compilation refuses lossy rewrites.
    """

    path: str
    keyword: str
    action: RewriteAction
    detail: str
    lossy: bool = False

    def __str__(self) -> str:
        where = self.path or "(root)"
        loss = " [lossy]" if self.lossy else ""
        return f"{where}: {self.keyword} {self.action}{loss}: {self.detail}"


@attrs.frozen(eq=False)
class CompiledTool:
    """A tool in one provider's dialect, and everything that was changed to get there.

    The dicts are shared by every caller of `compile_tool` that hits the cache:
    serialize them, never mutate them.

    Attributes:
        name: The tool name.
        dialect: The dialect compiled for.
        payload: The provider's tool object, ready to go into the request.
        schema_sent: The exact schema inside ``payload`` (JSON Schema; for
            ``"gemini-openapi"`` an OpenAPI 3.0 Schema object); arguments coming
            back are validated against it (`check_arguments`).
        strict: Whether the provider is asked to enforce the schema.
        rewrites: Every change made, in the order the schema was walked.
        source_schema: The tool's own schema (a private copy), used to map
            arguments back (`restore_arguments`).
        strict_blockers: With ``strict=None``, the losses that kept strict
            mode off (empty when strict mode was used or not tried).
    """

    name: str
    dialect: Dialect
    payload: dict[str, Any]
    schema_sent: dict[str, Any]
    strict: bool
    rewrites: tuple[SchemaRewrite, ...]
    source_schema: Mapping[str, Any]
    strict_blockers: tuple[SchemaRewrite, ...] = ()
    _cache: dict[str, Any] = attrs.field(factory=dict, repr=False, alias="_cache")

    @property
    def losses(self) -> tuple[SchemaRewrite, ...]:
        """The rewrites that weaken what the provider enforces."""
        return tuple(r for r in self.rewrites if r.lossy)

    @property
    def restores_nulls(self) -> bool:
        """True when optional properties were sent as required-and-nullable."""
        return any(r.action == "made_nullable" for r in self.rewrites)
