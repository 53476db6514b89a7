"""What an MCP server's agent-file entry must not hold: what may be a credential.

An agent file is text that gets shared, so `MCPServer.file_entry` refuses a
server holding what may be a credential. The functions here find it and name
it, and where it is, never its value: the refusal is an error message, shown
and logged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from toolfold.adapters._http._keys import url_userinfo


def url_held(url: str) -> list[str]:
    """What in ``url`` may be a credential, each named without its value (empty: nothing).

    Read as `mask_url_credentials` masks it: the ``user:password@``, the
    query values (named by their parameters; a piece without ``=`` is itself
    the value, ``?sk-...``, so it is only counted), and the fragment.
    """
    held = ["a user:password@"] if url_userinfo(url) is not None else []
    head, _, fragment = url.partition("#")
    pieces = [piece for piece in head.partition("?")[2].split("&") if piece]
    names = [piece.partition("=")[0] for piece in pieces if "=" in piece]
    bare = len(pieces) - len(names)
    if pieces:
        shown = [*names, f"{bare} without a name"] if bare else names
        held.append(f"query values ({', '.join(shown)})")
    if fragment:
        held.append("a fragment")
    return held


#: An environment variable named like a credential: a stdio server's ``env``
#: entry so named is not written to an agent file. Leaning to refuse: ``KEY``
#: also takes ``KEYBOARD_LAYOUT``, a name easily changed, while a token written
#: to a file is out for good. ``AUTHOR`` and ``AUTHORS`` (``GIT_AUTHOR_NAME``)
#: are not one; ``AUTHORIZATION`` (``HTTP_AUTHORIZATION``) is. ``PWD`` is one
#: only as a part of a longer name (``DB_PWD``, ``MYSQL_PWD``): alone, and in
#: ``OLDPWD``, it is the shell's working directory.
CREDENTIAL_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASS|CRED|COOKIE|BEARER|AUTH(?!ORS?(?:_|$))"
    r"|(?<=_)PWD(?![^_])|^PWD_|(?:^|_)PAT(?:_|$)",
    re.IGNORECASE,
)

#: A value that is an HTTP ``Authorization`` header's (``Bearer sk-...``,
#: ``Basic dXNl...``) or holds the header (``Authorization: Bearer ...``, as
#: ``mcp-remote --header`` takes it).
_AUTHORIZATION_VALUE = re.compile(r"\s*(?:Bearer|Basic)\s+\S|.*Authorization\s*:", re.IGNORECASE)

#: A URL inside a value: ``https://h/x?api_key=...``, also within a longer text
#: (``jdbc:postgresql://db/x?password=...``, ``--db=postgres://bob:pw@db/x``).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")


def value_held(value: str) -> list[str]:
    """What in ``value`` may be a credential, named without it (empty: nothing).

    An ``Authorization`` header's value (``Bearer ...``, ``Basic ...``), or
    a URL in it with what `url_held` finds (a ``user:password@``, query
    values, a fragment), as for an HTTP server's URL.
    """
    if _AUTHORIZATION_VALUE.match(value):
        return ["an Authorization header's value"]
    held = [
        f"a URL with {' and '.join(found)}"
        for url in _URL.findall(value)
        if (found := url_held(url))
    ]
    return list(dict.fromkeys(held))


def env_held(env: Mapping[str, str]) -> list[str]:
    """The ``env`` entries that may be credentials, by name and why, sorted (empty: none).

    An entry is one when its name is like a credential's (`CREDENTIAL_NAME`),
    or its value holds what `value_held` finds.
    """
    held = []
    for key, value in sorted(env.items()):
        if CREDENTIAL_NAME.search(key):
            held.append(f"{key} (named like a credential)")
        elif found := value_held(value):
            held.append(f"{key} ({', '.join(found)})")
    return held


def args_held(args: Sequence[str]) -> list[str]:
    """The ``args`` that may be credentials, by position and why, in order (empty: none).

    An argument is one when it is the value of a flag named like a credential
    (``--api-key sk-...``, ``--token=...``; not ``--no-auth``, and not a next
    argument that is itself a flag), or it holds what `value_held` finds
    (``postgresql://bob:pw@db/x``).
    """
    held = []
    for at, arg in enumerate(args):
        flag, joined, value = arg.partition("=")
        before = args[at - 1] if at else ""
        if joined and value and _credential_flag(flag):
            held.append(f"args[{at}] (the value of {flag})")
        elif found := value_held(arg):
            held.append(f"args[{at}] ({', '.join(found)})")
        elif not arg.startswith("-") and "=" not in before and _credential_flag(before):
            held.append(f"args[{at}] (the value after {before})")
    return held


def _credential_flag(arg: str) -> bool:
    """Whether ``arg`` is a flag named like a credential (``--api-key``, ``--password``)."""
    name = arg.lstrip("-")
    if name == arg or name.lower().startswith("no-"):
        return False
    return CREDENTIAL_NAME.search(name.replace("-", "_")) is not None
