"""A run's or a model's options given where keywords are model settings: `Agent(...)`, `generate_text(...)`.

`Agent`, `Agent.evolve`, `generate_text` and `agenerate_text` take unknown
keywords as model settings, sent to the provider as they are. A run's option
given there by mistake (``Agent(model, deps=...)``, ``generate_text(...,
history=...)``) would reach the provider while the run goes without it; these
keywords are refused instead, naming the caller and where the option goes.
The options are read from the run methods' signatures, so a new one is covered
as soon as it exists; so are the names of a run's configuration (`RunConfig`'s
and `RunOptions`' fields: ``output=``, ``config=``...) that the caller does not
take itself (`config_options`): sent as settings, such an option was a
request body field the provider refused, and the run went without it.

The options of `toolfold.model` (``api_key=``, ``base_url=``, ``timeout=``...)
are refused as model settings too: a key given so was sent in every request
body and stored, in plain text, in the run's state, the agent's repr and its
agent file. A credential or a client option (``api_key``, ``base_url``,
``http_client``...) is refused however given; the others (``timeout``,
``retry``, ``headers``...) only as a bare keyword, since a provider's request
body may have a field of that name (given in ``settings={...}``). The error
names the option, never its value.

A keyword close to one of the caller's own parameters (``instruction=``), or
another library's name for one (``system_prompt=``, ``result_type=``,
``max_turns=``...), is refused too, with the parameter meant.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from toolfold._errors import UsageError
from toolfold.runtime._model import (
    CLIENT_OPTIONS,
    MODEL_OPTIONS,
    OTHER_CLIENTS_OPTIONS,
    QUERY_HINT,
    other_clients_option,
)

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def run_options(
    methods: Mapping[str, Callable[..., Any]], own: Callable[..., Any], spelled: str
) -> dict[str, str]:
    """The parameters of ``methods`` that ``own`` does not take, each with where it goes.

    Args:
        methods: The run methods or functions, by the name a hint gives them
            (``"run"``).
        own: The caller, whose own parameters are not refused.
        spelled: What comes before a method's name in a hint's example
            (``"agent."``).

    Returns:
        A hint by parameter name: ``"pass deps= to run() / arun(), e.g.
        agent.run(..., deps=...)"``.
    """
    mine = set(inspect.signature(own).parameters)
    takers: dict[str, list[str]] = {}
    keyword: dict[str, bool] = {}
    for label, method in methods.items():
        for name, parameter in inspect.signature(method).parameters.items():
            if name in mine or name == "self" or parameter.kind not in _NAMED:
                continue
            takers.setdefault(name, []).append(label)
            keyword[name] = parameter.kind is inspect.Parameter.KEYWORD_ONLY
    hints: dict[str, str] = {}
    for name, labels in takers.items():
        where = " / ".join(f"{label}()" for label in labels)
        if keyword[name]:
            hints[name] = f"pass {name}= to {where}, e.g. {spelled}{labels[0]}(..., {name}=...)"
        else:
            hints[name] = f"give the {name} to {where}, e.g. {spelled}{labels[0]}({name}, ...)"
    return hints


# What a name of a run's configuration that no caller takes by that name stands for.
_CONFIG_HINTS = {
    "output": "the structured answer's type goes in output_type=...",
    "config": (
        "a run's configuration is made from the options given by name (tool_choice=..., "
        "max_steps=...), never given whole"
    ),
    "spec": "the model goes in model=...",
}


def config_options(
    own: Callable[..., Any], spelled: str = "", also: Callable[..., Any] | None = None
) -> dict[str, str]:
    """The names of a run's configuration that ``own`` does not take, each with where it goes.

    The names are the public fields of `RunConfig` and `RunOptions` and,
    with ``also`` (`Agent`'s constructor, for the functional API), the
    keyword parameters ``also`` takes.

    Args:
        own: The caller, whose own parameters are not refused.
        spelled: How ``also`` is called in a hint (``"Agent(model, "``).
        also: A callable whose keyword parameters are options too.

    Returns:
        A hint by name, as `run_options`'s.
    """
    import attrs

    from toolfold.runtime._run import RunOptions
    from toolfold.runtime.core._config import RunConfig

    mine = set(inspect.signature(own).parameters)
    hints: dict[str, str] = {}
    if also is not None:
        for name, parameter in inspect.signature(also).parameters.items():
            if name not in mine and name != "self" and parameter.kind in _NAMED:
                hints[name] = f"it is an option of Agent(): {spelled}{name}=...).run(...)"
    for field in (*attrs.fields(RunConfig), *attrs.fields(RunOptions)):
        name = field.name
        if name.startswith("_") or name in mine or name in hints:
            continue
        hints[name] = _CONFIG_HINTS.get(name, f"{name} is part of a run's configuration")
    return hints


def refuse_run_options(
    caller: str, given: Mapping[str, Any], options: Mapping[str, str], *, agent: str = ""
) -> None:
    """Raise a `UsageError` naming ``caller`` if ``given`` (its model settings) has a run option.

    Args:
        caller: The call, as the error names it (``"Agent()"``).
        given: The keywords the caller would send as model settings.
        options: `run_options` for the caller.
        agent: How a model setting of such a name is given instead, before
            ``settings={...}``: "" where the caller takes ``settings=``
            itself, ``"Agent(model, "`` where it does not.

    Raises:
        UsageError: A keyword of ``given`` is in ``options``; the error names
            every such keyword and where each goes.
    """
    if options.keys().isdisjoint(given):  # the usual case: one set test
        return
    named = [name for name in given if name in options]
    raise UsageError(
        f"{caller} got {', '.join(f'{name}=' for name in named)}: an option of a run, not a "
        f"model setting (it would be sent to the model as one): "
        f"{'; '.join(options[name] for name in named)}. A model setting of that name goes "
        f"in {agent}settings={{{named[0]!r}: ...}}{')' if agent else ''}"
    )


def refuse_model_options(
    caller: str,
    given: Mapping[str, Any],
    model: object,
    *,
    keywords: bool = True,
    agent: str = "",
) -> None:
    """Raise a `UsageError` naming ``caller`` if ``given`` (its model settings) has a model option.

    A credential or a client option (`CLIENT_OPTIONS`: ``api_key``,
    ``base_url``...) is refused however given. Another option of the model
    (``timeout``, ``retry``, ``headers``...), or another library's name for
    one (`OTHER_CLIENTS_OPTIONS`: the OpenAI SDK's ``extra_headers``,
    ``max_retries``, ``api_version``...; ``organization`` and ``project``
    for OpenAI's models only), is refused only as a bare keyword
    (``keywords``): in ``settings={...}`` it is a field of the request body
    (orq.ai's ``timeout`` and ``retry``), or one a user's own model reads.

    Args:
        caller: The call, as the error names it (``"Agent()"``).
        given: The model settings the caller got.
        model: The caller's model (a ``provider:model`` string is shown in
            the hint; a model's ``name`` says whether it is OpenAI's).
        keywords: The settings were given as keywords (``api_key=...``),
            not in ``settings={...}``.
        agent: How a setting of such a name is given instead, before
            ``settings={...}`` (as `refuse_run_options`'s).

    Raises:
        UsageError: A key of ``given`` is refused; the error names every such
            key, the option of the model it stands for, and no value (it may
            be a secret).
    """
    refused = _KEYWORD_OPTIONS if keywords else CLIENT_OPTIONS
    if refused.isdisjoint(given):  # the usual case: one set test
        return
    name_of = getattr(model, "name", None)
    spec = model if isinstance(model, str) else name_of if isinstance(name_of, str) else None
    # How each is given to toolfold.model ("" for a query parameter: no option takes one;
    # None: not refused, the OpenAI SDK's organization= to another provider's model).
    forms = {name: _option_form(name, spec) for name in given if name in refused}
    named = [name for name, form in forms.items() if form is not None]
    if not named:
        return
    shown = (
        ", ".join(f"{name}=" for name in named)
        if keywords
        else f"settings={{{', '.join(f'{name!r}: ...' for name in named)}}}"
    )
    passed = [form for name in named if (form := forms[name])]
    example_spec = model if isinstance(model, str) else "provider:model"
    made = f"toolfold.model({example_spec!r}, {', '.join(dict.fromkeys(passed))})"
    example = (
        f"agent.evolve(model={made})" if caller == "evolve()" else f"{caller[:-2]}({made}, ...)"
    )
    renamed = [
        f"{name}= as {form.partition('=')[0]}=" if form.endswith("=...") else f"{name}= as {form}"
        for name in named
        if (form := forms[name]) and name not in MODEL_OPTIONS
    ]
    as_named = f" ({', '.join(renamed)})" if renamed else ""
    them = "them" if len(passed) > 1 else "it"
    advice = f"pass {them} to the model{as_named}, e.g. {example}" if passed else ""
    if len(passed) < len(named):  # a query parameter: toolfold.model takes none
        queries = ", ".join(f"{name}=" for name in named if forms[name] == "")
        advice += f"{'; ' if advice else ''}{queries} adds a query parameter: {QUERY_HINT}"
    # (another library's name may be a body field: LiteLLM's proxy reads api_base from it)
    fields = [name for name in named if name not in CLIENT_OPTIONS]
    body = (
        f"; if {'it is a field' if len(fields) == 1 else 'they are fields'} of the provider's "
        f"request body, give {'it' if len(fields) == 1 else 'them'} in {agent}settings="
        f"{{{', '.join(f'{name!r}: ...' for name in fields)}}}{')' if agent else ''}"
        if fields
        else ""
    )
    raise UsageError(
        f"{caller} got {shown}: {'an option' if len(named) == 1 else 'options'} of the "
        f"model, not a model setting (it would be "
        f"sent to the provider in every request body and stored in the run's state): "
        f"{advice}{body}"
    )


def _option_form(name: str, spec: str | None) -> str | None:
    """How ``name``, an option of `toolfold.model` or another library's name for one, is
    given to `toolfold.model` for the model ``spec`` (``"retry=..."``), "" for a query
    parameter, or None if it stands for no option of that model (`other_clients_option`)."""
    return f"{name}=..." if name in MODEL_OPTIONS else other_clients_option(name, spec)


def client_options(given: Mapping[str, Any]) -> list[str]:
    """The keys of ``given`` (model settings) that are a credential or a client option, in order."""
    if CLIENT_OPTIONS.isdisjoint(given):
        return []
    return [name for name in given if name in CLIENT_OPTIONS]


#: How alike a keyword must be to one of the caller's own parameter names to be
#: taken for a misspelling of it (`difflib`'s ratio): ``instruction`` (0.96),
#: ``max_step`` (0.94), ``tool_choise`` (0.91) are; provider fields are not
#: (``stop`` / ``stop_when`` 0.62, ``max_tokens`` / ``max_concurrency`` 0.56;
#: a test checks every request field of the providers' specs).
_MISSPELT = 0.85
#: Provider request fields that are that close to a parameter's name, and real:
#: Mistral's embeddings ``output_dtype`` (0.87 to ``output_type``).
_PROVIDER_FIELDS = frozenset({"output_dtype"})


#: Other libraries' names for a parameter (pydantic-ai's, the OpenAI Agents SDK's),
#: each with toolfold's: sent as model settings, they were request body fields while
#: the run went without them. None: no parameter of that kind (`_meant` says what to do).
#: Only the keyword is refused: ``settings={"system_prompt": ...}`` still sends the field,
#: for a server that reads one (llama.cpp's server had a legacy ``system_prompt``,
#: removed in its PR #9857; an older build may still take it).
_OTHER_NAMES: dict[str, str | None] = {
    "system_prompt": "instructions",
    "result_type": "output_type",
    "model_settings": "settings",
    "retries": "output_retries",
    "max_turns": "max_steps",
    "deps_type": None,
    # (the OpenAI SDK's fields merged into the body: a model setting is sent as it is)
    "extra_body": "settings",
}
#: The keywords `refuse_model_options` refuses: the options of `toolfold.model` and
#: other libraries' names for them, but those `_OTHER_NAMES` tells better (pydantic-ai's
#: ``retries=`` is an agent's, not the HTTP client's).
_KEYWORD_OPTIONS = MODEL_OPTIONS | (OTHER_CLIENTS_OPTIONS - _OTHER_NAMES.keys())


def own_parameters(own: Callable[..., Any]) -> tuple[str, ...]:
    """The parameters of ``own`` a keyword may misspell: those given by name, but not a
    required one (``model``: leaving it out already fails, and ``mode`` is a provider's field)."""
    return tuple(
        name
        for name, parameter in inspect.signature(own).parameters.items()
        if name != "self"
        and parameter.kind in _NAMED
        and parameter.default is not inspect.Parameter.empty
    )


def refuse_misspelt(
    caller: str, given: Mapping[str, Any], own: tuple[str, ...], *, agent: str = ""
) -> None:
    """Raise a `UsageError` naming ``caller`` if a key of ``given`` (its model settings)
    misspells one of its own parameters (``instruction=`` for ``instructions=``): sent as
    a model setting, the provider got it in the request body while the run went without it.

    Args:
        caller: The call, as the error names it (``"Agent()"``).
        given: The keywords the caller would send as model settings.
        own: The caller's parameters (`own_parameters`).
        agent: As `refuse_run_options`'s: how a model setting of that name is given.

    Raises:
        UsageError: Naming every such key, each with the parameter it is close to.
    """
    found = [(name, close) for name in given if (close := _misspelt(name, own)) is not None]
    if not found:
        return
    names = ", ".join(f"{name}=" for name, _ in found)
    meant = ", ".join(close for _, close in found)
    fields = ", ".join(f"{name!r}: ..." for name, _ in found)
    raise UsageError(
        f"{caller} got {names}: did you mean {meant}? (a keyword {caller} does not take "
        f"is a model setting, sent to the provider as it is; "
        f"{'a field of that name goes' if len(found) == 1 else 'fields of those names go'} in "
        f"{agent}settings={{{fields}}}{')' if agent else ''})"
    )


@functools.lru_cache(maxsize=1024)
def _misspelt(name: str, own: tuple[str, ...]) -> str | None:
    """What ``name`` was meant for, ``"instructions="`` (the parameter of ``own`` it
    misspells or another library's name for), or None (cached: a setting's name is looked
    at once, however many runs give it)."""
    if name in _OTHER_NAMES or name == "settings":
        return _meant(name, own)
    if name in _PROVIDER_FIELDS:
        return None
    close = difflib.get_close_matches(name, own, n=1, cutoff=_MISSPELT)
    return f"{close[0]}=" if close else None


def _meant(name: str, own: tuple[str, ...]) -> str:
    """What to give instead of ``name``, another library's parameter (or ``settings``,
    given to a caller taking model settings as keywords)."""
    if name == "deps_type":  # (no such declaration here)
        where = "deps=" if "deps" in own else "run(..., deps=...)"
        return f"{where} (deps are passed with each run; no deps type is declared)"
    target = _OTHER_NAMES.get(name, name)
    if target == "settings" and "settings" not in own:  # generate_text(..., settings={...})
        return "the model settings as keywords: temperature=0, or **settings"
    if name == "retries":
        return "output_retries= (a tool's retries: @tool(max_retries=...))"
    return f"{target}="
