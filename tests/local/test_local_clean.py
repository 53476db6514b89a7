"""``toolfold local`` clean says what it did (removed, nothing to remove, what is left); its
commands end without a traceback (no local extra, a reader gone)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolfold.local import CACHE_ENV
from toolfold.local.__main__ import main


def test_clean_removes_the_cache_folder_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache folder with files in it is removed, and ``removed PATH`` is printed."""
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    (cache / "models" / "m.gguf").write_text("weights")
    monkeypatch.setenv(CACHE_ENV, str(cache))
    assert main(["clean"]) == 0
    assert capsys.readouterr().out == f"removed {cache}\n"
    assert not cache.exists()


def test_clean_with_no_cache_folder_says_there_is_nothing_to_remove(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache folder that does not exist is not claimed removed: exit 0, nothing to remove."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "missing"))
    assert main(["clean"]) == 0
    assert capsys.readouterr().out == f"nothing to remove at {tmp_path / 'missing'}\n"


def test_clean_of_a_cache_path_that_is_a_file_is_an_error_and_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache path naming a file exits 1 saying it is not a folder, and leaves the file."""
    afile = tmp_path / "afile"
    afile.write_text("data")
    monkeypatch.setenv(CACHE_ENV, str(afile))
    assert main(["clean"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"error: the cache folder {afile} is not a folder (a file or a link): nothing removed; "
        f"set {CACHE_ENV} to a folder, or remove it yourself\n"
    )
    assert afile.read_text() == "data"


def test_clean_that_cannot_remove_a_file_names_it_and_what_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that cannot be deleted exits 1 naming it and counting what is left, not ``removed``."""
    cache = tmp_path / "cache"
    (cache / "bin").mkdir(parents=True)
    (cache / "bin" / "kept").write_text("busy")
    (cache / "gone").write_text("x")
    unlink = os.unlink

    def refusing(path: Any, *args: Any, **kwargs: Any) -> None:
        if os.fspath(path).endswith("kept"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refusing)
    monkeypatch.setenv(CACHE_ENV, str(cache))
    assert main(["clean"]) == 1
    captured = capsys.readouterr()
    assert "removed" not in captured.out
    assert captured.err.startswith(
        f"error: could not remove all of {cache}: 2 file(s) and folder(s) left in it; 1 failed: "
    )
    assert "kept: Permission denied" in captured.err
    assert (cache / "bin" / "kept").exists()
    assert not (cache / "gone").exists()


def test_clean_of_a_cache_path_that_is_a_link_to_a_folder_keeps_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache path that is a link to a folder exits 1 and removes nothing: the link stays, and
    so does everything in the folder it points to (with or without a trailing slash)."""
    target = tmp_path / "target"
    (target / "models").mkdir(parents=True)
    (target / "models" / "m.gguf").write_text("weights")
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    for given in (str(link), f"{link}/"):
        monkeypatch.setenv(CACHE_ENV, given)
        assert main(["clean"]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert "is not a folder (a file or a link): nothing removed" in captured.err
        assert link.is_symlink()
        assert (target / "models" / "m.gguf").read_text() == "weights"


@pytest.mark.parametrize("command", ["status", "serve", "build", "clean"])
def test_a_local_command_without_the_local_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Without the local extra (platformdirs), ``toolfold local CMD`` says what to install
    and exits 1 (it ended in a ModelConfigError traceback)."""
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.delenv("TOOLFOLD_LLAMA_SERVER", raising=False)
    monkeypatch.setitem(sys.modules, "platformdirs", None)  # what Python does for a missing module
    assert main([command]) == 1
    assert capsys.readouterr().err == (
        "error: the local: provider needs 'platformdirs': pip install 'toolfold[local]'\n"
    )


def test_status_into_a_pipe_whose_reader_went_away_exits_141(tmp_path: Path) -> None:
    """``toolfold local status | head -1`` with the reader gone exits 141 with nothing on
    stderr, as the other commands do (it printed a BrokenPipeError traceback, exit 1)."""
    root = Path(__file__).resolve().parents[2]
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "toolfold._cli", "local", "status"],
            stdout=write,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env={**os.environ, CACHE_ENV: str(tmp_path), "PYTHONPATH": str(root)},
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_status_into_a_cp1252_or_closed_stdout_ends_without_a_traceback(tmp_path: Path) -> None:
    """``toolfold local status`` with a cache path a cp1252 stdout cannot write exits 0
    with it escaped; into a closed stdout it says so and exits 1 (both were tracebacks)."""
    root = Path(__file__).resolve().parents[2]
    cache = tmp_path / "cache\u2713"
    env = {**os.environ, CACHE_ENV: str(cache), "PYTHONPATH": str(root)}
    command = [sys.executable, "-m", "toolfold._cli", "local", "status"]
    cp1252 = subprocess.run(
        command,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env={**env, "PYTHONIOENCODING": "cp1252"},
        timeout=60,
    )
    assert cp1252.returncode == 0, cp1252.stderr
    assert cp1252.stdout.decode("ascii").startswith(f"cache:        {tmp_path}/cache\\u2713\n")
    closed = subprocess.run(
        command,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(1),
    )
    assert (closed.returncode, closed.stderr) == (
        1,
        "toolfold local: cannot write to stdout: stdout is closed\n",
    )


def test_clean_into_a_cp1252_stdout_escapes_what_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``clean`` of a cache path with a character cp1252 lacks removes it and says so,
    escaped, exit 0 (it removed the folder, then failed with a UnicodeEncodeError)."""
    cache = tmp_path / "cache\u2713"
    cache.mkdir()
    monkeypatch.setenv(CACHE_ENV, str(cache))
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(["clean"]) == 0
    assert stdout.buffer.getvalue() == f"removed {tmp_path}/cache\\u2713\n".encode()
    assert not cache.exists()
