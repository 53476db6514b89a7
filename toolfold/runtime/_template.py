"""Placeholders in workflow prompts and instructions: ``{name}`` and ``{name.field}``.

A deliberately small formatter: `string.Formatter.parse` splits the template
(so ``{{`` and ``}}`` escape braces as in `str.format`), and the values are
looked up by hand. Nothing is ever passed to `str.format`: no attribute
access, no indexing, no conversion (``!r``) and no format spec, so a template
cannot reach into an object or run code.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from typing import Any

_PLACEHOLDER = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z]\w*)*")  # no ._private, no .__dunder__


class TemplateError(ValueError):
    """A template cannot be used (bad syntax) or filled (a missing value)."""


def placeholders(template: str) -> tuple[tuple[str, ...], ...]:
    """The placeholders of ``template`` as paths (``{a.b}`` gives ``("a", "b")``).

    Raises:
        TemplateError: Unbalanced braces, a positional ``{}``, indexing,
            a conversion or a format spec; or ``template`` is not text.
    """
    found: list[tuple[str, ...]] = []
    if not isinstance(template, str):  # (a definition's problem, said where it is checked)
        raise TemplateError(f"a template is text, got {type(template).__name__}")
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise TemplateError(f"{exc} (write {{{{ and }}}} for literal braces)") from exc
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        text = f"{field}{'!' + conversion if conversion is not None else ''}"
        text += f"{':' + spec if spec else ''}"
        if not _PLACEHOLDER.fullmatch(field):  # literal braces, a JSON example...
            doubled = text.replace("{", "{{").replace("}", "}}")
            raise TemplateError(
                f"{{{text}}} is not a placeholder: only {{name}} and {{name.field}} are "
                f"filled; for literal braces double them, as in str.format: {{{{{doubled}}}}}"
            )
        if conversion is not None or spec:
            raise TemplateError(
                f"placeholder {{{text}}} uses a conversion or format spec; "
                "only {name} and {name.field} are allowed"
            )
        found.append(tuple(field.split(".")))
    return tuple(found)


def names_in(template: str | None) -> frozenset[str]:
    """The value names a template refers to (the first part of each placeholder)."""
    if not template:
        return frozenset()
    return frozenset(path[0] for path in placeholders(template))


def render(template: str, values: Mapping[str, Any]) -> str:
    """``template`` with its placeholders replaced by ``values`` (plain data).

    Text is inserted as it is, anything else as JSON. ``{name.field}`` reads
    key ``field`` of the mapping stored under ``name``.

    Raises:
        TemplateError: A name has no value, or a field is missing.
    """
    out: list[str] = []
    for literal, field, _, _ in string.Formatter().parse(template):
        out.append(literal)
        if field is None:
            continue
        path = field.split(".")
        if path[0] not in values:
            known = ", ".join(sorted(values)) or "none"
            raise TemplateError(
                f"{{{field}}}: no value named {path[0]!r} at this point "
                f"(values: {known}; a skipped step or a branch not taken has none)"
            )
        value = values[path[0]]
        for depth, key in enumerate(path[1:], start=1):
            if not isinstance(value, Mapping) or key not in value:
                where = ".".join(path[:depth])
                raise TemplateError(f"{{{field}}}: the value of {where} has no field {key!r}")
            value = value[key]
        out.append(
            value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
        )
    return "".join(out)
