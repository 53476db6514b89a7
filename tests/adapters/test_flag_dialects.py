"""A Flag parameter's range and flag names reach every provider dialect."""

from __future__ import annotations

import enum

import pytest

from toolfold import tool
from toolfold.adapters import compile_tool
from toolfold.adapters._dialects import DIALECTS


class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


@tool
def chmod(path: str, perm: Perm) -> str:
    """Change a file's permissions.

    Args:
        path: The file.
        perm: The permissions to set.
    """
    return path


NOTE = "The permissions to set. Flags R=1, W=2, X=4, combined by adding (0 for none)."


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_flags_and_their_range_reach_the_model_in_every_dialect(dialect: str) -> None:
    """The bounds are sent, or written into the description; the flag names always are."""
    compiled = compile_tool(chmod, dialect)  # type: ignore[arg-type]
    perm = compiled.schema_sent["properties"]["perm"]
    assert perm["description"].startswith(NOTE)
    moved = {r.keyword for r in compiled.rewrites if r.action == "moved_to_description"}
    for keyword, bound in (("minimum", 0), ("maximum", 7)):
        if keyword in moved:
            assert f"{keyword}: {bound}" in perm["description"]
        else:
            assert perm[keyword] == bound


@pytest.mark.parametrize("dialect", ["anthropic", "deepseek"])
def test_a_flag_keeps_a_tool_from_a_strict_mode_without_bounds(dialect: str) -> None:
    """Anthropic's and DeepSeek's strict modes take no bounds: left to choose, the tool goes non-strict and keeps them."""
    compiled = compile_tool(chmod, dialect, strict=None)  # type: ignore[arg-type]
    assert not compiled.strict
    assert {r.keyword for r in compiled.strict_blockers} == {"minimum", "maximum"}
    assert compiled.schema_sent["properties"]["perm"]["maximum"] == 7


class Gaps(enum.IntFlag):
    READ = 4
    WRITE = 2


@tool
def set_perm(perm: Gaps) -> str:
    """Set the permissions.

    Args:
        perm: The permissions.
    """
    return repr(perm)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_sums_of_flags_with_a_gap_reach_the_model_in_every_dialect(dialect: str) -> None:
    """The enum [0, 2, 4, 6] is sent, or written into the description (Gemini's OpenAPI: string enums only)."""
    compiled = compile_tool(set_perm, dialect)  # type: ignore[arg-type]
    perm = compiled.schema_sent["properties"]["perm"]
    if "enum" in {r.keyword for r in compiled.rewrites if r.action == "moved_to_description"}:
        assert "[0, 2, 4, 6]" in perm["description"]
    else:
        assert perm["enum"] == [0, 2, 4, 6]
    if dialect in ("openai-chat", "openai-responses", "anthropic", "deepseek"):
        assert compiled.strict
