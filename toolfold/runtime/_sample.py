"""Deterministic example values for a JSON Schema (used by `TestModel`).

No randomness and no hypothesis at runtime: the same schema always gives the
same value, the simplest one that satisfies the common keywords (types, enums,
bounds (`_sample_numbers`), lengths, patterns (`_pattern`), formats, required properties,
``contains``, ``$ref``/``$defs``, unions), then checked against the whole
schema as a tool's argument check reads it: a value that fails is an error,
never an argument.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeGuard

from toolfold._errors import UsageError
from toolfold.runtime._pattern import pattern_matches, pattern_sample, pattern_samples
from toolfold.runtime._sample_numbers import NoNumber, numbers
from toolfold.runtime.core._arguments import json_path
from toolfold.toolkit._arguments import compile_validator
from toolfold.toolkit._jsonschema import resolve_local

# Samples of each format, the most realistic first: the first that fits the
# schema's lengths (and pattern) is used, e.g. a short email under maxLength.
_FORMATS: dict[str, tuple[str, ...]] = {
    "date-time": ("2024-01-01T00:00:00Z",),
    "date": ("2024-01-01",),
    "time": ("00:00:00",),
    "uuid": ("00000000-0000-4000-8000-000000000000",),
    "email": ("user@example.com", "a@example.com", "a@b.co", "a@b"),
    "uri": ("https://example.com", "https://a.co", "a:b"),
    "duration": ("P1D",),
    "decimal": ("0.5", "0"),  # (a Decimal parameter's: toolfold's own format, text)
    "ipv4": ("192.0.2.1", "1.1.1.1", "198.51.100.1", "203.0.113.100", "255.255.255.255"),
    "ipv6": ("2001:db8::1", "::1", "2001:db8:0:0:0:0:0:1"),
    "hostname": ("example.com", "a.co", "a"),
    "idn-hostname": ("example.com", "a.co", "a"),
    "uri-reference": ("https://example.com", "https://a.co", "a"),
    "iri": ("https://example.com", "https://a.co", "a:b"),
    "iri-reference": ("https://example.com", "https://a.co", "a"),
    "idn-email": ("user@example.com", "a@example.com", "a@b.co", "a@b"),
    # The formats pydantic's JSON Schema names (a field of a pydantic model
    # parameter): UUID1..UUID8 check the version digit, the IPvAny* types and
    # ipaddress's networks and interfaces parse the text, Base64Str/Base64Bytes decode it.
    **{f"uuid{v}": (f"00000000-0000-{v}000-8000-000000000000",) for v in range(1, 9)},
    "ipvanyaddress": ("192.0.2.1", "1.1.1.1", "2001:db8::1", "::1"),
    "ipvanyinterface": ("192.0.2.1/24", "1.1.1.1", "::1"),
    "ipvanynetwork": ("192.0.2.0/24", "1.1.1.1", "::1"),
    "ipv4network": ("192.0.2.0/24", "1.1.1.1"),
    "ipv6network": ("2001:db8::/32", "::1"),
    "ipv4interface": ("192.0.2.1/24", "1.1.1.1"),
    "ipv6interface": ("2001:db8::1/64", "::1"),
    "base64": ("YWFhYQ==", "YQ=="),
    "base64url": ("YWFhYQ==", "YQ=="),
}

_MAX_DEPTH = 8

# What a failure tells the caller to do: for a tool's parameter (`sample_value`)...
_PARAMETER_HINT = "give the parameter a default that fits its schema"


def sample_value(schema: Mapping[str, Any] | bool) -> Any:
    """The simplest value that fits ``schema`` (a JSON Schema dict).

    The value passes the schema as a tool's argument check reads it
    (formats included), or is not returned.

    Raises:
        UsageError: No value could be made for a part of it (a ``pattern``
            too intricate for the sampler, numeric or length bounds that
            leave no value, a ``false`` schema, which accepts nothing), or the
            value made fails a keyword it does not meet (an overlapping
            ``oneOf``, ``propertyNames``, a format no sample within the
            lengths has), named with its path.
    """
    return sample_for(schema, hint=_PARAMETER_HINT)


def sample_for(schema: Mapping[str, Any] | bool, *, hint: str) -> Any:
    """`sample_value`, whose errors end with ``hint`` (what to do instead).

    Raises:
        UsageError: As `sample_value`'s.
    """
    if schema is False:
        raise UsageError(
            "no sample value could be made: the schema is `false`, it accepts no value"
        )
    root = schema if isinstance(schema, Mapping) else {}
    try:
        sampler = _Sampler(root)
        value = sampler.value(schema, 0)
        _check(sampler.validator, value, hint)
    except _NoSample as exc:
        raise UsageError(
            f"no sample value could be made: {exc.problem} @ {json_path(reversed(exc.path))} ({hint})"
        ) from None
    except RecursionError:
        raise UsageError(f"no sample value could be made: {_endless(root)} ({hint})") from None
    return value


def _endless(root: Any) -> str:
    """Why sampling ``root`` recursed past Python's limit: endless references, or
    (a schema with no ``$ref``) nesting deeper than the stack allows."""
    if _has_ref(root):
        return (
            "the schema's references recurse without end (a required property or item of "
            "its own type accepts no finite value)"
        )
    return "the schema is nested too deeply (hundreds of levels) for the sampler to walk"


def _has_ref(schema: Any) -> bool:
    """Whether ``schema`` holds a ``$ref`` anywhere (walked without recursion)."""
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, Mapping):
            if "$ref" in node:
                return True
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


def _check(validator: Any, value: Any, hint: str) -> None:
    """Refuse ``value`` unless it passes ``validator`` (the root's, as a tool's argument check reads it).

    The sampler meets the common keywords one at a time; what it misses (a
    ``oneOf`` whose branches all accept its value, ``propertyNames``,
    ``dependentRequired``, a format no sample of which fits the lengths)
    must not reach a tool as an argument that fails its own schema.
    """
    from jsonschema.exceptions import best_match

    if _valid(validator, value):
        return
    error = best_match(validator.iter_errors(value))
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise UsageError(
        f"no sample value could be made: the simplest value found, {shown}, fails the "
        f"schema's {error.validator!r} keyword ({error.message[:200]}) "
        f"@ {json_path(error.absolute_path)} ({hint})"
    ) from None


def _valid(validator: Any, value: Any) -> bool:
    """``validator.is_valid(value)``; a ``$ref`` it cannot follow, or one that
    refers to itself without end, is a `_NoSample` naming it."""
    from referencing.exceptions import Unresolvable

    try:
        return bool(validator.is_valid(value))
    except Unresolvable as exc:
        raise _NoSample(f"the schema has a $ref that cannot be followed ({exc})"[:300]) from None
    except RecursionError:
        raise _NoSample(_endless(validator.schema)) from None


class _NoSample(Exception):
    """A part of the schema no value was made for; ``path`` grows, innermost first, on the way out."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str | int] = []


class _Sampler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        # The argument check's validator (formats, decimal multipleOf), built
        # once on the root: a part is checked with it evolved to that part, so
        # its `$ref`s (`#`, `#/properties/x`) resolve in the root, not the part.
        self.validator = compile_validator(root)

    def value(self, schema: Mapping[str, Any] | bool, depth: int) -> Any:
        if schema is False:
            raise _NoSample("the schema is `false`, it accepts no value")
        if not isinstance(schema, Mapping):
            return None
        if "$ref" in schema:
            target = self._resolve(schema)
            return self.value({**target, **{k: v for k, v in schema.items() if k != "$ref"}}, depth)
        if "default" in schema and depth > 0:
            # (before `enum` and `const`: an enum's or Literal's default is a value of it)
            rest = {k: v for k, v in schema.items() if k != "default"}
            if self._checker(rest)(schema["default"]):
                return schema["default"]
            schema = rest  # a default its own schema refuses: a value of the schema instead
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            # the first value the schema's other keywords (lengths, bounds, type) let through
            fits = self._checker({k: v for k, v in schema.items() if k != "enum"})
            return next((v for v in schema["enum"] if fits(v)), schema["enum"][0])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._union(schema, key, depth)
        if "allOf" in schema:
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged = _merge(merged, self._resolve(part))
            return self.value(merged, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((t for t in kind if t != "null"), "null")
        if kind is None:
            kind = _infer_type(schema)
        return getattr(self, f"_{kind}", self._null)(schema, depth)

    def _at(self, key: str | int, schema: Mapping[str, Any] | bool, depth: int) -> Any:
        """The value of the property or item ``key``, which a failure's path names."""
        try:
            return self.value(schema, depth)
        except _NoSample as exc:
            exc.path.append(key)
            raise

    def _checker(self, schema: Mapping[str, Any]) -> Callable[[Any], bool]:
        """Whether a value passes the part ``schema`` as the argument check reads it (its refs in the root)."""
        part = self.validator.evolve(schema=dict(schema))

        def fits(value: Any) -> bool:
            try:
                return _valid(part, value)
            except _NoSample:
                # A $ref the part cannot follow on its own (one inside a part with an
                # `$id` of its own resolves in that scope, which only the whole
                # schema's check enters): taken, and the final check of the whole
                # schema decides (`_check`).
                return True

        return fits

    def _resolve(self, schema: Any) -> Mapping[str, Any]:
        if isinstance(schema, Mapping) and "$ref" in schema:
            resolved = resolve_local(self.root, str(schema["$ref"]))
            return resolved if isinstance(resolved, Mapping) else {}
        return schema if isinstance(schema, Mapping) else {}

    def _union(self, schema: Mapping[str, Any], key: str, depth: int) -> Any:
        """The value of the first branch the whole schema accepts (a ``oneOf`` value
        no other branch accepts too), else of the preferred branch."""
        branches = schema[key]
        if not isinstance(branches, list) or not branches:
            return self.value({k: v for k, v in schema.items() if k != key}, depth)
        preferred = self._pick_branch(branches, depth)
        ordered = [preferred, *(b for b in branches if b is not preferred)]
        fits = self._checker(schema)
        first: tuple[Any] | None = None
        failure: _NoSample | None = None
        for branch in ordered:
            try:
                found = self.value(branch, depth)
            except _NoSample as exc:
                failure = failure or exc
                continue
            if fits(found):
                return found
            first = first or (found,)
        if first is not None:
            return first[0]  # the final check names what it fails
        assert failure is not None
        raise failure

    def _pick_branch(self, branches: list[Any], depth: int) -> Any:
        # Deep in a recursive type, prefer the branch that ends the recursion.
        non_null = [b for b in branches if self._resolve(b).get("type") != "null"]
        if depth >= _MAX_DEPTH or not non_null:
            null = [b for b in branches if self._resolve(b).get("type") == "null"]
            if null:
                return null[0]
        return (non_null or branches)[0]

    def _null(self, schema: Mapping[str, Any], depth: int) -> Any:
        return None

    def _boolean(self, schema: Mapping[str, Any], depth: int) -> Any:
        return True

    def _string(self, schema: Mapping[str, Any], depth: int) -> Any:
        _counts(schema, "minLength", "maxLength", "string")
        if schema.get("contentMediaType") == "application/json" and "pattern" not in schema:
            # JSON in a string (pydantic's `Json[...]`): a value of its contentSchema,
            # which a validator leaves unchecked but the field parses and validates
            content = schema.get("contentSchema", {})
            text = json.dumps(self._at("(content)", content, depth + 1), separators=(",", ":"))
            if schema.get("minLength", 0) <= len(text) <= schema.get("maxLength", len(text)):
                return text
        fmt = schema.get("format")
        pattern = schema.get("pattern")
        if isinstance(fmt, str) and fmt in _FORMATS:
            low, high = schema.get("minLength", 0), schema.get("maxLength")
            for sample in _format_samples(fmt, low, high):
                if not isinstance(pattern, str) or pattern_matches(pattern, sample):
                    return sample
            # none fits, even lengthened: a plain string of the lengths (the
            # final check refuses it, naming the format, if the argument check
            # checks that format)
        if isinstance(pattern, str):
            high = schema.get("maxLength")
            found = pattern_sample(
                pattern, int(schema.get("minLength", 0)), None if high is None else int(high)
            )
            if found is None:
                raise _NoSample(
                    f"no string of the schema's lengths was found that matches the pattern "
                    f"{pattern!r} (the sampler reads simpler patterns)"
                )
            return found
        low = int(schema.get("minLength", 1))
        high = schema.get("maxLength")
        length = max(low, min(5, int(high) if high is not None else 5))
        return ("a" * length)[: int(high) if high is not None else None]

    def _integer(self, schema: Mapping[str, Any], depth: int) -> Any:
        return self._numbers(schema, integer=True, count=1)[0]

    def _number(self, schema: Mapping[str, Any], depth: int) -> Any:
        return self._numbers(schema, integer=False, count=1)[0]

    def _numbers(self, schema: Mapping[str, Any], *, integer: bool, count: int) -> list[Any]:
        """``count`` distinct values within the bounds, the simplest first (fewer if none are left)."""
        try:
            return list(itertools.islice(numbers(schema, integer=integer), count))
        except NoNumber as exc:
            raise _NoSample(str(exc)) from None

    def _array(self, schema: Mapping[str, Any], depth: int) -> Any:
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list):
            return self._tuple(schema, prefix, depth)
        items = schema.get("items", {})
        if isinstance(items, list):  # draft 4-7 tuple form
            return self._tuple(schema, items, depth)
        _counts(schema, "minItems", "maxItems", "array")
        count = int(schema.get("minItems", 0 if depth >= _MAX_DEPTH else 1))
        if schema.get("maxItems") is not None:
            count = min(count, int(schema["maxItems"]))
        contains = schema.get("contains")
        if isinstance(contains, Mapping) and count >= 1:  # the first item is one it wants
            first = self._at(0, {**self._resolve(items), **contains}, depth + 1)
        else:
            first = self._at(0, items, depth + 1)
        if count > 1 and schema.get("uniqueItems"):
            return self._distinct_items(self._resolve(items), first, count, depth + 1)
        return [first] * count

    def _tuple(self, schema: Mapping[str, Any], items: list[Any], depth: int) -> list[Any]:
        """The value of each of ``items`` in turn (``prefixItems``); equal ones refused if unique."""
        found = [self._at(i, item, depth + 1) for i, item in enumerate(items)]
        if schema.get("uniqueItems") and len({_unique_key(v) for v in found}) < len(found):
            raise _NoSample(
                f"uniqueItems needs distinct items, but the item schemas give equal values: "
                f"{found!r}"[:300]
            )
        return found

    def _distinct_items(
        self, item: Mapping[str, Any], first: Any, count: int, depth: int
    ) -> list[Any]:
        """``count`` distinct values the item schema accepts.

        Numbers (within the item's bounds), ``enum`` and ``const`` values, the
        branches of ``anyOf``/``oneOf``, the parts of ``allOf``, booleans,
        null and the strings a ``pattern`` matches give the candidates; for other kinds, variants of ``first``. Each
        is checked against the whole item schema.
        """
        listed = self._candidates(item, count, depth)
        if listed is not None:
            candidates: Iterator[Any] = iter(listed)
        elif isinstance(first, dict):  # a property's own candidates, then variants
            candidates = itertools.chain(
                [first],
                self._object_variants(item, first, count, depth),
                _variants(first, count * 3 + 40),
            )
        else:
            candidates = _variants(first, count * 3 + 40)
        fits = self._checker(item)
        found: list[Any] = []
        seen: set[Any] = set()
        for candidate in candidates:
            key = _unique_key(candidate)
            if key not in seen and fits(candidate):
                seen.add(key)
                found.append(candidate)
                if len(found) == count:
                    return found
        raise _NoSample(
            f"uniqueItems needs {count} distinct items (minItems {count}), but only "
            f"{len(found)} were found that the item schema accepts: {found!r}"[:300]
        )

    def _object_variants(
        self, item: Mapping[str, Any], first: dict[str, Any], count: int, depth: int
    ) -> Iterator[dict[str, Any]]:
        """``first`` with one property changed to another value its schema gives (a
        number, an enum value, a string its pattern matches: `_candidates`), property
        by property, so that a patterned or bounded field still fits."""
        if "$ref" in item:
            item = {**self._resolve(item), **{k: v for k, v in item.items() if k != "$ref"}}
        properties = item.get("properties")
        if not isinstance(properties, Mapping):
            return
        for name, sub in properties.items():
            if name not in first:
                continue
            listed = self._candidates(self._resolve(sub), count, depth + 1)
            for value in listed or ():
                if value != first[name]:
                    yield {**first, name: value}

    def _candidates(self, item: Mapping[str, Any], count: int, depth: int) -> list[Any] | None:
        """Values to pick distinct items from (None: not numbers, an enum, a const or a union)."""
        if "$ref" in item:
            target = self._resolve(item)
            item = {**target, **{k: v for k, v in item.items() if k != "$ref"}}
        if "const" in item:
            return [item["const"]]
        if item.get("enum"):
            return list(item["enum"])
        if isinstance(item.get("allOf"), list):
            merged: dict[str, Any] = {k: v for k, v in item.items() if k != "allOf"}
            for part in item["allOf"]:
                merged = _merge(merged, self._resolve(part))
            return self._candidates(merged, count, depth)
        for key in ("anyOf", "oneOf"):
            if isinstance(item.get(key), list):
                rest = {k: v for k, v in item.items() if k != key}
                found: list[Any] = []
                for branch in item[key]:
                    merged = _merge(rest, self._resolve(branch))
                    more = self._candidates(merged, count, depth)
                    if more is None:
                        try:
                            more = [self.value(merged, depth)]
                        except _NoSample:
                            more = []
                    found += more
                return found
        kind = item.get("type")
        if isinstance(kind, list):
            kind = next((t for t in kind if t != "null"), "null")
        if kind is None:
            kind = _infer_type(item)
        if kind == "boolean":
            return [True, False]
        if kind == "null":
            return [None]
        pattern = item.get("pattern")
        if kind == "string" and isinstance(pattern, str) and item.get("format") not in _FORMATS:
            # the strings the pattern matches (``^[A-Z]{3}$``: AAA, AAB...), not
            # variants of the first (AAA1, 1), which the pattern refuses
            high = item.get("maxLength")
            found_strings = pattern_samples(
                pattern, int(item.get("minLength", 0)), None if high is None else int(high)
            )
            strings = list(itertools.islice(found_strings, count * 3 + 40))
            if strings and len(strings) < count:
                # a pattern with little to vary (``^id-``, ``ab``, ``x+y``): the
                # variants of the first (id-, id-1, id-2) that it still matches
                known = set(strings)
                strings += [
                    other
                    for other in _variants(strings[0], count * 3 + 40)
                    if other not in known and pattern_matches(pattern, other)
                ]
            return strings or None
        if kind not in ("integer", "number"):
            return None
        values = numbers(item, integer=kind == "integer", tries=count)
        try:
            return list(itertools.islice(values, count * 2))
        except NoNumber:
            return []

    def _object(self, schema: Mapping[str, Any], depth: int) -> Any:
        _counts(schema, "minProperties", "maxProperties", "object")
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", ()))
        result: dict[str, Any] = {}
        extra = schema.get("additionalProperties")
        others = extra if isinstance(extra, Mapping) else {}  # other properties' schema
        for name, sub in properties.items():
            # Optional properties are filled near the top so that tools see
            # realistic input, and left out deeper to end recursive types.
            if name in required or depth < 2:
                result[name] = self._at(name, sub, depth + 1)
        for name in schema.get("required", ()):  # required without a schema of its own
            if name not in result:
                result[name] = self._at(name, others, depth + 1)
        count = int(schema.get("minProperties", 0))
        index = 0
        while len(result) < count:
            index += 1
            key = f"key{index}"
            if key not in result:
                result[key] = self._at(key, others, depth + 1)
        return result


def _format_samples(fmt: str, low: Any, high: Any) -> Iterator[str]:
    """Samples of ``fmt`` within the lengths: the listed ones that fit, then each
    lengthened to ``low`` (or a little more, within ``high``) where the format allows."""
    fits = [s for s in _FORMATS[fmt] if low <= len(s) and (high is None or len(s) <= high)]
    yield from fits
    if fits or not _is_count(low) or low <= 0:
        return
    least = math.ceil(low)
    for sample in _FORMATS[fmt]:
        for length in range(least, least + 3):  # a pad may need a few more (".0")
            if high is not None and length > high:
                break
            padded = _pad(fmt, sample, length)
            if padded is not None:
                yield padded
                break


def _pad(fmt: str, sample: str, length: int) -> str | None:
    """``sample`` lengthened to ``length`` as the format allows (None: it cannot be).

    An email's local part grows (up to 64 characters), then its domain as a
    hostname; a hostname or a URI's host gains subdomain labels (``a.example.com``);
    a date-time or time gains fractional seconds (``00:00:00.000``).
    """
    extra = length - len(sample)
    if extra == 0:
        return sample
    if fmt in ("email", "idn-email") and "@" in sample:
        local, domain = sample.split("@", 1)
        grow = min(extra, 64 - len(local))
        longer = _pad_host(domain, len(domain) + extra - grow) if extra > grow else domain
        return None if longer is None else f"{local}{'a' * grow}@{longer}"
    if fmt in ("hostname", "idn-hostname"):
        return _pad_host(sample, length) if "." in sample else None
    if fmt in ("uri", "iri", "uri-reference", "iri-reference") and "://" in sample:
        scheme, host = sample.split("://", 1)
        longer = _pad_host(host, len(host) + extra)
        return None if longer is None else f"{scheme}://{longer}"
    if fmt in ("date-time", "time") and extra >= 2:
        body, zone = (sample[:-1], sample[-1]) if sample.endswith("Z") else (sample, "")
        return f"{body}.{'0' * (extra - 1)}{zone}"
    return None


def _pad_host(host: str, length: int) -> str | None:
    """``host`` with subdomain labels of ``a`` in front, ``length`` characters in all
    (None: not a hostname's length, at most 253, or one character more than ``host``)."""
    prefix = length - len(host) - 1  # the labels, joined by dots, before the last dot
    if prefix == -1:
        return host
    if prefix < 1 or length > 253:
        return None
    labels = []
    while prefix > 63:
        size = min(63, prefix - 2)  # leave a label of one character at least
        labels.append("a" * size)
        prefix -= size + 1
    labels.append("a" * prefix)
    return ".".join([*labels, host])


def _counts(schema: Mapping[str, Any], low: str, high: str, kind: str) -> None:
    """Refuse a lower count above the upper one (``minLength: 3, maxLength: 2``), naming both."""
    least, most = schema.get(low), schema.get(high)
    if _is_count(least) and _is_count(most) and least > most:
        raise _NoSample(f"no {kind} satisfies the bounds ({low} {least!r}, {high} {most!r})")


def _is_count(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _infer_type(schema: Mapping[str, Any]) -> str:
    if "properties" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if "minimum" in schema or "maximum" in schema:
        return "number"
    if "minLength" in schema or "pattern" in schema or "format" in schema:
        return "string"
    return "null"


def _merge(left: Mapping[str, Any], right: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(left)
    for key, value in right.items():
        if key == "properties" and key in merged:
            merged[key] = {**merged[key], **value}
        elif key == "required" and key in merged:
            merged[key] = [*merged[key], *value]
        else:
            merged[key] = value
    return merged


def _unique_key(value: Any) -> Any:
    """What tells two items apart as ``uniqueItems`` does (``1`` and ``1.0`` are one, ``True`` not)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    return ("json", json.dumps(value, sort_keys=True, default=repr))


def _variants(first: Any, tries: int) -> Iterator[Any]:
    """``first``, then up to ``tries`` values made from it that differ (unchecked: the caller checks)."""
    yield first
    for index in range(1, tries + 1):
        yield from _vary(first, index)


def _vary(value: Any, index: int) -> list[Any]:
    """Values that differ from ``value`` by ``index`` (a string's suffix, a number plus it...)."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [value + index]
    if isinstance(value, str):
        token = _token(index)
        if len(value) >= len(token):  # the same length, for a maxLength
            return [f"{value}{token}", value[: len(value) - len(token)] + token]
        return [f"{value}{token}", token]
    if isinstance(value, list):
        return [[changed, *value[1:]] for changed in _vary(value[0], index)] if value else []
    if isinstance(value, dict):
        for key, inner in value.items():
            changed = _vary(inner, index)
            if changed:
                return [{**value, key: other} for other in changed]
        return [{**value, f"key{index}": index}]
    return []


def _token(index: int) -> str:
    """``index`` written in digits and lowercase letters (1, 2, ..., z, 10, ...)."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while index:
        index, rest = divmod(index, len(digits))
        text = digits[rest] + text
    return text or "0"
