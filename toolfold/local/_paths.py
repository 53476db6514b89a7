"""Where the local server and its models live, and the lock that guards them.

Everything goes under one cache folder: the user's cache directory
(``platformdirs.user_cache_dir("toolfold")``, e.g. ``~/.cache/toolfold`` on
Linux), or ``$TOOLFOLD_CACHE_DIR`` when set. Nothing is written inside the
project or the Python environment, so every checkout and every virtualenv on a
machine shares one build.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from toolfold._errors import ModelConfigError
from toolfold._extras import optional

#: The environment variable that moves the cache folder.
CACHE_ENV = "TOOLFOLD_CACHE_DIR"
#: The environment variable naming a ``llama-server`` binary to use instead of building one.
SERVER_ENV = "TOOLFOLD_LLAMA_SERVER"

Progress = Callable[[str], object]


class LocalSetupError(ModelConfigError):
    """The local server could not be built, a model installed, or the server started.

    The message says which step failed and ends with the tail of that step's
    log (the compiler's, pip's or the server's own).
    """


def cache_dir() -> Path:
    """The cache folder: ``$TOOLFOLD_CACHE_DIR``, else the user's cache directory."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    platformdirs = _optional("platformdirs")
    return Path(platformdirs.user_cache_dir("toolfold", appauthor=False))


def _where() -> str:
    """Where the cache folder comes from, for an error."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return f"{CACHE_ENV}={override!r}"
    return f"the user's cache directory (set {CACHE_ENV} to use another folder)"


def cache_error(path: Path, exc: OSError) -> LocalSetupError:
    """The error of ``path`` in the cache folder that could not be made or written."""
    why = exc.strerror or str(exc)
    return LocalSetupError(
        f"cannot write {path} in the cache folder {cache_dir()} ({why}); the cache folder is "
        f"{_where()}: it must be a folder this process can create and write"
    )


def make_folder(path: Path) -> None:
    """Create ``path`` (a folder in the cache folder) and its parents, if missing.

    Raises:
        LocalSetupError: It cannot be: a file in its way, no such place, no
            permission (naming `CACHE_ENV` when that set it).
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cache_error(path, exc) from None


def damage(path: Path, *, executable: bool = False, size: int | None = None) -> str | None:
    """What makes ``path`` unusable as it stands, or None: missing, empty, not executable
    (an ``executable`` binary), or of another size than ``size`` (a cut download)."""
    try:
        found = path.stat().st_size
    except OSError as exc:
        return exc.strerror or str(exc)
    if found == 0:
        return "empty"
    if executable and not os.access(path, os.X_OK):
        return "not executable"
    if size is not None and found != size:
        return f"{found} bytes, expected {size}"
    return None


def remedy(path: Path) -> str:
    """What to do about a damaged ``path``: a file of the cache's own is deleted alone (the
    next use makes it again; `clean` would throw away the build and the models with it)."""
    own = os.environ.get(SERVER_ENV)
    if own and Path(own).expanduser() == path:
        return (
            f"point {SERVER_ENV} at a llama-server that runs, or unset it to use toolfold's "
            "build (`clean` and `build` leave that file alone)"
        )
    if path.is_relative_to(cache_dir()):
        if path.suffix == ".gguf":  # a model: `ensure_model` installs a missing one
            return f"delete {path}; the next use downloads and installs it again"
        return f"delete {path}; the next use (or `python -m toolfold.local build`) builds it again"
    return "replace it (it is not in toolfold's cache: `clean` and `build` leave it alone)"


def check_cache_dir() -> None:
    """Refuse a ``$TOOLFOLD_CACHE_DIR`` that cannot be a folder: it, or a folder above
    it, is something else (a file). Nothing is created; the default is not checked.

    Raises:
        LocalSetupError: It cannot, naming the variable and what is in the way.
    """
    if not os.environ.get(CACHE_ENV):
        return
    path = cache_dir()
    for place in (path, *path.parents):
        if place.is_dir():
            return
        if place.exists() or place.is_symlink():
            raise LocalSetupError(
                f"{CACHE_ENV}={os.environ[CACHE_ENV]!r} cannot be the cache folder: "
                f"{place} is not a folder; set {CACHE_ENV} to a folder"
            )


@contextlib.contextmanager
def locked(path: Path, progress: Progress, what: str) -> Iterator[None]:
    """Hold an exclusive file lock at ``path`` (other processes wait, and say so).

    Raises:
        LocalSetupError: The lock's folder cannot be created or the lock file
            written (`make_folder`).
    """
    filelock = _optional("filelock")
    make_folder(path.parent)
    lock = filelock.FileLock(str(path))
    try:
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            progress(f"waiting for another process that is {what} ({path})")
            lock.acquire()
    except OSError as exc:
        raise cache_error(path, exc) from None
    try:
        yield
    finally:
        lock.release()


def _optional(name: str) -> Any:
    return optional(name, "local", "the local: provider")
