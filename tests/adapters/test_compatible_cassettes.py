"""Replay every recorded Groq, Mistral and OpenAI-compatible exchange through a real model."""

from __future__ import annotations

import pytest

from cassettes import folder, load, normalise_body, replay
from replay_expectations import (
    COMPATIBLE,
    COMPATIBLE_PROVIDERS,
    GROQ,
    MISTRAL,
    Answer,
    Failure,
)

TABLES: dict[str, dict[tuple[str, int], Answer | Failure]] = {
    "groq-chat-completions": GROQ,
    "mistral-chat-completions": MISTRAL,
    "openai-compatible": COMPATIBLE,
}
CASES = [
    (name, i)
    for folder_name in TABLES
    for name in folder(folder_name)
    for i in range(len(load(name)))
]
IDS = [f"{n}#{i}" for n, i in CASES]


def _provider(name: str) -> tuple[str, dict[str, str]]:
    folder_name, file = name.split("/", 1)
    if folder_name == "groq-chat-completions":
        return "groq", {}
    if folder_name == "mistral-chat-completions":
        return "mistral", {}
    provider, base_url = COMPATIBLE_PROVIDERS[file]
    return provider, ({"base_url": base_url} if base_url else {})


@pytest.mark.parametrize("folder_name", sorted(TABLES))
def test_every_recorded_exchange_has_an_expectation(folder_name: str) -> None:
    """Each folder's expectation table covers exactly the exchanges on disk."""
    on_disk = {(n.split("/", 1)[1], i) for n, i in CASES if n.startswith(folder_name + "/")}
    assert on_disk == set(TABLES[folder_name])


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_recorded_response_parses_to_what_the_recording_shows(name: str, index: int) -> None:
    """Each recorded response or stream becomes the recorded calls, text, usage or error."""
    provider, options = _provider(name)
    result, _, _ = replay(name, index, provider, **options)
    folder_name, file = name.split("/", 1)
    TABLES[folder_name][(file, index)].check(result)


@pytest.mark.parametrize(("name", "index"), CASES, ids=IDS)
def test_request_rebuilt_from_neutral_messages_matches_the_recording(name: str, index: int) -> None:
    """Encoding the conversation the recording expresses gives the recorded body, semantically."""
    provider, options = _provider(name)
    _, sent, recorded = replay(name, index, provider, **options)
    assert normalise_body(sent, recorded=recorded) == normalise_body(recorded)
