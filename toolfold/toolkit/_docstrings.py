"""Docstrings → descriptions: Google, NumPy, reST and Epydoc, auto-detected.

docstring-parser does the parsing. Its own auto-detection parses the text with
every style and keeps the richest result (~110 µs for a short docstring), so the
style is picked here from a few cheap line patterns and one parser runs (and
docstring-parser itself is imported only when a docstring needs parsing).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

STYLES = ("auto", "google", "numpy", "rest", "epydoc")

_NUMPY = re.compile(r"^[ \t]*\w[\w ]*\n[ \t]*-{3,}[ \t]*$", re.M)
_REST = re.compile(
    r"^[ \t]*:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|ivar|cvar|var)\b",
    re.M,
)
_EPYDOC = re.compile(r"^[ \t]*@(param|type|return|rtype|raise|ivar|cvar|var)\b", re.M)
_SECTION = re.compile(r"^[ \t]*[A-Z][A-Za-z ]*:[ \t]*$", re.M)


class ToolDefinitionWarning(UserWarning):
    """A tool was built, but something in its definition looks wrong.

    For example a docstring that documents a parameter the function does not
    have, or leaves one of its parameters undocumented.
    """


class UndocumentedParameterWarning(ToolDefinitionWarning):
    """A tool parameter has no description, so the model must guess what it means.

    Document it in the docstring (``Args:``) or with ``Annotated[...,
    Field(description=...)]``; silence it with ``warnings.filterwarnings("ignore",
    category=UndocumentedParameterWarning)``, or make it an error with
    ``@tool(require_parameter_descriptions=True)``.
    """


class Described(dict[str, str]):
    """Name -> description, each name as the docstring writes it (what iterating gives).

    A lookup (``[name]``, ``get``, ``in``) also finds a name written otherwise than
    Python reads it: Python normalizes identifiers (NFKC), so ``città`` written
    decomposed, as some editors save it, or ``ﬁle`` with its ligature, are the
    parameters ``città`` and ``file``. Those forms are a separate lookup map, not
    entries: a documented name no parameter has is reported once, as written.
    """

    __slots__ = ("_normal",)

    def __init__(self) -> None:
        super().__init__()
        self._normal: dict[str, str] = {}  # the NFKC form -> the name as written

    def add(self, name: str, description: str) -> None:
        """``self[name] = description``, findable under the name's NFKC form too."""
        self[name] = description
        if not name.isascii():
            normal = unicodedata.normalize("NFKC", name)
            if normal != name:
                self._normal.setdefault(normal, name)

    def __missing__(self, name: str) -> str:
        written = self._normal.get(name)
        if written is None:
            raise KeyError(name)
        return dict.__getitem__(self, written)

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self._normal

    def get(self, name: str, default: Any = None) -> Any:
        """The description of ``name`` (as written, or in its NFKC form), else ``default``."""
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        written = self._normal.get(name)
        return default if written is None else dict.__getitem__(self, written)


class ParsedDocstring:
    """What toolfold takes from a docstring.

    Attributes:
        description: Summary plus long description, without the sections.
        params: Parameter name -> description (``Args:`` and the like).
        attributes: Attribute name -> description (``Attributes:``, ``:ivar:``).
    """

    __slots__ = ("attributes", "description", "params")

    def __init__(
        self,
        description: str = "",
        params: dict[str, str] | None = None,
        attributes: dict[str, str] | None = None,
    ) -> None:
        self.description = description
        self.params = params or {}
        self.attributes = attributes or {}


_EMPTY = ParsedDocstring()
# docstring-parser's kinds of parameter entries (NumPy's "Other Parameters" is other_param)
_PARAMS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword", "other_param"})
_parsers: dict[str, Any] = {}


def detect_style(text: str) -> str:
    """Guess a docstring's style from its section markers ("google" if none)."""
    if _REST.search(text):
        return "rest"
    if _EPYDOC.search(text):
        return "epydoc"
    if "--" in text and _NUMPY.search(text):
        return "numpy"
    return "google"


def _parser(style: str) -> Any:
    parse = _parsers.get(style)
    if parse is None:
        from docstring_parser import epydoc, google, numpydoc, rest

        # One GoogleParser, reused: building one compiles its section regex.
        parse = {
            "google": google.GoogleParser(_google_sections(google)).parse,
            "google-default": google.GoogleParser().parse,
            "numpy": numpydoc.parse,
            "rest": rest.parse,
            "epydoc": epydoc.parse,
        }[style]
        _parsers[style] = parse
    return parse


def _google_sections(google: Any) -> list[Any]:
    """docstring-parser's Google sections, and those Napoleon reads as parameters too.

    docstring-parser does not know ``Keyword Args:``, ``Keyword Arguments:`` and
    ``Other Parameters:`` (Sphinx Napoleon's sections for keyword-only and
    rarely used parameters): without them such a section's entries are lost
    after another section, or read as part of the description when alone. Such
    a section written as prose is a ParseError here: `parse_docstring` then
    reads the docstring with docstring-parser's own sections.
    """
    param = google.SectionType.MULTIPLE
    extra = [
        google.Section(title, "param", param)
        for title in ("Keyword Args", "Keyword Arguments", "Other Parameters", "Other Params")
    ]
    return [*google.DEFAULT_SECTIONS, *extra]


def parse_docstring(text: str | None, style: str = "auto") -> ParsedDocstring:
    """Parse a docstring into a description and per-name descriptions.

    Args:
        text: The raw docstring (indented as written), or None.
        style: One of "auto", "google", "numpy", "rest", "epydoc".

    Returns:
        The description and the documented parameters and attributes.
    """
    if not text or not text.strip():
        return _EMPTY
    if style == "auto":
        style = detect_style(text)
        if style == "google" and not _SECTION.search(text):
            return ParsedDocstring(_plain_description(text))
    try:
        parsed = _parser(style)(text)
    except Exception:  # docstring_parser.ParseError: a malformed section
        if style != "google":
            return ParsedDocstring(_plain_description(text))
        # A Keyword Args / Other Parameters section may be prose ("Passed on to
        # requests."), no `name: text` entries: read without those sections, it
        # stays text and the Args: entries are kept.
        try:
            parsed = _parser("google-default")(text)
        except Exception:
            return ParsedDocstring(_plain_description(text))
    short = parsed.short_description or ""
    long = parsed.long_description or ""
    if short and long:
        description = short + ("\n\n" if parsed.blank_after_short_description else "\n") + long
    else:
        description = short or long
    params = Described()
    attributes = Described()
    for meta in parsed.meta:
        args = meta.args
        if len(args) < 2 or not meta.description:
            continue
        kind = args[0]
        # The parser's arg_name is the names without the type ("b" of Google's
        # "b (dict[str, int], optional)"); "x, y : int" (NumPy) and "x, y (int)"
        # (Google) document several names at once.
        written = getattr(meta, "arg_name", None) or args[-1]
        names = [n.strip().split(" ", 1)[0].lstrip("*") for n in written.split(",")]
        for name in filter(None, names):
            if kind in _PARAMS:
                params.add(name, meta.description.strip())
            elif kind in ("attribute", "ivar", "cvar", "var"):
                attributes.add(name, meta.description.strip())
    return ParsedDocstring(description.strip(), params, attributes)


def _plain_description(text: str) -> str:
    import inspect

    return inspect.cleandoc(text)
