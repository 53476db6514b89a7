"""Short reprs for the values a user prints: a few informative fields, trimmed.

attrs' generated repr prints every field, recursively: a two-step run's
`Response` came to thousands of characters (the config twice, the whole log).
These reprs keep attrs' ``Name(field=value)`` shape but show only what tells
values apart (role, an excerpt of the text, the finish reason, counts, usage);
the full data stays one attribute away (``response.state``, ``state.log``,
``message.parts``).
"""

from __future__ import annotations

import difflib
import numbers
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

#: Characters of text a repr shows before it cuts with an ellipsis.
EXCERPT = 60
#: Past this an int is shown by its size (`value_or_type`): an int past 4,300 digits
#: has no repr (ValueError), and no limit means anything this large.
HUGE = 10**100


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """``repr(text)``, cut to ``limit`` characters with ``…`` and the full length."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[: limit - 1] + '…'!r} ({len(text):,} chars)"


def short(value: Any, limit: int = EXCERPT) -> str:
    """``repr(value)``, cut like `excerpt` when it is long."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text):,} chars)"


def value_or_type(value: Any) -> str:
    """What an error shows of a value a user gave: a number's repr (None, a bool, an
    int, a float, a Decimal; cut past 40 characters, an int of 101 digits or more by
    its size), else only its type's name (a str, a dict, a user's object may hold an
    API key, and an error names the option, never such a value)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= HUGE:
        return f"an int of about {int(value.bit_length() * 0.30103) + 1} digits"
    if value is None or isinstance(value, numbers.Number):
        try:
            shown = repr(value)
        except Exception:  # (a Fraction of a huge int has none)
            return type(value).__qualname__
        return shown if len(shown) <= 40 else f"{shown[:20]}... ({len(shown)} characters)"
    return type(value).__qualname__


def a_class(cls: type, instance_would_do: bool = True) -> str:
    """What an error shows of a class given where an object is expected: ``the class
    Name; pass an instance (Name(...))``, or ``the class Name`` alone when its instances
    would not do either (``instance_would_do`` false). A class's name is no secret, and
    `value_or_type` says only ``type`` of it."""
    shown = f"the class {cls.__name__}"
    return f"{shown}; pass an instance ({cls.__name__}(...))" if instance_would_do else shown


def not_a_choice(value: Any, choices: Sequence[str]) -> str:
    """What an error shows of ``value``, given for an option that takes one of ``choices``
    (strs): a str's text never (it may be a key given to the wrong keyword), but the choice
    it is a variant of (case, spacing) or a near miss of, if any (``another str; did you
    mean 'raise'?``); any other value as `value_or_type` shows it."""
    if not isinstance(value, str):
        return value_or_type(value)
    variant = normalization_variant(value, choices, "in the choice")
    if variant is not None:
        return f"another str, which {variant}"
    folded = "".join(value.split()).lower()
    close = [c for c in choices if c == folded]
    # (far longer than any choice, it is no near miss: difflib would take seconds on a long one)
    if not close and len(folded) <= 2 * max(map(len, choices), default=0) + 8:
        close = difflib.get_close_matches(folded, choices, n=1, cutoff=0.6)
    return f"another str; did you mean {close[0]!r}?" if close else "another str (not shown)"


def near_names(name: str, names: Sequence[str], most: int = 3) -> list[str]:
    """Up to ``most`` of ``names`` that ``name`` may have meant: those equal to it but for
    case if any, else those that are it with a prefix (``docs_search`` for ``search``: an
    MCP server's tool), then its near misses (difflib), closest first, ignoring case. Pure."""
    folded = name.casefold()
    by_fold: dict[str, list[str]] = {}
    for each in names:
        by_fold.setdefault(each.casefold(), []).append(each)
    near = [each for each in by_fold.get(folded, ()) if each != name]
    if near:
        return near[:most]
    near = [each for each in names if folded and each.casefold().endswith(f"_{folded}")]
    # (far longer than any name, it is no near miss: difflib would take seconds on a long one)
    if len(near) < most and len(folded) <= 2 * max(map(len, by_fold), default=0) + 8:
        for close in difflib.get_close_matches(folded, by_fold, n=most, cutoff=0.6):
            near.extend(each for each in by_fold[close] if each != name and each not in near)
    return near[:most]


def shown_names(names: Sequence[str], near: Sequence[str] = (), most: int = 20) -> str:
    """``names`` joined with commas, at most ``most`` of them: all in order when they fit,
    else ``near`` ones (`near_names`) first, then ``(and N more)``."""
    if len(names) <= most:
        return ", ".join(names)
    shown = [*near, *(n for n in names if n not in near)][:most]
    return f"{', '.join(shown)} (and {len(names) - len(shown)} more)"


def normalization_variant(
    name: object, names: Iterable[object], there: str = "in the definition"
) -> str | None:
    """What an error says of ``name``, found nowhere among ``names``, when it is one of
    them written in another Unicode normalization (``café`` as ``e`` and a combining
    accent, NFD, as macOS file names and some editors write it, and ``café`` as one
    character, NFC), or None: ``differs only in Unicode normalization from 'café' (NFD
    here, NFC in the definition)``. The two print alike, so a message that lists the
    names shows no difference; ``there`` says where the other one is written. Names
    that are not text (YAML's ``1:``, a problem of their own) are passed over."""
    if not isinstance(name, str):
        return None
    composed = unicodedata.normalize("NFC", name)
    for other in names:
        if not isinstance(other, str) or other == name:
            continue
        if unicodedata.normalize("NFC", other) == composed:
            return (
                f"differs only in Unicode normalization from {other!r} "
                f"({_normal_form(name)} here, {_normal_form(other)} {there})"
            )
    return None


def _normal_form(text: str) -> str:
    for form in ("NFC", "NFD"):
        if unicodedata.is_normalized(form, text):
            return form
    return "neither NFC nor NFD"


def fields(name: str, pairs: Iterable[tuple[str, Any]]) -> str:
    """``Name(key=value, ...)`` from already formatted values; None values are left out."""
    shown = ", ".join(f"{key}={value}" for key, value in pairs if value is not None)
    return f"{name}({shown})"
