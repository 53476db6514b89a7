"""Each dialect's rule for a tool's name, and `sent_name`: a history call's name as sent.

A tool's own name is checked against its dialect's rule when it is compiled (a
`SchemaCompileError` names it). A call in the history is another matter: the
model gave its name, and a model may make one up that its own API refuses to
take back (GPT models call ``multi_tool_use.parallel``; a Gemini history holds
``default_api.get_weather``, which OpenAI and Anthropic refuse). The run answers
such a call "Unknown tool", and the next request carries it: OpenAI checks the
history's names too (400 ``invalid_value`` at ``messages[1].tool_calls[0].function.name``),
so the model could not recover, nor any continuation of that history.

So on the wire only, a history name the dialect refuses goes under
`sent_name`'s valid stand-in; the state keeps the name the model gave, and a
call's result finds it by call id, so nothing else changes.
"""

from __future__ import annotations

import re

import attrs

from toolfold.adapters._dialects._model import Dialect
from toolfold.toolkit._options import TOOL_NAME_CHARACTERS, TOOL_NAME_LONGEST, with_digest


@attrs.frozen
class NameRule:
    """The names a dialect takes: ``characters`` (a regex class's body), at most
    ``longest`` of them, the first among ``first`` (None: any of ``characters``).

    Attributes:
        words: The rule in words, for an error that names a tool.
    """

    characters: str
    longest: int
    words: str
    first: str | None = None
    pattern: re.Pattern[str] = attrs.field(init=False)
    _refused: re.Pattern[str] = attrs.field(init=False)
    _first: re.Pattern[str] | None = attrs.field(init=False)

    @pattern.default
    def _pattern(self) -> re.Pattern[str]:
        if self.first is None:
            return re.compile(f"[{self.characters}]{{1,{self.longest}}}")
        return re.compile(f"[{self.first}][{self.characters}]{{0,{self.longest - 1}}}")

    @_refused.default
    def _refused_default(self) -> re.Pattern[str]:
        return re.compile(f"[^{self.characters}]")

    @_first.default
    def _first_default(self) -> re.Pattern[str] | None:
        return None if self.first is None else re.compile(f"[{self.first}]")

    def fitted(self, name: str) -> str:
        """``name`` if the rule takes it; else each refused character made ``_`` (and
        ``_`` put first if the first is refused), ended with ``_`` and 8 hex digits of
        ``name``'s SHA-256 (`with_digest`), within ``longest``.

        The stand-in is a name the rule takes, and the same name always gives the same
        one. Two refused names give two stand-ins unless 32 bits of their digests agree.
        A stand-in is not kept apart from valid names: a tool (or a valid history name)
        written as the same text, ``_`` and those 8 hex digits included, would be sent
        alike."""
        if self.pattern.fullmatch(name):
            return name
        fitted = self._refused.sub("_", name)
        if self._first is not None and not self._first.match(fitted):
            fitted = f"_{fitted}"
        return with_digest(fitted, name, self.longest)


#: OpenAI's ``FunctionObject.name``: "Must be a-z, A-Z, 0-9, or contain underscores and
#: dashes, with a maximum length of 64" [openai-openapi.yaml]; history names included
#: (400 ``invalid_value`` on a made-up ``multi_tool_use.parallel``, mcp-use/mcp-use#90).
OPENAI_NAME = NameRule(
    TOOL_NAME_CHARACTERS, TOOL_NAME_LONGEST, "1-64 characters of a-z A-Z 0-9 _ -"
)
#: Anthropic's own OpenAPI document allows 128 characters (providers.md says 64):
#: ``Tool.name`` and ``RequestToolUseBlock.name`` match ``^[a-zA-Z0-9_-]{1,128}$``.
ANTHROPIC_NAME = NameRule(TOOL_NAME_CHARACTERS, 128, "1-128 characters of a-z A-Z 0-9 _ -")
#: Gemini's own OpenAPI document (`FunctionDeclaration.name`) allows 64 characters
#: (providers.md says 128): a longer name is refused before the request, naming the tool.
GEMINI_NAME = NameRule(
    "a-zA-Z0-9_.:-",
    64,
    "a letter or _ then a-z A-Z 0-9 _ . : -, at most 64 characters",
    first="a-zA-Z_",
)

#: Each dialect's rule; a dialect not here takes any name (Ollama documents none).
NAME_RULES: dict[str, NameRule] = {
    "openai-chat": OPENAI_NAME,
    "openai-responses": OPENAI_NAME,
    "deepseek": OPENAI_NAME,
    "anthropic": ANTHROPIC_NAME,
    "gemini": GEMINI_NAME,
    "gemini-openapi": GEMINI_NAME,
}


# Each dialect's names as sent, by dialect and name given: a request sends every history
# call's name, and a lookup costs a fraction of the rule's regex (a Responses body of 30
# calls took 40% longer to build without it). Only names up to the longest any rule takes
# are kept: a longer one is a stand-in whatever the dialect, and keeping it would hold
# up to _MOST_SENT made-up names of any size (200 names of 1 MB held 200 MB).
_sent: dict[str, dict[str, str]] = {}
_MOST_SENT = 4096
_LONGEST_KEPT = max(rule.longest for rule in NAME_RULES.values())


def sent_name(name: str, dialect: Dialect | str) -> str:
    """The name a history call (or its result) named ``name`` is sent under in ``dialect``.

    A name the dialect's rule takes goes as it is (every tool's name does: it was
    checked when compiled); another, a name the model made up, goes as
    `NameRule.fitted` makes it, the same on every request.

    Example:
        >>> sent_name("get_weather", "openai-chat")
        'get_weather'
        >>> sent_name("multi_tool_use.parallel", "openai-chat")
        'multi_tool_use_parallel_41c06c9e'
        >>> sent_name("multi_tool_use.parallel", "gemini")
        'multi_tool_use.parallel'
    """
    try:
        return _sent[dialect][name]
    except KeyError:
        pass
    rule = NAME_RULES.get(dialect)
    sent = name if rule is None else rule.fitted(name)
    if len(name) > _LONGEST_KEPT:
        return sent
    names = _sent.setdefault(dialect, {})
    if len(names) >= _MOST_SENT:
        names.clear()  # (made-up names without end: the memo stays bounded)
    names[name] = sent
    return sent


def forget_sent_names() -> None:
    """Forget every name `sent_name` looked up (``clear_cache`` calls it)."""
    _sent.clear()
