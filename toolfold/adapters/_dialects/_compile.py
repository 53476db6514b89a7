"""`compile_tool`: a tool's neutral JSON Schema -> one provider's tool object.

It runs on every request, so results are memoized: first by the identity of the
tool's ``parameters`` (checked against a private copy of the schema it was
compiled from, types included, `same_json`, so a dict mutated in place is
recompiled; a `FrozenDict`, a `ToolDefinition`'s, cannot change and is not
checked), then by its JSON text.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

import attrs

from toolfold._errors import RENAME_PARAMETER, TOOL_NAME_PROBLEM, SchemaCompileError
from toolfold.adapters._dialects._limits import check_limits
from toolfold.adapters._dialects._model import DIALECTS, CompiledTool, Dialect, SchemaRewrite
from toolfold.adapters._dialects._names import NAME_RULES, forget_sent_names
from toolfold.adapters._dialects._profiles import (
    ANTHROPIC_STRICT,
    DEEPSEEK_STRICT,
    GEMINI,
    GEMINI_OPENAPI,
    GEMINI_OPENAPI_LOOSE,
    OLLAMA,
    OPENAI_STRICT,
    Profile,
)
from toolfold.adapters._dialects._refs import anchors_as_pointers, def_name
from toolfold.adapters._dialects._walk import UNRESOLVED, Walker
from toolfold.runtime.core._messages import FrozenDict
from toolfold.runtime.core._same_json import TypedLeaves, same_json, typed_leaves
from toolfold.toolkit._jsonschema import escape, resolve_local


class ToolLike(Protocol):
    """What `compile_tool` reads from a tool (`ToolDefinition` and `Tool` both fit)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> Mapping[str, Any]: ...
    @property
    def strict(self) -> bool | None: ...


Builder = Callable[[str, str, dict[str, Any], bool], dict[str, Any]]


def _openai_chat(
    name: str, description: str, schema: dict[str, Any], strict: bool
) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if description:
        function["description"] = description
    function["parameters"] = schema
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _openai_responses(
    name: str, description: str, schema: dict[str, Any], strict: bool
) -> dict[str, Any]:
    # [O5, O12] strict defaults to true on the API: always send it.
    tool: dict[str, Any] = {"type": "function", "name": name}
    if description:
        tool["description"] = description
    tool["parameters"] = schema
    tool["strict"] = strict
    return tool


def _anthropic(name: str, description: str, schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": name}
    if description:
        tool["description"] = description
    tool["input_schema"] = schema
    if strict:
        tool["strict"] = True
    return tool


def _gemini(name: str, description: str, schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    # FunctionDeclaration requires a description; strict is request-wide (VALIDATED mode).
    return {"name": name, "description": description, "parametersJsonSchema": schema}


def _gemini_openapi(
    name: str, description: str, schema: dict[str, Any], strict: bool
) -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": schema}


def _ollama(name: str, description: str, schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


def _plain(name: str, description: str, schema: dict[str, Any], strict: bool) -> dict[str, Any]:
    return {"name": name, "description": description, "parameters": schema}


@attrs.frozen
class _Spec:
    strict: Profile | None  # None: the dialect has no strict mode
    loose: Profile | None  # None: the schema passes through unchanged
    build: Builder
    limits: bool = False
    # The rule for the keys of the root's ``properties`` (None: any key).
    key_rule: tuple[re.Pattern[str], str] | None = None


_SPECS: dict[str, _Spec] = {
    "openai-chat": _Spec(OPENAI_STRICT, None, _openai_chat, limits=True),
    "openai-responses": _Spec(OPENAI_STRICT, None, _openai_responses, limits=True),
    "deepseek": _Spec(DEEPSEEK_STRICT, None, _openai_chat, limits=True),
    "anthropic": _Spec(
        ANTHROPIC_STRICT,
        None,
        _anthropic,
        # Not in its OpenAPI document, but answered with a 400 ("Property keys should
        # match pattern '^[a-zA-Z0-9_.-]{1,64}$'"): `def f(città: str)` cannot be sent.
        key_rule=(re.compile(r"[a-zA-Z0-9_.-]{1,64}"), "1-64 characters of a-z A-Z 0-9 _ . -"),
    ),
    # Gemini has no per-tool strict flag: "strict" means the schema went through
    # without loss, so the adapter may ask for VALIDATED function calling.
    "gemini": _Spec(GEMINI, GEMINI, _gemini),
    "gemini-openapi": _Spec(GEMINI_OPENAPI, GEMINI_OPENAPI_LOOSE, _gemini_openapi),
    "ollama": _Spec(None, OLLAMA, _ollama),
    "json-schema": _Spec(None, None, _plain),
}

_UNSET: Any = object()
_MAX_ENTRIES = 4096
# A FrozenDict's compilations by its identity, the FrozenDict referenced weakly: a tool
# made per request (a closure over the request) is dropped with its schema, not kept
# until the memo fills (it kept 4,096 of them, each pinning the allocator's memory
# around it). An entry whose FrozenDict died keeps only its compilation until it is
# replaced or the memo is cleared.
_by_frozen: dict[tuple[Any, ...], tuple[weakref.ref[FrozenDict], CompiledTool]] = {}
# Any other mapping (a plain dict cannot be referenced weakly): held, and bounded.
_by_identity: dict[tuple[Any, ...], tuple[Any, TypedLeaves, CompiledTool]] = {}
_by_content: dict[tuple[Any, ...], CompiledTool] = {}


def compile_tool(
    tool: ToolLike,
    dialect: Dialect,
    *,
    strict: bool | None = _UNSET,
    allow_loss: bool = False,
) -> CompiledTool:
    """Compile a tool's JSON Schema into one provider's dialect.

    Args:
        tool: A `ToolDefinition`, a `Tool`, or anything with ``name``,
            ``description``, ``parameters`` and ``strict``.
        dialect: ``"openai-chat"``, ``"openai-responses"``, ``"anthropic"``,
            ``"gemini"`` (``parametersJsonSchema``), ``"gemini-openapi"``
            (the OpenAPI ``parameters`` form), ``"ollama"``, ``"deepseek"`` or
            ``"json-schema"``.
        strict: True to demand the provider's strict mode and fail on any loss,
            False for the loss-free non-strict form, None for strict whenever
            the schema allows it. Defaults to the tool's own ``strict``.
        allow_loss: With ``strict=True``, send the strict schema anyway with
            the keywords it cannot carry written into descriptions (each one
            recorded as a lossy rewrite) instead of raising.

    Returns:
        The provider payload, the exact schema sent, the mode used and every
        rewrite made.

    Raises:
        SchemaCompileError: The tool cannot be sent as asked: a lossy rewrite
            under ``strict=True``, a dialect without strict mode asked for it,
            a root that is not an object, or a name the provider refuses.
    """
    if strict is _UNSET:
        strict = getattr(tool, "strict", None)
    return compile_schema(tool, dialect, strict, allow_loss, for_output=False)


def compile_schema(
    tool: ToolLike, dialect: Dialect, strict: bool | None, allow_loss: bool, *, for_output: bool
) -> CompiledTool:
    """`compile_tool`, its notes naming the dialect's structured output with ``for_output``
    ("Anthropic structured output", not "Anthropic strict tool use")."""
    name, params = tool.name, tool.parameters
    description = getattr(tool, "description", None) or ""
    key = (id(params), name, description, dialect, strict, allow_loss, for_output)
    if type(params) is FrozenDict:
        # (read-only all the way down: one seen is unchanged)
        frozen = _by_frozen.get(key)
        if frozen is not None and frozen[0]() is params:
            return frozen[1]
        compiled = _by_text(params, name, description, dialect, strict, allow_loss, for_output)
        if len(_by_frozen) >= _MAX_ENTRIES:
            _by_frozen.clear()
        _by_frozen[key] = (weakref.ref(cast("FrozenDict", params)), compiled)
        return compiled
    hit = _by_identity.get(key)
    if hit is not None and hit[0] is params and same_json(params, hit[2].source_schema, hit[1]):
        return hit[2]
    compiled = _by_text(params, name, description, dialect, strict, allow_loss, for_output)
    if len(_by_identity) >= _MAX_ENTRIES:
        _by_identity.clear()
    _by_identity[key] = (params, typed_leaves(compiled.source_schema), compiled)
    return compiled


def _by_text(
    params: Mapping[str, Any],
    name: str,
    description: str,
    dialect: Dialect,
    strict: bool | None,
    allow_loss: bool,
    for_output: bool,
) -> CompiledTool:
    try:
        text = _json_text(params)
    except (TypeError, ValueError) as exc:
        raise SchemaCompileError(
            name, str(dialect), [f"the parameters are not JSON: {exc}"]
        ) from exc
    content_key = (text, name, description, dialect, strict, allow_loss, for_output)
    compiled = _by_content.get(content_key)
    if compiled is None:
        source = json.loads(text)
        compiled = _compile(source, name, description, dialect, strict, allow_loss, for_output)
        if len(_by_content) >= _MAX_ENTRIES:
            _by_content.clear()
        _by_content[content_key] = compiled
    return compiled


def _json_text(schema: Any) -> str:
    return json.dumps(schema, separators=(",", ":"), allow_nan=False, default=_plain_mapping)


def _plain_mapping(value: Any) -> Any:
    # ToolDefinition.parameters is any Mapping (a MappingProxyType, a frozen dict...)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON: {value!r}")


def clear_cache() -> None:
    """Forget every memoized compilation and history name as sent (for benchmarks and tests)."""
    _by_frozen.clear()
    _by_identity.clear()
    _by_content.clear()
    forget_sent_names()


def _compile(
    source: dict[str, Any],
    name: str,
    description: str,
    dialect: Dialect,
    strict: bool | None,
    allow_loss: bool,
    for_output: bool = False,
) -> CompiledTool:
    spec = _SPECS.get(dialect)
    if spec is None:
        raise SchemaCompileError(
            name, str(dialect), [f"unknown dialect; expected one of {', '.join(DIALECTS)}"]
        )
    if for_output:
        spec = _output_spec(spec)
    # (the walk reads references to $anchors and through the root's $id as pointers;
    # the tool keeps its own schema)
    walked_source, anchored = anchors_as_pointers(source)
    walk_root, base, root_def, pre = _prepare(walked_source)
    pre[:0] = [
        SchemaRewrite(
            where,
            "$ref",
            "rewritten",
            f"{ref} names the $anchor at {pointer}"
            if ref.startswith("#")
            else f"{ref} is the tool's own schema (its $id) at {pointer}",
        )
        for where, ref, pointer in anchored
    ]
    problems = _request_problems(spec, name, dialect, strict, walk_root)
    if problems:
        raise SchemaCompileError(name, dialect, problems)

    used_strict = walked = False
    schema: dict[str, Any] = {}
    rewrites: list[SchemaRewrite] = []
    root_notes: list[str] = []
    blockers: list[SchemaRewrite] = []
    if spec.strict is not None and strict is not False:
        schema, rewrites, root_notes = _walk(spec.strict, walked_source, walk_root, base, root_def)
        walked = True
        if spec.limits:
            rewrites += check_limits(schema, spec.strict.label)
        blockers = _strict_blockers(rewrites, name, dialect, strict, allow_loss)
        used_strict = not blockers
    if not used_strict and not (walked and spec.loose is spec.strict):
        if spec.loose is None:
            # the tool's own schema as written: its $anchor references are not rewritten
            walk_root, _, root_def, pre = _prepare(source)
            schema, rewrites, root_notes = _passthrough(source, walk_root, root_def), [], []
        else:
            schema, rewrites, root_notes = _walk(
                spec.loose, walked_source, walk_root, base, root_def
            )
    final = spec.strict if used_strict else spec.loose
    if final is not None:  # (a schema passed through is the tool's own, sent as written)
        _raise_fatal(rewrites, final, name, dialect)
    return CompiledTool(
        name=name,
        dialect=dialect,
        payload=spec.build(name, _described(description, root_notes), schema, used_strict),
        schema_sent=schema,
        strict=used_strict,
        rewrites=(*pre, *rewrites),
        source_schema=source,
        strict_blockers=tuple(blockers),
    )


def _raise_fatal(
    rewrites: list[SchemaRewrite], final: Profile, name: str, dialect: Dialect
) -> None:
    """Refuse, whatever the mode, a compiled schema the provider could not use: a ``$ref``
    to nothing (sent, it would point nowhere once definitions are inlined or dropped),
    recursion where the profile refuses it, an undeclared required name in Gemini's
    OpenAPI form (a 400)."""
    fatal = [
        str(r)
        for r in rewrites
        if r.action == "refused"
        and (
            (r.keyword == "$ref" and (final.refuse_recursion or r.detail.startswith(UNRESOLVED)))
            or (r.keyword == "required" and final.openapi)
        )
    ]
    if fatal:
        raise SchemaCompileError(name, dialect, fatal)


# How problems name a dialect's structured output (its tools' labels otherwise).
_OUTPUT_LABELS = {
    "OpenAI strict mode": "OpenAI strict structured output",
    "DeepSeek strict mode": "DeepSeek strict structured output",
    "Anthropic strict tool use": "Anthropic structured output",
    "Gemini parametersJsonSchema": "Gemini responseJsonSchema",
    "Gemini parameters (OpenAPI Schema)": "Gemini responseSchema (OpenAPI Schema)",
}


def _output_spec(spec: _Spec) -> _Spec:
    """``spec`` with profiles labelled for structured output (loose kept as strict's twin)."""

    def relabel(profile: Profile | None) -> Profile | None:
        if profile is None or profile.label not in _OUTPUT_LABELS:
            return profile
        return attrs.evolve(profile, label=_OUTPUT_LABELS[profile.label])

    strict = relabel(spec.strict)
    loose = strict if spec.loose is spec.strict else relabel(spec.loose)
    # (the key rule is for a tool's input_schema: structured output is sent elsewhere)
    return attrs.evolve(spec, strict=strict, loose=loose, key_rule=None)


def _request_problems(
    spec: _Spec, name: str, dialect: Dialect, strict: bool | None, walk_root: Mapping[str, Any]
) -> list[str]:
    """What makes the request itself impossible: the name, strictness, a non-object root."""
    problems: list[str] = []
    name_rule = NAME_RULES.get(dialect)  # (the rule history names are sent by too)
    if name_rule is not None and not name_rule.pattern.fullmatch(name):
        problems.append(f"{TOOL_NAME_PROBLEM} {name_rule.words}")
    properties = walk_root.get("properties")
    if spec.key_rule is not None and isinstance(properties, Mapping):
        rule, words = spec.key_rule
        problems.extend(
            f"parameter {key!r}: a parameter name must be {words} {RENAME_PARAMETER}"
            for key in properties
            if not rule.fullmatch(key)
        )
    if strict is True and spec.strict is None:
        problems.append(f"{dialect} has no strict mode; pass strict=None or strict=False")
    if dialect != "json-schema" and walk_root.get("type") != "object":
        problems.append(f"(root): the parameters must be an object schema, got {_kind(walk_root)}")
    return problems


def _strict_blockers(
    rewrites: list[SchemaRewrite],
    name: str,
    dialect: Dialect,
    strict: bool | None,
    allow_loss: bool,
) -> list[SchemaRewrite]:
    """The losses that keep the strict schema from being sent (empty: send it).

    Raises:
        SchemaCompileError: ``strict=True`` and the strict schema would lose
            meaning (with ``allow_loss``: only what it refuses outright counts).
    """
    losses = [r for r in rewrites if r.lossy]
    refused = [r for r in losses if r.action == "refused"]
    if not losses or (strict is True and allow_loss and not refused):
        return []
    if strict is True:
        raise SchemaCompileError(
            name, dialect, [str(r) for r in (refused if allow_loss else losses)]
        )
    return losses


def _kind(schema: Mapping[str, Any]) -> str:
    keys = [k for k in ("type", "anyOf", "oneOf", "allOf", "enum", "$ref") if k in schema]
    return ", ".join(f"{k}={schema[k]!r}" for k in keys) or "a schema without a type"


def _prepare(
    source: dict[str, Any],
) -> tuple[dict[str, Any], str, str | None, list[SchemaRewrite]]:
    """The root to walk: a root ``$ref`` is replaced by its definition, a bare root typed."""
    walk_root, base, root_def = source, "", None
    pre: list[SchemaRewrite] = []
    ref = source.get("$ref")
    if isinstance(ref, str) and def_name(ref) is not None:
        target = resolve_local(source, ref)
        if isinstance(target, Mapping) and "$ref" not in target:
            root_def = def_name(ref)
            siblings = {
                k: v for k, v in source.items() if k not in ("$ref", "$defs", "definitions")
            }
            walk_root = {**target, **siblings}
            base = ref[1:]
            pre.append(
                SchemaRewrite(
                    "",
                    "$ref",
                    "inlined",
                    f"the root must be an object schema, so {ref} is inlined at the root",
                )
            )
    if (
        "type" not in walk_root
        and not {"anyOf", "oneOf", "allOf", "enum", "$ref", "const"} & walk_root.keys()
    ):
        walk_root = {"type": "object", **walk_root}
        pre.append(
            SchemaRewrite(base, "type", "added", "the root is an object schema; its type is stated")
        )
    return walk_root, base, root_def, pre


def _walk(
    profile: Profile,
    source: dict[str, Any],
    walk_root: dict[str, Any],
    base: str,
    root_def: str | None,
) -> tuple[dict[str, Any], list[SchemaRewrite], list[str]]:
    """The compiled root, the rewrites, and the root's notes for the tool's description
    (a dialect whose root takes no description: Ollama's)."""
    walker = Walker(profile, source, root_def)
    body = walker.walk_root(walk_root, base)
    defs = {**source.get("definitions", {}), **source.get("$defs", {})}
    if profile.inline_refs:
        if defs:
            walker.note(
                "",
                "$defs",
                "dropped",
                f"{profile.label} does not follow references; they are inlined",
            )
    else:
        compiled: dict[str, Any] = {}
        i = 0
        while i < len(walker.used_defs):
            def_ = walker.used_defs[i]
            where = "$defs" if def_ in source.get("$defs", {}) else "definitions"
            compiled[def_] = walker.node(defs[def_], f"/{where}/{escape(def_)}")
            i += 1
        if compiled:
            body["$defs"] = compiled
    return body, walker.rewrites, walker.root_notes


def _described(description: str, notes: list[str]) -> str:
    """The tool's description with the root's notes (what the root could not carry)."""
    if not notes:
        return description
    joined = "; ".join(notes)
    return f"{description} ({joined})" if description else joined


def _passthrough(
    source: dict[str, Any], walk_root: dict[str, Any], root_def: str | None
) -> dict[str, Any]:
    out = dict(walk_root)
    if root_def is not None:  # keep every definition, so references still resolve
        for key in ("$defs", "definitions"):
            if key in source:
                out[key] = source[key]
    return out
