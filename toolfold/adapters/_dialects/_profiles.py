"""What each dialect accepts: one `Profile` table per dialect, each fact with its source.

Sources are the tags of ``providers.md`` (``[O2]`` OpenAI structured outputs,
``[O7]`` pydantic-ai's OpenAI transformer, ``[A4]``/``[A7]`` Anthropic strict
tool use and its SDK transform, ``[G4]``/``[G5]`` Gemini's ``JSONSchema`` type
and pydantic-ai's Gemini transformer, ``[L2]`` Ollama's Go structs, ``[C6]``
DeepSeek's function-calling guide).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Profile:
    """The rules one dialect (in one mode) imposes on a schema.

    Attributes:
        label: How messages name the dialect, e.g. ``"OpenAI strict mode"``.
        keep: Keywords sent as they are (after their subschemas are compiled).
        formats: String formats the dialect accepts; others go to the
            description. None accepts every format.
        close_objects: Every object gets ``additionalProperties: false``.
        all_required: Every property is required; optional ones become nullable.
        inline_refs: Replace every ``$ref`` by its target (no ``$defs`` sent).
        allow_recursion: Recursive ``$ref`` cycles can be sent.
        type_lists: ``"type": [..]`` is accepted (else split into ``anyOf``).
        need_types: Every schema needs a type, arrays typed ``items``, objects
            ``properties`` (strict decoders cannot sample "anything").
        min_items: The ``minItems`` values accepted, None for any.
        check_pattern: Refuse regex look-arounds and back-references.
        integer_exclusive: Rewrite ``exclusiveMinimum``/``Maximum`` of integers
            as ``minimum``/``maximum`` (exact) when they are not kept.
        root_keep: Keywords allowed on the root object, when narrower than ``keep``.
        openapi: Write the OpenAPI 3.0 ``Schema`` form: unions with null as
            ``nullable: true``, string enums only, upper-case type names and
            ``propertyOrdering`` so the model keeps the declared order.
        refuse_recursion: A recursive schema is refused in every mode (a
            `SchemaCompileError`), instead of cut at the first repeat.
    """

    label: str
    keep: frozenset[str]
    formats: frozenset[str] | None = None
    close_objects: bool = False
    all_required: bool = False
    inline_refs: bool = False
    allow_recursion: bool = True
    type_lists: bool = True
    need_types: bool = False
    min_items: frozenset[int] | None = None
    check_pattern: bool = False
    integer_exclusive: bool = False
    root_keep: frozenset[str] | None = None
    openapi: bool = False
    refuse_recursion: bool = False


_STRUCTURE = frozenset(
    {
        "type",
        "description",
        "enum",
        "anyOf",
        "$ref",
        "properties",
        "required",
        "additionalProperties",
        "items",
    }
)

# [O2] supported: pattern, format (list below), numeric bounds, minItems/maxItems;
# not: minLength, maxLength, uniqueItems, min/maxProperties, allOf, not, ... [O2, O7].
OPENAI_STRICT = Profile(
    label="OpenAI strict mode",
    keep=_STRUCTURE
    | {
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    },
    formats=frozenset(
        {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
    ),
    close_objects=True,
    all_required=True,
    need_types=True,
    check_pattern=True,
)

# [C6] strict (beta): types string, number, integer, boolean, object, array, enum,
# anyOf; no minLength, maxLength, pattern, format, minimum, maximum, multipleOf,
# patternProperties, minItems, maxItems.
DEEPSEEK_STRICT = Profile(
    label="DeepSeek strict mode",
    keep=_STRUCTURE,
    formats=frozenset(),
    close_objects=True,
    all_required=True,
    need_types=True,
)

# [A4, A7] strict: the SDK keeps type, anyOf (oneOf rewritten), enum, local $ref,
# description, title, required, additionalProperties false, string formats
# below, items, minItems 0 or 1; no numeric/string constraints, no recursion.
# Optional properties may stay optional. allOf is merged away here because
# "allOf with $ref" is not supported and a merged object says the same.
ANTHROPIC_STRICT = Profile(
    label="Anthropic strict tool use",
    keep=_STRUCTURE | {"title", "format", "minItems"},
    formats=frozenset(
        {
            "date-time",
            "time",
            "date",
            "duration",
            "email",
            "hostname",
            "uri",
            "ipv4",
            "ipv6",
            "uuid",
        }
    ),
    close_objects=True,
    allow_recursion=False,
    type_lists=False,
    need_types=True,
    min_items=frozenset({0, 1}),
)

# [G4] JSONSchema accepts: type, format, title, description, default, enum,
# items, minItems, maxItems, properties, required, minProperties, maxProperties,
# minimum, maximum, minLength, maxLength, pattern, additionalProperties, anyOf,
# oneOf, uniqueItems, $ref, $defs. [G5] strip title (python-genai#1732),
# exclusive bounds, discriminator, examples; const -> enum; formats are safest
# in the description.
GEMINI = Profile(
    label="Gemini parametersJsonSchema",
    keep=_STRUCTURE
    | {
        "default",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "oneOf",
        "uniqueItems",
    },
    formats=frozenset(),
    integer_exclusive=True,
)

# [L2] Ollama decodes tools into Go structs and silently drops every other
# keyword: root type, $defs, items, required, properties; per property anyOf,
# type, items, description, enum, properties, required. $ref is not among them.
OLLAMA = Profile(
    label="Ollama",
    keep=frozenset({"anyOf", "type", "items", "description", "enum", "properties", "required"}),
    formats=frozenset(),
    inline_refs=True,
    root_keep=frozenset({"type", "items", "required", "properties"}),
)

# [G4] Schema (the OpenAPI 3.0 subset behind FunctionDeclaration.parameters):
# type (STRING, NUMBER, INTEGER, BOOLEAN, ARRAY, OBJECT, NULL), format, title,
# description, nullable, enum (strings only), items, minItems, maxItems,
# properties, required, minProperties, maxProperties, minLength, maxLength,
# pattern, example, anyOf, propertyOrdering, default, minimum, maximum.
# [G5] no oneOf, allOf, const, prefixItems, recursive $ref, type lists;
# additionalProperties is mishandled (map fields arrive empty): drop it.
# Recursion cannot be written without references, and a schema cut at the first
# repeat would let the model send anything below it: refused.
# [G4] Schema.type is "Required" (the v1beta OpenAPI document): strict refuses a
# schema with no type, an array without items, a map and an object without
# properties below the root; the non-strict form repairs what it can
# (`GEMINI_OPENAPI_LOOSE`).
GEMINI_OPENAPI = Profile(
    label="Gemini parameters (OpenAPI Schema)",
    keep=frozenset(
        {
            "type",
            "description",
            "enum",
            "anyOf",
            "properties",
            "required",
            "items",
            "nullable",
            "default",
            "minItems",
            "maxItems",
            "minProperties",
            "maxProperties",
            "minimum",
            "maximum",
            "minLength",
            "maxLength",
            "pattern",
        }
    ),
    formats=frozenset(),
    inline_refs=True,
    type_lists=False,
    integer_exclusive=True,
    need_types=True,
    openapi=True,
    refuse_recursion=True,
)

# The non-strict form: a schema with no type gets one (STRING; an enum of mixed
# types the union of its types) and an array without items its prefixItems' types
# (else STRING items), each a lossy rewrite (`Walker._openapi_typed`,
# `Walker._openapi_items`), so no request breaks the required type.
GEMINI_OPENAPI_LOOSE = attrs.evolve(GEMINI_OPENAPI, need_types=False)
