"""Reprs of the values users print are short and informative; the full data stays reachable."""

from __future__ import annotations

import toolfold
from toolfold import Message, generate_text, tool
from toolfold.runtime import FilePart, ImagePart, ReasoningPart, TextPart, ToolCallPart, Usage
from toolfold.runtime import ToolResultPart as Result
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@tool
def square(n: int) -> int:
    """Square a number.

    Args:
        n: The number to square.
    """
    return n * n


def _two_steps() -> toolfold.Response:
    script = [call("square", {"n": 3}, id="c1"), "The answer is 9."]
    return generate_text(ScriptedModel(script), "What is 3 squared?", tools=[square], run_id="r1")


def test_response_repr_is_short_and_says_what_happened() -> None:
    """A two-step run's Response repr fits in a line: reason, text, steps, usage, run id."""
    response = _two_steps()
    assert repr(response) == (
        "Response(finish_reason='stop', text='The answer is 9.', steps=2, "
        "usage=Usage(input_tokens=12, output_tokens=7, requests=2), run_id='r1')"
    )
    assert len(repr(response)) < 300
    # the full data is one attribute away (the log's events have short reprs of their own)
    assert next(iter(response.state.log)).config.tools[0].name == "square"


def test_state_repr_counts_instead_of_listing() -> None:
    """RunState shows its phase, step and counts, not the config and the log."""
    state = _two_steps().state
    assert repr(state) == (
        "RunState(run_id='r1', phase='finished', step=2, messages=4, events=4, "
        "finish_reason='stop', usage=Usage(input_tokens=12, output_tokens=7, requests=2))"
    )


def test_waiting_response_names_the_calls() -> None:
    """A suspended run's repr names the calls that wait for the caller."""
    manual = toolfold.Tool("lookup", "Look up.", {"type": "object", "properties": {}})
    response = generate_text(ScriptedModel([call("lookup", {})]), "go", tools=[manual])
    assert "finish_reason='tool_calls'" in repr(response)
    assert "tool_calls=['lookup']" in repr(response)
    assert "pending_calls=1" in repr(response.state)


def test_structured_output_is_shown_when_it_differs_from_the_text() -> None:
    """With an output_type, the repr shows the structured output after the text."""
    response = generate_text(ScriptedModel(['{"result": 3}']), "go", output_type=int)
    assert "output=3" in repr(response)


def test_step_repr_names_calls_and_results() -> None:
    """A Step shows its finish reason, text or calls, the number of results, its usage."""
    first, second = _two_steps().steps
    assert repr(first) == (
        "Step(index=1, finish_reason='tool_calls', tool_calls=['square'], tool_results=1, "
        "usage=Usage(input_tokens=4, output_tokens=3, requests=1))"
    )
    assert "text='The answer is 9.'" in repr(second)


def test_message_and_part_reprs() -> None:
    """Messages show role and parts; parts show their fields with long text cut."""
    call_part = ToolCallPart("c1", "add", '{"a": 1}', {"a": 1})
    assert repr(Message.assistant("hi", [call_part])) == (
        "Message(role='assistant', parts=[TextPart(text='hi'), "
        """ToolCallPart(id='c1', name='add', arguments='{"a": 1}')])"""
    )
    failed = Result("c1", "add", "boom", is_error=True)
    assert repr(failed) == (
        "ToolResultPart(call_id='c1', tool_name='add', content='boom', is_error=True)"
    )
    long = repr(TextPart("word " * 400))
    assert long.endswith("…' (2,000 chars))")
    assert len(long) < 100
    many = Message.user(*[f"part {i}" for i in range(10)])
    assert repr(many).endswith("... 6 more])")


def test_binary_parts_show_sizes_not_bytes() -> None:
    """Images and files show their size, never their bytes; signatures only their length."""
    assert (
        repr(ImagePart(b"\x89PNG" * 1000))
        == "ImagePart(media_type='image/png', data=<4,000 bytes>)"
    )
    assert repr(FilePart(url="https://example.com/a.pdf", media_type="application/pdf")) == (
        "FilePart(media_type='application/pdf', url='https://example.com/a.pdf')"
    )
    assert repr(ReasoningPart("hmm", signature="s" * 500)) == (
        "ReasoningPart(text='hmm', signature=<500 chars>)"
    )


def test_usage_repr_leaves_out_zero_counts_and_evaluates_back() -> None:
    """Usage shows the non-zero counts, in a form that builds the same value."""
    usage = Usage(input_tokens=3, output_tokens=5, requests=1)
    assert repr(usage) == "Usage(input_tokens=3, output_tokens=5, requests=1)"
    assert eval(repr(usage), {"Usage": Usage}) == usage
    assert repr(Usage()) == "Usage()"
    cached = Usage(147, 30, cached_tokens=100, requests=1, cache_write_tokens=40)
    assert repr(cached) == (
        "Usage(input_tokens=147, output_tokens=30, cached_tokens=100, requests=1, "
        "cache_write_tokens=40)"
    )
    assert eval(repr(cached), {"Usage": Usage}) == cached


def test_usage_adds_every_count() -> None:
    """``+`` sums each count, cache writes included."""
    one = Usage(1, 2, 3, 4, 1, cache_write_tokens=5)
    two = Usage(10, 20, 30, 40, 1, cache_write_tokens=50)
    assert one + two == Usage(11, 22, 33, 44, 2, cache_write_tokens=55)


def test_event_reprs_are_bounded_and_the_events_unchanged() -> None:
    """Events an on_event callback gets have short reprs however large their content;
    equality, pickling and JSON are as before."""
    import pickle

    from toolfold import Agent, RunState
    from toolfold.runtime import (
        ApprovalDenied,
        OutputAccepted,
        OutputRejected,
        RunFailed,
        ToolResultsProvided,
    )

    big = "x" * 1_000_000

    @tool
    def bulky(n: int) -> str:
        """Return a lot of text.

        Args:
            n: Unused.
        """
        return big

    seen: list[object] = []
    agent = Agent(
        ScriptedModel([call("bulky", {"n": 1}), "ok"]),
        tools=[bulky],
        instructions="Be helpful. " * 5000,
    )
    response = agent.run("x" * 50_000, on_event=seen.append)
    others = [
        ApprovalDenied("c1", big),
        ToolResultsProvided([Result("c1", "bulky", big)]),
        OutputAccepted({"text": big}),
        OutputRejected(big),
        RunFailed("error", big, "bulky"),
    ]
    kinds = {type(e).__name__ for e in seen}
    assert {"RunStarted", "ModelResponded", "ToolReturned"} <= kinds
    for event in [*seen, *others, *response.state.log]:
        assert len(repr(event)) < 400, repr(event)[:400]
    (returned,) = [e for e in seen if type(e).__name__ == "ToolReturned"]
    assert "1,000,000 chars" in repr(returned)
    for event in others:
        assert pickle.loads(pickle.dumps(event)) == event
    again = RunState.from_json(response.state.to_json())
    assert list(again.log) == list(response.state.log)


def test_a_choice_written_in_another_unicode_normalization_is_said_to_be_one() -> None:
    """`not_a_choice` and `normalization_variant` say a value that is a choice in another
    Unicode normalization is one (it was a near miss, or nothing), never showing the value."""
    from toolfold.runtime.core._repr import normalization_variant, not_a_choice

    assert not_a_choice("\u212a", ("K", "x")) == (  # KELVIN SIGN, whose NFC is K
        "another str, which differs only in Unicode normalization from 'K' "
        "(neither NFC nor NFD here, NFC in the choice)"
    )
    assert normalization_variant("cafe\u0301", ["tea", "caf\u00e9"]) == (
        "differs only in Unicode normalization from 'caf\u00e9' (NFD here, NFC in the definition)"
    )
    assert normalization_variant("caf\u00e9", ["cafe\u0301"], "there") == (
        "differs only in Unicode normalization from 'cafe\u0301' (NFC here, NFD there)"
    )
    assert normalization_variant("caf\u00e9", ["caf\u00e9", "cafe"]) is None
    # A name that is not text (YAML's 1:) is passed over: it was a TypeError.
    names: list[object] = [1, "cafe\u0301"]
    assert normalization_variant("caf\u00e9", names) is not None
    assert normalization_variant(1, names) is None
