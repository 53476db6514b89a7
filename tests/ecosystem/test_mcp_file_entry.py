"""An MCP server's agent-file entry (`file_entry`) holds no credential, and its refusal shows none."""

from __future__ import annotations

import pytest

from toolfold import UsageError
from toolfold.mcp import MCPServerHTTP, MCPServerStdio


def _refusal(server: MCPServerHTTP | MCPServerStdio) -> str:
    with pytest.raises(UsageError, match="not written to an agent file") as caught:
        server.file_entry()
    return str(caught.value)


def test_an_agent_file_gets_no_query_value_or_credential_named_env() -> None:
    """file_entry refuses a URL's query values and fragment and a stdio env entry named like a
    credential (or holding user:password@), naming them without their values."""
    with pytest.raises(
        UsageError, match=r"query values \(api_key, 1 without a name\) and a fragment"
    ) as caught:
        MCPServerHTTP("http://127.0.0.1:9/mcp?api_key=sk-QUERY-0451&v#frag").file_entry()
    assert "sk-QUERY-0451" not in str(caught.value)
    env = {
        "GITHUB_TOKEN": "ghp_ENV0451",
        "DATABASE_URL": "postgres://bob:pw0451@db/x",
        "LOG_LEVEL": "debug",
    }
    shown = _refusal(MCPServerStdio("server", env=env))
    assert (
        "its env holds DATABASE_URL (a URL with a user:password@), "
        "GITHUB_TOKEN (named like a credential), which may be credentials"
    ) in shown
    assert "0451" not in shown
    plain = {"LOG_LEVEL": "debug", "GIT_AUTHOR_NAME": "Ada"}
    assert MCPServerStdio("server", env=plain).file_entry()["env"] == plain


def test_a_bare_query_piece_is_counted_not_shown() -> None:
    """A query piece without '=' is the value itself: the refusal counts it and never prints it,
    while the names of name=value pieces are listed."""
    shown = _refusal(MCPServerHTTP("https://host/mcp?sk-live-SECRET0451&region=eu&x-ONE0451"))
    assert "SECRET0451" not in shown
    assert "ONE0451" not in shown
    assert "query values (region, 2 without a name)" in shown


def test_authorization_and_bearer_env_entries_are_refused() -> None:
    """An env entry named AUTHORIZATION, HTTP_AUTHORIZATION or BEARER, or whose value is an
    Authorization header's ('Bearer ...'), is refused; AUTHOR and AUTHORS names are written."""
    for name in ("AUTHORIZATION", "HTTP_AUTHORIZATION", "BEARER", "MY_BEARER"):
        shown = _refusal(MCPServerStdio("server", env={name: "x0451"}))
        assert f"its env holds {name} (named like a credential)" in shown
        assert "x0451" not in shown
    for value in ("Bearer sk-ENV0451", "bearer sk-ENV0451", "Basic Ym9iOnB3MDQ1MQ=="):
        shown = _refusal(MCPServerStdio("server", env={"UPSTREAM": value}))
        assert "its env holds UPSTREAM (an Authorization header's value)" in shown
        assert "0451" not in shown
    plain = {"GIT_AUTHOR_NAME": "Ada", "AUTHORS": "Ada, Bob", "MODE": "Bearer"}
    assert MCPServerStdio("server", env=plain).file_entry()["env"] == plain


def test_pwd_is_a_credential_only_as_part_of_a_longer_name() -> None:
    """PWD and OLDPWD (the shell's working directory) are written; DB_PWD, MYSQL_PWD and
    PWD_FILE are refused."""
    shells = {"PWD": "/srv", "OLDPWD": "/home/ada"}
    assert MCPServerStdio("server", env=shells).file_entry()["env"] == shells
    for name in ("DB_PWD", "MYSQL_PWD", "PWD_FILE", "db_pwd"):
        shown = _refusal(MCPServerStdio("server", env={name: "x"}))
        assert f"its env holds {name} (named like a credential)" in shown


def test_an_env_url_with_query_values_or_a_fragment_is_refused() -> None:
    """An env value holding a URL with query values or a fragment (also inside a longer text) is
    refused as an HTTP server's URL is, naming the entry and the query's names, never a value."""
    env = {
        "SERVER_URL": "https://h/x?api_key=sk-Q0451",
        "JDBC": "jdbc:postgresql://db/x?user=bob&password=pw0451",
        "CALLBACK": "https://h/cb#access_token=tok0451",
        "HOME_PAGE": "https://example.com/docs",
    }
    shown = _refusal(MCPServerStdio("server", env=env))
    assert "0451" not in shown
    assert (
        "its env holds CALLBACK (a URL with a fragment), "
        "JDBC (a URL with query values (user, password)), "
        "SERVER_URL (a URL with query values (api_key)), which"
    ) in shown
    plain = {"HOME_PAGE": "https://example.com/docs", "PROXY": "http://proxy:3128"}
    assert MCPServerStdio("server", env=plain).file_entry()["env"] == plain


def test_credentials_in_args_are_refused_by_position() -> None:
    """An arg holding a URL's user:password@ or query values, or the value after (or '='-joined
    to) a flag named like a credential, is refused, named by its position and flag, never shown."""
    postgres = ["-y", "@modelcontextprotocol/server-postgres", "postgresql://bob:pw0451@db/x"]
    shown = _refusal(MCPServerStdio("npx", postgres))
    assert "its args hold args[2] (a URL with a user:password@), which" in shown
    args = [
        "--api-key",
        "sk-ARG0451",
        "--token=tok0451",
        "--db=redis://db:6379/0?password=pw0451",
        "--header",
        "Authorization: Bearer hdr0451",
    ]
    shown = _refusal(MCPServerStdio("server", args))
    assert "0451" not in shown
    assert (
        "its args hold args[1] (the value after --api-key), args[2] (the value of --token), "
        "args[3] (a URL with query values (password)), args[5] (an Authorization header's value)"
    ) in shown
    plain = ["-m", "mcp_server_time", "--local-timezone", "UTC", "--no-auth", "/srv", "--key-only"]
    assert MCPServerStdio("server", plain).file_entry()["args"] == plain
