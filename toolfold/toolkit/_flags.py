"""What the schema and the converter both say of an `enum.Flag`: its bits and their names.

A `Flag` (an `IntFlag` too) parameter takes any sum of its flags, 0 (no flag)
included; bits outside the flags and negative numbers are refused, the same on
every Python version and whatever the class's ``boundary`` (Python's `IntFlag`
keeps unknown bits, and takes -1 as every flag).
"""

from __future__ import annotations

import enum
import typing
import weakref
from typing import Any


def flag_class(tp: Any) -> type[enum.Flag] | None:
    """The `Flag` class ``tp`` is (``Annotated`` unwrapped), else None."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp if isinstance(tp, type) and issubclass(tp, enum.Flag) else None


def flag_values(cls: type[enum.Flag]) -> list[Any]:
    """Every member's value, aliases and combined members included."""
    return [m.value for m in cls.__members__.values()]


def flag_mask(cls: type[enum.Flag]) -> int:
    """The flags or'ed: the largest value ``cls`` takes (a negative member, the old
    spelling of every flag, ``~0``, adds no bit)."""
    mask = _masks.get(cls)
    if mask is None:
        mask = 0
        for value in flag_values(cls):
            if value >= 0:
                mask |= value
        _masks[cls] = mask
    return mask


_masks: weakref.WeakKeyDictionary[type[enum.Flag], int] = weakref.WeakKeyDictionary()


def flag_sums(mask: int) -> list[int]:
    """Every sum of the bits of ``mask``, 0 included, in increasing order."""
    bits = [1 << i for i in range(mask.bit_length()) if mask >> i & 1]
    sums = [0]
    for bit in bits:
        sums += [s + bit for s in sums]
    return sorted(sums)


def is_flag_value(cls: type[enum.Flag], value: int) -> bool:
    """Whether ``value`` is 0 or a sum of ``cls``'s flags (no other bit, not negative)."""
    return value >= 0 and not value & ~flag_mask(cls)


def flag_names(cls: type[enum.Flag]) -> str:
    """``R=1, W=2, X=4``: the flags, as iterating the class gives them."""
    return ", ".join(f"{m.name}={m.value!r}" for m in cls)


def flag_note(cls: type[enum.Flag]) -> str:
    """The sentence a flag parameter's description ends with, naming the flags."""
    return f"Flags {flag_names(cls)}, combined by adding (0 for none)."


def with_flag_note(description: str, tp: Any) -> str:
    """``description``, followed by the flag note when ``tp`` is a `Flag` and it lacks one."""
    cls = flag_class(tp)
    if cls is None:
        return description
    note = flag_note(cls)
    if not description or description.endswith(note):
        return description or note
    stop = "" if description.rstrip().endswith((".", "!", "?")) else "."
    return f"{description.rstrip()}{stop} {note}"
