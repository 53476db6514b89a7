"""The Azure OpenAI recipes of docs/openai-compatible.md, run as shown against a local server:
what it receives is what Azure needs (the path, ``?api-version=``, ``api-key``, a fresh token)."""

from __future__ import annotations

import asyncio
import itertools
import sys
import types
from pathlib import Path
from typing import Any

import httpx
import pytest
from scripted_http import Reply, ScriptedServer
from test_base_url_env import CHAT

import toolfold

PAGE = Path(__file__).resolve().parents[2] / "docs" / "openai-compatible.md"
AZURE = "https://my-resource.openai.azure.com"
KEY = "azure-key-0123456789abcdef"


def _recipes() -> list[str]:
    """The section's three ```python blocks, in order."""
    section = PAGE.read_text(encoding="utf-8").split("## Azure OpenAI\n", 1)[1].split("\n## ")[0]
    blocks = [part.split("```", 1)[0] for part in section.split("```python\n")[1:]]
    assert len(blocks) == 3
    return blocks


def _run(recipes: list[str], upto: int, root: str) -> tuple[Any, list[Any]]:
    """The model the recipes up to ``upto`` make, Azure's host replaced by ``root``, and the
    httpx clients they made (closed by `_ask`): their ``httpx`` makes real clients, and
    records them."""
    made: list[Any] = []

    def recorded(cls: type[Any]) -> Any:
        def make(**options: Any) -> Any:
            made.append(cls(**options))
            return made[-1]

        return make

    recording = types.ModuleType("httpx")
    recording.__dict__.update(vars(httpx))
    recording.Client = recorded(httpx.Client)  # type: ignore[attr-defined]
    recording.AsyncClient = recorded(httpx.AsyncClient)  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {}
    for source in recipes[: upto + 1]:
        namespace["httpx"] = recording
        shown = source.replace(AZURE, root).replace("import httpx\n", "")
        exec(compile(shown, "docs/openai-compatible.md", "exec"), namespace)
    return namespace["model"], made


def _ask(model: Any, made: list[Any]) -> None:
    """A blocking call and an async one; then every client is closed."""
    try:
        assert toolfold.generate_text(model, "hello").text == "hi"

        async def call() -> None:
            try:
                assert (await toolfold.agenerate_text(model, "hello")).text == "hi"
            finally:
                await model.aclose()
                for client in made:
                    if isinstance(client, httpx.AsyncClient):
                        await client.aclose()

        asyncio.run(call())
    finally:
        model.close()
        for client in made:
            if isinstance(client, httpx.Client):
                client.close()


@pytest.fixture
def azure_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)


@pytest.mark.usefixtures("azure_env")
def test_the_v1_recipe_sends_the_key_in_api_key(http_server: ScriptedServer) -> None:
    """v1 API: /openai/v1/chat/completions, no query, the key in api-key and no bearer."""
    http_server.add(Reply(json=CHAT), Reply(json=CHAT))
    _ask(*_run(_recipes(), 0, http_server.url))
    for request in http_server.requests:
        assert request.path == "/openai/v1/chat/completions"
        assert request.headers["api-key"] == KEY
        assert "authorization" not in request.headers
        assert request.json()["model"] == "my-gpt-4o-mini"


@pytest.mark.usefixtures("azure_env")
def test_the_deployment_recipe_adds_the_api_version(http_server: ScriptedServer) -> None:
    """A deployment URL: each request, blocking or async, carries ?api-version= and api-key."""
    http_server.add(Reply(json=CHAT), Reply(json=CHAT))
    _ask(*_run(_recipes(), 1, http_server.url))
    paths = [request.path for request in http_server.requests]
    expected = "/openai/deployments/my-gpt-4o-mini/chat/completions?api-version=2024-10-21"
    assert paths == [expected, expected]
    assert all(request.headers["api-key"] == KEY for request in http_server.requests)


@pytest.mark.usefixtures("azure_env")
def test_the_entra_recipe_asks_a_token_per_request(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entra ID: each request's bearer token is the provider's current one (a new one once it
    changes), on the v1 API, with no key sent."""
    tokens = (f"entra-token-{n}" for n in itertools.count(1))
    identity = types.ModuleType("azure.identity")
    identity.DefaultAzureCredential = object  # type: ignore[attr-defined]
    identity.get_bearer_token_provider = (  # type: ignore[attr-defined]
        lambda credential, scope: lambda: next(tokens)
    )
    monkeypatch.setitem(sys.modules, "azure", types.ModuleType("azure"))
    monkeypatch.setitem(sys.modules, "azure.identity", identity)
    http_server.add(Reply(json=CHAT), Reply(json=CHAT))
    _ask(*_run(_recipes(), 2, http_server.url))
    sent = [request.headers["authorization"] for request in http_server.requests]
    assert sent == ["Bearer entra-token-1", "Bearer entra-token-2"]
    assert all(r.path == "/openai/v1/chat/completions" for r in http_server.requests)
    assert all("api-key" not in r.headers for r in http_server.requests)
