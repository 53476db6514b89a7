"""The llama-server build: its compiler flags, its binary, the watchdog's report of a crash."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolfold.local import LocalSetupError, _build

WATCHDOG = Path(_build.__file__).with_name("_watchdog.py")


def _watch(code: str) -> tuple[int, str]:
    """Run ``python -c code`` under the watchdog, holding its stdin open (as its parent
    does) until it exits; its exit code and stderr."""
    proc = subprocess.Popen(
        [sys.executable, str(WATCHDOG), sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stderr is not None
    try:
        returncode = proc.wait(timeout=60)
        return returncode, proc.stderr.read()
    finally:
        proc.stdin.close()
        proc.stderr.close()


def test_the_build_leaves_amx_out_on_x86() -> None:
    """On x86, ``-march=native`` with the build's C++ flags defines no AMX macro (a VM may
    report AMX and fault on its first tile instruction); elsewhere no x86 flag is passed."""
    flags = _build.cmake_flags()
    assert all(flag in flags for flag in _build.CMAKE_FLAGS)
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        assert not any("amx" in flag for flag in flags)
        return
    (cxx_flags,) = [f for f in flags if f.startswith("-DCMAKE_CXX_FLAGS=")]
    compiler = shutil.which("c++") or shutil.which("g++")
    assert compiler is not None
    macros = subprocess.run(
        [
            compiler,
            *cxx_flags.split("=", 1)[1].split(),
            "-march=native",
            "-dM",
            "-E",
            "-x",
            "c++",
            "-",
        ],
        input="",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "__AMX_INT8__" not in macros
    assert "__AMX_TILE__" not in macros
    assert "__SSE2__" in macros  # the flags were read: -march=native still applies


def test_the_cached_binary_of_other_flags_is_not_reused() -> None:
    """The binary's folder names the flags' revision, so a build made with older flags is rebuilt."""
    assert _build.server_root().name == f"{_build.LLAMA_CPP_PYTHON}-{_build._FLAVOUR}"


def test_the_watchdog_says_when_its_server_crashed() -> None:
    """A server killed by a signal is named in the log, and the watchdog exits cleanly with 128+N."""
    returncode, stderr = _watch("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert returncode == 128 + 11
    assert "died of SIGSEGV" in stderr
    assert "Fatal Python error" not in stderr


def test_the_watchdog_passes_on_a_clean_exit_code() -> None:
    """A server that exits by itself passes its exit code through, with nothing in the log."""
    assert _watch("raise SystemExit(3)") == (3, "")


def test_the_watchdog_names_a_signal_without_a_name_by_its_number() -> None:
    """A real-time signal (no name in ``signal.Signals``) is reported by number (review finding)."""
    import signal

    number = signal.SIGRTMIN + 2
    returncode, stderr = _watch(f"import os; os.kill(os.getpid(), {number})")
    assert returncode == 128 + number
    assert f"died of signal {number}" in stderr
    assert "Fatal Python error" not in stderr


def _fake_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, makes: str | None
) -> tuple[Path, Path]:
    """`_build._build` on simulated Windows with cmake, ninja and a compiler faked: the
    compile writes ``build/bin/<makes>`` (nothing when None). The root and the build folder."""
    monkeypatch.setenv("TOOLFOLD_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TOOLFOLD_LLAMA_SERVER", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: f"/fake/{name}")
    root = _build.server_root()
    build = root / "work" / "build"
    (root / "work" / "src").mkdir(parents=True)
    (root / "work" / "src" / "CMakeLists.txt").write_text("", encoding="utf-8")

    def compile(build: Path, log: Path, progress: object) -> None:
        if makes is not None:
            (build / "bin").mkdir(parents=True)
            (build / "bin" / makes).write_bytes(b"MZ")

    monkeypatch.setattr(_build, "_run", lambda command, log, what: None)
    monkeypatch.setattr(_build, "_compile", compile)
    monkeypatch.setattr(sys, "platform", "win32")
    return root, build


def test_the_build_on_windows_finds_llama_server_exe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On Windows the built ``llama-server.exe`` is the binary kept and found again (the
    build looked for ``llama-server`` and ended in a FileNotFoundError)."""
    root, _ = _fake_build(monkeypatch, tmp_path, "llama-server.exe")
    binary = _build._build(root, lambda line: None)
    assert binary == root / "llama-server.exe"
    assert binary.read_bytes() == b"MZ"
    assert _build.built_binary() == binary


def test_a_build_that_made_no_binary_is_a_local_setup_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A build that ends without the binary raises a LocalSetupError naming the missing file,
    not a bare FileNotFoundError."""
    root, build = _fake_build(monkeypatch, tmp_path, None)
    with pytest.raises(LocalSetupError) as info:
        _build._build(root, lambda line: None)
    assert str(build / "bin" / "llama-server.exe") in str(info.value)
