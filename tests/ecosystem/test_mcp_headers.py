"""An HTTP MCP server's ``headers=`` are checked when it is built, as a model's ``headers=`` are."""

from __future__ import annotations

import pytest

from toolfold import UsageError
from toolfold.adapters import Secret
from toolfold.mcp import MCPServerHTTP

URL = "http://127.0.0.1:9/mcp"  # nothing listens: a refusal must come before any connection
KEY = "sk-HEADER-0451-SECRET"


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"X-Team": "a\r\nX-Evil: 1"}, "headers['X-Team']: the value contains CR, LF or NUL"),
        ({"X-Team": "a\x00b"}, "headers['X-Team']: the value contains CR, LF or NUL"),
        ({"Authorization": f"Bearer {KEY}\n"}, "headers['Authorization']: the value contains CR"),
        ({"X-Team": "a\x7fb"}, "headers['X-Team']: the value contains a control character"),
        ({"x a": "1"}, "headers: 'x a' is not a valid HTTP header name"),
        ({"Content-Length": "3"}, "headers: 'Content-Length' is set by the transport"),
        ({"x-team": "a", "X-Team": "b"}, "headers: 'X-Team' is given twice"),
        ({"Connection": "keep-alive"}, "headers: 'Connection' is set by the transport"),
        ({"Keep-Alive": "timeout=5"}, "headers: 'Keep-Alive' is set by the transport"),
        ({"TE": "trailers"}, "headers: 'TE' is set by the transport"),
        ({"Upgrade": "h2c"}, "headers: 'Upgrade' is set by the transport"),
    ],
)
def test_a_header_a_model_refuses_is_refused_when_the_server_is_built(
    headers: dict[str, str], said: str
) -> None:
    """CR/LF/NUL, control characters, bad or framing names and a name given twice are a
    UsageError naming the server, option and header (they failed only on open, as the
    HTTP client's own "could not start")."""
    with pytest.raises(UsageError) as raised:
        MCPServerHTTP(URL, headers=headers, name="crm")
    assert str(raised.value).startswith(f"MCP server 'crm': {said}")
    assert "X-Evil" not in str(raised.value)
    assert KEY not in str(raised.value)


@pytest.mark.parametrize("name", ["Authorization", "x-api-key", "Proxy-Authorization", "api-key"])
def test_a_credential_headers_non_ascii_value_is_refused_never_quoted(name: str) -> None:
    """A credential header's (or a Secret's) non-ASCII value is refused, naming the header,
    never the value (it failed on open as a UnicodeEncodeError)."""
    for value in (f"Bearer {KEY}é", Secret(f"{KEY}\u2019")):
        with pytest.raises(UsageError) as raised:
            MCPServerHTTP(URL, headers={name: value}, name="crm")
        said = str(raised.value)
        assert said.startswith(f"MCP server 'crm': headers[{name!r}]: the value has non-ASCII")
        assert KEY not in said


def test_a_non_ascii_value_of_another_header_is_sent_as_utf8(http_tools_server: str) -> None:
    """'Mon appli été' in X-App reaches the server (UTF-8 encoded, as a model sends it):
    the server opens and lists its tools (before, opening failed on a UnicodeEncodeError)."""
    server = MCPServerHTTP(http_tools_server, headers={"X-App": "Mon appli été"})
    with server:
        assert "add" in {tool.name for tool in server.tools()}


@pytest.mark.parametrize("value", ["", Secret("")])
def test_an_empty_header_value_builds_the_server(value: str | Secret) -> None:
    """An empty header value builds the server (it raised a bare IndexError
    while its credential forms were gathered for scrubbing)."""
    server = MCPServerHTTP(URL, headers={"X-Team": value, "Authorization": f"Bearer {KEY}"})
    assert KEY not in repr(server)
