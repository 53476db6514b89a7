"""Listed MCP tool names providers refuse (dots, over 64 characters) or toolfold reserves
('auto', 'none', 'required') are mapped, not fatal."""

from __future__ import annotations

import sys

import pytest

from tests.ecosystem.conftest import ROOT
from toolfold import Agent, ToolDefinitionError
from toolfold.mcp import MCPServerStdio
from toolfold.runtime import ModelRequest
from toolfold.testing import FunctionModel

SERVER = str(ROOT / "tests/ecosystem/dotted_server.py")
LONG = "long." + "x" * 65


def test_model_name_keeps_valid_names_and_maps_others_to_64_characters() -> None:
    """A valid name is kept; a dot becomes '_'; a long one is cut with a hash; 'auto' is 'auto_'."""
    from toolfold.mcp._client import model_name

    assert model_name("files_read-2") == "files_read-2"
    assert model_name("files.read") == "files_read"
    long_a, long_b = model_name(LONG), model_name(LONG + "y")
    assert len(long_a) == 64
    assert long_a.startswith("long_xxxx")
    assert long_a != long_b
    assert [model_name(name) for name in ("auto", "none", "required")] == [
        "auto_",
        "none_",
        "required_",
    ]
    assert model_name("Auto") == "Auto"


def test_tools_with_dotted_and_long_names_are_called_by_their_server_names() -> None:
    """The model calls 'docs_files_read'; the server is called as 'files.read' (and the long one)."""
    server = MCPServerStdio(sys.executable, [SERVER], prefix="docs")
    long_name = "docs_long_" + "x" * 45 + "_9c22efbe"  # its first 55 characters, its hash

    def reply(request: ModelRequest) -> object:
        last = request.messages[-1]
        if last.role == "tool":
            return " | ".join(part.content for part in last.tool_results)
        return [FunctionModel.call("docs_files_read", {}), FunctionModel.call(long_name, {})]

    with server:
        assert sorted(tool.name for tool in server.tools()) == sorted(
            ["docs_files_read", long_name]
        )
    response = Agent(FunctionModel(reply), tools=[server]).run("read")
    assert response.text == f"server called as files.read | server called as {LONG}"


def test_two_listed_names_mapped_to_one_are_refused_pointing_at_include() -> None:
    """'files.read' beside 'files_read' is refused naming both and include=; include= keeps one."""
    clashing = MCPServerStdio(sys.executable, [SERVER, "clash"], name="dotted")
    with clashing, pytest.raises(ToolDefinitionError) as raised:
        clashing.tools()
    assert "tools 'files.read' and 'files_read' are both 'files_read' for the model" in str(
        raised.value
    )
    assert "include=[...]" in str(raised.value)
    kept = MCPServerStdio(sys.executable, [SERVER, "clash"], include=["files.read", LONG])
    with kept:
        assert len(kept.tools()) == 2


def test_reserved_names_get_a_final_underscore_and_are_called_by_their_server_names() -> None:
    """'auto', 'none', 'required' are 'auto_'... for the model; calls reach the server as 'auto'."""
    server = MCPServerStdio(sys.executable, [SERVER, "reserved"], name="reserved")

    def reply(request: ModelRequest) -> object:
        last = request.messages[-1]
        if last.role == "tool":
            return " | ".join(part.content for part in last.tool_results)
        return [FunctionModel.call(name, {}) for name in ("auto_", "none_", "required_", "Auto")]

    with server:
        names = [tool.name for tool in server.tools()]
        assert {"auto_", "none_", "required_", "Auto", "files_read"} <= set(names)
        assert not {"auto", "none", "required"} & set(names)
        response = Agent(FunctionModel(reply), tools=[server]).run("go")
    assert response.text == (
        "server called as auto | server called as none | server called as required"
        " | server called as Auto"
    )


def test_a_reserved_name_mapped_onto_a_listed_one_is_refused_naming_both() -> None:
    """A listing of 'auto' beside 'auto_' is refused naming both tools and include=."""
    server = MCPServerStdio(sys.executable, [SERVER], name="twins")
    schema = {"type": "object", "properties": {}}
    listed = [
        {"name": name, "description": "", "inputSchema": schema} for name in ("auto", "auto_")
    ]
    with pytest.raises(ToolDefinitionError) as raised:
        server.tools_from(listed)
    assert "tools 'auto' and 'auto_' are both 'auto_' for the model" in str(raised.value)
    assert "a reserved name such as 'auto' gets a final '_'" in str(raised.value)


def test_a_listed_tool_whose_refs_loop_is_refused_naming_the_server_and_the_tool() -> None:
    """A hostile server's inputSchema whose $refs loop (A -> B -> A) is refused when its tools
    are listed, naming the server and the tool: a call of it was a bare RecursionError."""
    server = MCPServerStdio(sys.executable, [SERVER], name="hostile")
    tree_part = {"properties": {"a": {"$ref": "#"}}}
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
    }
    listed = [
        {"name": "loop", "description": "", "inputSchema": schema},
        {"name": "tree", "description": "", "inputSchema": {"type": "object", **tree_part}},
    ]
    with pytest.raises(ToolDefinitionError) as raised:
        server.tools_from(listed)
    assert str(raised.value).startswith("cannot make a tool of MCP server 'hostile': 1 problem")
    assert "tool 'loop': $ref loop #/$defs/A -> #/$defs/B -> #/$defs/A never reaches" in str(
        raised.value
    )
    (tree,) = server.tools_from(listed[1:])
    assert tree.validate_arguments({"a": {"a": {}}}) == {"a": {"a": {}}}


def _keyed(name: str, keys: list[str]) -> dict[str, object]:
    """A listed tool whose parameters are ``keys`` (strings)."""
    properties = {key: {"type": "string"} for key in keys}
    return {
        "name": name,
        "description": name,
        "inputSchema": {"type": "object", "properties": properties},
    }


def _anthropic() -> object:
    """An Anthropic model at an address where nothing listens: a request would fail to connect."""
    import toolfold

    return toolfold.model(
        "anthropic:claude-x", base_url="http://127.0.0.1:9", api_key="k" * 20, retry=0
    )


def test_a_parameter_name_anthropic_refuses_in_an_mcp_tool_says_to_leave_the_tool_out() -> None:
    """An MCP tool's 'rule_name[]' (the server's, not renamable here) points at include=, not at renaming."""
    from toolfold import SchemaCompileError

    server = MCPServerStdio(sys.executable, ["unused.py"], name="crm")
    tools = server.tools_from(
        [_keyed("search", ["query"]), _keyed("lookup", ["rule_name[]", "@type"])]
    )
    with pytest.raises(SchemaCompileError) as raised:
        Agent(_anthropic(), tools=tools).run("x")  # type: ignore[arg-type]
    said = str(raised.value)
    assert "cannot compile tool 'lookup' for anthropic: 2 problems" in said
    assert (
        said.count("leave the tool out with include=[...] on MCP server 'crm', without 'lookup'")
        == 2
    )
    assert "rename" not in said.replace("cannot be renamed", "")
    assert all("include=[...]" in problem for problem in raised.value.problems)


def test_a_parameter_name_anthropic_refuses_in_a_function_or_schema_tool_says_what_to_rename() -> (
    None
):
    """A function's parameter: rename it; an explicit schema's property: rename it there, or leave the tool out."""
    from toolfold import SchemaCompileError, Tool, tool

    @tool
    def meteo(città: str) -> str:
        """The weather."""
        return città

    with pytest.raises(SchemaCompileError) as raised:
        Agent(_anthropic(), tools=[meteo]).run("x")  # type: ignore[arg-type]
    assert "parameter 'città': a parameter name must be" in str(raised.value)
    assert str(raised.value).endswith("(rename the parameter)")
    schema = {"type": "object", "properties": {"Account Number": {"type": "string"}}}
    account = Tool("account", "An account.", schema, lambda arguments: "ok")
    with pytest.raises(SchemaCompileError) as raised:
        Agent(_anthropic(), tools=[account]).run("x")  # type: ignore[arg-type]
    assert str(raised.value).endswith(
        "(rename the property in the tool's parameters schema, or leave the tool out of tools=[...])"
    )
