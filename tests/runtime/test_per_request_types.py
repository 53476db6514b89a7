"""Classes made per request (output types, tool parameter types) are freed, not kept for ever."""

from __future__ import annotations

import dataclasses
import gc
import linecache
import typing
import weakref
from typing import Any

import pydantic
import pytest

from toolfold import Agent, tool
from toolfold.testing import FunctionModel
from toolfold.toolkit import _field
from toolfold.toolkit._converter import get_converter

_REQUESTS = 60


def _output_dataclass(i: int) -> type:
    kind = dataclasses.make_dataclass(f"Extracted{i}", [("x", int)])
    answer = FunctionModel(lambda request: '{"x": 1}', keep_requests=False)
    assert Agent(answer, output_type=kind).run("q").output == kind(x=1)
    return kind


def _output_model(i: int) -> type:
    kind: Any = pydantic.create_model(f"Extracted{i}", x=(int, ...))
    answer = FunctionModel(lambda request: '{"x": 1}', keep_requests=False)
    assert Agent(answer, output_type=kind).run("q").output == kind(x=1)
    return kind  # type: ignore[no-any-return]


def _parameter_dataclass(i: int) -> type:
    kind = dataclasses.make_dataclass(f"Filter{i}", [("x", int), ("y", str)])
    seen: list[Any] = []

    def search(f: kind) -> str:  # type: ignore[valid-type]
        """Search.

        Args:
            f: The filter.
        """
        seen.append(f)
        return "ok"

    def reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return FunctionModel.call("search", {"f": {"x": 1, "y": "a"}})

    agent = Agent(FunctionModel(reply, keep_requests=False), tools=[tool(search)])
    assert agent.run("q").text == "done"
    assert seen == [kind(x=1, y="a")]
    return kind


def _output_dict_of_dataclass(i: int) -> type:
    kind = dataclasses.make_dataclass(f"Form{i}", [("x", int)])
    answer = FunctionModel(lambda request: '{"a": {"x": 1}}', keep_requests=False)
    assert Agent(answer, output_type=dict[str, kind]).run("q").output == {"a": kind(x=1)}  # type: ignore[valid-type]
    return kind


def _parameter_dict_of_dataclass(i: int) -> type:
    kind = dataclasses.make_dataclass(f"Filter{i}", [("x", int)])
    seen: list[Any] = []

    def search(f: dict[str, kind]) -> dict[str, kind]:  # type: ignore[valid-type]
        """Search.

        Args:
            f: The filters by name.
        """
        seen.append(f)
        return f

    def reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return FunctionModel.call("search", {"f": {"a": {"x": 1}}})

    agent = Agent(FunctionModel(reply, keep_requests=False), tools=[tool(search)])
    assert agent.run("q").text == "done"
    assert seen == [{"a": kind(x=1)}]
    return kind


@pytest.mark.parametrize(
    "request_",
    [
        _output_dataclass,
        _output_model,
        _parameter_dataclass,
        _output_dict_of_dataclass,
        _parameter_dict_of_dataclass,
    ],
)
def test_a_class_made_per_request_is_freed_once_the_type_caches_pass_their_bound(
    request_: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class made per request is not kept by the process-wide caches past `TYPES_KEPT` types."""
    monkeypatch.setattr(_field, "TYPES_KEPT", 20, raising=False)
    kinds = [weakref.ref(request_(i)) for i in range(_REQUESTS)]
    gc.collect()
    alive = [i for i, kind in enumerate(kinds) if kind() is not None]
    assert 0 not in alive
    assert len(alive) <= 20


def test_the_converter_still_structures_a_type_after_its_cache_was_emptied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Emptying the converter's caches at the bound loses no hook: a class used before still structures."""
    monkeypatch.setattr(_field, "TYPES_KEPT", 3)

    @dataclasses.dataclass
    class Kept:
        x: int

    converter = get_converter()
    assert converter.structure({"x": 1}, Kept) == Kept(1)
    for i in range(10):
        converter.structure({"x": i}, dataclasses.make_dataclass(f"Other{i}", [("x", int)]))
    assert converter._structure_func.dispatch.cache_info().currsize <= 3
    assert converter.structure({"x": 2}, Kept) == Kept(2)
    assert converter.unstructure(Kept(3)) == {"x": 3}


def test_classes_of_one_name_made_per_request_leave_no_hook_source_behind() -> None:
    """The hooks cattrs writes for per-request classes keep no source in linecache, one entry per class."""
    before = set(linecache.cache)
    for i in range(30):
        fields = [("x", int), (f"extra{i}", int, dataclasses.field(default=0))]
        kind = dataclasses.make_dataclass("TenantForm", fields)
        answer = FunctionModel(lambda request: '{"x": 1}', keep_requests=False)
        assert Agent(answer, output_type=kind).run("q").output == kind(x=1)
    assert [name for name in set(linecache.cache) - before if "TenantForm" in name] == []


def test_named_tuples_of_one_name_made_per_request_leave_no_hook_source_behind() -> None:
    """The hooks cattrs writes to structure and unstructure a per-request NamedTuple keep no source in linecache."""
    before = set(linecache.cache)
    for i in range(30):
        kind: Any = typing.NamedTuple("TenantRow", [("x", int), (f"extra{i}", int)])
        answer = FunctionModel(
            lambda request, i=i: f'{{"x": 1, "extra{i}": 0}}', keep_requests=False
        )
        assert Agent(answer, output_type=kind).run("q").output == kind(1, 0)
        assert get_converter().unstructure(kind(2, 3)) == {"x": 2, f"extra{i}": 3}
    assert [name for name in set(linecache.cache) - before if "TenantRow" in name] == []
