"""An MCP server's agent-file entry (`file_entry`) holds no credential, and its refusal shows none."""

from __future__ import annotations

import contextvars
import logging

import pytest

from toolfold import Agent, UsageError
from toolfold.mcp import MCPError, MCPServerHTTP, MCPServerStdio
from toolfold.mcp._entry import args_held, env_held, path_tokens
from toolfold.runtime.drive._open import _noted, _Opening
from toolfold.testing import ScriptedModel


def _refusal(server: MCPServerHTTP | MCPServerStdio) -> str:
    with pytest.raises(UsageError, match="not written to an agent file") as caught:
        server.file_entry()
    return str(caught.value)


def test_an_agent_file_gets_no_query_value_or_credential_named_env() -> None:
    """file_entry refuses a URL's credential-named and bare query values and a stdio env entry
    named like a credential (or holding user:password@), naming them without their values."""
    with pytest.raises(
        UsageError, match=r"query values \(api_key, 1 without a name\), which may be"
    ) as caught:
        MCPServerHTTP("http://127.0.0.1:9/mcp?api_key=sk-QUERY-0451&Xv0451#frag").file_entry()
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


def test_a_bare_query_flag_and_a_url_user_without_password_are_written() -> None:
    """An HTTP server's URL with a bare query word (?login), a user alone or a $VAR password is
    written; a token as the user, or a bare query piece that may be a secret, is refused."""
    for url in ("https://huggingface.co/mcp?login", "https://bob@h/mcp", "https://bob:${PW}@h/x"):
        assert MCPServerHTTP(url).file_entry()["url"] == url
    shown = _refusal(MCPServerHTTP("https://ghp_abcdefghij0451@github.com/mcp"))
    assert "its URL carries a user:password@" in shown
    assert "query values (1 without a name)" in _refusal(MCPServerHTTP("https://h/mcp?Xv0451"))


def test_a_bare_query_piece_is_counted_not_shown() -> None:
    """A query piece without '=' is the value itself: the refusal counts it and never prints it,
    while the names of name=value pieces are listed."""
    shown = _refusal(MCPServerHTTP("https://host/mcp?sk-live-SECRET0451&token=t0451&x-ONE0451"))
    assert "SECRET0451" not in shown
    assert "ONE0451" not in shown
    assert "query values (token, 2 without a name)" in shown


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
    """PWD and OLDPWD (the shell's working directory) and DB_PWD_FILE (a path) are written;
    DB_PWD, DBPWD, MYSQL_PWD are refused."""
    shells = {"PWD": "/srv", "OLDPWD": "/home/ada", "DB_PWD_FILE": "/run/secrets/pw"}
    assert MCPServerStdio("server", env=shells).file_entry()["env"] == shells
    for name in ("DB_PWD", "DBPWD", "MYSQL_PWD", "db_pwd"):
        shown = _refusal(MCPServerStdio("server", env={name: "x"}))
        assert f"its env holds {name} (named like a credential)" in shown


def test_an_env_url_with_query_values_or_a_fragment_is_refused() -> None:
    """An env value holding a URL with credential-named query or fragment values (also inside a
    longer text) is refused as an HTTP server's URL is, naming the entry and the names only."""
    env = {
        "SERVER_URL": "https://h/x?api_key=sk-Q0451",
        "JDBC": "jdbc:postgresql://db/x?user=bob&password=pw0451",
        "CALLBACK": "https://h/cb#access_token=tok0451",
        "HOME_PAGE": "https://example.com/docs",
    }
    shown = _refusal(MCPServerStdio("server", env=env))
    assert "0451" not in shown
    assert (
        "its env holds CALLBACK (a URL with fragment values (access_token)), "
        "JDBC (a URL with query values (password)), "
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
        "args[3] (a URL with query values (password)), args[5] (the value of header Authorization)"
    ) in shown
    plain = ["-m", "mcp_server_time", "--local-timezone", "UTC", "--no-auth", "/srv", "--key-only"]
    assert MCPServerStdio("server", plain).file_entry()["args"] == plain


#: Agent-file entries (command, args, env) that hold no credential and are written as given:
#: every case a review found refused (fp.py in /work/tmp/rev-edges2), less those that do hold one.
WRITTEN: dict[str, tuple[str, list[str], dict[str, str] | None]] = {
    "fs": ("npx", ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"], None),
    "vscode input env": (
        "docker",
        ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/server"],
        {"GITHUB_PERSONAL_ACCESS_TOKEN": "${input:github_token}"},
    ),
    "vscode env ref": ("npx", ["server"], {"API_KEY": "${env:API_KEY}"}),
    "vscode input dashed": ("npx", ["server"], {"PERPLEXITY_API_KEY": "${input:perplexity-key}"}),
    "vscode input flag": ("npx", ["server", "--token", "${input:github_token}"], None),
    "vscode input header": (
        "npx",
        ["mcp-remote", "https://x/mcp", "--header", "Authorization: Bearer ${input:token}"],
        None,
    ),
    "vscode -e assignment": ("docker", ["run", "-e", "TOKEN=${env:TOKEN}", "img"], None),
    "git": ("uvx", ["mcp-server-git", "--repository", "."], None),
    "docker -e NAME": ("docker", ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN"], None),
    "docker --env NAME": ("docker", ["run", "-i", "--rm", "--env", "API_KEY", "img"], None),
    "docker -e=NAME": ("docker", ["run", "-e=API_KEY", "img"], None),
    "docker -e plain": ("docker", ["run", "-e", "GITHUB_TOOLSETS=repos,issues", "img"], None),
    "docker --env-file": ("docker", ["run", "--env-file", ".env", "img"], None),
    "sse query": ("npx", ["mcp-remote", "https://example.com/sse?transport=sse"], None),
    "plain header": (
        "npx",
        ["mcp-remote", "https://x/mcp", "--header", "X-Client: toolfold"],
        None,
    ),
    "header ${VAR}": (
        "npx",
        ["mcp-remote", "https://x/mcp", "--header", "Authorization: Bearer ${AUTH_TOKEN}"],
        None,
    ),
    "header:${VAR}": (
        "npx",
        ["mcp-remote", "https://x/mcp", "--header", "Authorization:${AUTH_HEADER}"],
        None,
    ),
    "postgres": (
        "npx",
        ["@modelcontextprotocol/server-postgres", "postgresql://localhost/db"],
        None,
    ),
    "sqlite": ("uvx", ["mcp-server-sqlite", "--db-path", "~/test.db"], None),
    "puppeteer": ("npx", ["server-puppeteer"], {"PUPPETEER_LAUNCH_OPTIONS": '{"headless": false}'}),
    "--keyboard": ("x", ["--keyboard", "us"], None),
    "--key-file": ("x", ["--key-file", "/etc/ssl/key.pem"], None),
    "--token-env": ("x", ["--token-env", "GITHUB_TOKEN"], None),
    "--auth none": ("x", ["--auth", "none"], None),
    "--auth=none": ("x", ["--auth=none"], None),
    "--password-file": ("x", ["--password-file", "/run/secrets/pw"], None),
    "--author": ("x", ["--author", "me"], None),
    "--authority": ("x", ["--authority", "https://login.microsoftonline.com/common"], None),
    "--oauth-port": ("x", ["--oauth-port", "3334"], None),
    "--passthrough": ("x", ["--passthrough", "all"], None),
    "--max-tokens": ("x", ["--max-tokens", "4096"], None),
    "--monkey": ("x", ["--monkey", "1"], None),
    "--api-key-env": ("x", ["--api-key-env", "OPENAI_API_KEY"], None),
    "--cookies-dir": ("x", ["--cookies-dir", "/tmp/c"], None),
    "--skip-auth path": ("x", ["--skip-auth", "/data"], None),
    "--pass-environment cmd": ("x", ["--pass-environment", "uvx", "server"], None),
    "--sort-key": ("x", ["--sort-key", "name"], None),
    "url fragment": ("x", ["https://docs.example.com/page#section"], None),
    "url plain query": ("x", ["--url", "https://api.example.com/v1?region=eu"], None),
    "jdbc plain query": ("java", ["-jar", "x.jar", "jdbc:postgresql://db/x?ssl=true"], None),
    "git url #main": ("x", ["--repo", "https://github.com/org/repo.git#main"], None),
    "npm spec": ("npx", ["npm:@scope/server@1.2.0"], None),
    "Basic auth words": ("x", ["--mode", "Basic auth"], None),
    "Bearer words": ("x", ["--prompt", "Bearer of news"], None),
    "--pat $VAR": ("x", ["--pat", "$GITHUB_PAT"], None),
    "--token ${VAR}": ("x", ["--token", "${GITHUB_TOKEN}"], None),
    "--api-key=${VAR}": ("x", ["--api-key=${API_KEY}"], None),
    "env hosts": ("x", [], {"DATABASE_HOST": "localhost", "PGPORT": "5432", "NODE_ENV": "prod"}),
    "env url query": ("x", [], {"BASE_URL": "https://x/api?version=2"}),
    "env paths": ("x", [], {"PATH": "/usr/bin", "PYTHONPATH": "/src", "PASSTHROUGH": "1"}),
    "env words": ("x", [], {"KEYBOARD_LAYOUT": "us", "MONGODB_COMPASS": "1", "MONKEYPATCH": "1"}),
    "env bypass": ("x", [], {"NO_PROXY_BYPASS": "1", "FILE_PATTERN": "*.py"}),
    "env port": ("x", [], {"OAUTH_CALLBACK_PORT": "3000", "AZURE_AUTHORITY_HOST": "login"}),
    "env authored": ("x", [], {"AUTHORED_BY": "Ada", "AUTHORITY": "https://login/x"}),
    "env credentials path": ("x", [], {"GOOGLE_APPLICATION_CREDENTIALS": "/keys/sa.json"}),
    "env auth mode": ("x", [], {"AUTH_MODE": "none", "GITHUB_TOKEN": "${GITHUB_TOKEN}"}),
    "env token url": ("x", [], {"OAUTH_TOKEN_URL": "https://login/oauth/token"}),
    "env redis": ("x", [], {"REDIS_URL": "redis://localhost:6379/0"}),
    # Near the short-flag, glued -p, dash-value and URL-path rules, none of them a credential:
    "-p port": ("x", ["-p", "8080"], None),
    "-p profile": ("x", ["-p", "MyProfile"], None),
    "-p8080 glued port": ("redis-cli", ["-p6379"], None),
    "docker -p glued": ("docker", ["run", "-p8080:80/tcp", "img"], None),
    "-pR flags": ("cp", ["-pR", "/a", "/b"], None),
    "find -print": ("find", [".", "-print", "-prune"], None),
    "go -projectId": ("x", ["-projectId", "demo"], None),
    "go -port=": ("x", ["-port=8080", "-profile=dev"], None),
    "-v": ("x", ["-v", "--verbose"], None),
    "-k path": ("x", ["-k", "/etc/ssl/server.key"], None),
    "-k word": ("x", ["-k", "default"], None),
    "curl -k url": ("curl", ["-k", "https://localhost:8443/mcp"], None),
    "-k ${VAR}": ("x", ["-k", "${API_KEY}"], None),
    "--password then flag": ("x", ["--password", "-v", "--password-stdin"], None),
    "--api-key stdin": ("x", ["--api-key", "-"], None),
    "--token --": ("x", ["--token", "--", "cmd"], None),
    "--password -XX:": ("java", ["--password", "-XX:+UseG1GC", "-jar", "s.jar"], None),
    "curl -k -m5": ("curl", ["-k", "-m5", "https://localhost:8443/mcp"], None),
    "--skip-auth -n10": ("x", ["--skip-auth", "-n10"], None),
    "npx -y scoped": ("npx", ["-y", "@scope/pkg", "/usr/bin/x"], None),
    "url plain path": ("x", ["https://api.example.com/v1/users/12345/repos"], None),
    "url uuid": ("x", ["https://host/mcp/550e8400-e29b-41d4-a716-446655440000"], None),
    "url UUID": ("x", ["https://host/mcp/550E8400-E29B-41D4-A716-446655440000"], None),
    "url git sha": (
        "x",
        ["https://github.com/o/r/blob/0123456789abcdef0123456789abcdef01234567/a"],
        None,
    ),
    "url camel word": ("x", ["https://host/MyVeryLongProjectName2024/mcp"], None),
    "url locale": ("x", ["https://example.com/sk-SK/docs"], None),
    "url method": ("x", ["https://host/v1/models/gemini-pro:generateContent"], None),
    "url services": ("x", ["https://host/services/TEAM/BILLING/list"], None),
    "env url path": ("x", [], {"BASE_URL": "https://host/api/v2/projects/demo-project/sse"}),
    # Public URLs whose path segments mix cases and digits but have separators (review fp*.py):
    "hf model": (
        "x",
        ["--model-url", "https://huggingface.co/meta-llama/Meta-Llama-3-8B-Instruct"],
        None,
    ),
    "hf phi": ("x", ["https://huggingface.co/microsoft/Phi-3-mini-4k-instruct"], None),
    "hf qwen": ("x", ["https://huggingface.co/Qwen/Qwen2-VL-7B-Instruct"], None),
    "hf gguf": (
        "x",
        ["https://huggingface.co/bartowski/Meta-Llama-3-8B-Instruct-GGUF/resolve/main/x.gguf"],
        None,
    ),
    "env hf model": ("x", [], {"MODEL_URL": "https://huggingface.co/Qwen/Qwen2-VL-7B-Instruct"}),
    "git branch": (
        "x",
        ["--spec", "https://raw.example.com/o/r/feature/PROJ-1234-add-oauth2-support/api.yaml"],
        None,
    ),
    "release asset": (
        "x",
        ["https://github.com/o/r/releases/download/v1.0.0/github-mcp-server_Linux_x86_64"],
        None,
    ),
    "azure deployment": (
        "x",
        ["https://r.openai.azure.com/openai/deployments/GPT4o-Deployment-2024/chat"],
        None,
    ),
    "notion page": (
        "x",
        ["https://www.notion.so/Team-Wiki-8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d"],
        None,
    ),
    "figma key": ("x", ["https://www.figma.com/file/AbC123dEf456GhI789jk/Design-System"], None),
    "firebase push id": ("x", ["https://x.firebaseio.com/users/-NxYzAbC12dEf34GhIjK"], None),
    # -k's value that is no token: a key file, a kustomize dir, a test name, a sort key, a host:
    "-k key file": ("x", ["-k", "key.pem"], None),
    "-k relative path": ("x", ["-k", "certs/client.key"], None),
    "kubectl -k": ("kubectl", ["apply", "-k", "overlays/prod"], None),
    "pytest -k": ("pytest", ["-k", "test_foo"], None),
    "-k Server1": ("x", ["-k", "Server1"], None),
    "-k glued no token": ("x", ["-keep", "-kv", "-kkey.pem", "-kServer1"], None),
    # public ids of a random look, camelCase names:
    "ipfs cidv0": (
        "x",
        ["https://ipfs.io/ipfs/QmXoypizjW3WknFiJnKLwHCnL72vedxjQkDDP1mXWo6uco"],
        None,
    ),
    "eip-55 address": (
        "x",
        ["https://etherscan.io/address/0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"],
        None,
    ),
    "camelCase": ("x", ["https://h/openai/deployments/OpenAIGpt4oMiniDeployment2024"], None),
    "camelCase acronym": ("x", ["https://h/m/HTTPServerConfigurationVersion2Final3"], None),
    "sort -k": ("sort", ["-k", "2,2"], None),
    "curl -k host:port": ("curl", ["-k", "localhost:8080/mcp"], None),
    "ssh -k": ("ssh", ["-k", "user@host", "cmd"], None),
    # Go/absl, javac and docker single-dash flags starting with -p:
    "go -project_id": ("x", ["-project_id", "demo", "-prometheus_port", "9090"], None),
    "go -pprof_addr": ("x", ["-pprof_addr", ":6060", "-print_config", "-pretty_print"], None),
    "-p2p": ("x", ["-p2p"], None),
    "javac -proc:none": ("javac", ["-proc:none", "A.java"], None),
    "docker -p${PORT}": ("docker", ["run", "-p${PORT}:80", "-p$HOST_PORT:80", "img"], None),
    "docker -p[::1]": ("docker", ["run", "-p[::1]:8080:80", "img"], None),
    # a bare query flag, an image digest, a user with no password or a $VAR one, auth
    # kinds, providers and servers that are words or hosts, a Windows path:
    "hf ?login": ("npx", ["-y", "mcp-remote", "https://huggingface.co/mcp?login"], None),
    "image digest": (
        "docker",
        ["run", "ghcr.io/github/github-mcp-server:v0.5.0@sha256:" + "3f4e" * 16],
        None,
    ),
    "url user only": ("x", ["postgresql://user@localhost/db"], None),
    "url ${VAR} password": ("x", ["postgresql://postgres:${PGPASSWORD}@host/db"], None),
    "--auth oauth2": ("x", ["--auth", "oauth2", "--auth-type", "OAuth"], None),
    "--auth-provider": (
        "x",
        ["--auth-provider", "GitHub", "--auth-server", "auth.example.com"],
        None,
    ),
    "windows path": ("x", [], {"GOOGLE_APPLICATION_CREDENTIALS": "C:\\keys\\sa.json"}),
}


@pytest.mark.parametrize("case", list(WRITTEN))
def test_entries_without_a_credential_are_written(case: str) -> None:
    """Paths, URLs without credential-named query values, plain words, numbers, $VARIABLE
    references and names that only look like credentials are written as given."""
    command, args, env = WRITTEN[case]
    entry = MCPServerStdio(command, args, env=env, name="s").file_entry()
    assert (entry.get("args", []), entry.get("env")) == (args, env)


#: Entries holding a credential (the review's fn.py, medium and high), refused: the case, the
#: args and env, and what the refusal names. Each secret holds "0451", never shown.
REFUSED: dict[str, tuple[list[str], dict[str, str] | None, str]] = {
    "docker -e NAME=secret": (
        ["run", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN=ghp_abcdef12345678900451", "img"],
        None,
        "args[2] (a token with a well-known prefix, the value of GITHUB_PERSONAL_ACCESS_TOKEN=)",
    ),
    "docker -e API_KEY=": (["run", "-e", "API_KEY=sk-0451", "img"], None, "API_KEY="),
    "--env=NAME=secret": (["run", "--env=OPENAI_API_KEY=sk-0451"], None, "OPENAI_API_KEY="),
    "env NAME=secret cmd": (["OPENAI_API_KEY=sk-0451", "npx", "s"], None, "OPENAI_API_KEY="),
    "sh -c": (["-c", "API_KEY=sk-0451 npx server"], None, "args[1] (the value of API_KEY=)"),
    "X-API-Key header": (["--header", "X-API-Key: sk-0451"], None, "header X-API-Key"),
    "--header=x-api-key:": (["--header=x-api-key:sk-0451"], None, "header x-api-key"),
    "-H Authorization": (["-H", "Authorization: Bearer sk0451"], None, "header Authorization"),
    "lower authorization": (["-H", "authorization:bearer sk0451"], None, "header authorization"),
    "Bearer anywhere": (["--upstream", "Bearer abc0451xyz"], None, "an Authorization header's"),
    "Basic anywhere": (["--upstream", "Basic Ym9iOnB3MDQ1MQ=="], None, "an Authorization header's"),
    "slack token": (["xoxb-1234-5678-ab0451"], None, "args[0] (a token with a well-known prefix)"),
    "github pat": (["ghp_abcdefghijklmnopqrstuvwxyz0451"], None, "a token with a well-known"),
    "openai key": (["--model", "gpt", "sk-proj-abcdefghijklmnop0451"], None, "args[2] (a token"),
    "aws key id": (["AKIAABCDEFGHIJ120451"], None, "a token with a well-known prefix"),
    "gitlab token": (["glpat-abcdefghij0451"], None, "a token with a well-known prefix"),
    "conn string": (["--cs", "Server=db;User Id=sa;Password=h0451;"], None, "Password="),
    "mysql dsn": (["--dsn", "root:h0451@tcp(localhost:3306)/db"], None, "args[1] (a user:pass"),
    "bare userinfo": (["bob:pw0451@db.example.com:5432/x"], None, "a user:password@"),
    "url userinfo": (["--db=postgres://bob:pw0451@db/x"], None, "a URL with a user:password@"),
    "url in json": (['{"url":"https://bob:pw0451@h/x"}'], None, "a URL with a user:password@"),
    "url token query": (["https://h/sse?transport=sse&token=t0451"], None, "query values (token)"),
    "--apikey": (["--apikey", "sk0451"], None, "args[1] (the value after --apikey)"),
    "--access_token": (["--access_token", "t0451"], None, "the value after --access_token"),
    "--aws-secret-access-key": (["--aws-secret-access-key", "abc0451"], None, "after --aws"),
    "--client-secret": (["--client-secret", "abc0451"], None, "after --client-secret"),
    "--password word": (["--password", "hunter"], None, "the value after --password"),
    "--auth secret": (["--auth", "Xy0451"], None, "the value after --auth"),
    "--token=": (["--token=t0451"], None, "args[0] (the value of --token)"),
    "env JSON headers": (
        [],
        {"OPENAPI_MCP_HEADERS": '{"Authorization": "Bearer ntn_0451"}'},
        "the value of header Authorization",
    ),
    "env JSON api key": ([], {"HEADERS": '{"X-Api-Key":"sk-0451"}'}, "header X-Api-Key"),
    "env DSN": ([], {"DATABASE_URL": "postgres://bob:pw0451@db/x"}, "a URL with a user:password@"),
    "env DSN query": ([], {"DATABASE_URL": "postgres://db/x?password=pw0451"}, "(password)"),
    "env PGPASSWORD": ([], {"PGPASSWORD": "x0451"}, "PGPASSWORD (named like a credential)"),
    "env token any value": ([], {"GITHUB_PERSONAL_ACCESS_TOKEN": "x0451"}, "(named like a"),
    "env DBPWD": ([], {"DBPWD": "x0451"}, "DBPWD (named like a credential)"),
    "env AUTHORIZATION": ([], {"HTTP_AUTHORIZATION": "x0451"}, "HTTP_AUTHORIZATION (named"),
    "env credentials json": ([], {"GCP_CREDENTIALS": '{"k": "0451"}'}, "GCP_CREDENTIALS (named"),
    "-k short key": (["-k", "sk-0451"], None, "args[1] (the value after -k)"),
    "-k=secret": (["-k=Zv8QpL2mWx7Rt4Ky9Jb30451"], None, "args[0] (the value of -k)"),
    "-k random": (["-k", "Zv8QpL2mWx7Rt4Ky9Jb30451"], None, "args[1] (the value after -k)"),
    "mysql -p glued": (["-uroot", "-phunter0451", "db"], None, "args[1] (a password glued to -p)"),
    "--password -value": (["--password", "-hunter0451"], None, "args[1] (the value after --pass"),
    "--token -value": (["--token", "-Xy0451!"], None, "args[1] (the value after --token)"),
    # (the value taken is no flag for the next argument, whose refusal would show it)
    "--password -value db": (["--password", "-Pass0451!", "MyDb"], None, "args[1] (the value"),
    "slack webhook": (
        ["https://hooks.example.com/services/T000/B000/XXXX0451"],
        None,
        "args[0] (a URL with a token in path segment 4)",
    ),
    "telegram bot": (
        ["--url", "https://api.telegram.org/bot123456:ABC-DEF0451/sendMessage"],
        None,
        "args[1] (a URL with a token in path segment 1)",
    ),
    "key in path": (["https://host/mcp/sk-abcdefghijklmnop0451"], None, "token in path segment 2"),
    "random path": (["https://h/s/Zv8QpL2mWx7Rt4Ky9Jb30451/mcp"], None, "token in path segment 2"),
    "base64 path": (["https://h/s/OGE3ZmQ0YjktNTY1Ny00NDk2LWI4NT0451==/mcp"], None, "segment 2"),
    "discord webhook": (
        ["https://discord.com/api/webhooks/123456789012345678/Ab-Cd_0451"],
        None,
        "args[0] (a URL with a token in path segment 4)",
    ),
    "jwt path": (["https://h/eyJhbGciOiJI.eyJzdWIiOiIx.abc0451"], None, "token in path segment 1"),
    "env webhook": (
        [],
        {"SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T01AB/B02CD/Xy0451"},
        "SLACK_WEBHOOK_URL (a URL with a token in path segment 4)",
    ),
    "-k glued random": (["-kZv8QpL2mWx7Rt4Ky9Jb30451"], None, "args[0] (a key glued to -k)"),
    "-k glued prefix": (["-v", "-ksk-a0451"], None, "args[1] (a key glued to -k)"),
    "random, consonant runs": (["https://h/Qhbdkwe3Zmxnvuo7Plrtqa0451"], None, "segment 1"),
    "random, 5 capitals": (["https://h/9RC3MOISQBrCokaqd0eLUB0451"], None, "segment 1"),
    "-p name with digits": (["-pDatabase0451"], None, "args[0] (a password glued to -p)"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_entries_holding_a_credential_are_refused(case: str) -> None:
    """Credential-named assignments, headers, flags and env entries, tokens with a well-known
    prefix, Bearer/Basic tokens and user:password@ are refused, named without the secret."""
    args, env, named = REFUSED[case]
    shown = _refusal(MCPServerStdio("x", args, env=env))
    assert named in shown
    assert "0451" not in shown


def test_an_http_server_with_a_token_in_its_url_path_is_refused_without_showing_it() -> None:
    """An HTTP server whose URL path holds a token (a Slack webhook's secret, a Telegram bot
    token, a well-known prefix) is refused naming the path segment; the URL its default name
    shows has that segment masked, and a URL with ordinary segments and ids is written."""
    for url, segment in (
        ("https://hooks.example.com/services/T000/B000/XXXX0451", 4),
        ("https://api.telegram.org/bot123456:ABC-0451/mcp?v=1", 1),
        ("https://host/mcp/sk-abcdefghijklmnop0451/sse", 2),
    ):
        shown = _refusal(MCPServerHTTP(url))
        assert f"its URL carries a token in path segment {segment}, which" in shown
        assert "0451" not in shown
        assert "/***" in shown
    ids = "https://host/v1/projects/550e8400-e29b-41d4-a716-446655440000/mcp"
    assert MCPServerHTTP(ids).file_entry()["url"] == ids


def test_an_http_servers_default_name_masks_a_path_token_wherever_it_is_shown() -> None:
    """An HTTP server named by default after a URL with a token in its path shows that segment
    masked in every refusal (a requires_approval predicate's too), its repr and its errors; a
    URL with a tab (which urlsplit drops from the path) is refused, not crashed on."""
    url = "https://hooks.example.com/mcp/sk-abcdefghijklmnop0451/sse"
    masked = "'https://hooks.example.com/mcp/***/sse'"
    with pytest.raises(UsageError, match="requires_approval predicate") as caught:
        MCPServerHTTP(url, requires_approval=lambda tool: True).file_entry()
    assert masked in str(caught.value)
    assert "0451" not in str(caught.value)
    with pytest.raises(UsageError, match="timeout takes a positive, finite number") as caught:
        MCPServerHTTP(url, timeout=0)
    assert masked in str(caught.value)
    server = MCPServerHTTP(url)
    assert repr(server) == f"MCPServerHTTP(name={masked}, closed)"
    assert (
        str(server._error(f"GET {url} failed")) == f"MCP server {masked}: GET {masked[1:-1]} failed"
    )
    assert server.name == masked[1:-1]
    shown = _refusal(MCPServerHTTP("https://h/a\tb/sk-abcdefghijklmnop0451/x"))
    assert "its URL carries a token in path segment 2" in shown
    assert "0451" not in shown


class _CloseFails(MCPServerHTTP):
    """An HTTP server that opens without I/O and fails to close."""

    def open(self) -> None:
        pass

    def close(self) -> None:
        raise MCPError(self.name, "close failed")


def test_a_path_token_of_a_default_name_is_masked_in_mermaid_close_notes_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The default name of an HTTP server with a token in its URL path is masked in
    to_mermaid(), the close-failure note of a run's error and the log of a failed close."""
    server = _CloseFails("https://hooks.example.com/mcp/Zv8QpL2mWx7Rt4Ky9Jb3xY7q/sse")
    masked = "https://hooks.example.com/mcp/***/sse"
    diagram = Agent(ScriptedModel([]), name="a", tools=[server]).to_mermaid()
    assert f"MCP {masked}" in diagram
    error = RuntimeError("run failed")
    assert _noted(error, MCPError(server.name, "close failed"), server)
    assert f"closing tool source {masked!r}" in " ".join(error.__notes__)
    opening = _Opening(server)
    assert opening.abandon()
    with caplog.at_level(logging.WARNING):
        contextvars.copy_context().run(opening.run)  # (as its worker thread does)
    assert f"closing tool source {masked!r}" in caplog.text
    shown = diagram + " ".join(error.__notes__) + caplog.text
    assert "Zv8QpL2mWx7Rt4Ky9Jb3xY7q" not in shown


def test_every_refused_arg_and_env_entry_is_named_in_one_error() -> None:
    """A server with credentials in both args and env is refused once, naming all of them, and
    the error says how to pass a secret instead."""
    shown = _refusal(
        MCPServerStdio("x", ["--token", "t0451", "-v"], env={"API_KEY": "k0451", "LEVEL": "1"})
    )
    assert (
        "its args hold args[1] (the value after --token); "
        "its env holds API_KEY (named like a credential), which may be credentials"
    ) in shown
    assert "environment at run time" in shown
    assert "*_FILE" in shown
    assert "0451" not in shown


def test_a_listing_with_null_meta_is_a_tool_without_approval() -> None:
    """A listed tool whose "_meta" is null (as a server may send it) is built, not requiring
    approval."""
    spec = {"name": "t", "description": "d", "inputSchema": {"type": "object"}, "_meta": None}
    assert MCPServerStdio("x")._tool(spec).requires_approval is False


def test_crafted_long_arguments_and_urls_are_read_right() -> None:
    """Long crafted values (a Slack-like path, runs of eyJ, a long word, user:...), which
    the patterns once took quadratic time over, are read as what they are: none is a path
    token, a password or an env credential, and a random run glued to -k is a key. (Their
    time is measured in bench/bench_mcp_entry.py, not asserted here.)"""
    n = 10_000
    crafted = [
        "https://h/services/T0/B" + "0" * n + "/" + "a" * n + "!",
        "https://h/services/T" + "0" * n + "x",
        "https://h/" + "eyJ" * n,
        "a" * n + ":" + "b" * n,
        "a." * n,
    ]
    for value in crafted:
        assert (path_tokens(value), args_held([value]), env_held({"X": value})) == ([], [], [])
    glued = "-k" + "Ab1" * n
    assert args_held([glued]) == ["args[0] (a key glued to -k)"]
