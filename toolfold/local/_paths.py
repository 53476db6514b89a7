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


@contextlib.contextmanager
def locked(path: Path, progress: Progress, what: str) -> Iterator[None]:
    """Hold an exclusive file lock at ``path`` (other processes wait, and say so)."""
    filelock = _optional("filelock")
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        progress(f"waiting for another process that is {what} ({path})")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _optional(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise ModelConfigError(
            f"the local: provider needs {name!r}: pip install 'toolfold[local]'"
        ) from None
