"""The shared JSON Schema toolbox: pointers, local $refs, null acceptance, strict-mode nulls."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolfold import Tool, tool
from toolfold.adapters import compile_tool, restore_arguments
from toolfold.toolkit._jsonschema import (
    MISSING,
    accepts_null,
    anchors_and_refs,
    deref,
    drop_optional_nulls,
    escape,
    resolve_local,
    unescape,
)


@given(st.text())
def test_pointer_tokens_round_trip(token: str) -> None:
    """escape then unescape gives the token back, and an escaped token holds no '/'."""
    assert unescape(escape(token)) == token
    assert "/" not in escape(token)


def test_escape_follows_rfc_6901_order() -> None:
    """'~1' in a key is escaped as '~01', not mistaken for an escaped '/'."""
    assert escape("a/b~1") == "a~1b~01"
    assert unescape("a~1b~01") == "a/b~1"


ROOT: dict[str, Any] = {
    "type": "object",
    "properties": {"a/b": {"type": "string"}, "list": {"prefixItems": [{"type": "integer"}]}},
    "$defs": {"x y": {"type": "integer"}, "Alias": {"$ref": "#/$defs/Final"}, "Final": True},
}


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("#", ROOT),
        ("#/properties/a~1b", {"type": "string"}),
        ("#/properties/list/prefixItems/0", {"type": "integer"}),
        ("#/$defs/x%20y", {"type": "integer"}),
        ("#/$defs/Nope", MISSING),
        ("#/properties/list/prefixItems/7", MISSING),
        ("#anchor", MISSING),
        ("https://example.com/schema#/$defs/x", MISSING),
    ],
)
def test_resolve_local(ref: str, expected: Any) -> None:
    """Local references resolve (escaped and percent-encoded tokens, list indexes); others are MISSING."""
    assert resolve_local(ROOT, ref) is expected or resolve_local(ROOT, ref) == expected


def test_deref_follows_pure_chains_and_stops_at_siblings_and_cycles() -> None:
    """deref follows {"$ref"} chains, keeps a node with siblings, and ends a cycle."""
    assert deref(ROOT, {"$ref": "#/$defs/Alias"}) is True
    with_sibling = {"$ref": "#/$defs/Final", "description": "d"}
    assert deref(ROOT, with_sibling) is with_sibling
    cyclic = {"$defs": {"A": {"$ref": "#/$defs/A"}}}
    assert deref(cyclic, {"$ref": "#/$defs/A"}) == {"$ref": "#/$defs/A"}


@pytest.mark.parametrize(
    ("schema", "accepts"),
    [
        ({}, True),
        ({"type": ["string", "null"]}, True),
        ({"type": "string"}, False),
        ({"type": "string", "nullable": True}, True),
        ({"enum": ["a", None]}, True),
        ({"const": 1}, False),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, True),
        ({"allOf": [{"type": ["integer", "null"]}, {"type": "integer"}]}, False),
        ({"$ref": "#/$defs/x%20y"}, False),
        ({"$ref": "#/$defs/Final"}, True),
        ({"not": {"type": "integer"}}, False),  # unsure: conservative
    ],
)
def test_accepts_null(schema: dict[str, Any], accepts: bool) -> None:
    """Null acceptance reads types, nullable, enums, unions and $refs, and says no when unsure."""
    assert accepts_null(ROOT, schema) is accepts


NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "limit": {"type": "integer"},
        "note": {"type": ["string", "null"]},
        "ship": {"$ref": "#/$defs/Ship", "description": "Where to."},
        "filters": {"allOf": [{"$ref": "#/$defs/Filters"}]},
        "target": {"anyOf": [{"$ref": "#/$defs/Ship"}, {"$ref": "#/$defs/Filters"}]},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
    },
    "required": ["ship"],
    "$defs": {
        "Ship": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "express": {"type": "boolean"}},
            "required": ["city"],
        },
        "Filters": {"type": "object", "properties": {"tag": {"type": "string"}}},
        "Line": {"type": "object", "properties": {"gift": {"type": "boolean"}}},
    },
}


def test_drop_optional_nulls_at_every_depth() -> None:
    """Nulls of optional, non-nullable properties go: through $ref siblings, allOf, unions and items."""
    value = {
        "limit": None,
        "note": None,
        "ship": {"city": "Oslo", "express": None},
        "filters": {"tag": None},
        "target": {"tag": None},
        "lines": [{"gift": None}, {"gift": True}],
    }
    assert drop_optional_nulls(value, NESTED, NESTED) == {
        "note": None,  # its schema accepts null: it stays
        "ship": {"city": "Oslo"},
        "filters": {},
        "target": {},
        "lines": [{}, {"gift": True}],
    }
    assert value["ship"] == {"city": "Oslo", "express": None}  # the input is not changed


def test_drop_optional_nulls_copies_nothing_without_nulls() -> None:
    """With nothing to drop, the very same value comes back (no copy on the hot path)."""
    value = {"ship": {"city": "Oslo"}, "lines": [{"gift": True}], "note": None}
    assert drop_optional_nulls(value, NESTED, NESTED) is value


def test_required_nulls_and_unknown_keys_stay() -> None:
    """A null for a required property, or for a key the schema does not name, is not touched."""
    value = {"ship": None, "extra": None}
    assert drop_optional_nulls(value, NESTED, NESTED) is value


def test_the_loop_and_restore_arguments_agree() -> None:
    """A tool's own validation and restore_arguments drop the same strict-mode nulls."""

    def order(sku: str, qty: int = 1, note: str | None = None) -> str:
        """Order something.

        Args:
            sku: What.
            qty: How many.
            note: A note.
        """
        return f"{sku}x{qty}:{note}"

    made: Tool[..., Any] = tool(order)
    sent = {"sku": "A", "qty": None, "note": None}
    compiled = compile_tool(made, "openai-chat")
    assert compiled.strict
    assert restore_arguments(compiled, sent) == {"sku": "A", "note": None}
    assert made.validate_arguments(sent) == {"sku": "A", "note": None}


def test_anchors_and_refs_walk_the_schemas_of_the_root_resource_only() -> None:
    """Anchors (``$dynamicAnchor`` too) and references are found by pointer in schemas, also
    in properties named like data keywords, never in data, nor below another ``$id``."""
    schema = {
        "type": "object",
        "properties": {
            "default": {"$ref": "#pt"},
            "enum": {"$dynamicAnchor": "node", "type": "object"},
            "x": {"$anchor": "pt", "type": "integer", "default": {"$anchor": "data"}},
        },
        "$defs": {
            "Other": {"$id": "https://e.com/o", "$anchor": "pt", "items": {"$ref": "#pt"}},
            "Fragment": {"$id": "#frag", "$anchor": "kept"},
        },
        "examples": [{"$ref": "#data"}],
    }
    anchors, refs = anchors_and_refs(schema)
    assert anchors == {
        "node": "#/properties/enum",
        "pt": "#/properties/x",
        "kept": "#/$defs/Fragment",
    }
    assert refs == [("/properties/default", "#pt")]


def test_restore_arguments_keeps_a_null_the_union_branch_it_fits_takes() -> None:
    """A null one union branch takes (``y: int | None``) is not read as "left out" by
    another whose keys fit too (``y: int = 0``): restore_arguments gives the run's class."""

    @dataclasses.dataclass
    class A:
        x: int
        y: int = 0

    @dataclasses.dataclass
    class B:
        x: int
        y: int | None

    def f(v: A | B) -> str:
        """F.

        Args:
            v: A value.
        """
        return repr(v)

    made: Tool[..., Any] = tool(f)
    sent = {"v": {"x": 1, "y": None}}
    compiled = compile_tool(made, "openai-chat", strict=True)
    assert made.validate_arguments(sent) == {"v": B(1, None)}
    restored = restore_arguments(compiled, sent)
    assert restored == sent
    assert made.validate_arguments(restored) == {"v": B(1, None)}
