"""A string a regular expression matches, the simplest one (for `sample_value`'s ``pattern``).

Python's own regex parser reads the pattern; each construct gives its simplest
text: a character class its first member (or, negated, a character outside
it), a repeat its least count, an alternation its first branch, a group its
content, anchors and lookarounds nothing. Repeats grow while the text is
shorter than ``minLength`` (by one a round, then twice as many). Whatever
comes out is checked with ``re.search``: a pattern this cannot satisfy gives
None, never a string that does not match.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import sre_parse as _parser
else:
    try:
        from re import _parser  # 3.11+
    except ImportError:  # 3.10
        import sre_parse as _parser

# Tried in order where a class is negated or a literal excluded.
_CANDIDATES = "a0A_-. x"
# Tried after them for the other samples of `pattern_samples`.
_MORE = "bcdefgh123456789BCDEFGH"
# How many characters a class offers `pattern_samples` at most.
_OPTIONS = 8
# How many characters a sample may have at most (a repeat of a million is refused).
_MAX_LENGTH = 10_000
# How many times repeats grow toward ``minLength`` beyond it.
_GROWTH = 8

_CATEGORIES: dict[Any, Callable[[str], bool]] = {
    _parser.CATEGORY_DIGIT: str.isdecimal,
    _parser.CATEGORY_NOT_DIGIT: lambda c: not c.isdecimal(),
    _parser.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    _parser.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
    _parser.CATEGORY_SPACE: str.isspace,
    _parser.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
}
_REPEATS = {
    _parser.MAX_REPEAT,
    _parser.MIN_REPEAT,
    getattr(_parser, "POSSESSIVE_REPEAT", _parser.MAX_REPEAT),  # 3.11+: a*+
}
_NOTHING = {_parser.AT, _parser.ASSERT, _parser.ASSERT_NOT}  # anchors, lookarounds


class _CannotSample(Exception):
    """A construct this does not sample (a conditional group, a class with no candidate)."""


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether ``re.search(pattern, text)`` matches (False for a pattern ``re`` refuses)."""
    try:
        return re.search(pattern, text) is not None
    except (re.error, RecursionError, OverflowError):
        return False


def pattern_sample(pattern: str, min_length: int = 0, max_length: int | None = None) -> str | None:
    """The simplest string that ``re.search(pattern, ...)`` matches, of a length in the
    bounds; None when none is found (an unsupported or unsatisfiable pattern)."""
    return next(pattern_samples(pattern, min_length, max_length), None)


def pattern_samples(
    pattern: str, min_length: int = 0, max_length: int | None = None, tries: int = 256
) -> Iterator[str]:
    """Distinct strings ``re.search(pattern, ...)`` matches, of a length in the bounds:
    the simplest (`pattern_sample`), then those that choose otherwise at one choice
    (another member of a class, another branch), then at two...; at most ``tries``
    are built after the first (the distinct items of a ``uniqueItems`` array)."""
    try:
        compiled = re.compile(pattern)
        parsed = cast("Iterable[tuple[Any, Any]]", _parser.parse(pattern))
    except (re.error, RecursionError, OverflowError):
        return
    if min_length > _MAX_LENGTH:
        return

    classes: dict[int, list[str]] = {}  # each class's members, by the id of its parsed items

    def build(growth: int, choices: tuple[int, ...]) -> tuple[str | None, str, list[int]]:
        """The sample of ``choices`` (None: none fits), its text and its choice points' sizes."""
        builder = _Builder(growth, choices, classes)
        text = builder.items(parsed)
        padded = text + "a" * (min_length - len(text))  # an unanchored end takes more
        for candidate in dict.fromkeys((text, padded)):
            fits = len(candidate) >= min_length and (
                max_length is None or len(candidate) <= max_length
            )
            if fits and compiled.search(candidate):
                return candidate, text, builder.options
        return None, text, builder.options

    growth, last = 0, -1
    while True:
        try:
            found, text, options = build(growth, ())
        except (_CannotSample, RecursionError):
            return
        if found is not None:
            break
        if len(text) >= min_length or len(text) <= last:
            return  # longer repeats would not help, or the repeats cannot grow
        last = len(text)
        # One more a round at first (the simplest samples), then twice as many: a
        # long minLength is reached in a few rounds, each capped at _MAX_LENGTH.
        growth = growth + 1 if growth < _GROWTH else growth * 2
    yield found
    seen = {found}
    # The choices one change away from each sample's, the nearest first.
    queue: list[tuple[tuple[int, ...], list[int]]] = [((), options)]
    visited: set[tuple[int, ...]] = {()}
    built = 0
    while queue:
        choices, sizes = queue.pop(0)
        for point in reversed(range(len(sizes))):
            for option in range(sizes[point]):
                changed = [*choices, *(0,) * (len(sizes) - len(choices))]
                if changed[point] == option:
                    continue
                changed[point] = option
                while changed and not changed[-1]:
                    changed.pop()
                other = tuple(changed)
                if other in visited:
                    continue
                visited.add(other)
                built += 1
                if built > tries:
                    return
                try:
                    sample, _, more = build(growth, other)
                except (_CannotSample, RecursionError):
                    continue
                queue.append((other, more))
                if sample is not None and sample not in seen:
                    seen.add(sample)
                    yield sample


class _Builder:
    """Builds one sample; each unbounded or long repeat takes ``growth`` more than its least."""

    def __init__(
        self,
        growth: int,
        choices: tuple[int, ...] = (),
        classes: dict[int, list[str]] | None = None,
    ) -> None:
        self.growth = growth
        # (a class repeated thousands of times is read once: ``[^abc]{5000}``)
        self.classes: dict[int, list[str]] = {} if classes is None else classes
        self.groups: dict[int, str] = {}
        self.length = 0
        # Which option each choice point takes (0, the simplest, past the given
        # ones), and how many options each had (`pattern_samples` varies them).
        self.choices = choices
        self.options: list[int] = []
        self.varied = [point for point, taken in enumerate(choices) if taken]

    def _choose(self, count: int) -> int:
        """The option taken at the next choice point of ``count`` options."""
        point = len(self.options)
        self.options.append(count)
        taken = self.choices[point] if point < len(self.choices) else 0
        return taken if taken < count else 0

    def items(self, items: Iterable[tuple[Any, Any]]) -> str:
        return "".join([self.item(op, av) for op, av in items])

    def item(self, op: Any, av: Any) -> str:
        if op is _parser.LITERAL:
            return self._add(chr(av))
        if op is _parser.NOT_LITERAL:
            return self._add(self._pick(_but(av)))
        if op is _parser.ANY:
            return self._add(self._pick(_ANY))
        if op is _parser.IN:
            members = self.classes.get(id(av))
            if members is None:
                members = self.classes[id(av)] = _class_members(av)
            return self._add(self._pick(members))
        if op is _parser.SUBPATTERN:
            group, _, _, content = av
            text = self.items(content)
            if group is not None:
                self.groups[group] = text
            return text
        if op is _parser.BRANCH:
            return self.items(av[1][self._choose(len(av[1]))])
        if op in _REPEATS:
            least, most, content = av
            count = least + self.growth
            if most is not _parser.MAXREPEAT:
                count = min(count, most)
            if count == 0:
                return ""
            first = self.items(content)
            if not first:  # ``(){1000000}``: every round gives the same nothing
                return ""
            # Each round adds text, so `_add`'s cap ends a huge count early.
            rounds, done = [first], 1
            while done < count:
                start, groups = len(self.options), dict(self.groups)
                text = self.items(content)
                rounds.append(text)
                done += 1
                same = self._same_rounds(start, text, groups)
                if same:  # (``[^abc]{5000}``: not 5,000 rounds for each sample)
                    same = min(same, count - done)
                    self._add_length(len(text) * same)
                    self.options.extend(self.options[start:] * same)
                    rounds.append(text * same)
                    done += same
            return "".join(rounds)
        if op is _parser.GROUPREF:
            return self._add(self.groups.get(av, ""))
        if op is getattr(_parser, "ATOMIC_GROUP", None):
            return self.items(av)
        if op in _NOTHING:
            return ""
        raise _CannotSample(op)

    def _same_rounds(self, start: int, text: str, groups: dict[int, str]) -> int:
        """How many more rounds of a repeat give ``text`` again, the round just built
        having taken choice points from ``start`` on and found the groups ``groups``.

        A round that took only the simplest options and left the groups as they
        were is built again alike while the next rounds' choice points take the
        simplest options too (until the next varied point of ``choices``).
        """
        if not text or self.groups != groups:
            return 0
        taken = len(self.options) - start
        at = bisect.bisect_left(self.varied, start)
        following = self.varied[at] if at < len(self.varied) else None
        if following is None or taken == 0:
            return _MAX_LENGTH  # (each round adds text: `_add_length` ends it)
        return max(0, (following - start) // taken - 1)

    def _add(self, text: str) -> str:
        self._add_length(len(text))
        return text

    def _add_length(self, length: int) -> None:
        self.length += length
        if self.length > _MAX_LENGTH:
            raise _CannotSample("too long")

    def _pick(self, members: list[str]) -> str:
        if not members:
            raise _CannotSample("no candidate")
        return members[self._choose(len(members))]


def _class_members(items: list[tuple[Any, Any]]) -> list[str]:
    """Characters the class ``[...]`` (parsed ``items``) matches, the simplest first
    (its first member; negated, a character outside it), at most `_OPTIONS`."""
    if items and items[0][0] is _parser.NEGATE:
        rest = items[1:]
        return _members(lambda c: not any(_matches(op, av, c) for op, av in rest))
    found: list[str] = []
    for op, av in items:
        if op is _parser.LITERAL:
            found.append(chr(av))
        elif op is _parser.RANGE:
            found += [chr(c) for c in range(av[0], min(av[1], av[0] + _OPTIONS - 1) + 1)]
        elif op is _parser.CATEGORY and av in _CATEGORIES:
            found += _members(_CATEGORIES[av])
    return list(dict.fromkeys(found))[:_OPTIONS]


def _matches(op: Any, av: Any, char: str) -> bool:
    if op is _parser.LITERAL:
        return bool(ord(char) == av)
    if op is _parser.RANGE:
        return bool(av[0] <= ord(char) <= av[1])
    if op is _parser.CATEGORY:
        accepts = _CATEGORIES.get(av)
        return accepts is None or accepts(char)
    return True  # unknown: taken as a match, so the character is not chosen


@functools.cache
def _but(code: int) -> list[str]:
    """The candidates other than the character ``code`` (``[^x]`` of one character)."""
    return _members(lambda c: ord(c) != code)


def _members(accepts: Callable[[str], bool]) -> list[str]:
    """The characters of `_CANDIDATES`, then of `_MORE`, that ``accepts`` takes, at most `_OPTIONS`."""
    return [c for c in dict.fromkeys(_CANDIDATES + _MORE) if accepts(c)][:_OPTIONS]


_ANY = _members(lambda c: c != "\n")  # what ``.`` matches, the simplest first
