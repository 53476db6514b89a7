"""A Hypothesis state machine feeds `reduce` plausible, hostile and repeated events.

Each event either gives a state that keeps every invariant (each call answered
once, usage never decreasing, the log replaying to the state, an exact JSON
round trip) or is refused with `InvalidTransitionError` / `InvalidEventError`
without touching the state it was given. The budget is fixed and derandomized,
so CI runs the same `EXAMPLES` x up to `STEPS` events every time; the test
counts the events accepted and refused over the whole run and fails unless
both happened (a strategy drawing only refused events would check nothing).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from test_core_properties import _check_invariants, configs, next_events, noise

from toolfold import InvalidTransitionError
from toolfold.runtime import (
    ApprovalDenied,
    ApprovalGranted,
    Event,
    ModelResponded,
    RunConfig,
    RunState,
    ToolResultPart,
    ToolResultsProvided,
    ToolReturned,
    initial_state,
    reduce,
    replay,
)

EXAMPLES = 150
STEPS = 30

#: Events accepted and refused, and the examples run, summed over one run of the test.
TALLY: Counter[str] = Counter()


class ReduceMachine(RuleBasedStateMachine):
    """Holds one run's state and the counts the invariants compare."""

    state: RunState

    def __init__(self) -> None:
        super().__init__()
        self.previous_usage = (0, 0, 0)
        self.accepted = 0
        self.refused = 0

    @initialize(config=configs())
    def start(self, config: RunConfig) -> None:
        """A fresh run with a random configuration."""
        self.state = initial_state("go", config, run_id="r")

    def _feed(self, event: Event) -> None:
        before = self.state
        snapshot = before.to_json()
        refused: InvalidTransitionError | None = None
        try:
            new = reduce(before, event)
        except InvalidTransitionError as exc:
            refused = exc
        assert before.to_json() == snapshot  # the input state is untouched either way
        if refused is not None:
            assert refused.state is before
            self.refused += 1
            return
        self.state = new
        self.accepted += 1

    def teardown(self) -> None:
        """Add this example's counts to the test's tally."""
        TALLY.update(accepted=self.accepted, refused=self.refused, examples=1)

    @rule(data=st.data())
    def plausible_event(self, data: Any) -> None:
        """The event the next effect asks for (now and then a random one)."""
        self._feed(data.draw(next_events(self.state)))

    @rule(data=st.data())
    def noise_event(self, data: Any) -> None:
        """An event that usually contradicts the state."""
        self._feed(data.draw(noise()))

    @rule(data=st.data())
    def answer_again(self, data: Any) -> None:
        """A second answer (result, approval, denial) for a call that may already have one."""
        ids = [c.call.id for c in self.state.calls] or ["none"]
        call_id = data.draw(st.sampled_from(ids))
        event = data.draw(
            st.sampled_from(
                [
                    ToolReturned(call_id, "again"),
                    ApprovalGranted(call_id),
                    ApprovalDenied(call_id, "again"),
                    ToolResultsProvided([ToolResultPart(call_id, "x", "again")]),
                ]
            )
        )
        self._feed(event)

    @invariant()
    def every_call_is_answered_once(self) -> None:
        """No call id has two results in the conversation or the call table."""
        answered = Counter(
            r.call_id for m in self.state.messages if m.role == "tool" for r in m.tool_results
        )
        assert all(n == 1 for n in answered.values()), answered
        for c in self.state.calls:
            if c.status == "done":
                assert c.result is not None
                assert c.result.call_id == c.call.id
        made = [
            c.id
            for e in self.state.events
            if isinstance(e, ModelResponded)
            for c in e.response.tool_calls
        ]
        assert len(made) == len(set(made))

    @invariant()
    def usage_never_decreases(self) -> None:
        """Usage only grows from one accepted event to the next."""
        usage = self.state.usage
        now = (usage.input_tokens, usage.output_tokens, usage.requests)
        assert all(a <= b for a, b in zip(self.previous_usage, now, strict=True))
        self.previous_usage = now

    @invariant()
    def the_log_is_the_state(self) -> None:
        """The log replays to the state, JSON round-trips it exactly, and the core's own invariants hold."""
        assert replay(self.state.events) == self.state
        assert RunState.from_json(self.state.to_json()) == self.state
        _check_invariants(self.state)


SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_reduce_state_machine() -> None:
    """Random event sequences keep every invariant or are refused cleanly, and both happen."""
    TALLY.clear()
    run_state_machine_as_test(ReduceMachine, settings=SETTINGS)
    print(
        f"reduce state machine: {TALLY['examples']} examples (up to {STEPS} steps each), "
        f"{TALLY['accepted']} events accepted, {TALLY['refused']} refused"
    )
    assert TALLY["accepted"] > 0, TALLY  # the machine fed events reduce took, not only noise
    assert TALLY["refused"] > 0, TALLY  # and events it refused
