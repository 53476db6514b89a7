"""Replay every recorded OpenAI Chat Completions exchange through a real model over HTTP."""

from __future__ import annotations

import pytest
from cassettes import folder, load, normalise_body, replay
from replay_expectations import OPENAI

FOLDER = "openai-chat-completions"
CASES = [(name, i) for name in folder(FOLDER) for i in range(len(load(name)))]


def test_every_recorded_exchange_has_an_expectation() -> None:
    """The expectation table covers exactly the exchanges on disk."""
    on_disk = {(name.split("/", 1)[1], i) for name, i in CASES}
    assert on_disk == set(OPENAI)
    assert len(folder(FOLDER)) == 11


@pytest.mark.parametrize(("name", "index"), CASES, ids=[f"{n.split('/')[1]}#{i}" for n, i in CASES])
def test_recorded_response_parses_to_what_the_recording_shows(name: str, index: int) -> None:
    """Each recorded response or stream becomes the recorded calls, text, usage or error."""
    result, _, _ = replay(name, index, "openai")
    OPENAI[(name.split("/", 1)[1], index)].check(result)


@pytest.mark.parametrize(("name", "index"), CASES, ids=[f"{n.split('/')[1]}#{i}" for n, i in CASES])
def test_request_rebuilt_from_neutral_messages_matches_the_recording(name: str, index: int) -> None:
    """Encoding the conversation the recording expresses gives the recorded body, semantically."""
    _, sent, recorded = replay(name, index, "openai")
    assert normalise_body(sent, recorded=recorded) == normalise_body(recorded)
