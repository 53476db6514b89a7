"""API keys: read from the environment, held in a wrapper that never prints them.

A key lives in the private slot of a `Secret`; ``repr``, ``str`` and format
strings show ``Secret('sk-...')`` masked, so a model or transport can be logged,
printed or put in an exception message safely. `redact` scrubs a key from any
text (used on every error message and body the transport raises), and
`RedactingFilter` does the same for log records, for users who log httpx's debug
output. The password of a base URL's ``user:password@`` is a secret too
(`url_secrets`); `mask_url` shows such a URL with it masked, and with any
query values and fragment masked too (where a key may also be written). A key or password
shorter than `MIN_BARE_PASSWORD` is scrubbed only where it is written as one
(`api_key_secrets`, `url_secrets`), never letter by letter.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import importlib
import itertools
import logging
import os
import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar

from toolfold._errors import ModelConfigError

#: Where each provider's key is looked for when ``api_key=`` is not given.
API_KEY_ENV_VARS: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
}

MASK = "***"
"""What every masked secret is written as, in errors, logs and echoed answers."""


class Secret:
    """A string that does not show itself: ``repr`` and ``str`` are masked.

    Call `reveal` at the one place the value is needed (building a header).
    """

    __slots__ = ("__value",)

    def __init__(self, value: str) -> None:
        self.__value = value

    def reveal(self) -> str:
        """The secret value."""
        return self.__value

    def __repr__(self) -> str:
        return f"Secret({mask(self.__value)!r})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.__value == self.__value

    def __hash__(self) -> int:
        return hash((Secret, self.__value))

    def __bool__(self) -> bool:
        return bool(self.__value)

    def __copy__(self) -> Secret:
        return self  # (immutable: a copy is the same secret)

    def __deepcopy__(self, memo: dict[int, object]) -> Secret:
        return self  # (`copy.deepcopy` of a model or an agent leaks nothing: no pickling)

    def __reduce__(self) -> str | tuple[object, ...]:
        # Pickling a key by accident (e.g. into a checkpoint) must be an error.
        raise TypeError("a Secret cannot be pickled; pass the key again where it is needed")


def mask(value: str) -> str:
    """A masked form that keeps a short, recognisable prefix: ``'sk-...'``."""
    if len(value) <= 8:
        return MASK
    return f"{value[:3]}{MASK}"


def mask_url(url: str) -> str:
    """``url`` as a user's URL may be shown: its password, query values and fragment masked.

    ``http://bob:pw@host/api?api-key=sk-1#tok`` shows as
    ``http://bob:***@host/api?api-key=***#***``: the password of
    ``user:password@``, each query parameter's value (a parameter without
    ``=`` as ``***``) and the ``#fragment`` are masked, as a key may sit in any
    of them (Azure's ``?api-key=...``). The user, scheme, host, port, path and
    the query's parameter names stay, so the URL is still recognisable.
    """
    head, hashed, fragment = mask_url_password(url).partition("#")
    base, asked, query = head.partition("?")
    if asked:
        base += "?" + "&".join(
            f"{piece.partition('=')[0]}={MASK}" if "=" in piece else (piece and MASK)
            for piece in query.split("&")
        )
    return f"{base}#{MASK}" if hashed and fragment else base + hashed


def mask_url_password(url: str) -> str:
    """``url`` with only the password of its ``user:password@`` masked: ``http://bob:***@host/api``.

    For a URL toolfold built on a checked base URL (which has no query nor
    fragment), so its own query (Gemini's ``?alt=sse``) stays readable; it is
    what `redact` leaves of the URL. A URL a user gave is shown by `mask_url`.
    """
    userinfo = shown_userinfo(url)
    if userinfo is None or ":" not in userinfo:
        return url
    user = userinfo.partition(":")[0]
    return url.replace(f"{userinfo}@", f"{user}:{MASK}@", 1)


def mask_url_credentials(url: str) -> str:
    """``url`` with everything in it that may be a credential masked, to be shown anywhere.

    For URLs that may carry a credential outside a password (an MCP server's
    ``?api_key=...``, a token as the user: ``https://ghp_...@host``, also
    beside a password: ``https://ghp_...:x-oauth-basic@host``): the whole
    ``user:password@`` as ``***@``, and as `mask_url` does, each query
    parameter's value and the ``#fragment``. What names the server (scheme,
    host, port, path) stays.
    """
    userinfo = shown_userinfo(url)
    if userinfo is not None:
        url = url.replace(f"{userinfo}@", f"{MASK}@", 1)
    return mask_url(url)


def url_query_secrets(url: str) -> tuple[Secret, ...]:
    """The values of ``url``'s query parameters, as secrets to scrub (percent-decoded too).

    A value shorter than `MIN_BARE_PASSWORD` is left out: scrubbed bare, it
    would be cut out of every word that holds it.
    """
    query = url.partition("#")[0].partition("?")[2]
    found: list[Secret] = []
    for piece in filter(None, query.split("&")):
        value = piece.partition("=")[2] if "=" in piece else piece
        for form in (value, urllib.parse.unquote_plus(value)):
            if len(form) >= MIN_BARE_PASSWORD:
                found.append(Secret(form))
    return tuple(dict.fromkeys(found))


#: A URL password or API key shorter than this is scrubbed only where it is
#: written as one: ``user:pw@`` (and the Basic credentials), ``Bearer k`` or the
#: key's header (``x-api-key: k``). As a bare substring, a key ``a`` would turn
#: every ``a`` of a message into ``***``.
MIN_BARE_PASSWORD = 4


class _InUrl(Secret):
    """A short password where a URL writes it, ``user:pw@``: scrubbed to ``user:***@``.

    The URL stays a URL (an httpx request's URL is scrubbed by parsing the
    cleaned text again), and the user stays readable, as `mask_url` shows it.
    """

    __slots__ = ("head",)

    def __init__(self, user: str, password: str) -> None:
        super().__init__(f"{user}:{password}@")
        self.head = f"{user}:"  # what shows before the mask (and "@" after it)


# Where a short key ends: not before a character that would carry its token on
# (a letter, a digit, ``-_~+/=``, or a ``.`` followed by one: ``ab.cd`` is
# another token, ``ab.`` at the end of a sentence is the key).
_TOKEN_GOES_ON = r"(?![\w\-~+/=]|\.[\w\-~+/=])"
_GOES_ON = re.compile(r"[\w\-~+/=]|\.[\w\-~+/=]")  # `_TOKEN_GOES_ON` at one place


class _AsCredential(Secret):
    """A short API key where a request carries it: after its scheme or its header's name.

    ``Bearer k`` (any case of the scheme), or for a bare key in its own header
    the forms a header is printed in: ``x-api-key: k`` (HTTP, log lines),
    ``'x-api-key': 'k'`` (a dict's or multidict's repr), ``(b'x-api-key', b'k')``
    (httpcore's DEBUG lines), ``"x-api-key": "k"`` (JSON). Only the key is
    masked; what names it stays. ``named`` finds what names it and the key
    (`_named_keys`: each place the key is written, whether or not its token goes
    on after it: `scrub` takes the start of another secret there as its end).
    """

    __slots__ = ("lead", "named", "pattern")

    def __init__(self, key: str, header: str, scheme: str | None) -> None:
        super().__init__(key)
        named = rf"(?<![\w-])(?i:{re.escape(header)})['\"]?[ \t]*[:,=][ \t]*(?:b?['\"])?"
        if scheme is None:  # after the header's name and any one scheme word: "Token k"
            lead = rf"{named}[A-Za-z][\w.-]*[ \t]+"
        elif scheme:
            lead = rf"(?<![\w-])(?i:{re.escape(scheme)})[ \t]+"
        else:
            lead = named
        self.lead = lead  # what names the key, for `mask_cut_tail`
        self.pattern = re.compile(rf"({lead}){re.escape(key)}{_TOKEN_GOES_ON}")
        # (the word what names the key starts with, and a pattern of what names it and the key)
        self.named = ((scheme or header).lower(), re.compile(rf"({lead}){re.escape(key)}"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _AsCredential) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash((_AsCredential, self.pattern.pattern))


def api_key_secrets(
    key: Secret | None, header: str, scheme: str, *, bare: int = MIN_BARE_PASSWORD
) -> tuple[Secret, ...]:
    """What to scrub for ``key``, sent in ``header`` after ``scheme`` (empty: bare).

    The key itself; one shorter than ``bare`` (`MIN_BARE_PASSWORD`; a tool's
    text: `QUOTED_BARE`) only where it is written as a credential (``Bearer
    k``, ``x-api-key: k``): a key ``ab`` left bare would be cut out of every
    word of a message that holds ``ab``.
    """
    if not key:
        return ()
    if len(key.reveal()) >= bare:
        return (key,)
    return (_AsCredential(key.reveal(), header.lower(), scheme.strip()),)


#: Header names that carry a credential, whose values a transport treats as
#: secrets like the key, by their exact (lowercased) name: those no word of
#: (`_CREDENTIAL_WORD`) says so.
_CREDENTIAL_NAMES = frozenset(
    {
        "x-honeycomb-team",  # Honeycomb's API key
    }
)
#: ... and by a word of the name (between ``-``, ``_`` or ``.``) that ends in
#: ``key`` (``api-key``, ``x-apikey``, ``DD-APPLICATION-KEY``, ``Modal-Key``,
#: ``key``) or holds ``token``, ``auth``, ``secret``, ``passw``, ``cookie``,
#: ``credential``, ``signature``, ``session`` or ``jwt`` (``X-AuthToken``,
#: ``X-Cookie``, ``Helicone-Auth``, ``x-amz-security-token``). Hiding a header
#: that is no secret costs an error's readability; showing one that is leaks
#: it: a name that may be either is hidden.
_CREDENTIAL_WORD = re.compile(
    r"(?:^|[-_.])(?:[^-_.]*key|[^-_.]*(?:token|auth|secret|passw|cookie|credential|signature"
    r"|session|jwt)[^-_.]*)(?:$|[-_.])",
    re.I,
)
#: Names with a ``key`` word that name no credential (a request's or a cache
#: entry's key), shown as they are.
_NON_SECRET_KEY_NAMES = frozenset({"idempotency-key", "x-idempotency-key", "x-cache-key"})


def is_credential_header(name: str) -> bool:
    """Whether a header named ``name`` carries a credential: a name with a
    word naming one (`_CREDENTIAL_WORD`) other than a known request or cache
    key (`_NON_SECRET_KEY_NAMES`), or a known name (`_CREDENTIAL_NAMES`)."""
    folded = name.lower()
    if folded in _NON_SECRET_KEY_NAMES:
        return False
    return folded in _CREDENTIAL_NAMES or _CREDENTIAL_WORD.search(folded) is not None


def header_secrets(
    name: str, value: Secret, *, bare: int = MIN_BARE_PASSWORD
) -> tuple[Secret, ...]:
    """What to scrub for a credential ``value`` sent in the header ``name``.

    The whole value and, after a scheme word (``Bearer tok``, ``Basic
    dXNl...``), the credential alone, which a server may echo by itself;
    each as the API key is (`api_key_secrets`: one shorter than ``bare`` only
    where it is written as a credential).
    """
    whole = value.reveal()
    scheme, _, token = whole.partition(" ")
    found = [*api_key_secrets(value, name, "", bare=bare)]
    if token.strip():
        found += api_key_secrets(Secret(token.strip()), name, scheme, bare=bare)
    return tuple(dict.fromkeys(found))


def url_secrets(url: str, *, bare: int = MIN_BARE_PASSWORD) -> tuple[Secret, ...]:
    """The secrets in ``url``'s ``user:password@``: none without a password.

    The password as written, percent-decoded and as the HTTP clients' URL
    classes write it (`_rewritten`), and the Basic credentials the
    HTTP clients make of the user and password (``Authorization: Basic ...``),
    which a server may echo: each is scrubbed like the API key. A form of the
    password shorter than ``bare`` (`MIN_BARE_PASSWORD`) is scrubbed as
    ``user:password@`` only, where the URL writes it; Basic credentials that
    short, after ``Basic``.
    """
    userinfo = shown_userinfo(url)
    if userinfo is None:
        return ()
    user, _, password = userinfo.partition(":")
    if not password:
        return ()
    plain = urllib.parse.unquote(user), urllib.parse.unquote(password)
    found: list[Secret] = []
    for name, value in ((user, password), plain, *_rewritten(url)):
        if value:
            found.append(Secret(value) if len(value) >= bare else _InUrl(name, value))
    found.extend(_basic_secrets(*plain, bare=bare))
    return tuple(dict.fromkeys(found))


def login_secrets(user: str, password: str) -> tuple[Secret, ...]:
    """The secrets of a user and password from no URL (a netrc file's): none without a password.

    The password itself, when at least `MIN_BARE_PASSWORD` long (a shorter one
    would be cut out of every word that holds it), and the Basic credentials
    made of the two, each scrubbed like the API key.
    """
    if not password:
        return ()
    bare = [Secret(password)] if len(password) >= MIN_BARE_PASSWORD else []
    return tuple(dict.fromkeys([*bare, *_basic_secrets(user, password)]))


def _basic_secrets(user: str, password: str, *, bare: int = 0) -> list[Secret]:
    """The Basic credentials the HTTP clients make of ``user`` and ``password`` (shorter
    than ``bare``: only after ``Basic``)."""
    found: list[Secret] = []
    # httpx encodes the Basic credentials in UTF-8, aiohttp in Latin-1.
    for encoding in ("utf-8", "latin-1"):
        with contextlib.suppress(UnicodeEncodeError):
            basic = base64.b64encode(f"{user}:{password}".encode(encoding)).decode("ascii")
            found += api_key_secrets(Secret(basic), "authorization", "Basic", bare=bare)
    return found


def _rewritten(url: str) -> list[tuple[str, str]]:
    """The user and password of ``url`` as the URL classes of the HTTP clients write them.

    Each percent-encodes a URL its own way when it prints it: yarl (aiohttp)
    writes escapes in upper case (``p%c3%a9`` as ``p%C3%A9``) and decodes the
    unreserved ones (``%41`` as ``A``); httpx and httpx2 encode ``;`` and ``=``
    (``p;=x`` as ``p%3B%3Dx``). Only the packages already installed are asked.
    """
    found: list[tuple[str, str]] = []
    # A URL a class refuses (its own exception types) is sent by no client of its package.
    with contextlib.suppress(Exception):
        import yarl

        parsed = yarl.URL(url)
        found.append((parsed.raw_user or "", parsed.raw_password or ""))
    for name in ("httpx", "httpx2"):
        with contextlib.suppress(Exception):
            userinfo = importlib.import_module(name).URL(url).userinfo.decode("ascii")
            user, _, password = userinfo.partition(":")
            found.append((user, password))
    return found


def url_userinfo(url: str) -> str | None:
    """The ``user:password`` before the ``@`` of ``url``'s authority, as `urllib.parse.urlsplit` reads it."""
    try:
        netloc = urllib.parse.urlsplit(url).netloc
    except ValueError:  # a malformed URL (an unclosed "[" of an IPv6 host): read it plainly
        netloc = url.partition("//")[2].partition("/")[0]
    userinfo, at, _ = netloc.rpartition("@")
    return userinfo if at else None


def shown_userinfo(url: str) -> str | None:
    """What of ``url`` may be a ``user:password`` to hide: `url_userinfo`, or what a raw ``/?#`` cut off.

    A password holding an unencoded ``/``, ``?`` or ``#`` ends the host part
    there (``https://bob:pa/ss@host`` reads as host ``bob``, port ``pa``), so
    `url_userinfo` finds none. When it finds none and an ``@`` follows the
    scheme's ``//``, everything between the ``//`` and the last ``@`` is taken
    as the userinfo: masking too much of an odd URL (an ``@`` in its path) is
    better than showing a password.
    """
    userinfo = url_userinfo(url)
    if userinfo is not None:
        return userinfo
    scheme, slashes, rest = url.partition("://")
    if not slashes or not scheme or "@" not in rest:
        return None
    return rest.rpartition("@")[0]


# Set by `keys_deferred`: a model built while it is may lack its key.
_DEFERRED: ContextVar[bool] = ContextVar("toolfold_keys_deferred", default=False)


@contextlib.contextmanager
def keys_deferred() -> Iterator[None]:
    """Build models whose API key is missing while inside: they refuse to send instead.

    For a process that builds an agent only to read its spec, never to call
    its model: Ray's driver imports the agent a batch names when the key is
    set only where the actors run (they build it again, key required). A
    provider model built inside without its key is built, but each of its
    requests raises the `ModelConfigError` its construction would have
    raised, before anything is sent (see `keys_are_deferred`).
    """
    token = _DEFERRED.set(True)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


def keys_are_deferred() -> bool:
    """True inside `keys_deferred`: a model missing its key is built, and refuses to send."""
    return _DEFERRED.get()


# Set by `keys_unpickled`: the models built while it is come from a pickle.
_UNPICKLED: ContextVar[bool] = ContextVar("toolfold_keys_unpickled", default=False)


@contextlib.contextmanager
def keys_unpickled() -> Iterator[None]:
    """Build models again from a pickle while inside: a missing key is this process's to set.

    A pickled model (or agent) never carries its key: the process loading it
    reads the key from its own environment, and ``api_key=...``, the usual
    advice, cannot help there (a model given its key does not pickle). A
    missing key's error says so (see `resolve_api_key`).
    """
    token = _UNPICKLED.set(True)
    try:
        yield
    finally:
        _UNPICKLED.reset(token)


def resolve_api_key(
    provider: str,
    api_key: str | Secret | None,
    *,
    env_vars: Iterable[str] | None = None,
    environ: Mapping[str, str] | None = None,
    required: bool = True,
) -> Secret | None:
    """The key to use: ``api_key`` when given, else the provider's environment variable.

    Args:
        provider: The provider name, e.g. ``"openai"``.
        api_key: A key given explicitly (wins over the environment).
        env_vars: Variables to read, in order; default `API_KEY_ENV_VARS[provider]`.
        environ: The environment (default ``os.environ``).
        required: Raise when no key is found (False for local servers).

    Raises:
        ModelConfigError: No key given and none of the variables is set, or
            ``api_key`` is empty or neither a string nor a `Secret`.
    """
    if isinstance(api_key, Secret):
        return api_key
    if api_key is not None:
        if not isinstance(api_key, str):  # (the value is a secret: its type only)
            raise ModelConfigError(
                f"api_key for provider {provider!r} must be a string or a Secret, "
                f"not {type(api_key).__name__}"
            )
        if not api_key.strip():
            raise ModelConfigError(f"api_key for provider {provider!r} is empty")
        return Secret(api_key)
    names = tuple(env_vars) if env_vars is not None else API_KEY_ENV_VARS.get(provider, ())
    env = os.environ if environ is None else environ
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return Secret(value)
    if not required:
        return None
    where = " or ".join(names) if names else "an environment variable"
    if _UNPICKLED.get():
        raise ModelConfigError(
            f"no API key for provider {provider!r}: the model was pickled without its key "
            f"and built again in this process, which reads it from its own environment: "
            f"set {where} there"
        )
    # (where the key goes: an Agent or generate_text refuses api_key= as a model setting)
    raise ModelConfigError(
        f"no API key for provider {provider!r}: pass api_key=... to the model "
        f"(toolfold.model('{provider}:...', api_key=...)) or set {where}"
    )


#: What names a short key (`_AsCredential.named`): the word it starts with, in lower case,
#: and a pattern of it and the key, its group 1 what names the key.
Named = tuple[str, re.Pattern[str]]

#: One secret's part of `scrubs`: ``(value, head, tail, where)``.
Scrub = tuple[str, int, int, Named | None]

Scrubs = tuple[Scrub, ...]


def scrubs(secrets: Iterable[Secret | None]) -> Scrubs:
    """What `scrub` masks: each secret's value, and where in it or in what pattern the mask goes.

    ``(value, head, tail, where)``: the value is masked but for its first
    ``head`` and last ``tail`` characters (a short URL password's ``user:``
    and ``@``), everywhere, or (a short key) where the pattern ``where``
    finds it written as a credential, only the key masked; the value is
    looked for first, plainly, as a quick test. Made once for a set of
    secrets that is used many times (a log filter's).
    """
    found: dict[tuple[str, int, int, Named | None], None] = {}
    for s in secrets:
        if isinstance(s, _AsCredential):
            found[s.reveal(), 0, 0, s.named] = None
        elif isinstance(s, _InUrl):
            found[s.reveal(), len(s.head), 1, None] = None
        elif s:
            found[s.reveal(), 0, 0, None] = None
    return tuple(found)


#: A secret's start this long or longer is masked as the secret is (a server echoing
#: ``key[:-4]***``, or cutting the key off): long enough to be no common prefix
#: (``sk-proj-`` is 8), and a secret only as long as this is masked whole only.
ECHOED_PREFIX = 16

#: A secret shorter than this is masked in a text a tool wrote (its result, its error)
#: only where it is written as a credential (``Bearer EMPTY``, ``x-api-key: ollama``,
#: ``user:pw@``), as `MIN_BARE_PASSWORD` has it for errors and answers: a local
#: server's placeholder key (``EMPTY``, ``ollama``, ``lm-studio``) is also a word a
#: tool's data holds (``"queue": "EMPTY"``). A key this long is no word.
QUOTED_BARE = ECHOED_PREFIX


def quoted_masker(pairs: Scrubs) -> Callable[[str], str] | None:
    """What masks the secrets of ``pairs`` (`scrubs`) in a text a tool wrote (its result,
    its error), as a successful answer is (`scrub` without ``starts``); None when there
    are none. The function gives a text holding none back as it is (the same object),
    after a substring test per secret."""
    if not pairs:
        return None
    # What `scrub` looks for first, each secret's whole value (a short key's too,
    # before its pattern): a text holding none is given back with no more work.
    values = tuple(pair[0] for pair in pairs)

    def masked(text: str) -> str:
        for value in values:
            if value in text:
                return scrub(text, pairs, starts=False)
        return text

    return masked


def echo_probe(value: str, head: int, tail: int, where: Named | None) -> str:
    """What of a secret of `scrubs` shows it: its first `ECHOED_PREFIX` characters when
    it is longer (a key, a long password: `scrub` masks such a start of it too), else
    all of it (a short key, a short URL password's ``user:pw@``)."""
    if where is None and head == 0 and tail == 0 and len(value) > ECHOED_PREFIX:
        return value[:ECHOED_PREFIX]
    return value


def scrub(text: str, pairs: Scrubs, *, starts: bool = True) -> str:
    """``text`` with each secret of ``pairs`` (`scrubs`) masked, overlapping ones as one.

    A secret longer than `ECHOED_PREFIX` is masked where its start of that many
    characters or more is written too (``sk-proj-abc...`` echoed less its last
    characters), as far as the text goes on as the secret; without ``starts``
    (a successful answer, whole or streamed), the whole secret only.

    Where secrets overlap (a short key inside a password, a key whose end
    starts a password), every character of each is under one ``***``:
    replaced one after the other, the first replaced cut the others, which
    then no longer matched and showed in part (``***-pw-x``). A short key
    ends where its token does, or where another secret starts or goes on
    (``x-api-key: abc`` + a password ``defg`` in ``x-api-key: abcdefg``).
    """
    spans: list[tuple[int, int]] = []
    named = []  # the short keys, found once the other secrets are
    for value, head, tail, where in pairs:
        probe = echo_probe(value, head, tail, where) if starts else value
        if probe not in text:
            continue
        if where is not None:
            named.append((value, where))
            continue
        if probe is not value:  # each start of it, as long as the text goes on as it
            spans += _starts(text, value, probe)
            if value not in text:
                continue
        # A run of occurrences whose masks overlap or touch ("aaaa" in "a" * 7), in one match;
        # one that starts inside a run but is not part of it is looked for after it.
        size, run = len(value), _runs(value, len(value) - head - tail)
        if run is None:  # no two occurrences overlap: each one, as found
            at = text.find(value)
            while at >= 0:
                spans.append((at + head, at + size - tail))
                at = text.find(value, at + size)
            continue
        at = 0
        while found := run.search(text, at):
            spans.append((found.start() + head, found.end() - tail))
            at = found.end() - size + 1  # just after the run's last occurrence starts
    if named:
        spans += _named_keys(text, named, sorted(spans))
    if not spans:
        return text
    spans.sort()
    pieces, shown = [], 0  # shown: where the text not yet copied starts
    start, end = spans[0]
    for next_start, next_end in spans[1:]:
        if next_start <= end:  # overlapping or touching: one mask
            end = max(end, next_end)
            continue
        pieces += [text[shown:start], MASK]
        shown, start, end = end, next_start, next_end
    pieces += [text[shown:start], MASK, text[end:]]
    return "".join(pieces)


def _starts(text: str, value: str, probe: str) -> list[tuple[int, int]]:
    """The spans of ``text`` that are a start of ``value`` at least as long as ``probe``
    (its start): each as long as the text goes on as ``value`` does, a character
    written as a JSON escape included (``\\u0039`` for ``9``, once or twice escaped:
    the text may be JSON, or JSON text inside a JSON string), so a mask never ends
    inside the secret where decoding the text would show the rest of it."""
    found = []
    at = text.find(probe)
    while at >= 0:
        if text.startswith(value, at):  # (the whole secret: the usual echo)
            end = at + len(value)
        else:
            end, k = at + len(probe), len(probe)
            while k < len(value) and end < len(text):
                if text[end] == value[k]:
                    step = 1
                elif text[end] == "\\":
                    step = _escape_of(text, end, value[k])
                    if not step:
                        break
                else:
                    break
                end, k = end + step, k + 1
        found.append((at, end))
        at = text.find(probe, end)
    return found


def _escape_of(text: str, at: int, char: str) -> int:
    """The length of the JSON escape of ``char`` at ``text[at]`` (a backslash), written
    once (``\\u0039``, ``\\/``) or escaped again (``\\\\u0039``); 0 when there is none."""
    for lead in ("\\", "\\\\"):
        if not text.startswith(lead, at):
            continue
        after = at + len(lead)
        if (
            text.startswith("u", after)
            and text[after + 1 : after + 5].lower() == f"{ord(char):04x}"
        ):
            return len(lead) + 5
        if char in '/"\\' and text.startswith(char, after):
            return len(lead) + 1
    return 0


def _runs(value: str, masked: int) -> re.Pattern[str] | None:
    """A pattern matching a run of ``value``'s occurrences whose masks overlap or touch;
    None when no two occurrences of ``value`` overlap (the usual key).

    The mask of each is ``masked`` characters long (all of ``value`` but a short
    URL password's ``user:`` and ``@``). The occurrence after one starts ``d``
    characters on, for ``d`` a period of ``value`` (``value[d:] == value[:-d]``)
    or its length, and adds its last ``d`` characters: the run is matched in one
    regex match, the longest step first (the farthest next occurrence: those it
    steps over are under the masks on either side), not found one ``str.find``
    at a time: ``"aaaa"`` in ``"a" * 2_000_000`` would be two million calls.
    """
    size = len(value)
    if not any(value[d:] == value[: size - d] for d in range(1, size)):
        return None
    steps = [d for d in range(masked, 0, -1) if d == size or value[d:] == value[: size - d]]
    more = "|".join(re.escape(value[size - d :]) for d in steps)
    return re.compile(f"{re.escape(value)}(?:{more})*" if more else re.escape(value))


def _named_keys(
    text: str, named: list[tuple[str, Named]], others: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The spans of the short keys ``named`` (each with what names it: `_AsCredential`)
    where their token ends, or where one of the spans ``others`` (sorted) of the other
    secrets starts or goes on: a key right before a password (``abc`` + ``defg``) is the
    end of neither token, and showed whole."""
    found: list[tuple[int, int]] = []
    reach = list(itertools.accumulate((end for _, end in others), max))  # the farthest end so far
    folded = _folded(text)
    for key, where in named:
        for at in _named_at(text, folded, key, where):
            end = at + len(key)
            if _GOES_ON.match(text, end):
                # the other secrets starting at or before the key's end: does one reach it?
                before = bisect.bisect_right(others, (end, len(text) + 1)) - 1
                if before < 0 or reach[before] < end:
                    continue
            found.append((at, end))
    return found


def written_as_credential(text: str, key: str, where: Named) -> bool:
    """Whether ``text`` holds the short ``key`` after what names it (``where``: of its
    `_AsCredential`), its token going on after it or not."""
    if key not in text:  # (the quick test, before lowering the whole text)
        return False
    return next(_named_at(text, _folded(text), key, where), None) is not None


def _named_at(text: str, folded: str, key: str, where: Named) -> Iterator[int]:
    """Where in ``text`` (``folded``: `_folded`) the short ``key`` is written after what
    names it (``where``), from the start, each after the last one found.

    Not a pattern tried at every character of the text (a tool's result of a
    megabyte, ``EMPTY`` in it many times): the word what names the key starts
    with (``bearer``, a header's name) is found with ``str.find``, then the
    next key after it; the pattern of what names the key and the key is matched
    at that word only when the key is within `_NAMED_REACH` characters of it,
    else the word is looked for again from that far before the key. The pattern
    is matched where the word starts, so what names the key ends where the
    pattern has it (a key ``b`` in ``(b'x-api-key', b'b')`` is the last ``b``).
    """
    word, named = where
    at_word = folded.find(word)
    while at_word >= 0:
        at = text.find(key, at_word + len(word))
        if at < 0:
            return
        if at - at_word > _NAMED_REACH:  # no key near this word: skip to near the next key
            at_word = folded.find(word, at - _NAMED_REACH)
            continue
        found = named.match(text, at_word)
        if found is None:
            at_word = folded.find(word, at_word + 1)
        else:
            yield found.end(1)
            at_word = folded.find(word, found.end())


#: How far before a short key what names it (``x-api-key: ``, ``Authorization: Token``)
#: is looked for: a header's name, quotes and a scheme word, with room to spare.
_NAMED_REACH = 96

#: The characters a case-insensitive pattern takes for an ASCII letter that ``str.lower``
#: does not turn into it, and the letter (``İ`` alone is lowered to two characters).
_LIKE_ASCII = (("\u0130", "i"), ("\u0131", "i"), ("\u017f", "s"))


def _folded(text: str) -> str:
    """``text`` in lower case, each character where it was, as a case-insensitive pattern
    reads an ASCII word in it: ``str.find`` finds the words of `_named_keys` in it."""
    if not text.isascii():
        for odd, letter in _LIKE_ASCII:
            if odd in text:
                text = text.replace(odd, letter)
    return text.lower()


#: The shortest start of a secret `mask_cut_tail` masks at the end of a cut text
#: (or half the secret, if that is shorter): as much as `mask` shows of a key.
MIN_CUT_PREFIX = 3


def mask_cut_tail(text: str, secrets: Iterable[Secret | None]) -> str:
    """``text``, cut before its end, with a secret's start at its very end masked.

    `redact` finds a secret only whole: a body cut inside an echoed key
    (``...provided: sk-proj-abc``) would show the part that arrived. A tail
    that is the start of a secret, `MIN_CUT_PREFIX` characters or more (or
    half of a shorter one), becomes ``***``; a short key's start only after
    what names it (``Bearer a``), a short URL password's after its user
    (``bob:p`` as ``bob:***``). A character cut in two (``\ufffd`` at the end)
    goes with it. Run it after `redact`, on a cut text only.
    """
    core = text.rstrip("\ufffd")
    cut: tuple[int, str] | None = None  # where the masked tail starts, and what shows
    for s in secrets:
        if not s:
            continue
        value, found = s.reveal(), None
        if isinstance(s, _AsCredential):
            starts = "|".join(re.escape(value[:n]) for n in range(len(value) - 1, 0, -1))
            named = re.search(rf"({s.lead})(?:{starts})\Z", core) if starts else None
            if named is not None:
                found = named.end(1), MASK
        else:
            # A short URL password, "user:pw@": only what follows "user:" is secret.
            head = s.head if isinstance(s, _InUrl) else ""
            shortest = len(head) + 1 if head else min(MIN_CUT_PREFIX, (len(value) + 1) // 2)
            for n in range(len(value) - 1, shortest - 1, -1):
                if core.endswith(value[:n]):
                    found = len(core) - n, f"{head}{MASK}"
                    break
        if found is not None and (cut is None or found[0] < cut[0]):
            cut = found  # the longest tail: one secret's start may hold another's
    return text if cut is None else f"{core[: cut[0]]}{cut[1]}"


def redact_header(name: str, value: str, secrets: Iterable[Secret | None]) -> str:
    """A header's ``value`` scrubbed as it reads with its ``name`` (a short key shows in ``x-api-key: k``)."""
    line = f"{name}: {value}"
    cleaned = redact(line, secrets)
    return value if cleaned == line else cleaned[len(name) + 2 :]


def redact(text: str, secrets: Iterable[Secret | None]) -> str:
    """``text`` with every secret value replaced by ``***``.

    A short one only where it is written as a credential (`url_secrets`, `api_key_secrets`).
    """
    return scrub(text, scrubs(secrets))


def redact_chain(error: BaseException, secrets: Iterable[Secret | None]) -> None:
    """Scrub ``secrets`` from every exception chained under ``error``, in place.

    ``error`` itself is the caller's (a `ProviderError` is scrubbed field by
    field); this walks ``__cause__`` and ``__context__`` below it, where foreign
    exceptions keep what they were raised with: their ``args`` and text
    attributes (a ``JSONDecodeError``'s ``.doc`` is the whole body), and the
    headers and URL of an httpx request they hold (``Authorization: Bearer
    <key>``, ``http://bob:<password>@host``), so neither ``repr``,
    ``traceback.format_exception`` nor a debugger shows a secret. The members
    of an exception group (an anyio task group's failure) are walked too.
    """
    keys = tuple(s for s in secrets if s)
    if not keys:
        return
    for exc in _chained([error.__cause__, error.__context__]):
        _redact_exception(exc, keys)


def _chained(starts: list[BaseException | None]) -> Iterator[BaseException]:
    """``starts`` and every exception chained under them (``__cause__``, ``__context__``,
    an exception group's members: anyio's, 3.11's), each once."""
    seen: set[int] = set()
    stack = starts
    while stack:
        exc = stack.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        stack += [exc.__cause__, exc.__context__]
        grouped = getattr(exc, "exceptions", None)
        if isinstance(grouped, (tuple, list)):
            stack += [e for e in grouped if isinstance(e, BaseException)]


def _redact_exception(exc: BaseException, keys: tuple[Secret, ...]) -> None:
    exc.args = tuple(redact(a, keys) if isinstance(a, str) else a for a in exc.args)
    for name, value in list(vars(exc).items()):
        if isinstance(value, str):
            setattr(exc, name, redact(value, keys))
        else:
            _redact_headers(getattr(value, "headers", None), keys)
            _redact_url(value, keys)


def _redact_headers(headers: object, keys: tuple[Secret, ...]) -> None:
    # An httpx/httpx2 Request (or Response) the exception keeps: its headers are
    # a mutable mapping; the request is finished, so editing it changes nothing sent.
    items = getattr(headers, "items", None)
    if items is None or not hasattr(headers, "__setitem__"):
        return
    for name, value in list(items()):
        if isinstance(name, str) and isinstance(value, str):
            cleaned = redact_header(name, value, keys)
            if cleaned != value:
                headers[name] = cleaned


def _redact_url(held: object, keys: tuple[Secret, ...]) -> None:
    # The URL of an httpx/httpx2 Request the exception keeps: its repr shows the
    # password of a base URL's user:password@. Like its headers, it is finished.
    url = getattr(held, "url", None)
    if url is None:
        return
    text = str(url)
    cleaned = redact(text, keys)
    if cleaned != text:
        with contextlib.suppress(AttributeError, TypeError, ValueError):  # a read-only URL
            setattr(held, "url", type(url)(cleaned))  # noqa: B010 -- `held` is untyped


#: The headers `RedactingFilter` and `redact_logs` mask a short key after, besides
#: ``Bearer``: those toolfold's models send their key in.
KEY_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")


def _log_secrets(secrets: Iterable[Secret | str], key_headers: Iterable[str]) -> tuple[Secret, ...]:
    """``secrets`` as a log filter scrubs them: a key shorter than `MIN_BARE_PASSWORD`
    where it is written as a credential (``Bearer k``, ``Authorization: Token k``,
    ``x-api-key: k``), as a transport has it (`api_key_secrets`); a longer one everywhere."""
    if isinstance(key_headers, str):  # one header's name, not its letters
        key_headers = (key_headers,)
    headers = tuple(header.lower() for header in key_headers)
    found: list[Secret] = []
    for given in secrets:
        secret = given if isinstance(given, Secret) else Secret(given)
        if not secret:
            continue
        if isinstance(secret, (_AsCredential, _InUrl)):
            found.append(secret)  # already scrubbed where it is one
            continue
        if len(secret.reveal()) >= MIN_BARE_PASSWORD:
            found.append(secret)
            continue
        found += api_key_secrets(secret, "authorization", "Bearer")
        # any other scheme a model may send it with (auth_scheme="Token")
        found.append(_AsCredential(secret.reveal(), "authorization", None))
        for header in headers:
            found += api_key_secrets(secret, header, "")
    return tuple(dict.fromkeys(found))


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs the given secrets from every record.

    A key of `MIN_BARE_PASSWORD` (4) characters or more is scrubbed wherever
    it appears; a shorter one only where it is written as a credential, as a
    transport scrubs it: after ``Bearer`` (any case), after ``Authorization:``
    and one scheme word (``Authorization: Token ab``), and after the name of a
    header of ``key_headers`` (``x-api-key: ab``, ``'x-api-key': 'ab'``,
    ``(b'x-api-key', b'ab')``). Scrubbed everywhere, a key ``ab`` would turn
    ``a cab`` into ``a c***`` in every line.

    A filter on a logger does not see its children's records (``httpcore.http11``
    is not filtered by a filter on ``httpcore``): attach it to handlers, or use
    `redact_logs`, which does.

    Args:
        secrets: Keys (`Secret` or plain strings) to scrub.
        key_headers: The headers after whose name a short key is scrubbed
            (default `KEY_HEADERS`: ``authorization``, ``x-api-key``,
            ``x-goog-api-key``); one name may be given as a string.

    Example:
        >>> import logging
        >>> handler = logging.StreamHandler()
        >>> handler.addFilter(RedactingFilter([Secret("sk-123456789")]))
    """

    def __init__(
        self, secrets: Iterable[Secret | str], *, key_headers: Iterable[str] = KEY_HEADERS
    ) -> None:
        super().__init__()
        self._scrubs = scrubs(_log_secrets(secrets, key_headers))  # made once, not per record

    def filter(self, record: logging.LogRecord) -> bool:
        scrub_record(record, self._scrubs)
        return True


#: Formats a record's exception as a handler's default formatter would.
_TRACEBACKS = logging.Formatter()


def scrub_record(record: logging.LogRecord, found: Scrubs) -> None:
    """Scrub ``found`` from a log record: its message, its traceback and its stack.

    A traceback (``logger.exception``, ``exc_info=``) is written out as a
    handler's formatter would (``record.exc_text``, which formatters reuse);
    when it held a secret, the scrubbed text replaces it and ``exc_info`` is
    dropped, so no formatter can write the exception out again with the key.
    ``stack_info`` (``stack_info=True``) is scrubbed too. A record without a
    secret is left as it was, and so is the message of a record that cannot be
    formatted (``log.info("%d", "x")``): logging reports that mistake when a
    handler formats it, as ever, rather than the filter raising it at the call.
    """
    try:
        message = record.getMessage()
    except Exception:  # the caller's format mistake, for logging to report
        pass
    else:
        cleaned = scrub(message, found)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
    text = record.exc_text
    if (
        not text
        and isinstance(record.exc_info, tuple)
        and record.exc_info[0] is not None
        and _may_show(record.exc_info[1], found)
    ):
        text = _TRACEBACKS.formatException(record.exc_info)
    if text:
        cleaned = scrub(text, found)
        if cleaned != text:
            record.exc_text = cleaned
            record.exc_info = None
    if record.stack_info:
        record.stack_info = scrub(record.stack_info, found)


def _may_show(error: BaseException | None, found: Scrubs) -> bool:
    """Whether a secret may be in the traceback of ``error``, checked without formatting it.

    The text a traceback gets from the exceptions themselves is looked at:
    each one's ``str()``, notes and a ``SyntaxError``'s line, along the
    chain (``__cause__``, ``__context__``) and into exception groups. Only
    when a secret's value is in one is the traceback formatted (and scrubbed):
    formatting it reads every frame's source line, which the handler does
    again. A secret written in a frame's source is not looked for (a key in
    source code is not what redacting logs hides).
    """
    if error is None:  # exc_info without the exception: format it to be sure
        return True
    values = [value for value, *_ in found]
    for exc in _chained([error]):
        try:
            texts = [str(exc)]
        except Exception:  # a broken __str__: the traceback shows none
            texts = []
        try:
            texts += _note_texts(exc)
        except Exception:  # notes that fail to be read: format the traceback to be sure
            return True
        line = getattr(exc, "text", None)  # SyntaxError's source line
        if isinstance(line, str):
            texts.append(line)
        if any(value in text for text in texts for value in values):
            return True
    return False


def _note_texts(exc: BaseException) -> list[str]:
    """The notes of ``exc`` as a traceback prints them (it may raise on odd notes)."""
    notes = getattr(exc, "__notes__", None)
    if notes is None:
        return []
    if isinstance(notes, Sequence) and not isinstance(notes, str):
        return [str(note) for note in notes]  # each note's str(), as a traceback does
    return [repr(notes)]  # a traceback prints anything else by its repr()


#: Loggers of the HTTP stacks a transport may run on, whose DEBUG output shows headers.
HTTP_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2", "aiohttp", "toolfold")


def redact_logs(
    secrets: Iterable[Secret | str],
    *,
    handlers: Iterable[logging.Handler] | None = None,
    key_headers: Iterable[str] = KEY_HEADERS,
) -> RedactingFilter:
    """Scrub ``secrets`` from log output, the HTTP clients' DEBUG lines included.

    Adds one `RedactingFilter` to ``handlers`` (default: the root logger's
    handlers, where records of every logger end up), and to the loggers of
    `HTTP_LOGGERS` and their existing children (``httpcore.http11``...), for
    records that reach other handlers. A handler added later needs
    ``handler.addFilter(returned_filter)``.

    A key of 4 characters or more is scrubbed wherever it appears; a shorter
    one (``ab``, a local server's dummy key) only where it is written as a
    credential, as the transport scrubs it: after ``Bearer``, after
    ``Authorization:`` and one scheme word (``Token ab``), and after the
    name of a header of ``key_headers`` (``x-api-key: ab``). A line such as
    ``bad key: ask about a cab`` stays as it was, not ``***out a c***``.

    Args:
        secrets: Keys (`Secret` or plain strings) to scrub.
        handlers: The handlers to filter; default ``logging.getLogger().handlers``.
        key_headers: The headers after whose name a short key is scrubbed;
            default ``authorization``, ``x-api-key`` and ``x-goog-api-key``,
            where toolfold's models send their key. Name yours when a model
            sends a short key in another (``key_headers="api-key"`` for
            ``auth_header="api-key"``).

    Returns:
        The filter, to add elsewhere or remove again.
    """
    found = RedactingFilter(secrets, key_headers=key_headers)
    for handler in logging.getLogger().handlers if handlers is None else handlers:
        handler.addFilter(found)
    names = [
        name
        for name in list(logging.Logger.manager.loggerDict)
        if name.split(".")[0] in HTTP_LOGGERS
    ]
    for name in {*HTTP_LOGGERS, *names}:
        logging.getLogger(name).addFilter(found)
    return found
