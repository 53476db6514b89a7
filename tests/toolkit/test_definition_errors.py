"""Definition errors: raised at decoration, all at once, each with its exact message."""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated, Any, Literal

import pytest

from toolfold import ArgumentValidationError, Field, Tool, ToolDefinitionError, tool

HINT = "; use a supported type or register a rule with toolfold.register_schema_rule()"


class Opaque:
    def __repr__(self) -> str:
        return "<Opaque>"


OPAQUE = Opaque()


@dataclasses.dataclass
class Order:
    sku: str
    blob: bytes


def _problems(fn: Any, **options: Any) -> tuple[str, ...]:
    with pytest.raises(ToolDefinitionError) as info:
        tool(**options)(fn)
    return info.value.problems


def test_every_problem_is_listed_at_once() -> None:
    """One ToolDefinitionError names the function and lists each problem in signature order."""

    def bad(*args, query, data: bytes, when: Any = OPAQUE, order: Order | None = None, **kw):  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(ToolDefinitionError) as info:
        tool(bad)
    assert info.value.qualname == "test_every_problem_is_listed_at_once.<locals>.bad"
    assert info.value.problems == (
        "parameter '*args': *args cannot be filled from a JSON object; declare named"
        " parameters instead (or one list parameter)",
        "parameter 'query' has no type annotation; annotate it (e.g. query: str)",
        "parameter 'data': type bytes has no JSON Schema rule" + HINT,
        "parameter 'when': default <Opaque> is not JSON-representable; use a JSON value"
        " (str, int, float, bool, None, list, dict), or None and compute the value inside"
        " the function",
        "parameter 'order' at order.blob: type bytes has no JSON Schema rule" + HINT,
        "parameter '**kw': **kwargs cannot be described by a schema; declare named"
        " parameters instead (or one dict[str, ...] parameter)",
    )
    assert str(info.value).startswith(
        "cannot make a tool of test_every_problem_is_listed_at_once.<locals>.bad: 6 problems\n"
        "  - parameter '*args'"
    )


def test_nested_path_in_containers() -> None:
    """A problem deep inside a container type names the path to it."""

    def f(rows: list[dict[str, set[bytes]]]) -> None:
        pass

    assert _problems(f) == (
        "parameter 'rows' at rows[]{}[]: type bytes has no JSON Schema rule" + HINT,
    )


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        (
            "has space",
            "tool name 'has space' is invalid: use 1 to 64 characters among a-z A-Z 0-9 _ - (pass name=...)",
        ),
        (
            "x" * 65,
            f"tool name {'x' * 65!r} is invalid: use 1 to 64 characters among a-z A-Z 0-9 _ - (pass name=...)",
        ),
        (
            "",
            "tool name '' is invalid: use 1 to 64 characters among a-z A-Z 0-9 _ - (pass name=...)",
        ),
        (
            "search\n",
            "tool name 'search\\n' is invalid: use 1 to 64 characters among a-z A-Z 0-9 _ -"
            " (pass name=...)",
        ),
        ("none", "tool name 'none' is reserved (a tool_choice value); pass another name=..."),
        (
            "required",
            "tool name 'required' is reserved (a tool_choice value); pass another name=...",
        ),
    ],
)
def test_invalid_names(name: str, problem: str) -> None:
    """Names outside ^[a-zA-Z0-9_-]{1,64}$ (a final newline too) and tool_choice words are
    refused, by @tool and by Tool alike."""

    def f() -> None:
        pass

    assert _problems(f, name=name) == (problem,)
    with pytest.raises(ToolDefinitionError) as info:
        Tool(name=name, description="x")
    assert info.value.problems == (problem,)


def test_lambda_needs_a_name() -> None:
    """A lambda's name '<lambda>' is not a valid tool name."""
    with pytest.raises(ToolDefinitionError) as info:
        tool(lambda: None)
    assert info.value.problems == (
        "tool name '<lambda>' is invalid: use 1 to 64 characters among a-z A-Z 0-9 _ - (pass name=...)",
    )
    assert tool(name="noop")(lambda: None).name == "noop"


def test_invalid_options() -> None:
    """Bad option values are definition errors too, alongside the others."""

    def f(a: int) -> None:
        pass

    assert _problems(f, timeout=-1, max_retries=1.5, strict="yes", requires_approval="maybe") == (
        "requires_approval must be a bool or a predicate (call, state) -> bool, not 'maybe'",
        "timeout must be a positive number of seconds or None, not -1",
        "max_retries must be an int >= 0, not 1.5",
        "strict must be True, False or None, not 'yes'",
    )


async def _async_check(call: Any, state: Any) -> bool:
    return False


class _AsyncCheck:
    async def __call__(self, call: Any, state: Any) -> bool:
        return False


def _one_argument(call: Any) -> bool:
    return False


@pytest.mark.parametrize(
    ("predicate", "problem"),
    [
        (_async_check, "requires_approval=_async_check is an async function: .* not awaited"),
        (_AsyncCheck(), "requires_approval is an async function"),
        (_one_argument, "requires_approval=_one_argument must take \\(call, state\\)"),
    ],
)
def test_an_approval_predicate_the_run_cannot_call_is_refused(predicate: Any, problem: str) -> None:
    """An async or one-argument predicate is a definition error naming the tool: it was
    accepted, then asked for every call (a coroutine never awaited, or a TypeError)."""

    def refund(amount: int) -> int:
        return amount

    with pytest.raises(ToolDefinitionError, match="refund") as info:
        tool(requires_approval=predicate)(refund)
    (said,) = info.value.problems
    assert re.match(problem, said), said


@pytest.mark.parametrize(
    "predicate",
    [lambda call, state: False, lambda *args: False, lambda call, state, extra=1: False, max],
)
def test_an_approval_predicate_that_takes_call_and_state_is_kept(predicate: Any) -> None:
    """Predicates that take (call, state), however declared (or unreadable), are accepted."""

    def refund(amount: int) -> int:
        return amount

    assert tool(requires_approval=predicate)(refund).requires_approval is predicate


def test_non_json_default_in_nested_dataclass() -> None:
    """A dataclass field default with no JSON form is reported with its class and field."""

    @dataclasses.dataclass
    class Settings:
        marker: Any = Opaque()

    with pytest.raises(ToolDefinitionError) as info:

        @tool
        def f(settings: Settings) -> None:
            pass

    assert info.value.problems == (
        "parameter 'settings' at settings.marker: field 'marker' of"
        " test_non_json_default_in_nested_dataclass.<locals>.Settings has default <Opaque>,"
        " which is not JSON-representable; use a JSON value or a default factory",
    )


def test_unresolvable_annotation() -> None:
    """A string annotation naming nothing is a definition error, not a crash."""

    def f(a: Nowhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    assert _problems(f) == (
        "cannot resolve the type annotations (name 'Nowhere' is not defined);"
        " import the names they use",
    )


def test_an_annotation_that_raises_names_its_parameter_not_an_import() -> None:
    """A typo in a Field's keywords under string annotations names the parameter and the
    error; it does not ask to import names, which would not help."""

    def f(a: int, n: Annotated[int, Field(gte=1)]) -> None:  # type: ignore[call-arg]
        pass

    (problem,) = _problems(f)
    assert problem.startswith(
        "parameter 'n': its annotation 'Annotated[int, Field(gte=1)]' cannot be evaluated:"
        " TypeError: Field.__init__() got an unexpected keyword argument 'gte'"
    )  # (Python 3.13 adds: Did you mean 'ge'?)


def test_json_defaults_are_converted() -> None:
    """Defaults with a JSON form (tuples, sets, enums, dates) appear as JSON."""
    import datetime
    import enum

    class Mode(enum.Enum):
        FAST = "fast"

    @tool
    def f(
        pair: tuple[int, int] = (1, 2),
        tags: frozenset[str] = frozenset({"b", "a"}),
        mode: Mode = Mode.FAST,
        since: datetime.date = datetime.date(2024, 5, 1),
        ratio: float | None = None,
    ) -> None:
        pass

    defaults = {k: v["default"] for k, v in f.parameters["properties"].items()}
    assert defaults == {
        "pair": [1, 2],
        "tags": ["a", "b"],
        "mode": "fast",
        "since": "2024-05-01",
        "ratio": None,
    }
    assert "required" not in f.parameters


def test_a_mapping_with_one_type_argument_is_a_definition_error() -> None:
    """dict[str] (which Python allows) names the parameter and what a mapping takes,
    at any depth, instead of a bare ValueError."""

    def f(x: dict[str], y: list[dict[str]]) -> None:  # type: ignore[type-arg]
        pass

    take = "a mapping takes a key type and a value type (dict[str, int]), not 1 type (str)"
    assert _problems(f) == (f"parameter 'x': {take}", f"parameter 'y' at y[]: {take}")


@pytest.mark.parametrize("builtin", [dict, int])
def test_a_builtin_without_a_signature_is_a_definition_error(builtin: Any) -> None:
    """tool(dict) names the callable and says why, instead of inspect's bare ValueError."""
    (problem,) = _problems(builtin)
    assert problem.startswith(f"cannot read the parameters of {builtin.__name__} (no signature")
    assert problem.endswith("wrap it in a function with annotated parameters")


def test_already_a_tool() -> None:
    """Applying @tool twice is refused, pointing to ``replace`` for other options."""

    @tool
    def f() -> None:
        pass

    expected = (
        "is already a tool; apply @tool once (for a copy with other options: "
        "f.replace(name=..., timeout=...))",
    )
    with pytest.raises(ToolDefinitionError) as info:
        tool(f)
    assert info.value.problems == expected
    with pytest.raises(ToolDefinitionError) as info:
        tool(name="x")(f)
    assert info.value.problems == expected


def test_already_a_tool_named_as_no_identifier_points_to_python_code() -> None:
    """A tool named ``get-time`` is pointed to by its function's name, not ``get-time.replace``.

    Before, the hint read ``get-time.replace(name=..., timeout=...)``, no Python.
    """

    @tool(name="get-time")
    def current_time() -> str:
        return "noon"

    with pytest.raises(ToolDefinitionError) as info:
        tool(current_time)
    (problem,) = info.value.problems
    assert problem.endswith("current_time.replace(name=..., timeout=...))")
    nameless = Tool("get-time", "", {"type": "object", "properties": {}}, lambda args: "noon")
    with pytest.raises(ToolDefinitionError) as info:
        tool(nameless)
    (problem,) = info.value.problems
    assert problem.endswith("the_tool.replace(name=..., timeout=...))")


def test_enum_and_literal_values_must_be_json() -> None:
    """Enum members and Literal values with no JSON form are refused, naming the value."""
    import enum

    class Corner(enum.Enum):
        TOP_LEFT = (0, 0)

    with pytest.raises(ToolDefinitionError) as info:

        @tool
        def f(corner: Corner, kind: Literal[b"raw"]) -> None:
            pass

    assert info.value.problems == (
        "parameter 'corner': test_enum_and_literal_values_must_be_json.<locals>.Corner value"
        " (0, 0) is not a JSON value (use str, int, float, bool or None)",
        "parameter 'kind': Literal value b'raw' is not a JSON value (use str, int, float,"
        " bool or None)",
    )


def test_an_enum_without_members_is_refused() -> None:
    """An Enum with no members admits no value: a definition error naming the tool and parameter."""
    import enum

    class Nothing(enum.Enum):
        pass

    def pick(kind: Nothing, n: int) -> None:
        """Pick."""

    with pytest.raises(ToolDefinitionError, match=r"tool of .*pick") as info:
        tool(pick)
    assert info.value.problems == (
        "parameter 'kind': Enum test_an_enum_without_members_is_refused.<locals>.Nothing has"
        " no members, so no value fits it; give it members",
    )


def test_local_dataclass_naming_another_local_class() -> None:
    """Under future annotations, a local dataclass whose field names another local class works."""

    @dataclasses.dataclass
    class Inner:
        x: int

    @dataclasses.dataclass
    class Outer:
        inner: Inner

    @tool
    def put(o: Outer) -> None:
        """Put.

        Args:
            o: The thing.
        """

    inner = put.parameters["properties"]["o"]["properties"]["inner"]
    assert inner["properties"] == {"x": {"type": "integer"}}
    assert put.validate_arguments({"o": {"inner": {"x": 1}}}) == {"o": Outer(Inner(1))}


def _explicit(schema: dict[str, Any]) -> tuple[str, ...]:
    from toolfold import Tool

    with pytest.raises(ToolDefinitionError) as info:
        Tool("t", "d", schema)
    assert info.value.qualname == "'t'"
    return info.value.problems


def test_explicit_schema_refs_are_resolved_when_the_tool_is_made() -> None:
    """A $ref to nothing, or a remote $ref, is a definition error naming the pointer."""
    from toolfold import Tool

    missing = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    assert _explicit(missing) == (
        "$ref '#/$defs/missing' at /properties/a/$ref points to nothing in the schema",
    )
    remote = {"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}}
    (problem,) = _explicit(remote)
    assert problem.startswith("$ref 'https://example.com/x.json' at /properties/a/$ref is remote")
    anchor = {"type": "object", "properties": {"a": {"$ref": "#nope"}}}
    assert _explicit(anchor) == (
        "$ref '#nope' at /properties/a/$ref names no $anchor of the schema",
    )
    fine = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#thing"}, "c": {"$ref": "#"}},
        "$defs": {"A": {"type": "integer"}, "B": {"$anchor": "thing", "type": "string"}},
    }
    made = Tool("t", "d", fine)
    assert made.validate_arguments({"a": 1, "b": "x"}) == {"a": 1, "b": "x"}


LOOP_TAIL = (
    " never reaches a part of the value: checking any arguments against it would never end"
    " (a recursive type refers to itself under properties or items)"
)


@pytest.mark.parametrize(
    ("schema", "loop"),
    [
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/A"}},
                "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
            },
            "#/$defs/A -> #/$defs/B -> #/$defs/A",
        ),
        ({"type": "object", "allOf": [{"$ref": "#"}]}, "# -> #/allOf/0 -> #"),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/A"}},
                "$defs": {"A": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/A"}]}},
            },
            "#/$defs/A -> #/$defs/A/anyOf/1 -> #/$defs/A",
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#here"}},
                "$defs": {"A": {"$anchor": "here", "not": {"$ref": "#here"}}},
            },
            "#here -> #here/not -> #here",
        ),
        (
            {
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/A"}},
                "$defs": {"A": {"$dynamicAnchor": "a", "allOf": [{"$dynamicRef": "#a"}]}},
            },
            "#/$defs/A -> #/$defs/A/allOf/0 -> #/$defs/A",
        ),
        (
            {
                "$schema": "https://json-schema.org/draft/2019-09/schema",
                "type": "object",
                "$recursiveAnchor": True,
                "allOf": [{"$recursiveRef": "#"}],
            },
            "# -> #/allOf/0 -> #",
        ),
        (  # "#q" names the anchor of the nested $id resource holding the reference
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/O"}},
                "$defs": {
                    "O": {
                        "$id": "https://example.com/o",
                        "$ref": "#q",
                        "$defs": {"Q": {"$anchor": "q", "$ref": "#q"}},
                    }
                },
            },
            "#q -> #q",
        ),
    ],
)
def test_a_ref_loop_on_one_value_is_a_definition_error(schema: dict[str, Any], loop: str) -> None:
    """$refs (through allOf, anyOf, not...) that come back to themselves without going into a
    property or an item are refused when the tool is made, naming the loop: a call was a bare
    RecursionError."""
    assert _explicit(schema) == (f"$ref loop {loop}{LOOP_TAIL}",)


@pytest.mark.parametrize(
    ("draft", "ref"),
    [
        ("https://json-schema.org/draft/2019-09/schema", "$dynamicRef"),
        ("http://json-schema.org/draft-07/schema#", "$dynamicRef"),
        ("https://json-schema.org/draft/2020-12/schema", "$recursiveRef"),
        (None, "$recursiveRef"),
    ],
)
def test_a_ref_keyword_its_draft_ignores_is_no_loop(draft: str | None, ref: str) -> None:
    """A $dynamicRef outside 2020-12, or a $recursiveRef outside 2019-09, which jsonschema ignores there, is no loop: the tool is made and checks arguments."""
    from toolfold import Tool

    schema: dict[str, Any] = {"type": "object", "anyOf": [{ref: "#"}]}
    if draft is not None:
        schema["$schema"] = draft
    made = Tool("t", "d", schema)
    assert made.validate_arguments({"a": 1}) == {"a": 1}


def test_a_dynamic_ref_under_properties_is_no_loop() -> None:
    """A $dynamicRef to its own schema under properties (a tree) is kept and checks nested arguments."""
    from toolfold import Tool

    tree = {
        "type": "object",
        "properties": {
            "x": {
                "$dynamicAnchor": "n",
                "type": "object",
                "properties": {"k": {"$dynamicRef": "#n"}},
            }
        },
    }
    made = Tool("t", "d", tree)
    assert made.validate_arguments({"x": {"k": {"k": {}}}}) == {"x": {"k": {"k": {}}}}


@pytest.mark.parametrize("fast", [True, False])
def test_a_recursive_tree_schema_is_no_loop_and_checks_deep_values(fast: bool) -> None:
    """A $ref to itself under properties or items (a tree) is kept, on the fast check and on
    jsonschema's, and validates nested arguments."""
    tree = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            "parent": {"$ref": "#"},
        },
        "$defs": {"node": {"type": "object", "properties": {"kids": {"items": {"$ref": "#"}}}}},
    }
    if not fast:  # a keyword the fast check does not compile: jsonschema does all the work
        tree["$comment"] = "x"
        tree["if"] = {"type": "object"}
    made = Tool("t", "d", tree)
    value = {"name": "a", "parent": {"name": "b", "children": [{"kids": [{"name": "c"}]}]}}
    assert made.validate_arguments(value) == value
    with pytest.raises(ArgumentValidationError):
        made.validate_arguments({"parent": {"name": 5}})


def test_explicit_schema_reports_every_meta_schema_error() -> None:
    """An invalid explicit schema lists all its meta-schema errors, not only the first."""
    bad = {
        "type": "object",
        "properties": {"a": {"type": "wat"}, "b": {"type": "integer", "minimum": "x"}},
        "required": "a",
    }
    problems = _explicit(bad)
    assert len(problems) == 3
    assert all(p.startswith("parameters is not a valid JSON Schema: ") for p in problems)
    assert any("['properties']['b']['minimum']" in p for p in problems)
    assert any("['required']" in p for p in problems)


def test_explicit_schema_that_is_not_json_is_refused_naming_each_pointer() -> None:
    """NaN or an infinity, a key that is not a string, a set, a date or a cycle in an
    explicit schema is a definition error at its JSON pointer, not a failed run later."""
    import datetime

    from toolfold import Tool

    bad: dict[Any, Any] = {
        "type": "object",
        "properties": {
            "a": {"type": "number", "maximum": float("nan")},
            1: {"type": "string"},
            "b/c": {"type": "number", "minimum": float("-inf"), "enum": [{1, 2}]},
            "d": {"default": datetime.date(2024, 1, 1)},
        },
    }
    bad["properties"]["e"] = bad
    assert _explicit(bad) == (
        "parameters is not JSON at /properties/a/maximum: nan is not a JSON number"
        " (no NaN or infinity)",
        "parameters is not JSON at /properties: a key of type int (1) is not a string",
        "parameters is not JSON at /properties/b~1c/minimum: -inf is not a JSON number"
        " (no NaN or infinity)",
        "parameters is not JSON at /properties/b~1c/enum/0: a set is not JSON"
        " (use objects, arrays and scalars)",
        "parameters is not JSON at /properties/d/default: a date is not JSON"
        " (use objects, arrays and scalars)",
        "parameters is not JSON at /properties/e: the value contains itself",
    )
    fine = {"type": "object", "properties": {"a": {"enum": [1, 2.5, None]}}, "required": ["a"]}
    assert Tool("t", "d", fine).validate_arguments({"a": 2.5}) == {"a": 2.5}


class Gauge:
    """A type whose schema rule writes NaN."""


def test_a_schema_rule_that_makes_no_json_is_a_definition_error() -> None:
    """A register_schema_rule rule returning NaN is refused when the tool is made, at its
    pointer, instead of every request failing to be written."""
    from toolfold import register_schema_rule
    from toolfold.toolkit import _schema

    register_schema_rule(Gauge, lambda tp, ctx: {"type": "number", "maximum": float("nan")})
    try:

        def read(g: Gauge) -> None:
            """Read."""

        assert _problems(read) == (
            "parameter 'g': the schema rule for Gauge made no JSON: at /maximum: nan is not"
            " a JSON number (no NaN or infinity)",
        )
    finally:
        del _schema._class_rules[Gauge]
        _schema._cache.clear()
