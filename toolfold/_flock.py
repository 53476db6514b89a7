"""Whole-file ``flock`` locks, taken without waiting, and files replaced whole under them.

Used by the CLI's run files (`toolfold._commands`) and the local model's server
logs (`toolfold.local._server`). A lock is an exclusive ``flock`` on an open
file (its inode), tried once: `try_lock` says whether it was taken, held by
another process, or cannot be had at all (Windows, a file system refusing locks).

A file replaced by a rename is a new inode, so a lock on the old one no longer
guards what the path names. `lock_named` therefore locks, then checks the path
still names the file locked (`same_file`), and tries again with the new file if
not; `replace_locked` locks the new file before renaming it into place. Why that
keeps two processes from both holding "the" file, see `lock_named`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
from collections.abc import Callable
from typing import Literal

if sys.platform != "win32":
    import fcntl

Taken = Literal["locked", "held", "no lock"]
"""What `try_lock` got: the lock; none, as another process holds it; none to be had."""

#: How often `lock_named` tries again when the path keeps naming another file: each
#: try means another process replaced the file meanwhile, so this many in a row is
#: no race but a file being rewritten all the time (or not through these locks).
ATTEMPTS = 20


def try_lock(handle: int) -> Taken:
    """Take the exclusive ``flock`` of the file open at ``handle``, without waiting.

    Args:
        handle: An open descriptor; NFS and CIFS (which emulate ``flock`` with
            POSIX locks) lock only a file opened for writing.

    Returns:
        ``"locked"`` when taken; ``"held"`` when another open file description
        holds it (EWOULDBLOCK / EAGAIN); ``"no lock"`` on Windows, or when the
        file system refuses locks (ENOLCK, EINVAL, EOPNOTSUPP...).
    """
    if sys.platform == "win32":
        return "no lock"
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return "held" if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN) else "no lock"
    return "locked"


def same_file(handle: int, path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (symlinks followed) names the file open at ``handle`` (device and inode).

    False when either cannot be looked at (``path`` gone, say).
    """
    try:
        return os.path.samestat(os.fstat(handle), os.stat(path))
    except OSError:
        return False


def lock_named(path: str | os.PathLike[str], open_file: Callable[[], int]) -> tuple[int, Taken]:
    """Open ``path`` (with ``open_file``) and lock it, until the file locked is the one it names.

    Returns the descriptor and `try_lock`'s answer; on ``"held"`` and ``"no lock"``
    the descriptor is returned as opened (the caller closes it). ``open_file``'s
    errors are raised as they are.

    Why a lock taken and then found still named by ``path`` is the file's only
    holder: every writer (`replace_locked`'s callers) replaces the file ``path``
    names only while it holds that file's lock, and locks the new file before it
    is renamed into place, holding both until it ends. A process that opened the
    old file just before the rename cannot take its lock until that writer has
    ended; by then ``path`` names the new file, so the check fails and it tries
    again, on the new file (whose lock the writer held until it ended, so what it
    reads there is the writer's whole state). A process whose check succeeds holds
    the lock of the file ``path`` names, so no writer can replace that file until
    it lets go. The inode of the old file cannot be reused for another while it is
    still open here, so the comparison cannot be fooled by a recycled number.

    Raises:
        OSError: ``path`` named another file on each of `ATTEMPTS` tries (EBUSY),
            saying so.
    """
    for _ in range(ATTEMPTS):
        handle = open_file()
        taken = try_lock(handle)
        if taken != "locked" or same_file(handle, path):
            return handle, taken
        os.close(handle)  # (replaced since it was opened: try the file named now)
    raise OSError(
        errno.EBUSY,
        f"it was replaced by another process each of the {ATTEMPTS} times it was locked",
        os.fspath(path),
    )


def replace_locked(path: str | os.PathLike[str], data: bytes, mode: int | None) -> int:
    """Put a new file holding ``data`` at ``path`` whole, in one rename, and lock it first.

    The data go to a new file in ``path``'s folder, which is flushed to disk
    (``fsync``), locked (`try_lock`, where locks can be had) and given its mode
    before ``os.replace`` renames it over ``path``; the folder is then synced
    where the system allows. So ``path`` names the old file whole or the new one
    whole, whatever stops the write (a full disk, Ctrl-C, ``kill -9``); on an
    error the new file is removed (``kill -9`` alone can leave it behind, named
    ``.NAME.*.tmp``) and the old one is as it was.

    Args:
        path: The file to replace, or to create; not a symlink (give its target).
        data: The whole new content.
        mode: The new file's permission bits (the old file's, to keep them); None
            for a new file: ``0o666`` less the umask, as ``open`` would create it,
            put in place only if ``path`` still does not exist (a hard link, then
            the temporary name removed; where the file system has no hard links,
            a rename), so a file another process created meanwhile, which it may
            hold locked, is not replaced unlocked.

    Returns:
        The new file's descriptor, which holds its lock: keep it open as long as
        the file must stay held (then close it); -1 on Windows, where it is closed
        (a file open there cannot be renamed).

    Raises:
        FileExistsError: ``mode`` is None and ``path`` exists by now (lock it, then
            replace it).
        OSError: The new file cannot be created, written, synced or renamed;
            ``filename`` is ``path``.
    """
    folder, name = os.path.split(os.fspath(path))
    while True:
        temporary = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            # (0o666 and O_EXCL, as open(path, "x") does: the umask and the folder's
            # default ACL apply to a new file, as they did to one written in place)
            handle = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise _naming(exc, path) from exc
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(handle, view) :]
        os.fsync(handle)
        if mode is not None and stat.S_IMODE(os.fstat(handle).st_mode) != mode:
            os.chmod(handle if sys.platform != "win32" else temporary, mode)
        try_lock(handle)  # (a new file, so never held; else "no lock": unlocked)
        if sys.platform == "win32":
            os.close(handle)
            handle = -1
        if mode is None and _linked(temporary, path):
            os.unlink(temporary)
        else:
            os.replace(temporary, path)
    except BaseException as exc:
        if handle >= 0:
            os.close(handle)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise _naming(exc, path) from exc
        raise
    _sync_folder(folder)
    return handle


def _sync_folder(folder: str) -> None:
    """Flush ``folder``'s entries (the rename) to disk, where a folder can be opened and synced."""
    if sys.platform == "win32":
        return
    with contextlib.suppress(OSError):
        handle = os.open(folder or ".", os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)


def _naming(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """``exc`` about ``path`` (not the temporary file it happened to)."""
    return OSError(exc.errno, exc.strerror or str(exc), os.fspath(path))


#: What ``link`` fails with on a file system without hard links (FAT, some network
#: file systems), where a new file is renamed into place instead.
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK}


def _linked(temporary: str, path: str | os.PathLike[str]) -> bool:
    """Hard-link ``temporary`` at ``path`` if nothing is there; False where links cannot be made.

    Raises:
        FileExistsError: Something is at ``path``.
    """
    try:
        os.link(temporary, path)
    except OSError as exc:
        if exc.errno in _NO_LINKS:
            return False
        raise
    return True
