"""The certificate checks of the clients a transport makes: one SSL context per settings.

Every backend reads the same variables the same way, when its client is made
(at the first call): with ``trust_env``, ``SSL_CERT_FILE`` names a PEM file
of CA certificates, else ``SSL_CERT_DIR`` a directory of them (as httpx's and
httpx2's own ``create_ssl_context`` read them, and curl and OpenSSL). A value
that cannot be used is a `ModelConfigError` naming the variable and its path,
as a proxy variable that cannot be used is: it was httpx's bare
``FileNotFoundError`` or ``SSLError`` out of the call (a run's error saying to
resume it, which fails the same way), and aiohttp ignored it without a word.
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
    return _shared(package.__name__, trust_env, lambda: make(trust_env=trust_env))


def aiohttp_ssl_context(trust_env: bool) -> Any:
    """The SSL context of an aiohttp session toolfold makes: True (aiohttp's own) unless
    ``trust_env`` and ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` is set, then one made from it
    as httpx makes it (the file winning over the directory), with aiohttp's ALPN.

    aiohttp's own context is made when aiohttp is imported, by OpenSSL's
    default paths: it read the variables then, not when a model is made, took
    ``SSL_CERT_DIR`` alongside ``SSL_CERT_FILE``, and skipped a missing or
    unreadable one without a word (every call then failing its TLS check).

    Raises:
        ModelConfigError: As `shared_ssl_context`.
    """
    used = _certificates_variable(trust_env)
    if used is None:
        return True
    name, path = used
    cafile, capath = (path, None) if name == "SSL_CERT_FILE" else (None, path)

    def make() -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=cafile, capath=capath)
        context.set_alpn_protocols(("http/1.1",))  # (as aiohttp's own)
        return context

    return _shared("aiohttp", trust_env, make)


def _shared(name: str, trust_env: bool, make: Callable[[], Any]) -> Any:
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
        context = _SSL_CONTEXTS[key] = _made(make, trust_env)
    return context


def _certificates_variable(trust_env: bool) -> tuple[str, str] | None:
    """The variable the certificates come from and its value (an empty one is unset), or None."""
    if not trust_env:
        return None
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        value = os.environ.get(name)
        if value:
            return name, value
    return None


def _made(make: Callable[[], Any], trust_env: bool) -> Any:
    """``make()``, an SSL context; a certificates variable it cannot use is a `ModelConfigError`.

    A file that is none (missing, a directory) and a directory that is none are
    refused before: OpenSSL takes a missing directory without a word, and
    every TLS check then fails. A file whose certificates do not load (not
    PEM, no certificate in it: ``NO_CERTIFICATE_OR_CRL_FOUND``) is refused
    with OpenSSL's words.
    """
    used = _certificates_variable(trust_env)
    if used is not None:
        name, path = used
        kind, exists = (
            ("file", os.path.isfile) if name == "SSL_CERT_FILE" else ("directory", os.path.isdir)
        )
        if not exists(path):
            raise ModelConfigError(_problem(name, path, f"which is no {kind}"))
    try:
        return make()
    except OSError as exc:  # ssl.SSLError is one
        if used is None:
            raise
        said = f"{type(exc).__name__}: {exc.strerror or exc}" if exc.args else type(exc).__name__
        raise ModelConfigError(
            _problem(*used, f"whose certificates cannot be loaded ({said})")
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
