"""The one ``flock`` step (`toolfold._flock`): locks tried once, files checked, replaced whole."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from toolfold import _flock


def test_try_lock_tells_locked_from_held_by_another(tmp_path: Path) -> None:
    """A free file is locked; one another open file holds is "held", at once, not waited for."""
    path = tmp_path / "f"
    path.write_text("x")
    first, second = os.open(path, os.O_RDWR), os.open(path, os.O_RDWR)
    try:
        assert _flock.try_lock(first) == "locked"
        assert _flock.try_lock(second) == "held"
    finally:
        os.close(first)
        os.close(second)


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EINVAL, errno.EBADF])
def test_try_lock_on_a_file_system_refusing_locks_says_no_lock(
    code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flock refused for another reason than a holder (ENOLCK, EINVAL...) is "no lock"."""

    def refused(handle: int, operation: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(fcntl, "flock", refused)
    handle = os.open(tmp_path, os.O_RDONLY)
    try:
        assert _flock.try_lock(handle) == "no lock"
    finally:
        os.close(handle)


def test_lock_named_gives_up_on_a_file_replaced_every_time(tmp_path: Path) -> None:
    """A path that names another file each time it is locked is tried ATTEMPTS times, then an
    EBUSY error naming the path; no descriptor is left open."""
    path = tmp_path / "run.json"
    path.write_text("0")
    opened: list[int] = []

    def opening() -> int:
        opened.append(os.open(path, os.O_RDWR))
        spare = tmp_path / "spare"
        spare.write_text(str(len(opened)))
        os.replace(spare, path)  # (another process's write-back, every time)
        return opened[-1]

    with pytest.raises(OSError, match="replaced by another process each of the 20 times") as info:
        _flock.lock_named(path, opening)
    assert (info.value.errno, info.value.filename) == (errno.EBUSY, str(path))
    assert len(opened) == _flock.ATTEMPTS
    for handle in opened:
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(handle)  # closed


def test_replace_locked_locks_the_new_file_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new file is already locked (by the descriptor returned) when it is renamed over the
    old one, and has the mode asked for."""
    path = tmp_path / "run.json"
    path.write_text("old")
    replacing = os.replace
    seen: list[tuple[str, int]] = []

    def renaming(source: Any, target: Any) -> None:
        probe = os.open(source, os.O_RDWR)
        try:
            seen.append((_flock.try_lock(probe), stat.S_IMODE(os.fstat(probe).st_mode)))
        finally:
            os.close(probe)
        replacing(source, target)

    monkeypatch.setattr(os, "replace", renaming)
    handle = _flock.replace_locked(path, b"new", 0o604)
    try:
        assert seen == [("held", 0o604)]
        assert path.read_bytes() == b"new"
        assert _flock.same_file(handle, path)
    finally:
        os.close(handle)


def test_replace_locked_failing_to_rename_removes_its_file_and_names_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rename that fails leaves the old file as it was, no temporary file, and an error
    naming the path replaced and the cause."""
    path = tmp_path / "run.json"
    path.write_text("old")

    def refused(source: Any, target: Any) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(_flock.NotReplaced, match="cross-device") as info:
        _flock.replace_locked(path, b"new", 0o644)
    assert (info.value.strerror, info.value.filename) == ("Invalid cross-device link", str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert path.read_text() == "old"


def test_replace_locked_does_not_replace_a_file_created_meanwhile(tmp_path: Path) -> None:
    """A new file (no mode) is put in place only if nothing is there yet: a file another process
    created meanwhile is left as it is, with no temporary file, and FileExistsError says so."""
    path = tmp_path / "run.json"
    path.write_text("created meanwhile")
    with pytest.raises(FileExistsError) as info:
        _flock.replace_locked(path, b"new", None)
    assert info.value.filename == str(path)
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert path.read_text() == "created meanwhile"


def test_replace_locked_creates_a_new_file_locked(tmp_path: Path) -> None:
    """A new file gets the content, 0o666 less the umask, and the lock of the descriptor returned."""
    path = tmp_path / "run.json"
    (tmp_path / "plain").touch()
    handle = _flock.replace_locked(path, b"new", None)
    probe = os.open(path, os.O_RDWR)
    try:
        assert path.read_bytes() == b"new"
        assert path.stat().st_mode == (tmp_path / "plain").stat().st_mode
        assert _flock.try_lock(probe) == "held"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["plain", "run.json"]
    finally:
        os.close(probe)
        os.close(handle)


def test_replace_locked_gives_the_new_file_its_mode_before_any_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 0o600 file's replacement is 0o600 from its first byte: mode set before data is written."""
    path = tmp_path / "run.json"
    path.write_text("secret old")
    path.chmod(0o600)
    writing = os.write
    seen: list[int] = []

    def write(handle: int, data: Any) -> int:
        seen.append(stat.S_IMODE(os.fstat(handle).st_mode))
        return writing(handle, data)

    os.umask(umask := os.umask(0o022))
    try:
        monkeypatch.setattr(os, "write", write)
        os.close(_flock.replace_locked(path, b"secret new", 0o600))
    finally:
        os.umask(umask)
    assert seen == [0o600]
    assert (path.read_bytes(), stat.S_IMODE(path.stat().st_mode)) == (b"secret new", 0o600)


def test_replace_locked_that_cannot_keep_the_owner_replaces_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An owner the new file cannot be given (fchown refused) raises NotReplaced, path unchanged."""
    path = tmp_path / "run.json"
    path.write_text("old")

    def refused(handle: int, uid: int, gid: int) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", refused)
    with pytest.raises(_flock.NotReplaced) as info:
        _flock.replace_locked(path, b"new", 0o660, (os.getuid() + 1, os.getgid()))
    assert (info.value.errno, info.value.filename) == (errno.EPERM, str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert path.read_text() == "old"


def test_replace_locked_on_a_full_disk_is_no_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails (ENOSPC) is a plain OSError, not NotReplaced: the old file is kept whole,
    not written in place."""
    path = tmp_path / "run.json"
    path.write_text("old")

    def full(handle: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space left") as info:
        _flock.replace_locked(path, b"new", 0o644)
    assert not isinstance(info.value, _flock.NotReplaced)
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_replace_locked_works_for_a_name_of_255_characters(tmp_path: Path) -> None:
    """The temporary name is short, so a file whose name is as long as allowed is replaced."""
    path = tmp_path / ("x" * 250 + ".json")
    path.write_text("old")
    os.close(_flock.replace_locked(path, b"new", 0o644))
    assert path.read_bytes() == b"new"


def test_write_in_place_truncates_writes_and_keeps_the_file(tmp_path: Path) -> None:
    """write_in_place leaves the same file (inode) holding only the new data."""
    path = tmp_path / "run.json"
    path.write_text("a longer old content")
    before = path.stat().st_ino
    handle = os.open(path, os.O_RDWR)
    try:
        os.lseek(handle, 5, os.SEEK_SET)
        _flock.write_in_place(handle, b"new")
    finally:
        os.close(handle)
    assert (path.read_bytes(), path.stat().st_ino) == (b"new", before)
