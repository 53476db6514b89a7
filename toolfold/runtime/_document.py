"""Agent files as data: the document an agent file holds, and specs written back to it.

An agent file (TOML or YAML, see ``toolfold.files``) is a mapping with an
``agents`` table: each agent by name, with its model, instructions, settings,
tools named by import path (``package.module:function``), agents used as
tools, MCP servers, and handoffs, referring to other agents by name. The
classes here are that document's schema; cattrs structures a file into them
(refusing unknown keys and wrong types) and unstructures them back, leaving
out what is at its default. `spec_to_dict` writes a spec as such a document,
so ``load(spec.to_dict())`` builds the same spec again.

Spec kinds plug in through `DUMPERS` (the spec type -> the function writing
one entry), so a composed spec writes its parts under their own tables.
"""

from __future__ import annotations

import importlib
import sys
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import attrs

from toolfold._errors import UsageError, add_note
from toolfold.runtime.core._messages import thaw
from toolfold.runtime.drive._executor import DEFAULT_MAX_CONCURRENCY
from toolfold.toolkit._options import ToolOptions
from toolfold.toolkit._tool import Tool

if TYPE_CHECKING:
    import cattrs

    from toolfold.runtime._agent import Agent


@attrs.frozen
class AgentToolEntry:
    """An agent or a workflow used as a tool: ``{agent = "researcher", description = "..."}``.

    ``{workflow = "pipeline"}`` names a workflow of the file instead of ``agent``.
    """

    agent: str | None = None
    workflow: str | None = None
    name: str | None = None
    description: str | None = None
    input_type: str | None = None
    requires_approval: bool = False
    timeout: float | None = None
    output: str | None = None


@attrs.frozen
class HandoffEntry:
    """A handoff with options: ``{agent = "refunds", input_filter = "pkg.mod:func"}``."""

    agent: str
    name: str | None = None
    description: str | None = None
    input_filter: str | None = None


@attrs.frozen
class MCPEntry:
    """An MCP server: ``command`` (and ``args``...) for stdio, or ``url`` for HTTP."""

    command: str | None = None
    args: list[str] = attrs.field(factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    name: str | None = None
    prefix: str | None = None
    timeout: float = 30.0
    startup_timeout: float = 30.0
    requires_approval: bool | list[str] = False
    include: list[str] | None = None


@attrs.frozen
class StopEntry:
    """A built-in stop condition: ``{max_steps = 3}``, ``{token_budget = 5000}`` or ``{tool_called = "submit"}``.

    ``{token_budget = 5000, tree = true}`` is a tree budget (``token_budget(5000, tree=True)``).
    """

    max_steps: int | None = None
    token_budget: int | None = None
    tool_called: str | None = None
    tree: bool | None = None


ToolEntry = str | AgentToolEntry
HandoffRef = str | HandoffEntry
StopRef = str | StopEntry
OutputRef = str | list[str]
"""An output type: an import path, or a list of labels (a `Literal` of them, as a router answers)."""


@attrs.frozen
class AgentEntry:
    """One agent of a file, under ``agents.<name>``."""

    model: str
    instructions: str | None = None
    tools: list[ToolEntry] = attrs.field(factory=list)
    mcp: list[MCPEntry] = attrs.field(factory=list)
    handoffs: list[HandoffRef] = attrs.field(factory=list)
    stop_when: list[StopRef] = attrs.field(factory=list)
    max_steps: int = 10
    tool_choice: str | None = None
    reset_tool_choice: bool = True
    output_type: OutputRef | None = None
    output_retries: int = 3
    auto_execute_tools: bool = True
    on_tool_error: Literal["return", "raise"] = "return"
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    settings: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class StepEntry:
    """A workflow step with options: ``{step = "writer", prompt = "Write up {researcher}."}``.

    ``step`` names an agent or a workflow of the file, or a function by import
    path (``package.module:function``: names never hold a colon).
    """

    step: str
    name: str | None = None
    on_error: Literal["fail", "skip", "retry"] = "fail"
    retries: int = 2
    prompt: str | None = None
    input_type: str | None = None
    timeout: float | None = None
    retry_delay: float = 1.0


StepRef = str | StepEntry

WORKFLOW_KEYS: dict[str, tuple[str, ...]] = {
    "sequence": ("steps",),
    "parallel": ("steps", "merge", "max_concurrency"),
    "route": ("router", "branches", "default"),
    "loop": ("step", "until", "max_iterations"),
}
"""The keys each kind of workflow takes, besides ``kind``."""


@attrs.frozen
class WorkflowEntry:
    """One workflow of a file, under ``workflows.<name>``; ``kind`` says which keys apply."""

    kind: Literal["sequence", "parallel", "route", "loop"]
    steps: list[StepRef] = attrs.field(factory=list)
    merge: str | None = None
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    router: StepRef | None = None
    branches: dict[str, StepRef] = attrs.field(factory=dict)
    default: StepRef | None = None
    step: StepRef | None = None
    until: str | None = None
    max_iterations: int = 10


PLAIN_KEYS = (
    "instructions",
    "max_steps",
    "tool_choice",
    "reset_tool_choice",
    "output_retries",
    "auto_execute_tools",
    "on_tool_error",
    "max_concurrency",
)
"""The keys of an agent entry that are the `Agent` argument of the same name, as is."""


@attrs.frozen
class Document:
    """A whole agent file: its agents and workflows by name, and the one to run by default."""

    agents: dict[str, AgentEntry] = attrs.field(factory=dict)
    workflows: dict[str, WorkflowEntry] = attrs.field(factory=dict)
    entry: str | None = None


_CLASSES = (
    AgentToolEntry,
    HandoffEntry,
    MCPEntry,
    StopEntry,
    AgentEntry,
    StepEntry,
    WorkflowEntry,
    Document,
)
for _cls in _CLASSES:
    attrs.resolve_types(_cls)  # real types on the fields, for key-by-key structuring


# --- the converter -----------------------------------------------------------------


def _exact(kind: type, label: str) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        # bool is an int to Python, not to a file's reader
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise TypeError(f"expected {label}, got {describe(value)}")
        return value

    return structure


def _number(value: Any, _: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {describe(value)}")
    return float(value)


_SHOWN = 40
"""The longest value (as written by ``repr``) an error message shows."""


def describe(value: Any, *, secret: bool = False) -> str:
    """``value`` as an error message names it: its kind (a table, a list...) and, if short, itself.

    Args:
        value: The value of the wrong kind.
        secret: Never show it (an MCP server's ``env`` or ``args`` may hold a
            token): its kind and length only.
    """
    names = {
        dict: "a table",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "nothing",
    }
    kind = names.get(type(value), type(value).__name__)
    if value is None or isinstance(value, dict | list):
        return kind
    if isinstance(value, str) and (secret or len(value) > _SHOWN):
        return f"{kind} of {len(value)} characters"
    shown = repr(value)
    if secret or len(shown) > _SHOWN:
        return kind
    return f"{kind} {shown}"


def _one_of(entry: type, label: str) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            return CONVERTER.structure(value, entry)
        raise TypeError(f"expected {label}, got {describe(value)}")

    return structure


def _approval(value: Any, _: Any) -> bool | list[str]:
    if isinstance(value, bool):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise TypeError(f"expected true, false or a list of tool names, got {describe(value)}")


YAML_QUOTE_HINT = " (in YAML, quote them: it reads yes, no, on, off, numbers and ~ as other values)"
"""The hint a labels problem ends with: the loader drops it for a file in another format."""


def _output_type(value: Any, _: Any) -> str | list[str] | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise TypeError(
            "expected an import path or a list of distinct labels (a Literal), "
            f"got {describe(value)}"
        )
    if not value:
        raise TypeError("a list of labels (a Literal) needs at least one label, got an empty list")
    others = [v for v in value if not isinstance(v, str)]
    if others:
        shown = ", ".join(describe(v) for v in others)
        hint = (
            YAML_QUOTE_HINT
            if any(isinstance(v, bool | int | float) or v is None for v in others)
            else ""
        )
        raise TypeError(f"labels are text, got {shown}{hint}")
    if "" in value:
        raise TypeError("a label is not empty text, got ''")
    repeated = sorted({v for v in value if value.count(v) > 1})
    if repeated:
        raise TypeError(f"labels are distinct, got {', '.join(map(repr, repeated))} more than once")
    return list(value)


def labels_type(labels: Sequence[str]) -> Any:
    """The `Literal` of ``labels`` (an output type written as a list of labels)."""
    return Literal[tuple(labels)]


def _settings(value: Any, _: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"expected a table, got {describe(value)}")
    return dict(value)


# What a table of each kind holds, for messages (any other table is "a table").
_TABLES: dict[Any, str] = {
    dict[str, StepRef]: "a table of label = step",
    dict[str, str]: "a table of name = text",
}


def _is_list(kind: Any) -> bool:
    return typing.get_origin(kind) is list


def _is_table(kind: Any) -> bool:
    return typing.get_origin(kind) is dict and kind != dict[str, Any]  # (settings: its own hook)


def _noted(exc: Exception, note: Any) -> Exception:
    """``exc`` with ``note`` (where it happened) among its notes, as cattrs notes its own."""
    add_note(exc, note)
    return exc


def _secret_text(value: Any) -> str:
    """Text that may hold a secret: a value of another kind is named by its kind only."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {describe(value, secret=True)}")
    return value


def _list(value: Any, kind: Any, *, secret: bool = False) -> list[Any]:
    """A list of ``kind``'s items: text is no list (cattrs would take it character by character).

    ``secret``: a list of text that may hold secrets (an MCP server's
    ``args``), never shown in a message.
    """
    import cattrs
    from cattrs.errors import IterableValidationNote

    if not isinstance(value, list | tuple):
        raise TypeError(f"expected a list, got {describe(value, secret=secret)}")
    (item,) = typing.get_args(kind)
    items: list[Any] = []
    errors: list[Exception] = []
    for index, each in enumerate(value):
        try:
            items.append(_secret_text(each) if secret else CONVERTER.structure(each, item))
        except Exception as exc:
            note = IterableValidationNote(f"Structuring {kind} @ index {index}", index, item)
            errors.append(_noted(exc, note))
    if errors:
        raise cattrs.IterableValidationError(f"While structuring {kind}", errors, kind)
    return items


def _table(value: Any, kind: Any, *, secret: bool = False) -> dict[str, Any]:
    """A table of ``kind``'s values by name: a list or text is no table.

    ``secret``: a table of text that may hold secrets (an MCP server's
    ``env``), never shown in a message (its names are).
    """
    import cattrs
    from cattrs.errors import IterableValidationNote

    if not isinstance(value, typing.Mapping):
        what = _TABLES.get(kind, "a table")
        raise TypeError(f"expected {what}, got {describe(value, secret=secret)}")
    key_kind, item = typing.get_args(kind)
    table: dict[str, Any] = {}
    errors: list[Exception] = []
    for key, each in value.items():
        try:
            if key_kind is str and not isinstance(key, str):  # (YAML reads yes: as True)
                raise TypeError(
                    f"a name or label is text, got {describe(key)}: YAML reads yes, no, on, "
                    "off, null, ~ and numbers as other values; quote it ('yes': ...)"
                )
            text = _secret_text(each) if secret else CONVERTER.structure(each, item)
            table[CONVERTER.structure(key, key_kind)] = text
        except Exception as exc:
            note = IterableValidationNote(f"Structuring {kind} @ key {key!r}", key, item)
            errors.append(_noted(exc, note))
    if errors:
        raise cattrs.IterableValidationError(f"While structuring {kind}", errors, kind)
    return table


def _secret_args(value: Any, kind: Any) -> list[str]:
    return _list(value, list[str], secret=True)


def _secret_env(value: Any, kind: Any) -> dict[str, str] | None:
    return None if value is None else _table(value, dict[str, str], secret=True)


def _equal_to(kind: Any) -> Callable[[Any], bool]:
    def matches(other: Any) -> bool:
        return bool(other == kind)

    return matches


def _make_converter() -> cattrs.Converter:
    import cattrs
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(str, _exact(str, "a string"))
    converter.register_structure_hook(int, _exact(int, "an integer"))
    converter.register_structure_hook(bool, _exact(bool, "true or false"))
    converter.register_structure_hook(float, _number)
    # lists and tables refuse other values (cattrs iterates a string, calls .items() on a list)
    converter.register_structure_hook_func(_is_list, _list)
    converter.register_structure_hook_func(_is_table, _table)
    # unions by equality: singledispatch would register a union for each of its members
    unions: list[tuple[Any, Callable[[Any, Any], Any]]] = [
        (ToolEntry, _one_of(AgentToolEntry, "an import path or an {agent = ...} table")),
        (HandoffRef, _one_of(HandoffEntry, "an agent name or an {agent = ...} table")),
        (
            StopRef,
            _one_of(
                StopEntry,
                "a function's import path or a {max_steps | token_budget | tool_called = ...} "
                "table",
            ),
        ),
        (
            StepRef,
            _one_of(
                StepEntry,
                "an agent or workflow name, a function's import path or a {step = ...} table",
            ),
        ),
        (bool | list[str], _approval),
        (OutputRef | None, _output_type),
        (dict[str, Any], _settings),
    ]
    unions.append((StepRef | None, unions[3][1]))
    for union, hook in unions:
        converter.register_structure_hook_func(_equal_to(union), hook)
    # an MCP server's args and env may hold tokens: their messages never show a value
    secrets: dict[type, dict[str, Any]] = {
        MCPEntry: {
            "args": override(struct_hook=_secret_args),
            "env": override(struct_hook=_secret_env),
        }
    }
    for cls in _CLASSES:
        converter.register_structure_hook(
            cls,
            make_dict_structure_fn(
                cls, converter, _cattrs_forbid_extra_keys=True, **secrets.get(cls, {})
            ),
        )
        converter.register_unstructure_hook(
            cls, make_dict_unstructure_fn(cls, converter, _cattrs_omit_if_default=True)
        )
    return converter


class _LazyConverter:
    """The document converter, built on first use (cattrs stays out of ``import toolfold``)."""

    _made: cattrs.Converter | None = None

    def __getattr__(self, name: str) -> Any:
        if _LazyConverter._made is None:
            _LazyConverter._made = _make_converter()
        return getattr(_LazyConverter._made, name)


CONVERTER: Any = _LazyConverter()


# --- import paths ------------------------------------------------------------------

_ORIGINS: dict[int, tuple[Any, str]] = {}


def resolve(path: str, search: str | None = None) -> Any:
    """The object named ``package.module:attribute`` (dots after the colon walk attributes).

    Args:
        path: The import path.
        search: A folder to look in first (the agent file's), as a script's own
            folder is.

    Raises:
        ImportError: The module does not import or has no such attribute.
        ValueError: ``path`` is not ``module:attribute``.
    """
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{path!r} is not an import path like 'package.module:name'")
    with _searching(search):
        if search is not None:
            _not_imported_elsewhere(module_name, search)
        value: Any = importlib.import_module(module_name)
        if search is not None:  # (what was imported just now, under the folder's package)
            _not_imported_elsewhere(module_name, search)
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise ImportError(f"module {module_name!r} has no attribute {attribute!r}") from None
    _ORIGINS[id(value)] = (value, path)
    return value


#: Per module name, the folder `resolve` imported it for (an agent file's folder) and
#: the real path of its file: a later file whose folder has its own module of that
#: name would get this one.
_IMPORTED_FOR: dict[str, tuple[str, str]] = {}


def _not_imported_elsewhere(module_name: str, folder: str) -> None:
    """Refuse a module ``folder`` has that another agent file's folder gave first.

    Python imports a module once per process, by its name: a file whose folder
    has its own ``helpers.py`` would otherwise get the ``helpers`` another
    file's folder gave first, tools and all. Loading it under another name
    instead would break what names a module by its name (``to_dict``, a worker
    process importing a tool, pickling), so it is refused. Checked for the
    module named and each package above it (a namespace package's modules by
    their own files). A module imported by the program itself (an installed
    package beside its source in the folder) is used as imported, as Python
    would. Modules those modules import in turn are not checked.

    Raises:
        ImportError: Naming the module, where it was imported from, and the
            file of ``folder`` that would have been imported.
    """
    import os

    parts = module_name.split(".")
    for end in range(1, len(parts) + 1):
        name = ".".join(parts[:end])
        cached = sys.modules.get(name)
        if cached is None:
            continue
        theirs = getattr(cached, "__file__", None)
        if not isinstance(theirs, str):  # (a namespace package: its modules say)
            continue
        ours = _file_in(folder, parts[:end])
        real = os.path.realpath(theirs)
        if ours is None or real == os.path.realpath(ours):
            if ours is not None:
                _IMPORTED_FOR[name] = (folder, real)
            continue
        first, recorded = _IMPORTED_FOR.get(name, ("", ""))
        if recorded != real:
            continue  # (imported by the program, not for another file: used as it is)
        raise ImportError(
            f"module {name!r} is already imported from {theirs} (for an agent file in "
            f"{first}), not from {ours} in the file's folder (a process imports a module "
            "name once: rename one of them)"
        )


def _file_in(folder: str, parts: list[str]) -> str | None:
    """The file ``folder`` has for the module ``parts`` (a package's ``__init__``), if any."""
    import importlib.machinery

    locations = [folder]
    for index, part in enumerate(parts):
        try:
            spec = importlib.machinery.PathFinder.find_spec(part, locations)
        except (ImportError, ValueError):  # (a finder's own trouble: the import says it)
            return None
        if spec is None:
            return None
        if index == len(parts) - 1:
            return spec.origin if spec.has_location and spec.origin is not None else None
        if not spec.submodule_search_locations:
            return None
        locations = list(spec.submodule_search_locations)
    return None


@contextmanager
def _searching(folder: str | None) -> Iterator[None]:
    """``folder`` first on ``sys.path`` (as a script's own folder is) while importing."""
    if folder is None or (sys.path and sys.path[0] == folder):
        yield
        return
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.path.remove(folder)  # (the first occurrence: the one put first here)


def import_path(value: Any) -> str | None:
    """The import path ``value`` was loaded from or can be imported by, if any.

    A function or a class is found by its ``__module__`` and ``__qualname__``;
    an object with no qualified name of its own (a model instance, a `Tool`
    made by hand: ``MODEL = toolfold.model(...)``), or a function whose name
    does not reach it (a lambda), by the module-level name it is bound to
    (see `_bound_name`).
    """
    known = _ORIGINS.get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return _bound_name(value)
    path = f"{module}:{qualname}"
    try:
        found = resolve(path)
    except (ImportError, ValueError):
        return _bound_name(value)
    # a tool made of an importable function (the file named the function) writes as it
    wrapped = value.function if isinstance(value, Tool) else None
    return path if found is value or (wrapped is not None and found is wrapped) else None


def _bound_name(value: Any) -> str | None:
    """``module:name`` of a module-level name bound to ``value`` in a module already imported.

    An instance carries no name of its own: the modules loaded (``sys.modules``)
    are searched for it. Entries that are not the module of their own name are
    passed over (``__mp_main__``, which ``multiprocessing`` adds for the script,
    or any other alias, cannot be imported as such), and so is the script run as
    ``__main__`` (it imports nowhere else) unless no other module holds it (a
    function or a model defined in the script itself). When several modules bind
    it (``from mymodels import MODEL`` binds it in the importing module too), the
    one whose source defines the name (an assignment, ``def`` or ``class`` at its
    top level) is named; failing one such, the shortest module path, then the
    first by name (each loads the same object). Within a module, public names
    before private ones, then by name. None when no module holds it (a local).
    """
    if value is None or isinstance(value, bool | int | float | str):
        return None  # (constants are shared: a name bound to one says nothing)
    main = sys.modules.get("__main__")
    found: dict[str, list[tuple[bool, str]]] = {}
    for module_name, module in list(sys.modules.items()):
        if module is main and module_name != "__main__":
            continue
        try:  # (sys.modules may hold objects of any kind, lazy modules among them)
            names = vars(module) if isinstance(module, types.ModuleType) else None
            own_name = getattr(module, "__name__", None)
        except Exception:
            continue
        if not isinstance(names, dict) or (module is not main and own_name != module_name):
            continue
        for name, bound in list(names.items()):
            if bound is value and isinstance(name, str) and name.isidentifier():
                found.setdefault(module_name, []).append((name.startswith("_"), name))
    if not found:
        return None
    modules = sorted(found, key=lambda m: (m.count("."), m))
    if len(modules) > 1 and "__main__" in found:
        modules.remove("__main__")
    if len(modules) > 1:
        defining = [m for m in modules if min(found[m])[1] in _defined_names(m)]
        modules = defining or modules
    module_name = modules[0]
    return f"{module_name}:{min(found[module_name])[1]}"


def _defined_names(module_name: str) -> frozenset[str]:
    """The names a module's source binds at its top level by an assignment, ``def`` or
    ``class`` (in ``if`` and ``try`` blocks too), not by an import; none without source."""
    import ast
    import inspect

    module = sys.modules.get(module_name)
    try:
        tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    except Exception:  # (no source: a built-in, a compiled or a generated module)
        return frozenset()
    names: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.If | ast.Try):
            pending.extend(node.body + node.orelse)
            if isinstance(node, ast.Try):
                pending.extend(node.finalbody)
                for handler in node.handlers:
                    pending.extend(handler.body)
    return frozenset(names)


def required_path(value: Any, where: str) -> str:
    """`import_path` of ``value``, or a `UsageError` saying why it cannot be written."""
    path = import_path(value)
    if path is None:
        raise UsageError(
            f"{where}: {value!r} has no import path (define it at module level) "
            "and cannot be written to an agent file"
        )
    return path


# --- specs -> document --------------------------------------------------------------

Dumper = Callable[[Any, "_Writer"], str]
DUMPERS: dict[type, Dumper] = {}
"""How each kind of spec writes itself: (spec, writer) -> the name it is written under."""


class _Writer:
    """Collects the entries of every spec reachable from the one written."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, Any]] = {}
        self._names: dict[int, str] = {}
        self.agents: dict[str, Agent] = {}  # by name, for handoffs given by name

    def add(self, spec: Any) -> str:
        """Write ``spec`` (once) and return its name."""
        known = self._names.get(id(spec))
        if known is not None:
            return known
        for kind, dump in DUMPERS.items():
            if isinstance(spec, kind):
                return dump(spec, self)
        raise UsageError(f"{spec!r} cannot be written to an agent file")

    def claim(self, spec: Any, name: str | None, table: str) -> str:
        """Reserve ``name`` in ``table`` for ``spec``."""
        name = name or "main"
        entries = self.tables.setdefault(table, {})
        if any(name in taken for taken in self.tables.values()):
            raise UsageError(
                f"two different specs are both named {name!r}: names in an agent file are unique"
            )
        entries[name] = {}
        self._names[id(spec)] = name
        return name


def spec_to_dict(spec: Any) -> dict[str, Any]:
    """``spec`` and everything it refers to, as an agent file's document."""
    writer = _Writer()
    entry = writer.add(spec)
    return {"entry": entry, **writer.tables}


_AS_TOOL_OPTIONS = ToolOptions()  # (what `as_tool` gives the options an agent file lacks)


def _dump_agent(agent: Agent, writer: _Writer) -> str:
    from toolfold.runtime._agent import Handoff
    from toolfold.runtime._agent_tool import as_tool_of, default_description, function_name
    from toolfold.runtime._sources import split_sources

    name = writer.claim(agent, agent.name, "agents")
    where = f"agents.{name}"
    static, sources = split_sources(agent.tools)
    tools: list[ToolEntry] = []
    for index, item in enumerate(static):
        made = as_tool_of(item) if isinstance(item, Tool) else None
        if made is None:
            tools.append(required_path(item, f"{where}.tools[{index}]"))
            continue
        from toolfold.runtime._workflow import Workflow

        # The tool's options as they are now (a `replace` copy's), not as_tool's arguments.
        approval = item.requires_approval
        if not isinstance(approval, bool):  # (a file holds true or false)
            raise UsageError(
                f"{where}.tools[{index}].requires_approval: the predicate "
                f"{function_name(approval)!r} cannot be written to an agent "
                "file, which takes true or false there"
            )
        unwritten = [
            f"{option}={getattr(item, option)!r}"
            for option in ("strict", "max_retries", "blocking")
            if getattr(item, option) != getattr(_AS_TOOL_OPTIONS, option)
        ]
        if unwritten:
            raise UsageError(
                f"{where}.tools[{index}]: the tool's {', '.join(unwritten)} (set by replace) "
                "cannot be written to an agent file, whose agent tools take a name, "
                "description, input_type, requires_approval, timeout and output"
            )
        as_made = made.agent.name if made.name is None else made.name
        written = writer.add(made.agent)
        is_flow = isinstance(made.agent, Workflow)
        tools.append(
            AgentToolEntry(
                agent=None if is_flow else written,
                workflow=written if is_flow else None,
                name=made.name if item.name == as_made else item.name,
                description=None
                if item.description == default_description(made.agent, item.name)
                else item.description,
                input_type=None
                if made.input_type is str
                else required_path(made.input_type, f"{where}.tools[{index}].input_type"),
                requires_approval=approval,
                timeout=item.timeout,
                output=None
                if made.output is None
                else required_path(made.output, f"{where}.tools[{index}].output"),
            )
        )
    mcp = [_dump_source(source, f"{where}.mcp[{i}]") for i, source in enumerate(sources)]
    handoffs: list[HandoffRef] = []
    graph = agent._reach()[0]
    for known, other in graph.items():  # the first agent written says where names lead
        writer.agents.setdefault(known, other)
    for index, item in enumerate(agent.handoffs):
        spec = item if isinstance(item, Handoff) else Handoff(item)
        if isinstance(spec.agent, str):
            found = writer.agents.get(spec.agent)
            if found is None:
                raise UsageError(
                    f"{where}.handoffs[{index}]: names agent {spec.agent!r}, which no agent "
                    "reachable from the one written is: the file would not define it"
                )
            target = writer.add(found)
        else:
            target = writer.add(spec.agent)
        if spec.name is None and spec.description is None and spec.input_filter is None:
            handoffs.append(target)
            continue
        handoffs.append(
            HandoffEntry(
                agent=target,
                name=spec.name,
                description=spec.description,
                input_filter=None
                if spec.input_filter is None
                else required_path(spec.input_filter, f"{where}.handoffs[{index}].input_filter"),
            )
        )
    stop_when = [
        _dump_stop(condition, f"{where}.stop_when[{index}]")
        for index, condition in enumerate(agent.stop_when)
    ]
    model = agent.model if isinstance(agent.model, str) else required_path(agent.model, where)
    output_type = _dump_output_type(agent.output_type, f"{where}.output_type")
    entry = AgentEntry(
        model=model,
        tools=tools,
        mcp=mcp,
        handoffs=handoffs,
        stop_when=stop_when,
        output_type=output_type,
        settings=thaw(agent.settings),  # plain data to write, not the agent's read-only copy
        **{key: getattr(agent, key) for key in PLAIN_KEYS},
    )
    writer.tables["agents"][name] = CONVERTER.unstructure(entry)
    return name


def _dump_output_type(output_type: Any, where: str) -> OutputRef | None:
    """An agent's output type as a file writes it: a `Literal` of text as its labels."""
    if output_type is None:
        return None
    path = import_path(output_type)
    if path is not None:
        return path
    labels = typing.get_args(output_type)
    if typing.get_origin(output_type) is Literal and all(isinstance(v, str) for v in labels):
        return list(labels)
    return required_path(output_type, where)


def _dump_stop(condition: Any, where: str) -> StopRef:
    """A stop condition as a file writes it: a built-in's table, or a function's import path."""
    from toolfold.runtime.core._stop import MaxSteps, TokenBudget, ToolCalled

    if isinstance(condition, MaxSteps):
        return StopEntry(max_steps=condition.steps)
    if isinstance(condition, TokenBudget):
        return StopEntry(token_budget=condition.tokens, tree=True if condition.tree else None)
    if isinstance(condition, ToolCalled):
        return StopEntry(tool_called=condition.name)
    return required_path(condition, where)


def stop_condition(entry: StopEntry) -> Any:
    """The built-in stop condition a file's ``{max_steps = ...}``-like table names."""
    from toolfold.runtime.core._stop import max_steps, token_budget, tool_called

    if entry.max_steps is not None:
        return max_steps(entry.max_steps)
    if entry.token_budget is not None:
        return token_budget(entry.token_budget, tree=bool(entry.tree))
    assert entry.tool_called is not None
    return tool_called(entry.tool_called)


def _dump_source(source: Any, where: str) -> MCPEntry:
    to_entry = getattr(source, "file_entry", None)
    if to_entry is None:
        raise UsageError(f"{where}: the tool source {source!r} cannot be written to an agent file")
    entry: MCPEntry = CONVERTER.structure(to_entry(), MCPEntry)
    return entry


def _dump_workflow(workflow: Any, writer: _Writer) -> str:
    from toolfold.runtime._kinds import Loop, Parallel, Route, Sequence

    name = writer.claim(workflow, workflow.name, "workflows")
    where = f"workflows.{name}"
    if isinstance(workflow, Sequence):
        entry = WorkflowEntry(
            kind="sequence",
            steps=[_step(t, writer, f"{where}.steps[{i}]") for i, t in enumerate(workflow.steps)],
        )
    elif isinstance(workflow, Parallel):
        entry = WorkflowEntry(
            kind="parallel",
            steps=[_step(t, writer, f"{where}.steps[{i}]") for i, t in enumerate(workflow.steps)],
            merge=None
            if workflow.merge is None
            else required_path(workflow.merge, f"{where}.merge"),
            max_concurrency=workflow.max_concurrency,
        )
    elif isinstance(workflow, Route):
        entry = WorkflowEntry(
            kind="route",
            router=_step(workflow.router, writer, f"{where}.router"),
            branches={
                label: _step(t, writer, f"{where}.branches.{label}")
                for label, t in workflow.branches.items()
            },
            default=None
            if workflow.default is None
            else _step(workflow.default, writer, f"{where}.default"),
        )
    elif isinstance(workflow, Loop):
        until = workflow.until
        entry = WorkflowEntry(
            kind="loop",
            step=_step(workflow.step, writer, f"{where}.step"),
            until=until
            if until is None or isinstance(until, str)
            else required_path(until, f"{where}.until"),
            max_iterations=workflow.max_iterations,
        )
    else:
        raise UsageError(f"{where}: {type(workflow).__name__} cannot be written to an agent file")
    writer.tables["workflows"][name] = CONVERTER.unstructure(entry)
    return name


def _step(step: Any, writer: _Writer, where: str) -> StepRef:
    """A workflow step (a `Task`, or a router function) as a file's step reference."""
    from toolfold.runtime._agent import Agent
    from toolfold.runtime._task import Task, default_name
    from toolfold.runtime._workflow import Workflow

    task = step if isinstance(step, Task) else Task(step)
    target = task.target
    if isinstance(target, Agent | Workflow):
        ref = writer.add(target)
    else:
        ref = required_path(target, where)
    entry = StepEntry(
        step=ref,
        name=None if task.name == default_name(target) else task.name,
        on_error=task.on_error,
        retries=task.retries,
        prompt=task.prompt,
        input_type=None
        if task.input_type is None
        else required_path(task.input_type, f"{where}.input_type"),
        timeout=task.timeout,
        retry_delay=task.retry_delay,
    )
    return ref if entry == StepEntry(step=ref) else entry


def _register() -> None:
    from toolfold.runtime._agent import Agent
    from toolfold.runtime._workflow import Workflow

    DUMPERS[Agent] = _dump_agent
    DUMPERS[Workflow] = _dump_workflow


_register()
