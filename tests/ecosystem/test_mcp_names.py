"""Listed MCP tool names providers refuse (dots, over 64 characters, CJK) or toolfold reserves
('auto', 'none', 'required') are mapped, not fatal, and two mapped to one are told apart."""

from __future__ import annotations

import sys

import pytest

import toolfold
from tests.ecosystem.conftest import ROOT
from toolfold import Agent, ToolDefinitionError, UsageError
from toolfold.adapters._dialects._compile import compile_tool
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


def test_a_dotted_name_mapped_onto_a_listed_one_gets_its_hash_and_both_work() -> None:
    """'files.read' beside 'files_read': both are 'files_read_' and their own hash (the
    listing was refused whole); each call reaches its own tool."""
    clashing = MCPServerStdio(sys.executable, [SERVER, "clash"], name="dotted")
    dotted = "files_read_601e4eb6"  # sha256("files.read")[:8]
    plain = "files_read_50a21da8"  # sha256("files_read")[:8]

    def reply(request: ModelRequest) -> object:
        last = request.messages[-1]
        if last.role == "tool":
            return " | ".join(part.content for part in last.tool_results)
        return [FunctionModel.call(dotted, {}), FunctionModel.call(plain, {})]

    with clashing:
        names = {tool.name for tool in clashing.tools()}
        assert {dotted, plain} <= names
        assert "files_read" not in names
        response = Agent(FunctionModel(reply), tools=[clashing]).run("read")
    assert response.text == "server called as files.read | server called as files_read"
    kept = MCPServerStdio(sys.executable, [SERVER, "clash"], include=["files.read", LONG])
    with kept:
        assert "files_read" in {tool.name for tool in kept.tools()}  # no twin: no hash


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


def test_a_reserved_name_mapped_onto_a_listed_one_gets_its_hash() -> None:
    """A listing of 'auto' beside 'auto_': both are 'auto__' and their own hash."""
    server = MCPServerStdio(sys.executable, [SERVER], name="twins")
    schema = {"type": "object", "properties": {}}
    listed = [
        {"name": name, "description": "", "inputSchema": schema} for name in ("auto", "auto_")
    ]
    assert [tool.name for tool in server.tools_from(listed)] == ["auto__929260ad", "auto__e032bbbf"]


def _named(*names: str) -> list[dict[str, object]]:
    """A listing of tools named ``names``, without parameters."""
    schema = {"type": "object", "properties": {}}
    return [{"name": name, "description": name, "inputSchema": schema} for name in names]


def test_cjk_names_that_collide_get_their_hash_whatever_the_order_and_others_keep_theirs() -> None:
    """'天気' and '時間' are both '__' with '_' for each refused character: each gets the
    hash of its own name (the listing was refused whole), whatever the listing's order;
    '天気予報' ('____'), a lone '天気' and a prefixed one colliding with nothing keep theirs."""
    server = MCPServerStdio(sys.executable, ["unused.py"], name="jp")
    names = {t.description: t.name for t in server.tools_from(_named("天気", "時間", "天気予報"))}
    assert names == {"天気": "___bc79d84d", "時間": "___bf6267da", "天気予報": "____"}
    again = {t.description: t.name for t in server.tools_from(_named("天気予報", "時間", "天気"))}
    assert again == names
    assert [t.name for t in server.tools_from(_named("天気", "天気予報"))] == ["__", "____"]
    prefixed = MCPServerStdio(sys.executable, ["unused.py"], name="jp", prefix="jp")
    made = [t.name for t in prefixed.tools_from(_named("天気", "時間", "ok"))]
    assert made == ["jp____190cf547", "jp____ce6b3b98", "jp_ok"]  # hashes of "jp_天気"...
    assert len(set(made)) == 3


def test_two_cjk_tools_of_a_real_server_are_both_called_by_their_own_names() -> None:
    """A server listing '天気' and '時間' (both '__' alone) is usable: the model calls each
    by its hashed name, the server is called as '天気' and '時間'."""
    server = MCPServerStdio(sys.executable, [SERVER, "cjk"], name="jp")

    def reply(request: ModelRequest) -> object:
        last = request.messages[-1]
        if last.role == "tool":
            return " | ".join(part.content for part in last.tool_results)
        return [FunctionModel.call(name, {}) for name in ("___bc79d84d", "___bf6267da", "____")]

    with server:
        response = Agent(FunctionModel(reply), tools=[server]).run("go")
    assert response.text == (
        "server called as 天気 | server called as 時間 | server called as 天気予報"
    )


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


def test_a_name_gemini_refuses_in_an_mcp_tool_names_the_server_and_prefix() -> None:
    """'2fa_verify' is kept, as before (OpenAI and Anthropic take it, runs saved with it
    resume); Gemini's error names the server and the way out, prefix=, which gives a name
    it takes."""
    from toolfold import SchemaCompileError

    server = MCPServerStdio(sys.executable, ["unused.py"], name="auth")
    tools = server.tools_from(_named("2fa_verify", "search"))
    assert [t.name for t in tools] == ["2fa_verify", "search"]
    gemini = toolfold.model(
        "gemini:gemini-x", base_url="http://127.0.0.1:9", api_key="k" * 20, retry=0
    )
    with pytest.raises(SchemaCompileError) as raised:
        Agent(gemini, tools=tools).run("x")  # type: ignore[arg-type]
    assert str(raised.value).endswith(
        "(a tool of MCP server 'auth', named by the server: give the server prefix=... "
        "starting with a letter (prefix='s' gives 's_2fa_verify'), or include=[...] to "
        "leave '2fa_verify' out)"
    )
    prefixed = MCPServerStdio(sys.executable, ["unused.py"], name="auth", prefix="s")
    for each in prefixed.tools_from(_named("2fa_verify")):
        compile_tool(each, "gemini")  # (no error)


def test_two_prefixes_that_become_the_same_name_each_say_what_they_became() -> None:
    """'文档' and '时间' are accepted, as before; both become '__', so the tools they share
    are refused as one name, the error naming both servers, their prefixes and '__'."""
    first = MCPServerStdio(sys.executable, ["unused.py"], name="A", prefix="文档")
    second = MCPServerStdio(sys.executable, ["unused.py"], name="B", prefix="时间")
    tools = [*first.tools_from(_named("search")), *second.tools_from(_named("search"))]
    assert [t.name for t in tools] == ["___search", "___search"]
    with pytest.raises(ToolDefinitionError) as raised:
        Agent(FunctionModel(lambda messages, info: "x"), tools=tools)
    said = str(raised.value)
    for server, prefix in (("A", "文档"), ("B", "时间")):
        assert (
            f"another prefix than {prefix!r} (it becomes '__' in tool names: a-z A-Z 0-9 _ - "
            f"only, a letter first) on MCP server {server!r}"
        ) in said
    same = MCPServerStdio(sys.executable, ["unused.py"], name="C", prefix="docs")
    again = MCPServerStdio(sys.executable, ["unused.py"], name="D", prefix="docs")
    with pytest.raises(ToolDefinitionError, match="another prefix than 'docs' on MCP server 'C'"):
        Agent(
            FunctionModel(lambda messages, info: "x"),
            tools=[*same.tools_from(_named("search")), *again.tools_from(_named("search"))],
        )


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


def test_a_saved_call_to_a_name_now_told_apart_is_refused_on_resume_never_run() -> None:
    """A run saved with an approved-pending call 'files_read' (the server's files.read), resumed
    once the server lists files_read too: 'files_read' no longer exists (both are hashed), so
    the resume is refused naming it, instead of calling the server's other tool."""
    runs: list[str] = []

    def reply(request: ModelRequest) -> object:
        last = request.messages[-1]
        if last.role == "tool":
            runs.extend(part.content for part in last.tool_results)
            return "done"
        return [FunctionModel.call("files_read", {})]

    before = MCPServerStdio(sys.executable, [SERVER], name="docs", requires_approval=True)
    with before:
        first = Agent(FunctionModel(reply), tools=[before]).run("read")
    (call,) = first.pending_approvals
    after = MCPServerStdio(sys.executable, [SERVER, "clash"], name="docs", requires_approval=True)
    with after, pytest.raises(UsageError) as raised:
        Agent(FunctionModel(reply), tools=[after]).resume(first.state, approvals={call.id: True})
    assert "names tools that were not given: files_read" in str(raised.value)
    assert runs == []


def test_a_name_listed_twice_is_not_hashed_and_is_refused_as_a_duplicate() -> None:
    """A server listing 'a.b' twice makes two 'a_b' (no hash of a name for being listed twice),
    which the agent refuses as duplicate tool names."""
    server = MCPServerStdio(sys.executable, [SERVER], name="s")
    schema = {"type": "object", "properties": {}}
    listing = [{"name": "a.b", "description": "", "inputSchema": schema}] * 2
    made = server.tools_from(listing)
    assert [tool.name for tool in made] == ["a_b", "a_b"]
    with pytest.raises(ToolDefinitionError) as raised:
        Agent(FunctionModel(lambda messages, info: "x"), tools=list(made)).run("go")
    assert "tool name 'a_b' is used by 2 tools" in str(raised.value)
