"""What an MCP server's agent-file entry must not hold: what may be a credential.

An agent file is text that gets shared, so `MCPServer.file_entry` refuses a
server holding what may be a credential. The functions here find it and name
it, and where it is, never its value: the refusal is an error message, shown
and logged.

The rules aim to be precise (a false refusal blocks a legitimate agent file)
and predictable (docs/mcp.md lists them):

- a *name* (an ``env`` entry's, a flag's with dashes read as underscores, a
  ``NAME=value`` assignment's, a ``Name: value`` header's, a URL query
  parameter's) is credential-like by `credential_name`; a *strong* one
  (`strong_name`: ``..._TOKEN``, ``..._API_KEY``, ``PASSWORD``,
  ``Authorization``) always holds its credential, any other one
  (``AUTH_MODE``, ``--skip-auth``) only a value that `looks_secret`;
- a value that is only variable references (``$TOKEN``, ``${TOKEN}``) holds
  none: the server (``mcp-remote``) or a shell fills it in at run time;
- anywhere in an argument or ``env`` value: a URL's ``user:password@`` or
  credential-named (or bare) query or fragment pieces, ``user:pw@host``
  without a scheme, ``Bearer``/``Basic`` followed by a token, and tokens with
  a well-known prefix (``sk-``, ``ghp_``, ``xoxb-``, ``glpat-``, ``AKIA``);
- in a URL's path (`path_tokens`): a segment holding such a token, a
  Telegram bot token (``bot123456:ABC...``), a Slack webhook's secret
  (``/services/T.../B.../...``), a Discord webhook's, a JSON Web Token, a
  segment that `looks_random`;
- in arguments: the value after ``-k`` (a key) that is a token's shape, a
  password glued to ``-p`` (mysql's ``-phunter2``), and a value starting with
  ``-`` after a strong flag when it has no flag's shape
  (``--password -hunter2``).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping, Sequence

from toolfold.adapters._http._keys import MASK, shown_userinfo

#: A name part that makes a name credential-like. ``AUTH`` but not ``AUTHOR``,
#: ``AUTHORS``, ``AUTHORED_BY`` or ``AUTHORITY`` (``AUTHORIZATION`` is one);
#: ``PWD`` only ending a longer name (``DB_PWD``, ``DBPWD``), not ``PWD`` or
#: ``OLDPWD`` (the shell's working directories); ``PAT`` only as a whole part.
CREDENTIAL_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASS|CRED|COOKIE|BEARER|AUTH(?!OR(?!IZ))"
    r"|(?<=.)(?<!^OLD)PWD$|(?:^|_)PAT(?:_|$)",
    re.IGNORECASE,
)

#: Words that hold a credential word and are not one (``--max-tokens``,
#: ``KEYBOARD_LAYOUT``, ``NO_PROXY_BYPASS``, ``--pass-environment``).
_NOT_CREDENTIAL_WORDS = re.compile(
    r"KEYBOARD|HOTKEY|MONKEY|TOKENS|TOKENIZER|COMPASS|BYPASS|PASSIVE"
    r"|PASS_?THROUGH|PASS_?ENV",
    re.IGNORECASE,
)

#: A name ending so names where a credential is, not the credential
#: (``--key-file``, ``--token-env GITHUB_TOKEN``, ``OAUTH_CALLBACK_PORT``).
_POINTER_NAME = re.compile(r"_(?:FILE|PATH|DIR|ENV|VAR|PORT)S?$", re.IGNORECASE)

#: A credential-like name whose value is the credential, whatever it looks like.
_STRONG_NAME = re.compile(
    r"(?:TOKEN|SECRET|PASSWORD|PASSWD|PASS|PWD|BEARER|COOKIES?"
    r"|(?:API|ACCESS|SECRET|PRIVATE|CLIENT|AUTH|MASTER|SIGNING|ENCRYPTION|LICENSE)_?KEY)$"
    r"|^KEY$|(?:^|_)PAT$|^(?:PROXY_)?AUTHORIZATION$",
    re.IGNORECASE,
)

#: The start of a token with a well-known prefix, however short (``sk-abc``): a
#: value so starting is not a plain word.
_KNOWN_PREFIX = re.compile(r"(?:sk-|gh[pousr]_|github_pat_|xox[abpr]-|glpat-|AKIA)[A-Za-z0-9]")

#: Short flags whose value is a key (``-k sk-abc``): credential-like, not strong.
#: Only ``-k``: ``-p`` is a port as often as a password, ``-t`` a tag or a type.
_KEY_SHORT_FLAGS = frozenset({"-k"})

#: mysql's password glued to ``-p`` (``-phunter2``): the rest of the argument.
#: Not with an ``=`` in it: Go's single-dash ``-port=8080``, ``-profile=dev``.
_GLUED_PASSWORD = re.compile(r"-p([^=]+)", re.DOTALL)
#: What a glued ``-p`` holds that is no password: a port or a published port
#: (``-p8080``, docker's ``-p8080:80/tcp``, ``-p[::1]:8080:80``).
_PORT_SPEC = re.compile(r"(?:\[[0-9A-Fa-f:.]*\]:)?[0-9][0-9.:-]*(?:/(?:tcp|udp|sctp))?")
#: A glued ``-p`` value read as the rest of a flag's name, not a password:
#: letters, ``.`` and ``-`` (``-pR``, ``-print``, Go's ``-projectId``,
#: ``-pprof.addr``); Go/absl's snake_case (``-project_id``, ``-pprof_addr``);
#: javac's ``-proc:none``; digits then lowercase letters (``-p2p``).
_FLAG_REST = re.compile(r"[A-Za-z.-]+|[a-z]+(?:_[a-z0-9]+)+|[a-z]+:.*|[0-9]+[a-z]+", re.DOTALL)
#: A value led by a variable reference (docker's ``-p${PORT}:80``), filled in at run time.
_REFERENCE_LED = re.compile(r"\$(?:[A-Za-z_]|\{(?:env:|input:)?[A-Za-z_])")

#: An argument that reads as a flag, not as a value: ``-`` (stdin), ``--``,
#: ``--name...``, a short flag or a cluster of them (``-v``, ``-abc``, Go's
#: ``-name=value``, ``-no-cache``, Java's ``-XX:+UseG1GC``), ``-4``. Anything
#: else starting with ``-`` after a strong credential flag (``--password
#: -hunter2``) is its value; not after another credential-like one, which may
#: take none (curl's ``-k -m5``, ``--skip-auth -n10``).
_FLAG_SHAPE = re.compile(r"--?|--.*|-[A-Za-z]+(?:[=.:+-].*)?|-[0-9]", re.DOTALL)

#: A URL path segment holding a Telegram bot token (``bot123456:ABC-DEF...``,
#: also in ``/file/bot<token>/...``).
_TELEGRAM_BOT = re.compile(r"bot[0-9]+:[A-Za-z0-9_-]+")
#: A Slack incoming webhook's path, ``/services/T<team>/B<hook>/<secret>``: the
#: team and hook ids are capitals and digits (a digit in each: checked apart, as
#: ``[A-Z0-9]*[0-9][A-Z0-9]*`` takes quadratic time on a long run of digits).
_SLACK_HOOK = re.compile(r"/services/(T[A-Z0-9]+)/(B[A-Z0-9]+)/([A-Za-z0-9]+)(?=/|$)")
#: A Discord webhook's path, ``/webhooks/<id>/<token>``: the id is 15 or more
#: digits, the token holds ``-`` and ``_``.
_DISCORD_HOOK = re.compile(r"/webhooks/[0-9]{15,}/([A-Za-z0-9_-]+)(?=/|$)")
#: A JSON Web Token's payload part (``eyJ`` is ``{"``), between two dots; see `_has_jwt`.
_JWT_PART = re.compile(r"eyJ[A-Za-z0-9_-]{6,}")
#: What is not base64url.
_NOT_BASE64URL = re.compile(r"[^A-Za-z0-9_-]")
#: What may be a random token: one unbroken run of 24 or more letters and
#: digits, maybe ending in base64's ``=`` padding. No ``-``, ``_`` or ``.``:
#: names with separators (``Meta-Llama-3-8B-Instruct``, ``x86_64``) are words.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9]{24,}={0,2}")

#: Public ids with a random look: an Ethereum address (EIP-55 mixes the case of its
#: hex digits), an IPFS CIDv0 (base58).
_PUBLIC_ID = re.compile(r"0x[0-9A-Fa-f]{40}|Qm[1-9A-HJ-NP-Za-km-z]{44}")
#: A camelCase word: a capitalised word, a run of capitals (an acronym, not the
#: capital starting the next word), or lowercase letters.
_CAMEL_WORD = re.compile(r"[A-Z][a-z]+|[A-Z]+(?![a-z])|[a-z]+")
#: Four consonants in a row: few words' (``y`` counted as a vowel; ``Instruct`` has them).
_CONSONANTS = re.compile(r"[b-df-hj-np-tv-xz]{4}", re.IGNORECASE)

#: What comes before a URL's path as written: a scheme, ``//`` and the host.
_URL_HEAD = re.compile(r"[\x00-\x20]*(?:[A-Za-z][A-Za-z0-9+.\-]*:)?(?://[^/?#]*)?")

#: A value made only of variable references, filled in at run time: ``$TOKEN``,
#: ``${TOKEN}``, and VS Code's ``${env:TOKEN}`` and ``${input:github-token}``.
_REFERENCE = re.compile(r"(?:\$[A-Za-z_]\w*|\$\{(?:env:|input:)?[A-Za-z_][\w.-]*\})+")

#: Values that do not look like a secret: a path (also Windows', ``C:\\keys\\sa.json``,
#: ``\\\\host\\share``), a URL, a number, a plain lowercase word (``none``, ``uvx``,
#: ``read-only``).
_PLAIN_VALUE = re.compile(
    r"[/.~].*|[A-Za-z]:[\\/].*|\\\\.*|[A-Za-z][A-Za-z0-9+.\-]*://.*|[0-9][0-9.:]*|[a-z][a-z-]*",
    re.DOTALL,
)

#: Auth scheme words, any case: the value of a weak name (``--auth oauth2``), no secret.
_AUTH_SCHEME_WORDS = frozenset(
    [
        "none",
        "anonymous",
        "basic",
        "bearer",
        "digest",
        "token",
        "oauth",
        "oauth1",
        "oauth2",
        "oidc",
        "openid",
        "jwt",
        "saml",
        "ntlm",
        "kerberos",
        "negotiate",
        "mtls",
        "tls",
        "apikey",
        "api-key",
        "api_key",
        "iam",
        "sigv4",
        "aws",
        "azure",
        "gcp",
        "google",
        "github",
        "gitlab",
        "microsoft",
        "entra",
        "okta",
        "auth0",
        "keycloak",
    ]
)
#: A weak name naming a kind or a place (``--auth-type``, ``--auth-provider``,
#: ``--auth-server``): a word or a host name given to it is no secret.
_KIND_NAME = re.compile(
    r"_(?:TYPE|KIND|MODE|METHOD|SCHEME|PROVIDER|STRATEGY|SERVER|HOST|DOMAIN|ISSUER|REALM)$",
    re.IGNORECASE,
)
#: A word (``OAuth``, ``GitHub``, ``azure-ad``) or a host name (``auth.example.com:8443``).
_WORD_OR_HOST = re.compile(
    r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*|[a-z0-9-]+(?:\.[a-z0-9-]+)+(?::[0-9]+)?"
)

#: A URL inside a value: ``https://h/x?api_key=...``, also within a longer text
#: (``jdbc:postgresql://db/x?password=...``, ``--db=postgres://bob:pw@db/x``).
#: (Starting only where a run of scheme characters starts: from each letter of a long
#: run, the search took quadratic time.)
_URL = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")

#: ``Bearer <token>`` or ``Basic <base64>``: a token of 8 or more characters, not
#: only letters (``Basic authentication`` and ``Bearer of news`` are words).
_AUTH_SCHEME_VALUE = re.compile(
    r"\b(?:Bearer|Basic)\s+(?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE
)

#: A token with a well-known prefix (OpenAI, GitHub, Slack, GitLab, AWS).
_KNOWN_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{10,}"
    r"|github_pat_\w{10,}|xox[abpr]-[A-Za-z0-9-]{6,}|glpat-[A-Za-z0-9_-]{10,}|AKIA[0-9A-Z]{16})"
)

#: ``NAME=value`` in a text (``API_KEY=sk-...``, ``-e TOKEN=...``, ``Password=...;``).
_ASSIGNMENT = re.compile(
    r"(?:^|(?<=[\s;,&\"'{(]))([A-Za-z_][\w.-]*)=((?:\$\{(?:env:|input:)?[\w.-]+\}|[^\s;,&\"'})])*)"
)

#: ``Name: value`` in a text, the name maybe quoted (``X-API-Key: sk-...``,
#: ``{"Authorization": "Bearer ..."}``).
_HEADER = re.compile(
    r"(?:^|(?<=[\s;,{]))[\"']?([A-Za-z][\w-]*)[\"']?\s*:\s*[\"']?((?:\$\{(?:env:|input:)?[\w.-]+\}|[^\"',;}\n])*)"
)

#: The auth scheme before a header's credential (``Bearer ${TOKEN}``).
_SCHEME = re.compile(r"(?:Bearer|Basic|Token)\s+", re.IGNORECASE)

#: ``user:password@host`` without a scheme (a DSN: ``root:pw@tcp(db:3306)/x``);
#: not a package spec (``npm:pkg@1.0``).
_BARE_USERINFO = re.compile(
    r"(?<![\w.%+-])([\w.%+-]+):([^\s:@/]+)@(?!sha[0-9]+:[0-9a-fA-F])[\w.-]+"
)
_PACKAGE_SCHEMES = frozenset({"npm", "jsr", "pypi", "workspace", "file", "link", "git", "github"})


def credential_name(name: str) -> bool:
    """Whether ``name`` (dashes read as underscores) is named like a credential.

    It holds a `CREDENTIAL_NAME` part outside the words that are not one
    (``KEYBOARD``, ``TOKENS``, ``PASSTHROUGH``...), and does not end in
    ``_FILE``, ``_PATH``, ``_DIR``, ``_ENV``, ``_VAR`` or ``_PORT`` (a name
    pointing at where the credential is).
    """
    name = name.replace("-", "_")
    if _POINTER_NAME.search(name):
        return False
    return CREDENTIAL_NAME.search(_NOT_CREDENTIAL_WORDS.sub("_", name)) is not None


def strong_name(name: str) -> bool:
    """Whether ``name`` is credential-like and its value is the credential itself.

    It ends in a credential noun: ``TOKEN``, ``SECRET``, ``PASSWORD``,
    ``PASSWD``, ``PASS``, ``PWD``, ``PAT``, ``BEARER``, ``COOKIE``, ``API_KEY``
    and other ``..._KEY`` kinds of key (not ``SORT_KEY``), or is ``KEY`` or
    ``AUTHORIZATION``.
    """
    name = name.replace("-", "_")
    return credential_name(name) and _STRONG_NAME.search(name) is not None


def looks_secret(value: str) -> bool:
    """Whether ``value`` may be a secret: not a path, URL, number, or plain lowercase word.

    A token's well-known prefix makes it one however short (``sk-abc``).
    """
    return _KNOWN_PREFIX.match(value) is not None or _PLAIN_VALUE.fullmatch(value) is None


def _holds_credential(name: str, value: str) -> bool:
    """Whether ``value``, given under ``name``, may be a credential (see the module's rules)."""
    value = value.strip()
    if not value or _REFERENCE.fullmatch(value) or not credential_name(name):
        return False
    if strong_name(name):
        return True
    if value.casefold() in _AUTH_SCHEME_WORDS:
        return False
    if _KIND_NAME.search(name.replace("-", "_")) and _WORD_OR_HOST.fullmatch(value):
        return looks_random(value) or _KNOWN_PREFIX.match(value) is not None
    return looks_secret(value)


def url_held(url: str) -> list[str]:
    """What in ``url`` may be a credential, each named without its value (empty: nothing).

    A ``user:password@`` (not a user alone unless a token, nor a ``${VAR}``
    password); query (or ``#fragment``) pieces whose name is
    credential-like and whose value may be one (``?api_key=...``, not
    ``?transport=sse`` or ``#main``); pieces without ``=`` in the query that
    `looks_secret`, ``?sk-...`` (not ``?login``), which are themselves the
    value and so only counted; path
    segments holding a token (`path_tokens`), named by their number.
    """
    held = ["a user:password@"] if _userinfo_holds(shown_userinfo(url)) else []
    if in_path := path_tokens(url):
        held.append(f"a token in path segment {', '.join(map(str, in_path))}")
    head, _, fragment = url.partition("#")
    query = [piece for piece in head.partition("?")[2].split("&") if piece]
    bare = sum(
        "=" not in piece and not _REFERENCE.fullmatch(piece) and looks_secret(piece)
        for piece in query
    )
    shown = [*_credential_pieces(query), *([f"{bare} without a name"] if bare else [])]
    if shown:
        held.append(f"query values ({', '.join(shown)})")
    if in_fragment := _credential_pieces(fragment.split("&")):
        held.append(f"fragment values ({', '.join(in_fragment)})")
    return held


def _userinfo_holds(userinfo: str | None) -> bool:
    """Whether a URL's ``user:password`` may be a credential: a password other than a
    variable reference (``postgres:${PGPASSWORD}`` is filled in at run time), or a user
    alone that is a token (``https://ghp_...@github.com``), not a name (``user@``)."""
    if userinfo is None:
        return False
    user, colon, password = userinfo.partition(":")
    if colon:
        return bool(password) and not _REFERENCE.fullmatch(urllib.parse.unquote(password))
    return token_shaped(user) or _has_jwt(user)


def path_tokens(url: str) -> list[int]:
    """The numbers (1: the first after the host) of ``url``'s path segments holding a token.

    A segment holding a token with a well-known prefix (``/mcp/sk-...``), a
    Telegram bot token (``/bot123456:ABC.../sendMessage``), a Slack or
    Discord webhook's secret (``/services/T000/B000/XXXXXXXX``,
    ``/webhooks/123456789012345678/...``), a JSON Web Token, or a segment
    that `looks_random`.
    """
    path = url_path(url)
    hooks = {
        path[: found.start(found.lastindex or 0)].count("/")
        for shape in (_SLACK_HOOK, _DISCORD_HOOK)
        for found in shape.finditer(path)
        if shape is _DISCORD_HOOK or all(re.search("[0-9]", found[at]) for at in (1, 2))
    }
    return [
        at
        for at, segment in enumerate(path.split("/"))
        if at in hooks
        or _KNOWN_TOKEN.search(segment)
        or _TELEGRAM_BOT.search(segment)
        or _has_jwt(segment)
        or looks_random(segment)
    ]


def mask_path_tokens(url: str) -> str:
    """``url`` with each path segment `path_tokens` finds shown as ``***``.

    The path is cut from ``url`` as written: `urllib.parse.urlsplit` drops
    tabs and newlines, so the path it reads may not be in ``url``. Should the
    two not have the same segments, the whole path is masked.
    """
    found = path_tokens(url)
    if not found:
        return url
    head = _URL_HEAD.match(url)
    start = head.end() if head else 0
    end = min(
        (at for at in (url.find("?", start), url.find("#", start)) if at >= 0), default=len(url)
    )
    parts = url[start:end].split("/")
    if len(parts) != len(url_path(url).split("/")):
        return url[:start] + MASK + url[end:]
    masked = "/".join(MASK if at in found else part for at, part in enumerate(parts))
    return url[:start] + masked + url[end:]


def url_path(url: str) -> str:
    """``url``'s path, as `urllib.parse.urlsplit` reads it (read plainly if malformed)."""
    try:
        return urllib.parse.urlsplit(url).path
    except ValueError:  # a malformed URL (an unclosed "[" of an IPv6 host)
        after_host = url.partition("//")[2].partition("/")[2]
        return "/" + re.split("[?#]", after_host, maxsplit=1)[0]


def looks_random(text: str) -> bool:
    """Whether ``text`` (a URL path segment, ``-k``'s value) looks like a random token.

    One unbroken run of 24 or more letters and digits (maybe ending in
    base64's ``=`` padding) holding capitals, lowercase letters and digits,
    the digits in two places or more: a Zapier MCP URL's key, a Google Docs
    id (a capability when shared). Not a UUID or a hex hash (one case, and
    separators), not ``MyVeryLongProjectName2024`` (digits in one place), not
    a name with ``-``, ``_`` or ``.`` in it (``Meta-Llama-3-8B-Instruct``,
    ``github-mcp-server_Linux_x86_64``, ``PROJ-1234-add-oauth2-support``);
    not a public shape: an Ethereum address (``0x`` and 40 hex digits), an
    IPFS CIDv0 (``Qm`` and 44 base58 characters); not a camelCase name
    (`_camel_name`: ``OpenAIGpt4oMiniDeployment2024``).
    """
    digits = re.findall("[0-9]+", text)
    return (
        _TOKEN_RUN.fullmatch(text) is not None
        and re.search("[A-Z]", text) is not None
        and re.search("[a-z]", text) is not None
        and len(digits) >= 2
        and _PUBLIC_ID.fullmatch(text) is None
        and not _camel_name(text, len(digits))
    )


def token_shaped(text: str) -> bool:
    """Whether ``text`` (a URL's user, ``-k``'s value) has a token's shape: it starts
    with a well-known prefix, however short (``sk-abc``), holds a token with one,
    or `looks_random`."""
    return bool(_KNOWN_PREFIX.match(text) or _KNOWN_TOKEN.search(text)) or looks_random(text)


def _camel_name(text: str, digit_runs: int) -> bool:
    """Whether ``text`` reads as a camelCase name: three digit runs or fewer, and words
    (``Open``, ``AI``, ``o``, ``Deployment``) of 3.5 letters or more on average (a random
    token's capitals and lowercase letters mix in runs of 1 or 2), each pronounceable: an
    acronym of 4 capitals at most, other words with no 4 consonants in a row."""
    words = _CAMEL_WORD.findall(text)
    return (
        digit_runs <= 3
        and sum(map(len, words)) >= 3.5 * len(words)
        and all(
            len(word) <= 4 if word.isupper() and len(word) > 1 else not _CONSONANTS.search(word)
            for word in words
        )
    )


def _has_jwt(text: str) -> bool:
    """Whether ``text`` holds a JSON Web Token: two base64url parts of JSON (``eyJ...``,
    ``eyJ`` and 6 or more characters each) and a signature, joined by dots.

    Read part by part (each ``.``-separated part once): a regular expression
    searched from every ``eyJ`` of a long run took quadratic time.
    """
    parts = text.split(".")
    for at in range(len(parts) - 2):
        header = _NOT_BASE64URL.split(parts[at])[-1]  # (the token starts after any other text)
        start = header.find("eyJ")
        if 0 <= start <= len(header) - 9 and _JWT_PART.fullmatch(parts[at + 1]):
            return True
    return False


def _credential_pieces(pieces: list[str]) -> list[str]:
    """The names of the ``name=value`` pieces whose value may be a credential, once each."""
    named = (piece.partition("=") for piece in pieces if "=" in piece)
    return list(dict.fromkeys(name for name, _, value in named if _holds_credential(name, value)))


def value_held(value: str) -> list[str]:
    """What in ``value`` (an argument or ``env`` value) may be a credential, named without it.

    A URL in it with what `url_held` finds; ``user:password@host`` without a
    scheme; ``Bearer``/``Basic`` and a token; a token with a well-known
    prefix; a ``NAME=value`` assignment or a ``Name: value`` header (also
    in JSON) whose value may be a credential by its name. Empty: nothing.
    """
    held = [
        f"a URL with {' and '.join(found)}"
        for url in _URL.findall(value)
        if (found := url_held(url))
    ]
    rest = _URL.sub(" ", value)
    if _KNOWN_TOKEN.search(value):
        held.append("a token with a well-known prefix")
    if _AUTH_SCHEME_VALUE.search(rest):
        held.append("an Authorization header's value")
    for user, password in _BARE_USERINFO.findall(rest):
        if user.lower() not in _PACKAGE_SCHEMES and not _REFERENCE.fullmatch(password):
            held.append("a user:password@")
    for name, assigned in _ASSIGNMENT.findall(rest):
        if _holds_credential(name, assigned):
            held.append(f"the value of {name}=")
    for name, header in _HEADER.findall(rest):
        if _holds_credential(name, _SCHEME.sub("", header.strip(), count=1)):
            held.append(f"the value of header {name}")
    return list(dict.fromkeys(held))


def env_held(env: Mapping[str, str]) -> list[str]:
    """The ``env`` entries that may be credentials, by name and why, sorted (empty: none).

    An entry is one when its name makes its value a credential (a strong
    name, ``GITHUB_TOKEN``, or another credential-like name with a value that
    `looks_secret`), or its value holds what `value_held` finds. A value that
    is a URL alone is judged as a URL, whatever its name.
    """
    held = []
    for key, value in sorted(env.items()):
        if not _URL.fullmatch(value) and _holds_credential(key, value):
            held.append(f"{key} (named like a credential)")
        elif found := value_held(value):
            held.append(f"{key} ({', '.join(found)})")
    return held


#: Flags of the commands MCP servers are launched with that take no value, so that the
#: argument after one may name the server (`server_name`): npx's ``-y``, python's
#: ``-u``, uvx's ``-q``, docker's ``-i`` and ``--rm``.
_NO_VALUE_FLAGS = frozenset(
    {"-y", "--yes", "-q", "--quiet", "-u", "-B", "-E", "-I", "-i", "--interactive", "--rm"}
)

#: An argument that may name a server: a script or package (pip's ``name==1.0`` too), a
#: path, a module (``-m``).
_SERVER_ARGUMENT = re.compile(r"@?[A-Za-z0-9_.~/\\][A-Za-z0-9_.~/\\@:+-]*(?:==[A-Za-z0-9_.*+!-]+)?")


#: Flags of ``docker run`` (``podman run``) that take no value: the argument after one may
#: be the image (`server_name`); another flag's value (``-e``, ``-v``, ``--env``) is not.
_DOCKER_NO_VALUE_FLAGS = frozenset(
    {
        "--rm",
        "--interactive",
        "--tty",
        "--detach",
        "--init",
        "--privileged",
        "--read-only",
        "--publish-all",
        "--quiet",
        "--sig-proxy",
        "--oom-kill-disable",
        "--no-healthcheck",
    }
)
#: Short flags of ``docker run`` that take no value, alone or run together (``-it``).
_DOCKER_SHORT_FLAGS = re.compile(r"-[itdPq]+")
#: The folders whose folders are users' own (``/home/alice``, ``C:\Users\jdoe``): a
#: path's last part under one is a user's name, never shown (`server_name`).
_HOME_FOLDERS = frozenset({"home", "users"})

#: A run of hex digits as long as an API key's (32), which no script's name holds.
_HEX_RUN = re.compile(r"[0-9A-Fa-f]{32,}")

#: The longest default name shown before it is cut (`server_name`).
_NAME_SHOWN = 80


def server_name(command: str, args: Sequence[str]) -> str:
    """A stdio server's default name: ``command`` and the script, module or package it
    runs, so that two servers launched with one command (``python``, ``npx``, ``uvx``)
    are told apart.

    That argument is the first one after ``command`` and its flags that take no
    value (`_NO_VALUE_FLAGS`, ``npx -y``), or python's ``-m`` module
    (``python -m mcp_server_time``): ``npx @modelcontextprotocol/server-github``,
    ``python server.py``; for ``docker run`` (``podman run``), the image, the
    first argument that is no flag nor a flag's value (``-e NAME=value``, whose
    value is never shown): ``docker run ghcr.io/github/github-mcp-server``. A
    path is shown by its last part (``python server.py`` for
    ``/home/alice/server.py``: no user's name; a user's home folder, such as
    ``/home/alice/``, is not shown), as is ``command``. After
    another flag, which may take a value (``python -c CODE``, ``--token T``),
    no argument is taken; nor one that may be a credential (`args_held`) or
    has a token's shape (`token_shaped`, 32 hex digits), or one with white
    space or ``=``: the name is then ``command`` alone. A name is cut after
    `_NAME_SHOWN` characters.

    Example:
        >>> server_name("npx", ["-y", "@modelcontextprotocol/server-github"])
        'npx @modelcontextprotocol/server-github'
        >>> server_name("python", ["-m", "mcp_server_time"])
        'python -m mcp_server_time'
        >>> server_name("python", ["-c", "import server; server.main()"])
        'python'
    """
    from toolfold.toolkit._results import quoted

    program = _last_part(command) or command
    held = {at for at, _ in _held_args(args)}
    if program in ("docker", "podman") and args and args[0] == "run":
        image = _docker_image(args, held)
        return quoted(f"{program} run{f' {image}' if image else ''}", _NAME_SHOWN)
    module = False
    for at, arg in enumerate(args):
        if arg == "-m":
            module = True
            continue
        if arg in _NO_VALUE_FLAGS and not module:
            continue
        # a scoped package (@scope/name) is no path
        shown = arg if arg.startswith("@") else _last_part(arg)
        if (
            at in held
            or _users_folder(arg)
            or _SERVER_ARGUMENT.fullmatch(arg) is None
            or not _plain_name(shown)
        ):
            break
        return quoted(f"{program} {'-m ' if module else ''}{shown}", _NAME_SHOWN)
    return quoted(program, _NAME_SHOWN)


def _last_part(path: str) -> str:
    """The last part of a path (``/`` or ``\\`` between parts)."""
    return re.split(r"[/\\]", path.rstrip("/\\"))[-1]


def _users_folder(path: str) -> bool:
    """Whether ``path`` is a user's home folder (``/home/alice/``, ``C:\\Users\\jdoe``),
    whose last part is the user's name."""
    parts = [part for part in re.split(r"[/\\]", path) if part]
    return len(parts) >= 2 and parts[-2].lower() in _HOME_FOLDERS


def _plain_name(shown: str) -> bool:
    """Whether ``shown`` (a script, package, module, image) has no part that may be a
    token (`token_shaped`, `looks_random`, a long run of hex digits)."""
    return bool(shown) and not any(
        token_shaped(piece) or looks_random(piece) or _HEX_RUN.search(piece)
        for piece in re.split(r"[/\\@:]", shown)
    )


def _docker_image(args: Sequence[str], held: set[int]) -> str:
    """The image of ``docker run ...`` (``args[0]`` is ``run``): the first argument that
    is no flag nor a flag's value, without its ``@sha256:`` digest; empty when there is
    none, or it may be a credential or a token."""
    taken = False  # the argument before was a flag taking a value: this is its value
    for at, arg in enumerate(args[1:], 1):
        if taken:
            taken = False
            continue
        if arg.startswith("-"):
            taken = not (
                "=" in arg or arg in _DOCKER_NO_VALUE_FLAGS or _DOCKER_SHORT_FLAGS.fullmatch(arg)
            )
            continue
        image = arg.partition("@")[0]
        if at in held or _SERVER_ARGUMENT.fullmatch(image) is None or not _plain_name(image):
            return ""
        return image
    return ""


def args_held(args: Sequence[str]) -> list[str]:
    """The ``args`` that may be credentials, by position and why, in order (empty: none).

    An argument is one when it is a credential-like flag's value that may be a
    credential (as for `env_held`: ``--api-key sk-...``, ``--token=...``, not
    ``--auth none``, ``--skip-auth /data``, ``--token-env GITHUB_TOKEN``; and
    ``-k``'s, not strong: ``-k sk-abc``, not ``-k /x``), joined by ``=`` or the
    next argument unless that starts with ``-`` (but after a strong name,
    ``--password -hunter2``, one of no flag's shape, not ``-v``, ``--x``,
    ``-``, is the value; ``--no-...`` flags take none); or a
    password glued to ``-p`` (``-phunter2``; not ``-p8080``, ``-pR``,
    ``-print``); or a key glued to ``-k`` of a token's shape (``-ksk-abc``);
    or it holds what `value_held` finds
    (``postgresql://bob:pw@db/x``, ``-e GITHUB_TOKEN=ghp_...``).
    """
    return [f"args[{at}] ({why})" for at, why in _held_args(args)]


def _held_args(args: Sequence[str]) -> list[tuple[int, str]]:
    """`args_held`'s findings as (position, why) pairs."""
    held = []
    taken = -1  # the last argument taken as a flag's value: no flag for the next
    for at, arg in enumerate(args):
        flag, joined, value = arg.partition("=")
        before = args[at - 1] if at and taken != at - 1 else ""
        if arg.startswith("-") and joined and _flag_holds(flag, value):
            held.append((at, f"the value of {flag}"))
        elif _value_after(before, arg) and _flag_holds(before, arg):
            held.append((at, f"the value after {before}"))
            taken = at
        elif _glued_password(arg):
            held.append((at, "a password glued to -p"))
        elif _glued_key(arg):
            held.append((at, f"a key glued to {arg[:2]}"))
        elif found := value_held(value if arg.startswith("-") and joined else arg):
            held.append((at, ", ".join(found)))
    return held


def _value_after(flag: str, arg: str) -> bool:
    """Whether ``arg`` may be the value of the flag ``flag`` before it: not one joined
    by ``=``; one starting with ``-`` only after a strong name, and of no flag's shape."""
    if "=" in flag:
        return False
    if not arg.startswith("-"):
        return True
    return _FLAG_SHAPE.fullmatch(arg) is None and strong_name(_flag_name(flag))


def _flag_holds(flag: str, value: str) -> bool:
    """Whether ``value``, given to the flag ``flag``, may be a credential."""
    if flag in _KEY_SHORT_FLAGS:  # (a key file, a word, a host:port: no secret)
        return token_shaped(value.strip())
    return _holds_credential(_flag_name(flag), value)


def _glued_password(arg: str) -> bool:
    """Whether ``arg`` is a password glued to ``-p``: a value that `looks_secret`,
    does not read as the rest of a flag's name (`_FLAG_REST`), is no port and is
    not led by a variable reference."""
    found = _GLUED_PASSWORD.fullmatch(arg)
    if found is None:
        return False
    value = found[1]
    return (
        looks_secret(value)
        and _FLAG_REST.fullmatch(value) is None
        and _PORT_SPEC.fullmatch(value) is None
        and _REFERENCE_LED.match(value) is None
    )


def _glued_key(arg: str) -> bool:
    """Whether ``arg`` is a key glued to ``-k`` (``-kZv8Q...``, ``-ksk-abc``): its rest,
    without ``=``, has a token's shape as ``-k``'s value must (``-keep``, ``-kv`` have none)."""
    flag, rest = arg[:2], arg[2:]
    return flag in _KEY_SHORT_FLAGS and bool(rest) and "=" not in arg and token_shaped(rest.strip())


def _flag_name(arg: str) -> str:
    """The name of the flag ``arg`` (``api_key`` for ``--api-key``), empty when it is none."""
    name = arg.lstrip("-")
    if name == arg or name.lower().startswith("no-"):
        return ""
    return name
