"""Whole-file ``flock`` locks, taken without waiting, and files replaced whole under them.

Used by the CLI's run files (`toolfold._run_files`, `toolfold._session`) and
the local model's server logs (`toolfold.local._server`). A lock is an
exclusive ``flock`` on an open file (its inode), tried once: `try_lock` says
whether it was taken, held by another process, or cannot be had at all
(Windows, a file system refusing locks).

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


class NotReplaced(OSError):
    """`replace_locked` could not put a new file at the path; nothing there was changed.

    Raised when the new file cannot be made in the path's folder (not writable, a
    name too long, a read-only file system), cannot be given the old file's owner
    and group, or cannot be renamed (or linked) into place (a bind-mounted file,
    EBUSY; a sticky folder, EPERM; another file system, EXDEV). The caller may write
    the file in place instead (`write_in_place`). Its ``filename`` is the path.
    """


#: Errors of making the new file, giving it its owner, or renaming it into place that
#: mean it cannot be put there at all (`NotReplaced`), not that the disk failed.
_CANNOT_REPLACE = {
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
    errno.EBUSY,
    errno.EXDEV,
    errno.ENAMETOOLONG,
    errno.EINVAL,
    errno.EOPNOTSUPP,
    errno.ENOTSUP,
    errno.ENOSYS,
    errno.ETXTBSY,
}


def replace_locked(
    path: str | os.PathLike[str],
    data: bytes,
    mode: int | None,
    owner: tuple[int, int] | None = None,
) -> int:
    """Put a new file holding ``data`` at ``path`` whole, in one rename, and lock it first.

    The new file is made in ``path``'s folder (named ``.toolfold-HEX.tmp``, short, so
    a long ``path`` name still fits), given ``owner`` and its final mode before any
    data is written to it (a private file's data are never readable by others, not
    even for a moment), written, flushed to disk (``fsync``), locked (`try_lock`,
    where locks can be had) and then renamed over ``path``; the folder is then
    synced where the system allows. So ``path`` names the old file whole or the new
    one whole, whatever stops the write (a full disk, an exception, ``kill -9``); on
    an error the new file is removed (``kill -9`` alone can leave it behind) and the
    old one is as it was.

    Args:
        path: The file to replace, or to create; not a symlink (give its target).
        data: The whole new content.
        mode: The new file's permission bits (the old file's, to keep them); None
            for a new file: ``0o666`` less the umask, as ``open`` would create it,
            put in place only if ``path`` still does not exist (a hard link, then
            the temporary name removed; where the file system has no hard links,
            a rename), so a file another process created meanwhile, which it may
            hold locked, is not replaced unlocked.
        owner: The user and group ids the new file must have (the old file's, to
            keep them); None for whatever a new file gets. Ignored on Windows.

    Returns:
        The new file's descriptor, which holds its lock: keep it open as long as
        the file must stay held (then close it); -1 on Windows, where it is closed
        (a file open there cannot be renamed).

    Raises:
        FileExistsError: ``mode`` is None and ``path`` exists by now (lock it, then
            replace it).
        NotReplaced: The new file cannot be made, given ``owner``, or put in place
            (see `NotReplaced`); ``path`` is unchanged.
        OSError: The new file cannot be written or synced (a full disk); ``path``
            is unchanged; ``filename`` is ``path``.
    """
    folder = os.path.dirname(os.fspath(path))
    handle, temporary = -1, ""
    step = "make"  # (what failed, for `NotReplaced`: make, own, put)
    try:
        while handle < 0:
            temporary = os.path.join(folder, f".toolfold-{secrets.token_hex(4)}.tmp")
            try:
                # (O_EXCL, as open(path, "x") does; a new file gets 0o666, so the umask
                # and the folder's default ACL apply, as they did to one written in place;
                # one replacing another gets 0o600, then the old file's mode below)
                handle = os.open(
                    temporary,
                    os.O_RDWR | os.O_CREAT | os.O_EXCL,
                    0o666 if mode is None else 0o600,
                )
            except FileExistsError:
                continue
        step = "own"
        if owner is not None and sys.platform != "win32":
            found = os.fstat(handle)
            if (found.st_uid, found.st_gid) != owner:
                os.fchown(handle, *owner)
        step = "write"
        if mode is not None and stat.S_IMODE(os.fstat(handle).st_mode) != mode:
            os.chmod(handle if sys.platform != "win32" else temporary, mode)
        write_all(handle, data)
        os.fsync(handle)
        try_lock(handle)  # (a new file, so never held; else "no lock": unlocked)
        if sys.platform == "win32":
            os.close(handle)
            handle = -1
        step = "put"
        if mode is None and _linked(temporary, path):
            os.unlink(temporary)
        else:
            os.replace(temporary, path)
    except BaseException as exc:
        if handle >= 0:
            os.close(handle)
        if temporary:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        if isinstance(exc, OSError):  # (FileExistsError stays one: OSError(EEXIST) is)
            kind = NotReplaced if step != "write" and exc.errno in _CANNOT_REPLACE else OSError
            raise kind(exc.errno, exc.strerror or str(exc), os.fspath(path)) from exc
        raise
    _sync_folder(folder)
    return handle


def write_all(handle: int, data: bytes) -> None:
    """Write all of ``data`` at ``handle``'s offset (``os.write`` may write part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]


def write_in_place(handle: int, data: bytes) -> None:
    """Make the regular file open (for writing) at ``handle`` hold ``data``: truncated, written, synced.

    Not whole whatever stops it (a full disk or ``kill -9`` mid-write leaves part of
    ``data``): for a file `replace_locked` cannot replace (`NotReplaced`). Written
    through ``handle`` itself, so the file it holds locked is the one written.
    """
    os.ftruncate(handle, 0)
    os.lseek(handle, 0, os.SEEK_SET)
    write_all(handle, data)
    os.fsync(handle)


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
