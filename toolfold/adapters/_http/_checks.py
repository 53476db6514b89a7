"""Checks of what a user configures for HTTP, made when the model is built.

A header value with CR, LF or NUL could smuggle a second header or request, and
another control character or a lone surrogate cannot be sent at all; a non-ASCII
value (``"Mon appli été"``) is sent UTF-8 encoded on every backend (aiohttp does
so itself; httpx encodes a text value as ASCII, so the backend gives it the
bytes), but a key with one (``api_key``, a `Secret` or a credential header's
value) is a paste error; a base URL without scheme or host fails only at the
first call; a framing header (``Content-Length``,
``Transfer-Encoding``...) is the client's to write. Each is a `ModelConfigError` naming the
option, raised before any connection is opened. Keys, header values (which may carry a
credential: ``api-key``, ``Authorization``) and a URL's password are never quoted.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Mapping

from toolfold._errors import ModelConfigError
from toolfold.adapters._http._keys import (
    Secret,
    mask_url,
    shown_userinfo,
    url_userinfo,
)
from toolfold.adapters._http._retry import HttpLimits
from toolfold.runtime._model import QUERY_HINT

__all__ = [
    "base_url_from_env",
    "check_base_url",
    "check_header_value",
    "check_header_name",
    "check_headers",
    "check_limits",
    "check_mapping",
    "check_url_credentials",
    "utf8_headers",
]

# RFC 9110 token characters: what a header name may contain.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # fullmatch: "$" would allow a final "\n"
_FORBIDDEN = re.compile(r"[\r\n\x00]")
# Any other control character but HTAB: outside RFC 9110's field-value. h11 refused
# some at send time (a "cannot reach" error, retried), aiohttp raised a bare
# ValueError, and DEL or \x01 were sent as they are. The C1 controls (U+0080-U+009F)
# too, now that non-ASCII text is sent (as UTF-8).
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


# Headers that frame the message on the connection: the client writes them for
# the body it sends. A user's Content-Length broke every request; with
# Transfer-Encoding the request went out with both, which RFC 9112 forbids.
_FRAMING = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer", "upgrade"}
)


def check_headers(headers: Mapping[str, str | Secret], option: str = "headers") -> None:
    """Refuse header names that are not tokens, framing headers, names given twice, bad values,
    and headers that are no mapping.

    A value may be a `Secret`. It is never quoted: a key read from a file
    ends with a newline, and the message showed it.
    """
    check_mapping(headers, option)
    seen: set[str] = set()
    for name, value in headers.items():
        check_header_name(name, option)
        folded = name.lower()
        if folded in _FRAMING:
            raise ModelConfigError(
                f"{option}: {name!r} is set by the transport for each request; remove it"
            )
        if folded in seen:
            raise ModelConfigError(
                f"{option}: {name!r} is given twice (header names ignore case); keep one"
            )
        seen.add(folded)
        # A credential (a Secret, or in a header that only ever holds one) is ASCII as
        # the api_key is: "sk-clé" was sent, where api_key= refused it. Not by the wide
        # rule that hides values (`is_credential_header`): Helicone-Session-Name or
        # x-portkey-metadata carry a user's text.
        revealed = value.reveal() if isinstance(value, Secret) else value
        credential = isinstance(value, Secret) or (
            isinstance(revealed, str) and not revealed.isascii() and folded in _CREDENTIALS
        )
        check_header_value(
            revealed,
            f"{option}[{name!r}]",
            secret=True,
            expected="a string or a Secret",
            ascii_only=", which a credential never has (was it copied with a typographic "
            "quote or a letter too many?)"
            if credential
            else "",
        )


#: Headers that only ever hold a credential: a value of them must be ASCII.
_CREDENTIALS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key"}
)


def check_header_name(name: object, option: str) -> None:
    """Refuse a header name that is not an RFC 9110 token (``'x a'``, ``'x:a'``, ``'x-clé'``)."""
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise ModelConfigError(f"{option}: {name!r} is not a valid HTTP header name")


def check_mapping(headers: object, option: str = "headers") -> None:
    """Refuse headers that are no mapping of names to values (a string, a list of pairs)."""
    if not isinstance(headers, Mapping):
        raise ModelConfigError(
            f"{option} must be a mapping of header names to values, e.g. "
            f"{{'x-team': 'a'}}, not {type(headers).__name__}"
        )


def check_limits(limits: object) -> None:
    """Refuse ``limits`` that are no `HttpLimits`."""
    if not isinstance(limits, HttpLimits):
        raise ModelConfigError(
            "limits must be an HttpLimits (toolfold.adapters.HttpLimits(max_connections=...)), "
            f"not {type(limits).__name__}"
        )


def check_header_value(
    value: object,
    option: str,
    *,
    secret: bool = False,
    expected: str = "a string",
    ascii_only: str = "",
) -> None:
    """Refuse a value with CR/LF/NUL, another control character or a lone surrogate, or not a string.

    A non-ASCII value is sent UTF-8 encoded (see `utf8_headers`); ``ascii_only``
    (why, ", which an API key never has") refuses it: a non-ASCII key was pasted
    wrong, and a header name is sent as ASCII.
    ``secret``: the message says "the value", not the value.
    """
    shown = "the value" if secret else repr(value)
    if not isinstance(value, str):
        raise ModelConfigError(f"{option}: {shown} must be {expected}, not {type(value).__name__}")
    if _FORBIDDEN.search(value):
        raise ModelConfigError(f"{option}: {shown} contains CR, LF or NUL, which HTTP forbids")
    if _CONTROL.search(value):
        raise ModelConfigError(
            f"{option}: {shown} contains a control character, which a header cannot carry"
        )
    if not value.isascii():
        if ascii_only:
            raise ModelConfigError(f"{option}: {shown} has non-ASCII characters{ascii_only}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ModelConfigError(
                f"{option}: {shown} has a lone surrogate (no Unicode character), which "
                "cannot be encoded to send"
            ) from None
    if value != value.strip():
        raise ModelConfigError(f"{option}: {shown} starts or ends with whitespace")


def utf8_headers(headers: Mapping[str, str]) -> Mapping[str, str | bytes]:
    """``headers`` with each non-ASCII value as its UTF-8 bytes (``headers`` itself when all are ASCII).

    What an httpx or httpx2 client is given: it encodes a text value as ASCII
    (a UnicodeEncodeError, every call failed) but sends bytes as they are;
    aiohttp encodes text values as UTF-8 itself. So ``"Mon appli été"`` goes out
    as the same bytes on every backend.
    """
    for value in headers.values():
        if not value.isascii():
            return {
                name: value if value.isascii() else value.encode("utf-8")
                for name, value in headers.items()
            }
    return headers


def check_base_url(url: object, option: str = "base_url") -> None:
    """Refuse a URL that is not ``http(s)://host[:port][/path]`` in printable ASCII.

    Request paths are joined to it as text, so a ``?query`` or ``#fragment``
    would end up before them (``POST /v1?x=1/chat/completions``); a ``%`` that
    starts no escape is read differently by each client; port 0 reaches no
    server; an empty URL is no URL (the provider's own is used when none is given).
    """
    if not isinstance(url, str):
        raise ModelConfigError(f"{option} must be a string, not {type(url).__name__}")
    if not url:
        raise ModelConfigError(
            f"{option} is empty: give the API root (http:// or https://), "
            "or leave it out for the provider's own"
        )
    shown = mask_url(url)  # a password in the URL is a secret
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        raise ModelConfigError(
            f"{option} {shown!r} has spaces, control or non-ASCII characters "
            "(write an international host in its xn-- form)"
        )
    # urllib's own messages are not quoted: the "port" it names may be a password
    # (``https://bob:pa/ss@host`` reads as host ``bob``, port ``pa``).
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        raise ModelConfigError(
            f"{option} {shown!r} is not a valid URL: its host is not closed by ']' "
            "or is not an IPv6 address in brackets"
        ) from None
    if url_userinfo(url) is None and shown_userinfo(url) is not None:
        raise ModelConfigError(
            f"{option} {shown!r} has an '@' after the end of its host part: a password "
            "holding '/', '?' or '#' must be percent-encoded ('%2F', '%3F', '%23'), "
            "as must an '@' in the path ('%40')"
        )
    try:
        port = parts.port
    except ValueError:
        raise ModelConfigError(
            f"{option} {shown!r} is not a valid URL: its port is not a number from 0 to 65535"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelConfigError(
            f"{option} {shown!r} must start with http:// or https:// and name a host"
        )
    if "#" in url:
        raise ModelConfigError(f"{option} {shown!r} must not have a #fragment")
    if "?" in url:
        raise ModelConfigError(
            f"{option} {shown!r} must not have a ?query: each request's path is added "
            "after the base URL and would land inside the query; a value the server also "
            f"reads from a header (a key: Azure's api-key) goes in headers=; {QUERY_HINT}"
        )
    if _BAD_ESCAPE.search(url):
        raise ModelConfigError(
            f"{option} {shown!r} has a % that is not followed by two hex digits "
            "(write a % itself as %25)"
        )
    if port == 0:
        raise ModelConfigError(f"{option} {shown!r} names port 0, where no server can be reached")


def base_url_from_env(variable: str) -> str | None:
    """The base URL the environment variable ``variable`` gives, checked as ``base_url=`` is.

    What an official SDK reads when no ``base_url`` is given
    (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``): a gateway's address, set
    for every client of a process. Unset or empty: None, the provider's own
    URL applies (an empty value is taken for none, as ``OLLAMA_HOST``'s is;
    the SDKs would send to the empty URL and fail).

    Raises:
        ModelConfigError: The value is no ``http(s)://host[:port][/path]``
            URL; the error names ``variable`` (`check_base_url`).
    """
    value = os.environ.get(variable)
    if not value:
        return None
    check_base_url(value, variable)
    return value


# A percent escape is "%" and two hex digits (RFC 3986 section 2.1).
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def check_url_credentials(url: str, sends_authorization: bool, option: str = "base_url") -> None:
    """Refuse ``user:password@`` in ``url`` when an ``Authorization`` header is sent too.

    ``option`` names where ``url`` came from (``base_url``, ``OPENAI_BASE_URL``).

    The clients turn URL credentials into a Basic ``Authorization`` header:
    httpx sent it in place of the key's, aiohttp refused the request with a
    bare ValueError. With the key in another header (``x-api-key``) or no key
    (a local Ollama behind a proxy), the credentials are sent and work.
    """
    if sends_authorization and url_userinfo(url) is not None:
        raise ModelConfigError(
            f"{option} carries user:password@, whose Basic credentials would take the "
            "Authorization header the API key is sent in: send them in a header "
            "(headers=) that your gateway reads, or leave them out"
        )
