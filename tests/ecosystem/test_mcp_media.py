"""MCP results with images, embedded resources and structured content, against real `mcp` SDK servers."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Any

import pytest

from tests.ecosystem.conftest import ROOT, children
from tests.ecosystem.media_server import PDF, PNG, README
from toolfold import Agent, FilePart, ImagePart, RunState, TextPart
from toolfold.adapters.anthropic import build_body as anthropic_body
from toolfold.adapters.gemini import GeminiModel
from toolfold.adapters.openai_chat import PROVIDERS
from toolfold.adapters.openai_chat import build_body as chat_body
from toolfold.adapters.openai_responses import OpenAIResponsesModel
from toolfold.mcp import MCPError, MCPServerHTTP, MCPServerStdio
from toolfold.runtime import ModelRequest, ToolResultPart
from toolfold.testing import ScriptedModel
from toolfold.toolkit._results import format_result

call = ScriptedModel.call


def _media_server(**options: Any) -> MCPServerStdio:
    script = str(ROOT / "tests/ecosystem/media_server.py")
    return MCPServerStdio(sys.executable, [script], name="media", **options)


def _call(tool: Any) -> Any:
    return asyncio.run(tool.function({}))


def test_images_and_embedded_resources_become_parts() -> None:
    """ImageContent is an ImagePart, embedded resources are FileParts named by their URI, with the exact bytes."""
    with _media_server() as server:
        tools = {t.name: t for t in server.tools()}
        chart = _call(tools["chart"])
        readme = _call(tools["readme"])
        weather = _call(tools["weather"])
        link = _call(tools["link"])
    assert chart == [TextPart("Sales by month:"), ImagePart(PNG, media_type="image/png")]
    assert readme == [
        FilePart(README.encode(), media_type="text/markdown", filename="file:///notes/README.md"),
        FilePart(PDF, media_type="application/pdf", filename="file:///notes/report.pdf"),
    ]
    assert weather == {"city": "Oslo", "celsius": -3}  # structuredContent, as structured data
    assert link == "[resource link file:///notes/big.csv: big.csv]"


def test_the_same_over_streamable_http(http_media_server: str) -> None:
    """The mcp SDK server over streamable HTTP: the image and resources arrive as the same parts."""
    with MCPServerHTTP(http_media_server, name="media-http", prefix="web") as server:
        tools = {t.name: t for t in server.tools()}
        assert {"web_chart", "web_readme", "web_weather", "web_link"} <= set(tools)
        chart = _call(tools["web_chart"])
        readme = _call(tools["web_readme"])
    assert chart[1] == ImagePart(PNG, media_type="image/png")
    assert [p.filename for p in readme] == ["file:///notes/README.md", "file:///notes/report.pdf"]
    assert readme[1].data == PDF


def _results(state: RunState) -> dict[str, ToolResultPart]:
    return {r.tool_name: r for m in state.messages for r in m.tool_results}


def test_a_run_keeps_the_parts_and_every_provider_sends_the_image() -> None:
    """In a run the image reaches the state, survives JSON, and is on the wire of each provider."""
    before = children()
    model = ScriptedModel(
        [[call("chart", {}), call("readme", {}), call("weather", {})], "Seen it all."]
    )
    response = Agent(model, tools=[_media_server()]).run("Report")
    assert response.text == "Seen it all."
    assert children() == before  # the server ended with the run
    stored = RunState.from_json(response.state.to_json())
    assert stored == response.state
    results = _results(stored)
    chart = results["chart"]
    assert chart.parts == (TextPart("Sales by month:"), ImagePart(PNG, media_type="image/png"))
    assert chart.content == "Sales by month:\n[image: image/png, 70 bytes]"
    assert [p.media_type for p in results["readme"].parts] == ["text/markdown", "application/pdf"]
    assert results["weather"].parts == ()
    assert json.loads(results["weather"].content) == {"city": "Oslo", "celsius": -3}
    # the model saw the parts in its second request
    seen = {r.tool_name: r for r in model.requests[1].messages[-1].tool_results}
    assert seen["chart"].parts == chart.parts

    request = ModelRequest(stored.messages[:3], model.requests[1].tools)  # up to the results
    png = base64.b64encode(PNG).decode()
    anthropic = anthropic_body(request, "claude-sonnet-4-5")
    blocks = anthropic["messages"][2]["content"][0]["content"]
    assert blocks[1]["source"]["data"] == png
    responses = OpenAIResponsesModel("gpt-4o", api_key="k" * 20).body(request)
    outputs = [i for i in responses["input"] if i.get("type") == "function_call_output"]
    assert outputs[0]["output"][1]["image_url"] == f"data:image/png;base64,{png}"
    gemini = GeminiModel("gemini-3-flash-preview", api_key="k" * 20).body(request)
    first = gemini["contents"][2]["parts"][0]["functionResponse"]
    assert first["parts"][0]["inlineData"]["data"] == png
    chat = chat_body(request, "gpt-4o-mini", PROVIDERS["openai"])
    assert chat["messages"][-1]["role"] == "user"
    assert chat["messages"][-1]["content"][1]["image_url"]["url"].endswith(png)


def test_our_server_sends_a_tool_result_with_parts_as_image_and_resource() -> None:
    """A @tool returning parts is served as ImageContent and an EmbeddedResource; our client maps them back."""

    async def main() -> Any:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        target = StdioServerParameters(
            command=sys.executable,
            args=["-m", "toolfold.mcp", "serve", "tests.ecosystem.served_tools:MEDIA_TOOLS"],
            cwd=str(ROOT),
        )
        async with Client(target) as client:
            return await client.call_tool("snapshot", {"label": "Q3"})

    result = asyncio.run(main())
    assert [block.type for block in result.content] == ["text", "image", "resource"]
    assert base64.b64decode(result.content[1].data) == b"\x89PNG\r\n\x1a\nQ3"
    assert result.content[2].resource.mime_type == "application/pdf"

    served = MCPServerStdio(
        sys.executable,
        ["-m", "toolfold.mcp", "serve", "tests.ecosystem.served_tools:MEDIA_TOOLS"],
        cwd=str(ROOT),
        name="ours",
    )
    with served:
        (snapshot,) = served.tools()
        parts = asyncio.run(snapshot.function({"label": "Q3"}))
    assert parts[0] == TextPart("Q3")
    assert parts[1] == ImagePart(b"\x89PNG\r\n\x1a\nQ3", media_type="image/png")
    assert parts[2].data == b"%PDF-1.4 Q3"


def test_an_image_whose_data_is_no_base64_is_an_mcp_error_naming_server_and_tool() -> None:
    """A result (or an error result) holding an image block whose data is no base64 is
    an MCPError naming the server and the tool, saying the result is malformed."""
    with _media_server() as server:
        tools = {t.name: t for t in server.tools()}
        for name in ("garbled", "garbled_error"):
            with pytest.raises(MCPError) as caught:
                _call(tools[name])
            assert str(caught.value).startswith(
                f"MCP server 'media': tool {name!r} answered a malformed result: "
                "ValueError: its image block's data is not base64"
            )


def test_structured_content_beside_more_loses_nothing() -> None:
    """structuredContent alone (its JSON text, the MCP SDK's wrapped value) is structured data
    as before; beside an image or a text that says more, the blocks are kept and the data is
    sent as JSON too, unless a text block carries it already (not twice)."""
    with _media_server() as server:
        tools = {t.name: t for t in server.tools()}
        shown = ("weather", "wrapped", "items", "chart_data", "plotted", "noted")
        results = {name: _call(tools[name]) for name in shown}
    assert results["weather"] == {"city": "Oslo", "celsius": -3}
    assert results["wrapped"] == {"result": "hello"}
    assert results["items"] == {"result": ["a", "b"]}
    image = ImagePart(PNG, media_type="image/png")
    # was {"points": 3} alone, the image lost
    assert results["chart_data"] == [TextPart('{"points": 3}'), image]
    assert results["plotted"] == [image, TextPart('{"points":3}')]
    # was {} alone, the text lost
    assert results["noted"] == "Important: the deploy failed on host 3\n{}"


def test_an_error_results_structured_content_is_in_its_message() -> None:
    """An isError result's structuredContent is in the error the model reads (it read
    "(no text)"), once when a text block carries it too."""
    with _media_server() as server:
        tools = {t.name: t for t in server.tools()}
        for name in ("quota", "quota_said"):
            with pytest.raises(MCPError) as caught:
                _call(tools[name])
            said = str(caught.value)
            assert said.startswith(f"MCP server 'media': tool {name!r} reported an error: ")
            assert said.count("quota exceeded, retry after 60 s") == 1


def _rows(count: int) -> Any:
    """A result as the MCP SDK's server sends a list of ``count`` dicts: one text block per
    row (its JSON), and the list wrapped in ``{"result": ...}``."""
    import mcp.types as types

    rows = [{"id": at, "name": f"user{at}", "tags": ["a", "b"]} for at in range(count)]
    blocks = [types.TextContent(type="text", text=json.dumps(row)) for row in rows]
    return types.CallToolResult(content=blocks, structured_content={"result": rows})


def _steps(result: Any, mask: Any = None) -> int:
    """How many Python and C functions turning ``result`` into a tool's value calls."""
    from toolfold.mcp._client import _result_for_model

    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        _result_for_model(result, mask)
    finally:
        sys.setprofile(None)
    return calls


def test_a_large_structured_result_is_read_in_linear_time() -> None:
    """A list of n rows (n text blocks) is checked against its structured data in work
    growing as n: each block was looked for through the whole data, 4.5 s for 1,000
    rows on the run's loop, where a tool's timeout could not fire. Four times the rows,
    at most about four times the calls (it was sixteen); the data is returned as before,
    and so is a block of more among the rows (text and JSON)."""
    small, large = _steps(_rows(100)), _steps(_rows(400))
    assert large <= 5 * small
    from toolfold.mcp._client import _result_for_model

    assert _result_for_model(_rows(3)) == {
        "result": [{"id": at, "name": f"user{at}", "tags": ["a", "b"]} for at in range(3)]
    }
    import mcp.types as types

    mixed = _rows(2)
    mixed.content.append(types.TextContent(type="text", text="2 rows"))
    texts = [block.text for block in mixed.content]
    assert _result_for_model(mixed) == "\n".join([*texts, format_result(mixed.structured_content)])


def _tree(depth: int) -> Any:
    if depth == 0:
        return {"name": "file.txt", "content": "y" * 300}
    return {"name": f"dir{depth}", "children": [_tree(depth - 1), _tree(depth - 1)]}


def _chain(depth: int) -> Any:
    value: Any = "z" * 100_000
    for at in range(depth):
        value = {"level": at, "inner": value}
    return value


@pytest.mark.parametrize("data", [_tree(10), _chain(99)], ids=["tree", "chain"])
def test_nested_structured_data_is_checked_without_writing_each_subtree(
    data: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nested data beside a text block is checked writing each value's JSON about once:
    every subtree's JSON was written (a 6 MB tree took 3 s, 10 MB 99 levels deep 2.8 s
    and 506 MB). The text JSON of the data, or of a value inside it, still says no more."""
    import mcp.types as types

    from toolfold.mcp import _client

    written = 0
    canonical = _client._canonical

    def counted(value: Any) -> str | None:
        nonlocal written
        form = canonical(value)
        written += len(form or "")
        return form

    monkeypatch.setattr(_client, "_canonical", counted)
    size = len(json.dumps(data))
    said = types.TextContent(type="text", text="listed the tree")
    result = types.CallToolResult(content=[said], structured_content=data)
    assert _client._result_for_model(result) == f"listed the tree\n{format_result(data)}"
    assert written <= 3 * size
    inner = data["children"][0] if "children" in data else data["inner"]
    for text in (json.dumps(inner), json.dumps(data, indent=2)):
        result = types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=data
        )
        assert _client._result_for_model(result) == data
