"""Read-only stored values: `FrozenDict`, `FrozenList` and `freeze` / `thaw`."""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict, defaultdict
from types import MappingProxyType
from typing import Any

import pytest

from toolfold import Message, ToolCallPart
from toolfold.runtime import FrozenDict, FrozenList
from toolfold.runtime.core._messages import freeze, thaw


class _Items(list[Any]):
    """A list subclass, as a caller's own container might be."""


def test_nested_mappings_of_any_kind_are_frozen_and_not_shared() -> None:
    """A call's nested defaultdict, OrderedDict, mapping proxy or list subclass is frozen, not kept."""
    inner = defaultdict(list, {"y": [1]})
    ordered = OrderedDict(a=_Items([1]))
    proxy = MappingProxyType({"p": [2]})
    call = ToolCallPart(
        "c1", "f", "{}", arguments={"d": inner, "o": ordered, "m": proxy, "l": _Items([3])}
    )
    stored = call.arguments
    assert stored is not None
    assert [type(stored[k]) for k in "doml"] == [FrozenDict, FrozenDict, FrozenDict, FrozenList]
    assert type(stored["o"]["a"]) is FrozenList
    inner["y"].append("LATER")
    _ = inner["z"]
    assert stored == {"d": {"y": [1]}, "o": {"a": [1]}, "m": {"p": [2]}, "l": [3]}
    with pytest.raises(TypeError, match="read-only"):
        stored["d"]["w"] = 1
    with pytest.raises(TypeError, match="read-only"):
        stored["l"].append(4)


def test_freeze_of_a_flat_dict_keeps_its_items_and_freezes_nested_lists() -> None:
    """freeze makes a flat dict a FrozenDict of the same items, and a nested list a FrozenList."""
    flat = freeze({"a": 1, "b": "x", "c": None})
    assert type(flat) is FrozenDict
    assert flat == {"a": 1, "b": "x", "c": None}
    assert type(freeze({"a": (1, 2)})["a"]) is FrozenList


def test_the_constructor_freezes_nested_values() -> None:
    """FrozenDict(...) and FrozenList(...) freeze what they hold, so nothing inside can change."""
    made = FrozenDict({"a": {"b": [1]}}, c=[2])
    assert type(made["a"]) is FrozenDict
    assert type(made["a"]["b"]) is FrozenList
    with pytest.raises(TypeError, match="read-only"):
        made["c"].append(3)
    listed = FrozenList([{"a": 1}, [2]])
    assert type(listed[0]) is FrozenDict
    assert type(listed[1]) is FrozenList


def test_equal_frozen_values_hash_equal() -> None:
    """FrozenDict and FrozenList hash consistently with ==, nested ones too."""
    one = freeze({"a": 1, "b": {"c": [1, 2.0]}})
    two = freeze({"b": {"c": [1.0, 2]}, "a": 1})
    assert one == two
    assert hash(one) == hash(two)
    assert hash(freeze([1, [2]])) == hash(freeze([1, [2]]))
    assert len({one, two}) == 1
    nan = float("nan")
    assert hash(freeze({"x": nan})) == hash(freeze({"x": nan}))


def test_a_frozen_value_holding_an_unhashable_value_refuses_a_hash() -> None:
    """A FrozenDict holding a value that cannot be hashed raises TypeError naming that type."""
    with pytest.raises(TypeError, match="set"):
        hash(FrozenDict(s={1}))


def test_tool_calls_and_messages_with_calls_hash() -> None:
    """Frozen records holding a call (ToolCallPart, a Message with calls) hash like equal ones."""
    call = ToolCallPart("1", "f", '{"x": {"y": [1]}}')
    same = ToolCallPart("1", "f", '{"x": {"y": [1]}}')
    assert hash(call) == hash(same)
    message = Message.assistant(tool_calls=[call])
    assert hash(message) == hash(Message.assistant(tool_calls=[same]))


def test_thaw_gives_a_plain_deep_copy_to_change() -> None:
    """.thaw() (the refusal's advice) gives plain dicts and lists all the way down, independent."""
    call = ToolCallPart("1", "f", '{"filters": {"tags": ["a"]}}')
    assert call.arguments is not None
    with pytest.raises(TypeError, match=r"\.thaw\(\)"):
        call.arguments["filters"]["tags"].append("b")
    copied = call.arguments.thaw()  # type: ignore[attr-defined]
    copied["filters"]["tags"].append("b")
    assert type(copied) is dict
    assert type(copied["filters"]["tags"]) is list
    assert copied == {"filters": {"tags": ["a", "b"]}}
    assert call.arguments == {"filters": {"tags": ["a"]}}
    listed = freeze([{"a": [1]}]).thaw()
    listed[0]["a"].append(2)
    assert listed == [{"a": [1, 2]}]
    assert thaw(freeze({"t": (1, 2)})) == {"t": [1, 2]}


def test_init_again_is_refused() -> None:
    """Calling __init__ on a made FrozenDict or FrozenList (even an empty one) is refused."""
    arguments = freeze({"a": 1, "l": [1, 2]})
    for target, args in ((arguments, {"x": 1}), (arguments["l"], [9]), (FrozenDict(), {"x": 1})):
        with pytest.raises(TypeError, match="read-only"):
            target.__init__(args)
    assert arguments == {"a": 1, "l": [1, 2]}
    assert ToolCallPart("1", "f").provider_data == {}


def test_pickle_and_copies_keep_frozen_values() -> None:
    """Pickling gives back equal frozen values; copy and deepcopy give the same object."""
    value = freeze({"a": {"b": [1]}})
    back = pickle.loads(pickle.dumps(value))
    assert back == value
    assert type(back) is FrozenDict
    assert type(back["a"]["b"]) is FrozenList
    assert copy.copy(value) is value
    assert copy.deepcopy(value) is value
