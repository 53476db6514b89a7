"""The keys `resume` answers waiting calls by, across a run's tree of sub-runs.

A call's key is its id, or its path (the ids of the suspended calls down to
it, joined by ``/``) when other calls wait under the same id, or its bound key
(``id#<fingerprint>``, see `toolfold.runtime.approval_key`) when that path
names another call too: every key names one call. Pure functions of a
`RunState` (`RunState.keyed_pending_approvals` reads them; the resume path
checks keys with them).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import re
from collections.abc import Iterator
from typing import Any

from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._state import CallState, CallStatus, RunState

# An approval key bound to its call: the call's key, "#", 32 hex digits (see `approval_key`).
BOUND_KEY = re.compile(r"(.+)#([0-9a-f]{32})")


def fingerprint(state: RunState, path: tuple[str, ...], found: CallState) -> str:
    """What a bound key holds of its call: a digest of each run down to it, and the call.

    Every run on the way counts with its id and step (a sub-run asking again
    at a later step of its caller is another call); the call with its id,
    tool, argument text and the arguments decoded from it (what the tool
    gets: a stored state cannot change one and not the other unnoticed).
    Numbers count by value, as a signed state's signature counts them
    (`canonical_json`): ``100.0`` and ``100`` are one argument, so a key still
    matches its call once the state went through a browser's
    ``JSON.parse``/``JSON.stringify``, which writes ``100.0`` as ``100``.
    """
    return next(_digests(_held(state, path, found)))


def fingerprint_matches(
    state: RunState, path: tuple[str, ...], found: CallState, given: str
) -> bool:
    """Whether ``given`` is this call's `fingerprint`, or the one toolfold made before
    numbers counted by value (``100.0`` and ``100`` apart): keys users hold from then
    (in a page, a queue, a durable run's history) still answer their call."""
    return any(hmac.compare_digest(made, given) for made in _digests(_held(state, path, found)))


def made_for_earlier(
    state: RunState, path: tuple[str, ...], call: ToolCallPart, given: str, *, most: int = 10_000
) -> bool:
    """Whether ``given`` is the `fingerprint` ``call`` (of the run at ``path``, or of the run's
    conversation: ``()``) had at any step up to where each run of the way stands now: a bound
    key made while the call waited, read once the run went on or finished (its step then
    moved on). The runs' ids and the call count as in `fingerprint`; only the steps are
    tried, the call's text made once. Over ``most`` combinations of steps (deep trees of long
    runs), True: not told apart, rather than said to be another run's.
    """
    from toolfold.runtime.core._serialize import canonical_json, same_by_value

    ids = [(state.run_id, state.step)]
    holder = state
    for suspended in path:
        child = next((c.child for c in holder.calls if c.call.id == suspended and c.child), None)
        if child is None:
            return True  # (not reachable as it stood: not told apart)
        holder = child
        ids.append((holder.run_id, holder.step))
    combinations = 1
    for _, step in ids:
        combinations *= step + 1
    if combinations > most:
        return True
    rest = [list(path), call.id, call.name, call.arguments_text, call.arguments]
    written = canonical_json(rest, by_value=False)
    tails = [written] if same_by_value(written) else [canonical_json(rest), written]
    for steps in itertools.product(*(range(step + 1) for _, step in ids)):
        runs = canonical_json(
            [[run_id, step] for (run_id, _), step in zip(ids, steps, strict=True)]
        )
        for tail in tails:  # (the list `_held` makes, written with its first item apart)
            made = hashlib.sha256(b"[" + runs + b"," + tail[1:]).hexdigest()[:32]
            if hmac.compare_digest(made, given):
                return True
    return False


def _held(state: RunState, path: tuple[str, ...], found: CallState) -> list[Any]:
    """What `fingerprint` digests of a call: its runs, its path, and the call, as plain JSON."""
    runs = [[state.run_id, state.step]]
    holder = state
    for suspended in path:  # (the path leads to the call: `found` was reached by it)
        holder = next(c.child for c in holder.calls if c.call.id == suspended and c.child)
        runs.append([holder.run_id, holder.step])
    call = found.call
    return [runs, list(path), call.id, call.name, call.arguments_text, call.arguments]


def _digests(held: list[Any]) -> Iterator[str]:
    """The digest `fingerprint` makes of ``held`` (numbers by value), then the one made
    before (numbers as written), if it differs. The text as written comes first: with no
    float that counts by value in it (most arguments), it is the by-value text too, and
    the arguments are not copied (huge ones cost what one digest did before)."""
    # (imported here: the serializer is loaded once a state is, not by ``import toolfold``)
    from toolfold.runtime.core._serialize import canonical_json, same_by_value

    written = canonical_json(held, by_value=False)
    if not same_by_value(written):
        yield hashlib.sha256(canonical_json(held, by_value=True)).hexdigest()[:32]
    yield hashlib.sha256(written).hexdigest()[:32]


def named(state: RunState, key: str, status: CallStatus) -> list[tuple[tuple[str, ...], CallState]]:
    """Every call of the tree in ``status`` that ``key`` names, by its own id (at any depth)
    or as a path (`address`), with the path to it; shallowest first."""
    found_calls: list[tuple[tuple[str, ...], CallState]] = []
    for path in state.paths_to(key, status):
        found = call_at(state, path, key, status)
        if found is not None:
            found_calls.append((path, found))
    if "/" in key:  # (a path: split at every "/", as it always was)
        *outer, inner = key.split("/")
        if tuple(outer) in state.paths_to(inner, status):
            found = call_at(state, tuple(outer), inner, status)
            if found is not None:
                found_calls.append((tuple(outer), found))
    return found_calls


def own_key(state: RunState, path: tuple[str, ...], found: CallState, status: CallStatus) -> str:
    """The key that names this call of the tree in ``status`` and no other.

    Its id where no other call waits under it, else its path, else (a path
    that is also another call's id or path) its bound key (`approval_key`),
    which holds the path: that one names it alone.
    """
    own = found.call.id
    for key in (own, "/".join((*path, own))):
        if BOUND_KEY.fullmatch(key) is not None:
            continue  # (read as a bound key)
        found_calls = named(state, key, status)
        if len(found_calls) == 1 and found_calls[0][0] == path and found_calls[0][1].call.id == own:
            return key
    return f"{own}#{fingerprint(state, path, found)}"


def keyed(state: RunState, status: CallStatus) -> tuple[tuple[str, ToolCallPart], ...]:
    """Each call of the tree in ``status``, with the key `resume` answers it by.

    The key is the call's id, or its path (see `address`) when other calls
    wait under the same id, or its bound key (`approval_key`) when that
    path is another call's id or path too: every key names one call, and no
    two calls share a key. The calls come in the order of
    ``state.pending_approvals`` / ``state.tool_calls``.

    One walk of the tree counts the waiting calls under each id. Where no id
    holds a ``/`` and no run repeats an id (as models make them), an id
    counted once names its call alone and a path names its call alone (no id
    is a path), so the keys come from the counts; otherwise each call's key
    is searched for (`own_key`), which gives the same keys on any tree.
    """
    waiting: list[tuple[tuple[str, ...], CallState]] = []
    counts: dict[str, int] = {}
    plain = True

    def walk(run: RunState, path: tuple[str, ...]) -> None:
        nonlocal plain
        ids: set[str] = set()
        for c in run.calls:
            own = c.call.id
            if plain and (own in ids or "/" in own):
                plain = False
            ids.add(own)
            if c.status == status:
                waiting.append((path, c))
                counts[own] = counts.get(own, 0) + 1
            elif c.status == "suspended" and c.child is not None:
                walk(c.child, (*path, own))

    walk(state, ())
    found: list[tuple[str, ToolCallPart]] = []
    for path, c in waiting:
        if plain:
            own = c.call.id
            if counts[own] == 1 and BOUND_KEY.fullmatch(own) is None:
                key = own
            elif path and BOUND_KEY.fullmatch(joined := "/".join((*path, own))) is None:
                key = joined
            else:
                key = f"{own}#{fingerprint(state, path, c)}"
        else:
            key = own_key(state, path, c, status)
        found.append((key, c.call))
    return tuple(found)


def call_at(
    state: RunState, path: tuple[str, ...], call_id: str, status: CallStatus
) -> CallState | None:
    """The current call ``call_id`` of the run at ``path`` (suspended call ids from the top)."""
    for step in path:
        child = next((c.child for c in state.calls if c.call.id == step and c.child), None)
        if child is None:
            return None
        state = child
    return next((c for c in state.calls if c.call.id == call_id and c.status == status), None)
