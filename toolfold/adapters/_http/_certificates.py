"""The certificate checks of the clients a transport makes: one SSL context per settings.

Every backend reads the same variables when its client is made (at the first
call), with ``trust_env``: ``SSL_CERT_FILE`` names a PEM file of CA
certificates, ``SSL_CERT_DIR`` a directory of them. httpx and httpx2 take the
file alone when both are set (their own ``create_ssl_context``); aiohttp takes
both, with OpenSSL's default paths for an unset one, as its own context did. A
value that cannot be used is a `ModelConfigError` naming the variable and its
path, as a proxy variable that cannot be used is: it was httpx's bare
``FileNotFoundError`` or ``SSLError`` out of the call (a run's error saying to
resume it, which fails the same way), and aiohttp ignored it without a word.
An ``SSLKEYLOGFILE`` that cannot be opened is one naming that variable.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any

from toolfold._errors import ModelConfigError

__all__ = ["aiohttp_ssl_context", "shared_ssl_context"]

_SSL_CONTEXTS: dict[tuple[str | None, ...], Any] = {}


def shared_ssl_context(package: Any, trust_env: bool) -> Any:
    """The certificate checks of every client of ``package``'s toolfold makes: one SSL context.

    What the package's own client makes when given no ``verify`` (its
    ``create_ssl_context``: the system's or certifi's certificates, the ones
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name when ``trust_env``), made once
    per package and settings instead of once per client: 30-60 ms of CPU,
    which an async client's first call spent on the event loop. Made again
    when those variables change, or ``SSLKEYLOGFILE`` (read whatever
    ``trust_env``). True (the client makes its own) for a package without
    ``create_ssl_context``.

    Raises:
        ModelConfigError: The variable the certificates come from cannot be
            used (`_made`).
    """
    make = getattr(package, "create_ssl_context", None)
    if make is None:
        return True
    used = _certificates_variables(trust_env)[:1]  # (the file wins, as the package reads them)
    return _shared(package.__name__, trust_env, used, lambda: make(trust_env=trust_env))


def aiohttp_ssl_context(trust_env: bool) -> Any:
    """The SSL context of an aiohttp session toolfold makes: True (aiohttp's own) unless
    ``trust_env`` and ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` is set, then one made as
    aiohttp makes its own, now: OpenSSL's default paths, which take both variables
    (each in place of its default), with aiohttp's ALPN.

    aiohttp's own context is made when aiohttp is imported: it read the
    variables then, not when a model is made, and skipped a missing or
    unreadable one without a word (every call then failing its TLS check).
    What a variable names is loaded again, explicitly, so that a bad one is
    refused (`_made`).

    Raises:
        ModelConfigError: As `shared_ssl_context`.
    """
    used = _certificates_variables(trust_env)
    if not used:
        return True
    named = dict(used)

    def make() -> ssl.SSLContext:
        context = ssl.create_default_context()  # (as aiohttp's own: the default paths)
        context.load_verify_locations(named.get("SSL_CERT_FILE"), named.get("SSL_CERT_DIR"))
        context.set_alpn_protocols(("http/1.1",))  # (as aiohttp's own)
        return context

    return _shared("aiohttp", trust_env, used, make)


def _shared(
    name: str, trust_env: bool, used: list[tuple[str, str]], make: Callable[[], Any]
) -> Any:
    # The certificates' variables count only when ``trust_env``; the key log file
    # always: `ssl.create_default_context` reads ``SSLKEYLOGFILE`` whatever it is.
    key = (
        name,
        str(trust_env),
        *(os.environ.get(n) if trust_env else None for n in ("SSL_CERT_FILE", "SSL_CERT_DIR")),
        os.environ.get("SSLKEYLOGFILE"),
    )
    context = _SSL_CONTEXTS.get(key)
    if context is None:  # (two threads at once may each make one: either serves)
        context = _SSL_CONTEXTS[key] = _made(make, used)
    return context


def _certificates_variables(trust_env: bool) -> list[tuple[str, str]]:
    """The set certificates variables (an empty one is unset) and their values, the file first."""
    if not trust_env:
        return []
    return [(n, v) for n in ("SSL_CERT_FILE", "SSL_CERT_DIR") if (v := os.environ.get(n))]


def _made(make: Callable[[], Any], used: list[tuple[str, str]]) -> Any:
    """``make()``, an SSL context; a variable it cannot use is a `ModelConfigError`.

    ``used``: the certificates variables ``make`` reads. A file that is none
    (missing, a directory) and a directory that is none are refused before:
    OpenSSL takes a missing directory without a word, and every TLS check then
    fails. A file whose certificates do not load (not PEM, no certificate in
    it: ``NO_CERTIFICATE_OR_CRL_FOUND``; unreadable) is refused with OpenSSL's
    words: only the file is read when the context is made (a directory is read
    at each check). ``SSLKEYLOGFILE`` naming a file that cannot be opened (the
    standard library opens it) is refused naming it; another error is raised
    as it is.
    """
    for name, path in used:
        kind, exists = (
            ("file", os.path.isfile) if name == "SSL_CERT_FILE" else ("directory", os.path.isdir)
        )
        if not exists(path):
            raise ModelConfigError(_problem(name, path, f"which is no {kind}"))
    try:
        return make()
    except OSError as exc:  # ssl.SSLError is one
        said = f"{type(exc).__name__}: {exc.strerror or exc}" if exc.args else type(exc).__name__
        keys = os.environ.get("SSLKEYLOGFILE")
        if keys and exc.filename == keys and not isinstance(exc, ssl.SSLError):
            raise ModelConfigError(
                f"the HTTP client cannot use SSLKEYLOGFILE: it names {keys!r}, which cannot "
                f"be opened to append TLS keys to ({said}); point it at a file in a directory "
                "that exists and can be written, or unset it"
            ) from None
        files = [(n, p) for n, p in used if n == "SSL_CERT_FILE"]
        if not files or exc.filename not in (None, files[0][1]):
            raise
        raise ModelConfigError(
            _problem(*files[0], f"whose certificates cannot be loaded ({said})")
        ) from exc


def _problem(name: str, path: str, what: str) -> str:
    wanted = (
        "a PEM file of CA certificates"
        if name == "SSL_CERT_FILE"
        else "a directory of CA certificates (named by their hashes, as openssl rehash names them)"
    )
    return (
        f"the HTTP client cannot use the certificate settings in the environment: {name} "
        f"names {path!r}, {what}; point it at {wanted}, or unset it"
    )
