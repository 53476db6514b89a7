"""Loading agent files: TOML or YAML text -> the document -> `Agent` specs.

Every problem is collected before anything is built, and reported at once in
one `AgentFileError`, each with its key path (``agents.triage.tools[2]``) and
the line where one is known: the parser's for a syntax error, the key's own
line otherwise (YAML nodes carry theirs; in TOML the key is looked up under
its table header).
"""

from __future__ import annotations

import math
import re
import sys
import typing
import zlib
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import attrs

from toolfold._errors import (
    AgentFileError,
    ToolDefinitionError,
    ToolfoldError,
    UsageError,
)
from toolfold._extras import installed, missing, optional
from toolfold.files._positions import toml_positions
from toolfold.runtime._agent import Agent, Handoff
from toolfold.runtime._document import (
    CONVERTER,
    PLAIN_KEYS,
    WORKFLOW_KEYS,
    YAML_QUOTE_HINT,
    AgentEntry,
    AgentToolEntry,
    HandoffEntry,
    MCPEntry,
    StepEntry,
    StepRef,
    StopEntry,
    WorkflowEntry,
    describe,
    labels_type,
    resolve,
    stop_condition,
)
from toolfold.runtime._kinds import Loop, Parallel, Route, Sequence
from toolfold.runtime._misplaced import client_options
from toolfold.runtime._model import Model, unknown_provider
from toolfold.runtime._sources import ToolSource
from toolfold.runtime._task import _NAME as STEP_NAME
from toolfold.runtime._task import default_name, is_type, not_a_type
from toolfold.runtime._workflow import Workflow
from toolfold.runtime.core._messages import wrong_argument
from toolfold.runtime.core._repr import a_class, normalization_variant, value_or_type
from toolfold.toolkit._options import RESERVED_NAMES, TOOL_NAME, name_problems
from toolfold.toolkit._results import NotUTF8Error, decoded_file, describe_exception, escaped
from toolfold.toolkit._tool import Tool

TOP_KEYS = ("agents", "workflows", "entry")
#: How many values YAML aliases may add to one agent or workflow (what it expands to
#: less what is written in it): building it copies that expansion (its settings are
#: frozen and made JSON), and each request of its runs sends it again. Far more than
#: an agent repeats, far less than a "billion laughs" of nested aliases expands to.
ALIAS_VALUES = 100_000
#: How many values YAML aliases may add to a whole agent file: each agent built copies
#: what its aliases stand for, so a base anchor shared by many agents costs its size
#: once per agent (300 agents merging a 400-value base: 120,000, loaded in well under a
#: second); past this the copies alone take seconds.
ALIAS_TOTAL = 1_000_000
#: How many characters (of keys and scalars) YAML aliases may add to one agent or
#: workflow: a scalar counts as one value whatever its length, and a long text aliased
#: thousands of times is copied as each agent is built (its settings made JSON).
ALIAS_CHARS = 10_000_000
#: How many characters YAML aliases may add to a whole agent file.
ALIAS_CHARS_TOTAL = 50_000_000
#: How many characters of a key a key path shows (`_shown`): the rest is cut.
KEY_SHOWN = 40
#: How long a YAML key path noted for lines may grow (`_deeper`): each node's is kept, so a
#: list of 100,000 items under 300 nested 40-character keys noted 1.2 GB of paths.
PATH_NOTED = 500
#: How deeply nested lists and tables of a YAML (or TOML) file must be for a RecursionError reading
#: it to be blamed on the file (PyYAML reads about 300 levels at Python's default limit):
#: a shallower file read on a stack already deep raises it as it is.
NESTED_DEEP = 100
_LONG_PART = re.compile(rf"[^.\[\]]{{{KEY_SHOWN + 1},}}")
_CUT = re.compile(rf"[^.\[\]]{{{KEY_SHOWN}}}…[0-9a-f]{{6}}")
_BAD = object()


@attrs.frozen
class AgentFile:
    """The agents and workflows an agent file defines, built and ready to run.

    Attributes:
        path: The file (``"<string>"`` for text loaded from memory).
        agents: Every agent by its name, in the file's order.
        workflows: Every workflow by its name, in the file's order.
        entry: The name of the spec run by default: the file's ``entry``
            key, else the first agent or workflow it defines.
        document: The document as loaded (plain data, what ``to_dict`` gives).
    """

    path: str
    agents: Mapping[str, Agent]
    workflows: Mapping[str, Workflow]
    entry: str
    document: Mapping[str, Any] = attrs.field(repr=False)

    def get(self, name: str | None = None) -> Agent | Workflow:
        """The agent or workflow called ``name`` (default: the entry).

        Raises:
            UsageError: The file defines nothing of that name.
        """
        chosen = name or self.entry
        specs: dict[str, Agent | Workflow] = {**self.agents, **self.workflows}
        if chosen not in specs:
            known = ", ".join(specs)
            raise UsageError(
                f"{self.path} defines no agent or workflow {chosen!r}; it defines: {known}"
                + _variant_of(chosen, specs)
            )
        return specs[chosen]

    def agent(self, name: str | None = None) -> Agent:
        """The agent called ``name`` (default: the entry, when it is an agent).

        Raises:
            UsageError: The file defines no agent of that name.
        """
        chosen = name or self.entry
        if chosen not in self.agents:
            known = ", ".join(self.agents)
            raise UsageError(
                f"{self.path} defines no agent {chosen!r}; its agents: {known}"
                + _variant_of(chosen, self.agents)
            )
        return self.agents[chosen]


def load(path: str | Path, *, model: str | Model | None = None) -> AgentFile:
    """Load an agent file: ``.toml``, or ``.yaml`` / ``.yml`` (needs PyYAML: ``toolfold[yaml]``).

    Import paths resolve as in a script next to the file: its folder is
    searched first.

    Args:
        path: The file.
        model: A model for every agent instead of the file's (a model
            string, an import path to a `Model`, or a `Model`): run a file on
            a test model or another provider.

    Raises:
        AgentFileError: Every problem of the file, at once.
        UsageError: ``model`` is no model string, `Model` or import path
            to one (the error names ``model=``).
    """
    source = Path(path)
    search = str(source.resolve().parent)
    return read_file(source, _model_argument("load", model, search), search)


def read_file(
    source: Path, model: str | Model | None, search: str, *, imports: bool = False
) -> AgentFile:
    """`load` of ``source``, searching ``search``, ``model`` unchecked: the CLI's ``--model``
    is reported as a problem of the file, under that name. ``imports`` (``toolfold check``):
    the extras its MCP servers need are imported, not only found installed."""
    try:
        # (utf-8-sig: a BOM, which Windows editors may write, is dropped)
        text = source.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise AgentFileError(
            str(source), [f"{source}: cannot read: {exc.strerror or exc}"]
        ) from exc
    except UnicodeDecodeError:
        raise AgentFileError(str(source), [_not_utf8(source)]) from None
    kind = "yaml" if source.suffix.lower() in (".yaml", ".yml") else "toml"
    lines = _Lines(str(source), text, kind)
    return _Loader(_parse(text, kind, lines), lines, search, model, imports=imports).build()


def _not_utf8(source: Path) -> str:
    """The problem of ``source``, a file that is not UTF-8: saved as UTF-16 or UTF-32,
    or where its first bad byte is (`decoded_file`, which reads run files too)."""
    try:
        decoded_file(source.read_bytes())
    except NotUTF8Error as exc:
        return f"{source}: {exc}" if exc.line is None else f"{source}:{exc.line}: {exc}"
    except OSError as exc:
        return f"{source}: cannot read: {exc.strerror or exc}"
    return f"{source}: cannot read: not UTF-8"


def loads(
    text: str,
    *,
    format: str = "toml",
    name: str = "<string>",
    search: str | None = None,
    model: str | Model | None = None,
) -> AgentFile:
    """Load an agent file's text (see `load`).

    Args:
        text: The file's text.
        format: ``"toml"`` or ``"yaml"``.
        name: The name errors give the file.
        search: A folder searched first for import paths.
        model: A model for every agent instead of the file's.

    Raises:
        AgentFileError: Every problem of the text, at once.
        UsageError: ``model`` is no model string, `Model` or import path
            to one (the error names ``model=``).
    """
    model = _model_argument("loads", model, search)
    lines = _Lines(name, text, format)
    data = _parse(text, format, lines)
    return _Loader(data, lines, search, model).build()


def from_dict(
    data: Mapping[str, Any],
    *,
    name: str = "<dict>",
    search: str | None = None,
    model: str | Model | None = None,
) -> AgentFile:
    """Build the agents of a document (what ``agent.to_dict()`` gives).

    It builds what Python builds from the same specs, so that
    ``from_dict(spec.to_dict())`` gives any spec back: unlike a file, a
    workflow's ``{name}`` placeholder that none of its steps defines is no
    problem here (a workflow that uses one may be nested later; run on its
    own, it raises the `WorkflowDefinitionError` Python's would).

    Args:
        data: The document.
        name: The name errors give it.
        search: A folder searched first for import paths.
        model: A model for every agent instead of the document's.

    Raises:
        AgentFileError: Every problem of the document, at once (``data`` is
            not a mapping, a key's value has the wrong type...).
        UsageError: ``model`` is no model string, `Model` or import path
            to one (the error names ``model=``).
    """
    model = _model_argument("from_dict", model, search)
    if not isinstance(data, Mapping):
        raise AgentFileError(
            name,
            [
                f"{name}: expected a document, a mapping with the keys {', '.join(TOP_KEYS)} "
                f"(what to_dict() gives), got {describe(data)}"
            ],
        )
    return _Loader(dict(data), _Lines(name, "", "dict"), search, model, a_file=False).build()


def _model_argument(function: str, model: object, search: str | None) -> str | Model | None:
    """``model=`` of ``function`` (`load`, `loads`, `from_dict`), checked before the file is read.

    A model string or a `Model` is kept; an import path gives the `Model` it
    names (resolved as the file's own paths are).

    Raises:
        UsageError: Naming ``function`` and ``model=``: a value of another
            type, a string that is neither, a path that does not import or
            names no `Model`.
    """
    if model is None or isinstance(model, Model):
        return model
    expected = (
        "a model string ('openai:gpt-4o-mini'), an import path to a Model "
        "('package.module:name') or a Model"
    )
    if not isinstance(model, str):  # (its type only: a dict or a user's object may hold a key)
        raise UsageError(f"{function}(): model= must be {expected}, got {value_or_type(model)}")
    if _is_model_string(model):
        return model
    try:
        value = resolve(model, search)
    except ValueError:  # no "module:name"
        raise wrong_argument(function, "model=", expected, model) from None
    except (Exception, SystemExit) as exc:  # ImportError, or what the module raised importing
        if _no_provider(model, exc):
            raise UsageError(
                f"{function}(): model={model!r}: {_no_provider_problem(model)}"
            ) from None
        raise UsageError(
            f"{function}(): model={model!r} does not import: {_import_failure(exc)}"
        ) from exc
    if isinstance(value, type) or not isinstance(value, Model):  # (its type only, as above)
        raise UsageError(
            f"{function}(): model={model!r} must be a path to a Model, got {_got_model(value)}"
        )
    return value


def _got_model(value: object) -> str:
    """What a model error shows of ``value``, what an import path named instead of a
    `Model`: a class by its name (an instance wanted, if the class is a model's), anything
    else by its type only (a dict or a user's object may hold a key)."""
    if isinstance(value, type):  # (a Model class passes the protocol check: it has the names)
        return a_class(value, isinstance(value, Model))
    return value_or_type(value)


def _import_failure(exc: BaseException) -> str:
    """Why a module did not import: its exception, or its exit (``sys.exit``, argparse)
    while imported, which would otherwise end the loading program with its code."""
    if isinstance(exc, SystemExit):
        code = exc.code if exc.code is not None else 0
        return f"the module exited while imported (sys.exit), code {code!r}"
    return describe_exception(exc)


# --- parsing --------------------------------------------------------------------


def _parse(text: str, kind: str, lines: _Lines) -> dict[str, Any]:
    if kind == "yaml":
        data = _parse_yaml(text, lines)
    elif kind == "toml":
        data = _parse_toml(text, lines)
    else:
        raise UsageError(f"format must be 'toml' or 'yaml', not {kind!r}")
    if not isinstance(data, dict):
        raise AgentFileError(lines.file, [lines.say("", "the file must hold a table of agents")])
    return data


def _parse_toml(text: str, lines: _Lines) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the 3.10 dependency
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except RecursionError:  # (tomllib reads each level of inline tables and arrays in calls)
        if _stack_room() < 3 * NESTED_DEEP:  # (the caller's stack was deep already: not the file)
            raise
        why = "arrays and inline tables nested too deep to read (past Python's recursion limit)"
        raise AgentFileError(lines.file, [lines.at(None, f"not TOML: {why}")]) from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = re.search(r"\(at line (\d+), column \d+\)", message)
        line = int(found.group(1)) if found else None
        problem = re.sub(r"\s*\(at line \d+, column \d+\)", "", message)
        raise AgentFileError(lines.file, [lines.at(line, f"not TOML: {problem}")]) from None


def _stack_room() -> int:
    """How many more Python frames the recursion limit allows here."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return sys.getrecursionlimit() - depth


def _parse_yaml(text: str, lines: _Lines) -> Any:
    # PyYAML missing: "needs 'yaml': pip install 'toolfold[yaml]'"; installed but failing
    # in its own import: its error, kept as the cause (see `optional`).
    yaml = optional("yaml", "yaml", "a YAML agent file", _no_yaml(lines))
    try:
        loader = _composer(text)
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a control one)
        at = text.count("\n", 0, exc.position) + 1
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        what = f"{exc.reason} (character {escaped(char)})"
        raise AgentFileError(lines.file, [lines.at(at, f"not YAML: {what}")]) from None
    try:
        node = loader.get_single_node()
        if node is not None:  # (before the data is made: a "billion laughs" is refused first)
            lines.from_yaml(node, loader.aliases, loader.alias_keys)
        if lines.unloadable:
            raise AgentFileError(lines.file, lines.unloadable)
        # The data, built from the nodes composed above (not parsed again: that took as
        # long again) by the loader's safe constructor (no python/ tags).
        data = None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise AgentFileError(lines.file, [lines.at(line, f"not YAML: {what}")]) from None
    except RecursionError:  # (PyYAML composes each level of lists and tables in a call)
        if loader.deepest < NESTED_DEEP:  # (the caller's stack was deep already: not the file)
            raise
        why = "lists and tables nested too deep to read (past Python's recursion limit)"
        raise AgentFileError(lines.file, [lines.at(None, f"not YAML: {why}")]) from None
    finally:
        loader.dispose()
    if lines.twice:
        raise AgentFileError(lines.file, lines.twice)
    return data


def _no_yaml(lines: _Lines) -> Callable[[str], Exception]:
    """The error of ``lines``' file for PyYAML not importing (`optional`'s message)."""
    return lambda message: AgentFileError(lines.file, [lines.at(None, message)])


def _composer(text: str) -> Any:
    """PyYAML's safe loader of ``text``, noting each alias it reads (the composed nodes keep
    neither an alias's line nor its anchor's name): an alias loop is named by them."""
    import yaml

    class Composer(yaml.SafeLoader):
        def __init__(self, text: str) -> None:
            super().__init__(text)
            # (id of the node holding the alias, id of the node it names) -> (anchor, line)
            self.aliases: dict[tuple[int, int], tuple[str, int]] = {}
            # (id of a mapping node, index of a key in it): the key is an alias (its node
            # is the anchored one, which may be written later in the walk: {a: &s x, *s : 1})
            self.alias_keys: set[tuple[int, int]] = set()
            # How deep the node being composed is nested, and the deepest one composed.
            self.depth = 0
            self.deepest = 0

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            # A value its tag cannot read (!!int abc, !!bool maybe, !!timestamp x) raises
            # the ValueError (KeyError, ...) of the function that reads it: a YAML error
            # at the node's line instead, naming the tag.
            try:
                return super().construct_object(node, deep)
            except (yaml.YAMLError, RecursionError, MemoryError):
                raise
            except Exception as exc:
                raise yaml.constructor.ConstructorError(
                    None, None, _unreadable(node, exc), node.start_mark
                ) from exc

        def compose_node(self, parent: Any, index: Any) -> Any:
            # (the depth counted here, not in a wrapper: a frame more per level would
            # lower the deepest file PyYAML reads)
            self.depth += 1
            self.deepest = max(self.deepest, self.depth)
            try:
                alias = None
                if self.check_event(yaml.AliasEvent):
                    alias = self.peek_event()  # type: ignore[no-untyped-call]
                if alias is not None and index is None and isinstance(parent, yaml.MappingNode):
                    self.alias_keys.add((id(parent), len(parent.value)))  # (a key: index None)
                node = super().compose_node(parent, index)
                if alias is not None:
                    used = (alias.anchor, alias.start_mark.line + 1)
                    self.aliases.setdefault((id(parent), id(node)), used)
                return node
            finally:
                self.depth -= 1

    return Composer(text)


def _unreadable(node: Any, exc: Exception) -> str:
    """Why the YAML scalar ``node`` cannot be read as its tag says: its tag (its line is the
    problem's), and the error ``exc`` of the function reading it only when that cannot show
    the value (Python's limit of int digits): the value may be a token (an MCP server's
    ``env``) or 100,000 characters long, and errors repeat it (quoted, or changed: 1_0 is
    read as 10)."""
    tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
    why = str(exc)
    value = str(node.value)
    if not why or len(why) > 300 or "'" in why or '"' in why or (value and value in why):
        return f"cannot read this value as {tag}"
    return f"cannot read this value as {tag}: {why}"


@attrs.frozen
class _Kept:
    """The items of a list that structured, and their positions in the file's list."""

    items: list[Any]
    positions: list[int]


class _Lines:
    """Where each key path is in the file, and problems phrased with it."""

    def __init__(self, file: str, text: str, kind: str) -> None:
        self.file = file
        self._known: dict[str, int] = {}
        # A path reached through a YAML alias -> the path where its node was first
        # walked: a key under it is found under that one.
        self._aliases: dict[str, str] = {}
        self._toml = text if kind == "toml" else None  # its lines are found when asked
        self.yaml = kind == "yaml"
        self.twice: list[str] = []  # keys a YAML mapping gives twice
        # YAML that cannot be loaded: an alias inside the node it names, aliases that
        # expand to too many values.
        self.unloadable: list[str] = []

    def from_yaml(
        self,
        root: Any,
        aliases: Mapping[tuple[int, int], tuple[str, int]],
        alias_keys: Collection[tuple[int, int]],
    ) -> None:
        """Note the line of every key path of the composed YAML ``root``.

        Each node is walked once, however many aliases name it (a path through
        an alias is noted as the first path to its node): a file of nested
        aliases (the "billion laughs") costs its size, not what it expands
        to. An alias inside the node it names is a problem in `unloadable`,
        named by ``aliases`` (`_composer`'s), and so are aliases that make
        building the file costly: what is built from the data copies what
        each alias stands for (an agent's settings are frozen and made JSON,
        and sent in each request), so aliases may add `ALIAS_VALUES` values
        and `ALIAS_CHARS` characters (a long text aliased many times) to one
        agent or workflow (or another top-level key), and `ALIAS_TOTAL`
        values and `ALIAS_CHARS_TOTAL` characters to the whole file (a base
        anchor shared by many agents is copied into each). A list or table
        as a mapping key is a problem too, never walked (PyYAML cannot build
        it). ``alias_keys`` (`_composer`'s): the keys that are aliases, by
        their mapping and index. A key longer than `KEY_SHOWN` characters is
        shortened in paths (`_shown`): a path copies its keys' text, and a
        long text aliased as thousands of keys made gigabytes of paths.
        """
        import yaml

        first: dict[int, str] = {}  # node id -> the path it was walked at
        shown: dict[int, tuple[str, str]] = {}  # key node id -> its text, read text in paths
        open_: set[int] = set()  # the nodes being walked (the enclosing ones)
        # node id -> the values and the characters (of its keys and scalars) it expands
        # to (a scalar's once walked, a list's or table's once left)
        sizes: dict[int, int] = {}
        chars: dict[int, int] = {}
        file = _Part(root)  # the values and characters the file writes (each node once)
        # Each agent, workflow and other top-level key's value (a "part": what is
        # built, copying what its aliases stand for) -> its node, the values and
        # characters written in it, its largest aliases.
        parts: dict[str, _Part] = {}
        # (node, path, parent, part): a node to walk, or (None, "", node, None): leaving it.
        stack: list[tuple[Any, str, Any, str | None]] = [(root, "", None, None)]
        while stack:
            node, path, parent, part = stack.pop()
            if node is None:  # leaving ``parent``: its children's sizes are known
                open_.discard(id(parent))
                values, keys = parent.value, 0
                if isinstance(parent, yaml.MappingNode):
                    keys = sum(len(key.value) for key, _ in values)
                    values = [value for _, value in values]
                sizes[id(parent)] = 1 + sum(sizes.get(id(value), 1) for value in values)
                chars[id(parent)] = keys + sum(chars.get(id(value), 0) for value in values)
                continue
            if part == path:
                parts[part] = _Part(node)
            counted = [file] if part is None else [file, parts[part]]
            if id(node) in first:
                if id(node) in open_:
                    used = aliases.get((id(parent), id(node)))
                    self._loop(node, path, used)
                else:
                    self._aliases[path] = first[id(node)]
                    for where in counted:
                        where.note(
                            sizes.get(id(node), 1), chars.get(id(node), 0), path, node, parent
                        )
                continue
            first[id(node)] = path
            for where in counted:
                where.written += 1
            if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
                sizes[id(node)] = 1
                chars[id(node)] = len(node.value)
                for where in counted:
                    where.chars_written += chars[id(node)]
                continue  # (a scalar: its line is its key's)
            open_.add(id(node))
            stack.append((None, "", node, None))
            children: list[tuple[Any, str, Any, str | None]] = []
            if isinstance(node, yaml.MappingNode):
                seen: dict[str, int] = {}  # key text -> its line
                for index, (key, value) in enumerate(node.value):
                    line = key.start_mark.line + 1
                    if not isinstance(key, yaml.ScalarNode):
                        # A list or table as a key (written, or an alias: at its line):
                        # PyYAML cannot build it (a dict key must be hashable). Never
                        # walked nor written out: aliases under it could make its text (a
                        # node's repr) a "billion laughs".
                        _, line = aliases.get((id(node), id(key)), ("", line))
                        self.unloadable.append(
                            self.at(
                                line,
                                "not YAML: while constructing a mapping found unhashable key "
                                "(a list or table as a key)",
                            )
                        )
                        continue
                    if id(key) not in shown:  # (once per key node, however often aliased)
                        shown[id(key)] = (_shown(key.value), _shown(_yaml_key(key)))
                    name, read = shown[id(key)]
                    child = _deeper(path, f".{name}" if path else name)
                    if (id(node), index) in alias_keys:  # an alias as the key: its text is copied
                        for where in counted:
                            where.note(1, len(key.value), child, key, node)
                    else:
                        first[id(key)] = child
                        sizes[id(key)], chars[id(key)] = 1, len(key.value)
                        for where in counted:
                            where.chars_written += chars[id(key)]
                    if key.value in seen:  # PyYAML keeps the last one silently
                        self.twice.append(
                            self.at(line, f"{child}: given twice (first at line {seen[key.value]})")
                        )
                    seen[key.value] = line
                    if len(path) < PATH_NOTED:  # (below: at the line of ``path``)
                        self._known[child] = line
                        # A key YAML reads as another value (yes: True, null: None, 1: 1) is
                        # named in problems as that value is written by str(): found there too.
                        if read != name:
                            self._known.setdefault(f"{path}.{read}" if path else read, line)
                    children.append((value, child, node, _part(path, part, child, value)))
            else:
                for index, item in enumerate(node.value):
                    child = _deeper(path, f"[{index}]")
                    if len(path) < PATH_NOTED:
                        self._known[child] = item.start_mark.line + 1
                    children.append((item, child, node, _part(path, part, child, item)))
            stack.extend(reversed(children))  # (walked in the file's order)
        if not self.unloadable:
            self._too_costly(file, parts, sizes, chars, aliases)

    def _too_costly(
        self,
        file: _Part,
        parts: dict[str, _Part],
        sizes: dict[int, int],
        chars: dict[int, int],
        aliases: Mapping[tuple[int, int], tuple[str, int]],
    ) -> None:
        """A problem in `unloadable` when the aliases of a part (`_Part`) of the file, or of
        the whole ``file``, add more values or characters than `from_yaml` allows, at the
        largest of them (the values first)."""
        for unit, expanded, cap, total in (
            ("values", sizes, ALIAS_VALUES, ALIAS_TOTAL),
            ("characters", chars, ALIAS_CHARS, ALIAS_CHARS_TOTAL),
        ):
            values = unit == "values"
            added = {name: expanded[id(p.node)] - p.made(values) for name, p in parts.items()}
            worst = max(added, key=added.__getitem__, default=None)
            if worst is not None and added[worst] > cap:
                found = parts[worst]
                laughs = ' (a YAML "billion laughs"?)' if values else ""
                why = (
                    f"the aliases in {worst} make {added[worst] + found.made(values):,} {unit} "
                    f"of the {found.made(values):,} written there: more than the {cap:,} "
                    f"aliases may add to one agent, workflow or top-level key{laughs}"
                )
                self._too_many(found.largest(values), unit, aliases, why)
                return
            made = expanded[id(file.node)]
            if made - file.made(values) > total:
                shared = "a base" if values else "a text"
                why = (
                    f"the file's aliases expand the {file.made(values):,} {unit} it writes to "
                    f"{made:,}: more than the {total:,} aliases may add to an agent file "
                    f"({shared} shared by that many agents?)"
                )
                self._too_many(file.largest(values), unit, aliases, why)
                return

    def _too_many(
        self,
        alias: tuple[int, str, Any, Any],
        unit: str,
        aliases: Mapping[tuple[int, int], tuple[str, int]],
        why: str,
    ) -> None:
        """A problem at ``alias`` (size, path, node, parent: the largest of the aliases
        that expand too much), saying ``why`` they are too many ``unit``."""
        size, path, node, parent = alias
        anchor, line = aliases.get((id(parent), id(node)), ("...", 0))
        self.unloadable.append(
            self.at(
                line or self.line(path),
                f"{path}: the alias *{anchor} stands for {size:,} {unit}, and {why}: building "
                "the file copies what each alias stands for; write the values out instead",
            )
        )

    def _loop(self, node: Any, path: str, used: tuple[str, int] | None) -> None:
        """``path`` is an alias (``used``: its anchor's name and line) to ``node``,
        which holds it: YAML reads it as data that contains itself, which nothing
        here can load."""
        anchor, line = used or (None, None)
        named = f"the alias *{anchor}" if anchor else "an alias"
        self.unloadable.append(
            self.at(
                line or self.line(path),
                f"{path or 'the file'}: {named} is inside the node it names "
                f"(&{anchor or '...'} at line {node.start_mark.line + 1}): the value would contain "
                "itself; repeat the value instead of the alias",
            )
        )

    def line(self, path: str) -> int | None:
        """The line of ``path``, or of the closest enclosing key that has one."""
        if self._toml is not None:
            # (its long keys shortened as paths asked for are: `_shown`)
            self._known.update(
                (_shown(path), line) for path, line in toml_positions(self._toml).items()
            )
            self._toml = None
        path = _shown(path)  # (its long keys as `from_yaml` noted them)
        # The longest part of ``path`` written in the file, or reached through an alias
        # to a key written under its anchor: a key missing under an alias is at the
        # alias's line (it is the alias's key that lacks it), not at its anchor's.
        while path:
            if path in self._known:
                return self._known[path]
            if self._aliases:
                mapped = self._through_aliases(path)
                if mapped in self._known:
                    return self._known[mapped]
            shorter = re.sub(r"(\.[^.\[\]]+|\[\d+\])$", "", path)
            if shorter == path:  # a top-level key with no line (a dict has none)
                return None
            path = shorter
        return None

    def _through_aliases(self, path: str) -> str:
        """``path`` with each part reached through a YAML alias replaced by the path
        its node was first walked at (where the lines of the keys under it are)."""
        parts = re.findall(r"\.?[^.\[\]]+|\[\d+\]", path)
        if "".join(parts) != path:  # (a key with a dot or a bracket: kept as it is)
            return path
        done, index = "", 0
        while index < len(parts):
            done += parts[index]
            index += 1
            if done in self._aliases and index < len(parts):
                done = self._aliases[done]
        return done

    def at(self, line: int | None, message: str) -> str:
        """A problem at ``line``."""
        return f"{self.file}:{line}: {message}" if line else f"{self.file}: {message}"

    def say(self, path: str, message: str) -> str:
        """A problem at the key ``path``."""
        where = f"{_shown(path)}: " if path else ""  # (a long key cut, as in `from_yaml`)
        return self.at(self.line(path), f"{where}{message}")


class _Part:
    """An agent, workflow or other top-level key's value of a YAML file (or the whole file),
    as `_Lines.from_yaml` counts what its aliases add: its node, the values and characters
    written in it, its largest aliases (by values and by characters)."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.written = 0
        self.chars_written = 0
        self.biggest: tuple[int, str, Any, Any] = (0, "", None, None)
        self.longest: tuple[int, str, Any, Any] = (0, "", None, None)

    def note(self, size: int, chars: int, path: str, node: Any, parent: Any) -> None:
        """An alias at ``path`` (in ``parent``) to ``node`` (``size`` values, ``chars``
        characters) is in the part."""
        if size > self.biggest[0]:
            self.biggest = (size, path, node, parent)
        if chars > self.longest[0]:
            self.longest = (chars, path, node, parent)

    def made(self, values: bool) -> int:
        """The values (or characters) written in the part."""
        return self.written if values else self.chars_written

    def largest(self, values: bool) -> tuple[int, str, Any, Any]:
        """Its alias that stands for the most values (or characters)."""
        return self.biggest if values else self.longest


def _part(path: str, part: str | None, child: str, value: Any) -> str | None:
    """The part (`_Part`) ``child``, a child of ``path`` (in the part ``part``), is in:
    itself when it is an agent, a workflow or another top-level key's value; None for the
    ``agents`` and ``workflows`` tables themselves (their entries are the parts)."""
    import yaml

    if not path:
        tables = child in ("agents", "workflows") and isinstance(value, yaml.MappingNode)
        return None if tables else child
    if part is None and path in ("agents", "workflows"):
        return child
    return part


def _deeper(path: str, step: str) -> str:
    """The key path ``step`` (``.key``, ``[3]``) below ``path``: ``path`` itself once it is
    `PATH_NOTED` characters long (the nodes nested deeper are found at its line)."""
    return path if len(path) >= PATH_NOTED else path + step


def _shown(text: str) -> str:
    """``text`` (a key, or a key path) as paths show it: each part longer than `KEY_SHOWN`
    characters (between dots and brackets) cut there, ending in "…" and 6 hex digits of
    the CRC-32 of the whole part (two keys sharing their first characters stay apart). A
    part already shown so is kept (a path shown twice is the same)."""
    if len(text) <= KEY_SHOWN:
        return text
    return _LONG_PART.sub(_cut, text)


def _cut(found: re.Match[str]) -> str:
    """A key path's part longer than `KEY_SHOWN` characters as `_shown` shows it."""
    part = found.group()
    if _CUT.fullmatch(part):
        return part
    crc = zlib.crc32(part.encode("utf-8", "surrogatepass")) & 0xFFFFFF
    return f"{part[:KEY_SHOWN]}…{crc:06x}"


def _key_text(key: object) -> str:
    """``repr()`` of a key a problem names: a text longer than `KEY_SHOWN` characters cut."""
    return repr(_shown(key)) if isinstance(key, str) else repr(key)


def _yaml_key(node: Any) -> str:
    """A YAML mapping key (a scalar node: `_Lines.from_yaml` refuses the others) as the
    problems name it: ``str()`` of the value YAML reads."""
    import yaml

    if node.tag == "tag:yaml.org,2002:str":
        return str(node.value)
    try:
        return str(yaml.constructor.SafeConstructor().construct_object(node, deep=True))
    except Exception:  # (a tag the safe constructor does not know: its text)
        return str(node.value)


# --- checking and building ---------------------------------------------------------


class _Loader:
    def __init__(
        self,
        data: dict[str, Any],
        lines: _Lines,
        search: str | None,
        model: str | Model | None,
        *,
        a_file: bool = True,
        imports: bool = False,
    ) -> None:
        self.data = data
        self.lines = lines
        self.search = search
        self.model = model
        # A file's workflows no other one nests run on its own (`_check_free_names`);
        # a document `from_dict` builds is a spec's, which Python builds as it is.
        self.a_file = a_file
        # Whether an MCP server's SDK is imported (slow: ``toolfold check`` only), so
        # that one installed but broken is a problem; then why it failed ("": it did not).
        self.imports = imports
        self.sdk_problem: str | None = None
        self.problems: list[str] = []
        # The entries with a problem `_name_problem` said, and how many it said.
        self.misnamed: set[str] = set()
        self.name_problems = 0
        self.entries: dict[str, AgentEntry] = {}
        self.flows: dict[str, WorkflowEntry] = {}
        self.resolved: dict[str, Any] = {}
        self.positions: dict[tuple[str, str], list[int]] = {}

    def at(self, name: str, key: str, index: int, table: str = "agents") -> str:
        """The key path of item ``index`` of ``<table>.<name>.<key>``, as the file numbers it."""
        positions = self.positions.get((name, key))
        return f"{table}.{name}.{key}[{positions[index] if positions else index}]"

    def problem(self, path: str, message: str) -> None:
        if not self.lines.yaml:  # (the structurer does not know the file's format)
            message = message.replace(YAML_QUOTE_HINT, "")
        self.problems.append(self.lines.say(path, message))

    def _name_problem(self, owner: str, path: str, message: str) -> None:
        """A problem of a name the build takes from the file (a step's, a tool's after an
        agent), said at ``path``: the build skips ``owner`` (``agents.<name>``,
        ``workflows.<name>``), which would say it again in Python's terms, but builds the
        other entries, so that their own build problems are listed with it."""
        self.problem(path, message)
        self.misnamed.add(owner)
        self.name_problems += 1

    def fail(self) -> AgentFileError:
        """The error listing every problem, in the file's order."""

        def place(problem: str) -> tuple[int, list[Any]]:
            found = re.match(r".*?:(\d+): (\S*)", problem)
            if not found:
                return 0, []
            words = re.split(r"(\d+)", found.group(2))
            return int(found.group(1)), [int(w) if w.isdigit() else w for w in words]

        return AgentFileError(self.lines.file, sorted(self.problems, key=place))

    def _table(self, key: str) -> dict[str, Any]:
        """The table under ``key``, or an empty one when it is not a table (`_named` says so)."""
        table = self.data.get(key, {})
        return table if isinstance(table, dict) else {}

    def _none_given(self, flow: str, key: str, kind: type) -> bool:
        """Whether workflow ``flow`` leaves ``key`` out or gives it empty.

        A value of another kind (``branches:`` left null in YAML), or one whose
        items were all refused, is a problem said already: "needs at least
        one" would only repeat it.
        """
        given = self.data["workflows"][flow].get(key, kind())
        return isinstance(given, kind) and not given

    def _named(self, key: str) -> dict[str, Any]:
        """The table under ``key`` without the entries whose name is not text (each a problem)."""
        value = self.data.get(key, {})
        if not isinstance(value, dict):
            self.problem(
                key, f"expected a table of {key}, each under {key}.<name>, got {describe(value)}"
            )
        table: dict[Any, Any] = self._table(key)  # YAML keys may be of any type
        for name in table:
            if not isinstance(name, str):  # YAML reads 1, yes and ~ as a number, True, None
                self.problem(
                    f"{key}.{name}",
                    f"a name is text, got {describe(name)} (quote it in YAML)",
                )
        return {name: value for name, value in table.items() if isinstance(name, str)}

    def build(self) -> AgentFile:
        for key in self.data:
            if key not in TOP_KEYS:
                self.problem(key, f"unknown key (the file's keys are: {', '.join(TOP_KEYS)})")
        agents = self._named("agents")
        flows = self._named("workflows")
        misplaced = any(not isinstance(self.data.get(key, {}), dict) for key in TOP_KEYS[:2])
        # A name that is not text (YAML's 1:) is said already: the file defines an agent.
        misplaced = misplaced or any(self._table(key) for key in TOP_KEYS[:2])
        if not agents and not flows and not misplaced:  # (a table of the wrong type: said)
            self.problem("agents", "the file defines no agent (agents.<name>) nor workflow")
        for name in agents.keys() & flows.keys():
            self.problem(f"workflows.{name}", f"{name!r} names an agent and a workflow")
        for name, value in agents.items():
            self._structure(f"agents.{name}", value, name, AgentEntry, self.entries)
        for name, value in flows.items():
            self._structure(f"workflows.{name}", value, name, WorkflowEntry, self.flows)
        tables = {"agents": agents, "workflows": flows}
        in_order = [name for key in self.data if key in tables for name in tables[key]]
        entry_name = self.data.get("entry", next(iter(in_order), ""))
        if not isinstance(entry_name, str):
            self.problem(
                "entry", f"expected an agent's or workflow's name, got {describe(entry_name)}"
            )
        elif (agents or flows) and entry_name not in {**agents, **flows}:
            variant = normalization_variant(entry_name, [*agents, *flows])
            self.problem(
                "entry",
                f"names no agent or workflow of the file: {entry_name!r}"
                + ("" if variant is None else f", which {variant}"),
            )
        override = self._override()
        for name, entry in self.entries.items():
            self._check(name, entry, override)
        for name, flow in self.flows.items():
            self._check_workflow(name, flow)
        order = self._order()
        if len(self.problems) > self.name_problems:
            raise self.fail()
        built: dict[str, Agent | Workflow] = {}
        for name in order:
            table = "agents" if name in self.entries else "workflows"
            if f"{table}.{name}" in self.misnamed:
                continue  # (one using it builds with a stand-in, as for one that failed)
            try:
                if name in self.entries:
                    built[name] = self._agent(name, self.entries[name], built, override)
                else:
                    built[name] = self._workflow(name, self.flows[name], built)
            except ToolfoldError as exc:
                kind = "agent" if table == "agents" else "workflow"
                self.problem(f"{table}.{name}", f"cannot build the {kind}: {exc}")
            except RecursionError:  # (a workflow gathers what its steps nest, level by level)
                self._too_deep(f"{table}.{name}")
                break  # (the rest contain it)
            except KeyError as exc:
                missing = exc.args[0] if exc.args else None
                if not (self.problems and missing in self.entries.keys() | self.flows.keys()):
                    raise
                # it refers to one that could not be built (reported): the others go on
        if self.problems:
            raise self.fail()
        if self.a_file:
            self._check_free_names(built)
            if self.problems:
                raise self.fail()
        scope = {name: typing.cast(Agent, built[name]) for name in agents}
        for agent in scope.values():
            agent._in_scope(scope)  # a handoff by name finds any agent of the file
        return AgentFile(
            self.lines.file,
            {name: typing.cast(Agent, built[name]) for name in agents},
            {name: typing.cast(Workflow, built[name]) for name in flows},
            str(entry_name),
            self.data,
        )

    def _structure(
        self, path: str, value: Any, name: str, cls: type[Any], into: dict[str, Any]
    ) -> None:
        """Structure one entry key by key, so one bad value hides no other problem."""
        what = "an agent" if cls is AgentEntry else "a workflow"
        if not isinstance(value, dict):
            self.problem(path, f"expected a table ({what}'s keys), got {describe(value)}")
            return
        fields = attrs.fields_dict(cls)
        for key in value:
            if key not in fields:
                known = ", ".join(fields)
                self.problem(
                    f"{path}.{key}", f"unknown key {_key_text(key)} ({what}'s keys: {known})"
                )
        good: dict[str, Any] = {}
        for key, field in fields.items():
            if key not in value:
                if field.default is attrs.NOTHING:
                    self.problem(f"{path}.{key}", "missing (this key is required)")
                continue
            structured = self._value(value[key], field.type, f"{path}.{key}")
            if isinstance(structured, _Kept):
                self.positions[name, key] = structured.positions
                structured = structured.items
            if structured is not _BAD:
                good[key] = structured
        if cls is WorkflowEntry:
            if "kind" not in good:
                return  # what the other keys mean depends on the kind
            allowed = WORKFLOW_KEYS[good["kind"]]
            for key in value:
                if key in fields and key != "kind" and key not in allowed:
                    self.problem(
                        f"{path}.{key}",
                        f"not a key of a {good['kind']} workflow (its keys: kind, "
                        + ", ".join(allowed)
                        + ")",
                    )
            into[name] = WorkflowEntry(**good)
            return
        into[name] = AgentEntry(**{"model": "", **good})

    def _value(self, value: Any, kind: Any, path: str) -> Any:
        """``value`` structured as ``kind``, or `_BAD` (the problems recorded); lists item by item."""
        import cattrs

        if typing.get_origin(kind) is list and isinstance(value, list):
            (item_kind,) = typing.get_args(kind)
            items = [self._value(v, item_kind, f"{path}[{i}]") for i, v in enumerate(value)]
            kept = [i for i, item in enumerate(items) if item is not _BAD]
            return _Kept([items[i] for i in kept], kept)
        if typing.get_origin(kind) is typing.Literal:
            if value in typing.get_args(kind):
                return value
            allowed = ", ".join(repr(a) for a in typing.get_args(kind))
            self.problem(path, f"expected one of {allowed}, got {describe(value)}")
            return _BAD
        try:
            return CONVERTER.structure(value, kind)
        except cattrs.BaseValidationError as exc:
            for where, message in _validation_problems(exc, path, value):
                self.problem(where, message)
        except Exception as exc:  # a cattrs hook's own error: the message says what is wrong
            self.problem(path, str(exc))
        return _BAD

    def _override(self) -> Model | str | None:
        if self.model is None:
            return None
        return self._model(self.model, "--model")

    def _model(self, spec: str | Model, path: str) -> Model | str | None:
        if not isinstance(spec, str) or _is_model_string(spec):
            return spec
        value = self._resolve(spec, path, model=True)
        if value is None:
            return None
        if not isinstance(value, Model) or isinstance(value, type):
            # (a Model class passes the protocol check, but cannot answer: name an instance)
            self.problem(
                path, f"{spec!r} is not a model string nor a Model object, got {_got_model(value)}"
            )
            return None
        return value

    def _resolve(self, spec: str, path: str, *, model: bool = False) -> Any:
        """What the import path ``spec`` names (None: a problem recorded at ``path``);
        ``model``: ``spec`` stands for a model, and may be a model string."""
        if spec in self.resolved:
            return self.resolved[spec]
        try:
            value = resolve(spec, self.search)
        except ValueError as exc:
            self.problem(path, str(exc))
            return None
        except (Exception, SystemExit) as exc:  # ImportError, or what the module raised importing
            if model and _no_provider(spec, exc):
                self.problem(path, _no_provider_problem(spec))
            else:
                self.problem(path, f"cannot import {spec!r}: {_import_failure(exc)}")
            return None
        self.resolved[spec] = value
        return value

    def _check(self, name: str, entry: AgentEntry, override: Model | str | None) -> None:
        where = f"agents.{name}"
        if override is None and entry.model:
            self._model(entry.model, f"{where}.model")
        elif override is None and self.data["agents"][name].get("model") == "":  # not missing
            self.problem(
                f"{where}.model", "expected a provider:model string or an import path, got ''"
            )
        clients = client_options(entry.settings)
        if clients:  # (said here: Agent()'s error would advise Python code)
            self.problem(
                f"{where}.settings",
                f"settings={{{', '.join(f'{key!r}: ...' for key in clients)}}}: "
                f"{'an option' if len(clients) == 1 else 'options'} of the model, not a model "
                "setting (it would be sent to the provider in every request body and stored "
                "in the run's state; a key must not be stored in the file): remove it and give "
                "load(path, model=...) a model made with it, e.g. load(path, model="
                f"toolfold.model('provider:model', {', '.join(f'{key}=...' for key in clients)}))",
            )
        for index, item in enumerate(entry.tools):
            path = self.at(name, "tools", index)
            if isinstance(item, AgentToolEntry):
                if (item.agent is None) == (item.workflow is None):
                    self.problem(
                        path, "give either agent = (an agent's name) or workflow = (a workflow's)"
                    )
                elif item.agent is not None:
                    self._reference(item.agent, f"{path}.agent")
                else:
                    assert item.workflow is not None
                    self._reference(item.workflow, f"{path}.workflow", workflows=True)
                    if item.workflow in self._table("agents"):
                        self.problem(f"{path}.workflow", f"{item.workflow!r} is an agent")
                if item.input_type is not None:
                    self._type(item.input_type, f"{path}.input_type")
                if item.name is not None:
                    self._tool_name(item.name, f"{path}.name")
                self._timeout(item.timeout, f"{path}.timeout")
                if item.output is not None:
                    found = self._resolve(item.output, f"{path}.output")
                    if found is not None and not callable(found):
                        self.problem(f"{path}.output", f"{found!r} is not a function")
            else:
                self._tool(item, path)
        for index, source in enumerate(entry.mcp):
            self._source(source, self.at(name, "mcp", index))
        for index, handoff in enumerate(entry.handoffs):
            path = self.at(name, "handoffs", index)
            target = handoff.agent if isinstance(handoff, HandoffEntry) else handoff
            at = f"{path}.agent" if isinstance(handoff, HandoffEntry) else path
            if target in self._table("workflows") and target not in self._table("agents"):
                self.problem(
                    at,
                    f"{target!r} is a workflow, and a workflow cannot be a handoff target (a "
                    "handoff gives the conversation to an agent); to call it, list it as a "
                    f'tool: tools = [{{workflow = "{target}"}}]',
                )
            else:
                self._reference(target, at)
            if isinstance(handoff, HandoffEntry) and handoff.name is not None:
                self._tool_name(handoff.name, f"{path}.name")
            if isinstance(handoff, HandoffEntry) and handoff.input_filter is not None:
                found = self._resolve(handoff.input_filter, f"{path}.input_filter")
                if found is not None and not callable(found):
                    self.problem(f"{path}.input_filter", f"{found!r} is not a function")
        names = self._unique_tools(name, entry)
        self._tool_choice(entry, names, f"{where}.tool_choice")
        if isinstance(entry.output_type, str):
            self._output(entry.output_type, f"{where}.output_type")
        for index, condition in enumerate(entry.stop_when):
            self._stop(condition, self.at(name, "stop_when", index))
        # Found here, each on its line: building the agent would name only the first.
        for key, least in _AGENT_MINIMA:
            value = getattr(entry, key)
            if value < least:
                self.problem(f"{where}.{key}", f"must be at least {least}, got {value}")

    def _unique_tools(self, name: str, entry: AgentEntry) -> list[str] | None:
        """Each tool the agent's entries make (import paths, agents and workflows as tools,
        handoffs) named once; returns their names, None when some are not known yet.

        Said here, at the entries, rather than by the agent's build, which
        would put it on the agent's line. (An MCP server's tools are known
        only once it runs: a clash with one is the build's to report.)
        """
        made: list[tuple[str, str]] = []
        known = not entry.mcp
        for index, item in enumerate(entry.tools):
            path = self.at(name, "tools", index)
            if isinstance(item, AgentToolEntry):
                tool_name = item.name or item.agent or item.workflow
                if item.name is None and tool_name:
                    kind = "agent" if item.agent is not None else "workflow"
                    self._named_after(name, tool_name, tool_name, f"{path}.{kind}", kind)
            else:  # an import path: its Tool, once `_tool` resolved it (not a source's)
                found = self.resolved.get(item)
                tool_name = found.name if isinstance(found, Tool) else None
            if tool_name:
                made.append((tool_name, path))
            else:
                known = False
        for index, handoff in enumerate(entry.handoffs):
            path = self.at(name, "handoffs", index)
            target = handoff.agent if isinstance(handoff, HandoffEntry) else handoff
            if isinstance(handoff, HandoffEntry) and handoff.name:
                tool_name = handoff.name
            else:
                tool_name = f"transfer_to_{target}"
                at = f"{path}.agent" if isinstance(handoff, HandoffEntry) else path
                self._named_after(name, tool_name, target, at, "agent")
            made.append((tool_name, path))
        first: dict[str, str] = {}
        for tool_name, path in made:
            if tool_name not in first:
                first[tool_name] = path
                continue
            self.problem(
                path,
                f"makes a tool named {tool_name!r}, as {first[tool_name]} does: each tool of "
                "an agent needs its own name (give one a distinct name = ...)",
            )
        return list(first) if known else None

    def _named_after(self, agent: str, tool_name: str, target: str, path: str, kind: str) -> None:
        """The tool an agent (or workflow) ``target`` makes, used as a tool or a handoff
        of ``agent`` without a ``name``, takes ``tool_name`` from it: one no tool can have
        is said at ``path`` with the key that names it (building the agent said it at the
        agent's header, in Python's terms, and only the first)."""
        if target not in self._table("agents") and target not in self._table("workflows"):
            return  # (no such agent: said by `_reference`)
        if TOOL_NAME.fullmatch(tool_name) and tool_name not in RESERVED_NAMES:
            return
        why = (
            "which is reserved (a tool_choice value)"
            if tool_name in RESERVED_NAMES
            else "which no tool can have (1 to 64 characters among a-z A-Z 0-9 _ -)"
        )
        self._name_problem(
            f"agents.{agent}",
            path,
            f"makes a tool named {tool_name!r}, after the {kind}'s name, {why}: name the tool, "
            f'{{ {kind} = "{target}", name = "..." }}',
        )

    def _tool_choice(self, entry: AgentEntry, names: list[str] | None, path: str) -> None:
        """``tool_choice`` names a mode or one of the agent's tools (``names``; None: not known)."""
        choice = entry.tool_choice
        if choice is None or choice in ("auto", "none", "required") or names is None:
            return
        if choice not in names:
            shown = ", ".join(repr(n) for n in names) or "none"
            self.problem(
                path,
                f"{choice!r} is not 'auto', 'none', 'required' nor a tool of the agent "
                f"(its tools: {shown})",
            )

    def _tool_name(self, tool_name: str, path: str) -> None:
        for problem in name_problems(tool_name, hint=""):
            self.problem(path, problem)

    def _timeout(self, timeout: float | None, path: str) -> None:
        if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
            self.problem(path, f"must be a positive number of seconds, got {timeout!r}")

    def _output(self, spec: str, path: str) -> None:
        """An output type by import path: a type that has a JSON Schema, said at its key."""
        from toolfold.runtime.drive._output import output_schema

        found = self._resolve(spec, path)
        if found is None:
            return
        if not is_type(found):
            self.problem(path, not_a_type(repr(spec), found, by_name=False))
            return
        try:
            output_schema(found)
        except ToolDefinitionError as exc:
            self.problem(path, f"{spec!r} cannot be an output type: {'; '.join(exc.problems)}")

    def _output_type(self, spec: str | list[str] | None) -> Any:
        if spec is None:
            return None
        return self.resolved[spec] if isinstance(spec, str) else labels_type(spec)

    def _stop(self, condition: str | StopEntry, path: str) -> None:
        if isinstance(condition, str):
            self._function(condition, path)
            return
        given = {k: v for k, v in attrs.asdict(condition).items() if v is not None}
        tree = given.pop("tree", None)
        if tree is not None and set(given) != {"token_budget"}:
            self.problem(
                f"{path}.tree",
                "tree goes with token_budget only ({token_budget = 5000, tree = true})",
            )
            return
        if len(given) != 1:
            self.problem(
                path,
                "give exactly one of max_steps, token_budget, tool_called"
                + (f" (got {', '.join(given)})" if given else ""),
            )
            return
        ((key, value),) = given.items()
        if key != "tool_called" and value < 1:
            self.problem(f"{path}.{key}", f"must be at least 1, got {value}")
        if key == "tool_called" and not TOOL_NAME.fullmatch(value):
            self.problem(
                f"{path}.{key}",
                f"no tool can have the name {value!r} (1-64 characters of a-z A-Z 0-9 _ -), "
                "so the condition would never hold: give the tool's name as the model calls it",
            )

    def _reference(self, target: str, path: str, *, workflows: bool = False) -> None:
        known = dict(self._table("agents"))
        if workflows:
            known.update(self._table("workflows"))
        if target not in known:
            what = "an agent or workflow" if workflows else "agent"
            variant = normalization_variant(target, known)
            if variant is not None:  # (listed, the two would look alike)
                self.problem(path, f"refers to {what} {target!r}, which {variant}")
                return
            # (long ones cut; a name that is not text, YAML's 1:, is said where it is defined)
            listed = ", ".join(_shown(n) for n in known if isinstance(n, str)) or "none"
            self.problem(
                path,
                f"refers to {what} {target!r}, which the file does not define (defined: {listed})",
            )

    def _check_workflow(self, name: str, flow: WorkflowEntry) -> None:
        where = f"workflows.{name}"
        if flow.kind in ("sequence", "parallel"):
            if not flow.steps and self._none_given(name, "steps", list):
                self.problem(f"{where}.steps", f"a {flow.kind} needs at least one step")
            for index, step in enumerate(flow.steps):
                self._step(step, self.at(name, "steps", index, "workflows"))
        if flow.kind == "parallel" and flow.merge is not None:
            self._function(flow.merge, f"{where}.merge")
        if flow.kind == "route":
            self._required_step(flow.router, name, "router", "a route needs a router")
            if not flow.branches and self._none_given(name, "branches", dict):
                self.problem(f"{where}.branches", "a route needs at least one branch")
            for label, step in flow.branches.items():
                self._step(step, f"{where}.branches.{label}")
            if flow.default is not None:
                self._step(flow.default, f"{where}.default")
        if flow.kind == "loop":
            self._required_step(flow.step, name, "step", "a loop needs a step")
            if flow.until is not None and ":" in flow.until:
                self._function(flow.until, f"{where}.until")
        self._step_names(name, flow)

    def _step_names(self, name: str, flow: WorkflowEntry) -> None:
        """Each step's name, which templates refer to (``{name}``), is a name and the
        workflow's only step of that name: said at the step's key, with the key that
        names it (the workflow's build said it at its header, advising Python's
        ``Task(..., name=...)``)."""
        where = f"workflows.{name}"
        steps: list[tuple[StepRef, str]] = []
        if flow.kind in ("sequence", "parallel"):
            steps = [(s, self.at(name, "steps", i, "workflows")) for i, s in enumerate(flow.steps)]
        elif flow.kind == "route":
            router = flow.router
            if router is not None and (isinstance(router, StepEntry) or ":" not in router):
                steps.append((router, f"{where}.router"))  # (a plain function routes: no step)
            steps.extend((s, f"{where}.branches.{label}") for label, s in flow.branches.items())
            if flow.default is not None:
                steps.append((flow.default, f"{where}.default"))
        elif flow.step is not None:
            steps.append((flow.step, f"{where}.step"))
        first: dict[str, str] = {}
        for ref, path in steps:
            target = ref.step if isinstance(ref, StepEntry) else ref
            at = f"{path}.step" if isinstance(ref, StepEntry) else path
            advice = f'name the step, {{ step = "{target}", name = "..." }}'
            if isinstance(ref, StepEntry) and ref.name is not None:
                step_name: Any = ref.name
                at, advice = f"{path}.name", "give another name"
            elif ":" in target:  # a function: its name, once resolved
                found = self.resolved.get(target)
                step_name = None if found is None else default_name(found)
            elif target in self._table("agents") or target in self._table("workflows"):
                step_name = target
            else:
                continue  # (no such agent or workflow: said by `_reference`)
            if not isinstance(step_name, str) or not step_name:
                continue  # (a step without a name: the build says what to do)
            if not STEP_NAME.fullmatch(step_name):
                self._name_problem(
                    where,
                    at,
                    f"step name {step_name!r} is not a name (ASCII letters, digits and _, up to "
                    f"64, not starting with a digit), and templates refer to it as {{name}}: "
                    f"{advice}",
                )
            elif step_name == "input":
                self._name_problem(
                    where,
                    at,
                    f"step name 'input' is reserved ({{input}} is a step's own input): {advice}",
                )
            elif step_name in first:
                self._name_problem(
                    where,
                    at,
                    f"makes a step named {step_name!r}, as {first[step_name]} does: each step of "
                    f"a workflow needs its own name; {advice}",
                )
            else:
                first[step_name] = path

    def _required_step(self, ref: StepRef | None, flow: str, key: str, why: str) -> None:
        path = f"workflows.{flow}.{key}"
        if ref is None:
            raw = self._table("workflows").get(flow)
            if not isinstance(raw, dict) or raw.get(key) is None:  # (else: not a step, said)
                self.problem(path, f"missing ({why})")
        else:
            self._step(ref, path)

    def _step(self, ref: StepRef, path: str) -> None:
        target = ref.step if isinstance(ref, StepEntry) else ref
        at = f"{path}.step" if isinstance(ref, StepEntry) else path
        if ":" in target:
            self._function(target, at)
        else:
            self._reference(target, at, workflows=True)
        if isinstance(ref, StepEntry) and ref.input_type is not None:
            self._type(ref.input_type, f"{path}.input_type")
        if isinstance(ref, StepEntry):
            self._timeout(ref.timeout, f"{path}.timeout")

    def _type(self, spec: str, path: str) -> None:
        found = self._resolve(spec, path)
        if found is not None and not is_type(found):
            self.problem(path, not_a_type(repr(spec), found, by_name=False, of_step=True))

    def _function(self, spec: str, path: str) -> None:
        found = self._resolve(spec, path)
        if found is not None and not callable(found):
            self.problem(path, f"{spec!r} is not a function: {found!r}")

    def _tool(self, spec: str, path: str) -> None:
        from toolfold.toolkit import tool

        found = self._resolve(spec, path)
        if found is None or isinstance(found, Tool) or _is_source(found):
            return
        if not callable(found):
            self.problem(path, f"{spec!r} is not a tool: {found!r} (a Tool or a function)")
            return
        try:
            self.resolved[spec] = tool(found)
        except ToolDefinitionError as exc:
            shown = "; ".join(exc.problems[:2])
            more = f"; and {len(exc.problems) - 2} more" if len(exc.problems) > 2 else ""
            self.problem(path, f"{spec!r} is not a tool: {shown}{more}")

    def _source(self, entry: MCPEntry, path: str) -> None:
        if (entry.command is None) == (entry.url is None):
            self.problem(path, "give either command (a stdio server) or url (an HTTP server)")
        elif entry.url is not None and (entry.args or entry.env or entry.cwd):
            self.problem(path, "args, env and cwd are for stdio servers (with command)")
        if self.imports:  # (toolfold check: an SDK installed but broken is said too)
            if self.sdk_problem is None:
                self.sdk_problem = _sdk_problem()
            if self.sdk_problem:
                self.problem(path, self.sdk_problem)
        elif not installed("mcp"):  # (not imported: it is slow, and loading needs no server)
            self.problem(path, missing("mcp", "mcp", "an MCP server"))

    def _order(self) -> list[str]:
        """The agents and workflows, each after those it contains; a cycle of those is a problem.

        A spec contains its agents used as tools and its steps. Handoffs may
        form cycles (they go by name at run time): a handoff target built
        earlier is handed the agent itself, a later one its name, and the
        order builds handoff targets first where that does not break a cycle.
        """
        names = [*self.entries, *self.flows]
        contains = {
            name: [
                t
                for t in (
                    _references(self.entries[name])
                    if name in self.entries
                    else _step_references(self.flows[name])
                )
                if t in self.entries or t in self.flows
            ]
            for name in names
        }
        hands = {
            name: [t for t in _handoff_references(self.entries[name]) if t in self.entries]
            for name in self.entries
        }
        inside: dict[str, set[str]] = {}

        def closure(name: str) -> set[str]:
            """``name`` and everything it contains, at any depth."""
            if name not in inside:
                inside[name] = {name}
                for target in contains[name]:
                    inside[name] |= closure(target)
            return inside[name]

        order: list[str] = []
        state: dict[str, str] = {}

        def visit(name: str, trail: list[str]) -> None:
            if state.get(name) == "done":
                return
            if state.get(name) == "active":
                cycle = [*trail[trail.index(name) :], name]
                table = "agents" if name in self.entries else "workflows"
                self.problem(
                    f"{table}.{name}",
                    "cycle in definitions: "
                    + " -> ".join(cycle)
                    + " (a spec cannot contain itself through tools or steps; only handoffs "
                    "may form a cycle)",
                )
                return
            state[name] = "active"
            for target in contains[name]:
                visit(target, [*trail, name])
            active = {n for n, s in state.items() if s == "active"}
            for target in hands.get(name, ()):
                if target not in state and not closure(target) & active:
                    visit(target, [*trail, name])
            state[name] = "done"
            order.append(name)

        for name in names:
            try:
                visit(name, [])
            except RecursionError:  # (each level nests a call: a chain deeper than the stack)
                self._too_deep(f"{'agents' if name in self.entries else 'workflows'}.{name}")
                return names
        return order

    def _too_deep(self, path: str) -> None:
        """The spec at ``path`` nests deeper than loading it can go (a RecursionError)."""
        self.problem(
            path,
            "nests too deep to load (agents used as tools and workflow steps, each inside "
            f"the next, past Python's recursion limit of {sys.getrecursionlimit()} frames): "
            "flatten it (a sequence takes many steps at one level)",
        )

    def _check_free_names(self, built: Mapping[str, Any]) -> None:
        """A workflow no other one of the file nests runs on its own: every name its templates use must be defined in it."""
        nested = {ref for flow in self.flows.values() for ref in _step_references(flow)}
        for name in self.flows:
            if name in nested:
                continue
            for problem in built[name].free_problems():
                self.problem(
                    f"workflows.{name}",
                    f"{problem} (no other workflow of the file nests this one to define it)",
                )

    def _task(self, ref: StepRef, built: Mapping[str, Any]) -> Any:
        """A workflow step: the agent, workflow or function, in a `Task` when it has options."""
        from toolfold.runtime._task import Task

        target_ref = ref.step if isinstance(ref, StepEntry) else ref
        if ":" in target_ref:
            target = self.resolved[target_ref]
        elif target_ref not in built and self.problems:
            target = self._stand_in(target_ref)
        else:
            target = built[target_ref]
        if not isinstance(ref, StepEntry):
            return target
        return Task(
            target,
            name=ref.name,
            on_error=ref.on_error,
            retries=ref.retries,
            prompt=ref.prompt,
            input_type=None if ref.input_type is None else self.resolved[ref.input_type],
            timeout=ref.timeout,
            retry_delay=ref.retry_delay,
        )

    def _stand_in(self, name: str) -> Agent | Workflow:
        """A step standing in for the agent or workflow ``name``, which could not be built (said).

        It takes any input and gives any output, so the workflow using it is
        built and reports its own problems, and none the stand-in would cause.
        It is made only once a problem is recorded: the file then fails to load,
        so no stand-in ever runs or ends up in an `AgentFile`.
        """
        from toolfold.testing import TestModel

        agent = Agent(TestModel(), name=name, output_type=Any)
        return agent if name in self.entries else Sequence(agent, name=name)

    def _workflow(self, name: str, flow: WorkflowEntry, built: Mapping[str, Any]) -> Workflow:
        if flow.kind == "sequence":
            return Sequence(*(self._task(s, built) for s in flow.steps), name=name)
        if flow.kind == "parallel":
            return Parallel(
                *(self._task(s, built) for s in flow.steps),
                merge=None if flow.merge is None else self.resolved[flow.merge],
                max_concurrency=flow.max_concurrency,
                name=name,
            )
        if flow.kind == "route":
            assert flow.router is not None
            return Route(
                self._task(flow.router, built),
                {label: self._task(s, built) for label, s in flow.branches.items()},
                None if flow.default is None else self._task(flow.default, built),
                name=name,
            )
        assert flow.step is not None
        until = flow.until
        return Loop(
            self._task(flow.step, built),
            until=self.resolved[until] if until is not None and ":" in until else until,
            max_iterations=flow.max_iterations,
            name=name,
        )

    def _agent(
        self, name: str, entry: AgentEntry, built: Mapping[str, Any], override: Model | str | None
    ) -> Agent:
        tools: list[Any] = []
        for item in entry.tools:
            if isinstance(item, AgentToolEntry):
                target = item.agent or item.workflow or ""
                if target not in built and self.problems:
                    # It could not be built (said): a stand-in of the same name lets this
                    # agent's build report the agent's own problems (a missing key) too.
                    tools.append(Tool(item.name or target, f"stands in for {target!r}"))
                    continue
                tools.append(
                    built[target].as_tool(
                        item.name,
                        item.description,
                        input_type=str
                        if item.input_type is None
                        else self.resolved[item.input_type],
                        requires_approval=item.requires_approval,
                        timeout=item.timeout,
                        output=None if item.output is None else self.resolved[item.output],
                    )
                )
            else:
                tools.append(self.resolved[item])
        tools.extend(_server(source) for source in entry.mcp)
        handoffs: list[Agent | Handoff | str] = []
        for handoff in entry.handoffs:
            if isinstance(handoff, str):
                handoffs.append(built.get(handoff, handoff))  # not built yet: a cycle's edge back
                continue
            handoffs.append(
                Handoff(
                    built.get(handoff.agent, handoff.agent),
                    name=handoff.name,
                    description=handoff.description,
                    input_filter=None
                    if handoff.input_filter is None
                    else self.resolved[handoff.input_filter],
                )
            )
        model = override if override is not None else self._model(entry.model, "")
        return Agent(
            model if model is not None else entry.model,
            name=name,
            tools=tools,
            handoffs=handoffs,
            output_type=self._output_type(entry.output_type),
            stop_when=[
                self.resolved[c] if isinstance(c, str) else stop_condition(c)
                for c in entry.stop_when
            ],
            settings=entry.settings,
            **{key: getattr(entry, key) for key in PLAIN_KEYS},
        )


def _variant_of(name: str, names: Collection[str]) -> str:
    """``; 'café' differs only in Unicode normalization from ...``, or "" (`normalization_variant`)."""
    variant = normalization_variant(name, names)
    return "" if variant is None else f"; {name!r} {variant}"


# An agent's numbers and their least values (`Agent` refuses smaller ones).
_AGENT_MINIMA = (("max_steps", 1), ("output_retries", 0), ("max_concurrency", 1))


def _references(entry: AgentEntry) -> Iterator[str]:
    for item in entry.tools:
        if isinstance(item, AgentToolEntry):
            target = item.agent or item.workflow
            if target is not None:
                yield target


def _handoff_references(entry: AgentEntry) -> Iterator[str]:
    for handoff in entry.handoffs:
        yield handoff.agent if isinstance(handoff, HandoffEntry) else handoff


def _step_references(flow: WorkflowEntry) -> Iterator[str]:
    refs = [*flow.steps, *flow.branches.values()]
    refs += [r for r in (flow.router, flow.default, flow.step) if r is not None]
    for ref in refs:
        target = ref.step if isinstance(ref, StepEntry) else ref
        if ":" not in target:
            yield target


def _sdk_problem() -> str:
    """Why the ``mcp`` SDK an MCP server needs does not import, or "" (it does)."""
    from toolfold.mcp._client import sdk

    try:
        sdk("an MCP server")
    except ToolfoldError as exc:
        return str(exc)
    return ""


def _server(entry: MCPEntry) -> ToolSource:
    from toolfold.mcp import MCPServerHTTP, MCPServerStdio

    options: dict[str, Any] = {
        "prefix": entry.prefix,
        "timeout": entry.timeout,
        "startup_timeout": entry.startup_timeout,
        "requires_approval": entry.requires_approval,
        "include": entry.include,
        "name": entry.name,
    }
    if entry.url is not None:
        return MCPServerHTTP(entry.url, **options)
    assert entry.command is not None
    return MCPServerStdio(entry.command, entry.args, env=entry.env, cwd=entry.cwd, **options)


def _is_source(value: Any) -> bool:
    return not isinstance(value, Tool) and not callable(value) and isinstance(value, ToolSource)


def _is_model_string(spec: str) -> bool:
    """A ``provider:model`` string (its prefix is a registered provider)."""
    from toolfold.runtime import _model

    prefix = spec.partition(":")[0]
    if prefix not in _model._PROVIDERS:
        _model._load_builtin_adapters()
    return prefix in _model._PROVIDERS


def _no_provider(spec: str, exc: BaseException) -> bool:
    """Whether ``spec``, a model that did not import (``exc``), reads as a model string
    with a misspelt provider (``"opneai:gpt-4o"``, ``"openai-response:gpt-4o"``): its
    prefix has no dot and is the very module found missing. A module that exists and
    failed (``my-models.py`` raising, or naming no ``fsat``) keeps its own error: a
    hyphenated file imports as any other."""
    prefix = spec.partition(":")[0]
    return "." not in prefix and isinstance(exc, ModuleNotFoundError) and exc.name == prefix


def _no_provider_problem(spec: str) -> str:
    """What is said of ``spec`` when `_no_provider`: the model string's error, and the
    import path's (``spec`` may have been meant as either)."""
    module = spec.partition(":")[0]
    if not module.isidentifier():  # ("openai-response": a missing module the import statement
        # could not name anyway, so meant as a model string; only the provider is said)
        return unknown_provider(spec)
    return f"{unknown_provider(spec)} (nor is {module!r} a module to import a Model from)"


def _validation_problems(
    exc: BaseException, path: str, value: Any = None
) -> Iterator[tuple[str, str]]:
    """(key path, message) for each leaf of a cattrs validation error (``value``: what failed)."""
    import cattrs
    from cattrs.errors import ForbiddenExtraKeysError

    if isinstance(exc, ForbiddenExtraKeysError):
        for key in sorted(exc.extra_fields):
            yield f"{path}.{key}", f"unknown key {_key_text(key)}"
        return
    if isinstance(exc, cattrs.ClassValidationError | cattrs.IterableValidationError):
        with_notes, without = exc.group_exceptions()
        for inner, note in with_notes:
            name = getattr(note, "name", None)
            index = getattr(note, "index", None)
            if name is not None:
                child = f"{path}.{name}"
                item = value.get(name) if isinstance(value, dict) else None
            elif isinstance(index, int) and not isinstance(index, bool):  # (a YAML key True)
                child = f"{path}[{index}]"
                item = value[index] if isinstance(value, list) and index < len(value) else None
            else:
                child = f"{path}.{index}"
                item = None
            kind = getattr(note, "type", None)
            if typing.get_origin(kind) is typing.Literal and not isinstance(
                inner, cattrs.BaseValidationError
            ):  # cattrs says "x not in literal typing.Literal[...]"
                allowed = ", ".join(repr(a) for a in typing.get_args(kind))
                yield child, f"expected one of {allowed}, got {describe(item)}"
                continue
            yield from _validation_problems(inner, child, item)
        for inner in without:
            yield from _validation_problems(inner, path, value)
        return
    if isinstance(exc, KeyError):
        yield path, "missing (this key is required)"
        return
    yield path, str(exc)
