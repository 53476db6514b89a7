"""Build llama.cpp's ``llama-server`` once per machine, from the source on PyPI.

The source package of ``llama-cpp-python`` vendors llama.cpp; only its
``llama-server`` target is built (CMake + Ninja, a static binary, no web UI, no
TLS), so nothing prebuilt is ever downloaded. The binary is cached under
`cache_dir`; a file lock makes a second process wait for the first build
instead of starting its own.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from toolfold.local._paths import SERVER_ENV, LocalSetupError, Progress, cache_dir, locked

#: The ``llama-cpp-python`` source release whose vendored llama.cpp is built.
LLAMA_CPP_PYTHON = "0.3.36"
#: Only the server; a static binary with no tests, examples, bundled UI or OpenSSL.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
)
#: llama.cpp compiles for the build machine's CPU (``-march=native``). On x86 that
#: includes Intel AMX where the CPU reports it, but a virtual machine may report
#: AMX and not let a process use it: the server then dies of SIGSEGV at its first
#: matrix product (``ldtilecfg``; seen on a Sapphire Rapids VM). AMX only speeds up
#: large batches, so it is left out; an ``-mno-`` flag wins over ``-march=native``
#: in GCC and Clang whatever their order.
_NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
#: Bumped whenever the flags above change, so a binary built with the old ones is
#: not reused from the cache.
_FLAVOUR = "2"
_VENDORED = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/"


def server_root() -> Path:
    """The folder holding this version's binary (and its build while it runs)."""
    return cache_dir() / "llama-server" / f"{LLAMA_CPP_PYTHON}-{_FLAVOUR}"


def cmake_flags() -> list[str]:
    """The CMake options of the build on this machine."""
    flags = list(CMAKE_FLAGS)
    if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686"):
        flags += [f"-DCMAKE_C_FLAGS={_NO_AMX}", f"-DCMAKE_CXX_FLAGS={_NO_AMX}"]
    return flags


def built_binary() -> Path | None:
    """The ``llama-server`` to run, if one is there: ``$TOOLFOLD_LLAMA_SERVER`` or the cached build."""
    override = os.environ.get(SERVER_ENV)
    if override:
        path = Path(override).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LocalSetupError(f"{SERVER_ENV}={override} is not an executable file")
        return path
    path = server_root() / binary_name()
    return path if path.is_file() else None


def binary_name() -> str:
    """The server's file name on this platform (CMake adds ``.exe`` on Windows)."""
    return "llama-server.exe" if sys.platform == "win32" else "llama-server"


def ensure_server_binary(progress: Progress) -> Path:
    """The ``llama-server`` binary, built first if this machine has none yet.

    Raises:
        LocalSetupError: A tool is missing or a step failed (with its log's tail).
    """
    found = built_binary()
    if found is not None:
        return found
    root = server_root()
    with locked(root.with_suffix(".lock"), progress, "building llama-server"):
        found = built_binary()  # another process may have built it while we waited
        if found is not None:
            return found
        return _build(root, progress)


def _build(root: Path, progress: Progress) -> Path:
    missing = [tool for tool in ("cmake", "ninja") if shutil.which(tool) is None]
    if not any(shutil.which(compiler) for compiler in ("c++", "g++", "clang++")):
        missing.append("a C++ compiler")
    if missing:
        raise LocalSetupError(
            "building llama-server needs cmake, ninja and a C++ compiler; missing: "
            + ", ".join(missing)
            + f" (or point {SERVER_ENV} at a llama-server you have)"
        )
    work = root / "work"
    source = work / "src"
    progress(
        f"building llama.cpp's llama-server (from llama-cpp-python {LLAMA_CPP_PYTHON} on PyPI) "
        f"into {root}: once per machine, about 7 minutes on 2 cores"
    )
    if not (source / "CMakeLists.txt").is_file():
        _fetch_source(work, source, progress)
    build = work / "build"
    progress("configuring (cmake)")
    _run(
        ["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja", *cmake_flags()],
        work / "configure.log",
        "cmake configure",
    )
    _compile(build, work / "compile.log", progress)
    built = build / "bin" / binary_name()
    if not built.is_file():
        raise LocalSetupError(
            f"the build of llama-server ended without making {built}; "
            f"its logs are in {work} (or point {SERVER_ENV} at a llama-server you have)"
        )
    binary = root / binary_name()
    partial = root / f"{binary_name()}.partial"
    shutil.copy2(built, partial)
    os.replace(partial, binary)  # appears whole or not at all
    shutil.rmtree(work, ignore_errors=True)
    progress(f"llama-server is ready: {binary}")
    return binary


def _fetch_source(work: Path, source: Path, progress: Progress) -> None:
    download = work / "sdist"
    progress(f"downloading the llama-cpp-python {LLAMA_CPP_PYTHON} source package (pip)")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--disable-pip-version-check",
            f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
            "-d",
            str(download),
        ],
        work / "download.log",
        "pip download",
    )
    archive = next(download.glob("*.tar.gz"))
    progress("unpacking the vendored llama.cpp")
    shutil.rmtree(source, ignore_errors=True)
    with tarfile.open(archive) as tar:
        members = []
        for member in tar.getmembers():
            if member.name.startswith(_VENDORED) and member.name != _VENDORED:
                member.name = member.name[len(_VENDORED) :]
                members.append(member)
        if hasattr(tarfile, "data_filter"):
            tar.extractall(source, members=members, filter="data")
        else:  # pragma: no cover - Python < 3.10.12 has no extraction filters
            tar.extractall(source, members=members)
    shutil.rmtree(download, ignore_errors=True)


def _compile(build: Path, log: Path, progress: Progress) -> None:
    command = ["cmake", "--build", str(build), "--target", "llama-server"]
    progress("compiling llama-server (progress every 10%)")
    reported = 0
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            done, total = _ninja_step(line)
            if total and done * 10 // total > reported:
                reported = done * 10 // total
                progress(f"compiling llama-server: {reported * 10}% ({done}/{total} steps)")
        code = process.wait()
    if code != 0:
        raise LocalSetupError(f"compiling llama-server failed (exit {code}):\n{_tail(log)}")


def _ninja_step(line: str) -> tuple[int, int]:
    # Ninja prints "[12/206] Building CXX object ..."
    if not line.startswith("["):
        return 0, 0
    head, _, _ = line[1:].partition("]")
    done, _, total = head.partition("/")
    if done.isdigit() and total.isdigit():
        return int(done), int(total)
    return 0, 0


def _run(command: list[str], log: Path, step: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        raise LocalSetupError(f"{step} failed (exit {code}):\n{_tail(log)}")


def _tail(log: Path, lines: int = 30) -> str:
    text = log.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(text[-lines:]) + f"\n(full log: {log})"
