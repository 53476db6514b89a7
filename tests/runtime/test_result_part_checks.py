"""A tool's image or file result is checked where it comes in: a bad field is the call's error."""

from __future__ import annotations

import array
import asyncio
import pickle
from typing import Any

import pytest

from toolfold import Agent, FilePart, ImagePart, RunState, TextPart, Tool, UsageError, tool
from toolfold.mcp._server import _run
from toolfold.runtime import Message, ToolCallPart, ToolResultPart
from toolfold.testing import ScriptedModel

call = ScriptedModel.call

_BAD = [
    (ImagePart(data="aGk="), "ImagePart.data: expected bytes or None, got str"),  # type: ignore[arg-type]
    (ImagePart(url=5), "ImagePart.url: expected a str or None, got int 5"),  # type: ignore[arg-type]
    (FilePart(data=b"%PDF", filename=7), "FilePart.filename: expected a str or None"),  # type: ignore[arg-type]
    (
        [TextPart(42), ImagePart(data=b"x")],  # type: ignore[arg-type]
        "item 0 of the list, TextPart.text: expected a str, got int 42",
    ),
]


def _shot(value: Any) -> Tool[..., Any]:
    @tool
    def shot() -> object:
        """Take a screenshot."""
        return value

    return shot


def _result(state: RunState) -> ToolResultPart:
    (part,) = [p for m in state.messages for p in m.parts if isinstance(p, ToolResultPart)]
    return part


@pytest.mark.parametrize(("value", "problem"), _BAD)
def test_a_tool_returning_a_bad_part_gives_the_model_an_error_naming_tool_and_field(
    value: Any, problem: str
) -> None:
    """A part with a wrong-typed field is the call's error (tool and field named); the run ends."""
    model = ScriptedModel([call("shot", {}, id="c1"), "ok"])
    response = Agent(model, tools=[_shot(value)]).run("Look.")
    assert response.state.is_done
    assert response.text == "ok"
    result = _result(response.state)
    assert result.is_error
    assert "tool 'shot' returned a part the model cannot be given" in result.content
    assert problem in result.content
    assert RunState.from_json(response.state.to_json()) == response.state


def test_an_async_tool_returning_a_bad_part_gives_an_error_too() -> None:
    """The async path makes a bad part the call's error as the sync one does."""

    @tool
    async def shot() -> object:
        """Take a screenshot."""
        return ImagePart(url=5)  # type: ignore[arg-type]

    model = ScriptedModel([call("shot", {}, id="c1"), "ok"])
    response = asyncio.run(Agent(model, tools=[shot]).arun("Look."))
    result = _result(response.state)
    assert result.is_error
    assert "ImagePart.url: expected a str or None" in result.content


@pytest.mark.parametrize(("value", "problem"), _BAD)
def test_resume_refuses_a_bad_part_naming_the_call_and_field(value: Any, problem: str) -> None:
    """resume(tool_results=...) with a bad part raises UsageError naming the call and field."""
    snap = Tool("snap", "Take a picture.")
    agent = Agent(ScriptedModel([call("snap", {}, id="c1"), "ok"]), tools=[snap])
    state = agent.run("Look.").state
    with pytest.raises(UsageError) as caught:
        agent.resume(state, tool_results={"c1": value})
    assert str(caught.value).startswith("tool_results['c1'] holds a part")
    assert problem in str(caught.value)


def test_resume_refuses_a_tool_result_part_with_a_bad_field() -> None:
    """A ToolResultPart given to resume with non-text content is a UsageError, not a refused event."""
    snap = Tool("snap", "Take a picture.")
    agent = Agent(ScriptedModel([call("snap", {}, id="c1"), "ok"]), tools=[snap])
    state = agent.run("Look.").state
    given = ToolResultPart("c1", "snap", 3)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"tool_results\['c1'\].*ToolResultPart.content"):
        agent.resume(state, tool_results={"c1": given})


def test_the_mcp_server_answers_a_bad_part_with_an_error_result() -> None:
    """Served over MCP, a tool's bad part is an error result naming the tool and the field."""
    served = _shot(ImagePart(data="aGk="))  # type: ignore[arg-type]
    answer = asyncio.run(_run(served, {}, None, "c1"))
    assert answer.is_error
    (block,) = answer.content
    assert "tool 'shot' returned a part the model cannot be given" in block.text
    assert "ImagePart.data: expected bytes or None" in block.text


def test_memoryview_data_is_taken_like_bytes() -> None:
    """An image's or file's data may be a memoryview, as bytearray: a message takes it."""
    image = ImagePart(data=memoryview(b"\x89PNG"))  # type: ignore[arg-type]
    file = FilePart(data=memoryview(b"%PDF"), filename="a.pdf")  # type: ignore[arg-type]
    assert Message("user", (image, file)).parts == (image, file)


def test_a_tool_returning_memoryview_data_gives_the_model_the_image() -> None:
    """A tool's image with memoryview data reaches the model as an image; the state round-trips."""
    model = ScriptedModel([call("shot", {}, id="c1"), "ok"])
    response = Agent(model, tools=[_shot(ImagePart(data=memoryview(b"abc")))]).run("Look.")  # type: ignore[arg-type]
    result = _result(response.state)
    assert not result.is_error
    assert result.content == "[image: image/png, 3 bytes]"
    assert (
        RunState.from_json(response.state.to_json()).messages[-2].parts[0].parts[0].data == b"abc"
    )  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "data",
    [
        memoryview(b"# Notes\n\nline"),
        memoryview(b"#_N_o_t_e_s")[::2],  # not contiguous
        bytearray(b"# Notes"),
        memoryview(array.array("i", [1, 2, 3])),  # not of bytes: its 12 bytes
    ],
)
def test_buffer_data_is_kept_as_bytes(data: Any) -> None:
    """A bytearray or memoryview given as data is kept as bytes (a copy): the part pickles,
    hashes, and a text file of it goes into a provider request as any bytes do."""
    part = FilePart(data=data, media_type="text/markdown")
    assert type(part.data) is bytes
    assert part.data == bytes(data)
    assert pickle.loads(pickle.dumps(part)) == part
    assert hash(Message("user", [TextPart("see"), part])) is not None
    from toolfold.adapters.openai_chat import PROVIDERS, build_body
    from toolfold.runtime import ModelRequest

    call_message = Message("assistant", [ToolCallPart("c1", "notes", "{}")])
    result = Message.tool(ToolResultPart("c1", "notes", "[file]", parts=(part,)))
    request = ModelRequest((Message.user("go"), call_message, result))
    assert build_body(request, "gpt-4o", PROVIDERS["openai"])["messages"]


_PNG = ImagePart(b"\x89PNG" + b"\x00" * 3000, media_type="image/png")


def test_a_list_with_an_image_and_other_values_sends_the_image_as_a_part() -> None:
    """``["Sales for", 2024, image]``: the number is a text part as the tool writes it and
    the image a part (it was the whole list as JSON, the image as ~4 KB of base64 text)."""
    response = Agent(
        ScriptedModel([call("shot", {}), "ok"]), tools=[_shot(["Sales for", 2024, {"q": 1}, _PNG])]
    ).run("Look.")
    result = _result(response.state)
    assert [type(p).__name__ for p in result.parts] == [
        "TextPart",
        "TextPart",
        "TextPart",
        "ImagePart",
    ]
    assert [p.text for p in result.parts[:3]] == ["Sales for", "2024", '{"q":1}']
    assert result.content == 'Sales for\n2024\n{"q":1}\n[image: image/png, 3,004 bytes]'
    assert RunState.from_json(response.state.to_json()) == response.state


def test_a_text_part_alone_is_its_text() -> None:
    """A tool returning ``TextPart("hi")`` gives the model ``hi``, not the part as JSON; so
    does a result given to resume and one served over MCP."""
    response = Agent(ScriptedModel([call("shot", {}), "ok"]), tools=[_shot(TextPart("hi"))]).run(
        "Look."
    )
    assert _result(response.state).content == "hi"
    snap = Tool("snap", "Take a picture.")
    agent = Agent(ScriptedModel([call("snap", {}, id="c1"), "ok"]), tools=[snap])
    resumed = agent.resume(agent.run("Look.").state, tool_results={"c1": TextPart("there")})
    assert _result(resumed.state).content == "there"
    answer = asyncio.run(_run(_shot(TextPart("served")), {}, None, "c1"))
    assert [block.text for block in answer.content] == ["served"]


def test_resume_writes_a_lists_other_values_as_text_parts() -> None:
    """A result given to resume with an image beside other values keeps the image a part."""
    snap = Tool("snap", "Take a picture.")
    agent = Agent(ScriptedModel([call("snap", {}, id="c1"), "ok"]), tools=[snap])
    resumed = agent.resume(agent.run("Look.").state, tool_results={"c1": [7, _PNG]})
    assert [type(p).__name__ for p in _result(resumed.state).parts] == ["TextPart", "ImagePart"]


def test_the_mcp_server_sends_a_data_url_image_inline() -> None:
    """A tool's ImagePart given as a data: URL is served as an ImageContent of its bytes, not a resource link."""
    import base64

    png = b"\x89PNG\r\n\x1a\n-chart"
    url = "data:image/PNG;base64," + base64.b64encode(png).decode()
    answer = asyncio.run(_run(_shot([TextPart("chart:"), ImagePart(url=url)]), {}, None, "c1"))
    text, image = answer.content
    assert (text.type, text.text) == ("text", "chart:")
    assert (image.type, image.mime_type) == ("image", "image/png")
    assert base64.b64decode(image.data) == png


def test_the_mcp_server_describes_an_image_no_model_can_take() -> None:
    """A tool's empty image, or one whose url is a local path, is served as its description."""
    parts = [ImagePart(b"", media_type="image/png"), ImagePart(url="/tmp/chart.png")]
    answer = asyncio.run(_run(_shot(parts), {}, None, "c1"))
    assert [(block.type, block.text) for block in answer.content] == [
        ("text", "[image: image/png, 0 bytes]"),
        ("text", "[image: image/png, /tmp/chart.png]"),
    ]


def test_the_mcp_server_links_an_image_or_file_given_by_url() -> None:
    """A tool's image or file given as a file: or https: URL is served as a ResourceLink to it."""
    parts = [
        ImagePart(url="file:///tmp/chart.png", media_type="image/PNG"),
        FilePart(url="FILE:///tmp/r.pdf", media_type="application/pdf", filename="r.pdf"),
        ImagePart(url="https://example.com/a.png"),
    ]
    answer = asyncio.run(_run(_shot(parts), {}, None, "c1"))
    assert [(b.type, str(b.uri), b.name, b.mime_type) for b in answer.content] == [
        ("resource_link", "file:///tmp/chart.png", "file:///tmp/chart.png", "image/png"),
        ("resource_link", "FILE:///tmp/r.pdf", "r.pdf", "application/pdf"),
        ("resource_link", "https://example.com/a.png", "https://example.com/a.png", "image/png"),
    ]
