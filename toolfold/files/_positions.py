"""Where each key path of a TOML text is: the line of every table, key and array item.

`tomllib` gives values without positions, so an agent file's problems find
their lines here. The text is one `tomllib` has read already (valid TOML), so
the scanner follows the grammar without checking it: table headers with
quoted or spaced names (``[agents."x y"]``), dotted keys (``a.b = 1``), arrays
of tables (``[[agents.a.mcp]]``, numbered ``agents.a.mcp[1]``), and values,
whose array items (across lines too) and inline-table keys get lines of their
own. Paths are the loader's: names joined with dots, items numbered
``[i]``.
"""

from __future__ import annotations

import bisect
import re
import sys
from typing import Any

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_SCALAR_END = re.compile(r"[,\]}#\n]")
_BLANK = " \t\r"


def toml_positions(text: str) -> dict[str, int]:
    """The line (from 1) where each key path of ``text`` first appears."""
    return _Scan(text).run()


class _Scan:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.breaks = [m.start() for m in re.finditer("\n", text)]
        self.found: dict[str, int] = {}
        self.arrays: dict[str, int] = {}  # an array of tables -> the index of its last table

    def run(self) -> dict[str, int]:
        table = ""
        while True:
            self.skip(newlines=True)
            if self.i >= len(self.text):
                return self.found
            line = self.line()
            if self.text.startswith("[[", self.i):
                self.i += 2
                name = self.resolve(self.key(), last_too=False)
                self.i = self.text.index("]]", self.i) + 2
                index = self.arrays[name] = self.arrays.get(name, -1) + 1
                self.note(name, line)
                table = f"{name}[{index}]"
            elif self.text.startswith("[", self.i):
                self.i += 1
                table = self.resolve(self.key(), last_too=True)
                self.i = self.text.index("]", self.i) + 1
            else:
                self.pair(table)
                continue
            self.note(table, line)

    def pair(self, table: str) -> None:
        """``key = value`` under ``table``; each part of a dotted key is noted."""
        line = self.line()
        path = table
        for part in self.key():
            path = f"{path}.{part}" if path else part
            self.note(path, line)
        self.skip()
        self.i += 1  # "="
        self.value(path)

    def value(self, path: str) -> None:
        self.skip()
        text, i = self.text, self.i
        if text.startswith(('"""', "'''"), i):
            quote = text[i : i + 3]
            end = self.closing(i + 3, quote)
            while text.startswith(quote[0], end + 3):  # up to two quotes of the content
                end += 1
            self.i = end + 3
        elif text[i] in "\"'":
            self.string()
        elif text[i] == "[":
            self.i += 1
            index = 0
            while True:
                self.skip(newlines=True)
                if text[self.i] == "]":
                    self.i += 1
                    return
                item = f"{path}[{index}]"
                self.note(item, self.line())
                self.value(item)
                self.skip(newlines=True)
                if text[self.i] == ",":
                    self.i += 1
                index += 1
        elif text[i] == "{":
            self.i += 1
            while True:
                self.skip(newlines=True)
                if text[self.i] == "}":
                    self.i += 1
                    return
                self.pair(path)
                self.skip(newlines=True)
                if text[self.i] == ",":
                    self.i += 1
        else:  # a number, a boolean, a date
            stop = _SCALAR_END.search(text, i)
            self.i = len(text) if stop is None else stop.start()

    def key(self) -> list[str]:
        """A (dotted) key's parts, unquoted."""
        parts = []
        while True:
            self.skip()
            if self.text[self.i] in "\"'":
                parts.append(self.string())
            else:
                bare = _BARE.match(self.text, self.i)
                assert bare is not None, "tomllib read this text: a key is here"
                parts.append(bare.group())
                self.i = bare.end()
            self.skip()
            if not self.text.startswith(".", self.i):
                return parts
            self.i += 1

    def string(self) -> str:
        """A one-line string (basic or literal) at ``i``, its value."""
        text, start = self.text, self.i
        end = self.closing(start + 1, text[start])
        self.i = end + 1
        raw = text[start : end + 1]
        if raw.startswith("'"):
            return raw[1:-1]
        return str(_tomllib().loads(f"v = {raw}")["v"])

    def closing(self, i: int, quote: str) -> int:
        """Where ``quote`` closes a string whose content starts at ``i`` (escapes skipped)."""
        text = self.text
        while not text.startswith(quote, i):
            i += 2 if text[i] == "\\" and quote[0] == '"' else 1
        return i

    def skip(self, *, newlines: bool = False) -> None:
        """Past blanks and a comment (and line ends, with ``newlines``)."""
        text, i = self.text, self.i
        while i < len(text):
            char = text[i]
            if char in _BLANK or (newlines and char == "\n"):
                i += 1
            elif char == "#":
                end = text.find("\n", i)
                i = len(text) if end < 0 else end
            else:
                break
        self.i = i

    def resolve(self, parts: list[str], *, last_too: bool) -> str:
        """A header's path: each array of tables it goes through numbered with its last table."""
        path = ""
        for number, part in enumerate(parts, start=1):
            path = f"{path}.{part}" if path else part
            if path in self.arrays and (last_too or number < len(parts)):
                path = f"{path}[{self.arrays[path]}]"
        return path

    def line(self) -> int:
        return bisect.bisect_left(self.breaks, self.i) + 1

    def note(self, path: str, line: int) -> None:
        self.found.setdefault(path, line)


def _tomllib() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the 3.10 dependency
        import tomli as tomllib
    return tomllib
