"""A module-level ``@tool`` pickles with the standard library, as the function it replaced would."""

from __future__ import annotations

import asyncio
import copy
import inspect
import pathlib
import pickle
import sys
from typing import Any

import pytest

from toolfold import Agent, Tool, tool
from toolfold.runtime import FrozenDict
from toolfold.testing import ScriptedModel


@tool
def plain(a: int) -> int:
    """Plain.

    Args:
        a: A number.
    """
    return a


@tool
async def waiting(a: int) -> int:
    """Waiting.

    Args:
        a: A number.
    """
    return a


class Shop:
    @tool
    def search(self, q: str) -> str:
        """Search.

        Args:
            q: The query.
        """
        return q


@pytest.mark.parametrize("made", [plain, waiting, Shop.search], ids=["sync", "async", "method"])
def test_a_module_level_tool_pickles_as_its_name(made: Tool[..., Any]) -> None:
    """``pickle.dumps`` of a module-level tool (its module's attribute) works, and loads the very tool."""
    assert pickle.loads(pickle.dumps(made)) is made


def test_an_agent_holding_a_module_level_tool_pickles(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent with a module-level tool pickles and loads with that tool."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = Agent("openai:gpt-4o-mini", tools=[plain])
    loaded = pickle.loads(pickle.dumps(agent))
    assert loaded.tools == (plain,)
    assert loaded.tools[0] is plain


@pytest.mark.parametrize(
    "copied",
    [
        plain.replace(timeout=5),
        plain.replace(name="plus"),
        waiting.replace(max_retries=1),
        Shop.search.replace(timeout=5),
    ],
    ids=["timeout", "name", "async", "method"],
)
def test_a_copy_of_a_module_level_tool_pickles(copied: Tool[..., Any]) -> None:
    """A ``replace`` copy of a module-level tool pickles, its function as that tool's
    function (pickle named the function by its module and qualname, found the tool
    there, and refused: "it's not the same object as ...")."""
    back = pickle.loads(pickle.dumps(copied))
    assert back is not copied
    assert (back.name, back.timeout, back.max_retries) == (
        copied.name,
        copied.timeout,
        copied.max_retries,
    )
    assert back.function is copied.function
    assert inspect.iscoroutinefunction(back) == inspect.iscoroutinefunction(copied)


def test_an_agent_holding_a_copy_of_a_module_level_tool_pickles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent holding ``tool.replace(...)`` of a module-level tool pickles and runs it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = Agent("openai:gpt-4o-mini", tools=[plain.replace(name="plus", timeout=5)])
    loaded = pickle.loads(pickle.dumps(agent))
    assert loaded.tools[0].timeout == 5
    script = ScriptedModel([ScriptedModel.call("plus", {"a": 2}), "done"])
    result = loaded.evolve(model=script).run("go")
    assert result.steps[0].tool_results[0].content == "2"


def _fetch(arguments: dict[str, Any]) -> str:
    return "sunny"


def _double(a: int) -> int:
    """Double.

    Args:
        a: A number.
    """
    return 2 * a


weather = Tool(
    "weather", "W.", {"type": "object", "properties": {"day": {"format": "date"}}}, _fetch
)
doubled = tool(name="doubled")(_double)  # its module holds the function under its name


class Store:
    """A user's object whose async method is a tool."""

    def __init__(self, city: str) -> None:
        self.city = city

    @tool
    async def search(self) -> str:
        """Search."""
        return f"in {self.city}"

    @tool
    @classmethod
    async def kind(cls) -> str:
        """Kind."""
        return cls.__name__


class RefinedStore(Store):
    """A subclass whose method tool calls its base's through super()."""

    @tool
    async def search(self) -> str:
        """Search, refined."""
        return "refined " + await super().search()


class AsyncCall:
    """An object with an async ``__call__``."""

    async def __call__(self) -> str:
        """Call."""
        return "called"


async def _fetch_later() -> str:
    """Fetch later."""
    return "fetched"


def _async_by_attributes() -> list[Tool[..., Any]]:
    """Async tools that pickle by their attributes (no module attribute is them)."""
    return [
        tool(AsyncCall()),
        Store("rome").search,
        Store.kind,
        tool(name="fetched")(_fetch_later),
    ]


@pytest.mark.parametrize("made", [weather, doubled], ids=["explicit", "decorated"])
def test_a_tool_pickled_by_its_attributes_pickles_after_use(made: Tool[..., Any]) -> None:
    """A tool that is not its module's attribute pickles by its attributes after an agent
    built its hooks and a call built its checker (caches, left out and built again)."""
    Agent(ScriptedModel(["x"]), tools=[made])
    arguments = {"day": "2024-05-01"} if made is weather else {"a": 2}
    made.validate_arguments(arguments)
    back = pickle.loads(pickle.dumps(made))
    assert back is not made
    assert back.name == made.name
    assert back.validate_arguments(arguments) == made.validate_arguments(arguments)


@pytest.mark.parametrize("made", [plain, waiting, Shop.search, weather], ids=str)
def test_a_copy_of_a_tool_is_a_new_tool(made: Tool[..., Any]) -> None:
    """``copy.copy`` and ``copy.deepcopy`` of a tool (a module-level one too) make a new
    tool: setting an attribute on the copy leaves the original as it was."""
    for copied in (copy.copy(made), copy.deepcopy(made)):
        assert copied is not made
        assert type(copied) is type(made)
        assert copied.name == made.name
        assert copied.parameters == made.parameters
        copied.__dict__["invoke"] = None
        assert "invoke" not in made.__dict__


def test_a_tool_pickled_by_an_earlier_version_validates_and_runs() -> None:
    """Tools pickled before a Tool had structure hooks (saved/README.md) load, validate and run."""
    saved = pathlib.Path(__file__).parent / "saved" / "tools_1709bfb6.pkl"
    loaded = pickle.loads(saved.read_bytes())
    assert loaded["weather"].validate_arguments({"day": "2024-05-01"}) == {"day": "2024-05-01"}
    assert loaded["doubled"].validate_arguments('{"a": 2}') == {"a": 2}
    assert isinstance(loaded["weather"].parameters, FrozenDict)
    model = ScriptedModel([[ScriptedModel.call("doubled", {"a": 2})], "done"])
    response = Agent(model, tools=[loaded["doubled"], loaded["weather"]]).run("go")
    assert response.text == "done"
    assert response.steps[0].tool_results[0].content == "4"


@pytest.mark.parametrize("made", _async_by_attributes(), ids=lambda made: made.name)
def test_an_async_tool_pickled_by_its_attributes_stays_a_coroutine_function(
    made: Tool[..., Any],
) -> None:
    """An async tool pickled (or deep-copied) by its attributes loads, runs, and is a
    coroutine function to inspect and asyncio (before 3.12 its marks held a code object,
    which pickle refused)."""
    expected = asyncio.run(made())
    for back in (pickle.loads(pickle.dumps(made)), copy.deepcopy(made)):
        assert inspect.iscoroutinefunction(back)
        assert asyncio.iscoroutinefunction(back)
        assert asyncio.run(back()) == expected


def test_an_agent_holding_async_tools_pickles(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent holding async tools that pickle by their attributes pickles and runs them."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = Agent("openai:gpt-4o-mini", tools=_async_by_attributes())
    loaded = pickle.loads(pickle.dumps(agent))
    assert [asyncio.run(made()) for made in loaded.tools] == [
        "called",
        "in rome",
        "Store",
        "fetched",
    ]


def test_an_object_whose_method_tool_was_used_pickles_and_copies() -> None:
    """Reading ``store.search`` caches the bound tool in the object: the object still
    pickles and deep-copies, and the tool of the loaded (copied) object is bound to it."""
    store = Store("rome")
    assert store.search is store.search  # cached in the object
    for back in (pickle.loads(pickle.dumps(store)), copy.deepcopy(store)):
        back.city = "paris"
        assert asyncio.run(back.search()) == "in paris"
        assert inspect.iscoroutinefunction(back.search)
    assert asyncio.run(store.search()) == "in rome"


@pytest.mark.parametrize(
    "copied",
    [copy.copy, copy.deepcopy, lambda store: pickle.loads(pickle.dumps(store))],
    ids=["copy", "deepcopy", "pickle"],
)
def test_a_copy_of_an_object_whose_method_tool_was_used_gets_its_own_tool(
    copied: Any,
) -> None:
    """The copy's method tool is bound to the copy and calls it; the original keeps its own
    (``copy.copy`` shared the original's cached tool: the copy's calls ran the original)."""
    store = Store("rome")
    mine = store.search
    back = copied(store)
    back.city = "paris"
    assert back.search.function.__self__ is back
    assert back.search is back.search  # (cached in the copy)
    assert asyncio.run(back.search()) == "in paris"
    script = ScriptedModel([ScriptedModel.call("search", {}), "ok"])
    response = Agent(script, tools=[back.search]).run("go")
    assert response.steps[0].tool_results[0].content == "in paris"
    assert store.search is mine
    assert asyncio.run(store.search()) == "in rome"


def test_an_object_pickled_with_its_tool_under_the_method_s_name_loads_as_documented() -> None:
    """An object pickled by an earlier version, which cached its bound tool under the
    method's own name: loaded, its tool is bound to it; a copy.copy of it shares that tool
    (the entry is the object's, found before the class's tool) until the entry is dropped,
    as docs/tools.md says."""
    store = Store("rome")
    vars(store)["search"] = Store.__dict__["search"].__get__(store, Store)  # (as it cached)
    back = pickle.loads(pickle.dumps(store))
    assert back.search.function.__self__ is back
    assert asyncio.run(back.search()) == "in rome"
    assert copy.copy(back).search is back.search  # (the old entry, copied)
    vars(back).pop("search")
    twin = copy.copy(back)
    twin.city = "paris"
    assert asyncio.run(twin.search()) == "in paris"
    assert asyncio.run(back.search()) == "in rome"


def test_reading_a_cached_method_tool_runs_nothing_but_its_lookup() -> None:
    """Once bound, ``store.search`` is the cached tool, found by ``Tool.__get__`` with one
    dict lookup and identity checks, no other call: every read of a method tool goes through
    it, so it must stay cheap (it also called getattr and type, and read the tool's options
    first: twice as long)."""
    store = Store("rome")
    first = store.search
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)
        elif event == "c_call":
            calls.append(arg.__name__)

    sys.setprofile(profile)
    try:
        again = store.search
    finally:
        sys.setprofile(None)
    assert again is first
    assert calls == ["__get__", "get", "setprofile"]  # (the last: turning the profile off)


def test_a_bound_method_tool_pickled_alone_calls_its_method() -> None:
    """A bound method tool pickled on its own loads bound to a copy of its object (its
    bound method no longer finds the tool itself, which called itself without end)."""
    back = pickle.loads(pickle.dumps(Store("rome").search))
    assert asyncio.run(back()) == "in rome"
    assert back.function.__self__.search is back


def test_a_bound_method_tool_reached_through_super_pickles_as_the_base_s_method() -> None:
    """A base's method tool bound through super() pickles as the base's method, bound to
    the object (it pickled as the object's attribute, the subclass's tool, and its load
    called itself without end); the subclass's own tool still pickles as its own."""
    refined = RefinedStore("rome")
    through = super(RefinedStore, refined).search
    assert asyncio.run(pickle.loads(pickle.dumps(through))()) == "in rome"
    assert asyncio.run(pickle.loads(pickle.dumps(refined.search))()) == "refined in rome"


SCRIPT = '''
import pickle
from toolfold import tool


def _add(a: int) -> int:
    """Add.

    Args:
        a: A number.
    """
    return a + 1


@tool
def decorated(a: int) -> int:
    """Decorated.

    Args:
        a: A number.
    """
    return a


add = tool(name="add")(_add)
print(pickle.loads(pickle.dumps(add))(1))
try:
    pickle.dumps(decorated)
except pickle.PicklingError as exc:
    print("refused:", "not the same object as __main__.decorated" in str(exc))
'''


def test_a_script_s_tool_pickles_as_tools_md_says(tmp_path: pathlib.Path) -> None:
    """In a script (``__main__``), a ``@tool`` does not pickle with the standard pickle
    (cloudpickle ships it by value to Ray: it is not pickled by name there), and a tool
    made of a function kept under its own name does, as docs/tools.md says."""
    import subprocess
    import sys

    (tmp_path / "script.py").write_text(SCRIPT)
    root = pathlib.Path(__file__).resolve().parents[2]
    ran = subprocess.run(
        [sys.executable, str(tmp_path / "script.py")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(root)},
        check=False,
    )
    assert (ran.stderr, ran.stdout) == ("", "2\nrefused: True\n")
